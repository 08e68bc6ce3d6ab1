"""Structural checks over the parsed Terraform in terraform/ (offline: no provider needed).

The installed `hcl2` module is checkov's fork (bc-python-hcl2): every attribute value is
wrapped in a one-item list, nested blocks are lists of dicts, literal maps inside `locals`
are plain dicts and expressions are `${...}` strings. `_attr` and `_blocks` hide that.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hcl2
import pytest

from shared.config import PRODUCTION_ENV_NAMES, Config

REPO = Path(__file__).resolve().parents[2]
TERRAFORM = REPO / "terraform"
FUNCTIONS = ("ingress", "worker", "reconcile")
SECRET_NAMES = frozenset(
    {
        "GITHUB_WEBHOOK_SECRETS",
        "GEMINI_WEBHOOK_SECRETS",
        "ENVELOPE_KEYS",
        "GEMINI_API_KEY",
        "GITHUB_TOKEN",
        "GITHUB_APP_PRIVATE_KEY",
    }
)
PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
INVOKER_ROLES = ("roles/run.invoker", "roles/cloudfunctions.invoker")


@dataclass
class Module:
    """Every top-level block of terraform/*.tf, keyed for lookup."""

    resources: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    data: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    locals: dict[str, Any] = field(default_factory=dict)
    variables: dict[str, dict[str, Any]] = field(default_factory=dict)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def resource(self, rtype: str, name: str) -> dict[str, Any]:
        assert (rtype, name) in self.resources, f"terraform/ has no {rtype}.{name}"
        return self.resources[(rtype, name)]

    def of_type(self, rtype: str) -> dict[str, dict[str, Any]]:
        return {name: body for (t, name), body in self.resources.items() if t == rtype}


def _attr(body: dict[str, Any], name: str) -> Any:
    """The value of attribute `name` (unwrapped from the parser's one-item list)."""
    assert name in body, f"missing attribute {name!r} in block starting {list(body)[:4]}"
    value = body[name]
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def _blocks(body: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return list(body.get(name, []))


def _block(body: dict[str, Any], name: str) -> dict[str, Any]:
    found = _blocks(body, name)
    assert len(found) == 1, f"expected exactly one {name!r} block, found {len(found)}"
    return found[0]


def _dynamic(body: dict[str, Any], name: str) -> dict[str, Any]:
    for dyn in _blocks(body, "dynamic"):
        if name in dyn:
            return dyn[name]
    raise AssertionError(f"no dynamic {name!r} block")


def _check_parser_shape() -> None:
    probe = hcl2.loads('a "b" {\n  c = "d"\n}\n')
    if probe.get("a", [{}])[0].get("b", {}).get("c") != ["d"]:
        pytest.fail(
            "the installed `hcl2` module is not checkov's bc-python-hcl2 (python-hcl2 and "
            "bc-python-hcl2 both install a top-level `hcl2`; the last installed wins). "
            f"Probe parsed as {probe!r}"
        )


def _load_module() -> Module:
    _check_parser_shape()
    module = Module()
    files = sorted(TERRAFORM.glob("*.tf"))
    assert files, f"no .tf files in {TERRAFORM}"
    for path in files:
        try:
            parsed = hcl2.loads(path.read_text())
        except Exception as exc:
            pytest.fail(f"{path} does not parse as HCL: {exc}")
        for entry in parsed.get("resource", []):
            for rtype, named in entry.items():
                for name, body in named.items():
                    module.resources[(rtype, name)] = body
        for entry in parsed.get("data", []):
            for dtype, named in entry.items():
                for name, body in named.items():
                    module.data[(dtype, name)] = body
        for entry in parsed.get("locals", []):
            for name, value in entry.items():
                if not name.startswith("__"):
                    module.locals[name] = value[0] if isinstance(value, list) else value
        for entry in parsed.get("variable", []):
            module.variables.update(entry)
        for entry in parsed.get("output", []):
            module.outputs.update(entry)
    return module


@pytest.fixture(scope="module")
def tf() -> Module:
    return _load_module()


def _template(value: str) -> str:
    """A string template as written (the parser wraps some as `${"..."}`)."""
    if value.startswith('${"') and value.endswith('"}'):
        return value[3:-2]
    return value


def _strings(value: Any) -> Iterator[str]:
    """Every string anywhere inside a parsed value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _render(template: str, refs: dict[str, str]) -> str:
    """Substitute `${ref}` interpolations; an unknown reference is a test failure."""

    def sub(match: re.Match[str]) -> str:
        ref = match.group(1)
        assert ref in refs, f"unexpected reference ${{{ref}}} in {template!r}"
        return refs[ref]

    return re.sub(r"\$\{([^{}]+)\}", sub, template)


def _function_secrets(tf: Module) -> dict[str, set[str]]:
    """Function => secret env var names it receives (GITHUB_TOKEN counted as enabled)."""
    secrets = tf.locals["secrets"]
    return {
        fn: {name for name, spec in secrets.items() if fn in spec["readers"]} for fn in FUNCTIONS
    }


def _function_urls(tf: Module) -> dict[str, str]:
    """Evaluate local.function_names / local.function_urls for a sample project."""
    names_expr = tf.locals["function_names"]
    urls_expr = tf.locals["function_urls"]
    name_tpl = re.search(r'=> "(.*)"\}\}$', names_expr)
    url_tpl = re.search(r'=> "(.*)"\}\}$', urls_expr)
    assert name_tpl and "in local.functions" in names_expr, names_expr
    assert url_tpl and "in local.function_names" in urls_expr, urls_expr
    refs = {"var.name_prefix": "hookledger", "var.region": "europe-west1", "var.project_id": "p-1"}
    urls = {}
    for key in tf.locals["functions"]:
        name = _render(name_tpl.group(1), {**refs, "key": key})
        urls[key] = _render(url_tpl.group(1), {**refs, "name": name})
    return urls


# --- functions ---------------------------------------------------------------------------


def test_three_gen2_functions_with_their_entry_points_and_own_accounts(tf: Module) -> None:
    assert set(tf.locals["functions"]) == set(FUNCTIONS)
    fn = tf.resource("google_cloudfunctions2_function", "function")
    assert _attr(fn, "for_each") == "${local.functions}"
    build = _block(fn, "build_config")
    # The entry point is the map key: ingress, worker, reconcile in functions/main.py.
    assert _attr(build, "entry_point") == "${each.key}"
    assert _attr(build, "runtime") == "${var.runtime}"
    runtimes = re.findall(r"python3(\d+)", json.dumps(tf.variables["runtime"]))
    assert runtimes and all(int(minor) >= 11 for minor in runtimes), runtimes
    assert _attr(tf.variables["runtime"], "default") == "python312"
    service = _block(fn, "service_config")
    assert (
        _attr(service, "service_account_email")
        == "${google_service_account.function[each.key].email}"
    )
    assert (
        _attr(tf.resource("google_service_account", "function"), "for_each") == "${local.functions}"
    )
    sizing = {
        "available_memory": "memory",
        "timeout_seconds": "timeout_seconds",
        "max_instance_request_concurrency": "concurrency",
    }
    for attribute, field_name in sizing.items():
        assert _attr(service, attribute) == f"${{each.value.sizing.{field_name}}}", attribute
    for key in FUNCTIONS:
        assert tf.locals["functions"][key]["sizing"] == f"${{var.{key}_function}}", key


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_production_env_name_is_set_on_the_function_that_reads_it(
    tf: Module, function: str
) -> None:
    fn = tf.resource("google_cloudfunctions2_function", "function")
    service = _block(fn, "service_config")
    # The apps' environment first: the core's own names win (terraform/functions.tf).
    assert (
        _attr(service, "environment_variables")
        == "${merge(local.app_env,local.function_env[each.key])}"
    )
    secret_env = _dynamic(service, "secret_environment_variables")
    assert _attr(secret_env, "for_each") == "${local.function_secrets[each.key]}"
    content = _block(secret_env, "content")
    assert _attr(content, "key") == "${secret_environment_variables.value}"

    plain = set(tf.locals["function_env"][function]) | _app_env_names(tf)
    secret = _function_secrets(tf)[function]
    assert not plain & secret, f"{function}: set both plain and secret: {plain & secret}"
    missing = set(PRODUCTION_ENV_NAMES[function]) - plain - secret
    assert not missing, f"{function} reads {sorted(missing)} but terraform does not set them"


def _app_env_names(tf: Module) -> set[str]:
    """The names local.app_env sets itself, on every function (HOOKLEDGER_APPS)."""
    expr = tf.locals["app_env"]
    assert expr.startswith("${merge(var.app_settings,{"), expr
    return set(re.findall(r"'([A-Z][A-Z0-9_]+)': ", expr))


def _optional_default(tf: Module, variable: str, field_name: str) -> float:
    """The default of `field_name` in variable `variable`'s `optional(number, N)` type."""
    declared = json.dumps(_attr(tf.variables[variable], "type"))
    found = re.search(rf"'{field_name}': '\$\{{optional\(number,([0-9.]+)\)\}}'", declared)
    assert found, f"var.{variable} has no optional number {field_name}: {declared[:200]}"
    return float(found.group(1))


def test_worker_timeout_and_dispatch_deadline_match_the_code_and_stay_ordered(
    tf: Module,
) -> None:
    timeout = _optional_default(tf, "worker_function", "timeout_seconds")
    deadline = _optional_default(tf, "settings", "task_dispatch_deadline_s")
    defaults = Config()
    assert (timeout, deadline) == (defaults.worker_timeout_s, defaults.task_dispatch_deadline_s)
    assert deadline < timeout, "Cloud Tasks must give up on an attempt before the timeout"
    wired = {
        "WORKER_TIMEOUT_S": "${tostring(var.worker_function.timeout_seconds)}",
        "TASK_DISPATCH_DEADLINE_S": "${tostring(var.settings.task_dispatch_deadline_s)}",
    }
    for function in FUNCTIONS:
        env = tf.locals["function_env"][function]
        for name, value in wired.items():
            assert env.get(name) == value, f"{function}: {name} = {env.get(name)!r}"
    fn = tf.resource("google_cloudfunctions2_function", "function")
    conditions = [
        _attr(check, "condition") for check in _blocks(_block(fn, "lifecycle"), "precondition")
    ]
    assert (
        "${var.settings.task_dispatch_deadline_s < var.worker_function.timeout_seconds}"
        in conditions
    ), conditions


def test_reconcile_timeout_holds_its_budget_drain_and_outbox_sweep(tf: Module) -> None:
    from shared.reconcile.settings import DRAIN_S, SWEEP_BUDGET_S, ReconcileSettings

    fn = tf.resource("google_cloudfunctions2_function", "function")
    conditions = [
        _attr(check, "condition") for check in _blocks(_block(fn, "lifecycle"), "precondition")
    ]
    slack = f"{DRAIN_S:g} + {SWEEP_BUDGET_S:g}"
    expected = (
        f"${{var.settings.reconcile_budget_s + {slack} < var.reconcile_function.timeout_seconds}}"
    )
    assert expected.replace(" + ", "+") in [c.replace(" + ", "+") for c in conditions], conditions
    budget = _optional_default(tf, "settings", "reconcile_budget_s")
    timeout = _optional_default(tf, "reconcile_function", "timeout_seconds")
    assert budget == ReconcileSettings().budget_s
    assert budget + DRAIN_S + SWEEP_BUDGET_S < timeout


# --- defaults: Terraform's agree with Config ----------------------------------------------

# Every setting Terraform passes to a function: Terraform's name (`variable.field`, or a
# top-level `variable`), the environment variable it sets, and the `Config` field that
# reads it. `Config`'s default is the one source (shared/config.py); Terraform restates
# it, and this table is how a drift fails the tests.
TERRAFORM_SETTINGS: tuple[tuple[str, str, str], ...] = (
    ("github_app_id", "GITHUB_APP_ID", "github_app_id"),
    ("settings.github_api_version", "GITHUB_API_VERSION", "github_api_version"),
    ("queue.name", "TASKS_QUEUE", "queue"),
    ("region", "TASKS_LOCATION", "location"),
    ("settings.gemini_webhook_audience", "GEMINI_WEBHOOK_AUDIENCE", "gemini_webhook_audience"),
    ("settings.gemini_webhook_issuer", "GEMINI_WEBHOOK_ISSUER", "gemini_webhook_issuer"),
    ("settings.max_body_bytes", "MAX_BODY_BYTES", "max_body_bytes"),
    ("settings.max_gemini_body_bytes", "MAX_GEMINI_BODY_BYTES", "max_gemini_body_bytes"),
    ("settings.reconcile_backoff_cap_s", "RECONCILE_BACKOFF_CAP_S", "reconcile_backoff_cap_s"),
    (
        "settings.reconcile_backoff_first_s",
        "RECONCILE_BACKOFF_FIRST_S",
        "reconcile_backoff_first_s",
    ),
    ("settings.reconcile_backoff_jitter", "RECONCILE_BACKOFF_JITTER", "reconcile_backoff_jitter"),
    ("settings.reconcile_budget_s", "RECONCILE_BUDGET_S", "reconcile_budget_s"),
    ("settings.reconcile_concurrency", "RECONCILE_CONCURRENCY", "reconcile_concurrency"),
    (
        "settings.reconcile_fanout_threshold",
        "RECONCILE_FANOUT_THRESHOLD",
        "reconcile_fanout_threshold",
    ),
    ("settings.reconcile_grace_s", "RECONCILE_GRACE_S", "reconcile_grace_s"),
    ("settings.github_sweep_grace_s", "GITHUB_SWEEP_GRACE_S", "github_sweep_grace_s"),
    ("settings.github_sweep_budget_s", "GITHUB_SWEEP_BUDGET_S", "github_sweep_budget_s"),
    ("settings.github_sweep_full_pages", "GITHUB_SWEEP_FULL_PAGES", "github_sweep_full_pages"),
    ("settings.retention_days", "RETENTION_DAYS", "retention_days"),
    ("settings.signature_tolerance_s", "SIGNATURE_TOLERANCE_S", "signature_tolerance_s"),
    ("settings.stuck_after_s", "STUCK_AFTER_S", "stuck_after_s"),
    ("settings.task_dispatch_deadline_s", "TASK_DISPATCH_DEADLINE_S", "task_dispatch_deadline_s"),
    ("settings.worker_max_retries", "WORKER_MAX_RETRIES", "worker_max_retries"),
    ("trace_sample_ratio", "TRACE_SAMPLE_RATIO", "trace_sample_ratio"),
    ("worker_function.timeout_seconds", "WORKER_TIMEOUT_S", "worker_timeout_s"),
    ("worker_function.concurrency", "THREADS", "worker_concurrency"),
)
# The review app's settings Terraform passes from var.review: Terraform's name, the
# environment variable, whose default is the app's `Setting` (terraform/app_settings.json,
# generated from apps/review and checked by tests/terraform/test_terraform_apps.py).
REVIEW_APP_SETTINGS: tuple[tuple[str, str], ...] = (
    ("review.github_comments", "GITHUB_COMMENTS"),
    ("review.model", "REVIEW_MODEL"),
    ("review.path", "REVIEW_PATH"),
    ("review.repositories", "GITHUB_REPOSITORIES"),
)
# Settings Terraform passes whose default is not Config's, each pinned to its value and why.
TERRAFORM_OWN_DEFAULTS: dict[str, tuple[Any, str]] = {
    "review.console_url": (
        "",
        "no console is deployed: a check run links to one only when its URL is given",
    ),
    "review.github_check_runs": (
        True,
        "Config's rule: on whenever a GitHub App is configured (github_app_id), else off",
    ),
    "project_id": (None, "required: the deployment's project has no default"),
    "settings.gemini_jwks_url": (
        "",
        "dynamic webhooks start off: turning them on needs gemini_webhook_audience too",
    ),
    "tracing": (
        "cloudtrace",
        "deployed functions trace to Cloud Trace; Config's off is the local default",
    ),
}


def _variable_default(tf: Module, name: str) -> Any:
    """The default of Terraform setting `name`: `variable.field` (an `optional(type, value)`
    in the variable's object type) or a top-level `variable`; None when it has none."""
    variable, _, field_name = name.partition(".")
    assert variable in tf.variables, f"terraform/variables.tf has no variable {variable!r}"
    body = tf.variables[variable]
    if not field_name:
        return _attr(body, "default") if "default" in body else None
    declared = str(_attr(body, "type"))
    found = re.search(rf"'{field_name}': '\$\{{optional\(([a-z()]+),(.*?)\)\}}'", declared)
    assert found, f"var.{variable} has no optional {field_name}: {declared[:200]}"
    kind, raw = found.groups()
    if kind == "number":
        return float(raw)
    if kind == "bool":
        assert raw in ("True", "False"), raw
        return raw == "True"
    if kind == "string":
        return json.loads(raw)
    assert kind == "list(string)", f"var.{name}: unexpected type {kind}"
    return tuple(json.loads(raw.replace("'", '"')))


def _references(value: str) -> set[str]:
    """The `var.x` / `var.x.y` names an expression reads."""
    return set(re.findall(r"\bvar\.([a-z_]+(?:\.[a-z_]+)?)", value))


def test_every_setting_terraform_passes_is_in_the_defaults_table(tf: Module) -> None:
    mapped = {name for name, _, _ in TERRAFORM_SETTINGS} | {n for n, _ in REVIEW_APP_SETTINGS}
    read = {
        ref
        for env in tf.locals["function_env"].values()
        for value in env.values()
        for ref in _references(str(value))
    }
    unmapped = read - mapped - set(TERRAFORM_OWN_DEFAULTS)
    assert not unmapped, f"function_env reads {sorted(unmapped)}: add them to TERRAFORM_SETTINGS"
    declared = str(_attr(tf.variables["settings"], "type"))
    fields = {f"settings.{name}" for name in re.findall(r"'(\w+)': '\$\{optional", declared)}
    unmapped = fields - mapped - set(TERRAFORM_OWN_DEFAULTS)
    assert not unmapped, f"var.settings declares {sorted(unmapped)} outside TERRAFORM_SETTINGS"


@pytest.mark.parametrize(("name", "env_name", "config_field"), TERRAFORM_SETTINGS)
def test_terraform_defaults_are_configs(
    tf: Module, name: str, env_name: str, config_field: str
) -> None:
    ours = getattr(Config(), config_field)
    theirs = _variable_default(tf, name)
    if isinstance(ours, bool) or not isinstance(ours, (int, float)):
        assert theirs == ours, f"var.{name} defaults to {theirs!r}, Config.{config_field} {ours!r}"
    else:
        assert theirs == float(ours), f"var.{name} = {theirs:g}, Config.{config_field} = {ours:g}"
    # The variable reaches the field: each function setting `env_name` sets it from `name`.
    setters = {
        fn: env[env_name] for fn, env in tf.locals["function_env"].items() if env_name in env
    }
    assert setters, f"no function is given {env_name}"
    for function, value in setters.items():
        assert _references(str(value)) == {name}, f"{function}: {env_name} = {value!r}"


@pytest.mark.parametrize(("name", "env_name"), REVIEW_APP_SETTINGS)
def test_terraform_review_defaults_are_the_review_apps(
    tf: Module, name: str, env_name: str
) -> None:
    catalogue = json.loads((TERRAFORM / "app_settings.json").read_text())["settings"]
    assert env_name in catalogue, f"the review app declares no {env_name} (app_settings.json)"
    setting = catalogue[env_name]
    assert setting["app"] == "review", setting
    ours = setting["default"]
    theirs = _variable_default(tf, name)
    expected = tuple(ours) if setting["type"] == "list" else ours
    assert theirs == expected, f"var.{name} defaults to {theirs!r}, the app's {env_name} {ours!r}"
    setters = {
        fn: env[env_name] for fn, env in tf.locals["function_env"].items() if env_name in env
    }
    assert setters, f"no function is given {env_name}"
    for function, value in setters.items():
        assert _references(str(value)) == {name}, f"{function}: {env_name} = {value!r}"


@pytest.mark.parametrize("name", sorted(TERRAFORM_OWN_DEFAULTS))
def test_terraform_own_defaults_are_the_ones_written_down(tf: Module, name: str) -> None:
    expected, why = TERRAFORM_OWN_DEFAULTS[name]
    assert _variable_default(tf, name) == expected, why


def test_function_secrets_follow_the_readers_declared_in_local_secrets(tf: Module) -> None:
    expr = tf.locals["function_secrets"]
    assert "for fn , _ in local.functions" in expr, expr
    assert "in local.enabled_secrets : name if contains(secret.readers,fn)" in expr, expr
    enabled = tf.locals["enabled_secrets"]
    # Only the optional GitHub token and the App's key may be left out, each by its variable.
    assert 'if name != "GITHUB_TOKEN" || var.github_token_enabled' in enabled, enabled
    assert _attr(tf.variables["github_token_enabled"], "default") is False
    assert 'name != "GITHUB_APP_PRIVATE_KEY" || var.github_app_id != ""' in enabled, enabled
    assert _attr(tf.variables["github_app_id"], "default") == ""


def test_urls_are_deterministic_and_wired_as_oidc_audiences(tf: Module) -> None:
    urls = _function_urls(tf)
    for key in FUNCTIONS:
        assert urls[key] == f"https://europe-west1-p-1.cloudfunctions.net/hookledger-{key}"
    fn = tf.resource("google_cloudfunctions2_function", "function")
    assert _attr(fn, "name") == "${local.function_names[each.key]}"
    env = tf.locals["function_env"]
    assert env["worker"]["OIDC_AUDIENCE"] == "${local.function_urls.worker}"
    assert env["reconcile"]["OIDC_AUDIENCE"] == "${local.function_urls.reconcile}"
    for key in ("ingress", "reconcile"):
        assert env[key]["WORKER_URL"] == "${local.function_urls.worker}", key
        assert env[key]["TASKS_LOCATION"] == "${var.region}", key
        assert env[key]["TASKS_QUEUE"] == "${var.queue.name}", key
    for key in FUNCTIONS:
        assert env[key]["GOOGLE_CLOUD_PROJECT"] == "${var.project_id}", key
    queue = tf.resource("google_cloud_tasks_queue", "deliveries")
    assert _attr(queue, "name") == "${var.queue.name}"


# --- who may call what --------------------------------------------------------------------


def test_only_ingress_is_public(tf: Module) -> None:
    public = {
        (rtype, name)
        for (rtype, name), body in tf.resources.items()
        if any(member in text for text in _strings(body) for member in PUBLIC_MEMBERS)
    }
    assert public == {("google_cloud_run_v2_service_iam_member", "ingress_public")}, public
    grant = tf.resource("google_cloud_run_v2_service_iam_member", "ingress_public")
    assert _attr(grant, "role") == "roles/run.invoker"
    assert '["ingress"]' in _attr(grant, "name")
    settings = {key: spec["ingress_settings"] for key, spec in tf.locals["functions"].items()}
    assert settings == {
        "ingress": "ALLOW_ALL",
        "worker": "ALLOW_INTERNAL_ONLY",
        "reconcile": "ALLOW_INTERNAL_ONLY",
    }
    service = _block(tf.resource("google_cloudfunctions2_function", "function"), "service_config")
    assert _attr(service, "ingress_settings") == "${each.value.ingress_settings}"


def _invokers(tf: Module) -> dict[str, set[str]]:
    """Function => members holding an invoker role on it."""
    found: dict[str, set[str]] = {}
    for (rtype, name), body in tf.resources.items():
        if "role" not in body or _attr(body, "role") not in INVOKER_ROLES:
            continue
        assert rtype in {
            "google_cloud_run_v2_service_iam_member",
            "google_cloud_run_service_iam_member",
        }, f"{rtype}.{name}: invoker roles are granted per service, never project-wide"
        target = re.search(r'function\["(\w+)"\]', str(_attr(body, "name")))
        assert target, f"{rtype}.{name} does not target one function"
        found.setdefault(target.group(1), set()).add(_attr(body, "member"))
    return found


def test_each_private_function_has_exactly_one_invoker(tf: Module) -> None:
    assert _invokers(tf) == {
        "ingress": {"allUsers"},
        "worker": {"${google_service_account.tasks_invoker.member}"},
        "reconcile": {"${google_service_account.scheduler_invoker.member}"},
    }


def test_the_queue_oidc_account_is_the_one_that_may_invoke_the_worker(tf: Module) -> None:
    env = tf.locals["function_env"]
    # ingress and reconcile sign tasks as it; the worker pins the token's email to it.
    for key in FUNCTIONS:
        assert env[key]["TASKS_SERVICE_ACCOUNT"] == "${google_service_account.tasks_invoker.email}"
    assert _invokers(tf)["worker"] == {"${google_service_account.tasks_invoker.member}"}
    # Enqueuers may create tasks on this queue and sign tokens as this one account only.
    assert re.findall(r"'(\w+)'", tf.locals["enqueuers"]) == ["ingress", "reconcile"]
    enqueue = tf.resource("google_cloud_tasks_queue_iam_member", "enqueuer")
    assert _attr(enqueue, "role") == "roles/cloudtasks.enqueuer"
    assert _attr(enqueue, "name") == "${google_cloud_tasks_queue.deliveries.name}"
    assert _attr(enqueue, "member") == "${google_service_account.function[each.key].member}"
    act_as = tf.resource("google_service_account_iam_member", "enqueuer_acts_as_tasks_invoker")
    assert _attr(act_as, "role") == "roles/iam.serviceAccountUser"
    assert _attr(act_as, "service_account_id") == "${google_service_account.tasks_invoker.name}"
    assert _attr(act_as, "for_each") == _attr(enqueue, "for_each") == "${local.enqueuers}"
    assert list(tf.of_type("google_service_account_iam_member")) == [
        "enqueuer_acts_as_tasks_invoker"
    ]


def test_queue_retry_and_rate_limits_come_from_variables(tf: Module) -> None:
    queue = tf.resource("google_cloud_tasks_queue", "deliveries")
    retry = _block(queue, "retry_config")
    for name in ("max_attempts", "min_backoff", "max_backoff", "max_doublings"):
        assert _attr(retry, name) == f"${{var.queue.{name}}}", name
    rates = _block(queue, "rate_limits")
    for name in ("max_dispatches_per_second", "max_concurrent_dispatches"):
        assert _attr(rates, name) == f"${{var.queue.{name}}}", name


def test_scheduler_calls_reconcile_with_an_oidc_token_for_the_reconcile_url(tf: Module) -> None:
    job = tf.resource("google_cloud_scheduler_job", "reconcile")
    target = _block(job, "http_target")
    token = _block(target, "oidc_token")
    assert _attr(target, "uri") == "${local.function_urls.reconcile}"
    assert _attr(token, "audience") == "${local.function_urls.reconcile}"
    assert _attr(token, "service_account_email") == (
        "${google_service_account.scheduler_invoker.email}"
    )
    assert _function_urls(tf)["reconcile"].endswith("/hookledger-reconcile")
    assert _attr(job, "schedule") == "${var.scheduler.schedule}"
    assert "optional(string,'*/5 * * * *')" in _attr(tf.variables["scheduler"], "type").replace(
        '"', "'"
    )


