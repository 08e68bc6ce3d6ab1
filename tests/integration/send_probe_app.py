"""A test app for tests/integration/test_cli_send.py: records each push its handler got.

One `sent_pushes` document per delivery: the SHA-256 of the bytes the handler was given,
and the push's ref and `deleted` as it read them, so a test proves the handler ran on
exactly the bytes sent. Loaded by the functions' processes through HOOKLEDGER_APPS.
"""

from __future__ import annotations

import hashlib

from shared import api

app = api.App("send_probe", collections=["sent_pushes"])


@app.handler("github", "push")
def record_push(event: api.Event, ctx: api.Context) -> api.Outcome:
    payload = event.json()
    seen = {
        "sha256": hashlib.sha256(event.body).hexdigest(),
        "ref": payload.get("ref"),
        "deleted": payload.get("deleted"),
    }
    ctx.results.update("sent_pushes", api.doc_id(event.delivery_id), lambda _: seen)
    return api.Done(f"recorded {payload.get('ref')}")
