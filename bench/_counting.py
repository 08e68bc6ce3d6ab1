"""Billable operations counted in this process, by wrapping the clients' wire-level methods.

    counter = OperationCounter()
    counter.install()                      # once per process; every client built later counts
    with counter.uncounted():              # the bench's own set-up and checks: not counted
        ...
    before = counter.snapshot(); ...; counter.snapshot() - before  -> Counts

What is counted, and how Firestore bills it (firebase.google.com/docs/firestore/pricing,
"Operations" and "Minimum charges"):
- `firestore_reads`: every document a `BatchGetDocuments` answers (found or missing: a
  missing document is billed as one read), every document a `RunQuery` streams (an empty
  answer is billed as one read), `GetDocument`/`ListDocuments` per document, and an
  aggregation query as one read per 1,000 index entries matched (at least one);
- `firestore_writes` / `firestore_deletes`: each `Write` in a `Commit` or `BatchWrite`
  that Firestore applied (a set, update, create or transform is one write; a delete is one
  delete);
- `firestore_refused_writes`: each `Write` of a commit Firestore refused (a create that
  found its document, a precondition that no longer held: nothing was written), counted
  apart: the pricing page does not say whether a refused commit is billed, and a retried
  or replayed delivery takes the first run's creates and has them refused by design;
- `reads:<collection>`, `writes:<collection>`, `deletes:<collection>`: the same, by the
  collection named in the request (where the cost goes);
- `firestore_commits` (refused ones included), `firestore_transactions` (BeginTransaction,
  not billed): context;
- `tasks_<method>`: each Cloud Tasks RPC by name (CreateTask is what Cloud Tasks bills);
- `gemini_calls`: each HTTP attempt sent to a Gemini API path (`/v1…`, `/upload/`,
  `/download/`) through httpx or httpx2, the transports google-genai speaks through
  (counted at their public `Client.send`, never inside the SDK's private client);
- `github_calls`: each HTTP request through `requests` to a GitHub API path (`/repos/`,
  the App's webhook deliveries, `/app/hook/`, or GraphQL, `/graphql`; minting installation
  tokens is not counted); `github_graphql_calls`: those of them to `/graphql` (GitHub
  limits that endpoint apart).

Calls made on a thread inside `uncounted()` are not counted: a bench runs its own
plumbing (seeding, waiting for a status) on its main thread and the functions on others.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

# The Gemini API's paths (google-genai 3.x: `/v1beta/batches/…`, `/upload/v1beta/files`,
# `/download/v1beta/files/…`); GitHub goes through `requests`, not httpx.
_GEMINI_PATH = re.compile(r"/(?:upload/|download/)?v1(?:beta|alpha)?/")
_FIRESTORE_UNARY = ("get_document", "update_document", "create_document", "delete_document")


class Counts(Counter[str]):
    """Operation counts by name; `-` gives the counts of one window."""

    def __sub__(self, other: Counter[str]) -> Counts:  # type: ignore[override]
        out = Counts()
        for key in set(self) | set(other):
            value = self[key] - other[key]
            if value:
                out[key] = value
        return out


class OperationCounter:
    """Process-wide counts of billable calls; see the module docstring."""

    def __init__(self) -> None:
        self._counts = Counts()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._installed = False

    def add(self, name: str, n: int = 1) -> None:
        if n and not getattr(self._local, "off", False):
            with self._lock:
                self._counts[name] += n

    def snapshot(self) -> Counts:
        with self._lock:
            return Counts(self._counts)

    @contextlib.contextmanager
    def uncounted(self) -> Iterator[None]:
        """Calls made by this thread inside the block are not counted."""
        previous = getattr(self._local, "off", False)
        self._local.off = True
        try:
            yield
        finally:
            self._local.off = previous

    def install(self) -> None:
        """Wrap the Firestore, Cloud Tasks, google-genai and requests methods (idempotent)."""
        if self._installed:
            return
        self._installed = True
        self._wrap_firestore()
        self._wrap_tasks()
        self._wrap_gemini()
        self._wrap_requests()

    # ------------------------------------------------------------------ firestore

    def _wrap_firestore(self) -> None:
        from google.cloud.firestore_v1.services.firestore.client import FirestoreClient

        counter = self

        def commit_counts(request: Any, applied: bool) -> None:
            for write in _field(request, "writes") or []:
                kind = "deletes" if _which(write) == "delete" else "writes"
                name = write.delete if kind == "deletes" else write.update.name
                if not applied:
                    kind = f"refused_{kind}"
                counter.add(f"firestore_{kind}")
                counter.add(f"{kind}:{_collection(name)}")

        def wrap_commit(method: Callable[..., Any], name: str) -> Callable[..., Any]:
            def wrapped(client: Any, request: Any = None, *args: Any, **kwargs: Any) -> Any:
                counter.add(name)
                try:
                    result = method(client, request, *args, **kwargs)
                except Exception:
                    commit_counts(request if request is not None else kwargs, applied=False)
                    raise
                commit_counts(request if request is not None else kwargs, applied=True)
                return result

            return wrapped

        def wrap_stream(method: Callable[..., Any], per: Callable[[Any], int]) -> Any:
            def wrapped(client: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
                reads = 0
                where = _read_collection(args[0] if args else kwargs.get("request"))
                try:
                    for response in method(client, *args, **kwargs):
                        reads += per(response)
                        yield response
                finally:
                    counter.add("firestore_reads", max(reads, 1))  # an empty answer bills 1
                    counter.add(f"reads:{where}", max(reads, 1))

            return wrapped

        def wrap_unary(method: Callable[..., Any], name: str) -> Callable[..., Any]:
            def wrapped(client: Any, *args: Any, **kwargs: Any) -> Any:
                result = method(client, *args, **kwargs)
                if name == "delete_document":
                    counter.add("firestore_deletes")
                elif name == "get_document":
                    counter.add("firestore_reads")
                else:
                    counter.add("firestore_writes")
                return result

            return wrapped

        def wrap_plain(method: Callable[..., Any], name: str) -> Callable[..., Any]:
            def wrapped(client: Any, *args: Any, **kwargs: Any) -> Any:
                counter.add(name)
                return method(client, *args, **kwargs)

            return wrapped

        def list_documents(method: Callable[..., Any]) -> Callable[..., Any]:
            def wrapped(client: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
                reads = 0
                try:
                    for document in method(client, *args, **kwargs):
                        reads += 1
                        yield document
                finally:
                    counter.add("firestore_reads", max(reads, 1))

            return wrapped

        cls: Any = FirestoreClient
        cls.commit = wrap_commit(cls.commit, "firestore_commits")
        cls.batch_write = wrap_commit(cls.batch_write, "firestore_batch_writes")
        cls.batch_get_documents = wrap_stream(cls.batch_get_documents, _found_or_missing)
        cls.run_query = wrap_stream(cls.run_query, lambda r: 1 if _has(r, "document") else 0)
        cls.run_aggregation_query = wrap_stream(cls.run_aggregation_query, _aggregation_reads)
        cls.list_documents = list_documents(cls.list_documents)
        cls.begin_transaction = wrap_plain(cls.begin_transaction, "firestore_transactions")
        cls.rollback = wrap_plain(cls.rollback, "firestore_rollbacks")
        for name in _FIRESTORE_UNARY:
            setattr(cls, name, wrap_unary(getattr(cls, name), name))

    # ------------------------------------------------------------------ the others

    def _wrap_tasks(self) -> None:
        from google.cloud.tasks_v2.services.cloud_tasks.client import CloudTasksClient

        counter = self
        for name in ("create_task", "get_task", "delete_task", "list_tasks", "run_task"):
            method = getattr(CloudTasksClient, name)

            def wrapped(
                client: Any, *args: Any, _method: Any = method, _name: str = name, **kwargs: Any
            ) -> Any:
                counter.add(f"tasks_{_name}")
                return _method(client, *args, **kwargs)

            setattr(CloudTasksClient, name, wrapped)

    def _wrap_gemini(self) -> None:
        import importlib

        counter = self
        for module in ("httpx", "httpx2"):
            try:
                cls: Any = importlib.import_module(module).Client
            except (ImportError, AttributeError):
                continue
            send = cls.send

            def wrapped(client: Any, request: Any, *args: Any, _send: Any = send, **kw: Any) -> Any:
                if _GEMINI_PATH.match(str(getattr(getattr(request, "url", None), "path", ""))):
                    counter.add("gemini_calls")
                return _send(client, request, *args, **kw)

            cls.send = wrapped

    def _wrap_requests(self) -> None:
        import requests

        counter = self
        send = requests.Session.send

        def wrapped(session: Any, request: Any, **kwargs: Any) -> Any:
            url = str(getattr(request, "url", ""))
            if "/repos/" in url or "/app/hook/" in url:
                counter.add("github_calls")
            elif url.endswith("/graphql"):
                counter.add("github_calls")
                counter.add("github_graphql_calls")
            return send(session, request, **kwargs)

        requests.Session.send = wrapped  # type: ignore[method-assign,assignment]


def _field(message: Any, name: str) -> Any:
    if isinstance(message, dict):
        return message.get(name)
    return getattr(message, name, None)


def _collection(document_name: str) -> str:
    """`operations` from `projects/p/databases/d/documents/operations/abc`."""
    tail = str(document_name).split("/documents/", 1)[-1]
    return tail.split("/", 1)[0] or "?"


def _read_collection(request: Any) -> str:
    """The collection a RunQuery / RunAggregationQuery / BatchGetDocuments request reads."""
    try:
        documents = _field(request, "documents")
        if documents:
            return _collection(documents[0])
        query = _field(request, "structured_query") or _field(
            _field(request, "structured_aggregation_query"), "structured_query"
        )
        return str(query.from_[0].collection_id)
    except (AttributeError, IndexError, TypeError):
        return "?"


def _which(write: Any) -> str | None:
    """Which of `update`, `delete`, `transform` a Write proto holds."""
    pb = getattr(write, "_pb", write)
    try:
        return str(pb.WhichOneof("operation"))
    except (AttributeError, ValueError):
        return None


def _has(response: Any, name: str) -> bool:
    pb = getattr(response, "_pb", response)
    try:
        return bool(pb.HasField(name))
    except (AttributeError, ValueError):
        return False


def _found_or_missing(response: Any) -> int:
    return 1 if _has(response, "found") or bool(getattr(response, "missing", "")) else 0


def _aggregation_reads(response: Any) -> int:
    """One read per 1,000 index entries a count matched (the result's largest integer)."""
    if not _has(response, "result"):
        return 0
    values = [
        value.integer_value
        for value in getattr(response.result, "aggregate_fields", {}).values()
        if getattr(value, "integer_value", None) is not None
    ]
    return max(1, math.ceil(max(values, default=0) / 1000))
