"""The push's ONE commit comment follows the check run's generation (docs/architecture.md,
"Outbox" and "Re-run"): after a "Re-run" settles, the comment shows the newest review,
edited in place; an older generation's late comment item writes nothing.

The real ingress and worker run against the simulator as the App's GitHub with
`GITHUB_COMMENTS=true`; "Re-run" is the simulator's signed `check_run` `rerequested`
webhook, as in tests/integration/test_review_reruns.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import requests

from apps.review import comments
from apps.review.comments import push_marker
from shared.github import CommentsClient
from shared.kinds import Deliverers
from shared.ledger import Ledger, Operation, OutboxItem
from tests.integration.test_github_app_pipeline import CLIENT_ID, INSTALLATION, PEM, PUBLIC
from tests.integration.test_review_reruns import app_push, finished, new_operation, rerun, runs
from tests.plugins.pipeline import FILES, OWNER_REPO, SHA, PipelineStack, pipeline_stack
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

MARKER = push_marker(OWNER_REPO, SHA)


@dataclass(frozen=True)
class Services:
    """What the comment deliverer uses, built in the test process against the same stack."""

    ledger: Ledger
    comments: CommentsClient


@pytest.fixture(scope="module")
def stack(firestore_emulator, cloudtasks_emulator_fast) -> Iterator[PipelineStack]:
    env = {
        "GITHUB_APP_ID": CLIENT_ID,
        "GITHUB_APP_PRIVATE_KEY": PEM,
        "GITHUB_COMMENTS": "true",
    }
    with pipeline_stack(firestore_emulator, cloudtasks_emulator_fast, env) as started:
        yield started


@pytest.fixture
def fresh(stack: PipelineStack, firestore_client) -> PipelineStack:
    stack.install_app(CLIENT_ID, PUBLIC, INSTALLATION)
    return stack


@pytest.fixture
def ledger(firestore_client) -> Ledger:
    return Ledger(firestore_client, grace=timedelta(0))


def said(look: str) -> dict[str, Any]:
    """Rows by request key: each file's review reads `{look} at {path}`."""
    return {path: {"outcome": "ok", "text": f"{look} at {path}"} for path in FILES}


def settle(stack: PipelineStack, ledger: Ledger, op: Operation, look: str) -> None:
    """Complete `op` with `said(look)` once its check run started; wait until every one of
    its outbox items (check run finish, comment) is closed."""
    wait_until(lambda: not any(i.open for i in ledger.operations.get(op.name).outbox), 60, "start")
    stack.sim.complete(op.name, state="succeeded", webhook="send", rows=said(look))
    wait_until(lambda: finished(ledger, op.name), 60, f"{op.name} settled, its outbox done")


def marked(stack: PipelineStack) -> list[dict[str, Any]]:
    """The pushed commit's comments carrying the push's marker, oldest first."""
    seen = stack.sim.github_comments()["comments"]
    return [c for c in seen if c["commit_id"] == SHA and MARKER in c["body"]]


def commit_counts(stack: PipelineStack) -> dict[str, Any]:
    for commit in stack.sim.github_comments()["commits"]:
        if (commit["repo"], commit["sha"]) == (OWNER_REPO, SHA):
            return commit
    return {}


def comment_item(ledger: Ledger, op: Operation) -> OutboxItem:
    [found] = [
        i for i in ledger.operations.get(op.name).outbox if i.payload["kind"] == comments.COMMENT
    ]
    return found


def test_after_a_rerun_settles_the_one_comment_shows_the_newest_review(fresh, ledger):
    assert fresh.push(app_push()).status_code == 202
    first = new_operation(ledger, set())
    settle(fresh, ledger, first, "first look")
    [before] = marked(fresh)
    assert all(f"first look at {path}" in before["body"] for path in FILES)

    [run] = runs(fresh.sim)
    rerun(fresh, run["id"])
    second = new_operation(ledger, {first.name})
    settle(fresh, ledger, second, "second look")

    assert comment_item(ledger, second).delivered_at is not None  # the re-run recorded one
    [after] = marked(fresh)  # exactly one hookledger comment on the commit
    assert after["id"] == before["id"], "edited in place, not replaced"
    assert all(f"second look at {path}" in after["body"] for path in FILES), after["body"]
    assert "first look" not in after["body"]


def test_an_older_generations_late_comment_item_writes_nothing(fresh, ledger):
    assert fresh.push(app_push()).status_code == 202
    first = new_operation(ledger, set())
    settle(fresh, ledger, first, "first look")
    [shown] = marked(fresh)
    [run] = runs(fresh.sim)
    rerun(fresh, run["id"])
    second = new_operation(ledger, {first.name})  # registered: now the current one, pending
    # Without a comment on the commit, the first's late item would have to post one.
    url = f"{fresh.sim_url}/repos/{OWNER_REPO}/comments/{shown['id']}"
    assert requests.delete(url, timeout=10).status_code == 204
    posts = commit_counts(fresh)["posts"]

    late = comment_item(ledger, first)
    Deliverers(Services(ledger, CommentsClient(fresh.sim_url, timeout_s=5)))(late)

    assert commit_counts(fresh)["posts"] == posts and marked(fresh) == []
    settle(fresh, ledger, second, "second look")  # the current generation posts it
    [after] = marked(fresh)
    assert all(f"second look at {path}" in after["body"] for path in FILES)
    assert after["body"].count(MARKER) == 1
