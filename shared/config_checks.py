"""The checks `Config` makes of itself when built (shared/config.py, `__post_init__`).

The deadlines (the worker timeout and the task dispatch deadline, each in range, the
deadline below the timeout), a GitHub App's two settings together, and the guards of a
deployed function outside a `demo-` project (what each function requires: the module
docstring of shared/config.py). Each raises a `ConfigError` naming the variable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.errors import ConfigError

if TYPE_CHECKING:
    from shared.config import Config

# Cloud Tasks' documented range for an HTTP task's dispatch deadline.
MIN_DISPATCH_DEADLINE_S = 15
MAX_DISPATCH_DEADLINE_S = 1800
# Cloud Functions (gen2) caps an HTTP function's timeout at 60 minutes.
MAX_WORKER_TIMEOUT_S = 3600


def check_deadlines(cfg: Config) -> None:
    """The worker timeout and the dispatch deadline: each in range, the deadline below."""
    if not 1 <= cfg.worker_timeout_s <= MAX_WORKER_TIMEOUT_S:
        raise ConfigError(
            f"WORKER_TIMEOUT_S must be 1-{MAX_WORKER_TIMEOUT_S}, got {cfg.worker_timeout_s}"
        )
    deadline = cfg.task_dispatch_deadline_s
    if not MIN_DISPATCH_DEADLINE_S <= deadline <= MAX_DISPATCH_DEADLINE_S:
        raise ConfigError(
            f"TASK_DISPATCH_DEADLINE_S must be {MIN_DISPATCH_DEADLINE_S}-"
            f"{MAX_DISPATCH_DEADLINE_S} (Cloud Tasks' range for HTTP tasks), got {deadline}"
        )
    if deadline >= cfg.worker_timeout_s:
        raise ConfigError(
            f"TASK_DISPATCH_DEADLINE_S ({deadline}) must be below WORKER_TIMEOUT_S "
            f"({cfg.worker_timeout_s}): Cloud Tasks must give up on an attempt before the "
            "worker's timeout ends it"
        )
    if cfg.delivery_lease_s <= 2 * cfg.create_budget_s:
        raise ConfigError(
            f"WORKER_TIMEOUT_S ({cfg.worker_timeout_s}) is too short for HTTP_TIMEOUT_S "
            f"({cfg.http_timeout_s:g}): a push's lease ({cfg.delivery_lease_s} s) must hold "
            f"its fetches and a batch create ({cfg.create_budget_s:g} s) twice over"
        )


def check_github_app(cfg: Config) -> None:
    """GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY go together (never quotes the key)."""
    if bool(cfg.github_app_id) != bool(cfg.github_app_private_key):
        have, missing = (
            ("GITHUB_APP_ID", "GITHUB_APP_PRIVATE_KEY")
            if cfg.github_app_id
            else ("GITHUB_APP_PRIVATE_KEY", "GITHUB_APP_ID")
        )
        raise ConfigError(
            f"{have} is set but {missing} is not: a GitHub App needs both "
            "(or neither, for GITHUB_TOKEN alone)"
        )
    if any(c.isspace() for c in cfg.github_app_id):
        raise ConfigError("GITHUB_APP_ID must be the App's client id or app id, without spaces")


def check_deployed(cfg: Config) -> None:
    """The guards of a deployed function (shared/config.py's module docstring); the first
    failure is raised."""
    need: list[tuple[str, str]] = []
    if cfg.function in ("worker", "reconcile"):
        # Without an audience the token check is off: anyone could call a private function.
        need.append(("OIDC_AUDIENCE", cfg.oidc_audience))
    if cfg.function in ("ingress", "worker"):
        need.append(("TASKS_SERVICE_ACCOUNT", cfg.tasks_service_account))
    if cfg.function == "reconcile":
        need.append(("SCHEDULER_SERVICE_ACCOUNT", cfg.scheduler_service_account))
    for name, value in need:
        if not value.strip():
            raise ConfigError(f"{name} must be set for the {cfg.function} outside a demo- project")
    https: list[tuple[str, str]] = []
    if cfg.function in ("ingress", "reconcile"):
        https.append(("WORKER_URL", cfg.worker_url))
    if cfg.function in ("worker", "reconcile"):
        https.append(("OIDC_CERTS_URL", cfg.oidc_certs_url))
    if cfg.function == "ingress" and cfg.gemini_jwks_url:
        https.append(("GEMINI_JWKS_URL", cfg.gemini_jwks_url))
    if cfg.function == "worker":
        https.extend(("GEMINI_WEBHOOK_URIS", uri) for uri in cfg.gemini_webhook_uris)
    for name, url in https:
        if not url.startswith("https://"):
            raise ConfigError(
                f"{name} must be an https:// URL for the {cfg.function} outside a demo- project"
            )
    if cfg.function == "ingress" and cfg.gemini_jwks_url and not cfg.gemini_webhook_audience:
        # Without an audience a token Google signed for anyone else's endpoint would pass.
        raise ConfigError(
            "GEMINI_WEBHOOK_AUDIENCE must be set for the ingress outside a demo- project while "
            "Gemini dynamic webhooks are on (GEMINI_JWKS_URL; set it empty to turn them off)"
        )