def test_no_project_wide_grant_of_secrets_tasks_or_run(tf: Module) -> None:
    for name, body in tf.of_type("google_project_iam_member").items():
        role = _attr(body, "role")
        assert role.split("/")[1].split(".")[0] not in {
            "secretmanager",
            "cloudtasks",
            "run",
            "iam",
            "cloudfunctions",
            "owner",
            "editor",
        }, f"google_project_iam_member.{name} grants {role} project-wide"
    for rtype in ("google_project_iam_binding", "google_project_iam_policy"):
        assert not tf.of_type(rtype), f"{rtype} replaces grants made outside terraform"


# --- secrets ------------------------------------------------------------------------------


def test_each_function_reads_only_the_secrets_it_needs(tf: Module) -> None:
    secrets = tf.locals["secrets"]
    assert set(secrets) == SECRET_NAMES
    needed = {fn: set(PRODUCTION_ENV_NAMES[fn]) & SECRET_NAMES for fn in FUNCTIONS}
    assert _function_secrets(tf) == needed
    grant = tf.resource("google_secret_manager_secret_iam_member", "reader")
    assert _attr(grant, "for_each") == "${local.secret_grants}"
    assert _attr(grant, "role") == "roles/secretmanager.secretAccessor"
    assert _attr(grant, "secret_id") == (
        "${google_secret_manager_secret.secret[each.value.secret].secret_id}"
    )
    assert (
        _attr(grant, "member") == "${google_service_account.function[each.value.function].member}"
    )
    grants = tf.locals["secret_grants"]
    assert "for name , secret in local.enabled_secrets" in grants
    assert "for fn in secret.readers" in grants


