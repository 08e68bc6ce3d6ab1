"""The control calls for the simulated Gemini's jobs: finishing a batch, an operation or
an interaction, making an operation, the Gemini quotas, create refusals and poison, the
batches, how they are run (slots, priority) and the completion webhooks' deliveries, as
methods of `SimulatorClient` (client.py), which this class is a part of.

Every call raises `requests.HTTPError` on a non-2xx answer, naming what was wrong.
"""

from __future__ import annotations

from typing import Any


class GeminiJobsControl:
    """`complete`, `set_interaction_status`, `delete_batch`, `create_operation`,
    `set_quotas`, `quotas`, `refuse_creates`, `stop_refusing_creates`,
    `create_refusal_state`, `poison`, `clear_poison`, `poison_state`, `deliveries`,
    `batches`, `set_processing`, `processing`; `_call` is `SimulatorClient`'s."""

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        raise NotImplementedError  # SimulatorClient's

    def complete(
        self, name: str, state: str = "succeeded", webhook: str = "send", **extra: Any
    ) -> dict[str, Any]:
        """Finish operation `name` (e.g. `batches/abc`); `extra` may hold `rows`, `error`."""
        body = {"state": state, "webhook": webhook, **extra}
        return dict(self._call("POST", f"/_sim/operations/{name}:complete", json=body))

    def set_interaction_status(
        self, name: str, status: str, webhook: str = "send", **extra: Any
    ) -> dict[str, Any]:
        """Put interaction `name` in Interactions API `status`; `extra` may hold
        `output_text` and `error`."""
        body = {"status": status, "webhook": webhook, **extra}
        return dict(self._call("POST", f"/_sim/operations/{name}:status", json=body))

    def delete_batch(self, name: str) -> None:
        """Delete batch `name` (`batches/abc`) through the Gemini API: it answers 404 after."""
        self._call("DELETE", f"/v1beta/{name}")

    def create_operation(
        self,
        name: str,
        metadata: dict[str, Any] | None = None,
        webhook_config: dict[str, Any] | None = None,
    ) -> Any:
        """A video operation or interaction; `webhook_config` `{"uris", "user_metadata"}`
        as `generate_videos` / `interactions.create` take it."""
        body: dict[str, Any] = {"name": name, "metadata": metadata or {}}
        if webhook_config is not None:
            body["webhook_config"] = webhook_config
        return self._call("POST", "/_sim/operations", json=body)

    def set_quotas(self, **quotas: Any) -> dict[str, Any]:
        """Merge `quotas` into the Gemini quotas; returns the full state `quotas()` reports.

        Keys as `POST /_sim/quotas` takes them (see `local/simulator/control.py`), e.g.
        `set_quotas(gemini_batches_in_flight=5, gemini_batch_retry_delay_s=1)` or
        `set_quotas(gemini_inline_request_bytes=10_000)`; `gemini_batches_in_flight=None`
        turns that quota off. An unknown key or a bad value raises `requests.HTTPError`
        and changes nothing.
        """
        return dict(self._call("POST", "/_sim/quotas", json=quotas))

    def quotas(self) -> dict[str, Any]:
        """Every quota setting, `in_flight` `{"gemini_batches"}` and the `refused` counts."""
        return dict(self._call("GET", "/_sim/quotas"))

    def refuse_creates(
        self, status: int = 403, count: int | None = None, reason: str | None = None
    ) -> dict[str, Any]:
        """Make Gemini refuse every `batches.create` (the next `count` only, when given) with
        `status` 403, 401 or 400 and the real API's body for `reason` (default per status:
        CONSUMER_SUSPENDED, ACCESS_TOKEN_TYPE_UNSUPPORTED, API_KEY_INVALID; see
        `local/simulator/create_refusals.py`); nothing is created. Returns the state
        `create_refusal_state()` reports. A bad value raises `requests.HTTPError` (400)
        and changes nothing."""
        body: dict[str, Any] = {"status": status}
        if count is not None:
            body["count"] = count
        if reason is not None:
            body["reason"] = reason
        return dict(self._call("POST", "/_sim/gemini/create-refusal", json=body))

    def stop_refusing_creates(self) -> dict[str, Any]:
        """Creates are taken again; returns the state (`refused` keeps its count)."""
        return dict(self._call("DELETE", "/_sim/gemini/create-refusal"))

    def create_refusal_state(self) -> dict[str, Any]:
        """`{"status", "reason", "count", "refused"}`: the refusal set (all null when off;
        `count` the refusals left, null until stopped) and the creates refused since the
        last reset."""
        return dict(self._call("GET", "/_sim/gemini/create-refusal"))

    def poison(self, marker: str, name_index: bool = True) -> dict[str, Any]:
        """Make Gemini refuse a `batches.create` with a request whose text holds `marker`:
        400 INVALID_ARGUMENT naming each such request's index (`requests[i]`, a file's
        line position too), or Gemini's bare "Request contains an invalid argument." when
        not `name_index`; nothing is created. Returns the state `poison_state()` reports."""
        body = {"marker": marker, "name_index": name_index}
        return dict(self._call("POST", "/_sim/gemini/poison", json=body))

    def clear_poison(self) -> dict[str, Any]:
        """No request is poisoned any more; returns the state (`refused` keeps its count)."""
        return dict(self._call("DELETE", "/_sim/gemini/poison"))

    def poison_state(self) -> dict[str, Any]:
        """`{"marker" (null when off), "name_index", "refused"}`: the poison set and the
        creates it refused since the last reset."""
        return dict(self._call("GET", "/_sim/gemini/poison"))

    def deliveries(self, operation: str | None = None) -> list[dict[str, Any]]:
        params = {"operation": operation} if operation else None
        return list(self._call("GET", "/_sim/webhook-deliveries", params=params)["deliveries"])

    def batches(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/_sim/batches")["batches"])

    def set_processing(self, **processing: Any) -> dict[str, Any]:
        """Merge `processing` into how batches are run; returns the full state
        `processing()` reports. Keys as `POST /_sim/gemini/processing` takes them
        (`local/simulator/control.py`, "Processing"): `set_processing(slots=4, run_s=0.5)`
        runs 4 batches at once, highest `batch.priority` first, each succeeding 0.5 s after
        it started; `honour_priority=False` queues by creation order alone; `slots=None`
        turns the queue off. A bad value raises `requests.HTTPError` and changes nothing."""
        return dict(self._call("POST", "/_sim/gemini/processing", json=processing))

    def processing(self) -> dict[str, Any]:
        """`{"slots", "run_s", "honour_priority", "running", "queued"}`."""
        return dict(self._call("GET", "/_sim/gemini/processing"))
