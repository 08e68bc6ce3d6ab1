"""Wires the store, the dispatcher, the gRPC server and the key server into one object."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

from local.cloudtasks_emulator.clock import ManualClock
from local.cloudtasks_emulator.dispatcher import Dispatcher
from local.cloudtasks_emulator.model import DEFAULT_RATE, DEFAULT_RETRY, QueueRecord, parse_queue
from local.cloudtasks_emulator.oidc import KeyServer, TokenMinter
from local.cloudtasks_emulator.server import CloudTasksService, build_server
from local.cloudtasks_emulator.store import RUNNING, Store


def _print(line: str) -> None:
    print(line, flush=True)
    sys.stdout.flush()


class Emulator:
    """Start with `start()`, stop with `stop()`; `grpc_port`/`jwks_url` say where it listens."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 8123,
        http_port: int = 8124,
        *,
        tombstone_s: float = 3600.0,
        time_scale: float = 1.0,
        queues: Sequence[str] = (),
        log: Callable[[str], None] = _print,
        clock: ManualClock | None = None,
    ) -> None:
        """`clock`: a manual clock for the store (tests); None reads the wall clock."""
        self.log = log
        self.store = Store(tombstone_s=tombstone_s, time_scale=time_scale, now=clock or time.time)
        if clock is not None:
            clock.on_advance(self._wake_dispatcher)
        self.minter = TokenMinter()
        self.keys = KeyServer(self.minter, host, http_port, clock)
        self.dispatcher = Dispatcher(self.store, self.minter, log)
        self.grpc = build_server(
            CloudTasksService(self.store, self.dispatcher), f"{host}:{port}", log
        )
        self.host, self.grpc_port = host, port
        for name in queues:
            location, _ = parse_queue(name)
            record = QueueRecord(name=name, state=RUNNING, retry=DEFAULT_RETRY, rate=DEFAULT_RATE)
            self.store.create_queue(location, record)

    def _wake_dispatcher(self) -> None:
        # The dispatcher sleeps until the next due time as it saw it; a jump makes tasks due now.
        with self.store.cond:
            self.store.cond.notify_all()

    @property
    def jwks_url(self) -> str:
        return self.keys.jwks_url

    def start(self) -> None:
        self.keys.start()
        self.dispatcher.start()
        self.grpc.start()

    def stop(self) -> None:
        self.grpc.stop(grace=1).wait(2)
        self.dispatcher.stop()
        self.keys.stop()
