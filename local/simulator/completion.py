"""Batches that succeed on their own: the simulator's completion loop.

A batch succeeds `run_time_s()` after it started running (processing.py: after its
creation when processing has no slots), in the order batches started, so a queue run by
priority also ends by priority. The run time is the processing model's `run_s`, else the
simulator's `--auto-complete-s`; with neither, only a control call ends a batch. The loop
runs on a thread started the first time a run time is known; `step` is one pass of it,
which a test drives itself on a fake clock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from local.simulator.errors import SimError
from local.simulator.state import World
from shared.logs import event, get_logger

logger = get_logger("simulator.completion")


class Completion:
    """`complete(batch_id)` for each batch due, by `world.batches_due`, until `stop` is set."""

    def __init__(
        self,
        world: World,
        complete: Callable[[str], str],
        auto_complete_s: float | None,
        stop: threading.Event,
    ) -> None:
        self._world = world
        self._complete = complete  # succeeds the batch, sends its webhook, returns its name
        self._auto_complete_s = auto_complete_s
        self._stop = stop
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run_time_s(self) -> float | None:
        """How long a batch runs before it succeeds on its own (None: never)."""
        run_s = self._world.processing.run_s
        return run_s if run_s is not None else self._auto_complete_s

    def start(self) -> None:
        """Start the loop, once, if a batch can succeed on its own now."""
        if self.run_time_s() is None:
            return
        with self._lock:  # two control calls at once start one loop
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="auto-complete", daemon=True)
                self._thread.start()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            delay = self.run_time_s()
            tick = 0.2 if delay is None else min(0.2, max(0.02, delay / 4))
            if self._stop.wait(tick):
                return
            self.step()

    def step(self) -> list[str]:
        """Succeed each batch that has run its time, in the order they started; the names
        of those it completed."""
        delay = self.run_time_s()
        if delay is None:
            return []
        done: list[str] = []
        for batch_id in self._world.batches_due(delay):
            # A batch deleted or cancelled meanwhile is skipped, with a note saying so.
            try:
                done.append(self._complete(batch_id))
            except SimError as exc:
                event(
                    logger,
                    logging.INFO,
                    "auto-complete skipped a batch",
                    operation=f"batches/{batch_id}",
                    reason=exc.message,
                )
        return done
