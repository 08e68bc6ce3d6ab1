"""bench/e2e.py's priority rounds: a person's "Re-run" pressed behind a flood of pushes.

Gemini runs batches a few at a time and documents `batch.priority` ("Batches with a higher
priority value will be processed before batches with a lower priority value"); it
publishes no capacity. The simulator's processing model stands in for it
(local/simulator/processing.py): `slots` batches run at once, each `run_s`, the rest
queue. One round, on the whole local stack (bench/e2e.py's, one batch per push):

    targets   `presses` pushes as the GitHub App gets them, reviewed, their check runs
              completed (a Re-run waits while its run is still being written)
    flood     `flood` more pushes, sent by `senders` threads: background batches that
              fill the queue
    press     "Re-run" on every target's check run at once, mid-flood: once half the
              flood's batches exist, the rest still arriving (the simulator's signed
              `check_run` `rerequested`, straight to the ingress): ingress -> Cloud Tasks
              -> worker, beside the flood's deliveries -> the re-run's own batch, with
              Gemini's `batch.priority` api.INTERACTIVE_PRIORITY
    measured  per press, from the press: its batch created, started (its wait in the
              queue), done, and its operation settled; the flood's batches made and
              queued at the press; the flood's last batch done

The round runs twice, with the simulator honouring `batch.priority` (`on`) and ignoring it
(`off`: creation order alone, as if no batch named one, as before this change), side by
side. hookledger sends the same thing both times: what changes is whether the queue reads
it. A reconcile runs every 2 s as the safety net it is in production (a batch done before
its registration is settled by it).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from apps.review.checks import CHECK_NAME
from apps.review.kind import RERUN_MARK
from bench._loadgen import percentile
from local.chaos.drivers import ReconcileDriver
from local.chaos.invariants import check, wait_quiet
from local.chaos.load import FULL_REPO, LoadDriver, Push
from local.chaos.stack import ChaosStack

PRIORITY_MODES = ("on", "off")
# Full run: enough flood to queue a minute of background work ahead of the presses.
FLOOD, PRESSES, SLOTS, RUN_S = 200, 4, 4, 1.0
QUICK_FLOOD, QUICK_PRESSES, QUICK_SLOTS, QUICK_RUN_S = 12, 1, 2, 0.5
# How long to wait for a target's check run, the flood's batches, a press's batch.
STEP_DEADLINE_S = 180.0
POLL_S = 0.2


@dataclass(frozen=True)
class PriorityLoad:
    flood: int = FLOOD
    presses: int = PRESSES
    slots: int = SLOTS
    run_s: float = RUN_S
    senders: int = 16


class RoundFailed(Exception):
    """A step of the round did not happen within its deadline; the message says which."""


def until(what: str, found: Callable[[], Any], deadline_s: float = STEP_DEADLINE_S) -> Any:
    """`found()` once it is truthy, polled every POLL_S; `RoundFailed` naming `what` after
    `deadline_s`."""
    give_up = time.monotonic() + deadline_s
    while True:
        value = found()
        if value:
            return value
        if time.monotonic() >= give_up:
            raise RoundFailed(f"no {what} within {deadline_s:.0f} s")
        time.sleep(POLL_S)


def priority_round(
    stack: ChaosStack,
    load: PriorityLoad,
    honour_priority: bool,
    rng: random.Random,
    quiet_deadline_s: float,
    progress: Callable[[str], None],
) -> tuple[dict[str, Any], list[str]]:
    """One round (the module's docstring); its figures and the invariants' violations."""
    from local.chaos.runner import _client
    from shared.ledger import Ledger

    label = "on" if honour_priority else "off"
    installation = stack.installation_for(FULL_REPO)
    if installation is None:
        return {"skipped": "token mode: no check run to press Re-run on"}, []
    stack.reset_data()
    stack.clear_lines()
    client = _client(stack.env["FIRESTORE_EMULATOR_HOST"])
    ledger = Ledger(client, grace=timedelta(seconds=1), timeout_s=30.0)
    sim = stack.sim
    sim.set_processing(slots=load.slots, run_s=load.run_s, honour_priority=honour_priority)
    app_pushes = LoadDriver(stack.ingress_url, sim, rng, installation_id=installation)
    targets = app_pushes.new_pushes(load.presses, f"priority-{label}-target")
    flood = LoadDriver(stack.ingress_url, sim, rng).new_pushes(load.flood, f"priority-{label}")
    problems: list[str] = []
    with ReconcileDriver(stack.reconcile_url):
        app_pushes.send_all(targets)
        runs = [completed_run(sim, push) for push in targets]
        progress(f"priority {label}: {len(targets)} target(s) reviewed; flooding {len(flood)}")
        flooding = threading.Thread(
            target=LoadDriver(stack.ingress_url, sim, rng).send_many,
            args=(flood,),
            kwargs={"workers": load.senders},
            name="flood",
        )
        flooding.start()
        made = until("half the flood's batches", lambda: flood_made(sim, load, len(targets)))
        queued = int(sim.processing()["queued"])
        pressed = [
            press(stack, push, run, installation) for push, run in zip(targets, runs, strict=True)
        ]
        progress(f"priority {label}: Re-run pressed {len(pressed)} time(s), {queued} queued")
        batches = [ended_batch(sim, tag) for _at, tag in pressed]
        flooding.join()
        quiet = wait_quiet(ledger, [*flood, *targets], quiet_deadline_s)
    if not quiet:
        problems.append(f"not quiet after {quiet_deadline_s:.0f} s")
    lines = stack.lines("worker") + stack.lines("reconcile")
    reruns = {_name(batch) for batch in batches}
    problems += [p for p in check(ledger, client, flood, lines)[0] if not replaced(p, reruns)]
    settled = [rerun_settled(ledger, batch, problems) for batch in batches]
    listed = sim.batches()
    sim.set_processing(slots=None, run_s=None, honour_priority=True)
    return figures(pressed, batches, settled, listed, (made, queued), load, flood), problems


def completed_run(sim: Any, push: Push) -> int:
    """The id of `push`'s check run once it shows completed (its first review settled)."""

    def done() -> int | None:
        runs = [r for r in sim.check_runs(repo=FULL_REPO, sha=push.sha) if r["name"] == CHECK_NAME]
        return int(runs[0]["id"]) if runs and runs[0]["status"] == "completed" else None

    return int(until(f"completed check run of {push.sha[:10]}", done))


def flood_made(sim: Any, load: PriorityLoad, targets: int) -> int:
    """How many flood batches exist (running, queued or done), once half of them do."""
    made = len(sim.batches()) - targets
    return made if made >= max(1, load.flood // 2) else 0


def press(stack: ChaosStack, push: Push, run_id: int, installation: int) -> tuple[float, str]:
    """Press "Re-run" on `push`'s run: (when, epoch s; the re-run's tag, its batch's name)."""
    at = time.time()
    delivery = stack.sim.rerequest_check_run(
        run_id, url=f"{stack.ingress_url}/github", installation_id=installation
    )
    if delivery.get("status") != 202:
        raise RoundFailed(f"Re-run of check run {run_id} answered {delivery.get('status')}")
    [run] = [r for r in stack.sim.check_runs(repo=FULL_REPO) if r["id"] == run_id]
    return (
        at,
        f"hookledger:review:{FULL_REPO}@{run['head_sha']}{RERUN_MARK}{delivery['delivery_id']}",
    )


def ended_batch(sim: Any, tag: str) -> dict[str, Any]:
    """The re-run's batch (display name `tag`), once it has ended."""

    def ended() -> dict[str, Any] | None:
        found = [b for b in sim.batches() if b["display_name"] == tag]
        return found[0] if found and found[0].get("ended_at") else None

    return dict(until(f"re-run batch {tag} ended", ended))


def replaced(problem: str, reruns: set[str]) -> bool:
    """A target's review rewritten by its re-run: what a re-run is for, not a violation."""
    return any(problem.endswith(f": rewritten after creation (by {name})") for name in reruns)


def _name(batch: dict[str, Any]) -> str:
    name = str(batch["name"])
    return name if name.startswith("batches/") else f"batches/{name}"


def rerun_settled(
    ledger: Any, batch: dict[str, Any], problems: list[str]
) -> tuple[datetime, str] | None:
    """When the re-run's operation settled, and by what (webhook or reconcile)."""
    name = _name(batch)
    op = ledger.operations.get(name)
    if op is None or op.settled_at is None:
        problems.append(f"re-run {name} not settled")
        return None
    return op.settled_at, str(op.settled_by)


def _at(stamp: str | None) -> float | None:
    return (
        None if stamp is None else datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    )


def figures(
    pressed: list[tuple[float, str]],
    batches: list[dict[str, Any]],
    settled: list[tuple[datetime, str] | None],
    listed: list[dict[str, Any]],
    at_press: tuple[int, int],
    load: PriorityLoad,
    flood: list[Push],
) -> dict[str, Any]:
    """Press -> created / started / done / settled (ms, p50 and max over the presses)."""
    spans: dict[str, list[float]] = {"created": [], "started": [], "done": [], "settled": []}
    for (at, _tag), batch, done in zip(pressed, batches, settled, strict=True):
        stamps = {
            "created": _at(batch.get("created_at")),
            "started": _at(batch.get("started_at")),
            "done": _at(batch.get("ended_at")),
            "settled": done[0].timestamp() if done is not None else None,
        }
        for span, stamp in stamps.items():
            if stamp is not None:
                spans[span].append((stamp - at) * 1000)
    priorities = sorted({int(b.get("priority") or 0) for b in batches})
    shas = {push.sha for push in flood}
    flood_ends = [_at(b.get("ended_at")) for b in listed if _sha_of(b) in shas]
    first_press = min(at for at, _ in pressed)
    last_flood = max((end for end in flood_ends if end is not None), default=None)
    return {
        "presses": len(pressed),
        "flood_pushes": load.flood,
        "flood_batches_at_press": at_press[0],
        "queued_at_press": at_press[1],
        "rerun_priorities": priorities,
        "rerun_settled_by": dict(Counter(done[1] for done in settled if done is not None)),
        **{f"press_to_{span}_ms": _spread(values) for span, values in spans.items()},
        # The background's price: when its last batch ended, from the first press.
        "press_to_flood_done_ms": (
            round((last_flood - first_press) * 1000, 1) if last_flood is not None else None
        ),
    }


def _sha_of(batch: dict[str, Any]) -> str:
    return str(batch.get("display_name", "")).rpartition("@")[2]


def _spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "max": None}
    return {"p50": round(percentile(values, 50), 1), "max": round(max(values), 1)}


def side_by_side(rounds: dict[str, Any]) -> dict[str, Any]:
    """The headline of `on` beside `off`: press -> created, started, done, settled (p50)."""
    spans = ("press_to_created_ms", "press_to_started_ms", "press_to_done_ms",
             "press_to_settled_ms")  # fmt: skip
    return {
        span: {mode: rounds[mode].get(span, {}).get("p50") for mode in PRIORITY_MODES}
        for span in spans
        if all(mode in rounds for mode in PRIORITY_MODES)
    }
