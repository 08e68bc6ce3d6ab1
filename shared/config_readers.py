"""Reading `Config`'s fields from the environment, one group of fields at a time.

`read_fields` is what `Config.from_env` (shared/config.py) calls: every field but
`project` and `function`, read in `Config`'s own order so the first variable that is
malformed is the one named in the `ConfigError`. The rules of each value (whole numbers,
flags, fractions, secrets that must be set outside a `demo-` project) live in `_Reader`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from datetime import date
from typing import TYPE_CHECKING, Any

from shared.errors import AppError, ConfigError
from shared.tracing import MODES

if TYPE_CHECKING:
    from shared.config import Config

# `HOOKLEDGER_APPS` unset: no app (the core's own handlers only). The deployment names its
# apps: functions/main.py, the CLI and Terraform default to the reference app.
DEFAULT_APPS: tuple[str, ...] = ()
APPS_VARIABLE = "HOOKLEDGER_APPS"
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# GitHub names each REST API version by the day it was released ("API Versions").
_API_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}")


class _Reader:
    """Typed reads of `env`; `reads` are the names the function requires, `local` a
    `demo-` project (where the published local secrets are the defaults)."""

    def __init__(self, env: Mapping[str, str], reads: frozenset[str], local: bool) -> None:
        self.env = env
        self.reads = reads
        self.local = local

    def text(self, name: str, default: str) -> str:
        return self.env.get(name, default)

    def integer(self, name: str, default: int, minimum: int = 0) -> int:
        raw = self.env.get(name)
        if raw is None or raw == "":
            return default
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"{name} must be a whole number, got {raw!r}") from None
        if value < minimum:
            raise ConfigError(f"{name} must be at least {minimum}, got {value}")
        return value

    def flag(self, name: str, default: bool) -> bool:
        raw = self.env.get(name, "").strip().lower()
        if raw == "":
            return default
        if raw not in ("true", "false"):
            raise ConfigError(f"{name} must be true or false, got {self.env.get(name)!r}")
        return raw == "true"

    def real(self, name: str) -> float | None:
        """The variable as a float; None when unset or empty."""
        raw = self.env.get(name)
        if raw is None or raw == "":
            return None
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(f"{name} must be a number, got {raw!r}") from None

    def number(self, name: str, default: float) -> float:
        value = self.real(name)
        if value is None:
            return default
        if not math.isfinite(value) or value <= 0:
            raise ConfigError(f"{name} must be positive, got {value}")
        return value

    def fraction(self, name: str, default: float) -> float:
        value = self.real(name)
        if value is None:
            return default
        if not 0.0 <= value <= 1.0:  # also refuses nan
            raise ConfigError(f"{name} must be a fraction from 0 to 1, got {value}")
        return value

    def secrets(self, name: str, default: tuple[str, ...]) -> tuple[str, ...]:
        raw = self.env.get(name)
        if raw is None:
            if self.local:
                return default
            # Outside demo- never the secret published in the repo: required where read,
            # else none (a function that never uses it, or a tool).
            if name in self.reads:
                raise ConfigError(f"{name} must be set outside a demo- project")
            return ()
        values = _split(raw)
        if not values:
            raise ConfigError(f"{name} is set but holds no secret")
        return values


def read_fields(
    env: Mapping[str, str], *, reads: frozenset[str], local: bool, defaults: Config
) -> dict[str, Any]:
    """`Config`'s fields but `project` and `function`, from `env` (unset: `defaults`)."""
    r, d = _Reader(env, reads, local), defaults
    backoff = _backoff(r, d)  # checked first, as it always was
    return {
        **_endpoints(r, d),
        **_webhooks(r, d),
        **_services(r, d),
        **_github(r, d),
        "apps": _apps(env),
        **_reconcile(r, d, backoff),
        **_deadlines(r, d),
        **_tracing(r, d),
    }


def _backoff(r: _Reader, d: Config) -> dict[str, float]:
    """Reconcile's per-operation backoff: the cap at least the first wait."""
    backoff_first_s = r.number("RECONCILE_BACKOFF_FIRST_S", d.reconcile_backoff_first_s)
    backoff_cap_s = r.number("RECONCILE_BACKOFF_CAP_S", d.reconcile_backoff_cap_s)
    if backoff_cap_s < backoff_first_s:
        raise ConfigError(
            f"RECONCILE_BACKOFF_CAP_S ({backoff_cap_s:g}) must be at least "
            f"RECONCILE_BACKOFF_FIRST_S ({backoff_first_s:g})"
        )
    return {"reconcile_backoff_first_s": backoff_first_s, "reconcile_backoff_cap_s": backoff_cap_s}


