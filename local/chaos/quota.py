"""The `quota` chaos scenario: pushes share batches while Gemini allows 5 batches in flight.

Each push (two files) joins a shared batch's group (`REVIEW_GROUP_REQUESTS`, here a sixth
of the scenario's requests, so about six groups; `REVIEW_GROUP_WINDOW_S` 10 s; one shard);
the simulator refuses a create past 5 batches in flight with Gemini's 429, and the driver
holds every batch until the quota refused a create, so it binds: a sealer is deferred and
tries again. Besides the whole-database invariants (each push in exactly one group, every
batch Gemini made a group's): at most ceil(requests / N) + 5 batches created, and the
quota refused one (docs/architecture.md, "Shared batches").
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

from local.chaos.load import Push
from local.chaos.runner import Chaos, Run, expected_text
from local.chaos.sharing import GROUP_TAG_PREFIX, read_groups, settings

IN_FLIGHT = 5
HOLD_S = 2.0  # a batch is completed this long after the driver first saw it
# Long beside a group's filling (pushes arrive at tens a second): groups close full, but
# the last; the sealer of a full group seals at once, whatever the window.
WINDOW_S = 10.0


def group_requests(size: int) -> int:
    """N: a sixth of the scenario's requests (two per push), at least four."""
    return max(4, (2 * size) // 6)


def quota(chaos: Chaos, size: int) -> None:
    """`size` pushes sharing batches under a quota of 5 batches in flight."""
    name = "quota"
    per_group = group_requests(size)
    # One open group: at most ceil(requests / N) + 5 batches.
    with chaos.scenario(name, size, settings(per_group, WINDOW_S, shards=1)) as run:
        chaos.stack.sim.set_quotas(gemini_batches_in_flight=IN_FLIGHT, gemini_batch_retry_delay_s=1)
        pushes = run.load.new_pushes(size, "quota")
        run.expect(pushes, expected_text(size))
        done = threading.Event()
        sender = threading.Thread(target=lambda: _send(run, pushes, done), daemon=True)
        sender.start()
        completed = _complete_group_batches(chaos, run, pushes, done)
        sender.join()
        chaos.say(name, f"{completed} group batches completed")
        _check(chaos, run, pushes, per_group)


def _send(run: Run, pushes: list[Push], done: threading.Event) -> None:
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(run.load.send, pushes))
    finally:
        done.set()


def _complete_group_batches(
    chaos: Chaos, run: Run, pushes: list[Push], sent: threading.Event, deadline_s: float = 300.0
) -> int:
    """Hold every group batch until the quota refused a create (or every push joined a
    group and a window and more went by), so the quota binds; then complete each `HOLD_S`
    after it appears, until every push's operation is settled (or the deadline: the
    verdict then says what is left)."""
    seen: dict[str, float] = {}
    completed: set[str] = set()
    holding = True
    joined_at: float | None = None
    give_up = time.monotonic() + deadline_s
    while time.monotonic() < give_up:
        try:
            batches = chaos.stack.sim.batches()
            refused = _refused(chaos)
        except requests.RequestException:
            time.sleep(0.3)
            continue
        now = time.monotonic()
        if holding and joined_at is None and sent.is_set() and _joined(chaos) >= len(pushes):
            joined_at = now
        if holding:
            holding = not refused and (joined_at is None or now - joined_at < WINDOW_S + 5)
        for batch in batches:
            batch_name = str(batch["name"])
            if not str(batch.get("display_name")).startswith(GROUP_TAG_PREFIX):
                continue
            first = seen.setdefault(batch_name, now)
            if holding or batch_name in completed or now - first < HOLD_S:
                continue
            with contextlib.suppress(requests.RequestException):
                chaos.stack.sim.complete(batch_name, "succeeded", "send")
                completed.add(batch_name)
        if sent.is_set() and _all_settled(chaos, pushes):
            break
        time.sleep(0.3)
    return len(completed)


def _joined(chaos: Chaos) -> int:
    """Items in every group so far."""
    return len(read_groups(chaos.client).items)


def _refused(chaos: Chaos) -> int:
    """Creates the simulator refused for the batches in flight."""
    quotas: dict[str, Any] = chaos.stack.sim.quotas()
    return int((quotas.get("refused") or {}).get("gemini_batches_in_flight", 0))


def _all_settled(chaos: Chaos, pushes: list[Push]) -> bool:
    for push in pushes:
        op = chaos.ledger.queries.find_operation("context.sha", push.sha)
        if op is None or op.pending:
            return False
    return True


def _check(chaos: Chaos, run: Run, pushes: list[Push], per_group: int) -> None:
    """The batch count, and the quota refused a create (the invariants check the rest)."""
    batches = [
        b
        for b in chaos.stack.sim.batches()
        if str(b.get("display_name")).startswith(GROUP_TAG_PREFIX)
    ]
    limit = math.ceil(2 * len(pushes) / per_group) + IN_FLIGHT
    if len(batches) > limit:
        run.fail(f"{len(batches)} batches created, at most {limit} allowed")
    refused = _refused(chaos)
    if refused == 0 and len(batches) > IN_FLIGHT:
        run.fail(f"{len(batches)} batches and the quota of {IN_FLIGHT} never refused one")
    run.note(
        f"up to {per_group} requests a group, at most {limit} batches allowed, "
        f"{refused} creates refused by the quota of {IN_FLIGHT}"
    )