def test_secret_values_never_enter_terraform_state(tf: Module) -> None:
    assert not tf.of_type("google_secret_manager_secret_version")
    assert not [key for key in tf.data if key[0] == "google_secret_manager_secret_version"]
    secret = tf.resource("google_secret_manager_secret", "secret")
    assert _attr(secret, "for_each") == "${local.enabled_secrets}"
    content = _block(
        _dynamic(
            _block(tf.resource("google_cloudfunctions2_function", "function"), "service_config"),
            "secret_environment_variables",
        ),
        "content",
    )
    assert _attr(content, "secret") == (
        "${google_secret_manager_secret.secret[secret_environment_variables.value].secret_id}"
    )


# --- firestore ----------------------------------------------------------------------------


def test_ttl_and_indexes_are_deployed_from_firestore_indexes_json(tf: Module) -> None:
    spec = json.loads((TERRAFORM / "firestore_indexes.json").read_text())
    ttl = {(entry["collectionGroup"], entry["field"]) for entry in spec["ttl"]}
    assert {("operations", "expire_at"), ("deliveries", "expire_at")} <= ttl
    assert spec["indexes"], "firestore_indexes.json lists no composite index"
    assert tf.locals["firestore_spec"] == (
        '${jsondecode(file("${path.module}/firestore_indexes.json"))}'
    )
    assert "for ttl in local.firestore_spec.ttl" in tf.locals["firestore_ttl_fields"]
    assert "for index in local.firestore_spec.indexes" in tf.locals["firestore_indexes"]

    field_res = tf.resource("google_firestore_field", "ttl")
    assert _attr(field_res, "for_each") == "${local.firestore_ttl_fields}"
    assert _attr(field_res, "collection") == "${each.value.collectionGroup}"
    assert _attr(field_res, "field") == "${each.value.field}"
    assert _blocks(field_res, "ttl_config"), "google_firestore_field.ttl has no ttl_config"

    index = tf.resource("google_firestore_index", "composite")
    assert _attr(index, "for_each") == "${local.firestore_indexes}"
    assert _attr(index, "collection") == "${each.value.collectionGroup}"
    fields = _dynamic(index, "fields")
    assert _attr(fields, "for_each") == "${each.value.fields}"
    content = _block(fields, "content")
    assert _attr(content, "field_path") == "${fields.value.fieldPath}"
    assert _attr(content, "order") == "${fields.value.order}"