def _endpoints(r: _Reader, d: Config) -> dict[str, Any]:
    """The queue, the functions' URLs and the OIDC callers and audience."""
    return {
        "location": r.text("TASKS_LOCATION", d.location),
        "queue": r.text("TASKS_QUEUE", d.queue),
        "worker_url": r.text("WORKER_URL", d.worker_url),
        "reconcile_url": r.text("RECONCILE_URL", d.reconcile_url),
        "tasks_service_account": r.text("TASKS_SERVICE_ACCOUNT", d.tasks_service_account),
        "scheduler_service_account": r.text(
            "SCHEDULER_SERVICE_ACCOUNT", d.scheduler_service_account
        ),
        "oidc_audience": r.text("OIDC_AUDIENCE", d.oidc_audience),
        "oidc_certs_url": r.text("OIDC_CERTS_URL", d.oidc_certs_url),
    }


def _webhooks(r: _Reader, d: Config) -> dict[str, Any]:
    """The webhook secrets and Gemini webhook settings, the envelope keys, the body limits."""
    return {
        "github_webhook_secrets": r.secrets("GITHUB_WEBHOOK_SECRETS", d.github_webhook_secrets),
        "gemini_webhook_secrets": r.secrets("GEMINI_WEBHOOK_SECRETS", d.gemini_webhook_secrets),
        "gemini_jwks_url": r.text("GEMINI_JWKS_URL", d.gemini_jwks_url).strip(),
        "gemini_webhook_audience": r.text(
            "GEMINI_WEBHOOK_AUDIENCE", d.gemini_webhook_audience
        ).strip(),
        "gemini_webhook_issuer": r.text("GEMINI_WEBHOOK_ISSUER", d.gemini_webhook_issuer).strip(),
        "gemini_webhook_uris": _webhook_uris(r.env.get("GEMINI_WEBHOOK_URIS", "")),
        "envelope_keys": r.secrets("ENVELOPE_KEYS", d.envelope_keys),
        # The verifiers need a window of at least a second.
        "signature_tolerance_s": r.integer(
            "SIGNATURE_TOLERANCE_S", d.signature_tolerance_s, minimum=1
        ),
        "max_body_bytes": r.integer("MAX_BODY_BYTES", d.max_body_bytes, minimum=1),
        "max_gemini_body_bytes": r.integer(
            "MAX_GEMINI_BODY_BYTES", d.max_gemini_body_bytes, minimum=1
        ),
    }


def _services(r: _Reader, d: Config) -> dict[str, Any]:
    """The emulators, the claim store's database, and Gemini's endpoint and key."""
    return {
        "firestore_emulator_host": r.text("FIRESTORE_EMULATOR_HOST", ""),
        "claims_database": r.text("CLAIMS_DATABASE", d.claims_database) or d.claims_database,
        "cloud_tasks_emulator_host": r.text("CLOUD_TASKS_EMULATOR_HOST", ""),
        "gemini_base_url": r.text("GEMINI_BASE_URL", d.gemini_base_url),
        "gemini_api_key": r.text("GEMINI_API_KEY", d.gemini_api_key),
    }


def _github(r: _Reader, d: Config) -> dict[str, Any]:
    """GitHub's API URL and credentials: a token, a GitHub App, or both; the REST API
    version its requests name."""
    return {
        "github_api_url": r.text("GITHUB_API_URL", d.github_api_url),
        "github_token": _token(r.env.get("GITHUB_TOKEN", d.github_token)),
        "github_app_id": r.text("GITHUB_APP_ID", d.github_app_id).strip(),
        "github_app_private_key": _pem(r.env.get("GITHUB_APP_PRIVATE_KEY", "")),
        "github_api_version": _api_version(r.text("GITHUB_API_VERSION", d.github_api_version)),
    }


def _reconcile(r: _Reader, d: Config, backoff: Mapping[str, float]) -> dict[str, Any]:
    """Reconcile's settings, with the backoff `_backoff` read."""
    return {
        "reconcile_grace_s": r.integer("RECONCILE_GRACE_S", d.reconcile_grace_s),
        "reconcile_concurrency": r.integer(
            "RECONCILE_CONCURRENCY", d.reconcile_concurrency, minimum=1
        ),
        "reconcile_budget_s": r.integer("RECONCILE_BUDGET_S", d.reconcile_budget_s, minimum=1),
        "reconcile_fanout_threshold": r.integer(
            "RECONCILE_FANOUT_THRESHOLD", d.reconcile_fanout_threshold, minimum=1
        ),
        "stuck_after_s": r.integer("STUCK_AFTER_S", d.stuck_after_s, minimum=1),
        "github_sweep_grace_s": r.integer("GITHUB_SWEEP_GRACE_S", d.github_sweep_grace_s),
        "github_sweep_budget_s": r.integer(
            "GITHUB_SWEEP_BUDGET_S", d.github_sweep_budget_s, minimum=1
        ),
        "github_sweep_full_pages": r.integer(
            "GITHUB_SWEEP_FULL_PAGES", d.github_sweep_full_pages, minimum=0
        ),
        **backoff,
        "reconcile_backoff_jitter": r.fraction(
            "RECONCILE_BACKOFF_JITTER", d.reconcile_backoff_jitter
        ),
    }


