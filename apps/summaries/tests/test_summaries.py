"""The summaries app on the whole local stack (docs/apps.md, "A second example"): the
summary stored and posted on the issue once, through a crash after the post and a
refused post."""

from __future__ import annotations

import json

import pytest

from hookledger.testing import Stack, assert_nothing_pending, github_example

pytestmark = pytest.mark.hookledger_apps("apps.summaries")

OPENED = json.loads(github_example("issues-opened")) | {"installation": {"id": 1}}
COMMENTS = "/repos/Codertocat/Hello-World/issues/1/comments"


def summarize(hookledger: Stack, text: str) -> str:
    hookledger.sim.seed_issue("Codertocat/Hello-World", number=1, title="Spelling error")
    sent = hookledger.send_github("issues", OPENED)
    assert hookledger.wait_handled(sent) == {"summaries": "done"}
    batch = hookledger.wait_batch("hookledger:summary:")
    hookledger.complete_batch(batch["name"], rows={"issue": {"text": text}})
    return str(batch["name"])


def comments(hookledger: Stack) -> list[str]:
    listed = hookledger.github_api().call(
        "issues/list-comments", owner="Codertocat", repo="Hello-World", issue_number=1
    )
    return [comment["body"] for comment in listed.json()]


def test_an_opened_issue_gets_its_summary_stored_and_posted_once(hookledger: Stack) -> None:
    name = summarize(hookledger, "A typo in the README.")
    assert hookledger.wait_delivered(name)["status"] == "succeeded"
    [posted] = comments(hookledger)
    assert posted.startswith("A typo in the README.\n\n<!-- summary ")
    [summary] = hookledger.documents("summaries").values()
    assert summary["text"] == "A typo in the README." and summary["outcome"] == "succeeded"
    assert_nothing_pending(hookledger)


def test_a_crash_after_posting_does_not_post_twice(hookledger: Stack) -> None:
    with hookledger.crash_at("outbox.delivered") as crashes:
        name = summarize(hookledger, "Short.")
        hookledger.wait_settled(name)
    hookledger.wait_delivered(name, sweep=True)  # the sweep looks, finds its mark, marks it
    assert len(crashes.crashed) == 1
    assert len(comments(hookledger)) == 1
    assert len(hookledger.sim.github_requests(method="POST", path_prefix=COMMENTS)) == 1
    assert_nothing_pending(hookledger)


def test_a_refused_post_is_given_up_and_the_kit_says_so(hookledger: Stack) -> None:
    hookledger.stub_github(
        "POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", status=403,
        body={"message": "Resource not accessible by integration"},
    )  # fmt: skip
    name = summarize(hookledger, "Short.")
    hookledger.wait_settled(name)
    with pytest.raises(AssertionError, match="given up"):
        hookledger.wait_delivered(name)
    with pytest.raises(AssertionError, match="was given up"):
        assert_nothing_pending(hookledger)
    assert_nothing_pending(hookledger, allow_given_up=[name])
