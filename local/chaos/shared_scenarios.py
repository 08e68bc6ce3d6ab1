"""Chaos scenarios whose fault is in the sharing itself (docs/reliability.md, "Shared
batches under faults"):

- `poison-request`: Gemini refuses one push's request in a group of many, first naming it
  (`requests[i]`), then, for a second wave, with its bare 400 that names none;
- `gemini-refusal-spell`: every create refused with 403 while pushes arrive, then taken;
- `group-cut`: one group of many, a third of its requests refused; the processes failing
  those items, then those fanning the batch out to the rest, SIGKILLed part way;
- `retention`: the processes fanning a settled group's batch out SIGKILLed at once, and
  Gemini deleting the batch (its retention over) before the outbox sweep takes over.

Besides the whole-database invariants (every push one item of one group, settled once,
reviewed, or failed `request_refused` alone when its request was refused), each checks
that its fault happened where it meant it to: a scenario whose fault missed its moment
fails as having proved nothing.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from google.api_core.exceptions import GoogleAPIError

from apps.review import KIND as REVIEW_KIND
from local.chaos.load import Push
from local.chaos.runner import Chaos, Run, expected_text, wait_for
from local.chaos.sharing import Stored, for_size, read_groups, settings
from shared.ledger import LedgerError
from shared.ledger.group_records import OPEN
from shared.settlement.groups import GROUP_KIND
from shared.sharing.seal import HOLD_ALERT, HOLD_ALERT_WINDOW

POISON = "CHAOS-POISONED-REQUEST"
FUNCTIONS = ("worker", "reconcile")


def _count(chaos: Chaos, status: str, kind: str = REVIEW_KIND) -> int | None:
    """Operations of `kind` with `status` (None while the store does not answer)."""
    try:
        return chaos.ledger.queries.count_operations(status=status, kind=kind)
    except LedgerError:
        return None


def _kill_functions(chaos: Chaos, scenario: str, why: str) -> None:
    """SIGKILL the worker and reconcile together: whichever was at work is cut."""
    for name in FUNCTIONS:
        chaos.stack.kill(name)
    chaos.say(scenario, f"worker and reconcile SIGKILLed {why}")


def _restart_functions(chaos: Chaos) -> None:
    for name in FUNCTIONS:
        chaos.stack.restart(name)


def _one_group_window(size: int) -> float:
    """A window every push of the scenario joins within (the last fills the group)."""
    return 20.0 + 0.3 * size


def _patience(size: int) -> float:
    """How long a step of a one-group scenario may take: the worker joins `size` pushes
    one by one before the group is sealed, made and settled."""
    return 120.0 + 0.5 * size


# ----------------------------------------------------------------- poison-request


def poison_request(chaos: Chaos, size: int) -> None:
    """One request Gemini refuses in a group of many, in each of two waves: named by its
    index, then by Gemini's bare 400 (the group split in halves down to it)."""
    name = "poison-request"
    per_group = max(4, size // 4)  # pushes a group: two waves of one or more full groups
    with chaos.scenario(name, size, settings(2 * per_group, window_s=5.0, shards=1)) as run:
        half = size // 2
        named, bare = 1, half + 1  # the poisoned push of each wave
        pushes = run.load.new_pushes(size, "poison", marked={named, bare}, marker=POISON)
        refused = frozenset({pushes[named].sha, pushes[bare].sha})
        run.expect(pushes, f"{expected_text(size)}; 2 refused alone", refused)
        chaos.stack.sim.poison(POISON, name_index=True)
        run.load.send_many(pushes[:half])
        # The first wave's groups made before Gemini stops naming the request.
        if not wait_for(lambda: _decided(chaos, pushes[:half]), 60):
            run.fail("the first wave's groups were not made within 60 s")
        chaos.stack.sim.poison(POISON, name_index=False)
        chaos.say(name, "Gemini now refuses with its bare 400, naming no request")
        run.load.send_many(pushes[half:])
        run.batches.complete_all(pushes)
        items, parts = _group_of(chaos, pushes[bare])
        if items < 2 or parts < 2:
            run.fail(f"the bare 400's group of {items} items made in {parts} parts: not narrowed")
        refusals = chaos.stack.sim.poison_state().get("refused")
        run.note(
            f"{refusals} creates refused; the bare 400's group of {items} items made in "
            f"{parts} parts"
        )


def _decided(chaos: Chaos, pushes: list[Push]) -> bool:
    """Every push in a sealed group whose every part is made or failed."""
    try:
        stored = read_groups(chaos.client)
    except GoogleAPIError:  # a slow or frozen store: ask again
        return False
    decided = {gid for gid, g in stored.groups.items() if g.status != OPEN and g.settled_parts}
    return _all_in(stored, decided, pushes)


def _all_in(stored: Stored, gids: set[str], pushes: list[Push]) -> bool:
    """Every push is an item of one of the groups `gids`."""
    tags = {item.tag for item in stored.items if item.gid in gids}
    return all(push.tag in tags for push in pushes)


def _group_of(chaos: Chaos, push: Push) -> tuple[int, int]:
    """(items, parts) of the group of `push`: how many it holds, and was made in."""
    stored = read_groups(chaos.client)
    for item in stored.items:
        if item.tag == push.tag and item.gid in stored.groups:
            group = stored.groups[item.gid]
            return group.count, len(group.parts)
    return 0, 0


# ----------------------------------------------------------------- gemini-refusal-spell

SPELL_S = 120.0  # at full size; three seconds a push below it
WAVES = 4


def refusal_spell(chaos: Chaos, size: int) -> None:
    """Every create refused (403, the deployment) for a spell while pushes arrive in
    waves: each group is held, none fails, and each is made once Gemini accepts again."""
    name = "gemini-refusal-spell"
    spell_s = min(SPELL_S, 3.0 * size)
    with chaos.scenario(name, size, for_size(size)) as run:
        pushes = run.load.new_pushes(size, "spell")
        run.expect(pushes, f"{expected_text(size)}; none failed")
        chaos.stack.sim.refuse_creates(403)
        started, wall = time.monotonic(), time.time()
        chaos.say(name, f"Gemini refuses every create (403) for {spell_s:.0f} s")
        waves = [pushes[i::WAVES] for i in range(WAVES)]
        for number, wave in enumerate(w for w in waves if w):
            _until(started + number * spell_s / WAVES)  # the waves spread over the spell
            run.load.send_many(wave)
        if not wait_for(lambda: _held(chaos, pushes), 60):
            run.fail("not every push's group was held by the refusal within 60 s")
        _until(started + spell_s)
        made = len(chaos.stack.sim.batches())
        chaos.stack.sim.stop_refusing_creates()
        ended = time.time()
        chaos.say(name, "Gemini takes creates again")
        if made:
            run.fail(f"{made} batches made while Gemini refused every create")
        # A group first refused at the spell's start is held 30 s, 60 s, then 120 s.
        run.batches.complete_all(pushes, deadline_s=2 * spell_s + 180)
        refused = chaos.stack.sim.create_refusal_state().get("refused") or 0
        groups = len(read_groups(chaos.client).groups)
        alerts = _alerts(chaos)
        windows = _windows(wall, ended)
        if not 1 <= alerts <= windows:
            run.fail(f"{alerts} {HOLD_ALERT} alerts, expected 1 per 30 min ({windows})")
        run.note(
            f"{refused} creates refused for {groups} groups over {spell_s:.0f} s; "
            f"{HOLD_ALERT} alerts: {alerts}"
        )


def _until(moment: float) -> None:
    """Wait until `time.monotonic()` reaches `moment`: the spell's length is the fault."""
    time.sleep(max(0.0, moment - time.monotonic()))


def _held(chaos: Chaos, pushes: list[Push]) -> bool:
    """Every push in a group held by the refusal (sealed, `held_since` set)."""
    try:
        stored = read_groups(chaos.client)
    except GoogleAPIError:  # a slow or frozen store: ask again
        return False
    held = {gid for gid, g in stored.groups.items() if g.held_since is not None}
    return _all_in(stored, held, pushes)


def _alerts(chaos: Chaos) -> int:
    """`gemini_refused_deployment` alert lines from every worker and reconcile process."""
    count = 0
    for line in chaos.stack.lines("worker") + chaos.stack.lines("reconcile"):
        if HOLD_ALERT not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("alert") == HOLD_ALERT:
            count += 1
    return count


def _windows(start: float, end: float) -> int:
    """How many of the alert's 30-min windows (aligned to the epoch) [start, end] touches."""
    width = HOLD_ALERT_WINDOW.total_seconds()
    return int(end // width) - int(start // width) + 1


# ----------------------------------------------------------------- group-cut


def group_cut(chaos: Chaos, size: int) -> None:
    """One group of `size` items, a third of its requests refused by Gemini: the processes
    failing those items are SIGKILLed part way, then those settling the rest from the
    completed batch; every item must still settle once."""
    name = "group-cut"
    sharing = settings(2 * size, _one_group_window(size), shards=1)
    with chaos.scenario(name, size, sharing) as run:
        marked = set(range(0, size, 3))
        pushes = run.load.new_pushes(size, "cut", marked=marked, marker=POISON)
        refused = frozenset(pushes[i].sha for i in marked)
        run.expect(pushes, f"{expected_text(size)}; {len(refused)} refused", refused)
        chaos.stack.sim.poison(POISON)
        run.load.send_many(pushes)
        failing = _cut(chaos, run, "failed", len(refused), "while failing the refused items")
        live = size - len(refused)
        settling = _cut_in_background(chaos, run, "succeeded", live, "during the fan-out")
        run.batches.complete_all(pushes, deadline_s=_patience(size))
        settling.join(timeout=_patience(size))
        run.note(f"cut at {failing} of {len(refused)} failed, {settling.at} of {live} settled")


def _cut(chaos: Chaos, run: Run, status: str, total: int, why: str) -> int | None:
    """Once a quarter of the `total` items are `status`, SIGKILL the worker and
    reconcile, count them (nothing settles while both are dead) and restart both; the
    count at the cut (None: never reached). A cut after the last item proved nothing."""
    name = run.row.scenario
    patience = _patience(len(run.pushes))
    if not wait_for(lambda: (_count(chaos, status) or 0) >= max(1, total // 4), patience):
        run.fail(f"{name}: {total // 4} items never {status}: no cut {why}")
        return None
    _kill_functions(chaos, name, why)
    at = _count(chaos, status)
    _restart_functions(chaos)
    if at is None or at >= total:
        run.fail(f"{name}: cut {why} at {at} of {total}: after the last, it proved nothing")
    return at


class _Cut(threading.Thread):
    """`_cut` in the background (it waits for progress another driver makes); `at`."""

    def __init__(self, work: Callable[[], int | None]) -> None:
        super().__init__(daemon=True)
        self._work = work
        self.at: int | None = None

    def run(self) -> None:
        self.at = self._work()


def _cut_in_background(chaos: Chaos, run: Run, status: str, total: int, why: str) -> _Cut:
    cut = _Cut(lambda: _cut(chaos, run, status, total, why))
    cut.start()
    return cut


# ----------------------------------------------------------------- retention


def retention(chaos: Chaos, size: int) -> None:
    """The processes fanning a settled group's batch out SIGKILLed as it settles, and
    the batch deleted at Gemini (its retention over) before the outbox sweep takes the
    fan-out over: every item must settle from the rows stored when the group settled."""
    name = "retention"
    sharing = settings(2 * size, _one_group_window(size), shards=1)
    with chaos.scenario(name, size, sharing) as run:
        pushes = run.load.new_pushes(size, "retain")
        run.expect(pushes, expected_text(size))
        run.load.send_many(pushes)
        gone: dict[str, Any] = {}
        forget = _Cut(lambda: _forget_batch(chaos, run, gone))
        forget.start()
        run.batches.complete_all(pushes, deadline_s=_patience(size))
        forget.join(timeout=_patience(size))
        left = forget.at
        if not left:
            run.fail(f"{left} items left when Gemini forgot the batch: it proved nothing")
        run.note(f"Gemini deleted {gone.get('batch')} with {left} of {size} items unsettled")


def _forget_batch(chaos: Chaos, run: Run, gone: dict[str, Any]) -> int | None:
    """Once a group's operation settled: SIGKILL the worker and reconcile, delete its
    batch at Gemini, count the items still pending, restart both; that count."""
    name = run.row.scenario

    def group_settled() -> bool:
        return (_count(chaos, "succeeded", GROUP_KIND) or 0) >= 1

    if not wait_for(group_settled, _patience(len(run.pushes))):
        run.fail(f"{name}: the group's batch never settled")
        return None
    _kill_functions(chaos, name, "as the group's batch settled")
    try:
        [settled] = chaos.ledger.queries.list_operations(
            status="succeeded", kind=GROUP_KIND, limit=1
        )
        chaos.stack.sim.delete_batch(settled.name)  # the group's operation is its batch
        gone["batch"] = settled.name
        chaos.say(name, f"Gemini deleted {settled.name}: its retention is over")
        return _count(chaos, "pending")
    finally:
        _restart_functions(chaos)
