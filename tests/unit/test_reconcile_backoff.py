"""The one backoff formula (`shared.retry.Backoff`) as reconcile uses it: no emulator."""

from __future__ import annotations

import pytest

from shared.clock import system_clock
from shared.reconcile import BACKOFF_CAP_S, Reconciler, ReconcileSettings, Sources
from shared.retry import Backoff
from tests.memory_ledger import MemoryLedger


def reconciler_with(rand: float, backoff: Backoff | None = None) -> Reconciler:
    settings = ReconcileSettings() if backoff is None else ReconcileSettings(backoff=backoff)
    return Reconciler(
        MemoryLedger(system_clock),  # type: ignore[arg-type]  # only its parts are wired
        None,  # type: ignore[arg-type]
        system_clock,
        settings,
        sources=Sources(rand=lambda: rand),
    )


def test_backoff_grows_is_jittered_and_capped() -> None:
    low, high = reconciler_with(0.0), reconciler_with(1.0)
    assert (low.backoff_s(0), high.backoff_s(0)) == (15.0, 30.0)
    assert high.backoff_s(3) == 240.0
    assert high.backoff_s(50) == BACKOFF_CAP_S and low.backoff_s(50) == BACKOFF_CAP_S / 2


def test_reconcile_backoff_is_retry_backoff_with_the_same_draw() -> None:
    backoff = Backoff(first_s=2, cap_s=100, jitter=0.3)
    reconciler = reconciler_with(0.4, backoff)
    for attempts in range(12):
        assert reconciler.backoff_s(attempts) == backoff.delay(attempts, lambda: 0.4)


@pytest.mark.parametrize(
    ("name", "jitter", "rand", "expected"),
    [
        ("no jitter ignores the draw", 0.0, 0.9, 80.0),
        ("half jitter, lowest draw", 0.5, 0.0, 40.0),
        ("half jitter, highest draw", 0.5, 1.0, 80.0),
        ("full jitter, lowest draw", 1.0, 0.0, 0.0),
        ("full jitter, middle draw", 1.0, 0.5, 40.0),
    ],
)
def test_jitter_is_the_random_fraction_of_the_delay(
    name: str, jitter: float, rand: float, expected: float
) -> None:
    backoff = Backoff(first_s=10, cap_s=1000, jitter=jitter)
    assert backoff.delay(3, lambda: rand) == pytest.approx(expected), name


def test_a_huge_attempt_count_stays_at_the_cap() -> None:
    backoff = Backoff(first_s=30, cap_s=1800)
    assert backoff.ceiling(10_000) == 1800
    assert backoff.delay(10_000, lambda: 1.0) == 1800


def test_default_jitter_keeps_the_firestore_retry_formula() -> None:
    backoff = Backoff(first_s=0.05, cap_s=2.0)  # what the ledger's transactions use
    assert backoff.delay(0, lambda: 0.0) == pytest.approx(0.025)
    assert backoff.delay(2, lambda: 1.0) == pytest.approx(0.2)


@pytest.mark.parametrize("jitter", [-0.1, 1.1])
def test_jitter_outside_0_to_1_is_refused(jitter: float) -> None:
    with pytest.raises(ValueError, match="jitter"):
        Backoff(jitter=jitter)
