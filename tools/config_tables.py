"""`python -m tools.config_tables [--check]`: the configuration tables of docs/configuration.md.

Three tables, written between the `config-tables` markers (the prose around them is kept):

- the core's variables: every name `shared.config.Config.from_env` reads, its default
  (from `shared.config.DEFAULTS`), what `make run` gives it (`local.stack.function_env`
  and the local tracing settings), the deployed functions Terraform sets it on
  (`PRODUCTION_ENV_NAMES`) and what it means (`CORE` below);
- the settings each app that ships with hookledger declares (`SHIPPED_APPS`), as
  `shared.api.Setting` holds them; a new app's own settings are listed by `hookledger config`;
- the variables only the local tools read (`LOCAL`).

tests/unit/test_config_tables.py fails when the doc differs from this output, when `CORE`
misses a name `Config` reads (or names one it does not), and when `LOCAL` names a
variable no local tool mentions. `--check` writes nothing and exits 1 when stale.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tools.requirements import REPO, GenerateError, generator_main

DOC = REPO / "docs" / "configuration.md"
BEGIN, END = "<!-- config-tables:begin -->", "<!-- config-tables:end -->"
# The apps in this repository the doc describes; `hookledger new` adds others to apps/.
SHIPPED_APPS = ("apps.review", "apps.articles", "apps.classify")
FUNCTION_NAMES = ("ingress", "worker", "reconcile")


@dataclass(frozen=True)
class Variable:
    """One row: the variable, the `Config` field holding it (None: not a field) and its
    meaning; `default` overrides the field's default where the code gives another."""

    name: str
    field: str | None
    meaning: str
    default: str | None = None


