"""What the ledger raises: one class per outcome, under `LedgerError`.

    LedgerError                 base of everything the ledger raises (a HookledgerError)
    ├── InvalidArgument         (PermanentError, ValueError) bad input; nothing was written
    ├── AmbiguousId             (PermanentError, LookupError) a bare id names several operations
    ├── UnknownDelivery         (PermanentError, LookupError) mark_delivery on an unknown delivery
    ├── WritebackFailed         (TransientError) the write-back raised; the settlement rolled back
    ├── OutboxDeliveryFailed    (TransientError) `deliver` raised; the item waits for the sweep
    ├── ContentionError         (TransientError) still ABORTED / conflicting after every attempt
    └── StoreUnavailable        (TransientError) a Firestore call failed: retry later

Infrastructure errors are raised `from` the original exception.
"""

from __future__ import annotations

from shared.errors import HookledgerError, PermanentError, TransientError


class LedgerError(HookledgerError):
    """Base of every error the ledger raises."""


class InvalidArgument(LedgerError, PermanentError, ValueError):
    """Bad input (status, name, time…); the message names it. Nothing was written."""


class AmbiguousId(LedgerError, PermanentError, LookupError):
    """A bare id matches more than one operation; use the full name."""


class UnknownDelivery(LedgerError, PermanentError, LookupError):
    """No delivery with that source and id was recorded."""


class WritebackFailed(LedgerError, TransientError):
    """The write-back raised (its exception is `__cause__`); the operation stays pending."""


class OutboxDeliveryFailed(LedgerError, TransientError):
    """Delivering an outbox item raised; it stays undelivered and the sweep retries it."""


class ContentionError(LedgerError, TransientError):
    """The transaction kept aborting or conflicting; the caller should retry later."""


class StoreUnavailable(LedgerError, TransientError):
    """Firestore failed (network, permission, quota…); the caller should retry later."""
