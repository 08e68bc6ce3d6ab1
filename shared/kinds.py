"""Operation kinds: everything hookledger knows about one kind of operation, in one module.

An app builds one `OperationKind` per kind of job it starts and registers it through
its `App` (shared/api) at import; the kind then belongs to that app. Settlement,
reconcile's orphan adoption and the outbox sweep look kinds up in this registry; none of
them names a kind.

    OperationKind
      name        what the ledger records in `operations.kind` (e.g. "classify")
      tag         the token in a batch's display name `hookledger:{tag}:{key}`, which
                  marks the batch as ours so reconcile can adopt it after a crash
                  between "create" and "register"
      adopt       (key, batch, gemini) -> ledger context for an adopted orphan
      writeback   (writes, record, result) -> stage result documents in the settling commit,
                  only into the collections its app declared
      outbox      (record, result) -> side effects recorded in the settling commit
      request_keys (record) -> the batch's request keys in request order, which settlement
                  uses to place result rows that echo no key (docs/architecture.md,
                  "Settlement"); None: the context's `keys`, where
                  `HandlerContext.submit` stores them
      needs       context fields an adopted orphan must carry (non-empty) to be
                  registered; without one it is alerted on, never registered half
      sharing     how `HandlerContext.submit` batches it: a `Sharing` (many items per
                  batch), a function of the app's settings giving one or None, or None
                  (a batch per item)
      start_items (context, name, tag) -> outbox items committed with the submission
      interactive a person waits for it (a button pressed): it never shares a batch
                  (`sharing` is refused with it) and its batch is created at once with
                  Gemini's `batch.priority` INTERACTIVE_PRIORITY, above background work

Outbox items are delivered by the deliverer registered for their payload's `"kind"`
(`register_deliverer`); a deliverer must be idempotent (look before acting).

The core's own kinds and deliverers (cancel.py, groups.py) register when the
`shared.settlement` package is imported, which importing this module does first: the
registry itself imports none of them.

A kind nobody registered (one made by `hookledger submit --kind X`) gets `generic(X)`:
adopted from its tag with the row keys, settled with its status, no write-back.
See docs/architecture.md#operation-kinds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from shared.errors import TransientError
from shared.events.subject import SUBJECT_FIELD, Subject

if TYPE_CHECKING:  # nothing heavy at import; these are for the type checker
    from shared.apps import Settings
    from shared.gemini import BatchStatus, BatchSummary, GeminiGateway
    from shared.github import CommentsClient
    from shared.github.checks import ChecksClient
    from shared.github.rest import GitHubApi
    from shared.ledger import Operation, OutboxItem
    from shared.ledger.protocols import DeliveryLedger, ResultWrites

TAG_PREFIX = "hookledger:"
# The `reason` of an item of a shared batch that fails without a batch (its kind's
# write-back sees it in `result.error`): Gemini refused its request, or refused the
# deployment past the hold (shared/sharing/seal.py).
REQUEST_REFUSED = "request_refused"
DEPLOYMENT_REFUSED = "deployment_refused"
# Gemini's `batch.priority` (int64, higher processed first, default 0): background work
# keeps Gemini's default; a batch a person waits for goes ahead of any backlog of it.
# 100, not 1, leaves room between the two for any level added later.
BACKGROUND_PRIORITY = 0
INTERACTIVE_PRIORITY = 100
_TOKEN = re.compile(r"[a-z0-9][a-z0-9._-]{0,39}")

Adopt = Callable[[str, "BatchSummary", "GeminiGateway"], dict[str, Any]]
"""`adopt(key, batch, gemini)`: the ledger context for an orphan tagged with this kind."""
Writeback = Callable[["ResultWrites", "Operation", "BatchStatus"], None]
"""`writeback(writes, record, result)`: stage result documents; runs inside the commit."""
OutboxItems = Callable[["Operation", "BatchStatus"], Sequence[Mapping[str, Any]]]
"""`outbox(record, result)`: payloads to record in the settling commit."""
RequestKeys = Callable[["Operation"], "Sequence[str] | None"]
"""`request_keys(record)`: the request keys in the order they were submitted, or None."""
StartItems = Callable[[Mapping[str, Any], str, str], Sequence[Mapping[str, Any]]]
"""`start_items(context, name, tag)`: outbox items recorded with the submission's winner."""
SharingOf = Callable[["Settings"], "Sharing | None"]
"""`sharing(settings)`: how the kind shares batches under the app's settings now."""


# What `Sharing.fair_by` may key groups by: a GitHub subject's field, or nothing.
FAIR_BY = ("installation", "repository", "")