CORE: tuple[Variable, ...] = (
    Variable(
        "GOOGLE_CLOUD_PROJECT",
        "project",
        "the project; a `demo-` project means local: emulators only, the published local "
        "secrets accepted",
    ),
    Variable(
        "HOOKLEDGER_APPS",
        None,
        "the app modules every function loads, comma-separated ([apps.md](apps.md))",
        default="`apps.review` (functions/main.py)",
    ),
    Variable("TASKS_LOCATION", "location", "the Cloud Tasks queue's location"),
    Variable("TASKS_QUEUE", "queue", "the Cloud Tasks queue"),
    Variable("WORKER_URL", "worker_url", "where every task is sent; https when deployed"),
    Variable("RECONCILE_URL", "reconcile_url", "the reconcile function (local tools call it)"),
    Variable(
        "TASKS_SERVICE_ACCOUNT",
        "tasks_service_account",
        "the account Cloud Tasks signs OIDC tokens as; the worker accepts only it",
    ),
    Variable(
        "SCHEDULER_SERVICE_ACCOUNT",
        "scheduler_service_account",
        "the account Cloud Scheduler signs as; reconcile accepts only it",
    ),
    Variable(
        "OIDC_AUDIENCE",
        "oidc_audience",
        "when set, the worker and reconcile require a bearer token for this audience",
    ),
    Variable("OIDC_CERTS_URL", "oidc_certs_url", "where the OIDC token keys come from"),
    Variable(
        "GITHUB_WEBHOOK_SECRETS",
        "github_webhook_secrets",
        "secret, comma-separated: the first signs, all verify",
    ),
    Variable(
        "GEMINI_WEBHOOK_SECRETS",
        "gemini_webhook_secrets",
        "secret, comma-separated Standard Webhooks secrets",
    ),
    Variable(
        "GEMINI_JWKS_URL",
        "gemini_jwks_url",
        "keys of Gemini's dynamic webhooks (an RS256 JWT); empty turns them off",
    ),
    Variable(
        "GEMINI_WEBHOOK_AUDIENCE",
        "gemini_webhook_audience",
        "the audience a dynamic webhook's JWT must carry (needed to turn them on)",
    ),
    Variable(
        "GEMINI_WEBHOOK_ISSUER", "gemini_webhook_issuer", "when set, the JWT's required issuer"
    ),
    Variable(
        "GEMINI_WEBHOOK_URIS",
        "gemini_webhook_uris",
        "per-job webhook URIs (`webhook_config.uris`, comma-separated) of every batch "
        "hookledger creates; empty: the registered webhooks get the events",
    ),
    Variable(
        "ENVELOPE_KEYS",
        "envelope_keys",
        "secret, comma-separated: the keys signing the ingress → worker envelope",
    ),
    Variable(
        "SIGNATURE_TOLERANCE_S",
        "signature_tolerance_s",
        "accepted webhook timestamp skew (s), both directions",
    ),
    Variable(
        "MAX_BODY_BYTES",
        "max_body_bytes",
        "a larger GitHub body gets 413, decided from Content-Length before it is read",
    ),
    Variable("MAX_GEMINI_BODY_BYTES", "max_gemini_body_bytes", "the same for Gemini"),
    Variable("FIRESTORE_EMULATOR_HOST", "firestore_emulator_host", "`host:port` of the emulator"),
    Variable(
        "CLAIMS_DATABASE",
        "claims_database",
        "the payload store's own Firestore database (bodies over 512 KiB); the ingress's "
        "account may reach only it",
    ),
    Variable(
        "CLOUD_TASKS_EMULATOR_HOST",
        "cloud_tasks_emulator_host",
        "`host:port` of the local Cloud Tasks emulator",
    ),
    Variable(
        "GEMINI_BASE_URL", "gemini_base_url", "the Gemini API (empty: Google's; the simulator)"
    ),
    Variable("GEMINI_API_KEY", "gemini_api_key", "secret: the Gemini API key"),
    Variable(
        "GITHUB_API_URL",
        "github_api_url",
        "GitHub's REST API; its GraphQL endpoint is beside it",
    ),
    Variable(
        "GITHUB_TOKEN",
        "github_token",
        "secret: a personal token, for pushes without `installation.id`",
    ),
    Variable(
        "GITHUB_APP_ID",
        "github_app_id",
        "a GitHub App's client id (or app id); with the key, each push is served with its "
        "installation's token ([github-app.md](github-app.md))",
    ),
    Variable(
        "GITHUB_APP_PRIVATE_KEY",
        "github_app_private_key",
        "secret: the App's private key (PEM; `\\n` escapes accepted), both or neither",
    ),
    Variable(
        "GITHUB_API_VERSION",
        "github_api_version",
        "the GitHub REST API version every request names (`X-GitHub-Api-Version`, a date); "
        "empty: the one hookledger is written for; `2022-11-28` pins the previous one "
        "([github-app.md](github-app.md))",
    ),
    Variable(
        "RECONCILE_GRACE_S",
        "reconcile_grace_s",
        "how long after submission reconcile leaves the webhook to arrive",
    ),
    Variable(
        "RECONCILE_CONCURRENCY", "reconcile_concurrency", "checks a reconcile run makes at once"
    ),
    Variable(
        "RECONCILE_BUDGET_S",
        "reconcile_budget_s",
        "a reconcile run's time budget: no new check starts after it",
    ),
    Variable(
        "RECONCILE_FANOUT_THRESHOLD",
        "reconcile_fanout_threshold",
        "due operations beyond which a run fans out check pages to the worker",
    ),
    Variable(
        "STUCK_AFTER_S",
        "stuck_after_s",
        "pending longer than this logs an `operation_stuck` alert",
    ),
    Variable(
        "GITHUB_SWEEP_GRACE_S",
        "github_sweep_grace_s",
        "how long the GitHub delivery sweep leaves a failed delivery to the ingress, then "
        "to a redelivery, before it acts",
    ),
    Variable(
        "GITHUB_SWEEP_BUDGET_S",
        "github_sweep_budget_s",
        "a sweep run's time budget, half for listing and half for acting (acting also "
        "gets what listing leaves); the next run resumes",
    ),
    Variable(
        "GITHUB_SWEEP_FULL_PAGES",
        "github_sweep_full_pages",
        "pages of every delivery (100 each) a sweep listing reads, newest first, before it "
        "lists only the failed ones (`status=failure`); 0: failed deliveries only",
    ),
    Variable(
        "RECONCILE_BACKOFF_FIRST_S",
        "reconcile_backoff_first_s",
        "first wait (s) before re-checking a still-pending operation; doubles per check",
    ),
    Variable(
        "RECONCILE_BACKOFF_CAP_S",
        "reconcile_backoff_cap_s",
        "the longest wait (s) between checks of one operation (at least the first)",
    ),
    Variable(
        "RECONCILE_BACKOFF_JITTER",
        "reconcile_backoff_jitter",
        "the random fraction of each wait, 0 to 1",
    ),
    Variable(
        "RETENTION_DAYS",
        "retention_days",
        "`expire_at` (Firestore TTL) of settled operations, finished deliveries, run "
        "records and stored bodies (over 512 KiB)",
    ),
    Variable(
        "WORKER_MAX_RETRIES",
        "worker_max_retries",
        "a retryable failure becomes `dead` after this many task retries",
    ),
    Variable(
        "WORKER_TIMEOUT_S",
        "worker_timeout_s",
        "the worker function's timeout; a delivery's lease lasts it plus its margin over "
        "the dispatch deadline",
    ),
    Variable(
        "TASK_DISPATCH_DEADLINE_S",
        "task_dispatch_deadline_s",
        "every task's dispatch deadline: 15–1800 s and below `WORKER_TIMEOUT_S`",
    ),
    Variable(
        "THREADS",
        "worker_concurrency",
        "requests the worker serves at once (its gunicorn threads); Terraform sets it from "
        "`worker_function.concurrency`",
    ),
    Variable("HTTP_TIMEOUT_S", "http_timeout_s", "timeout (s) of outbound HTTP calls"),
    Variable("TASKS_TIMEOUT_S", "tasks_timeout_s", "timeout (s) of Cloud Tasks calls"),
    Variable(
        "OUTBOX_LEASE_S",
        "outbox_lease_s",
        "how long an outbox delivery (a check run, a comment) holds its lease before the "
        "sweep may take it over",
    ),
    Variable(
        "TRACING",
        "tracing",
        "where spans go: `off` (OpenTelemetry not imported), `file` (under `TRACE_DIR`), "
        "`cloudtrace` ([tracing.md](tracing.md))",
    ),
    Variable(
        "TRACE_SAMPLE_RATIO",
        "trace_sample_ratio",
        "the share of traces kept, decided on the trace id; a failed run keeps its spans",
    ),
    Variable("TRACE_DIR", "trace_dir", "the local span store (`TRACING=file`)"),
)