def _deadlines(r: _Reader, d: Config) -> dict[str, Any]:
    """Retention, the worker's retries, timeout and threads, and the calls' deadlines."""
    return {
        "retention_days": r.integer("RETENTION_DAYS", d.retention_days, minimum=1),
        "worker_max_retries": r.integer("WORKER_MAX_RETRIES", d.worker_max_retries),
        "worker_timeout_s": r.integer("WORKER_TIMEOUT_S", d.worker_timeout_s, minimum=1),
        "task_dispatch_deadline_s": r.integer(
            "TASK_DISPATCH_DEADLINE_S", d.task_dispatch_deadline_s, minimum=1
        ),
        "worker_concurrency": r.integer("THREADS", d.worker_concurrency, minimum=1),
        "http_timeout_s": r.number("HTTP_TIMEOUT_S", d.http_timeout_s),
        "tasks_timeout_s": r.number("TASKS_TIMEOUT_S", d.tasks_timeout_s),
        "outbox_lease_s": r.number("OUTBOX_LEASE_S", d.outbox_lease_s),
    }


def _tracing(r: _Reader, d: Config) -> dict[str, Any]:
    """Where spans go, the share of traces kept, the local span store."""
    return {
        "tracing": _tracing_mode(r.env.get("TRACING", d.tracing)),
        "trace_sample_ratio": r.fraction("TRACE_SAMPLE_RATIO", d.trace_sample_ratio),
        "trace_dir": r.text("TRACE_DIR", d.trace_dir) or d.trace_dir,
    }


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _webhook_uris(raw: str) -> tuple[str, ...]:
    """`GEMINI_WEBHOOK_URIS`: comma-separated http(s) URLs (https outside demo-: checked
    per function in `check_deployed`, shared/config_checks.py)."""
    uris = _split(raw)
    for uri in uris:
        if not uri.startswith(("https://", "http://")):
            raise ConfigError(f"GEMINI_WEBHOOK_URIS must hold http(s) URLs, got {uri!r}")
    return uris


def _apps(env: Mapping[str, str]) -> tuple[str, ...]:
    """`HOOKLEDGER_APPS`: the app modules to load (shared/apps.py); unset: none."""
    try:
        return names_from_env(env)
    except AppError as exc:
        raise ConfigError(str(exc)) from None


def names_from_env(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The app modules `HOOKLEDGER_APPS` names (unset or empty: none)."""
    env = os.environ if environ is None else environ
    raw = env.get(APPS_VARIABLE)
    if raw is None:
        return DEFAULT_APPS
    modules = tuple(part.strip() for part in raw.split(",") if part.strip())
    for module in modules:
        if not _MODULE.fullmatch(module):
            raise AppError(f"{APPS_VARIABLE}: {module!r} is not a module name")
    return modules


def _token(raw: str) -> str:
    """`GITHUB_TOKEN`, without the line break a secret file often ends with: sent as is, a
    newline makes `requests` refuse the header with an error that quotes the token."""
    token = raw.strip()
    if any(c.isspace() for c in token):
        raise ConfigError("GITHUB_TOKEN must be one token, without spaces or line breaks")
    return token


def _api_version(raw: str) -> str:
    """`GITHUB_API_VERSION`: empty (the version hookledger is written for) or a GitHub REST
    API version, the date it was released (`2022-11-28`). Whether GitHub still supports
    it is GitHub's answer: a 400 naming the versions it does."""
    version = raw.strip()
    if not version:
        return ""
    if _API_VERSION.fullmatch(version):
        try:
            date.fromisoformat(version)  # a real day, not 2022-13-40
            return version
        except ValueError:
            pass
    raise ConfigError(
        "GITHUB_API_VERSION must be a GitHub REST API version, the date it was released "
        f"such as 2022-11-28 (empty: the one hookledger is written for), got {raw!r}"
    )


def _tracing_mode(raw: str) -> str:
    """`TRACING`: off, file or cloudtrace (shared/tracing)."""
    mode = raw.strip().lower() or "off"
    if mode not in MODES:
        raise ConfigError(f"TRACING must be one of {', '.join(MODES)}, got {raw!r}")
    return mode


def _pem(raw: str) -> str:
    """A PEM from the environment; `\\n` escapes (one line, as some secret stores and
    `.env` files hold it) become newlines. Its validity is checked when the auth is built."""
    text = raw.strip()
    if "\n" not in text and "\\n" in text:
        text = text.replace("\\n", "\n").strip()
    return text
