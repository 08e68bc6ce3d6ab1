"""What every scenario shares: a clean start with shared batches on, the drivers, and the
verdict row.

chaos = Chaos(stack, progress=print)
with chaos.scenario("duplicate-storm", size) as run:  # the worker sharing for this size
    pushes = run.load.new_pushes(size, "storm")
    ...
    run.expect(pushes, f"{size} ops, {2 * size} reviews")
    run.batches.complete_all(pushes)  # every group batch, as Gemini would
chaos.rows[-1]  # a Row: scenario, size, expected, observed, seconds, passed
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from google.cloud import firestore

from local.chaos.drivers import ReconcileDriver, clear_faults
from local.chaos.invariants import Shared, check, wait_quiet
from local.chaos.load import FULL_REPO, LoadDriver, Push
from local.chaos.sharing import Completer, for_size
from local.chaos.stack import FUNCTIONS, PROJECT, ChaosStack
from local.firestore_emulator import client_on
from shared.ledger import Ledger

QUIET_DEADLINE_S = 240.0


@dataclass
class Row:
    """One line of the table; `passed` is None for a skipped scenario."""

    scenario: str
    size: int
    expected: str = ""
    observed: str = ""
    seconds: float | None = None
    passed: bool | None = None
    skipped: str = ""
    violations: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "scenario": self.scenario,
            "size": self.size,
            "expected": self.expected,
            "observed": self.observed,
            "seconds_to_quiescence": None if self.seconds is None else round(self.seconds, 1),
            "passed": self.passed,
            "skipped": self.skipped or None,
            "violations": self.violations,
        }


class Skip(Exception):
    """Raised inside a scenario whose feature is missing; the message says which."""


@dataclass
class Run:
    """One scenario in progress."""

    row: Row
    load: LoadDriver
    batches: Completer
    reconcile: ReconcileDriver
    started: float
    # The groups' window: a group's opener is deferred that long before it seals.
    window_s: float = 0.0
    pushes: list[Push] = field(default_factory=list)
    refused: frozenset[str] = frozenset()
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def expect(
        self, pushes: list[Push], expected: str, refused: frozenset[str] = frozenset()
    ) -> None:
        """The scenario's pushes and the row's words for them; `refused`: the shas of the
        pushes whose request Gemini is made to refuse (each must end failed, alone)."""
        self.pushes = pushes
        self.refused = refused
        self.row.expected = expected

    def note(self, text: str) -> None:
        self.notes.append(text)

    def fail(self, problem: str) -> None:
        """A violation the scenario saw itself (added to the invariants' findings)."""
        self.problems.append(problem)


class Chaos:
    def __init__(
        self, stack: ChaosStack, progress: Callable[[str], None] = print, seed: int = 12
    ) -> None:
        self.stack = stack
        self.progress = progress
        self.rng = random.Random(seed)
        self.client = _client(stack.env["FIRESTORE_EMULATOR_HOST"])
        self.ledger = Ledger(self.client, grace=timedelta(seconds=1), timeout_s=10.0)
        self.rows: list[Row] = []

    def say(self, scenario: str, text: str) -> None:
        self.progress(f"{time.strftime('%H:%M:%S')} chaos {scenario}: {text}")

    @contextlib.contextmanager
    def scenario(
        self, name: str, size: int, sharing: Mapping[str, str] | None = None
    ) -> Iterator[Run]:
        """Clean data, every child up, the worker sharing batches (`sharing`, else
        local/chaos/sharing.py `for_size`), reconcile driven; the verdict row appended at
        the end."""
        row = Row(name, size)
        self.rows.append(row)
        sharing = sharing or for_size(size)
        self._fresh_stack(sharing)
        self.say(name, f"start, size {size}")
        load = LoadDriver(
            self.stack.ingress_url,
            self.stack.sim,
            self.rng,
            installation_id=self.stack.installation_for(FULL_REPO),
        )
        completer = Completer(self.stack.sim, self.client)
        with ReconcileDriver(self.stack.reconcile_url) as reconcile:
            window_s = float(sharing["REVIEW_GROUP_WINDOW_S"])
            run = Run(row, load, completer, reconcile, time.monotonic(), window_s)
            try:
                yield run
            except Skip as exc:
                row.skipped = str(exc)
                self.say(name, f"skipped: {exc}")
                return
            self._verdict(run)
        self.say(name, f"{'PASS' if row.passed else 'FAIL'} in {row.seconds or 0:.1f} s")
        for problem in row.violations[:20]:
            self.say(name, f"  violation: {problem}")

    def _fresh_stack(self, sharing: Mapping[str, str]) -> None:
        for child in ("firestore", "cloudtasks", "simulator", *FUNCTIONS):
            if child not in self.stack.children:
                self.stack.start(child)
        self.stack.share(sharing)
        self.stack.reset_data()
        clear_faults(self.stack.sim)
        self.stack.clear_lines()

    def _verdict(self, run: Run) -> None:
        row = run.row
        # Quiet may come no sooner than a group's window after its opener joined.
        deadline_s = QUIET_DEADLINE_S + run.window_s
        quiet = wait_quiet(self.ledger, run.pushes, deadline_s, tasks_left=self.stack.tasks_left)
        row.seconds = time.monotonic() - run.started
        lines = self.stack.lines("worker") + self.stack.lines("reconcile")
        runs = None if self.stack.app is None else self.stack.sim.check_runs(repo=FULL_REPO)
        batches = self.stack.sim.batches()
        shared = Shared(batches, run.refused)
        problems, census = check(self.ledger, self.client, run.pushes, lines, runs, shared)
        problems += run.problems
        if not quiet:
            problems.insert(0, f"not quiet after {deadline_s:.0f} s")
        stats = run.load.stats
        if stats.lost:
            problems.append(f"{len(stats.lost)} pushes never accepted: {stats.lost[:3]}")
        # 0: GitHub (the simulator) got no answer at all.
        answers = " ".join(
            f"{k}x{v}" if k else f"no-answer x{v}" for k, v in sorted(stats.statuses.items())
        )
        row.observed = (
            f"{census.operations} ops, {census.reviews} reviews, {census.deliveries} deliveries"
            f"; ingress {answers}; {stats.redeliveries} resent by the driver"
            + ("" if runs is None else f"; {_completed(runs)} check runs completed")
            + f"; {census.groups} groups, {len(batches)} batches"
            + "".join(f"; {note}" for note in run.notes)
        )
        row.violations = problems
        row.passed = not problems


def _client(emulator_host: str) -> firestore.Client:
    """A Firestore client on the stack's emulator."""
    return client_on(emulator_host, PROJECT)


def _completed(runs: list[dict[str, object]]) -> int:
    return sum(1 for run in runs if run.get("status") == "completed")


def expected_text(pushes: int) -> str:
    return f"{pushes} ops, {2 * pushes} reviews, 0 queued/dead"


def wait_for(condition: Callable[[], bool], deadline_s: float = 60.0) -> bool:
    """Poll `condition` until it holds (True) or `deadline_s` passes (False)."""
    give_up = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() >= give_up:
            return False
        time.sleep(0.05)
    return True
