"""Shared batches in the chaos suite: the settings every scenario runs with, the groups read
back from Firestore, and the driver that completes their batches at the simulator.

Every scenario shares batches, as deployed (docs/architecture.md, "Shared batches"): a
push's two requests join the open group of its shard, and a group is sealed when full or
`WINDOW_S` after it opened. `for_size` picks the group size so that a scenario makes about
`GROUPS_A_SCENARIO` groups at either size, each of at least two pushes; a scenario may pick its own.

A group's items are documents of their own (`group_members`: its `tag`, `operation`). A
group's batch at Gemini is named `hookledger:group:{gid}` (the whole group) or
`hookledger:group:{gid}~{lo}-{hi}` (a part, once a 400 naming no request split it). A
push is `settled_by_gemini` once nothing it waits on is left at Gemini: the batch its part
registered has ended or is gone (deleted), before registration any batch with its part's
tag has ended, or its request was refused, or its part failed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import requests
from google.api_core.exceptions import GoogleAPIError
from google.cloud import firestore

from local.chaos.load import Push
from local.simulator.client import SimulatorClient
from shared.ledger.groups import GROUPS as GROUPS_COLLECTION
from shared.ledger.groups import MEMBERS, OPEN, Group, group_from, group_tag

# A few seconds beside pushes that arrive tens a second: most groups close full.
WINDOW_S = 3.0
# Two open groups at once: the heads' sharding is exercised, and a group may close part-full.
SHARDS = 2
GROUPS_A_SCENARIO = 5
GROUP_TAG_PREFIX = group_tag("")
# A batch the simulator has not finished yet.
UNFINISHED = frozenset({"BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"})


def settings(max_requests: int, window_s: float = WINDOW_S, shards: int = SHARDS) -> dict[str, str]:
    """The worker's `REVIEW_GROUP_*` settings: requests a group, its window, its shards."""
    return {
        "REVIEW_GROUP_REQUESTS": str(max_requests),
        "REVIEW_GROUP_WINDOW_S": f"{window_s:g}",
        "REVIEW_GROUP_SHARDS": str(shards),
    }


def for_size(size: int) -> dict[str, str]:
    """About `GROUPS_A_SCENARIO` groups for `size` pushes of two files, at least two pushes
    a group."""
    return settings(2 * max(2, math.ceil(size / GROUPS_A_SCENARIO)))


@dataclass(frozen=True)
class Item:
    """One item of a group as its own document holds it (`group_members`)."""

    gid: str
    index: int
    tag: str  # the push's submission
    operation: str  # `groups/{gid}.{index}`


@dataclass(frozen=True)
class Stored:
    """Every group and every item, as Firestore holds them."""

    groups: dict[str, Group]
    items: list[Item]

    def tags(self, gid: str) -> dict[int, str]:
        """The push of each item of group `gid`, by index."""
        return {item.index: item.tag for item in self.items if item.gid == gid}


def read_groups(client: firestore.Client) -> Stored:
    """Every group and every item."""
    groups = client.collection(GROUPS_COLLECTION).stream(timeout=10)
    items = []
    for snapshot in client.collection(MEMBERS).stream(timeout=10):
        doc = snapshot.to_dict() or {}
        operation = str(doc.get("operation"))
        index = operation.rpartition(".")[2]  # `groups/{gid}.{index}`
        number = int(index) if index.isdigit() else -1
        items.append(Item(str(doc.get("group")), number, str(doc.get("tag")), operation))
    return Stored({snapshot.id: group_from(snapshot) for snapshot in groups}, items)


def batch_name(name: str) -> str:
    """A batch's name as the ledger spells it (`batches/abc`)."""
    return name if name.startswith("batches/") else f"batches/{name}"


def part_of_tag(display_name: str) -> tuple[str, tuple[int, int] | None] | None:
    """(group id, (lo, hi) of a part or None for the whole group) a group batch's display
    name names; None for any other batch."""
    if not display_name.startswith(GROUP_TAG_PREFIX):
        return None
    gid, split, span = display_name.removeprefix(GROUP_TAG_PREFIX).partition("~")
    if not split:
        return gid, None
    lo, _, hi = span.partition("-")
    return (gid, (int(lo), int(hi))) if lo.isdigit() and hi.isdigit() else None


