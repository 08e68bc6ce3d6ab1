"""Production defaults, built lazily and once per process.

The entry points in `functions/main.py` ask this module for what they need:
`ingress()`, `worker()`, `reconcile_endpoint()`, each an `Endpoint` (shared.entrypoints).
`functions/main.py` calls `check_startup(function)` at import: the configuration and
everything built from secrets (verifiers, sealer, token check) are built then, so a bad
deployment fails to start with one `ConfigError` naming the variable. Clients are built
on first use: the ingress's cold start pays only for what the ingress uses, and the
Firestore client is created on the first stored payload, not before. The heavy
types are imported for the checker only (`TYPE_CHECKING`); each factory imports its
module when it first runs (shared/lazy_imports.py lists each such import and its cost).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from shared import apps, handlers, tracing
from shared.clock import system_clock
from shared.config import FUNCTIONS, Config, ConfigError
from shared.entrypoints.ingress import Ingress
from shared.entrypoints.reconcile import ReconcileEndpoint
from shared.entrypoints.verifiers import build_gemini_verifier as build_gemini_verifier
from shared.entrypoints.verifiers import build_github_verifier as build_github_verifier
from shared.entrypoints.verifiers import secret_named
from shared.handlers.context import ClientFactories, HandlerContext
from shared.handoff.envelope import Envelope, EnvelopeSealer
from shared.handoff.payloads import FirestorePayloadStore, PayloadStore
from shared.handoff.tasks import TaskQueue, make_client
from shared.kinds import Deliverers
from shared.signatures.oidc import OidcVerifier

if TYPE_CHECKING:
    from google.cloud import firestore

    from shared.entrypoints.reconcile import ReconcileEndpoint
    from shared.entrypoints.worker import Worker
    from shared.gemini import GeminiGateway
    from shared.github import CommentsClient, ContentsClient
    from shared.github.app import AppCredentials
    from shared.github.auth import GitHubAuth
    from shared.github.checks import ChecksClient
    from shared.ledger import Ledger
    from shared.reconcile import Reconciler
    from shared.recovery import DeliverySweep
    from shared.signatures.oidc import OidcVerifier

T = TypeVar("T")
_BOXES: list[list[Any]] = []


def once(factory: Callable[[], T]) -> Callable[[], T]:
    """A thread-safe, lazily evaluated singleton (`reset` forgets them all)."""
    lock = threading.Lock()
    box: list[T] = []
    _BOXES.append(box)

    def get() -> T:
        if not box:
            with lock:
                if not box:
                    box.append(factory())
        return box[0]

    return get


def reset() -> None:
    """Forget every built object, so the next request reads the environment again (tests)."""
    for box in _BOXES:
        box.clear()


@once
def config() -> Config:
    return Config.from_env()


@once
def firestore_client() -> firestore.Client:
    from google.cloud import firestore  # heavy: only the paths that need it pay

    return firestore.Client(project=config().project)


@once
def payloads_firestore_client() -> firestore.Client:
    """The client of the payload store's own database (`CLAIMS_DATABASE`), never the ledger's.

    The ingress builds only this one: its account is granted this database alone
    (docs/architecture.md, "Data model").
    """
    from google.cloud import firestore

    cfg = config()
    return firestore.Client(project=cfg.project, database=cfg.claims_database)


class _LazyFirestorePayloads:
    """A payload store that builds its Firestore client on first use (rare: bodies > 512 KiB)."""

    def __init__(self) -> None:
        self._store = once(self._build)

    @staticmethod
    def _build() -> PayloadStore:
        return FirestorePayloadStore(payloads_firestore_client(), clock=system_clock)

    def put(self, key: str, data: bytes) -> str:
        return self._store().put(key, data)

    def get(self, ref: str) -> bytes:
        return self._store().get(ref)


def build_sealer(cfg: Config) -> EnvelopeSealer:
    """The envelope sealer; `ConfigError` naming ENVELOPE_KEYS if a key is unusable."""
    with secret_named("ENVELOPE_KEYS"):
        return EnvelopeSealer(
            cfg.envelope_keys, clock=system_clock, payloads=_LazyFirestorePayloads()
        )


@once
def task_queue() -> TaskQueue:
    cfg = config()
    client = make_client(cfg.cloud_tasks_emulator_host or None)
    return TaskQueue(client, cfg.queue_path, timeout_s=cfg.tasks_timeout_s)


@once
def ingress() -> Ingress:
    """The ingress, with its secrets checked as it is built (`check_startup` builds it)."""
    handlers.load_apps(config().apps)  # registers the apps' (source, event) pairs

    cfg = config()
    return Ingress(
        cfg,
        github=build_github_verifier(cfg),
        gemini=build_gemini_verifier(cfg),
        sealer=build_sealer(cfg),
        queue=task_queue,
        clock=system_clock,
    )


@once
def ledger() -> Ledger:
    from shared.ledger import Ledger, OutboxPolicy

    cfg = config()
    return Ledger(
        firestore_client(),
        clock=system_clock,
        grace=timedelta(seconds=cfg.reconcile_grace_s),
        retention=timedelta(days=cfg.retention_days),
        # The lease must hold 3 comment requests (docs/architecture.md, "Outbox").
        outbox_policy=OutboxPolicy(
            lease=timedelta(seconds=cfg.outbox_lease_s),
            call_timeout=timedelta(seconds=_comments_timeout_s(cfg)),
        ),
    )


@once
def gemini() -> GeminiGateway:
    from shared.gemini import GeminiGateway, make_client

    cfg = config()
    return GeminiGateway(
        make_client(
            cfg.gemini_api_key,
            cfg.gemini_base_url,
            timeout_s=cfg.http_timeout_s,
            deadline_s=gemini_call_deadline_s(cfg),
        ),
        webhook_uris=cfg.gemini_webhook_uris,
    )


def gemini_call_deadline_s(cfg: Config) -> float:
    """The longest one Gemini call may take, the SDK's retries included: a reconcile check
    started just before the run's budget ends must finish within the drain (DRAIN_S), and
    never less than one attempt (docs/gemini-coverage.md, "Errors")."""
    from shared.reconcile.settings import DRAIN_S

    return max(cfg.http_timeout_s, DRAIN_S)


def build_github_auth(cfg: Config) -> GitHubAuth:
    """GITHUB_TOKEN's provider, or with GITHUB_APP_ID a GitHub App's (installation tokens,
    GITHUB_TOKEN for a push that names no installation). `ConfigError` naming
    GITHUB_APP_PRIVATE_KEY when the key is unusable (never its value)."""
    from shared.github.auth import TokenAuth

    token = TokenAuth(cfg.github_token)
    if not cfg.github_app_id:
        return token
    from shared.github.app import AppAuth

    return AppAuth(
        app_credentials(cfg),
        cfg.github_api_url,
        timeout_s=cfg.http_timeout_s,
        clock=system_clock,
        fallback=token,
        api_version=cfg.github_api_version,
    )


def app_credentials(cfg: Config) -> AppCredentials:
    """The GitHub App's id and key (GITHUB_APP_ID is set); `ConfigError` naming
    GITHUB_APP_PRIVATE_KEY when the key is unusable (never its value)."""
    from shared.github.app import AppCredentials, AppKeyError

    try:
        return AppCredentials.from_pem(cfg.github_app_id, cfg.github_app_private_key)
    except AppKeyError as exc:
        raise ConfigError(f"GITHUB_APP_PRIVATE_KEY is unusable: {exc}") from None


@once
def github_auth() -> GitHubAuth:
    """The one GitHub credentials provider of this process: every client shares its
    installation-token cache."""
    return build_github_auth(config())


@once
def github() -> ContentsClient:
    from shared.github import ContentsClient

    cfg = config()
    return ContentsClient(
        cfg.github_api_url,
        auth=github_auth(),
        timeout_s=cfg.http_timeout_s,
        api_version=cfg.github_api_version,
    )


@once
def comments() -> CommentsClient:
    """GitHub commit comments, sized so one worst-case publish fits in the outbox lease."""
    from shared.github import CommentsClient

    cfg = config()
    return CommentsClient(
        cfg.github_api_url,
        auth=github_auth(),
        timeout_s=_comments_timeout_s(cfg),
        attempts=2,
        max_pages=10,
        api_version=cfg.github_api_version,
    )


@once
def checks() -> ChecksClient:
    """GitHub check runs, each request as short as a comment's: a publish fits the lease."""
    from shared.github.checks import ChecksClient

    cfg = config()
    return ChecksClient(
        cfg.github_api_url,
        auth=github_auth(),
        timeout_s=_comments_timeout_s(cfg),
        api_version=cfg.github_api_version,
    )


