"""How the simulated Gemini runs batches: a few at a time, by `batch.priority`, then age.

Gemini's REST reference of `models.batchGenerateContent` documents `batch.priority`
(int64, optional, default 0): "Batches with a higher priority value will be processed
before batches with a lower priority value. Negative values are allowed." It publishes no
processing capacity, so the model here is the simulator's own, set through
`/_sim/gemini/processing` (control.py) and off by default:

- `slots` (null = off, the default; else 1..100000): at most this many batches RUNNING at
  once, the others PENDING in a queue. A slot freed (a batch ended, cancelled or deleted)
  goes to the queued batch of the highest priority, then the oldest (creation order).
  Off: every batch runs at once, RUNNING `running_after_s` after its creation, as before.
- `run_s` (null = off, the default; else 0..86400): a running batch succeeds on its own
  this long after it started (with slots off: after its creation), its webhook sent as
  the `send` mode sends it. Off: the simulator's `--auto-complete-s`, if it was started
  with one, else a batch ends only by a control call.
- `honour_priority` (default true): false queues by creation order alone, as Gemini would
  for batches that all name the default priority (a benchmark's unprioritised run).

The state is one immutable `ProcessingSettings`, replaced whole by `merged` (validated
first: a bad body changes nothing); `World` (state.py) applies it under its lock.

`priority_of` reads a create's `batch.priority` as Google's front end reads an int64 in
JSON: a whole number, or a string of one, within int64; anything else is its 400
"Invalid value at 'batch.priority' (TYPE_INT64), …".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from local.simulator.errors import BadRequest

SLOTS = "slots"
RUN_S = "run_s"
HONOUR_PRIORITY = "honour_priority"
KEYS = (SLOTS, RUN_S, HONOUR_PRIORITY)
MAX_SLOTS = 100_000
MAX_RUN_S = 86_400.0
# `batch.priority` is an int64 (the REST reference).
PRIORITY_MIN, PRIORITY_MAX = -(2**63), 2**63 - 1
_INT64_TEXT = re.compile(r"-?[0-9]+")


@dataclass(frozen=True)
class ProcessingSettings:
    slots: int | None = None
    run_s: float | None = None
    honour_priority: bool = True

    def report(self) -> dict[str, Any]:
        return {SLOTS: self.slots, RUN_S: self.run_s, HONOUR_PRIORITY: self.honour_priority}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def merged(settings: ProcessingSettings, body: dict[str, Any]) -> ProcessingSettings:
    """`settings` with the keys of `body` applied, or `BadRequest` naming the bad key."""
    unknown = sorted(set(body) - set(KEYS))
    if unknown:
        raise BadRequest(f"Unknown processing keys {unknown}; known keys: {list(KEYS)}.")
    changes: dict[str, Any] = {}
    if SLOTS in body:
        slots = body[SLOTS]
        if slots is not None and (not _is_int(slots) or not 1 <= slots <= MAX_SLOTS):
            raise BadRequest(
                f"{SLOTS} must be null (off) or a whole number 1..{MAX_SLOTS}, got {slots!r}."
            )
        changes["slots"] = slots
    if RUN_S in body:
        run_s = body[RUN_S]
        if run_s is not None and (
            not isinstance(run_s, int | float)
            or isinstance(run_s, bool)
            or not 0 <= run_s <= MAX_RUN_S
        ):
            raise BadRequest(
                f"{RUN_S} must be null (off) or seconds 0..{MAX_RUN_S:g}, got {run_s!r}."
            )
        changes["run_s"] = None if run_s is None else float(run_s)
    if HONOUR_PRIORITY in body:
        honour = body[HONOUR_PRIORITY]
        if not isinstance(honour, bool):
            raise BadRequest(f"{HONOUR_PRIORITY} must be true or false, got {honour!r}.")
        changes["honour_priority"] = honour
    return replace(settings, **changes)


def priority_of(batch: dict[str, Any]) -> int:
    """A create body's `batch.priority` (0 when absent), or Gemini's 400 naming it."""
    value = batch.get("priority", 0)
    if _is_int(value) and PRIORITY_MIN <= value <= PRIORITY_MAX:
        return int(value)
    if isinstance(value, str) and _INT64_TEXT.fullmatch(value):
        number = int(value)
        if PRIORITY_MIN <= number <= PRIORITY_MAX:
            return number
    raise BadRequest(f"Invalid value at 'batch.priority' (TYPE_INT64), {json.dumps(value)}")


def queue_order(priority: int, seq: int, honour_priority: bool) -> tuple[int, int]:
    """The sort key of a queued batch: higher priority first (when honoured), then older."""
    return (-priority if honour_priority else 0, seq)
