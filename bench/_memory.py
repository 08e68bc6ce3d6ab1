"""Peak memory of a server process group while many clients send large bodies at once.

    burst = rss_under_burst(pgid, port, clients=32, body_bytes=1 << 20, per_client=4, ...)

Resident set size is read from /proc (VmRSS summed over the group's live processes),
sampled every 10 ms from just before the burst to its end; `idle_mib` is the sum just
before (after a warm-up the caller did). The kernel's own high-water mark (VmHWM, per
process, since it started) is reported too, so a peak between two samples is not missed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._loadgen import LoadGenerator, RequestMaker, http_caller, summary

MIB = 1024 * 1024


def group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            pids.append(int(entry.name))
    return pids


def _status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass  # the process ended while we looked
    return 0


def group_rss_mib(pgid: int, key: str = "VmRSS") -> float:
    return sum(_status_kib(pid, key) for pid in group_pids(pgid)) / 1024


SEQ_MARK = b"@@@@@@@@@@@@"  # replaced by the request's number, same width


def push_template(fixture: bytes, body_bytes: int = 0) -> bytes:
    """The push fixture with a `SEQ_MARK` field and padding up to `body_bytes` (a valid push).

    The ingress dedupes GitHub deliveries on the body too, so every request must differ.
    """
    doc = json.loads(fixture)
    doc["hookledger_bench_seq"] = SEQ_MARK.decode()
    doc["hookledger_bench_padding"] = ""
    base = len(json.dumps(doc).encode())
    doc["hookledger_bench_padding"] = "x" * max(0, body_bytes - base)
    return json.dumps(doc).encode()


def numbered(template: bytes, tag: str, seq: int) -> bytes:
    """`template` with its mark replaced by `tag` and `seq` (unique per run and request)."""
    return template.replace(SEQ_MARK, f"{tag}{seq:0{len(SEQ_MARK) - len(tag)}d}".encode(), 1)


def rss_under_burst(
    pgid: int,
    port: int,
    make_request: RequestMaker,
    expect: int,
    clients: int,
    per_client: int,
    on_response: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Send `clients * per_client` requests from `clients` threads at once; RSS figures."""
    idle = group_rss_mib(pgid)
    peak = [idle]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.01):
            peak[0] = max(peak[0], group_rss_mib(pgid))

    sampler = threading.Thread(target=sample, name="rss-sampler", daemon=True)
    callers = [
        http_caller(
            "127.0.0.1", port, make_request, expect, timeout_s=60.0, on_response=on_response
        )
        for _ in range(clients)
    ]
    sampler.start()
    began = time.perf_counter()
    phase = LoadGenerator(callers).run(clients * per_client, 300.0)
    stop.set()
    sampler.join(5)
    hwm = group_rss_mib(pgid, "VmHWM")
    result = summary(phase)
    return {
        "clients": clients,
        "requests": result["requests"],
        "errors": result["errors"],
        "first_errors": result["first_errors"],
        "wall_s": round(time.perf_counter() - began, 2),
        "idle_rss_mib": round(idle, 1),
        "peak_rss_mib": round(peak[0], 1),
        "peak_over_idle_mib": round(peak[0] - idle, 1),
        "vmhwm_sum_mib": round(hwm, 1),
    }
