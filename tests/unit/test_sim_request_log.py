"""The simulator's request log keeps the newest entries only, oldest first."""

from __future__ import annotations

from local.simulator.traffic import RequestLog


def test_the_log_keeps_the_last_entries_in_order() -> None:
    log = RequestLog(limit=3)
    for number in range(5):
        log.record("GET", f"/repos/o/r/contents/{number}.md", "ref=s")

    assert [entry["path"] for entry in log.entries()] == [
        "/repos/o/r/contents/2.md",
        "/repos/o/r/contents/3.md",
        "/repos/o/r/contents/4.md",
    ]
    log.reset()
    assert log.entries() == []
