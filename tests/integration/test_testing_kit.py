"""The test kit (hookledger/testing) on its own stack: what each helper promises.

Its apps are the repository's (articles on pushes, classify's batches), both loaded for
every test of this module; the tests of what `assert_nothing_pending` and the waits see add
tests/integration/kit_outbox_app.py (an outbox deliverer, a dead delivery) and
kit_second_app.py. tests/integration/test_testing_kit_reset.py covers the reset,
test_testing_kit_settings.py the app settings per test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hookledger.testing import (
    INSTALLATIONS,
    Stack,
    assert_nothing_pending,
    assert_one_result_per_item,
    github_example,
    github_example_path,
)

pytestmark = pytest.mark.hookledger_apps("apps.articles", "apps.classify")

REPO = "Codertocat/Hello-World"
SHA = "6113728f27ae82c7b1a177c8d03f9e96e0adf246"  # push-with-new-branch's commit
ITEMS = {"a": "The app crashes.", "b": "Add a dark mode."}
ROWS = {
    "a": {"text": '{"label": "bug", "confidence": 0.9}'},
    "b": {"text": '{"label": "feature", "confidence": 0.8}'},
}


def put_article(hookledger: Stack) -> None:
    hookledger.put_file(REPO, "articles/hello.md", SHA, b"# Hello\n")


def submit(hookledger: Stack, tmp_path: Path, submission: str) -> str:
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": k, "text": t}) + "\n" for k, t in ITEMS.items()))
    done = hookledger.cli("submit", "--app", "classify", "--input", str(items), "--id", submission)
    assert done.returncode == 0, done.stderr
    return str(hookledger.wait_batch(f"hookledger:classify:{submission}")["name"])


# --- the same recorded payload in two tests ---------------------------------------------
# The ingress names a GitHub task after its body; each test gets a fresh queue.


@pytest.mark.parametrize("turn", ["first", "second"])
def test_every_test_may_send_the_same_recorded_payload(hookledger: Stack, turn: str) -> None:
    put_article(hookledger)

    sent = hookledger.send_github("push", github_example_path("push-with-new-branch"))

    assert (sent.status, sent.answer["status"]) == (202, "accepted"), turn
    assert hookledger.wait_handled(sent)["articles"] == "done"


def test_within_a_test_the_same_body_again_is_a_duplicate(hookledger: Stack) -> None:
    put_article(hookledger)
    first = hookledger.send_github("push", github_example("push-with-new-branch"))
    hookledger.wait_handled(first)

    again = hookledger.send_github("push", github_example("push-with-new-branch"))

    assert (again.status, again.answer["status"]) == (200, "duplicate")
    with pytest.raises(AssertionError, match="was not accepted: the ingress answered 200"):
        hookledger.wait_handled(again)


def test_an_event_no_app_takes_is_handled_by_nobody(hookledger: Stack) -> None:
    sent = hookledger.send_github("ping", github_example("ping"))

    assert hookledger.wait_handled(sent) == {}


def test_a_push_the_app_ignores_is_reported_ignored(hookledger: Stack) -> None:
    sent = hookledger.send_github("push", github_example("push"))  # deletes a tag

    assert hookledger.wait_handled(sent)["articles"] == "ignored"


# --- crashes ---------------------------------------------------------------------------


def test_an_unknown_crash_point_is_refused_at_once(hookledger: Stack) -> None:
    with (
        pytest.raises(KeyError, match=r"no crash point named 'settle\.befor_commit'"),
        hookledger.crash_at("settle.befor_commit"),
    ):
        pass


@pytest.mark.slow
def test_a_worker_dying_before_the_settling_commit_still_settles_once(
    hookledger: Stack, tmp_path: Path
) -> None:
    name = submit(hookledger, tmp_path, "crash-1")

    with hookledger.crash_at("settle.before_commit") as crashes:
        hookledger.complete_batch(name, rows=ROWS)
        settled = hookledger.wait_settled(name)

    # The process that reached the point is gone (os._exit): gunicorn started another
    # worker and Cloud Tasks retried the webhook's delivery.
    assert [c["point"] for c in crashes.crashed] == ["settle.before_commit"]
    with pytest.raises(ProcessLookupError):
        os.kill(crashes.crashed[0]["pid"], 0)
    assert (settled["status"], settled["settled_by"]) == ("succeeded", "webhook")
    assert_one_result_per_item(hookledger, "classifications", ITEMS)
    assert_nothing_pending(hookledger)


# --- GitHub faults ---------------------------------------------------------------------


def test_a_rate_limited_github_call_is_retried(hookledger: Stack) -> None:
    put_article(hookledger)
    hookledger.github_rate_limited(times=1)

    sent = hookledger.send_github("push", github_example("push-with-new-branch"))

    assert hookledger.wait_handled(sent)["articles"] == "done"
    assert hookledger.sim.faults()["github_rate_limited"]["secondary"] == 1
    assert_one_result_per_item(hookledger, "articles", ["articles/hello.md"], field="path")


def test_the_faults_of_one_test_are_gone_in_the_next(hookledger: Stack) -> None:
    hookledger.github_errors(status=502, times=5)
    hookledger.github_rate_limited(times=5)
    armed = hookledger.sim.faults()
    assert (armed["github_errors"]["count"], armed["github_secondary_limit"]["count"]) == (5, 5)

    hookledger.reset()  # what the next test's fixture does first

    faults = hookledger.sim.faults()
    assert faults["github_errors"]["count"] == 0
    assert faults["github_secondary_limit"]["count"] == 0


# --- settling and reconcile ------------------------------------------------------------


def test_a_failed_batch_settles_failed(hookledger: Stack, tmp_path: Path) -> None:
    name = submit(hookledger, tmp_path, "fail-1")

    hookledger.fail_batch(name)

    assert hookledger.wait_settled(name)["status"] == "failed"
    assert [op["name"] for op in hookledger.operations("batch-review-classify")] == [name]
    assert hookledger.operations("no-such-kind") == []
    assert_nothing_pending(hookledger)


def test_the_helpers_name_a_missing_result_and_a_pending_operation(
    hookledger: Stack, tmp_path: Path
) -> None:
    name = submit(hookledger, tmp_path, "pending-1")

    with pytest.raises(AssertionError, match=f"operation {name} .* is pending"):
        assert_nothing_pending(hookledger)
    with pytest.raises(AssertionError, match="item 'a' has 0 results"):
        assert_one_result_per_item(hookledger, "classifications", ITEMS)


# --- what assert_nothing_pending and the waits see (kit_outbox_app.py) ------------------

OUTBOX = "tests.integration.kit_outbox_app"
SECOND = "tests.integration.kit_second_app"
BAD_SHA = "not-a-sha"  # GitHub answers 422: the comment's item is given up


def outbox_batch(hookledger: Stack, key: str, sha: str = SHA) -> str:
    """A settled kit_outbox batch whose one outbox item comments on REPO at `sha`."""
    sent = hookledger.send_github(
        "milestone", {"action": "submit", "key": key, "repo": REPO, "sha": sha}
    )
    assert hookledger.wait_handled(sent)["kit_outbox"] == "done"
    return str(hookledger.wait_batch(f"hookledger:kit-outbox:{key}")["name"])


def comments(hookledger: Stack) -> list[str]:
    return [c["body"] for c in hookledger.sim.github_comments()["comments"]]


def test_the_kit_app_is_installed_on_the_accounts_it_names(hookledger: Stack) -> None:
    installed = {
        i["account"]["login"]: i["id"] for i in hookledger.sim.github_apps()["installations"]
    }

    assert installed == dict(INSTALLATIONS)
    assert (
        INSTALLATIONS["Codertocat"]
        == json.loads(github_example("push-with-new-branch"))["installation"]["id"]
    )


@pytest.mark.hookledger_apps(OUTBOX)
def test_a_delivered_outbox_leaves_nothing_pending(hookledger: Stack) -> None:
    name = outbox_batch(hookledger, "ok-1")

    hookledger.complete_batch(name)
    record = hookledger.wait_delivered(name)

    assert record["status"] == "succeeded"
    assert len(comments(hookledger)) == 1
    assert_nothing_pending(hookledger)


@pytest.mark.hookledger_apps(OUTBOX)
def test_an_outbox_item_github_refused_fails_the_kit_naming_it(hookledger: Stack) -> None:
    name = outbox_batch(hookledger, "given-up-1", sha=BAD_SHA)

    hookledger.complete_batch(name)

    assert hookledger.wait_settled(name)["status"] == "succeeded"
    with pytest.raises(AssertionError, match=rf"operation {name}: outbox item \S+:0 was given up"):
        hookledger.wait_delivered(name)
    with pytest.raises(AssertionError) as failed:
        assert_nothing_pending(hookledger)
    assert f"operation {name}: outbox item" in str(failed.value)
    assert "(kind kit_outbox_comment) was given up: permanent error" in str(failed.value)
    assert "422" in str(failed.value)
    assert_nothing_pending(hookledger, allow_given_up=[name])  # expected: the test says so


@pytest.mark.hookledger_apps(OUTBOX)
def test_a_stubbed_github_refusal_gives_the_item_up(hookledger: Stack) -> None:
    name = outbox_batch(hookledger, "stubbed-1")
    hookledger.stub_github("POST", "/repos/{owner}/{repo}/commits/{sha}/comments", status=403)

    hookledger.complete_batch(name)

    with pytest.raises(AssertionError, match=r"was given up: .*403"):
        hookledger.wait_delivered(name)
    assert comments(hookledger) == []


@pytest.mark.hookledger_apps(OUTBOX, SECOND)
def test_one_apps_dead_record_fails_the_kit_naming_it(hookledger: Stack) -> None:
    sent = hookledger.send_github("milestone", {"action": "refuse"})

    assert hookledger.wait_handled(sent) == {"kit_outbox": "dead", "kit_second": "done"}
    record = f"deliveries/github:{sent.delivery_id}#kit_outbox (milestone) is dead"
    with pytest.raises(AssertionError, match="kit_outbox refuses this delivery") as failed:
        assert_nothing_pending(hookledger)
    assert record in str(failed.value)
    assert "kit_second" not in str(failed.value)
    assert_nothing_pending(hookledger, allow_dead=[sent])
    assert_nothing_pending(hookledger, allow_dead=[f"{sent.delivery_id}#kit_outbox"])


@pytest.mark.hookledger_apps(OUTBOX)
def test_a_dead_delivery_fails_the_kit_naming_it(hookledger: Stack) -> None:
    sent = hookledger.send_github("milestone", {"action": "refuse"})

    assert hookledger.wait_handled(sent) == {"kit_outbox": "dead"}
    with pytest.raises(AssertionError) as failed:
        assert_nothing_pending(hookledger)
    assert f"deliveries/github:{sent.delivery_id} (milestone) is dead: " in str(failed.value)
    assert "kit_outbox refuses this delivery" in str(failed.value)
    assert_nothing_pending(hookledger, allow_dead=[sent.delivery_id])


@pytest.mark.hookledger_apps(OUTBOX)
def test_an_allowance_that_matches_nothing_fails(hookledger: Stack) -> None:
    with pytest.raises(AssertionError, match=r"nothing of it is: \['batches/none', 'no-such-id'\]"):
        assert_nothing_pending(
            hookledger, allow_dead=["no-such-id"], allow_given_up=["batches/none"]
        )


@pytest.mark.slow
@pytest.mark.hookledger_apps(OUTBOX)
def test_wait_settled_after_a_crash_at_the_settling_commit_waits_for_no_outbox(
    hookledger: Stack,
) -> None:
    name = outbox_batch(hookledger, "crash-settled")

    with hookledger.crash_at("settle.committed") as crashes:
        hookledger.complete_batch(name)
        settled = hookledger.wait_settled(name)

    # The retried webhook finds it settled; only reconcile's sweep delivers the item now.
    assert [c["point"] for c in crashes.crashed] == ["settle.committed"]
    assert settled["status"] == "succeeded"
    assert [i["delivered_at"] for i in settled["outbox"]] == [None]
    with pytest.raises(AssertionError, match=rf"operation {name}: outbox item \S+ .* is open"):
        assert_nothing_pending(hookledger)
    assert hookledger.wait_delivered(name, sweep=True)["outbox"][0]["delivered_at"] is not None
    assert len(comments(hookledger)) == 1
    assert_nothing_pending(hookledger)


@pytest.mark.slow
@pytest.mark.hookledger_apps(OUTBOX)
@pytest.mark.parametrize("point", ["outbox.before_deliver", "outbox.delivered"])
def test_a_deliverer_crashed_around_its_call_is_delivered_once(
    hookledger: Stack, point: str
) -> None:
    name = outbox_batch(hookledger, f"crash-{point.split('.')[1].replace('_', '-')}")

    with hookledger.crash_at(point) as crashes:
        hookledger.complete_batch(name)
        hookledger.wait_settled(name)
        # Until the dead process's claim ends (OUTBOX_LEASE_S), then the sweep takes it.
        hookledger.wait_delivered(name, sweep=True)

    assert [c["point"] for c in crashes.crashed] == [point]
    assert len(comments(hookledger)) == 1
    assert_nothing_pending(hookledger)