def test_unindexed_fields_are_deployed_from_firestore_indexes_json_without_indexes(
    tf: Module,
) -> None:
    assert "for group in local.firestore_spec.unindexed" in tf.locals["firestore_unindexed_fields"]
    unindexed = tf.resource("google_firestore_field", "unindexed")
    ttl = tf.resource("google_firestore_field", "ttl")
    assert _attr(unindexed, "for_each") == "${local.firestore_unindexed_fields}"
    assert _attr(unindexed, "collection") == "${each.value.collectionGroup}"
    assert _attr(unindexed, "field") == "${each.value.field}"
    # Each in the database of its collection, as the TTL fields are.
    assert _attr(unindexed, "database") == _attr(ttl, "database")
    # An empty index_config turns every single-field index of the field off.
    for resource in (unindexed, ttl):
        assert _block(resource, "index_config") == {}
    assert not _blocks(unindexed, "ttl_config")


def test_index_keys_are_unique_for_every_index_in_the_json() -> None:
    spec = json.loads((TERRAFORM / "firestore_indexes.json").read_text())
    # Mirrors local.firestore_indexes' key: a duplicate would fail the for expression.
    keys = [
        f"{i['collectionGroup']}:" + ",".join(f"{f['fieldPath']}.{f['order']}" for f in i["fields"])
        for i in spec["indexes"]
    ]
    assert len(keys) == len(set(keys)), keys
    for index in spec["indexes"]:
        assert len(index["fields"]) >= 2, f"{index} is not composite"
        assert {f["order"] for f in index["fields"]} <= {"ASCENDING", "DESCENDING"}, index


