"""`HandlerContext`: what a handler receives besides its event, typed and built lazily.

    ctx.config     Config          the deployment's settings
    ctx.clock      Clock           the injected clock (never datetime.now())
    ctx.ledger     Ledger          operations and deliveries in Firestore
    ctx.firestore  firestore.Client
    ctx.gemini     GeminiGateway
    ctx.github     ContentsClient
    ctx.github_api GitHubApi       any GitHub REST endpoint, with the retries and token
                                   refresh of the clients below
    ctx.comments   CommentsClient  GitHub commit comments (one marked comment per commit)
    ctx.checks     ChecksClient    GitHub check runs (GitHub App only)
    ctx.github_auth GitHubAuth     the credentials every GitHub client shares: GITHUB_TOKEN,
                                   or a GitHub App's installation tokens (one cache per
                                   process); a call names its push's `installation_id`
    ctx.tasks      TaskQueue       the Cloud Tasks queue the worker is fed from
    ctx.payloads   PayloadStore      stored payloads (bodies over 512 KiB)

An app's handler gets the context `for_app(name).for_event(event)`: the same clients,
plus the app's own `settings`, its `results` (limited to the collections it declared),
`submit(...)` (one call for an exactly-once Gemini job; the steps: `submission(...)`,
`submitter(...)`, shared/submission.py) and GitHub calls defaulting to the event's
`subject` (shared/events/subject.py). A deliverer gets it `for_subject` its item's.

Each client is built by its factory on first use and at most once per context, so a
handler that never talks to Gemini never builds (or imports) its client. A property
raises whatever its factory raises (a `ConfigError` for a missing setting).

This module imports nothing heavy (the types are for the checker only): the ingress
loads it at cold start through `shared.handlers`.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar, cast

from shared import apps
from shared.clock import Clock, system_clock
from shared.config import Config
from shared.events.subject import SUBJECT_FIELD, Subject
from shared.kinds import KEYS_FIELD, Deliverers, OperationKind
from shared.sharing.submitter import Submitter
from shared.submission import SubmitDeps

if TYPE_CHECKING:
    from google.cloud import firestore

    from shared.apps import Settings
    from shared.events import Event
    from shared.gemini import GeminiGateway
    from shared.github import CommentsClient, ContentsClient
    from shared.github.auth import GitHubAuth
    from shared.github.checks import ChecksClient
    from shared.github.rest import GitHubApi
    from shared.handoff.payloads import PayloadStore
    from shared.handoff.tasks import TaskQueue
    from shared.ledger import Ledger
    from shared.ledger.results import Results
    from shared.sharing.submitter import Submitter
    from shared.submission import Submitted

T = TypeVar("T")


@dataclass(frozen=True)
class ClientFactories:
    """How to build each client a handler may reach; each is called at most once per context."""

    ledger: Callable[[], Ledger]
    firestore: Callable[[], firestore.Client]
    gemini: Callable[[], GeminiGateway]
    github: Callable[[], ContentsClient]
    tasks: Callable[[], TaskQueue]
    payloads: Callable[[], PayloadStore]
    comments: Callable[[], CommentsClient]
    # None: a personal-token provider from the config's GITHUB_TOKEN (tests, tools).
    github_auth: Callable[[], GitHubAuth] | None = None
    # None: a check-runs client built from the config with `github_auth` (tests, tools).
    checks: Callable[[], ChecksClient] | None = None

    @classmethod
    def from_lookup(cls, ledger: Ledger, lookup: Callable[[str], Any]) -> ClientFactories:
        """Factories that ask `lookup(name)` ("firestore", "gemini", …) for each client.

        The older way to hand clients to a `Worker` (its `services=`); tests use it with a
        dict's `__getitem__`, so a client the test did not provide raises `KeyError`.
        """
        return cls(
            ledger=lambda: ledger,
            firestore=lambda: lookup("firestore"),
            gemini=lambda: lookup("gemini"),
            github=lambda: lookup("github"),
            tasks=lambda: lookup("tasks"),
            payloads=lambda: lookup("payloads"),
            comments=lambda: lookup("comments"),
            checks=lambda: lookup("checks"),
        )


class HandlerContext:
    """The config, clock and clients a handler may use; clients are built on first use."""

    def __init__(
        self, config: Config, clients: ClientFactories, *, clock: Clock = system_clock
    ) -> None:
        self._config = config
        self._clients = clients
        self._clock = clock
        # Reentrant: a factory may itself read another property of this context.
        self._lock = threading.RLock()
        self._built: dict[str, Any] = {}
        self._app = ""
        self._event: Event | None = None
        self._subject: Subject = Subject()

    def for_app(self, app: str) -> HandlerContext:
        """This context as `app`'s handlers and deliverers see it: the same clients (built
        once for all apps), the app's settings, results and submissions."""
        view = copy.copy(self)  # shallow: the clients built and their lock are shared
        view._app = app
        return view

    def for_event(self, event: Event) -> HandlerContext:
        """This context for a handler of `event`: its GitHub calls default to the event's
        installation, repository and issue or pull (`event.subject`), and `submit` submits
        for it. The app's handlers get it so; the CLI builds one for its own event."""
        view = copy.copy(self)
        view._event, view._subject = event, event.subject
        return view

    def for_subject(self, subject: Subject) -> HandlerContext:
        """This context with GitHub calls defaulting to `subject` (an outbox item's)."""
        view = copy.copy(self)
        view._subject = subject
        return view

    @property
    def subject(self) -> Subject:
        """What this context's GitHub calls default to (empty outside an event's run)."""
        return self._subject

    def submit(
        self,
        kind: OperationKind,
        key: str,
        requests: Sequence[tuple[str, str]],
        context: Mapping[str, Any] | None = None,
        *,
        model: str,
        generation_config: Mapping[str, Any] | None = None,
    ) -> Submitted:
        """One Gemini batch for (`kind`, `key`) exactly once, however often the event runs.

        `requests`: (key, prompt) pairs, keys unique; `context`: what the kind's
        write-back, outbox and adopter read from the operation (kept with the event's
        `subject` and the request `keys` in order). Claims the submission, creates the
        batch (or joins the kind's shared one: `kind.sharing`), gives the claim back if
        the create fails and registers it with the delivery's end in one commit. Returns
        the `Done` to return; raises `TransientError` while another attempt holds the
        claim, `Deferred` when this run must seal a shared batch later, and the create's
        errors.
        """
        return self.submission(kind, key).submit(
            requests,
            self._stored_context(context, requests),
            model=model,
            generation_config=generation_config,
            sharing=kind.sharing_under(self.settings if self._app else None),
            end=self._bound_event().end,
        )

    def submission(self, kind: OperationKind, key: str) -> Submitter:
        """The step-by-step submission of (`kind`, `key`) for this context's event: what
        `submit` does in one call, for the rare handler that needs another order (e.g.
        `decided_before_fetch()` with a claim taken at the record)."""
        event = self._bound_event()
        return self.submitter(event, kind.make_tag(key), kind=kind.name,
                              start_items=kind.start_items)  # fmt: skip

    def _stored_context(
        self, context: Mapping[str, Any] | None, requests: Sequence[tuple[str, str]]
    ) -> dict[str, Any]:
        """The app's context, plus what the core reads back: the event's subject, and the
        request keys in order (rows that echo no key are placed by them)."""
        stored = dict(context or {})
        if self._subject and SUBJECT_FIELD not in stored:
            stored[SUBJECT_FIELD] = self._subject.stored()
        stored.setdefault(KEYS_FIELD, [key for key, _ in requests])
        return stored

    def _bound_event(self) -> Event:
        if self._event is None:
            raise LookupError(
                "this context serves no event: use the context a handler gets, or "
                "ctx.for_event(event)"
            )
        return self._event

    @property
    def app(self) -> str:
        """The app this context serves ("" outside an app's handler)."""
        return self._app

    @property
    def settings(self) -> Settings:
        """The app's settings, read from the environment (`shared.apps.Setting`)."""
        return self._app_record().read_settings()

    @property
    def results(self) -> Results:
        """The app's result documents: reads, and `update` in its declared collections."""
        return self.ledger.results.scoped(self._app_record().collections)

    def submitter(
        self,
        event: Event,
        tag: str,
        *,
        kind: str,
        start_items: Callable[[Mapping[str, Any], str, str], Sequence[Mapping[str, Any]]]
        | None = None,
        generation_of: str | None = None,
    ) -> Submitter:
        """The exactly-once submission of the job tagged `tag` for this event's attempt."""
        deps = SubmitDeps(
            ledger=self.ledger,
            gemini=self.gemini,
            kind=kind,
            clock=self.clock,
            create_budget=timedelta(seconds=self._config.create_budget_s),
            start_items=start_items,
            deliver=self.deliver,
        )
        return Submitter(deps, tag, event.delivery_id, event.run, event.claimed, generation_of)

    def _app_record(self) -> Any:
        record = apps.get(self._app) if self._app else None
        if record is None:
            raise LookupError(f"no app is using this context (app {self._app!r} is not loaded)")
        return record

    @property
    def config(self) -> Config:
        return self._config

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def ledger(self) -> Ledger:
        return self._once("ledger", self._clients.ledger)

    @property
    def firestore(self) -> firestore.Client:
        return self._once("firestore", self._clients.firestore)

    @property
    def gemini(self) -> GeminiGateway:
        return self._once("gemini", self._clients.gemini)

    @property
    def github(self) -> ContentsClient:
        return self._once("github", self._clients.github)

    @property
    def tasks(self) -> TaskQueue:
        return self._once("tasks", self._clients.tasks)

    @property
    def payloads(self) -> PayloadStore:
        return self._once("payloads", self._clients.payloads)

    @property
    def comments(self) -> CommentsClient:
        return self._once("comments", self._clients.comments)

    @property
    def checks(self) -> ChecksClient:
        return self._once("checks", self._clients.checks or self._checks)

    def _checks(self) -> ChecksClient:
        from shared.github.checks import ChecksClient

        cfg = self._config
        return ChecksClient(
            cfg.github_api_url,
            auth=self.github_auth,
            timeout_s=min(cfg.http_timeout_s, 10.0),
            api_version=cfg.github_api_version,
        )

    @property
    def deliver(self) -> Callable[[Any], None]:
        """Delivers an outbox item with the deliverer its app registered (shared/kinds)."""
        return Deliverers(self)

    @property
    def github_api(self) -> GitHubApi:
        """Any GitHub REST call: `call(operation_id, **params)` by GitHub's documented
        operation, `request(method, path, …)` by path; the installation and the path
        parameters default to this context's subject."""
        api = self._once("github_api", self._github_api)
        if not self._subject:
            return api
        return api.bound(
            installation_id=self._subject.installation_id, params=self._subject.params()
        )

    def _github_api(self) -> GitHubApi:
        from shared.github.rest import GitHubApi

        cfg = self._config
        return GitHubApi(
            cfg.github_api_url,
            auth=self.github_auth,
            timeout_s=min(cfg.http_timeout_s, 10.0),
            api_version=cfg.github_api_version,
        )

    @property
    def github_auth(self) -> GitHubAuth:
        return self._once("github_auth", self._clients.github_auth or self._token_auth)

    def _token_auth(self) -> GitHubAuth:
        from shared.github.auth import TokenAuth

        return TokenAuth(self._config.github_token)

    def _once(self, name: str, factory: Callable[[], T]) -> T:
        with self._lock:
            if name not in self._built:
                self._built[name] = factory()
            return cast(T, self._built[name])
