"""The webhooks registered through Gemini's webhooks API, as a part of `World` (state.py):
creating, reading, changing and deleting them, rotating their signing secrets, and
disabling one after too many failed deliveries in a row.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Any

from local.simulator.errors import NotFound
from local.simulator.records import RegisteredWebhook, SigningSecret, new_secret
from shared.clock import Clock


class RegisteredWebhooks:
    """`World`'s webhook calls; they share its lock, clock and `_webhooks` (set by `reset`)."""

    clock: Clock
    _lock: threading.RLock
    _webhooks: dict[str, RegisteredWebhook]

    def create_webhook(
        self, uri: str, subscribed_events: list[str], name: str | None
    ) -> tuple[RegisteredWebhook, str]:
        """Register a webhook; returns it and its signing secret (shown once, like Gemini)."""
        now = self.clock()
        secret = new_secret()
        webhook = RegisteredWebhook(
            id=uuid.uuid4().hex[:16],
            uri=uri,
            subscribed_events=list(subscribed_events),
            name=name,
            created_at=now,
            updated_at=now,
            secrets=[SigningSecret(secret)],
        )
        with self._lock:
            self._webhooks[webhook.id] = webhook
            return replace(webhook), secret

    def webhook(self, webhook_id: str) -> RegisteredWebhook:
        with self._lock:
            found = self._webhooks.get(webhook_id)
            if found is None:
                raise NotFound(f"Webhook {webhook_id} not found.")
            return replace(found, secrets=list(found.secrets))

    def webhooks(self) -> list[RegisteredWebhook]:
        with self._lock:
            return [replace(w, secrets=list(w.secrets)) for w in self._webhooks.values()]

    def update_webhook(self, webhook_id: str, changes: dict[str, Any]) -> RegisteredWebhook:
        with self._lock:
            webhook = self._webhooks.get(webhook_id)
            if webhook is None:
                raise NotFound(f"Webhook {webhook_id} not found.")
            for key, value in changes.items():
                setattr(webhook, key, value)
            if changes.get("state") == "enabled":
                webhook.consecutive_failures = 0
            webhook.updated_at = self.clock()
            return replace(webhook, secrets=list(webhook.secrets))

    def delete_webhook(self, webhook_id: str) -> None:
        with self._lock:
            if self._webhooks.pop(webhook_id, None) is None:
                raise NotFound(f"Webhook {webhook_id} not found.")

    def rotate_webhook_secret(self, webhook_id: str, revoke_immediately: bool) -> str:
        """A new signing secret; the old ones keep signing for 24 h unless revoked now."""
        secret = new_secret()
        now = self.clock()
        with self._lock:
            webhook = self._webhooks.get(webhook_id)
            if webhook is None:
                raise NotFound(f"Webhook {webhook_id} not found.")
            if revoke_immediately:
                webhook.secrets = []
            else:
                for old in webhook.secrets:
                    if old.expire_time is None:
                        old.expire_time = now + timedelta(hours=24)
            webhook.secrets.insert(0, SigningSecret(secret))
            webhook.updated_at = now
            return secret

    def live_secrets(self, webhook: RegisteredWebhook) -> list[str]:
        now = self.clock()
        return [s.secret for s in webhook.secrets if s.expire_time is None or s.expire_time > now]

    def record_delivery_outcome(self, webhook_id: str, delivered: bool, disable_after: int) -> None:
        """Count failed deliveries in a row; past `disable_after` the webhook is disabled."""
        with self._lock:
            webhook = self._webhooks.get(webhook_id)
            if webhook is None:
                return
            if delivered:
                webhook.consecutive_failures = 0
                return
            webhook.consecutive_failures += 1
            if disable_after > 0 and webhook.consecutive_failures >= disable_after:
                webhook.state = "disabled_due_to_failed_deliveries"
