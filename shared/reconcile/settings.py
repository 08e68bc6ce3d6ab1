"""Every knob of a reconcile run in one frozen value, validated once when it is built."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from shared.config import DEFAULTS, Config, ConfigError
from shared.retry import Backoff

GEMINI_MAX_PENDING = timedelta(hours=48)  # Gemini expires a batch pending this long

# The deployment's defaults live in `Config` (shared/config.py); these read them there.
BACKOFF_FIRST_S = DEFAULTS.reconcile_backoff_first_s
BACKOFF_CAP_S = DEFAULTS.reconcile_backoff_cap_s
BACKOFF_JITTER = DEFAULTS.reconcile_backoff_jitter
# Reconcile never gives up on an operation, so `attempts` is never read: only `delay` is.
DEFAULT_BACKOFF = Backoff(first_s=BACKOFF_FIRST_S, cap_s=BACKOFF_CAP_S, jitter=BACKOFF_JITTER)

# How long a run waits, past its budget, for checks already in flight.
DRAIN_S = 30.0
# The outbox sweep's own allowance: it starts no new operation after this long.
SWEEP_BUDGET_S = 15.0
MAX_PAGE_SIZE = 1000


@dataclass(frozen=True)
class ReconcileSettings:
    """What a run may do and how fast; `ConfigError` (a `ValueError`) names a bad field.

    The fields `Config` also holds default to `Config`'s defaults (shared/config.py);
    the others (page size, fan-out window, drain, sweep budget) are reconcile's own.

    `alert_window_s` defaults to `stuck_after_s`: a stuck operation alerts once per that
    long. `fanout_window_s` is how long fanned-out page task ids stay the same (overlapping
    runs in one window name the same tasks). `drain_s` is how long a run waits, past its
    budget, for checks already in flight before it answers anyway. `sweep_budget_s` is
    the outbox sweep's own allowance, counted from when the sweep starts, so a run that
    spent its main budget still sweeps (a run may last budget + drain + sweep budget).
    """

    grace_s: float = float(DEFAULTS.reconcile_grace_s)
    concurrency: int = DEFAULTS.reconcile_concurrency
    budget_s: float = float(DEFAULTS.reconcile_budget_s)
    stuck_after_s: float = float(DEFAULTS.stuck_after_s)
    alert_window_s: float | None = None
    page_size: int = 100
    fanout_threshold: int = DEFAULTS.reconcile_fanout_threshold
    fanout_window_s: float = 300.0
    drain_s: float = DRAIN_S
    sweep_budget_s: float = SWEEP_BUDGET_S
    adopt_orphans: bool = True
    backoff: Backoff = field(default=DEFAULT_BACKOFF)

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise ConfigError("reconcile settings: " + "; ".join(problems))

    @classmethod
    def from_config(cls, config: Config, **overrides: Any) -> ReconcileSettings:
        """The deployment's settings (`RECONCILE_*`, `STUCK_AFTER_S`), then `overrides`."""
        base = cls(
            grace_s=config.reconcile_grace_s,
            concurrency=config.reconcile_concurrency,
            budget_s=config.reconcile_budget_s,
            stuck_after_s=config.stuck_after_s,
            fanout_threshold=config.reconcile_fanout_threshold,
            backoff=Backoff(
                first_s=config.reconcile_backoff_first_s,
                cap_s=config.reconcile_backoff_cap_s,
                jitter=config.reconcile_backoff_jitter,
            ),
        )
        return base.replace(**overrides) if overrides else base

    def replace(self, **changes: Any) -> ReconcileSettings:
        """A copy with `changes`, validated again; an unknown name is a `TypeError`."""
        return dataclasses.replace(self, **changes)

    @property
    def grace(self) -> timedelta:
        return timedelta(seconds=self.grace_s)

    @property
    def stuck_after(self) -> timedelta:
        return timedelta(seconds=self.stuck_after_s)

    @property
    def alert_window(self) -> timedelta:
        return timedelta(seconds=self.alert_window_s or self.stuck_after_s)


def field_names() -> frozenset[str]:
    """The names `ReconcileSettings` accepts (to split settings from other keyword args)."""
    return frozenset(f.name for f in dataclasses.fields(ReconcileSettings))


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _problems(s: ReconcileSettings) -> list[str]:
    """Every reason `s` is unusable, each naming its field; empty when it is fine."""
    problems: list[str] = []
    if not _is_count(s.concurrency) or s.concurrency < 1:
        problems.append(f"concurrency must be an integer ≥ 1, got {s.concurrency!r}")
    if not _is_count(s.page_size) or not 1 <= s.page_size <= MAX_PAGE_SIZE:
        problems.append(f"page_size must be an integer in 1..{MAX_PAGE_SIZE}, got {s.page_size!r}")
    if not _is_count(s.fanout_threshold) or s.fanout_threshold < 1:
        problems.append(f"fanout_threshold must be an integer ≥ 1, got {s.fanout_threshold!r}")
    if not s.grace_s >= 0:
        problems.append(f"grace_s must be ≥ 0, got {s.grace_s!r}")
    if not s.budget_s > 0:
        problems.append(f"budget_s must be > 0, got {s.budget_s!r}")
    if not 0 < s.stuck_after_s < GEMINI_MAX_PENDING.total_seconds():
        problems.append(
            "stuck_after_s must be positive and below Gemini's 48 h expiry, "
            f"got {s.stuck_after_s!r}"
        )
    if s.alert_window_s is not None and not s.alert_window_s > 0:
        problems.append(f"alert_window_s must be > 0 when set, got {s.alert_window_s!r}")
    if not s.fanout_window_s > 0:
        problems.append(f"fanout_window_s must be > 0, got {s.fanout_window_s!r}")
    if not s.drain_s >= 0:
        problems.append(f"drain_s must be ≥ 0, got {s.drain_s!r}")
    if not s.sweep_budget_s > 0:
        problems.append(f"sweep_budget_s must be > 0, got {s.sweep_budget_s!r}")
    if not isinstance(s.backoff, Backoff) or not s.backoff.first_s > 0:
        problems.append(f"backoff must be a Backoff with first_s > 0, got {s.backoff!r}")
    return problems