def test_database_protection_is_configurable(tf: Module) -> None:
    db = tf.resource("google_firestore_database", "main")
    assert _attr(db, "type") == "FIRESTORE_NATIVE"
    assert "var.firestore.point_in_time_recovery" in _attr(db, "point_in_time_recovery_enablement")
    assert "var.firestore.delete_protection" in _attr(db, "delete_protection_state")


# --- source archive -----------------------------------------------------------------------


def _archive_rules(tf: Module) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """(directory, glob, archive-name prefix) per fileset, and literal name => path entries."""
    expr = tf.locals["source_files"]
    globs = [
        (m.group(1), m.group(2), m.group(3) or "")
        for m in re.finditer(
            r'for f in fileset\("\$\{local\.repo_root\}/([^"]+)","([^"]+)"\) : '
            r'(?:"([^"$]*)\$\{f\}"|f) =>',
            expr,
        )
    ]
    literals = dict(re.findall(r"'([^']+)': '\$\{local\.repo_root\}/([^']+)'", expr))
    return globs, literals


def test_archive_holds_functions_shared_and_the_loaded_apps_only(tf: Module) -> None:
    expr = tf.locals["source_files"]
    globs, literals = _archive_rules(tf)
    assert expr.count("fileset(") == len(globs) == 3, expr
    # The apps' files come from local.app_files alone: the packages of the `apps.` modules
    # var.apps names (evaluated by the CLI in tests/terraform/test_terraform_apps.py).
    assert expr.endswith(',{for f in local.app_files : f => "${local.repo_root}/${f}"})}'), expr
    app_files = tf.locals["app_files"]
    assert app_files.count("fileset(") == 2, app_files
    assert 'fileset(local.repo_root,"apps/__init__.py") : f if length(local.app_packages) > 0' in (
        app_files
    )
    assert (
        '[for f in fileset("${local.repo_root}/apps/${name}","**/*.py") : "apps/${name}/${f}"'
        ' if !startswith(f,"tests/")]' in app_files
    )  # an app's own tests (the test kit's) are never deployed
    assert tf.locals["app_packages"] == (
        '${distinct([for module in var.apps : split(".",module)[1] if startswith(module,"apps.")])}'
    )
    roots = {directory for directory, _, _ in globs} | {p.split("/")[0] for p in literals.values()}
    assert roots == {"functions", "shared"}, roots
    assert literals == {"requirements.txt": "functions/requirements.txt"}
    assert tf.locals["repo_root"] == '${abspath("${path.module}/..")}'

    by_dir: dict[str, list[tuple[str, str]]] = {}
    for directory, pattern, prefix in globs:
        by_dir.setdefault(directory, []).append((pattern, prefix))
    [(pattern, prefix)] = by_dir["functions"]
    assert prefix == "" and fnmatch.fnmatch("main.py", pattern), "main.py not at archive root"
    # Only the top level of functions/: a subdirectory (tests, fixtures) is never deployed.
    assert pattern == "*.py", pattern
    # The shared package's modules, and the data it reads (GitHub's operation catalog).
    assert sorted(by_dir["shared"]) == [("**/*.json", "shared/"), ("**/*.py", "shared/")]

    # Evaluate the rules against the checkout, as terraform's fileset() would.
    names = set(literals)
    for directory, pattern, prefix in globs:
        for path in (REPO / directory).glob(pattern):
            if path.is_file():
                names.add(prefix + path.relative_to(REPO / directory).as_posix())
    assert {"requirements.txt", "shared/__init__.py", "shared/config.py"} <= names, names
    assert "shared/github/operations.json" in names, "the functions need GitHub's catalog"
    not_deployed = {"hookledger", "local", "tests", "bench", "terraform", "docs"}
    leaked = sorted(n for n in names if n.split("/")[0] in not_deployed)
    assert not leaked, f"deployed archive would contain {leaked}"
    # Besides the apps: every entry is main.py's neighbour at the root or inside shared/.
    stray = sorted(n for n in names if "/" in n and not n.startswith("shared/"))
    assert not stray, f"deployed archive would contain {stray}"
    assert not [n for n in names if n.startswith("shared/cli/")], "the CLI belongs in hookledger/"
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_archive_object_name_changes_with_the_source(tf: Module) -> None:
    archive = tf.data[("archive_file", "functions_source")]
    dyn = _dynamic(archive, "source")
    assert _attr(dyn, "for_each") == "${local.source_files}"
    content = _block(dyn, "content")
    assert _attr(content, "filename") == "${source.key}"
    assert "source_dir" not in archive, "a source_dir would archive the whole tree"
    assert "filesha256(local.source_files[name])" in tf.locals["source_hash"]
    obj = tf.resource("google_storage_bucket_object", "source")
    assert "${local.source_hash}" in _attr(obj, "name")
    storage = _block(
        _block(
            _block(tf.resource("google_cloudfunctions2_function", "function"), "build_config"),
            "source",
        ),
        "storage_source",
    )
    assert _attr(storage, "object") == "${google_storage_bucket_object.source.name}"