def settled_by_gemini(stored: Stored, batches: Iterable[Mapping[str, Any]]) -> set[str]:
    """The tags of the pushes that wait on no batch at Gemini (the module docstring)."""
    running: set[str] = set()
    ended: set[str] = set()
    by_tag: dict[str, set[str]] = {}
    for batch in batches:
        name = batch_name(str(batch["name"]))
        by_tag.setdefault(str(batch.get("display_name")), set()).add(name)
        (running if batch.get("state") in UNFINISHED else ended).add(name)
    done: set[str] = set()
    for group in stored.groups.values():
        if group.status == OPEN:
            continue
        tags = stored.tags(group.gid)
        for part in group.parts:
            if part.failed is not None:
                made = True
            elif part.operation is not None:  # ended, or gone: nothing left to complete
                made = batch_name(part.operation) not in running
            else:
                made = bool(by_tag.get(group.part_tag(part), set()) & ended)
            for index in group.items_of(part):  # lanes leave gaps between indices
                if (made or index in group.refused) and index in tags:
                    done.add(tags[index])
    return done


@dataclass(frozen=True)
class Made:
    """A group batch the completer is about to complete: its `name`, `display_name`, and
    `number`, its place in completion order (0 first)."""

    name: str
    display_name: str
    number: int


class Completer:
    """Completes every group batch at the simulator once it exists (Gemini finishing it)."""

    def __init__(self, sim: SimulatorClient, client: firestore.Client) -> None:
        self.sim = sim
        self.client = client
        self.completed: list[Made] = []
        self._ended: set[str] = set()  # batches that ended before the completer got to them

    def complete_all(
        self,
        pushes: Iterable[Push],
        webhook_for: Callable[[Made], str] = lambda made: "send",
        deadline_s: float = 120.0,
        on_progress: Callable[[int], None] | None = None,
        state: str = "succeeded",
    ) -> list[Push]:
        """Complete each group batch (as `state`, its webhook `webhook_for(made)`: send,
        duplicate or drop) until every push in `pushes` waits on no batch; the pushes still
        waiting when `deadline_s` passes. `on_progress(n)`: n pushes wait on none now."""
        waiting = {push.tag: push for push in pushes}
        done: set[str] = set()
        give_up = time.monotonic() + deadline_s
        while True:
            try:
                batches = self.sim.batches()
                stored = read_groups(self.client)
            except (requests.RequestException, GoogleAPIError):
                batches = None  # a frozen or restarting child: asked again
            if batches is not None:
                self._complete(batches, webhook_for, state)
                now_done = settled_by_gemini(stored, batches) & set(waiting)
                if on_progress is not None and len(now_done) > len(done):
                    on_progress(len(now_done))
                done = now_done
                if len(done) == len(waiting):
                    return []
            if time.monotonic() >= give_up:
                return [push for tag, push in waiting.items() if tag not in done]
            time.sleep(0.3)

    def _complete(
        self, batches: list[dict[str, Any]], webhook_for: Callable[[Made], str], state: str
    ) -> None:
        completed = {made.name for made in self.completed} | self._ended
        for batch in batches:
            name = batch_name(str(batch["name"]))
            display_name = str(batch.get("display_name"))
            if part_of_tag(display_name) is None or batch.get("state") not in UNFINISHED:
                continue
            if name in completed:
                continue  # the simulator may list it unfinished a moment longer
            made = Made(name, display_name, len(self.completed))
            try:
                self.sim.complete(name, state, webhook_for(made))
            except requests.HTTPError:
                self._ended.add(name)  # ended otherwise (a superseded batch cancelled)
                continue
            except requests.RequestException:
                continue  # tried again on the next round
            self.completed.append(made)
            completed.add(name)
