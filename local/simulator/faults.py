"""The simulator's fault model: what `POST /_sim/faults` may set, validated and merged.

`FaultModel` is an immutable value; `merge(model, body)` returns the model with the
body's keys applied (absent keys keep their current value) or raises `BadRequest`
naming every unknown key or the first bad value. Nothing here draws a random number:
`injector.FaultInjector` turns a model into outcomes.

Two spellings of a GET error rate exist: the original single-status pair
(`get_error_rate` with `status`) and the per-status map `error_rates`. Both stay
settable and are reported as set; a GET fails with their combined distribution.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from local.simulator.errors import BadRequest

MAX_LATENCY_MS = 60_000
MAX_HOLD_S = 600.0
MAX_COPIES = 10

# The Gemini-side knobs; `github_comment_post` is parsed by the control API itself.
GEMINI_KEYS = frozenset(
    {
        "get_error_rate",
        "status",
        "error_rates",
        "timeout_rate",
        "timeout_hold_s",
        "latency_ms",
        "latency_jitter_ms",
        "webhook_drop_rate",
        "webhook_copies",
        "early_webhook",
        "webhook_before_register_ms",
        "seed",
    }
)


@dataclass(frozen=True)
class FaultModel:
    """Every fault the simulator can inject into Gemini traffic; the defaults inject none."""

    get_error_rate: float = 0.0
    status: int = 503
    error_rates: dict[int, float] = field(default_factory=dict)
    timeout_rate: float = 0.0
    timeout_hold_s: float = 30.0
    latency_ms: int = 0
    latency_jitter_ms: int = 0
    webhook_drop_rate: float = 0.0
    webhook_copies: int = 1
    early_webhook: bool = False
    webhook_before_register_ms: int = 0
    seed: int | None = None

    def status_rates(self) -> dict[int, float]:
        """The share of GETs failing with each status (both spellings combined)."""
        rates = {code: rate for code, rate in self.error_rates.items() if rate > 0}
        if self.get_error_rate > 0:
            rates[self.status] = rates.get(self.status, 0.0) + self.get_error_rate
        return rates

    def report(self) -> dict[str, Any]:
        """The model as `GET /_sim/faults` shows it (JSON keys for `error_rates`)."""
        return {
            "get_error_rate": self.get_error_rate,
            "status": self.status,
            "error_rates": {str(code): rate for code, rate in sorted(self.error_rates.items())},
            "timeout_rate": self.timeout_rate,
            "timeout_hold_s": self.timeout_hold_s,
            "latency_ms": self.latency_ms,
            "latency_jitter_ms": self.latency_jitter_ms,
            "webhook_drop_rate": self.webhook_drop_rate,
            "webhook_copies": self.webhook_copies,
            "early_webhook": self.early_webhook,
            "webhook_before_register_ms": self.webhook_before_register_ms,
            "seed": self.seed,
        }


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _rate(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise BadRequest(f"{key} must be a number in [0, 1], got {value!r}.")
    return float(value)


def _whole(value: Any, key: str, low: int, high: int) -> int:
    if not _is_int(value) or not low <= value <= high:
        raise BadRequest(f"{key} must be a whole number {low}..{high}, got {value!r}.")
    return int(value)


def _error_status(value: Any, key: str) -> int:
    if not _is_int(value) or not 400 <= value <= 599:
        raise BadRequest(f"{key} must be an HTTP error code 400..599, got {value!r}.")
    return int(value)


def _error_rates(value: Any) -> dict[int, float]:
    """`{"429": 0.1, "503": 0.05}` (JSON object keys are strings) by status code."""
    if not isinstance(value, dict):
        raise BadRequest('error_rates must be an object such as {"429": 0.1, "503": 0.05}.')
    rates: dict[int, float] = {}
    for raw_code, rate in value.items():
        if not (raw_code.isascii() and raw_code.isdigit() and 400 <= int(raw_code) <= 599):
            raise BadRequest(f"error_rates keys must be HTTP error codes 400..599: {raw_code!r}.")
        rates[int(raw_code)] = _rate(rate, f"error_rates[{raw_code!r}]")
    return rates


def _hold_seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"timeout_hold_s must be a number of seconds, got {value!r}.")
    if not 0 < value <= MAX_HOLD_S:
        raise BadRequest(f"timeout_hold_s must be in (0, {MAX_HOLD_S:g}], got {value!r}.")
    return float(value)


def _bool(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise BadRequest(f"{key} must be true or false, got {value!r}.")
    return value


def _seed(value: Any) -> int | None:
    if value is not None and not _is_int(value):
        raise BadRequest(f"seed must be an integer, got {value!r}.")
    return value


PARSERS: dict[str, Any] = {
    "get_error_rate": lambda v: _rate(v, "get_error_rate"),
    "status": lambda v: _error_status(v, "status"),
    "error_rates": _error_rates,
    "timeout_rate": lambda v: _rate(v, "timeout_rate"),
    "timeout_hold_s": _hold_seconds,
    "latency_ms": lambda v: _whole(v, "latency_ms", 0, MAX_LATENCY_MS),
    "latency_jitter_ms": lambda v: _whole(v, "latency_jitter_ms", 0, MAX_LATENCY_MS),
    "webhook_drop_rate": lambda v: _rate(v, "webhook_drop_rate"),
    "webhook_copies": lambda v: _whole(v, "webhook_copies", 1, MAX_COPIES),
    "early_webhook": lambda v: _bool(v, "early_webhook"),
    "webhook_before_register_ms": lambda v: _whole(
        v, "webhook_before_register_ms", 0, MAX_LATENCY_MS
    ),
    "seed": _seed,
}


def unknown_keys(body: dict[str, Any], also_known: frozenset[str]) -> list[str]:
    """Keys of `body` that are neither a Gemini fault nor in `also_known`, sorted."""
    return sorted(set(body) - GEMINI_KEYS - also_known)


def merge(model: FaultModel, body: dict[str, Any]) -> FaultModel:
    """`model` with the Gemini fault keys of `body` applied, or `BadRequest`.

    `error_rates` replaces the whole per-status map. A positive
    `webhook_before_register_ms` means an early webhook, so it switches `early_webhook`
    on; switching `early_webhook` off also zeroes the hold. The merged GET outcomes must
    not add up past 1 (timeouts plus every status's rate).
    """
    changes = {key: PARSERS[key](value) for key, value in body.items() if key in PARSERS}
    if changes.get("early_webhook") is False and changes.get("webhook_before_register_ms"):
        raise BadRequest("webhook_before_register_ms > 0 needs early_webhook true, got false.")
    merged = replace(model, **changes)
    if changes.get("webhook_before_register_ms"):
        merged = replace(merged, early_webhook=True)
    if changes.get("early_webhook") is False:
        merged = replace(merged, webhook_before_register_ms=0)
    total = merged.timeout_rate + sum(merged.status_rates().values())
    if total > 1 + 1e-9:
        raise BadRequest(
            f"timeout_rate plus the error rates add up to {total:g}; they must not exceed 1."
        )
    return merged