def test_source_bucket_is_private_and_versioned(tf: Module) -> None:
    bucket = tf.resource("google_storage_bucket", "source")
    assert _attr(bucket, "uniform_bucket_level_access") is True
    assert _attr(bucket, "public_access_prevention") == "enforced"
    assert _attr(_block(bucket, "versioning"), "enabled") is True


# --- monitoring ---------------------------------------------------------------------------


def _alerts_emitted_by_shared() -> set[str]:
    """Every `alert=` value a log call in shared/ passes: a literal, or a module constant."""
    import ast
    import importlib

    root = Path(__file__).resolve().parents[2]
    found: set[str] = set()
    for path in (root / "shared").rglob("*.py"):
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            for keyword in getattr(node, "keywords", []) if isinstance(node, ast.Call) else []:
                if keyword.arg != "alert":
                    continue
                if isinstance(keyword.value, ast.Constant):
                    found.add(keyword.value.value)
                elif isinstance(keyword.value, ast.Name):
                    found.add(getattr(importlib.import_module(module), keyword.value.id))
    return found


def test_every_alert_the_code_logs_has_a_policy_with_a_runbook(tf: Module) -> None:
    emitted = _alerts_emitted_by_shared()
    assert {"operation_stuck", "delivery_dead", "batch_superseded"} <= emitted  # the scan works
    assert set(tf.locals["log_alerts"]) == emitted
    for name, alert in tf.locals["log_alerts"].items():
        assert alert["runbook"] and alert["display_name"].startswith("hookledger: "), name