# Read by the local tools only (`make run`, the CLI, the simulator), never by a function.
LOCAL: tuple[tuple[str, str, str], ...] = (
    ("RECONCILE_EVERY_S", "`15`", "`make run`: how often its loop calls reconcile and the sweep"),
    ("LOCAL_GITHUB_AUTH", "App", "`make run`: `token` runs the personal-token path (no App)"),
    ("INGRESS_PORT", "`8080`", "`make run`'s ingress; `hookledger demo` and `send` post there"),
    ("WORKER_PORT", "`8081`", "`make run`'s worker"),
    ("RECONCILE_PORT", "`8082`", "`make run`'s reconcile"),
    ("CLOUD_TASKS_JWKS_PORT", "`8124`", "the Cloud Tasks emulator's token keys"),
    ("CONSOLE_PORT", "`8099`", "the console (`make run`, `hookledger console`)"),
    ("INGRESS_URL", "`http://127.0.0.1:8080`", "where `hookledger demo` and `send` post"),
    ("HOOKLEDGER_LOG_LEVEL", "`WARNING`", "how much the CLI logs on stderr"),
    ("SIM_WEBHOOK_URL", "empty", "where the simulator sends Gemini's webhooks"),
    ("FIRESTORE_EMULATOR_BIN", "beside `gcloud`", "the `cloud_firestore_emulator` script"),
)


