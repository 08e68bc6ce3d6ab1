"""The one error tree: every error hookledger raises on purpose descends from `HookledgerError`.

Whether trying again may help is a property of the error, decided where it is raised,
and read everywhere else (the worker's 503-or-dead, reconcile's defer, the review
pipeline, the CLI's exit code) through `retryable(exc)`:

    HookledgerError                  root; `retryable` is False unless a subclass says so
    ├── TransientError               a later attempt may succeed (timeout, 429/5xx, contention)
    │   ├── ledger: ContentionError, StoreUnavailable, WritebackFailed, OutboxDeliveryFailed;
    │   │           Conflict (commits: re-read and decide again)
    │   ├── gemini: GeminiUnavailable          github: GitHubUnavailable
    │   ├── claims: ClaimUnavailable           tasks: EnqueueError
    │   ├── signatures: KeysUnavailable (our key fetch failed, not the sender)
    │   ├── oidc: OidcUnavailable (503: our certs fetch failed)
    │   └── retry: RetriesExhausted (this call's attempts ran out)
    ├── PermanentError               no retry can fix it: record it and stop
    │   ├── ledger: InvalidArgument, AmbiguousId, UnknownDelivery
    │   ├── gemini: GeminiNotFound, GeminiRejected   github: GitHubRejected
    │   ├── claims: ClaimNotFound, ClaimCorrupt, ClaimConflict
    │   ├── signatures: VerificationError, SecretError; envelope: EnvelopeError, EnvelopeTooLarge
    │   └── oidc: Unauthorized (401), Forbidden (403)
    └── ConfigError                  a deployment setting is missing or malformed (start-up)

A class is transient or permanent, never both, and its `retryable` agrees with its
branch; a module base (`LedgerError`, `OidcError`, `SignatureError`, …) is in neither, so
"anything the oidc verifier raised" stays catchable without deciding "retry or not".
The one exception from outside the tree is `shared.crashpoints.Crashed`, a BaseException
for tests. tests/unit/test_error_tree.py checks all of this over every class in `shared/`.

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


class ConfigError(HookledgerError, ValueError):
    """An environment variable is missing or malformed; the message names it."""


def retryable(exc: BaseException) -> bool:
    """Whether trying again later may succeed; errors from outside the tree are retried."""
    if isinstance(exc, HookledgerError):
        return exc.retryable
    return True
