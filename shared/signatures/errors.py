"""The exceptions every verifier raises, under the one error tree of `shared.errors`.

::

    HookledgerError                       (shared.errors: the root)
     └── SignatureError                   base of this package's errors
          ├── SecretError                 (PermanentError, ValueError) a secret or key is
          │                               unusable (raised at construction)
          ├── VerificationError           (PermanentError) the request is not authentic;
          │    └── EnvelopeError          `.reason` is safe to log (shared.handoff.envelope)
          └── KeysUnavailable             (TransientError) the JWKS could not be fetched:
                                          our fetch failed, not the sender; retry later (503)

A verifier's ``verify`` raises `VerificationError` for every malformed header, bad
base64, unknown version, stale timestamp or mismatch, and the reason never contains a
signature or a secret; a verifier that fetches keys may also raise `KeysUnavailable`,
which is NOT a `VerificationError` (transient, never permanent): catch it on its own.
"""

from __future__ import annotations

from shared.errors import HookledgerError, PermanentError, TransientError


class SignatureError(HookledgerError):
    """Base of the verifiers' errors."""


class SecretError(SignatureError, PermanentError, ValueError):
    """A configured secret or key is unusable; the message says which (by position)."""


class VerificationError(SignatureError, PermanentError):
    """A request failed verification. `reason` is short and safe to log."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class KeysUnavailable(SignatureError, TransientError):
    """The public keys could not be fetched; the sender should retry (answer 503).

    `reason` is short and safe to log, as `VerificationError`'s is.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