def _comments_timeout_s(cfg: Config) -> float:
    """One GitHub comment request's timeout; the outbox lease holds several."""
    return min(cfg.http_timeout_s, 10.0)


@once
def payload_store() -> PayloadStore:
    """The store of large payloads; its Firestore client is built on first use."""
    return _LazyFirestorePayloads()


@once
def handler_context() -> HandlerContext:
    """What the worker's handlers receive: each client built on a handler's first use."""
    clients = ClientFactories(
        ledger=ledger,
        firestore=firestore_client,
        gemini=gemini,
        github=github,
        tasks=task_queue,
        payloads=payload_store,
        comments=comments,
        github_auth=github_auth,
        checks=checks,
    )
    return HandlerContext(config(), clients, clock=system_clock)


def _oidc(allowed_caller: str) -> OidcVerifier | None:
    """The check on a Google-signed caller's token; None when OIDC_AUDIENCE is not set."""
    cfg = config()
    if not cfg.oidc_audience:
        return None
    return OidcVerifier(cfg.oidc_audience, cfg.oidc_certs_url, allowed_caller)


@once
def worker() -> Worker:
    """The worker, checking Cloud Tasks' token when OIDC_AUDIENCE is set."""
    from shared.entrypoints.worker import Worker

    handlers.load_apps(config().apps)

    cfg = config()
    return Worker(
        cfg,
        sealer=build_sealer(cfg),
        ledger=ledger(),
        context=handler_context(),
        oidc=_oidc(cfg.tasks_service_account),
        clock=system_clock,
    )


