"""The kit's reset between tests (hookledger/testing/stack.py `reset`): a request a test
left running never writes into the next test, and a fan-out's later check is not "pending".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hookledger.testing import Stack, assert_nothing_pending, github_example
from hookledger.testing.waiting import wait_for
from local.inflight import INFLIGHT_VARIABLE, busy

PROBE = "tests.integration.kit_probe_app"
MARKS = "kit_probe_marks"

pytestmark = pytest.mark.slow


def started(stack: Stack, release: Path) -> None:
    sent = stack.send_github("issues", {"action": "opened", "release": str(release)})
    assert sent.status == 202, sent.answer
    wait_for(
        lambda: True if stack.documents(MARKS) else None,
        timeout_s=60,
        what="the probe's handler to start",
    )


@pytest.mark.hookledger_apps(PROBE)
def test_reset_waits_for_a_request_still_running_before_it_empties(
    hookledger: Stack, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    started(hookledger, release)
    release.touch()  # the handler goes on, and writes once more, after this

    hookledger.reset()  # what the next test's fixture does first
    wait_for(  # the leftover request has ended, whether or not reset waited for it
        lambda: True if not busy(Path(hookledger.env[INFLIGHT_VARIABLE])) else None,
        timeout_s=60,
        what="the probe's request to end",
    )

    assert hookledger.documents(MARKS) == {}
    assert hookledger.documents("deliveries") == {}


@pytest.mark.hookledger_apps(PROBE)
def test_reset_starts_the_functions_again_when_a_request_never_ends(
    hookledger: Stack, tmp_path: Path
) -> None:
    started(hookledger, tmp_path / "never")
    before = hookledger.sim.url, hookledger.ingress_url
    hookledger.quiet_s = 1.0

    hookledger.reset()

    assert (hookledger.sim.url, hookledger.ingress_url) != before  # started again
    assert hookledger.documents(MARKS) == {}
    release = tmp_path / "release"
    release.touch()
    sent = hookledger.send_github("issues", {"action": "opened", "release": str(release)})
    assert hookledger.wait_handled(sent) == {"kit_probe": "done"}


@pytest.mark.hookledger_apps("apps.articles", "tests.integration.send_probe_app")
def test_nothing_is_pending_once_every_app_of_a_fanned_out_event_is_done(
    hookledger: Stack,
) -> None:
    sent = hookledger.send_github("push", github_example("push"))  # a deleted tag

    assert hookledger.wait_handled(sent) == {"articles": "ignored", "send_probe": "done"}
    # The push's own task leaves once Cloud Tasks has the worker's answer; the fan-out's
    # check, 60 s ahead, stays.
    left = wait_for(
        lambda: (
            tasks
            if (tasks := hookledger.queued_tasks()) and all("_deferred_" in task for task in tasks)
            else None
        ),
        timeout_s=30,
        what=lambda: f"only the fan-out's check in the queue: {hookledger.queued_tasks()}",
    )
    assert len(left) == 1
    assert_nothing_pending(hookledger)
