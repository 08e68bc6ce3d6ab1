"""The labeller on the whole local stack, as the test kit runs it (docs/apps.md, "A first
app"): the label Gemini chose lands on the issue at the simulated GitHub, once, through
duplicate deliveries, a reopened issue and a crash around the label's request."""

from __future__ import annotations

import json

import pytest

from hookledger.testing import Stack, assert_nothing_pending, github_example

pytestmark = pytest.mark.hookledger_apps("apps.labeller")

# GitHub's example: issue #1 of Codertocat/Hello-World opened, as the App receives it.
OPENED = json.loads(github_example("issues-opened")) | {"installation": {"id": 1}}
REOPENED = github_example("issues-reopened")  # the same issue, installation 1
LABELS = "/repos/Codertocat/Hello-World/issues/1/labels"


def label_requests(hookledger: Stack) -> list[object]:
    """The bodies of every label request GitHub received for the issue."""
    return [r["body"] for r in hookledger.sim.github_requests(method="POST", path_prefix=LABELS)]


def labels_on_the_issue(hookledger: Stack) -> list[str]:
    listed = hookledger.github_api().call(
        "issues/list-labels-on-issue", owner="Codertocat", repo="Hello-World", issue_number=1
    )
    return [label["name"] for label in listed.json()]


def label(hookledger: Stack, answer: str) -> str:
    """Send the opened issue, answer its batch with `answer`; the batch's name."""
    hookledger.sim.seed_issue("Codertocat/Hello-World", number=1, title="Spelling error")
    sent = hookledger.send_github("issues", OPENED)
    assert hookledger.wait_handled(sent) == {"labeller": "done"}
    batch = hookledger.wait_batch("hookledger:label:")
    hookledger.complete_batch(batch["name"], rows={"issue": {"text": answer}})
    return str(batch["name"])


def test_an_opened_issue_gets_the_label_gemini_chose_once(hookledger: Stack) -> None:
    name = label(hookledger, "Bug.")
    assert hookledger.wait_delivered(name)["status"] == "succeeded"
    assert label_requests(hookledger) == [{"labels": ["bug"]}]
    assert labels_on_the_issue(hookledger) == ["bug"]
    [labelled] = hookledger.documents("labelled").values()
    assert labelled["issue"] == "Codertocat/Hello-World#1" and labelled["label"] == "bug"

    # The issue is reopened: the same issue's batch, decided already; no second label.
    reopened = hookledger.send_github("issues", REOPENED)
    assert hookledger.wait_handled(reopened) == {"labeller": "done"}
    assert len(hookledger.batches()) == 1
    assert label_requests(hookledger) == [{"labels": ["bug"]}]
    assert_nothing_pending(hookledger)


def test_an_answer_that_is_no_offered_label_adds_none(hookledger: Stack) -> None:
    name = label(hookledger, "wontfix")
    assert hookledger.wait_delivered(name)["status"] == "succeeded"
    assert [d["label"] for d in hookledger.documents("labelled").values()] == [None]
    assert label_requests(hookledger) == []
    assert_nothing_pending(hookledger)


def test_a_crash_after_the_label_request_adds_the_label_once_more_harmlessly(
    hookledger: Stack,
) -> None:
    with hookledger.crash_at("outbox.delivered") as crashes:
        name = label(hookledger, "feature")
        hookledger.wait_settled(name)
    # The sweep delivers the item whose mark the crash lost, once the crashed claim ends.
    assert hookledger.wait_delivered(name, sweep=True)["status"] == "succeeded"
    assert len(crashes.crashed) == 1
    assert labels_on_the_issue(hookledger) == ["feature"]  # added twice, there once
    assert_nothing_pending(hookledger)


def test_an_issue_event_that_opens_nothing_is_not_queued(hookledger: Stack) -> None:
    closed = OPENED | {"action": "closed"}
    sent = hookledger.send_github("issues", closed)
    assert hookledger.wait_handled(sent) == {}  # the ingress answered `ignored`
    assert hookledger.batches() == []
