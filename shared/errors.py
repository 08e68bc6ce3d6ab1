"""The one error tree: every error hookledger raises on purpose descends from `HookledgerError`.

Whether trying again may help is a property of the error, decided where it is raised,
and read everywhere else (the worker's 503-or-dead, reconcile's defer, the apps'
handlers, the CLI's exit code) through `retryable(exc)`:

    HookledgerError                  root; `retryable` is False unless a subclass says so
    ├── TransientError               a later attempt may succeed (timeout, 429/5xx, contention)
    │   ├── ledger: ContentionError, StoreUnavailable, WritebackFailed, OutboxDeliveryFailed;
    │   │           Conflict (commits: re-read and decide again)
    │   ├── gemini: GeminiUnavailable          github: GitHubUnavailable
    │   ├── payloads: PayloadUnavailable           tasks: EnqueueError
    │   ├── signatures: KeysUnavailable (our key fetch failed, not the sender)
    │   ├── oidc: OidcUnavailable (503: our certs fetch failed)
    │   └── retry: RetriesExhausted (this call's attempts ran out)
    ├── PermanentError               no retry can fix it: record it and stop
    │   ├── ledger: InvalidArgument, AmbiguousId, UnknownDelivery
    │   ├── gemini: GeminiNotFound, GeminiRejected   github: GitHubRejected, InvalidCall
    │   ├── claims: PayloadNotFound, PayloadCorrupt, PayloadConflict
    │   ├── signatures: VerificationError, SecretError; envelope: EnvelopeError, EnvelopeTooLarge
    │   └── oidc: Unauthorized (401), Forbidden (403)
    ├── Deferred                     not yet, and not a failure: run again `after_s` later
    └── ConfigError                  a deployment setting is missing or malformed (start-up)
        └── AppError                 an app cannot be loaded or clashes with another

A class is transient or permanent, never both, and its `retryable` agrees with its
branch; a module base (`LedgerError`, `OidcError`, `SignatureError`, …) is in neither, so
"anything the oidc verifier raised" stays catchable without deciding "retry or not".
The one exception from outside the tree is `shared.crashpoints.Crashed`, a BaseException
for tests. tests/unit/test_error_tree.py checks all of this over every class in `shared/`.

`Deferred` is a handler's "wait": the worker hands the delivery back to the queue as a
new task `after_s` later (clamped to 1 s .. 1 h) and spends none of its retries on it
(docs/architecture.md, "Worker"). It is in neither branch, and `retryable` is True: any
other caller that meets it (reconcile, the outbox sweep) tries again later, never gives up.

Each module keeps its own base (`LedgerError`, `GeminiError`, …) under the root, so a
caller can still catch "anything the ledger raised". An exception from outside this tree
(a bug, an SDK surprise) counts as retryable: a retry limit, not a guess, ends it.
"""

from __future__ import annotations


class HookledgerError(Exception):
    """Root of every error hookledger raises on purpose."""

    retryable: bool = False


class TransientError(HookledgerError):
    """A later attempt may succeed: answer 5xx, leave pending, back off."""

    retryable = True


class PermanentError(HookledgerError):
    """No retry can fix it: record the reason and stop retrying."""

    retryable = False


class Deferred(HookledgerError):
    """Not yet, and not a failure: run this delivery again about `after_s` seconds later.

    A handler raises it to wait for something another run is still doing (a re-run behind
    the previous run's check run). The worker records the delivery `queued` with `str(exc)`
    as the reason and re-enqueues the same envelope as a new task `after_s` later (clamped
    to 1 s .. 1 h), so the wait spends none of `WORKER_MAX_RETRIES`. Bounding the wait is
    the handler's business; only the envelope's 7-day lifetime ends it (`dead`).
    """

    retryable = True

    def __init__(self, reason: str, *, after_s: float = 60.0) -> None:
        super().__init__(reason)
        self.after_s = float(after_s)
        if self.after_s != self.after_s:  # NaN: a caller's mistake, seen where it is made
            raise ValueError(f"Deferred({reason!r}): after_s must be a number of seconds")


class ConfigError(HookledgerError, ValueError):
    """An environment variable is missing or malformed; the message names it."""


class AppError(ConfigError):
    """An app cannot be loaded, or clashes with another: the function does not start."""


def retryable(exc: BaseException) -> bool:
    """Whether trying again later may succeed; errors from outside the tree are retried."""
    if isinstance(exc, HookledgerError):
        return exc.retryable
    return True