@once
def reconciler() -> Reconciler:
    """The Reconciler on this process's clients; it fans out pages to the worker."""
    from shared.reconcile import CHECK_PAGE_EVENT, CHECK_PAGE_SOURCE, Reconciler, TaskPageEnqueuer

    cfg = config()
    handlers.load_apps(cfg.apps)  # the kinds and deliverers settlement and the sweep use
    sealer = build_sealer(cfg)

    def seal(task_id: str, payload: bytes) -> bytes:
        return sealer.seal(
            Envelope(
                source=CHECK_PAGE_SOURCE,
                event=CHECK_PAGE_EVENT,
                delivery_id=task_id,
                received_at=system_clock(),
                headers={},
                body=payload,
            )
        )

    enqueue = TaskPageEnqueuer(
        task_queue(),
        cfg.worker_url,
        seal,
        oidc_service_account=cfg.tasks_service_account or None,
        oidc_audience=cfg.worker_url,
        dispatch_deadline_s=cfg.task_dispatch_deadline_s,
    )
    return Reconciler.from_config(
        cfg, ledger(), gemini(), enqueue_page=enqueue, deliver=Deliverers(handler_context())
    )


@once
def delivery_sweep() -> DeliverySweep | None:
    """The GitHub delivery sweep (shared/recovery); None without a GitHub App: only an
    App's deliveries can be listed with its JWT (docs/architecture.md, "Reconcile")."""
    cfg = config()
    if not cfg.github_app_id:
        return None
    from shared.github.hook_deliveries import HookDeliveriesClient
    from shared.github.transport import github_policy
    from shared.recovery import DeliverySweep, SweepSettings, WorkerHandOff

    handlers.load_apps(cfg.apps)  # which GitHub events an app takes
    client = HookDeliveriesClient(
        cfg.github_api_url,
        app_credentials(cfg),
        timeout_s=cfg.http_timeout_s,
        policy=github_policy(attempts=1),  # a run stops and resumes rather than waits
        api_version=cfg.github_api_version,
    )
    hand_off = WorkerHandOff(cfg, build_sealer(cfg), task_queue, system_clock)
    return DeliverySweep(ledger(), client, hand_off, system_clock, SweepSettings.from_config(cfg))


@once
def reconcile_oidc() -> OidcVerifier | None:
    """The check on Cloud Scheduler's token; None when OIDC_AUDIENCE is not set."""
    return _oidc(config().scheduler_service_account)


@once
def reconcile_endpoint() -> ReconcileEndpoint:
    """The reconcile function: it builds the reconciler on the first authorized run."""
    return ReconcileEndpoint(reconciler, oidc=reconcile_oidc(), sweep=delivery_sweep)


def check_startup(function: str) -> None:
    """Build `function`'s configuration and everything made from its secrets, now.

    `functions/main.py` calls this at import, so a deployment with a missing or unusable
    setting fails to start instead of answering 500 to every request. Raises
    `ConfigError` naming the first such variable. Anything built earlier in this process
    is forgotten first (an import is a start; tests load the module many times). Clients
    (Cloud Tasks, Firestore, Gemini) are still built on first use.
    """
    if function not in FUNCTIONS:
        served = ", ".join(FUNCTIONS)
        raise ConfigError(f"FUNCTION_TARGET must be one of {served}, got {function!r}")
    reset()
    cfg = config()
    if cfg.function != function:
        raise ConfigError(f"FUNCTION_TARGET is {cfg.function!r} but {function!r} is being served")
    tracing.configure(cfg)  # off: nothing of OpenTelemetry is imported
    apps.check_settings(handlers.load_apps(cfg.apps))  # an app that fails stops the function here
    if function == "ingress":
        ingress()
        return
    build_sealer(cfg)
    github_auth()  # a GitHub App's key is checked now, not on the first push
    if function == "worker":
        _oidc(cfg.tasks_service_account)
    else:
        reconcile_oidc()
