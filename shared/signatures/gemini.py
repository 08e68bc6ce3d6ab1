"""The one verifier the ingress uses for Gemini deliveries: static `v1` or dynamic `v1a`/JWT."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from shared.signatures._common import WEBHOOK_SIGNATURE_HEADER, header
from shared.signatures.dynamic import DynamicWebhookVerifier
from shared.signatures.errors import KeysUnavailable, VerificationError
from shared.signatures.standard_webhooks import _HMAC_VERSION, StandardWebhookVerifier


class GeminiVerifier:
    """Accepts a Gemini delivery signed by any configured scheme.

    Static `v1` HMAC (project webhook secrets) and dynamic `v1a`/JWT (JWKS keys) are
    each optional; at least one must be configured. When several apply, the first that
    verifies wins; if none does, the error raised is `KeysUnavailable` when the keys
    could not be fetched (so the sender retries), else the first scheme's error.
    """

    def __init__(
        self,
        static: StandardWebhookVerifier | None = None,
        dynamic: DynamicWebhookVerifier | None = None,
    ) -> None:
        if static is None and dynamic is None:
            raise ValueError("GeminiVerifier needs a static or a dynamic verifier")
        self._static = static
        self._dynamic = dynamic

    def verify(self, headers: Mapping[str, str], body: bytes) -> str:
        """Return the delivery id if authentic; raise `VerificationError` otherwise."""
        attempts: list[Callable[[], str]] = []
        signature = header(headers, WEBHOOK_SIGNATURE_HEADER) or ""
        has_v1 = any(part.startswith(_HMAC_VERSION + ",") for part in signature.split())
        if self._static is not None and (has_v1 or self._dynamic is None):
            attempts.append(lambda: self._static.verify(headers, body))  # type: ignore[union-attr]
        if self._dynamic is not None and (self._dynamic.applies(headers) or not attempts):
            attempts.append(lambda: self._dynamic.verify(headers, body))  # type: ignore[union-attr]
        errors: list[VerificationError] = []
        for attempt in attempts:
            try:
                return attempt()
            except VerificationError as exc:
                errors.append(exc)
        unavailable = [e for e in errors if isinstance(e, KeysUnavailable)]
        raise (unavailable or errors)[0]
