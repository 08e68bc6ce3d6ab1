"""A test app for tests/integration/test_testing_kit.py: a second app on GitHub `milestone`
beside tests/integration/kit_outbox_app.py, so each app gets its own record of a delivery
(`deliveries/{source}:{id}#{app}`). It only says it saw the event. Loaded by the
functions' processes through HOOKLEDGER_APPS.
"""

from __future__ import annotations

from shared import api

app = api.App("kit_second")


@app.handler("github", "milestone")
def seen(event: api.Event, ctx: api.Context) -> api.Outcome:
    return api.Done("seen")
