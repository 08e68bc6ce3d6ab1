"""Configuration, read once from the environment.

Every name here is part of the deployment contract: Terraform sets the same names
on each function (`PRODUCTION_ENV_NAMES` below is what its tests check), and the
defaults are the local ones (docs/architecture.md, "Contracts"). A bad value fails at
start-up with a `ConfigError` naming the variable: each value is read and parsed in
shared/config_readers.py, and the settings are checked together in
shared/config_checks.py; `Config` and every name callers import stay here.

A deployed function knows which one it is from `FUNCTION_TARGET` (set by Cloud Functions
and by functions-framework before `functions/main.py` is imported). Outside a `demo-`
project that name decides what is required, so a deployment missing a guard fails to
start instead of running open:

    ingress     GITHUB_WEBHOOK_SECRETS, GEMINI_WEBHOOK_SECRETS, ENVELOPE_KEYS,
                TASKS_SERVICE_ACCOUNT (the worker refuses tasks without its token),
                an https WORKER_URL; while GEMINI_JWKS_URL is set (its default: dynamic
                webhooks on), GEMINI_WEBHOOK_AUDIENCE and an https GEMINI_JWKS_URL
    worker      ENVELOPE_KEYS, OIDC_AUDIENCE, TASKS_SERVICE_ACCOUNT, an https OIDC_CERTS_URL
    reconcile   ENVELOPE_KEYS, OIDC_AUDIENCE, SCHEDULER_SERVICE_ACCOUNT,
                TASKS_SERVICE_ACCOUNT (its fan-out tasks), an https WORKER_URL and OIDC_CERTS_URL

Gemini dynamic webhooks (an RS256 JWT, keys from GEMINI_JWKS_URL) are on while
GEMINI_JWKS_URL is non-empty (default: Google's published JWKS; set it to the empty
string to turn them off) and GEMINI_WEBHOOK_AUDIENCE is set (`dynamic_webhooks`). In a
`demo-` project an unset audience leaves them off, so a local stack never fetches keys
from Google.

A tool (the CLI, a test) has no function: it gets no published local secret outside a
`demo-` project either, only an empty list where a secret is unset.

GitHub credentials: GITHUB_TOKEN (a personal token, optional), or a GitHub App:
GITHUB_APP_ID (its client id, recommended, or app id) and GITHUB_APP_PRIVATE_KEY (its
RS256 private key in PEM; Secret Manager in production), both or neither. With an App,
a push that carries `installation.id` is served with that installation's token
(docs/architecture.md, "GitHub App"); the key is checked when the worker and reconcile
start (`shared.entrypoints.runtime.check_startup`). Every GitHub REST request names the
API version it is written for; GITHUB_API_VERSION (a date, e.g. 2022-11-28) pins another
(docs/github-app.md, "REST API version").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

# The deadline ranges live with the checks; re-exported, as every constant is here.
from shared.config_checks import MAX_DISPATCH_DEADLINE_S as MAX_DISPATCH_DEADLINE_S
from shared.config_checks import MAX_WORKER_TIMEOUT_S as MAX_WORKER_TIMEOUT_S
from shared.config_checks import MIN_DISPATCH_DEADLINE_S as MIN_DISPATCH_DEADLINE_S
from shared.config_checks import check_deadlines, check_deployed, check_github_app
from shared.config_readers import read_fields
from shared.errors import ConfigError as ConfigError  # re-exported: callers import it here

# Well-known local secrets: used only for a `demo-` project (Firebase's emulator-only prefix).
LOCAL_GITHUB_SECRET = "local-github-secret"  # noqa: S105
# Where Gemini publishes the keys of its dynamic-webhook JWTs (the "Webhooks" guide).
DEFAULT_GEMINI_JWKS_URL = "https://generativelanguage.googleapis.com/.well-known/jwks.json"
LOCAL_GEMINI_SECRET = "whsec_bG9jYWwtZ2VtaW5pLXNlY3JldC0wMTIzNDU2Nzg5"  # noqa: S105
LOCAL_ENVELOPE_KEY = "local-envelope-key"
# The account the local Cloud Tasks emulator signs as, and the local worker accepts.
LOCAL_TASKS_SERVICE_ACCOUNT = "tasks-invoker@demo-hookledger.iam.gserviceaccount.com"

GOOGLE_CERTS_URL = "https://www.googleapis.com/oauth2/v3/certs"
# Deadline of a single Firestore read or write: the ledger's reads, creates and queries
# (its default `timeout_s`) and the payload store's calls.
FIRESTORE_TIMEOUT_S = 15.0
# The functions `functions/main.py` serves; `Config.function` is one of them, or "" for a tool.
FUNCTIONS = ("ingress", "worker", "reconcile")


@dataclass(frozen=True)
class Config:
    project: str = "demo-hookledger"
    location: str = "us-central1"
    queue: str = "hookledger-deliveries"
    worker_url: str = "http://127.0.0.1:8081/"
    reconcile_url: str = "http://127.0.0.1:8082/"
    # OIDC: the account Cloud Tasks signs tokens as, and the audience the worker expects.
    tasks_service_account: str = ""
    scheduler_service_account: str = ""
    oidc_audience: str = ""
    oidc_certs_url: str = GOOGLE_CERTS_URL
    github_webhook_secrets: tuple[str, ...] = (LOCAL_GITHUB_SECRET,)
    gemini_webhook_secrets: tuple[str, ...] = (LOCAL_GEMINI_SECRET,)
    gemini_jwks_url: str = DEFAULT_GEMINI_JWKS_URL
    # The `aud` a dynamic webhook's JWT must carry (e.g. the ingress's /gemini URL).
    gemini_webhook_audience: str = ""
    # The `iss` it must carry; empty: not checked.
    gemini_webhook_issuer: str = ""
    # Per-job webhook URIs (`webhook_config.uris`) for the batches hookledger creates: the
    # ingress's /gemini route; empty: the project's registered webhooks get the events.
    gemini_webhook_uris: tuple[str, ...] = ()
    envelope_keys: tuple[str, ...] = (LOCAL_ENVELOPE_KEY,)
    signature_tolerance_s: int = 300
    max_body_bytes: int = 26_214_400
    # Gemini notifications are thin JSON (an event type and an id): no reason to take more.
    max_gemini_body_bytes: int = 65_536
    firestore_emulator_host: str = ""
    # The payload store's own Firestore database (bodies over 512 KiB; its name is the
    # claim-check pattern's): the ingress's account may reach only it.
    claims_database: str = "hookledger-claims"
    cloud_tasks_emulator_host: str = ""
    gemini_base_url: str = ""
    gemini_api_key: str = ""
    github_api_url: str = "https://api.github.com"
    github_token: str = field(default="", repr=False)
    # A GitHub App: its client id (or app id), the JWT's `iss`, and its private key (PEM).
    github_app_id: str = ""
    github_app_private_key: str = field(default="", repr=False)
    # The REST API version GitHub requests name (`X-GitHub-Api-Version`, a date); empty: the
    # one hookledger is written for, shared/github/transport.py's API_VERSION.
    github_api_version: str = ""
    # The app modules this deployment loads (`HOOKLEDGER_APPS`, shared/apps.py).
    apps: tuple[str, ...] = ()
    # The reconcile defaults below are the only copy: `ReconcileSettings`, `Ledger` and the
    # payload store take theirs from `DEFAULTS`, and tests/terraform/ checks variables.tf's.
    # How long a new operation waits for its webhook before reconcile looks at it.
    reconcile_grace_s: int = 90
    # Checks a reconcile run makes at once.
    reconcile_concurrency: int = 8
    # A run's time budget: it starts no new check after this long.
    reconcile_budget_s: int = 240
    # Due operations beyond which a run fans out check pages to the worker.
    reconcile_fanout_threshold: int = 500
    # Pending longer than this raises `operation_stuck` (below Gemini's 48 h expiry).
    stuck_after_s: int = 6 * 3600
    # The GitHub delivery sweep (shared/recovery): how long a failed delivery is left to
    # the ingress and a redelivery before the sweep acts, and a run's time budget.
    github_sweep_grace_s: int = 120
    github_sweep_budget_s: int = 120
    # Pages of every delivery a sweep listing reads, newest first, before it lists only
    # the failed ones (GitHub's `status=failure`): 0 lists failed deliveries only.
    github_sweep_full_pages: int = 10
    # Reconcile's per-operation backoff between checks of a still-pending operation.
    reconcile_backoff_first_s: float = 30.0
    reconcile_backoff_cap_s: float = 30 * 60.0
    reconcile_backoff_jitter: float = 0.5
    # TTL of settled operations, finished deliveries, run records and stored bodies (over 512 KiB).
    retention_days: int = 14
    # Retryable failures before a delivery is `dead` (below the queue's max_attempts).
    worker_max_retries: int = 20
    # The worker function's timeout (Terraform's worker_function.timeout_seconds), and the
    # deadline every task carries: below it, so Cloud Tasks' verdict on an attempt comes from
    # our own setting, never the queue's 10 min default (docs/architecture.md, "Delivery lease").
    worker_timeout_s: int = 540
    task_dispatch_deadline_s: int = 480
    # Requests one worker instance serves at once: Terraform's worker_function.concurrency,
    # given to the worker as THREADS, the gunicorn threads functions-framework serves it
    # with (Cloud Functions' concurrency guide asks for THREADS = concurrency in Python).
    # `make run` and the benches serve the local worker with it too (local/functions_server.py).
    worker_concurrency: int = 8
    http_timeout_s: float = 30.0
    tasks_timeout_s: float = 5.0
    # How long one outbox delivery's lease holds (a crashed deliverer's item waits this long
    # before the sweep takes it over); at least 3 of its GitHub calls (OutboxPolicy).
    outbox_lease_s: float = 300.0
    # Tracing (shared/tracing): off, file (JSON lines under trace_dir: the local console
    # reads them) or cloudtrace; the share of traces kept (errors and dead deliveries always).
    tracing: str = "off"
    trace_sample_ratio: float = 0.1
    trace_dir: str = ".local/traces"
    # Which deployed function this configuration is for ("" = a tool: the CLI, a test).
    function: str = ""

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, function: str | None = None
    ) -> Config:
        """Build from `env` (default `os.environ`); unset names keep their defaults.

        `function` defaults to `FUNCTION_TARGET` when it names one of `FUNCTIONS`. Raises
        `ConfigError` naming the first variable that is malformed, or missing for that
        function outside a `demo-` project (see the module docstring).
        """
        env = os.environ if env is None else env
        d = cls()
        project = env.get("GOOGLE_CLOUD_PROJECT", d.project)
        if function is None:
            target = env.get("FUNCTION_TARGET", "")
            function = target if target in FUNCTIONS else ""
        reads = frozenset(PRODUCTION_ENV_NAMES.get(function, ()))
        fields = read_fields(env, reads=reads, local=project.startswith("demo-"), defaults=d)
        return cls(project=project, **fields, function=function)

    def __post_init__(self) -> None:
        if self.function not in ("", *FUNCTIONS):
            raise ConfigError(f"FUNCTION_TARGET must be one of {', '.join(FUNCTIONS)}")
        check_deadlines(self)
        check_github_app(self)
        deployed = not self.project.startswith("demo-")
        if deployed and self.oidc_audience and not self.tasks_service_account:
            # Any Google-signed token for the audience would pass: pin the caller.
            raise ConfigError("OIDC_AUDIENCE is set but TASKS_SERVICE_ACCOUNT is not")
        if deployed:
            check_deployed(self)

    @property
    def dynamic_webhooks(self) -> bool:
        """True when the ingress verifies Gemini dynamic webhooks (module docstring)."""
        return bool(self.gemini_jwks_url and self.gemini_webhook_audience)

    @property
    def is_local(self) -> bool:
        """True for a `demo-` project: emulators only, local secrets allowed."""
        return self.project.startswith("demo-")

    @property
    def delivery_lease_s(self) -> int:
        """How long the worker's lease on a delivery lasts: the worker timeout plus the
        margin the dispatch deadline keeps below it (docs/architecture.md, "Delivery lease")."""
        return self.worker_timeout_s + (self.worker_timeout_s - self.task_dispatch_deadline_s)

    @property
    def create_budget_s(self) -> float:
        """The lease an attempt must have left to send a batch create: the call's own
        timeout and a margin, so the create ends before another attempt may take over
        (docs/architecture.md, "One winner per push")."""
        return self.http_timeout_s + CREATE_MARGIN_S

    @property
    def queue_path(self) -> str:
        return f"projects/{self.project}/locations/{self.location}/queues/{self.queue}"


# Added to HTTP_TIMEOUT_S: what a batch create may take beyond its own timeout.
CREATE_MARGIN_S = 5.0


# Every variable the deployed functions read; Terraform's tests check each is wired.
PRODUCTION_ENV_NAMES: dict[str, tuple[str, ...]] = {
    "ingress": (
        "GOOGLE_CLOUD_PROJECT",
        "HOOKLEDGER_APPS",
        "TASKS_LOCATION",
        "TASKS_QUEUE",
        "WORKER_URL",
        "TASKS_SERVICE_ACCOUNT",
        "GITHUB_WEBHOOK_SECRETS",
        "GEMINI_WEBHOOK_SECRETS",
        "GEMINI_JWKS_URL",
        "GEMINI_WEBHOOK_AUDIENCE",
        "GEMINI_WEBHOOK_ISSUER",
        "ENVELOPE_KEYS",
        "SIGNATURE_TOLERANCE_S",
        "MAX_BODY_BYTES",
        "MAX_GEMINI_BODY_BYTES",
        "CLAIMS_DATABASE",
        # Every task it creates carries the dispatch deadline, checked against the timeout.
        "TASK_DISPATCH_DEADLINE_S",
        "WORKER_TIMEOUT_S",
        # Where its spans go and the share of traces kept (shared/tracing).
        "TRACING",
        "TRACE_SAMPLE_RATIO",
    ),
    "worker": (
        "GOOGLE_CLOUD_PROJECT",
        "HOOKLEDGER_APPS",
        "OIDC_AUDIENCE",
        "TASKS_SERVICE_ACCOUNT",
        "ENVELOPE_KEYS",
        "GEMINI_API_KEY",
        # The batches it creates name the ingress as their per-job webhook.
        "GEMINI_WEBHOOK_URIS",
        "GITHUB_TOKEN",
        "GITHUB_APP_ID",
        "GITHUB_APP_PRIVATE_KEY",
        "GITHUB_API_VERSION",
        "RETENTION_DAYS",
        "WORKER_MAX_RETRIES",
        # The delivery lease lasts the timeout plus the deadline's margin below it.
        "WORKER_TIMEOUT_S",
        "TASK_DISPATCH_DEADLINE_S",
        # Its server's threads: as many as the requests Cloud Run sends one instance at once.
        "THREADS",
        # The worker registers with the grace and runs the check pages reconcile fans out.
        "RECONCILE_GRACE_S",
        "RECONCILE_CONCURRENCY",
        "RECONCILE_BUDGET_S",
        "RECONCILE_FANOUT_THRESHOLD",
        "STUCK_AFTER_S",
        "RECONCILE_BACKOFF_FIRST_S",
        "RECONCILE_BACKOFF_CAP_S",
        "RECONCILE_BACKOFF_JITTER",
        "CLAIMS_DATABASE",
        # Where its spans go and the share of traces kept (shared/tracing).
        "TRACING",
        "TRACE_SAMPLE_RATIO",
    ),
    "reconcile": (
        "GOOGLE_CLOUD_PROJECT",
        "HOOKLEDGER_APPS",
        "TASKS_LOCATION",
        "TASKS_QUEUE",
        "WORKER_URL",
        "TASKS_SERVICE_ACCOUNT",
        "SCHEDULER_SERVICE_ACCOUNT",
        "OIDC_AUDIENCE",
        "ENVELOPE_KEYS",
        "GEMINI_API_KEY",
        # Reconcile settles too, and its outbox sweep publishes on GitHub.
        "GITHUB_TOKEN",
        "GITHUB_APP_ID",
        "GITHUB_APP_PRIVATE_KEY",
        "GITHUB_API_VERSION",
        "RECONCILE_GRACE_S",
        "RECONCILE_CONCURRENCY",
        "RECONCILE_BUDGET_S",
        "RECONCILE_FANOUT_THRESHOLD",
        "STUCK_AFTER_S",
        "RETENTION_DAYS",
        "RECONCILE_BACKOFF_FIRST_S",
        "RECONCILE_BACKOFF_CAP_S",
        "RECONCILE_BACKOFF_JITTER",
        # The GitHub delivery sweep it runs on its own schedule (shared/recovery).
        "GITHUB_SWEEP_GRACE_S",
        "GITHUB_SWEEP_BUDGET_S",
        "GITHUB_SWEEP_FULL_PAGES",
        # Its check pages go through the payload store when over 512 KiB.
        "CLAIMS_DATABASE",
        # Its check-page tasks carry the dispatch deadline too.
        "TASK_DISPATCH_DEADLINE_S",
        "WORKER_TIMEOUT_S",
        # Where its spans go and the share of traces kept (shared/tracing).
        "TRACING",
        "TRACE_SAMPLE_RATIO",
    ),
}


# Every default in one value: settings objects and constructors (`ReconcileSettings`,
# `Ledger`, the claim store) read theirs here, so a default changes in one place.
DEFAULTS = Config()
