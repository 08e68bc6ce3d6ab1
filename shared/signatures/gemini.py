"""The one verifier the ingress uses for Gemini deliveries: static or dynamic webhooks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.signatures._common import WEBHOOK_SIGNATURE_HEADER, header
from shared.signatures.dynamic import DynamicWebhookVerifier, looks_like_jwt
from shared.signatures.errors import VerificationError
from shared.signatures.standard_webhooks import StandardWebhookVerifier


@dataclass(frozen=True)
class GeminiDelivery:
    """A verified Gemini delivery.

    `delivery_id`: the signed `webhook-id` of a static delivery, or ``jwt:…`` for a
    dynamic one (`shared.signatures.dynamic.DynamicDelivery`). `dynamic` says which.
    `event`: for a dynamic delivery whose signed claims carry the event, that event (use
    it instead of the body); else None (the body is what was signed, or a hint).
    """

    delivery_id: str
    dynamic: bool = False
    event: Mapping[str, Any] | None = None


class GeminiVerifier:
    """Accepts a Gemini delivery signed by the scheme its `webhook-signature` names.

    A JWT there goes to the dynamic verifier (`VerificationError` when dynamic webhooks
    are off); anything else to the static one (Standard Webhooks, project secrets). One
    scheme is tried per request, never both. At least one must be configured.
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

    @property
    def dynamic_enabled(self) -> bool:
        return self._dynamic is not None

    def verify(self, headers: Mapping[str, str], body: bytes) -> str:
        """Return the delivery id if authentic; raise `VerificationError` otherwise."""
        return self.verify_delivery(headers, body).delivery_id

    def verify_delivery(self, headers: Mapping[str, str], body: bytes) -> GeminiDelivery:
        """The verified delivery; `VerificationError` (or `KeysUnavailable`) otherwise."""
        if looks_like_jwt(header(headers, WEBHOOK_SIGNATURE_HEADER)):
            if self._dynamic is None:
                raise VerificationError("dynamic webhooks (JWT) are not enabled")
            found = self._dynamic.verify_delivery(headers)
            return GeminiDelivery(found.delivery_id, dynamic=True, event=found.event)
        if self._static is None:
            raise VerificationError("webhook-signature is not a JWT")
        return GeminiDelivery(self._static.verify(headers, body))
