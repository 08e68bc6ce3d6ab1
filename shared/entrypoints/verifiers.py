"""The webhook verifiers the ingress builds from the configuration, each refusing a bad
secret as the `ConfigError` naming its variable (never its value)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from jwt import PyJWTError

from shared.clock import system_clock
from shared.config import Config, ConfigError
from shared.signatures import (
    DynamicWebhookVerifier,
    GeminiVerifier,
    GitHubVerifier,
    SecretError,
    StandardWebhookVerifier,
)


@contextmanager
def secret_named(name: str) -> Iterator[None]:
    """Re-raise a bad secret as the `ConfigError` naming its variable (never its value)."""
    try:
        yield
    except SecretError as exc:
        raise ConfigError(f"{name} is unusable: {exc}") from exc


def build_github_verifier(cfg: Config) -> GitHubVerifier:
    """`ConfigError` naming GITHUB_WEBHOOK_SECRETS if a secret is unusable."""
    with secret_named("GITHUB_WEBHOOK_SECRETS"):
        return GitHubVerifier(cfg.github_webhook_secrets)


def build_gemini_verifier(cfg: Config) -> GeminiVerifier:
    """Static (project secrets) and, when `cfg.dynamic_webhooks`, dynamic (JWT) verification.

    `ConfigError` naming GEMINI_WEBHOOK_SECRETS if a secret is unusable, GEMINI_JWKS_URL
    if it is not an http(s) URL. No key is fetched here: the first JWT delivery does it.
    """
    with secret_named("GEMINI_WEBHOOK_SECRETS"):
        static = StandardWebhookVerifier(
            cfg.gemini_webhook_secrets, tolerance_s=cfg.signature_tolerance_s, clock=system_clock
        )
    dynamic = None
    if cfg.dynamic_webhooks:
        try:
            dynamic = DynamicWebhookVerifier(
                cfg.gemini_jwks_url,
                cfg.gemini_webhook_audience,
                issuer=cfg.gemini_webhook_issuer,
                clock=system_clock,
                # The sender waits seconds for our answer: a key fetch must not take longer.
                timeout_s=min(cfg.http_timeout_s, 5.0),
            )
        except (ValueError, PyJWTError) as exc:  # PyJWT refuses a URL that is not http(s)
            raise ConfigError(f"GEMINI_JWKS_URL is unusable: {type(exc).__name__}") from exc
    return GeminiVerifier(static=static, dynamic=dynamic)
