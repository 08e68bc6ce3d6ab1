"""The chaos scenarios: each `scenario(chaos, size)` runs against the live stack, then the
invariants are checked over the whole database (`Chaos.scenario` appends the row).

`size` is the number of pushes; each push carries two Markdown files, so it must end
with one operation (its group's item) and two reviews. Every scenario shares batches
(local/chaos/sharing.py); those whose fault is in the sharing itself are in
shared_scenarios.py. A scenario whose fault needs a feature the stack does not have yet
raises `Skip` with the reason.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs

from local.chaos import github_scenarios, quota, shared_scenarios
from local.chaos.drivers import fault_model_supported, set_fault_model
from local.chaos.load import FULL_REPO, Push
from local.chaos.runner import Chaos, Run, Skip, expected_text, wait_for
from local.chaos.stack import tasks_persistence_supported
from shared.ledger import LedgerError


def _in_background(work: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def duplicate_storm(chaos: Chaos, size: int) -> None:
    """Every push sent 4 times under different delivery ids; every completion webhook twice."""
    with chaos.scenario("duplicate-storm", size) as run:
        pushes = run.load.new_pushes(size, "storm")
        run.expect(pushes, expected_text(size))
        run.load.send_many(pushes, copies=4)
        chaos.say("duplicate-storm", f"{4 * size} pushes sent; completing with 2 webhooks each")
        run.batches.complete_all(pushes, lambda made: "duplicate")


# 30% of the completion webhooks: 3 of every 10 batches, the first one among them.
DROPPED = frozenset({0, 3, 6})


def lost_webhooks(chaos: Chaos, size: int) -> None:
    """30% of completion webhooks dropped: reconcile must settle those."""
    with chaos.scenario("lost-webhooks", size) as run:
        pushes = run.load.new_pushes(size, "lost")
        run.expect(pushes, expected_text(size))
        run.load.send_many(pushes)
        run.batches.complete_all(
            pushes, lambda made: "drop" if made.number % 10 in DROPPED else "send"
        )
        dropped = sum(1 for made in run.batches.completed if made.number % 10 in DROPPED)
        run.note(f"{dropped} of {len(run.batches.completed)} webhooks dropped")


def worker_kill(chaos: Chaos, size: int) -> None:
    """The worker SIGKILLed while pushes are handled, and again while completions arrive."""
    name = "worker-sigkill"
    with chaos.scenario(name, size) as run:
        pushes = run.load.new_pushes(size, "wkill")
        run.expect(pushes, expected_text(size))
        sender = _in_background(lambda: run.load.send_many(pushes, workers=2))
        wait_for(lambda: run.load.stats.accepted() >= max(1, size // 3))
        chaos.stack.kill("worker")
        chaos.say(name, "worker SIGKILLed during pushes")
        sender.join()
        chaos.stack.restart("worker")
        killed = threading.Event()

        def kill_midway(completed: int) -> None:
            if completed >= max(1, size // 2) and not killed.is_set():
                killed.set()
                chaos.stack.kill("worker")
                chaos.say(name, "worker SIGKILLed during completions")
                chaos.stack.restart("worker")

        run.batches.complete_all(pushes, on_progress=kill_midway)
        run.note("worker killed 2x")


def reconcile_kill(chaos: Chaos, size: int) -> None:
    """Every webhook lost, so reconcile settles everything; it is SIGKILLed mid-run."""
    name = "reconcile-sigkill"
    with chaos.scenario(name, size) as run:
        pushes = run.load.new_pushes(size, "rkill")
        run.expect(pushes, expected_text(size))
        # Slow Gemini reads keep a run going long enough to be killed inside it.
        chaos.stack.sim.set_faults(0.0, latency_ms=300)
        run.load.send_many(pushes)
        run.batches.complete_all(pushes, lambda made: "drop")
        run.reconcile.in_flight.wait(timeout=30)
        time.sleep(0.5)
        chaos.stack.kill("reconcile")
        chaos.say(name, "reconcile SIGKILLed mid-run")
        chaos.stack.restart("reconcile")
        chaos.stack.sim.set_faults(0.0)
        run.note("all webhooks dropped; reconcile killed 1x")


def gemini_faults(chaos: Chaos, size: int) -> None:
    """Every webhook lost and Gemini answering 429/503 (and timeouts) while reconcile polls."""
    name = "gemini-faults"
    with chaos.scenario(name, size) as run:
        pushes = run.load.new_pushes(size, "gem")
        run.expect(pushes, expected_text(size))
        run.load.send_many(pushes)
        run.batches.complete_all(pushes, lambda made: "drop")
        rich = set_fault_model(
            chaos.stack.sim, error_rates={"429": 0.2, "503": 0.2}, timeout_rate=0.1, seed=size
        )
        if rich:
            run.note("429 20%, 503 20%, timeouts 10%")
            _settle_some(chaos, run, len(pushes) // 2)
        else:
            # The older simulator has one status at a time: 429 first, then 503.
            for status in (429, 503):
                chaos.stack.sim.set_faults(0.4, status=status, seed=size)
                _settle_some(chaos, run, len(pushes) // 2 if status == 429 else len(pushes))
            run.note("429 40% then 503 40% (no timeouts: simulator fault model pending)")
        set_fault_model(chaos.stack.sim, error_rates={}, timeout_rate=0.0)
        chaos.stack.sim.set_faults(0.0)


def _settle_some(chaos: Chaos, run: Run, count: int, deadline_s: float = 60.0) -> None:
    """Wait until `count` of the run's operations are settled (faults keep applying)."""

    def settled() -> bool:
        try:
            return chaos.ledger.queries.count_operations() - chaos.ledger.queries.count_operations(
                "pending"
            ) >= (count)
        except LedgerError:
            return False  # a restarting store: ask again

    wait_for(settled, deadline_s)


