"""Named crash points: where a test may make the process "die" between two steps.

Every commit and every external call on the push, settlement and outbox paths calls
`crash_point(NAME)` just before it runs. In production no hook is installed and the call
is one global read. A test installs a hook with `crashing_at(NAME)`; the hook raises
`Crashed`, a `BaseException`, so no `except Exception` on the way up can swallow it: the
attempt ends exactly as if the process had been killed at that line, leaving whatever it
had committed so far (docs/architecture.md, "Crash points").

`POINTS` lists every name, so the crash-point sweep (tests/integration/test_crash_points.py)
can crash at each in turn and fail when a name is added without being swept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

# name -> what has happened when the process dies there.
POINTS: dict[str, str] = {
    # push path (the worker running an app's exactly-once submission)
    "push.delivery.recorded": "the delivery and its lease are committed; nothing else",
    "push.submission.claimed": "the submission claim is committed; no batch yet",
    "push.before_create": "this attempt holds the claim; the batch create was never sent",
    "push.after_create": "Gemini created the batch; the ledger does not know it",
    "push.registered": "the operation and the push's winner are committed",
    "push.superseded": "a losing batch is recorded superseded, not yet cancelled",
    "push.before_done": "the handler finished; the delivery is not marked done",
    # several apps on one event (the worker's fan-out)
    "apps.fanned_out": "one task per app is created; the delivery is not marked done",
    "apps.app_done": "one app's record is finished; the delivery is not marked done",
    # re-run path (the worker running a "Re-run" press)
    "rerun.claimed": "the re-run's submission claim is committed; no batch yet",
    "rerun.created": "Gemini created the re-run's batch; the ledger does not know it",
    "rerun.registered": "the re-run's batch is current; the previous one superseded, not cancelled",
    "rerun.superseded": "an older press's batch is recorded superseded, not yet cancelled",
    # shared batches (an item joining a group; the group's one sealer)
    "group.item_joined": "the item's operation, its submission and the group are committed",
    "group.sealed": "the group takes no more items; no batch yet",
    "group.before_create": "the sealer holds the group's claim; the create was never sent",
    "group.batch_created": "Gemini created the group's batch; the ledger does not know it",
    "group.item_failed": "one failed item of a group settled; the group's cursor not moved",
    "group.rows_kept": "a group batch's rows stored per item; the batch not settled yet",
    # settlement path (webhook or reconcile)
    "settle.before_fetch": "the settler is about to read the batch from Gemini",
    "settle.before_commit": "the batch was read; the settling commit was never sent",
    "settle.committed": "settlement, write-back and outbox items are committed",
    # outbox path (the deliverer and the sweep)
    "outbox.leased": "the item's lease is committed; nothing was sent",
    # any app's deliverer (outbox.py): before it is called, and once it has returned
    "outbox.before_deliver": "the deliverer is about to be called; nothing was sent",
    "outbox.delivered": "the deliverer returned; the item is not marked delivered",
    "outbox.before_post": "ownership re-checked; the comment was never posted",
    "outbox.posted": "GitHub has the comment; the item is not marked delivered",
    "outbox.marked": "the item is marked delivered",
    "cancel.before_call": "a superseded batch's cancel was never sent",
    "cancel.called": "Gemini cancelled the batch; the item is not marked delivered",
}

# Former names -> current ones, so a test crashing at an old name is told the new one.
RENAMED: dict[str, str] = {"outbox.claimed": "outbox.leased"}


class Crashed(BaseException):  # an event, not an error to handle: no `except Exception` sees it
    """Raised by an installed hook: the process 'died' at a crash point (tests only)."""


_hook: Callable[[str], None] | None = None


def crash_point(name: str) -> None:
    """Call the installed hook with `name`; nothing at all when none is installed."""
    if _hook is not None:
        _hook(name)


def install(hook: Callable[[str], None] | None) -> None:
    """Install (or, with None, remove) the process-wide hook. Tests only."""
    global _hook
    _hook = hook


@contextmanager
def crashing_at(name: str, times: int = 1) -> Iterator[list[str]]:
    """Raise `Crashed` the first `times` times `name` is reached; yields the names reached.

    An unknown name is a `KeyError` at once, so a typo cannot make a sweep pass vacuously.
    """
    if name not in POINTS:
        renamed = f" (now {RENAMED[name]!r})" if name in RENAMED else ""
        raise KeyError(f"no crash point named {name!r}{renamed}; see shared/crashpoints.py")
    reached: list[str] = []
    left = [times]

    def hook(point: str) -> None:
        if point not in POINTS:
            raise KeyError(f"crash_point({point!r}) is not listed in shared/crashpoints.py")
        reached.append(point)
        if point == name and left[0] > 0:
            left[0] -= 1
            raise Crashed(point)

    previous = _hook
    install(hook)
    try:
        yield reached
    finally:
        install(previous)