@dataclass(frozen=True)
class Sharing:
    """How a kind's items share batches: a group is sealed at `max_requests` requests or
    `max_bytes` of prompts, or `window_s` after it opened, whichever comes first. An item
    larger than either limit gets a group of its own. Up to `shards` groups are open at
    once: an item joins the first, and only when its join meets another at that group's
    document (Firestore sustains about one write a second to one document) does it try
    among more, so groups open with the load. `fair_by` keys the groups for fairness:
    "installation" (the default) or "repository" of the item's GitHub subject gives each
    its own groups, and while groups wait for Gemini's quota each key takes its turn
    (shared/ledger/group_queue.py); "" mixes every item in the same groups, which wait
    oldest first."""

    max_requests: int
    window_s: float
    max_bytes: int = 16_000_000  # under Gemini's 20 MB inline limit (larger: an input file)
    shards: int = 1
    fair_by: str = "installation"

    def __post_init__(self) -> None:
        if self.max_requests < 1 or self.window_s < 0 or self.max_bytes < 1 or self.shards < 1:
            raise ValueError(
                "sharing needs max_requests ≥ 1, window_s ≥ 0, max_bytes ≥ 1 and shards ≥ 1, "
                f"got {self}"
            )
        if self.fair_by not in FAIR_BY:
            raise ValueError(f"sharing's fair_by is one of {FAIR_BY}, got {self.fair_by!r}")


@dataclass(frozen=True)
class OperationKind:
    name: str
    tag: str
    adopt: Adopt | None = None
    writeback: Writeback | None = None
    outbox: OutboxItems | None = None
    description: str = field(default="", compare=False)
    request_keys: RequestKeys | None = field(default=None, compare=False)
    # A tag key's push whose check run a re-run's batch takes over (the push's tag), for
    # the adopter of an orphan: None for a batch that is no re-run, or a kind with none.
    generation_of: Callable[[str], str | None] | None = field(default=None, compare=False)
    needs: tuple[str, ...] = field(default=(), compare=False)
    sharing: Sharing | SharingOf | None = field(default=None, compare=False)
    start_items: StartItems | None = field(default=None, compare=False)
    # A person waits for its batches: never shared, created at once, with Gemini's
    # `batch.priority` INTERACTIVE_PRIORITY (`priority`).
    interactive: bool = field(default=False, compare=False)
    # The app that registered the kind (set by `register`); "" for a generic kind.
    app: str = field(default="", compare=False)

    @property
    def priority(self) -> int:
        """Gemini's `batch.priority` for this kind's batches."""
        return INTERACTIVE_PRIORITY if self.interactive else BACKGROUND_PRIORITY

    def make_tag(self, key: str) -> str:
        """The display name that marks a batch of this kind as ours."""
        return f"{TAG_PREFIX}{self.tag}:{key}"

    def sharing_under(self, settings: Settings | None) -> Sharing | None:
        """How this kind shares batches now (None: a batch per item, as for every
        interactive kind)."""
        if self.interactive:
            return None
        if self.sharing is None or not callable(self.sharing):
            return self.sharing
        return self.sharing(settings) if settings is not None else None


class ParsedTag(NamedTuple):
    kind: OperationKind
    key: str


_KINDS: dict[str, OperationKind] = {}
_BY_TAG: dict[str, OperationKind] = {}
_DELIVERERS: dict[str, tuple[Any, str]] = {}  # payload kind → (DeliverWith, app)


def register(kind: OperationKind, app: str = "") -> OperationKind:
    """Register `kind` as `app`'s (once: another kind with the same name or tag, or the
    same kind from another app, is an error)."""
    for token in (kind.name, kind.tag):
        if not _TOKEN.fullmatch(token):
            raise ValueError(f"kind name and tag must match {_TOKEN.pattern}, got {token!r}")
    if not isinstance(kind.interactive, bool):
        raise ValueError(
            f"kind {kind.name!r}: interactive must be True or False, got {kind.interactive!r}"
        )
    if kind.interactive and kind.sharing is not None:
        raise ValueError(
            f"kind {kind.name!r} is interactive: its batches are never shared (a person "
            "waits for them), so it takes no sharing="
        )
    kind = replace(kind, app=app or kind.app)
    for table, key, what in ((_KINDS, kind.name, "kind"), (_BY_TAG, kind.tag, "batch tag")):
        existing = table.get(key)
        if existing is not None and (existing != kind or existing.app != kind.app):
            owner = f" by app {existing.app!r}" if existing.app else ""
            raise ValueError(f"{what} {key!r} is already registered{owner}")
    _KINDS[kind.name] = kind
    _BY_TAG[kind.tag] = kind
    return kind


def get(name: str) -> OperationKind:
    """The registered kind `name`, or the generic behaviour for a kind nobody registered."""
    return _KINDS.get(name) or generic(name)


def registered() -> list[OperationKind]:
    """Every registered kind, by name."""
    return [_KINDS[name] for name in sorted(_KINDS)]


def built_in(token: str) -> bool:
    """True when a registered kind uses `token` as its name or tag (a generic kind may not)."""
    return token in _KINDS or token in _BY_TAG