def tasks_outage(chaos: Chaos, size: int) -> None:
    """Cloud Tasks SIGKILLed with tasks queued, down 6 s, restarted on its data dir."""
    name = "cloudtasks-outage"
    if not tasks_persistence_supported():
        with chaos.scenario(name, size):
            raise Skip("needs the Cloud Tasks emulator's data_dir (tasks survive a restart)")
        return
    with chaos.scenario(name, size) as run:
        pushes = run.load.new_pushes(size, "ctasks")
        run.expect(pushes, expected_text(size))
        half = max(1, size // 2)
        chaos.stack.freeze("worker")  # tasks stay queued while the emulator dies
        run.load.send_many(pushes[:half])
        chaos.stack.kill("cloudtasks")
        chaos.say(name, "cloudtasks SIGKILLed; down for 6 s")
        chaos.stack.thaw("worker")
        time.sleep(6)
        chaos.stack.restart("cloudtasks")
        time.sleep(0.5)
        before = run.load.stats.redeliveries
        run.load.send_many(pushes[half:])
        late = run.load.stats.redeliveries - before
        if late:
            run.fail(f"{late} pushes sent 0.5 s after the restart were not answered 202 at once")
        run.batches.complete_all(pushes)


def firestore_freeze(chaos: Chaos, size: int) -> None:
    """The Firestore emulator SIGSTOPped during traffic (15 s; 5 s below 10 pushes), SIGCONTed."""
    name = "firestore-frozen"
    freeze_s = 15.0 if size >= 10 else 5.0
    with chaos.scenario(name, size) as run:
        pushes = run.load.new_pushes(size, "fsfreeze")
        run.expect(pushes, expected_text(size))
        completer = _in_background(lambda: run.batches.complete_all(pushes, deadline_s=180))
        sender = _in_background(lambda: run.load.send_many(pushes, workers=2))
        wait_for(lambda: run.load.stats.accepted() >= max(1, size // 3))
        chaos.stack.freeze("firestore")
        chaos.say(name, f"firestore SIGSTOPped for {freeze_s:.0f} s")
        time.sleep(freeze_s)
        chaos.stack.thaw("firestore")
        chaos.say(name, "firestore SIGCONTed")
        sender.join()
        completer.join()
        run.note(f"frozen {freeze_s:.0f} s")


def early_webhook(chaos: Chaos, size: int) -> None:
    """Each completion webhook arrives before the batch is registered in the ledger."""
    name = "early-webhook"
    if not fault_model_supported(chaos.stack.sim):
        with chaos.scenario(name, size):
            raise Skip("needs the simulator fault model (early_webhook)")
        return
    with chaos.scenario(name, size) as run:
        pushes = run.load.new_pushes(size, "early")
        run.expect(pushes, expected_text(size))
        set_fault_model(chaos.stack.sim, early_webhook=True)
        run.load.send_many(pushes)
        run.batches.complete_all(pushes)
        set_fault_model(chaos.stack.sim, early_webhook=False)


# Cloud Tasks runs 10x faster (a 15 s dispatch deadline lasts 1.5 s) while every GitHub
# file read (a GraphQL query, a contents GET) takes 2 s: each push's first attempt outlives
# its deadline, so Cloud Tasks' retries arrive while it still runs.
OVERLAP_TIME_SCALE = 0.1
OVERLAP_GITHUB_LATENCY_MS = 2000


def overlapping_redelivery(chaos: Chaos, size: int) -> None:
    """The worker slowed past the tasks' dispatch deadline: retries overlap the first attempt."""
    name = "overlapping-redelivery"
    with chaos.scenario(name, size) as run:
        pushes = run.load.new_pushes(size, "overlap")
        run.expect(pushes, expected_text(size))
        if chaos.stack.app is not None:
            # The reset before this scenario forgot the installation tokens the worker holds:
            # its first fetch would be a 401 and a retry, counted below as a second fetch.
            chaos.stack.stop_and_start("worker")
        with chaos.stack.tasks_time_scaled(OVERLAP_TIME_SCALE):
            chaos.stack.sim.github_latency(OVERLAP_GITHUB_LATENCY_MS)
            run.load.send_many(pushes)
            run.batches.complete_all(pushes)  # waits for every push's batch first
            chaos.stack.sim.github_latency(0)
        busy = _busy_answers(chaos.stack.lines("worker"))
        run.note(f"{sum(busy.values())} overlapping retries answered 503 busy")
        if not busy:
            run.fail("no retry overlapped a running attempt: the scenario proved nothing")
        for problem in _overlap_problems(chaos, pushes):
            run.fail(problem)


def _busy_answers(lines: list[str]) -> Counter[str]:
    """How many times the worker answered each delivery `busy` (another attempt ran it)."""
    counts: Counter[str] = Counter()
    for entry in _json_lines(lines, " busy"):
        if str(entry.get("message", "")).endswith(" busy"):
            counts[str(entry.get("delivery_id"))] += 1
    return counts


def _overlap_problems(chaos: Chaos, pushes: list[Push]) -> list[str]:
    """Each push's files fetched once (its handler ran once) and asked of Gemini in one
    batch; no `delivery_dead` alert from any attempt."""
    problems = []
    fetched = _file_reads(chaos.stack.sim.requests_log())
    asked = _requests_per_path(chaos.stack.sim.batches())
    for push in pushes:
        runs = {fetched[f"{push.sha}:{path}"] for path in push.paths}
        if runs != {1}:
            problems.append(f"push {push.sha[:10]}: files fetched {sorted(runs)} times, not once")
        batches = {asked[path] for path in push.paths}
        if batches != {1}:
            problems.append(f"push {push.sha[:10]}: files in {sorted(batches)} batches at Gemini")
    dead = list(_json_lines(chaos.stack.lines("worker"), "delivery_dead"))
    problems += [f"delivery_dead alert: {entry.get('message')}" for entry in dead]
    return problems


def _requests_per_path(batches: list[dict[str, Any]]) -> Counter[str]:
    """How many batches ask about each file: a group batch's request key is
    `{item}/{path}` (shared/ledger/groups.py `member_key`)."""
    asked: Counter[str] = Counter()
    for batch in batches:
        keys = {str((r.get("metadata") or {}).get("key")) for r in batch.get("requests") or []}
        asked.update(key.partition("/")[2] for key in keys)
    return asked


def _file_reads(log: list[dict[str, object]]) -> Counter[str]:
    """How many times each "SHA:PATH" was read: a GraphQL query counts each file it names
    (`files`), a Contents GET its own path at its `ref`."""
    reads: Counter[str] = Counter()
    contents = f"/repos/{FULL_REPO}/contents/"
    for entry in log:
        path = str(entry.get("path"))
        if entry.get("method") == "POST" and path == "/graphql":
            files = entry.get("files")
            if isinstance(files, list):
                reads.update(str(f) for f in files)
        elif entry.get("method") == "GET" and path.startswith(contents):
            ref = parse_qs(str(entry.get("query", ""))).get("ref", [""])[0]
            reads[f"{ref}:{path.removeprefix(contents)}"] += 1
    return reads


def _json_lines(lines: list[str], needle: str) -> Iterator[dict[str, object]]:
    for line in lines:
        if needle not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            yield entry


Scenario = Callable[[Chaos, int], None]
SCENARIOS: dict[str, Scenario] = {
    "duplicate-storm": duplicate_storm,
    "lost-webhooks": lost_webhooks,
    "worker-sigkill": worker_kill,
    "reconcile-sigkill": reconcile_kill,
    "gemini-faults": gemini_faults,
    "cloudtasks-outage": tasks_outage,
    "firestore-frozen": firestore_freeze,
    "early-webhook": early_webhook,
    "overlapping-redelivery": overlapping_redelivery,
    "ingress-outage": github_scenarios.ingress_outage,
    "handoff-outage": github_scenarios.handoff_outage,
    "slow-ack": github_scenarios.slow_ack,
    "quota": quota.quota,
    "poison-request": shared_scenarios.poison_request,
    "gemini-refusal-spell": shared_scenarios.refusal_spell,
    "group-cut": shared_scenarios.group_cut,
    "retention": shared_scenarios.retention,
}
FULL_SIZES = {
    "duplicate-storm": 100,
    "lost-webhooks": 50,
    "worker-sigkill": 30,
    "reconcile-sigkill": 20,
    "gemini-faults": 20,
    "cloudtasks-outage": 20,
    "firestore-frozen": 20,
    "early-webhook": 10,
    "overlapping-redelivery": 10,
    "ingress-outage": 20,
    "handoff-outage": 20,
    "slow-ack": 20,
    "quota": 300,
    "poison-request": 40,
    "gemini-refusal-spell": 40,
    "group-cut": 1000,
    "retention": 100,
}
# `quota` needs more groups than the 5 batches it may have in flight: 12 pushes make 6.
# `poison-request` two waves of a group of four; `group-cut` a group of about 30 items;
# `gemini-refusal-spell` four waves (a 12 s spell); `retention` a group of 8 to cut.
REDUCED_SIZES = {name: 3 for name in SCENARIOS} | {
    "duplicate-storm": 4,
    "quota": 12,
    "poison-request": 8,
    "gemini-refusal-spell": 4,
    "group-cut": 30,
    "retention": 8,
}