def test_alerts_for_stuck_operations_dead_deliveries_and_ingress_5xx(tf: Module) -> None:
    assert {"operation_stuck", "delivery_dead"} <= set(tf.locals["log_alerts"])
    metric = tf.resource("google_logging_metric", "alert")
    assert 'jsonPayload.alert=\\"${each.key}\\"' in _attr(metric, "filter")
    policies = tf.of_type("google_monitoring_alert_policy")
    assert set(policies) == {"log_alert", "ingress_5xx"}
    for name, policy in policies.items():
        assert _attr(policy, "notification_channels") == "${var.notification_channels}", name
    ingress_filter = _attr(
        _block(_block(policies["ingress_5xx"], "conditions"), "condition_threshold"), "filter"
    )
    assert 'response_code_class=\\"5xx\\"' in ingress_filter
    assert 'function["ingress"]' in ingress_filter
    assert "list(string)" in _attr(tf.variables["notification_channels"], "type")


# --- variables, outputs, README -----------------------------------------------------------


def test_variables_are_alphabetical_described_and_typed() -> None:
    _check_parser_shape()
    parsed = hcl2.loads((TERRAFORM / "variables.tf").read_text())
    names = [name for entry in parsed["variable"] for name in entry]
    assert names == sorted(names), f"variables.tf is not alphabetical: {names}"
    for entry in parsed["variable"]:
        for name, body in entry.items():
            assert str(_attr(body, "description")).strip(), f"variable {name} has no description"
            var_type = _attr(body, "type")
            assert var_type, f"variable {name} has no type"
            if str(var_type).startswith("${object("):
                assert "optional(" in var_type, f"object variable {name} uses no optional()"
                assert _blocks(body, "validation"), f"object variable {name} has no validation"


