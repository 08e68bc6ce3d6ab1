"""Chaos scenarios where GitHub itself sends every push (the simulator's sending side) and,
as GitHub does, never retries: what the ingress misses only the GitHub delivery sweep
(shared/recovery) can bring back.

- `ingress-outage`: the ingress stopped as in a deploy while pushes arrive, then started;
- `handoff-outage`: Cloud Tasks down, so the ingress answers 503;
- `slow-ack`: some answers held back past GitHub's 10 s, after the hand-off.

Each ends, besides the whole-database invariants, with: every push that failed at GitHub
brought back (or, for a slow answer, found accepted and left alone), none redelivered
twice, and each recovered by one of the first `SWEEP_PERIODS` sweep runs that started
after its outage ended (counted in runs, not seconds: the driver calls the sweep every
period, each run acting on what failed at least the sweep's grace, 2 s, before it).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from local.chaos.load import Push
from local.chaos.runner import Chaos, Run, Skip, expected_text, wait_for
from local.chaos.stack import tasks_persistence_supported
from shared.ledger import LedgerError, Recovery

SWEEP_PERIODS = 2
SLOW_HOLD_S = 12.0  # past GitHub's 10 s
CLOSE_DEADLINE_S = 120.0


class Sent:
    """The deliveries GitHub made of a scenario's pushes, and when the last failure was."""

    def __init__(self) -> None:
        self.failed: list[str] = []  # guids
        self.last_failure = 0.0  # time.monotonic() after the last failed attempt

    def add(self, delivery: dict[str, Any]) -> None:
        if delivery.get("status") != "OK":
            self.failed.append(str(delivery["guid"]))
            self.last_failure = time.monotonic()


def _send(run: Run, pushes: list[Push], sent: Sent, workers: int = 4) -> None:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for delivery in pool.map(run.load.send_as_github, pushes):
            sent.add(delivery)


def ingress_outage(chaos: Chaos, size: int) -> None:
    """The ingress stopped for a deploy while a third of the pushes arrive."""

    def start() -> None:
        chaos.stack.stop("ingress")

    def end() -> None:
        chaos.stack.start("ingress")

    _outage(chaos, size, "ingress-outage", (start, "ingress stopped"), (end, "ingress started"))


def handoff_outage(chaos: Chaos, size: int) -> None:
    """Cloud Tasks SIGKILLed while a third of the pushes arrive: the ingress answers 503."""
    name = "handoff-outage"
    if not tasks_persistence_supported():
        with chaos.scenario(name, size):
            raise Skip("needs the Cloud Tasks emulator's data_dir (tasks survive a restart)")
        return

    def start() -> None:
        chaos.stack.kill("cloudtasks")

    def end() -> None:
        chaos.stack.restart("cloudtasks")

    _outage(
        chaos,
        size,
        name,
        (start, "cloudtasks SIGKILLed"),
        (end, "cloudtasks restarted on its data dir"),
    )


Step = tuple[Callable[[], None], str]


def _outage(chaos: Chaos, size: int, name: str, start: Step, end: Step) -> None:
    """A third of the pushes sent, the outage `start`ed, a third sent into it, `end`, the
    rest sent; then every failed one must come back (`_recovered`)."""
    with chaos.scenario(name, size) as run:
        pushes = run.load.new_pushes(size, name.split("-")[0])
        run.expect(pushes, expected_text(size))
        before, during, after = _thirds(pushes)
        sent = Sent()
        _send(run, before, sent)
        start[0]()
        chaos.say(name, f"{start[1]}; GitHub sends {len(during)} pushes meanwhile")
        _send(run, during, sent)
        end[0]()
        chaos.say(name, end[1])
        _send(run, after, sent)
        run.batches.complete_all(pushes)
        _recovered(chaos, run, sent, name)


