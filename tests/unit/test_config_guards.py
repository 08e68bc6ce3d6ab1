"""Configuration that refuses to be unsafe: every guard of a deployed (non-`demo-`) function.

Each case builds the configuration of one function for a real-looking project with one
setting missing or wrong, and expects the `ConfigError` naming that variable. The
functions are then loaded by functions-framework's real loader (in this process and as
the real CLI) to show a bad deployment fails to start, with one ERROR line.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import functions_framework
import pytest

from shared.config import LOCAL_ENVELOPE_KEY, LOCAL_GITHUB_SECRET, Config, ConfigError
from shared.entrypoints import runtime

REPO = Path(__file__).resolve().parents[2]
MAIN = str(REPO / "functions" / "main.py")
WORKER_URL = "https://us-central1-hookledger-prod.cloudfunctions.net/hookledger-worker"

# What Terraform sets on each function of the project `hookledger-prod`.
PROD: dict[str, dict[str, str]] = {
    "ingress": {
        "GOOGLE_CLOUD_PROJECT": "hookledger-prod",
        "WORKER_URL": WORKER_URL,
        "TASKS_SERVICE_ACCOUNT": "tasks-invoker@hookledger-prod.iam.gserviceaccount.com",
        "GITHUB_WEBHOOK_SECRETS": "a-real-github-secret-0123",
        "GEMINI_WEBHOOK_SECRETS": "whsec_"
        + base64.b64encode(b"a-real-gemini-secret-0123").decode(),
        "ENVELOPE_KEYS": "a-real-envelope-key-0123",
        "GEMINI_WEBHOOK_AUDIENCE": "https://hooks.hookledger-prod.example/gemini",
    },
    "worker": {
        "GOOGLE_CLOUD_PROJECT": "hookledger-prod",
        "OIDC_AUDIENCE": WORKER_URL,
        "TASKS_SERVICE_ACCOUNT": "tasks-invoker@hookledger-prod.iam.gserviceaccount.com",
        "ENVELOPE_KEYS": "a-real-envelope-key-0123",
        "GEMINI_WEBHOOK_URIS": "https://us-central1-hookledger-prod.cloudfunctions.net/hookledger-ingress/gemini",
    },
    "reconcile": {
        "GOOGLE_CLOUD_PROJECT": "hookledger-prod",
        "WORKER_URL": WORKER_URL,
        "OIDC_AUDIENCE": "https://us-central1-hookledger-prod.cloudfunctions.net/hookledger-reconcile",
        "TASKS_SERVICE_ACCOUNT": "tasks-invoker@hookledger-prod.iam.gserviceaccount.com",
        "SCHEDULER_SERVICE_ACCOUNT": "scheduler@hookledger-prod.iam.gserviceaccount.com",
        "ENVELOPE_KEYS": "a-real-envelope-key-0123",
    },
}

DROP = None  # the variable is unset

# (name, function, variable, value or DROP): each must raise a ConfigError naming `variable`.
GUARDS = [
    ("worker without an audience", "worker", "OIDC_AUDIENCE", DROP),
    ("worker with a blank audience", "worker", "OIDC_AUDIENCE", " "),
    ("worker without the tasks account", "worker", "TASKS_SERVICE_ACCOUNT", DROP),
    ("worker without envelope keys", "worker", "ENVELOPE_KEYS", DROP),
    ("worker with plain-http certs", "worker", "OIDC_CERTS_URL", "http://certs.example/"),
    ("worker with a plain-http job webhook", "worker", "GEMINI_WEBHOOK_URIS", "http://h.example/g"),
    ("worker with a job webhook not a URL", "worker", "GEMINI_WEBHOOK_URIS", "hooks.example/g"),
    ("reconcile without an audience", "reconcile", "OIDC_AUDIENCE", DROP),
    ("reconcile without the scheduler account", "reconcile", "SCHEDULER_SERVICE_ACCOUNT", DROP),
    ("reconcile without the tasks account", "reconcile", "TASKS_SERVICE_ACCOUNT", DROP),
    ("reconcile without envelope keys", "reconcile", "ENVELOPE_KEYS", DROP),
    ("reconcile with the local worker URL", "reconcile", "WORKER_URL", DROP),
    ("reconcile with plain-http certs", "reconcile", "OIDC_CERTS_URL", "http://certs.example/"),
    ("ingress without GitHub secrets", "ingress", "GITHUB_WEBHOOK_SECRETS", DROP),
    ("ingress without Gemini secrets", "ingress", "GEMINI_WEBHOOK_SECRETS", DROP),
    ("ingress with an empty secret list", "ingress", "GEMINI_WEBHOOK_SECRETS", " , "),
    ("ingress without envelope keys", "ingress", "ENVELOPE_KEYS", DROP),
    ("ingress without the tasks account", "ingress", "TASKS_SERVICE_ACCOUNT", DROP),
    ("ingress with the local worker URL", "ingress", "WORKER_URL", DROP),
    ("ingress with plain-http worker URL", "ingress", "WORKER_URL", "http://worker.example/"),
    ("ingress with no signature window", "ingress", "SIGNATURE_TOLERANCE_S", "0"),
    ("ingress with a zero Gemini limit", "ingress", "MAX_GEMINI_BODY_BYTES", "0"),
    ("ingress with dynamic webhooks, no audience", "ingress", "GEMINI_WEBHOOK_AUDIENCE", DROP),
    ("worker with a deadline at its timeout", "worker", "TASK_DISPATCH_DEADLINE_S", "540"),
    ("ingress with a deadline past the timeout", "ingress", "TASK_DISPATCH_DEADLINE_S", "600"),
    ("ingress with a deadline below 15 s", "ingress", "TASK_DISPATCH_DEADLINE_S", "14"),
    ("reconcile with a deadline over 30 min", "reconcile", "TASK_DISPATCH_DEADLINE_S", "1801"),
    ("worker with a timeout over an hour", "worker", "WORKER_TIMEOUT_S", "3601"),
    ("worker with a timeout at the deadline", "worker", "WORKER_TIMEOUT_S", "480"),
]

# Secrets that are set but unusable: refused when the verifiers and sealer are built.
UNUSABLE_SECRETS = [
    ("short GitHub secret", "ingress", "GITHUB_WEBHOOK_SECRETS", "gh-Zq9"),
    (
        "Gemini secret without whsec_",
        "ingress",
        "GEMINI_WEBHOOK_SECRETS",
        "plain-Zq9-0123456789",
    ),
    ("short envelope key (ingress)", "ingress", "ENVELOPE_KEYS", "env-Zq9"),
    ("short envelope key (worker)", "worker", "ENVELOPE_KEYS", "env-Zq9"),
    ("short envelope key (reconcile)", "reconcile", "ENVELOPE_KEYS", "env-Zq9"),
]


def env_for(function: str, variable: str | None = None, value: str | None = None) -> dict[str, str]:
    env = dict(PROD[function])
    if variable is not None:
        env.pop(variable, None)
        if value is not None:
            env[variable] = value
    return env


@pytest.fixture(autouse=True)
def _fresh_runtime() -> Iterator[None]:
    runtime.reset()
    yield
    runtime.reset()


def _use(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name in {name for f in PROD.values() for name in f} | {"OIDC_CERTS_URL", "FUNCTION_TARGET"}:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("function", sorted(PROD))
def test_a_complete_deployment_passes(function, monkeypatch):
    config = Config.from_env(PROD[function], function=function)
    assert (config.function, config.is_local) == (function, False)
    _use(monkeypatch, {**PROD[function], "FUNCTION_TARGET": function})
    runtime.check_startup(function)  # verifiers, sealer and token check all build


@pytest.mark.parametrize(
    ("name", "function", "variable", "value"), [pytest.param(*c, id=c[0]) for c in GUARDS]
)
def test_each_guard_names_its_variable(name, function, variable, value):
    with pytest.raises(ConfigError, match=variable):
        Config.from_env(env_for(function, variable, value), function=function)


@pytest.mark.parametrize(
    ("name", "function", "variable", "value"),
    [pytest.param(*c, id=c[0]) for c in UNUSABLE_SECRETS],
)
def test_an_unusable_secret_fails_startup_naming_its_variable(
    name, function, variable, value, monkeypatch
):
    _use(monkeypatch, {**env_for(function, variable, value), "FUNCTION_TARGET": function})
    with pytest.raises(ConfigError, match=variable) as caught:
        runtime.check_startup(function)
    assert value not in str(caught.value), name  # the message names the variable, not the value


def test_the_function_comes_from_function_target():
    env = {**env_for("worker", "OIDC_AUDIENCE"), "FUNCTION_TARGET": "worker"}
    with pytest.raises(ConfigError, match="OIDC_AUDIENCE"):
        Config.from_env(env)


def test_a_function_needs_only_the_secrets_it_reads():
    config = Config.from_env(PROD["worker"], function="worker")
    # The worker never verifies webhooks: no GitHub/Gemini secret, and never the local ones.
    assert (config.github_webhook_secrets, config.gemini_webhook_secrets) == ((), ())
    assert LOCAL_GITHUB_SECRET not in config.github_webhook_secrets


def test_a_tool_outside_demo_gets_no_published_secret():
    config = Config.from_env({"GOOGLE_CLOUD_PROJECT": "hookledger-prod"})
    assert config.function == ""
    assert (config.envelope_keys, config.github_webhook_secrets) == ((), ())
    assert LOCAL_ENVELOPE_KEY not in config.envelope_keys


@pytest.mark.parametrize("function", sorted(PROD))
def test_a_demo_project_needs_no_guard(function):
    config = Config.from_env({"GOOGLE_CLOUD_PROJECT": "demo-hookledger"}, function=function)
    assert (config.function, config.oidc_audience, config.envelope_keys) == (
        function,
        "",
        (LOCAL_ENVELOPE_KEY,),
    )


def test_an_unknown_function_is_refused():
    with pytest.raises(ConfigError, match="FUNCTION_TARGET"):
        Config(function="scheduler")
    with pytest.raises(ConfigError, match="FUNCTION_TARGET"):
        runtime.check_startup("scheduler")


@pytest.mark.parametrize("function", sorted(PROD))
def test_loading_a_misconfigured_function_exits_with_one_error_line(function, monkeypatch, caplog):
    _use(monkeypatch, env_for(function, "ENVELOPE_KEYS"))
    caplog.set_level(logging.ERROR, logger="hookledger")

    with pytest.raises(SystemExit) as exited:
        functions_framework.create_app(target=function, source=MAIN)

    assert exited.value.code == 1
    [record] = [r for r in caplog.records if r.name.startswith("hookledger")]
    assert record.levelno == logging.ERROR
    assert "ENVELOPE_KEYS" in record.getMessage() and function in record.getMessage()


def test_loading_a_complete_deployment_builds_without_a_request(monkeypatch):
    _use(monkeypatch, PROD["ingress"])
    app = functions_framework.create_app(target="ingress", source=MAIN)
    assert app.test_client().get("/healthz").status_code == 200


@pytest.mark.slow
def test_the_real_server_fails_to_start_with_one_json_line():
    """`functions-framework --target=worker` exits non-zero, having printed one ERROR line."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(REPO),
        **env_for("worker", "OIDC_AUDIENCE"),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "functions_framework",
            "--target=worker",
            f"--source={MAIN}",
            "--host=127.0.0.1",
            "--port=9",  # never bound: start-up fails before the server
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    [line] = done.stdout.splitlines()
    entry = json.loads(line)
    assert entry["severity"] == "ERROR"
    assert "OIDC_AUDIENCE" in entry["message"]
    assert "Traceback" not in done.stderr


def test_job_webhook_uris_are_a_comma_list_and_local_ones_may_be_plain_http():
    uris = "https://a.example/gemini, https://b.example/gemini ,"
    config = Config.from_env({**PROD["worker"], "GEMINI_WEBHOOK_URIS": uris}, function="worker")
    assert config.gemini_webhook_uris == ("https://a.example/gemini", "https://b.example/gemini")
    local = Config.from_env({"GEMINI_WEBHOOK_URIS": "http://127.0.0.1:8080/gemini"})
    assert local.gemini_webhook_uris == ("http://127.0.0.1:8080/gemini",)
    assert Config.from_env({}).gemini_webhook_uris == ()


def test_a_github_token_is_read_without_the_line_break_its_secret_file_ends_with() -> None:
    # Sent with it, requests refuses the header with an error quoting the token.
    assert Config.from_env({"GITHUB_TOKEN": "ghp_abc\n"}).github_token == "ghp_abc"
    with pytest.raises(ConfigError, match="GITHUB_TOKEN must be one token") as refused:
        Config.from_env({"GITHUB_TOKEN": "ghp_abc def"})
    assert "ghp_abc" not in str(refused.value)
