"""Several apps on one event (docs/architecture.md, "Apps"): each app gets the delivery
once, with its own record, lease, outcome and retries; the delivery is done when every
app is. The worker runs in this process, fed by the Cloud Tasks emulator on its manual
clock (as in test_worker_deferral.py): a retry becomes due only when the test says.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from shared.errors import TransientError
from shared.handlers import Done, handler
from tests.integration.test_worker_deferral import (  # noqa: F401  fixtures
    Stack,
    queues,
    registry,
    stack,
    tasks_client,
)
from tests.plugins.cloudtasks import EmulatorHandle
from tests.waiting import wait_until


def test_a_transient_failure_in_one_app_is_retried_without_running_the_other_again(
    stack: Callable[..., Stack],  # noqa: F811  the fixture imported above
    cloudtasks_emulator_manual: EmulatorHandle,
) -> None:
    world = stack()
    runs: Counter[str] = Counter()

    @handler("github", "issues", app="alpha")
    def alpha(event, ctx):
        runs["alpha"] += 1
        assert ctx.app == "alpha"
        return Done("alpha labelled it")

    @handler("github", "issues", app="beta")
    def beta(event, ctx):
        runs["beta"] += 1
        if runs["beta"] == 1:
            raise TransientError("beta's upstream answered 503")
        return Done("beta filed it")

    world.hand_off("issues", "d-apps-1")
    world.answered(3)  # the fan-out, alpha and beta's first run, in any order
    first = sorted(c.status for c in world.served.calls[:3])
    # The fan-out put one task per app out and looks again later; beta's 503 is its own.
    assert first == ["deferred", "done", "retry"]
    assert runs == {"alpha": 1, "beta": 1}
    cloudtasks_emulator_manual.advance(5)  # past the 503's backoff: beta's task again
    world.served.wait_for(4)

    deliveries = world.ledger.deliveries
    wait_until(
        lambda: getattr(deliveries.get("github", "d-apps-1"), "status", None) == "done",
        what="the delivery done once both apps are",
    )
    assert runs == {"alpha": 1, "beta": 2}
    alpha_record = deliveries.get("github", "d-apps-1#alpha")
    beta_record = deliveries.get("github", "d-apps-1#beta")
    assert alpha_record is not None and beta_record is not None
    assert (alpha_record.status, alpha_record.attempts) == ("done", 1)
    assert beta_record.status == "done" and beta_record.attempts == 2
    statuses = sorted(c.status for c in world.served.calls)
    assert statuses == ["deferred", "done", "done", "retry"]

    # The fan-out's own look later finds it done: a duplicate, and no app runs again.
    cloudtasks_emulator_manual.advance(60 + 0.001)
    assert world.served.wait_for(5).status == "duplicate"
    assert runs == {"alpha": 1, "beta": 2}


def test_an_event_one_app_handles_keeps_the_delivery_record_and_no_fan_out(
    stack: Callable[..., Stack],  # noqa: F811  the fixture imported above
) -> None:
    world = stack()

    @handler("github", "issues", app="alpha")
    def alpha(event, ctx):
        return Done("only alpha")

    world.hand_off("issues", "d-apps-2")
    assert world.answered(1).status == "done"
    assert world.ledger.deliveries.get("github", "d-apps-2#alpha") is None
    stored = world.ledger.deliveries.get("github", "d-apps-2")
    assert stored is not None and stored.status == "done"


@pytest.mark.parametrize("app", ["alpha"])
def test_one_app_registering_a_second_handler_for_a_pair_is_refused(
    app: str,
    registry: None,  # noqa: F811  the fixture imported above
) -> None:
    handler("github", "issues", app=app)(lambda event, ctx: Done(""))
    with pytest.raises(ValueError, match="already has a handler for github/issues"):
        handler("github", "issues", app=app)(lambda event, ctx: Done("other"))


def test_a_replay_runs_each_app_again_and_one_apps_record_replays_that_app_alone(
    stack: Callable[..., Stack],  # noqa: F811  the fixture imported above
    cloudtasks_emulator_manual: EmulatorHandle,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hookledger.cli import deliveries as cli
    from shared.config import LOCAL_TASKS_SERVICE_ACCOUNT, Config
    from shared.entrypoints import runtime

    world = stack()
    runs: Counter[str] = Counter()
    for name in ("alpha", "beta"):

        def count(event, ctx, name=name):
            runs[name] += 1
            return Done(name)

        handler("github", "issues", app=name)(count)
    config = Config(worker_url=world.served.url, tasks_service_account=LOCAL_TASKS_SERVICE_ACCOUNT)
    monkeypatch.setattr(runtime, "config", lambda: config)
    monkeypatch.setattr(runtime, "ledger", lambda: world.ledger)
    monkeypatch.setattr(runtime, "task_queue", lambda: world.tasks)
    deliveries = world.ledger.deliveries

    def done(delivery_id: str) -> bool:
        return getattr(deliveries.get("github", delivery_id), "status", None) == "done"

    world.hand_off("issues", "d-replay")
    wait_until(lambda: done("d-replay"), what="both apps done")
    assert runs == {"alpha": 1, "beta": 1}

    answer = cli.replay(deliveries.get("github", "d-replay"))
    assert [a["id"] for a in answer["apps"]] == ["github:d-replay#alpha", "github:d-replay#beta"]
    wait_until(lambda: runs == {"alpha": 2, "beta": 2}, what="each app run again")
    wait_until(lambda: done("d-replay"), what="the delivery done again")

    cli.replay(deliveries.get("github", "d-replay#beta"))
    wait_until(lambda: runs["beta"] == 3, what="beta alone run again")
    wait_until(lambda: done("d-replay#beta"), what="beta's record done")
    assert runs["alpha"] == 2


def test_a_replay_reopens_every_apps_record_before_handing_any_to_the_worker(
    stack: Callable[..., Stack],  # noqa: F811  the fixture imported above
    cloudtasks_emulator_manual: EmulatorHandle,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An app finishing early must not find another app's record still done from the last
    run: that marked the delivery done while the other app's replay was still queued."""
    from hookledger.cli import deliveries as cli
    from shared.config import LOCAL_TASKS_SERVICE_ACCOUNT, Config
    from shared.entrypoints import runtime

    world = stack()
    for name in ("alpha", "beta"):
        handler("github", "issues", app=name)(lambda event, ctx, name=name: Done(name))
    config = Config(worker_url=world.served.url, tasks_service_account=LOCAL_TASKS_SERVICE_ACCOUNT)
    monkeypatch.setattr(runtime, "config", lambda: config)
    monkeypatch.setattr(runtime, "ledger", lambda: world.ledger)
    monkeypatch.setattr(runtime, "task_queue", lambda: world.tasks)
    deliveries = world.ledger.deliveries

    def status(delivery_id: str) -> str | None:
        return getattr(deliveries.get("github", delivery_id), "status", None)

    world.hand_off("issues", "d-order")
    wait_until(lambda: status("d-order") == "done", what="both apps done")
    seen: list[tuple[str | None, str | None]] = []
    handing = cli.hand_to_worker

    def hand_and_look(*args, **kwargs):
        seen.append((status("d-order#alpha"), status("d-order#beta")))
        return handing(*args, **kwargs)

    monkeypatch.setattr(cli, "hand_to_worker", hand_and_look)
    cli.replay(deliveries.get("github", "d-order"))
    assert seen == [("queued", "queued"), ("queued", "queued")]
    wait_until(lambda: status("d-order") == "done", what="the delivery done again")
    assert (status("d-order#alpha"), status("d-order#beta")) == ("done", "done")


def test_replaying_a_fanned_out_delivery_without_its_payload_changes_nothing(
    stack: Callable[..., Stack],  # noqa: F811  the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Refused before anything is reopened: no status, and no attempt count, moves."""
    from hookledger.cli import deliveries as cli
    from hookledger.cli.output import CliError
    from shared.entrypoints import runtime

    world = stack()
    for name in ("alpha", "beta"):
        handler("github", "issues", app=name)(lambda event, ctx, name=name: Done(name))
    monkeypatch.setattr(runtime, "ledger", lambda: world.ledger)
    deliveries = world.ledger.deliveries
    ids = ("big-2", "big-2#alpha", "big-2#beta")
    for delivery_id in ids:
        deliveries.record("github", delivery_id, "issues", payload=None, payload_ref="payloads/p2")
        deliveries.mark("github", delivery_id, "done")

    def state() -> list[tuple[str, int]]:
        found = [deliveries.get("github", delivery_id) for delivery_id in ids]
        return [(d.status, d.attempts) for d in found if d is not None]

    before = state()
    with pytest.raises(CliError, match="has no stored payload"):
        cli.replay(deliveries.get("github", "big-2"))
    assert state() == before == [("done", before[0][1])] * 3