def parse_tag(display_name: str) -> ParsedTag | None:
    """The kind and key of a batch tagged `hookledger:{tag}:{key}`; None when not ours."""
    if not display_name.startswith(TAG_PREFIX):
        return None
    token, sep, key = display_name.removeprefix(TAG_PREFIX).partition(":")
    if not sep or not key or not _TOKEN.fullmatch(token):
        return None
    return ParsedTag(_BY_TAG.get(token) or generic(token), key)


def generic(name: str) -> OperationKind:
    """A kind with no module: tag = name, adopted with its row keys, no write-back."""
    if not _TOKEN.fullmatch(name):
        raise ValueError(f"kind must match {_TOKEN.pattern}, got {name!r}")
    return OperationKind(
        name=name, tag=name, adopt=_adopt_generic, request_keys=context_keys("keys")
    )


def context_keys(field_name: str) -> RequestKeys:
    """`request_keys` reading the list of strings stored under `field_name` in the context."""

    def keys(record: Operation) -> Sequence[str] | None:
        value = record.context.get(field_name)
        if not isinstance(value, list) or not value:
            return None
        return [str(key) for key in value]

    return keys


# Where `HandlerContext.submit` keeps the request keys, in request order: the placement
# of a kind that names no `request_keys` of its own.
KEYS_FIELD = "keys"
SUBMITTED_KEYS = context_keys(KEYS_FIELD)


def _adopt_generic(key: str, batch: BatchSummary, gemini: GeminiGateway) -> dict[str, Any]:
    return {"display_name": batch.display_name, "adopted": True, "submission": key}


def kind_items(
    items: Iterable[Mapping[str, Any]], context: Mapping[str, Any]
) -> list[Mapping[str, Any]]:
    """A kind's outbox items as recorded: each keeps the subject of the event its operation
    was submitted for (`context["subject"]`), unless it names its own, so its deliverer's
    GitHub calls default to the same installation and repository."""
    subject = context.get(SUBJECT_FIELD)
    if not isinstance(subject, Mapping) or not subject:
        return list(items)
    return [item if SUBJECT_FIELD in item else {**item, SUBJECT_FIELD: dict(subject)}
            for item in items]  # fmt: skip


class DeliveryServices(Protocol):
    """What an outbox deliverer may use; the worker's `HandlerContext` provides it."""

    @property
    def ledger(self) -> DeliveryLedger: ...

    @property
    def github_api(self) -> GitHubApi: ...

    @property
    def comments(self) -> CommentsClient: ...

    @property
    def checks(self) -> ChecksClient: ...

    @property
    def gemini(self) -> GeminiGateway: ...


DeliverWith = Callable[["OutboxItem", DeliveryServices], None]


def register_deliverer(payload_kind: str, app: str = "") -> Callable[[DeliverWith], DeliverWith]:
    """Register how outbox payloads with `{"kind": payload_kind, …}` are delivered."""

    def decorate(fn: DeliverWith) -> DeliverWith:
        existing = _DELIVERERS.get(payload_kind)
        if existing is not None and existing[0] is not fn:
            owner = f" by app {existing[1]!r}" if existing[1] else ""
            raise ValueError(f"an outbox deliverer for {payload_kind!r} is registered{owner}")
        _DELIVERERS[payload_kind] = (fn, app)
        return fn

    return decorate


class NoDeliverer(TransientError):
    """No deliverer is registered for an item's payload kind, or no services were given.

    Transient: a deployment fixes it, so the item backs off and is retried (and alerted
    on, then given up after `OutboxPolicy.give_up_after` failures) rather than given up
    at once as a `PermanentError` would be.
    """


class Deliverers:
    """`deliver(item)` for the ledger: the deliverer registered for the item's payload kind.

    With none registered, or no services to deliver with, it raises `NoDeliverer` naming
    the operation and key: the item stays undelivered, retried and alerted on by the sweep.
    """

    def __init__(self, services: DeliveryServices | None) -> None:
        self._services = services

    def __call__(self, item: OutboxItem) -> None:
        payload = item.payload
        kind = payload.get("kind") if isinstance(payload, Mapping) else None
        found = _DELIVERERS.get(kind) if isinstance(kind, str) else None
        fn = found[0] if found is not None else None
        if fn is None or self._services is None:
            missing = "deliverer" if fn is None else "services"
            raise NoDeliverer(
                f"operation {item.operation}: no outbox {missing} for payload kind {kind!r} "
                f"(item {item.idempotency_key})"
            )
        for_app = getattr(self._services, "for_app", None)  # the deliverer's app's view
        app = found[1] if found is not None else ""
        services = for_app(app) if app and for_app is not None else self._services
        subject = Subject.of_stored(payload.get(SUBJECT_FIELD))
        for_subject = getattr(services, "for_subject", None)
        fn(item, for_subject(subject) if subject and for_subject is not None else services)