def slow_ack(chaos: Chaos, size: int) -> None:
    """A quarter of the pushes answered after GitHub's 10 s, once handed off: GitHub counts
    them failed, the ledger has them; the sweep must leave them alone."""
    name = "slow-ack"
    with chaos.scenario(name, size) as run:
        pushes = run.load.new_pushes(size, "slow")
        run.expect(pushes, expected_text(size))
        guids = {push.sha: str(uuid.uuid4()) for push in pushes}
        slow = {guids[push.sha] for push in pushes[: max(1, size // 4)]}
        chaos.stack.github_proxy.slow(slow, SLOW_HOLD_S)
        sent = Sent()
        try:
            with ThreadPoolExecutor(max_workers=max(4, len(slow))) as pool:
                sends = [pool.submit(run.load.send_as_github, p, guids[p.sha]) for p in pushes]
                for future in sends:
                    sent.add(future.result())
        finally:
            chaos.stack.github_proxy.slow(set(), 0.0)
        if set(sent.failed) != slow:
            run.fail(f"GitHub failed {len(sent.failed)} pushes, {len(slow)} were slowed")
        run.batches.complete_all(pushes)
        recoveries = _closed(chaos, run, sent.failed)
        for guid in slow:
            recovery = recoveries.get(guid)
            if recovery is None or (recovery.status, recovery.via) != ("accepted", None):
                state = None if recovery is None else (recovery.status, recovery.via)
                run.fail(f"slow delivery {guid}: {state}, not accepted and left alone")
        _no_double_redelivery(chaos, run, sent)
        run.note(f"{len(slow)} answered after 10 s; all accepted, none redelivered")


def _thirds(pushes: list[Push]) -> tuple[list[Push], list[Push], list[Push]]:
    third = max(1, len(pushes) // 3)
    return pushes[:third], pushes[third : 2 * third], pushes[2 * third :]


def _recovered(chaos: Chaos, run: Run, sent: Sent, name: str) -> None:
    """Every failed push recovered, by one of the first sweep runs after the outage."""
    if not sent.failed:
        run.fail("no push failed at GitHub: the scenario proved nothing")
        return
    recoveries = _closed(chaos, run, sent.failed)
    after = [s.report.get("run_id") for s in run.reconcile.sweeps if s.started > sent.last_failure]
    before = {s.report.get("run_id") for s in run.reconcile.sweeps} - set(after)
    allowed = before | set(after[:SWEEP_PERIODS])
    how: Counter[str] = Counter()
    for guid in sent.failed:
        recovery = recoveries.get(guid)
        if recovery is None or recovery.status != "recovered":
            run.fail(f"{name}: delivery {guid} is {recovery and recovery.status}, not recovered")
            continue
        how[str(recovery.via)] += 1
        if recovery.sweep_run not in allowed:
            late = after.index(recovery.sweep_run) + 1 if recovery.sweep_run in after else "?"
            run.fail(f"delivery {guid} recovered by sweep run {late} after the outage")
    _no_double_redelivery(chaos, run, sent)
    shown = ", ".join(f"{n} by {via}" for via, n in sorted(how.items()))
    run.note(f"{len(sent.failed)} failed at GitHub, recovered {shown}")


def _closed(chaos: Chaos, run: Run, guids: list[str]) -> dict[str, Recovery]:
    """The recoveries of `guids` once none is open (the sweep closes them a run after the
    worker records them); what there is when `CLOSE_DEADLINE_S` passes."""
    found: dict[str, Recovery] = {}

    def all_closed() -> bool:
        nonlocal found
        try:
            found = chaos.ledger.recoveries.get_many(guids)
        except LedgerError:
            return False  # a restarting store: ask again
        return len(found) == len(set(guids)) and not any(r.open for r in found.values())

    if not wait_for(all_closed, CLOSE_DEADLINE_S):
        run.fail(f"recoveries still open or missing after {CLOSE_DEADLINE_S:.0f} s")
    return found


def _no_double_redelivery(chaos: Chaos, run: Run, sent: Sent) -> None:
    """GitHub redelivered each event at most once (the sweep's one ask), none by hand."""
    redelivered = Counter(
        str(d["guid"]) for d in chaos.stack.sim.github_hook_deliveries() if d.get("redelivery")
    )
    for guid, times in redelivered.items():
        if times > 1:
            run.fail(f"delivery {guid} redelivered {times} times")
    if run.load.stats.redeliveries:
        run.fail(f"{run.load.stats.redeliveries} pushes resent by the load driver")
