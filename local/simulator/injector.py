"""Turning the fault model into outcomes: one draw per Gemini GET, one per webhook.

`FaultInjector` holds the current `FaultModel`, two seeded random sources (GETs and
webhooks apart, so polling traffic cannot shift which webhooks are dropped) and the
counts of what it injected. With a seed, the n-th GET (and the n-th webhook) always
gets the same outcome, whatever runs concurrently; which request is the n-th is up to
the callers. Thread-safe.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any

from local.simulator.faults import FaultModel, merge


@dataclass(frozen=True)
class GetFault:
    """What to do to one GET: wait `latency_ms`, then hang `hang_s` or fail with `status`."""

    latency_ms: int = 0
    status: int | None = None
    hang_s: float | None = None


@dataclass
class Injected:
    """Counts of what the injector did since the last reset (reported under `injected`)."""

    gets: int = 0
    errors: dict[int, int] = field(default_factory=dict)
    timeouts: int = 0
    delayed: int = 0
    latency_min_ms: int | None = None
    latency_max_ms: int | None = None
    latency_total_ms: int = 0
    webhooks: int = 0
    webhooks_dropped: int = 0
    webhook_copies_sent: int = 0
    early_webhooks: int = 0

    def report(self) -> dict[str, Any]:
        return {
            "gets": self.gets,
            "errors": {str(code): n for code, n in sorted(self.errors.items())},
            "timeouts": self.timeouts,
            "delayed": self.delayed,
            "latency_min_ms": self.latency_min_ms,
            "latency_max_ms": self.latency_max_ms,
            "latency_total_ms": self.latency_total_ms,
            "webhooks": self.webhooks,
            "webhooks_dropped": self.webhooks_dropped,
            "webhook_copies_sent": self.webhook_copies_sent,
            "early_webhooks": self.early_webhooks,
        }

    def note_latency(self, latency_ms: int) -> None:
        self.delayed += 1
        self.latency_total_ms += latency_ms
        low, high = self.latency_min_ms, self.latency_max_ms
        self.latency_min_ms = latency_ms if low is None else min(low, latency_ms)
        self.latency_max_ms = latency_ms if high is None else max(high, latency_ms)


def _sources(seed: int | None) -> tuple[random.Random, random.Random]:
    """(GET source, webhook source); the GET one is `Random(seed)`, as it always was."""
    if seed is None:
        return random.Random(), random.Random()
    return random.Random(seed), random.Random(f"webhooks:{seed}")


class FaultInjector:
    """The current fault model, its random sources and its counts; `reset()` clears all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._release = threading.Event()
        self.reset()

    def reset(self) -> None:
        """No faults, fresh counts; GETs hanging on a timeout fault are let go at once."""
        with self._lock:
            self._model = FaultModel()
            self._gets, self._webhooks = _sources(None)
            self._injected = Injected()
            self._release.set()
            self._release = threading.Event()

    @property
    def model(self) -> FaultModel:
        with self._lock:
            return self._model

    def update(self, body: dict[str, Any]) -> None:
        """Merge `body`'s fault keys (see `faults.merge`); a `seed` key re-seeds both sources."""
        with self._lock:
            self._model = merge(self._model, body)
            if "seed" in body:
                self._gets, self._webhooks = _sources(self._model.seed)

    def report(self) -> dict[str, Any]:
        with self._lock:
            return {**self._model.report(), "injected": self._injected.report()}

    def draw_get(self) -> GetFault:
        """The outcome of one GET of a batch, operation, interaction or the batch list."""
        with self._lock:
            model, rng, injected = self._model, self._gets, self._injected
            injected.gets += 1
            status: int | None = None
            hang_s: float | None = None
            rates = model.status_rates()
            if model.timeout_rate > 0 or rates:
                draw = rng.random()
                if draw < model.timeout_rate:
                    hang_s = model.timeout_hold_s
                    injected.timeouts += 1
                else:
                    status = _pick(rates, draw - model.timeout_rate)
                    if status is not None:
                        injected.errors[status] = injected.errors.get(status, 0) + 1
            latency = model.latency_ms
            if model.latency_jitter_ms:
                jitter = model.latency_jitter_ms
                latency = round(rng.uniform(max(0, latency - jitter), latency + jitter))
            if latency:
                injected.note_latency(latency)
            return GetFault(latency, status, hang_s)

    def draw_webhook(self, copies: int | None) -> int:
        """How many copies of one completion webhook to send: 0 when the model drops it.

        `copies` is what the caller asked for (`duplicate`: 2); None lets the model say
        (`webhook_copies`).
        """
        with self._lock:
            model, injected = self._model, self._injected
            injected.webhooks += 1
            if model.webhook_drop_rate > 0 and self._webhooks.random() < model.webhook_drop_rate:
                injected.webhooks_dropped += 1
                return 0
            sent = model.webhook_copies if copies is None else copies
            injected.webhook_copies_sent += sent
            return sent

    def take_early_webhook(self) -> float | None:
        """With `early_webhook` on: the extra hold (s) before a create answers; else None."""
        with self._lock:
            if not self._model.early_webhook:
                return None
            self._injected.early_webhooks += 1
            return self._model.webhook_before_register_ms / 1000

    def hang(self, seconds: float) -> None:
        """Hold the calling request thread `seconds`, or until the next `reset()`."""
        with self._lock:
            release = self._release
        release.wait(seconds)


def _pick(rates: dict[int, float], draw: float) -> int | None:
    """The status whose slice of [0, sum(rates)) holds `draw`, in status order; else None."""
    for status in sorted(rates):
        if draw < rates[status]:
            return status
        draw -= rates[status]
    return None