def test_outputs_give_the_urls_to_paste_and_the_names(tf: Module) -> None:
    ingress_url = '${google_cloudfunctions2_function.function["ingress"].url}'
    assert _attr(tf.outputs["ingress_url"], "value") == ingress_url
    assert _template(_attr(tf.outputs["github_webhook_url"], "value")) == ingress_url + "/github"
    assert _template(_attr(tf.outputs["gemini_webhook_url"], "value")) == ingress_url + "/gemini"
    for name in ("queue_name", "function_names", "tasks_service_account", "secret_ids"):
        assert name in tf.outputs, name
        assert str(_attr(tf.outputs[name], "description")).strip(), name


def _deploy_section() -> str:
    readme = (TERRAFORM / "README.md").read_text()
    match = re.search(r"^## Deploy\n(.*?)(?=^## |\Z)", readme, flags=re.M | re.S)
    assert match, "terraform/README.md has no '## Deploy' section"
    return match.group(1)


def test_readme_deploy_lists_every_variable_and_the_urls_to_paste(tf: Module) -> None:
    section = _deploy_section()
    missing = [name for name in tf.variables if f"`{name}`" not in section]
    assert not missing, f"README Deploy section does not mention {missing}"
    required = [name for name, body in tf.variables.items() if "default" not in body]
    assert required == ["project_id"], required
    assert re.search(r"`project_id`.*required", section, flags=re.I), (
        "project_id not marked required"
    )
    assert "/github" in section and "/gemini" in section
    assert "gcloud secrets versions add" in section
    for secret in SECRET_NAMES:
        assert secret in section, f"README does not say how to set {secret}"
