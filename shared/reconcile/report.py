"""What one run did (`RunReport`), and the budget it ran against (`Budget`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from shared import logs

log = logs.get_logger("reconcile")

Progress = Callable[[str, int, int], None]
"""`progress(phase, done, total)`: how many of a phase's operations have been checked."""


@dataclass
class RunReport:
    """What one run (or one `check_names` call) did. `to_dict()` is JSON-ready.

    Counters may be bumped from several threads at once through `add`.
    """

    examined: int = 0
    settled: int = 0
    already_settled: int = 0
    unknown: int = 0
    still_running: int = 0
    deferred: int = 0
    unavailable: int = 0
    not_found: int = 0
    errors: int = 0
    stuck_alerts: int = 0
    waiting_alerts: int = 0  # `operation_waiting` alerts (an interaction waits on its caller)
    adopted: int = 0
    sealed: int = 0  # shared batches' groups sealed by the run (reconcile/groups.py)
    swept: int = 0
    sweep_failed: int = 0
    pages: int = 0
    fanned_out_pages: int = 0
    fanned_out_ops: int = 0
    abandoned: int = 0  # checks still running when the run had to answer (they finish alone)
    stopped_early: bool = False
    stopped_at: str = ""  # the phase the deadline stopped: adopt|poll|fanout|sweep
    last_examined: str | None = None  # the last operation whose check started (cursor)
    elapsed_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        """Add each count to the counter of that name (thread-safe)."""
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def stop(self, phase: str, next_name: str | None) -> None:
        """Record (and log once per call) that the budget ran out during `phase`."""
        self.stopped_early = True
        self.stopped_at = phase
        logs.event(
            log,
            logging.WARNING,
            f"reconcile budget spent during {phase}",
            phase=phase,
            next_operation=next_name,
            examined=self.examined,
        )

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "_lock"}


@dataclass(frozen=True)
class Budget:
    """A run's deadline on a monotonic clock, and the drain time allowed past it."""

    deadline: float
    drain_s: float
    monotonic: Callable[[], float]

    @classmethod
    def starting_now(
        cls, budget_s: float, drain_s: float, monotonic: Callable[[], float]
    ) -> Budget:
        return cls(monotonic() + budget_s, drain_s, monotonic)

    def share(self, fraction: float) -> Budget:
        """A budget for one pass: `fraction` of the time left, ending no later than this."""
        now = self.monotonic()
        return Budget(now + fraction * max(0.0, self.deadline - now), 0.0, self.monotonic)

    def spent(self) -> bool:
        """True once no new work may start."""
        return self.monotonic() >= self.deadline

    def left_s(self) -> float:
        """Seconds until the deadline (at least 0)."""
        return max(0.0, self.deadline - self.monotonic())

    def drain_left_s(self) -> float:
        """Seconds until the drain time after the deadline runs out (at least 0)."""
        return max(0.0, self.deadline + self.drain_s - self.monotonic())
