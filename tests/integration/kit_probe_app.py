"""A test app for tests/integration/test_testing_kit_reset.py: a handler still running when
the kit empties the stack.

On a GitHub `issues` event it marks `started`, waits (up to 120 s) for the file the
payload's `release` names, then marks `finished`; both in `kit_probe_marks`, one document
per delivery. Loaded by the functions' processes through HOOKLEDGER_APPS.
"""

from __future__ import annotations

import time
from pathlib import Path

from shared import api

app = api.App("kit_probe", collections=["kit_probe_marks"])
WAIT_S = 120.0


@app.handler("github", "issues")
def hold_until_released(event: api.Event, ctx: api.Context) -> api.Outcome:
    release = Path(event.json()["release"])
    mark = api.doc_id(event.delivery_id)
    ctx.results.update("kit_probe_marks", mark, lambda _: {"state": "started"})
    deadline = time.monotonic() + WAIT_S
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # a write well after the release: the next test must never see it
    ctx.results.update("kit_probe_marks", mark, lambda _: {"state": "finished"})
    return api.Done("released")
