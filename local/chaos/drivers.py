"""The reconcile driver (Cloud Scheduler, every ~2 s: reconcile, then the GitHub delivery
sweep) and simulator fault-model detection."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import requests

from local.simulator.client import SimulatorClient

RECONCILE_EVERY_S = 2.0
RECONCILE_CALL_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class SweepRun:
    """One GitHub delivery sweep the driver called: when it started, and what it answered."""

    started: float  # time.monotonic()
    report: dict[str, Any]


class ReconcileDriver:
    """POST reconcile, then the GitHub delivery sweep (`/github-deliveries`), every
    `every_s` seconds in a thread, as the two Cloud Scheduler jobs do; a failed call is
    counted, not fatal.

    `in_flight` is set while a reconcile call is running (a scenario kills reconcile
    mid-run by it); `sweeps` lists the sweep runs in order.
    """

    def __init__(self, url: str, every_s: float = RECONCILE_EVERY_S) -> None:
        self.url = url
        self.every_s = every_s
        self.in_flight = threading.Event()
        self.runs = 0
        self.failures = 0
        self.sweeps: list[SweepRun] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="reconcile-driver", daemon=True)

    def __enter__(self) -> ReconcileDriver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=RECONCILE_CALL_TIMEOUT_S + 5)

    def _loop(self) -> None:
        http = requests.Session()
        while not self._stop.wait(self.every_s):
            self.in_flight.set()
            try:
                answer = http.post(self.url, json={}, timeout=RECONCILE_CALL_TIMEOUT_S)
                ok = answer.status_code == 200
            except requests.RequestException:
                ok = False
            finally:
                self.in_flight.clear()
            self.runs += 1
            self.failures += 0 if ok else 1
            self._sweep(http)

    def _sweep(self, http: requests.Session) -> None:
        started = time.monotonic()
        try:
            answer = http.post(
                f"{self.url.rstrip('/')}/github-deliveries",
                json={},
                timeout=RECONCILE_CALL_TIMEOUT_S,
            )
            report = answer.json() if answer.status_code == 200 else {}
        except (requests.RequestException, ValueError):
            report = {}
        if report:
            self.sweeps.append(SweepRun(started, report))
        else:
            self.failures += 1


def set_fault_model(sim: SimulatorClient, **faults: Any) -> bool:
    """Set the simulator's fault model; False when it does not know these keys yet.

    The older simulator answers 400 to an unknown key or silently ignores it (then its
    answer does not report the key back): both mean "not supported".
    """
    try:
        answer = sim.http.post(f"{sim.url}/_sim/faults", json=faults, timeout=10)
    except requests.RequestException:
        return False
    if answer.status_code != 200:
        return False
    reported = answer.json()
    return isinstance(reported, dict) and all(key in reported for key in faults)


def clear_faults(sim: SimulatorClient) -> None:
    """Every Gemini fault off (the new model's keys too, when the simulator has them)."""
    set_fault_model(
        sim,
        webhook_drop_rate=0.0,
        webhook_copies=1,
        error_rates={},
        timeout_rate=0.0,
        latency_ms=0,
        latency_jitter_ms=0,
        early_webhook=False,
    )
    sim.set_faults(0.0)


def fault_model_supported(sim: SimulatorClient) -> bool:
    """True once the simulator reports the fault-model keys back (then leaves them off)."""
    supported = set_fault_model(sim, webhook_drop_rate=0.0, early_webhook=False)
    clear_faults(sim)
    return supported
