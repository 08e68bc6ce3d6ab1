"""The exceptions every verifier raises.

::

    ValueError
     └── SecretError            a secret or key is unusable (raised at construction)
    Exception
     └── VerificationError      the request is not authentic; `.reason` is safe to log
          └── KeysUnavailable   the JWKS could not be fetched: retry later (answer 503)

A verifier's ``verify`` raises nothing but `VerificationError` (or its subclass): every
malformed header, bad base64, unknown version, stale timestamp or mismatch ends there,
and the reason never contains a signature or a secret. (`shared.envelope.EnvelopeError`
is the same class's subclass for the worker's envelopes.) All three sit under the one
error tree of `shared.errors`.
"""

from __future__ import annotations

from shared.errors import PermanentError, TransientError


class SecretError(PermanentError, ValueError):
    """A configured secret or key is unusable; the message says which (by position)."""


class VerificationError(PermanentError):
    """A request failed verification. `reason` is short and safe to log."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class KeysUnavailable(VerificationError, TransientError):
    """The public keys could not be fetched; the sender should retry (answer 503)."""

    retryable = True  # our fetch failed, not the sender's signature
