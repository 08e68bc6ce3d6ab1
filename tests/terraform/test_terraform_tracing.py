"""Tracing in the deployment: the Cloud Trace API, the one trace role per function account,
TRACING / TRACE_SAMPLE_RATIO on every function, and the two variables' validations.

The validations are run by the real Terraform CLI on a copy of the two `variable` blocks
(a module without providers needs no `init` and no download), so what is tested is what
`terraform plan` refuses.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from shared.config import PRODUCTION_ENV_NAMES, Config, ConfigError
from tests.terraform.test_terraform_tools import _offline_env, _terraform
from tests.terraform.test_terraform_wiring import (
    FUNCTIONS,
    TERRAFORM,
    Module,
    _attr,
    _load_module,
    _strings,
)

TRACE_ROLE = "roles/cloudtrace.agent"
TRACE_VARIABLES = ("trace_sample_ratio", "tracing")


@pytest.fixture(scope="module")
def tf() -> Module:
    return _load_module()


# --- API and grants -----------------------------------------------------------------------


def test_the_cloud_trace_api_is_enabled_with_the_others(tf: Module) -> None:
    api = tf.resource("google_project_service", "api")
    assert _attr(api, "for_each") == "${var.enable_apis ? local.apis : toset([])}"
    expr = tf.locals["apis"]
    assert expr.startswith("${toset([") and expr.endswith("])}"), expr
    assert "cloudtrace.googleapis.com" in re.findall(r"'([a-z0-9.-]+)'", expr), expr


def test_each_function_account_may_write_spans_while_tracing_is_cloudtrace(tf: Module) -> None:
    grant = tf.resource("google_project_iam_member", "trace_writer")
    assert _attr(grant, "role") == TRACE_ROLE
    assert _attr(grant, "project") == "${var.project_id}"
    assert _attr(grant, "member") == "${google_service_account.function[each.key].member}"
    assert _attr(grant, "for_each") == (
        '${var.tracing == "cloudtrace" ? toset(keys(local.functions)) : toset([])}'
    )
    # keys(local.functions): one grant per function account, all three of them.
    assert set(tf.locals["functions"]) == set(FUNCTIONS)


def test_no_account_holds_any_other_trace_role(tf: Module) -> None:
    trace_grants = {
        f"{rtype}.{name}": _attr(body, "role")
        for (rtype, name), body in tf.resources.items()
        if "role" in body and str(_attr(body, "role")).startswith("roles/cloudtrace.")
    }
    assert trace_grants == {"google_project_iam_member.trace_writer": TRACE_ROLE}
    # Nor a trace permission through a custom role, nor a binding that replaces members.
    for rtype in (
        "google_project_iam_custom_role",
        "google_project_iam_binding",
        "google_project_iam_policy",
    ):
        assert not tf.of_type(rtype), rtype
    assert not [
        text
        for body in tf.resources.values()
        for text in _strings(body)
        if "cloudtrace.traces" in text
    ]


def test_functions_are_deployed_after_their_trace_grant(tf: Module) -> None:
    fn = tf.resource("google_cloudfunctions2_function", "function")
    assert "${google_project_iam_member.trace_writer}" in _attr(fn, "depends_on")


# --- environment --------------------------------------------------------------------------


@pytest.mark.parametrize("function", FUNCTIONS)
def test_tracing_settings_reach_every_function(tf: Module, function: str) -> None:
    assert {"TRACING", "TRACE_SAMPLE_RATIO"} <= set(PRODUCTION_ENV_NAMES[function])
    env = tf.locals["function_env"][function]
    assert env.get("TRACING") == "${var.tracing}", function
    assert env.get("TRACE_SAMPLE_RATIO") == "${tostring(var.trace_sample_ratio)}", function


def _allowed_tracing_modes() -> list[str]:
    text = (TERRAFORM / "variables.tf").read_text()
    found = re.search(r"contains\(\[([^\]]*)\], var\.tracing\)", text)
    assert found, "var.tracing has no contains([...], var.tracing) validation"
    return re.findall(r'"([^"]+)"', found.group(1))


def test_every_tracing_mode_terraform_accepts_is_one_the_code_accepts() -> None:
    modes = _allowed_tracing_modes()
    assert sorted(modes) == ["cloudtrace", "off"]
    for mode in modes:
        config = Config.from_env({"TRACING": mode, "TRACE_SAMPLE_RATIO": "0.1"})
        assert config.tracing == mode
    # "file" is the code's local mode; Terraform keeps it out of a deployment.
    assert Config.from_env({"TRACING": "file"}).tracing == "file"
    with pytest.raises(ConfigError):
        Config.from_env({"TRACING": "jaeger"})


# --- validations, by terraform itself -----------------------------------------------------


def _variable_blocks(names: tuple[str, ...]) -> str:
    """The `variable` blocks `names` as written in variables.tf (terraform fmt'd)."""
    text = (TERRAFORM / "variables.tf").read_text()
    blocks = []
    for name in names:
        found = re.search(rf'^variable "{name}" \{{\n.*?^\}}\n', text, flags=re.M | re.S)
        assert found, f"variables.tf has no variable {name!r}"
        blocks.append(found.group(0))
    return "\n".join(blocks)


@pytest.fixture(scope="module")
def variables_module(tmp_path_factory: pytest.TempPathFactory) -> Path:
    module = tmp_path_factory.mktemp("tracing-variables")
    (module / "main.tf").write_text(_variable_blocks(TRACE_VARIABLES))
    return module


def _plan(module: Path, tmp_path: Path, assignments: dict[str, str]) -> subprocess.CompletedProcess:
    command = [_terraform(), f"-chdir={module}", "plan", "-input=false", "-lock=false"]
    command += ["-no-color", *(f"-var={name}={value}" for name, value in assignments.items())]
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=60,
        env=_offline_env(tmp_path),
        check=False,
    )


