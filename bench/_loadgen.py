"""A closed-loop load generator: N client threads, each with its own connection.

    gen = LoadGenerator(callers)          # one `Caller` per client thread
    gen.run(count, time_limit_s)          -> Phase (latencies in ms, errors, wall time)
    merge(phases)                         -> Phase (rounds of one scenario pooled)
    http_caller(host, port, make_request) -> Caller over one keep-alive http.client connection
    summary(phase)                        -> {"p50_ms", "p99_ms", "throughput_rps", ...}

Each phase starts its threads together (a barrier) and stops after `count` calls in all
or `time_limit_s`, whichever comes first. Callers outlive phases, so a warm-up phase
leaves the measured phase with open connections.
"""

from __future__ import annotations

import http.client
import itertools
import math
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# A caller does one request numbered `seq`; it raises `CallFailed` on a wrong answer.
Caller = Callable[[int], None]


class CallFailed(RuntimeError):
    """One call got an unexpected answer; the message says which."""


@dataclass
class Phase:
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    first_errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    timed_out: bool = False


class LoadGenerator:
    def __init__(self, callers: Sequence[Caller]) -> None:
        if not callers:
            raise ValueError("LoadGenerator needs at least one caller")
        self._callers = list(callers)
        self._seq = itertools.count()

    def run(self, count: int, time_limit_s: float) -> Phase:
        """`count` calls spread over every caller (closed loop), bounded by `time_limit_s`."""
        phase = Phase()
        lock = threading.Lock()
        issued = itertools.count()
        start = threading.Barrier(len(self._callers) + 1)
        deadline_box: list[float] = []

        def client(call: Caller) -> None:
            start.wait()
            deadline = deadline_box[0]
            mine: list[float] = []
            while next(issued) < count:
                if time.perf_counter() > deadline:
                    phase.timed_out = True
                    break
                seq = next(self._seq)
                began = time.perf_counter()
                try:
                    call(seq)
                except Exception as exc:  # counted and reported, never hidden
                    with lock:
                        phase.errors += 1
                        if len(phase.first_errors) < 5:
                            phase.first_errors.append(f"call {seq}: {type(exc).__name__}: {exc}")
                    continue
                mine.append((time.perf_counter() - began) * 1000)
            with lock:
                phase.latencies_ms.extend(mine)

        threads = [
            threading.Thread(target=client, args=(call,), name=f"load-{i}", daemon=True)
            for i, call in enumerate(self._callers)
        ]
        for thread in threads:
            thread.start()
        began = time.perf_counter()
        deadline_box.append(began + time_limit_s)
        start.wait()
        for thread in threads:
            thread.join(time_limit_s + 30)
        phase.wall_s = time.perf_counter() - began
        return phase


def merge(phases: Sequence[Phase]) -> Phase:
    """One phase holding every call of `phases` (wall times add up: they ran one after another)."""
    merged = Phase()
    for phase in phases:
        merged.latencies_ms.extend(phase.latencies_ms)
        merged.errors += phase.errors
        merged.first_errors.extend(phase.first_errors[: 5 - len(merged.first_errors)])
        merged.wall_s += phase.wall_s
        merged.timed_out = merged.timed_out or phase.timed_out
    return merged


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (q in 0..100) of `values`; nan when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def summary(phase: Phase) -> dict[str, Any]:
    done = len(phase.latencies_ms)
    return {
        "requests": done,
        "errors": phase.errors,
        "first_errors": phase.first_errors,
        "timed_out": phase.timed_out,
        "p50_ms": round(percentile(phase.latencies_ms, 50), 3),
        "p99_ms": round(percentile(phase.latencies_ms, 99), 3),
        "max_ms": round(max(phase.latencies_ms, default=math.nan), 3),
        "throughput_rps": round(done / phase.wall_s, 1) if phase.wall_s else 0.0,
        "wall_s": round(phase.wall_s, 3),
    }


def stop_on_sigterm() -> None:
    """SIGTERM raises SystemExit in the main thread, so a bench's `finally` stops its children."""

    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


# (method, path, headers, body) for request number `seq`
RequestMaker = Callable[[int], tuple[str, str, dict[str, str], bytes]]


def http_caller(
    host: str,
    port: int,
    make_request: RequestMaker,
    expect: int,
    *,
    timeout_s: float = 10.0,
    on_response: Callable[[http.client.HTTPResponse], None] | None = None,
) -> Caller:
    """A caller over one keep-alive connection; reconnects once if the server closed it."""
    box: list[http.client.HTTPConnection] = []

    def connection() -> http.client.HTTPConnection:
        if not box:
            box.append(http.client.HTTPConnection(host, port, timeout=timeout_s))
        return box[0]

    def drop() -> None:
        if box:
            box.pop().close()

    def call(seq: int) -> None:
        method, path, headers, body = make_request(seq)
        for attempt in (1, 2):
            conn = connection()
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                payload = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                drop()  # an idle keep-alive connection the server closed: retry once
                if attempt == 2:
                    raise
                continue
            if response.will_close:
                drop()
            if on_response is not None:
                on_response(response)
            if response.status != expect:
                raise CallFailed(
                    f"{method} {path} answered {response.status}, expected {expect}: "
                    f"{payload[:200]!r}"
                )
            return

    return call