def shown(value: Any) -> str:
    """A default as the doc shows it: `code`, or a word for nothing."""
    if value is None:
        return "unset"
    if isinstance(value, tuple | list):
        value = ",".join(str(v) for v in value)
    if isinstance(value, bool):
        value = str(value).lower()
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value)
    return f"`{text}`" if text else "empty"


def make_run_env() -> dict[str, str]:
    """What `make run` gives every function, on its default ports (local/stack.py)."""
    from local.stack import LOCAL_TRACING, MAKE_RUN_APPS, Ports, function_env

    ports = Ports(8686, 8123, 8124, 8090, 8080, 8081, 8082, 8099)
    return {**LOCAL_TRACING, "HOOKLEDGER_APPS": MAKE_RUN_APPS, **function_env(ports, {})}


def set_by_terraform(name: str) -> str:
    from shared.config import PRODUCTION_ENV_NAMES

    found = [fn for fn in FUNCTION_NAMES if name in PRODUCTION_ENV_NAMES.get(fn, ())]
    return ", ".join(found) if found else "—"


def core_table() -> Iterator[str]:
    from shared.config import DEFAULTS

    local = make_run_env()
    yield "| variable | default | `make run` | Terraform sets it on | meaning |"
    yield "| --- | --- | --- | --- | --- |"
    for row in CORE:
        if row.default is not None:
            default = row.default
        elif row.field is not None:
            default = shown(getattr(DEFAULTS, row.field))
        else:
            raise GenerateError(f"{row.name}: neither a Config field nor a default")
        here = local.get(row.name)
        run = "" if here is None or shown(here) == default else shown(here)
        yield (
            f"| `{row.name}` | {default} | {run} | {set_by_terraform(row.name)} | {row.meaning} |"
        )


def app_table() -> Iterator[str]:
    from shared.apps import AppError, load

    yield "| app | variable | type | default | meaning |"
    yield "| --- | --- | --- | --- | --- |"
    for module in SHIPPED_APPS:
        try:
            (record,) = load([module])
        except AppError as exc:
            raise GenerateError(str(exc)) from exc
        for setting in record.settings:
            default = "secret" if setting.secret else shown(setting.default)
            yield (
                f"| {record.name} (`{module}`) | `{setting.name}` | {setting.type} | "
                f"{default} | {setting.help} |"
            )


def local_table() -> Iterator[str]:
    yield "| variable | default | meaning |"
    yield "| --- | --- | --- |"
    for name, default, meaning in LOCAL:
        yield f"| `{name}` | {default} | {meaning} |"


def tables() -> str:
    parts = [
        "### The core",
        "",
        *core_table(),
        "",
        "### The apps that ship with hookledger",
        "",
        *app_table(),
        "",
        "### Local tools only",
        "",
        *local_table(),
    ]
    return "\n".join(parts) + "\n"


def replace_between(text: str, body: str, *, what: str) -> str:
    """`text` with what lies between BEGIN and END replaced by `body`."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise GenerateError(f"{what} must hold one {BEGIN} ... {END} pair")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{body}{END}{tail}"


def generate() -> str:
    return replace_between(DOC.read_text(encoding="utf-8"), tables(), what="docs/configuration.md")


def read_names(env: Mapping[str, str] | None = None) -> set[str]:
    """Every variable `Config.from_env` reads, found by reading through a recording map."""
    from shared.config import Config

    class Recording(dict[str, str]):
        def __init__(self) -> None:
            super().__init__(env or {})
            self.read: set[str] = set()

        def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
            self.read.add(key)
            return super().get(key, default)

        def __getitem__(self, key: str) -> str:
            self.read.add(key)
            return super().__getitem__(key)

        def __contains__(self, key: object) -> bool:
            if isinstance(key, str):
                self.read.add(key)
            return super().__contains__(key)

    recording = Recording()
    Config.from_env(recording)
    return recording.read


def main(argv: Sequence[str] | None = None) -> int:
    return generator_main(
        argv,
        module="tools.config_tables",
        target=DOC,
        description="Write the configuration tables of docs/configuration.md.",
        generate=generate,
        how="`python -m tools.config_tables`",
    )


if __name__ == "__main__":
    sys.exit(main())