# (name, -var assignments, the variable refused or None when accepted)
VALIDATION_CASES = (
    ("defaults are accepted", {}, None),
    ("tracing off is accepted", {"tracing": "off"}, None),
    ("tracing cloudtrace is accepted", {"tracing": "cloudtrace"}, None),
    ("tracing file is refused: ephemeral filesystem", {"tracing": "file"}, "tracing"),
    ("tracing with a typo is refused", {"tracing": "cloud-trace"}, "tracing"),
    ("tracing empty is refused", {"tracing": ""}, "tracing"),
    ("tracing in capitals is refused", {"tracing": "OFF"}, "tracing"),
    ("ratio 0 is accepted", {"trace_sample_ratio": "0"}, None),
    ("ratio 1 is accepted", {"trace_sample_ratio": "1"}, None),
    ("ratio 0.25 is accepted", {"trace_sample_ratio": "0.25"}, None),
    ("ratio above 1 is refused", {"trace_sample_ratio": "1.5"}, "trace_sample_ratio"),
    ("ratio below 0 is refused", {"trace_sample_ratio": "-0.1"}, "trace_sample_ratio"),
    ("a percentage is refused", {"trace_sample_ratio": "10"}, "trace_sample_ratio"),
)


@pytest.mark.parametrize(
    ("name", "assignments", "refused"), VALIDATION_CASES, ids=[c[0] for c in VALIDATION_CASES]
)
def test_variable_validations_as_terraform_applies_them(
    variables_module: Path,
    tmp_path: Path,
    name: str,
    assignments: dict[str, str],
    refused: str | None,
) -> None:
    result = _plan(variables_module, tmp_path, assignments)
    output = result.stdout + result.stderr
    if refused is None:
        assert result.returncode == 0, f"{name}:\n{output}"
        return
    assert result.returncode != 0, f"{name}: terraform accepted {assignments}"
    assert "Invalid value for variable" in output, f"{name}:\n{output}"
    assert f"var.{refused} is" in output, f"{name}:\n{output}"
