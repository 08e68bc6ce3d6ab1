"""Gemini dynamic-webhook settings: the default JWKS URL, the audience guard, the switch-off."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest

from shared.config import DEFAULT_GEMINI_JWKS_URL, Config, ConfigError
from shared.entrypoints import runtime

# A deployed ingress as Terraform configures it, dynamic-webhook settings aside.
INGRESS = {
    "GOOGLE_CLOUD_PROJECT": "hookledger-prod",
    "WORKER_URL": "https://us-central1-hookledger-prod.cloudfunctions.net/hookledger-worker",
    "TASKS_SERVICE_ACCOUNT": "tasks-invoker@hookledger-prod.iam.gserviceaccount.com",
    "GITHUB_WEBHOOK_SECRETS": "a-real-github-secret-0123",
    "GEMINI_WEBHOOK_SECRETS": "whsec_" + base64.b64encode(b"a-real-gemini-secret-0123").decode(),
    "ENVELOPE_KEYS": "a-real-envelope-key-0123",
}
AUDIENCE = "https://us-central1-hookledger-prod.cloudfunctions.net/hookledger-ingress/gemini"


@pytest.fixture(autouse=True)
def _fresh_runtime() -> Iterator[None]:
    runtime.reset()
    yield
    runtime.reset()


def test_the_default_jwks_url_is_the_documented_one():
    assert Config().gemini_jwks_url == DEFAULT_GEMINI_JWKS_URL
    assert DEFAULT_GEMINI_JWKS_URL == (
        "https://generativelanguage.googleapis.com/.well-known/jwks.json"
    )


REFUSED = [
    ("dynamic on by default, no audience", {}, "GEMINI_WEBHOOK_AUDIENCE"),
    ("blank audience", {"GEMINI_WEBHOOK_AUDIENCE": "  "}, "GEMINI_WEBHOOK_AUDIENCE"),
    (
        "plain-http JWKS",
        {"GEMINI_JWKS_URL": "http://keys.example/jwks.json", "GEMINI_WEBHOOK_AUDIENCE": AUDIENCE},
        "GEMINI_JWKS_URL",
    ),
]


@pytest.mark.parametrize(("name", "extra", "variable"), REFUSED, ids=[c[0] for c in REFUSED])
def test_a_deployed_ingress_with_dynamic_webhooks_needs_an_audience(name, extra, variable):
    with pytest.raises(ConfigError, match=variable):
        Config.from_env({**INGRESS, **extra}, function="ingress")


def test_a_deployed_ingress_starts_with_an_audience_or_with_dynamic_webhooks_off():
    on = Config.from_env({**INGRESS, "GEMINI_WEBHOOK_AUDIENCE": AUDIENCE}, function="ingress")
    off = Config.from_env({**INGRESS, "GEMINI_JWKS_URL": ""}, function="ingress")

    assert (on.dynamic_webhooks, off.dynamic_webhooks) == (True, False)
    assert runtime.build_gemini_verifier(on).dynamic_enabled
    assert not runtime.build_gemini_verifier(off).dynamic_enabled


def test_the_worker_does_not_need_the_audience():
    env = {
        "GOOGLE_CLOUD_PROJECT": "hookledger-prod",
        "OIDC_AUDIENCE": "https://worker.example/",
        "TASKS_SERVICE_ACCOUNT": "tasks@hookledger-prod.iam.gserviceaccount.com",
        "ENVELOPE_KEYS": "a-real-envelope-key-0123",
    }
    assert Config.from_env(env, function="worker").gemini_webhook_audience == ""


def test_a_demo_project_without_an_audience_leaves_dynamic_webhooks_off():
    config = Config.from_env({"GOOGLE_CLOUD_PROJECT": "demo-hookledger"}, function="ingress")

    assert (config.gemini_jwks_url, config.dynamic_webhooks) == (DEFAULT_GEMINI_JWKS_URL, False)


def test_issuer_and_audience_are_read_and_trimmed():
    config = Config.from_env(
        {
            "GOOGLE_CLOUD_PROJECT": "demo-hookledger",
            "GEMINI_WEBHOOK_AUDIENCE": f" {AUDIENCE} ",
            "GEMINI_WEBHOOK_ISSUER": "https://generativelanguage.googleapis.com",
        }
    )

    assert config.gemini_webhook_audience == AUDIENCE
    assert config.gemini_webhook_issuer == "https://generativelanguage.googleapis.com"
    assert config.dynamic_webhooks


def test_a_jwks_url_pyjwt_refuses_is_a_config_error_naming_it():
    config = Config.from_env(
        {
            "GOOGLE_CLOUD_PROJECT": "demo-hookledger",
            "GEMINI_JWKS_URL": "file:///etc/passwd",
            "GEMINI_WEBHOOK_AUDIENCE": AUDIENCE,
        }
    )
    with pytest.raises(ConfigError, match="GEMINI_JWKS_URL"):
        runtime.build_gemini_verifier(config)
