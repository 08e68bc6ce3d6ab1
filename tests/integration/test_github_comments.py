"""`CommentsClient` against the simulator process: one comment per marker, whatever fails."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import requests

from apps.review.comments import push_marker, review_marker
from shared import crashpoints
from shared.errors import retryable
from shared.github import (
    ContentsClient,
    GitHubRejected,
    GitHubUnavailable,
    OwnershipLost,
    PublishResult,
)

REPO = "octo-org/handbook"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
MARKER = review_marker("batches/abc123")


def commit_counts(simulator: Any, sha: str = SHA) -> dict[str, Any]:
    """This commit's `{"posts": received, "comments": stored}` as the simulator counted them."""
    for commit in simulator.control.github_comments()["commits"]:
        if (commit["repo"], commit["sha"]) == (REPO, sha):
            return {"posts": commit["posts"], "comments": commit["comments"]}
    return {"posts": 0, "comments": 0}


def post_raw(simulator: Any, body: str, sha: str = SHA) -> requests.Response:
    url = f"{simulator.url}/repos/{REPO}/commits/{sha}/comments"
    return requests.post(url, json={"body": body}, timeout=10)


def writes(simulator: Any) -> list[str]:
    """The methods of every comment write the simulator received, in order."""
    return [
        r["method"]
        for r in simulator.control.requests_log()
        if r["method"] in ("POST", "PATCH", "DELETE") and "/comments" in r["path"]
    ]


def test_find_on_a_commit_without_comments_is_none(simulator: Any) -> None:
    assert simulator.github_comments().find_comment(REPO, SHA, MARKER) is None


def test_publish_once_posts_one_comment_carrying_the_marker(simulator: Any) -> None:
    comments = simulator.github_comments()

    result = comments.publish_once(REPO, SHA, MARKER, "Looks good.")

    assert result.created
    stored = simulator.control.github_comments()["comments"]
    assert [(c["id"], c["commit_id"], c["repo"]) for c in stored] == [
        (result.comment_id, SHA, REPO)
    ]
    assert stored[0]["body"] == f"Looks good.\n\n{MARKER}"
    assert comments.find_comment(REPO, SHA, MARKER) == result.comment_id


def test_a_second_publish_finds_the_marker_and_posts_nothing(simulator: Any) -> None:
    comments = simulator.github_comments()
    first = comments.publish_once(REPO, SHA, MARKER, f"Review {MARKER}")

    second = comments.publish_once(REPO, SHA, MARKER, f"Review {MARKER}")

    assert (second.comment_id, second.created, second.updated) == (first.comment_id, False, False)
    assert commit_counts(simulator) == {"posts": 1, "comments": 1}
    assert writes(simulator) == ["POST"]  # the same body: nothing edited


def test_a_publish_with_a_newer_body_edits_the_comment_in_place(simulator: Any) -> None:
    comments = simulator.github_comments()
    first = comments.publish_once(REPO, SHA, MARKER, f"Review {MARKER}")

    second = comments.publish_once(REPO, SHA, MARKER, f"Review again {MARKER}")

    assert (second.comment_id, second.created, second.updated) == (first.comment_id, False, True)
    [stored] = simulator.control.github_comments()["comments"]
    assert (stored["id"], stored["body"]) == (first.comment_id, f"Review again {MARKER}")
    assert commit_counts(simulator) == {"posts": 1, "comments": 1}
    assert writes(simulator) == ["POST", "PATCH"]


def test_another_operations_marker_does_not_count(simulator: Any) -> None:
    comments = simulator.github_comments()
    comments.publish_once(REPO, SHA, review_marker("batches/abc1234"), "other review")

    result = comments.publish_once(REPO, SHA, MARKER, "this review")

    assert result.created
    assert commit_counts(simulator) == {"posts": 2, "comments": 2}


def test_a_502_after_create_raises_then_the_retry_finds_it(simulator: Any) -> None:
    comments = simulator.github_comments()
    simulator.control.set_comment_post_fault(1, 502, after_create=True)

    with pytest.raises(GitHubUnavailable, match=f"{REPO}@{SHA}: GitHub answered 502"):
        comments.publish_once(REPO, SHA, MARKER, "Looks good.")
    retried = comments.publish_once(REPO, SHA, MARKER, "Looks good.")

    assert not retried.created
    assert commit_counts(simulator) == {"posts": 1, "comments": 1}
    assert simulator.control.github_comments()["comments"][0]["id"] == retried.comment_id


def test_a_502_before_create_raises_then_the_retry_posts(simulator: Any) -> None:
    comments = simulator.github_comments()
    simulator.control.set_comment_post_fault(1, 503)

    with pytest.raises(GitHubUnavailable):
        comments.publish_once(REPO, SHA, MARKER, "Looks good.")
    retried = comments.publish_once(REPO, SHA, MARKER, "Looks good.")

    assert retried.created
    assert commit_counts(simulator) == {"posts": 2, "comments": 1}


def test_find_follows_link_pages_past_a_hundred_comments(simulator: Any) -> None:
    for number in range(230):
        assert post_raw(simulator, f"noise {number}").status_code == 201
    assert post_raw(simulator, f"the review {MARKER}").status_code == 201

    found = simulator.github_comments().find_comment(REPO, SHA, MARKER)

    stored = simulator.control.github_comments()["comments"]
    assert found == stored[-1]["id"]
    pages = [
        r
        for r in simulator.control.requests_log()
        if r["method"] == "GET" and "/comments" in r["path"]
    ]
    assert len(pages) == 3
    assert "per_page=100" in pages[0]["query"] and "page=3" in pages[2]["query"]


def test_a_missing_marker_over_several_pages_is_none_and_the_post_follows(simulator: Any) -> None:
    for number in range(101):
        post_raw(simulator, f"noise {number}")

    result = simulator.github_comments().publish_once(REPO, SHA, MARKER, "review")

    assert result.created
    assert commit_counts(simulator) == {"posts": 102, "comments": 102}


def test_a_malformed_repo_or_path_sends_nothing(simulator: Any) -> None:
    contents = ContentsClient(simulator.url, timeout_s=5, attempts=1)
    comments = simulator.github_comments()
    for call in (
        lambda: contents.fetch(REPO, "docs/../../secrets", SHA),
        lambda: contents.fetch(REPO, "a//b.md", SHA),
        lambda: contents.fetch("octo/..", "a.md", SHA),
        lambda: comments.publish_once("-octo/repo", SHA, MARKER, "x"),
        lambda: comments.find_comment(REPO, "../../contents", MARKER),
    ):
        with pytest.raises(GitHubRejected):
            call()
    # Each call is synchronous: a request sent would be in the log before the call returned.
    assert simulator.control.requests_log() == []


class Window:
    """An `Ownership` for tests: a fixed number of seconds left, and a yes/no owner answer."""

    def __init__(self, seconds: float = 300.0, owner: bool = True) -> None:
        self.seconds, self.owner, self.asked = seconds, owner, 0

    def seconds_left(self) -> float:
        return self.seconds

    def still_owner(self) -> bool:
        self.asked += 1
        return self.owner


def test_delete_comment_removes_it_and_a_second_delete_finds_it_gone(simulator: Any) -> None:
    comments = simulator.github_comments()
    posted = comments.publish_once(REPO, SHA, MARKER, "to be removed")

    first = comments.delete_comment(REPO, posted.comment_id)
    second = comments.delete_comment(REPO, posted.comment_id)

    assert (first, second) == (True, False)
    assert comments.find_comment(REPO, SHA, MARKER) is None
    assert simulator.control.github_comments()["commits"][0]["deletes"] == 1


def test_two_publishes_that_both_found_nothing_end_with_the_oldest_comment(simulator: Any) -> None:
    both_looked = threading.Barrier(2, timeout=30)
    results: list[PublishResult] = []

    def hold_before_post(point: str) -> None:
        if point == "outbox.before_post":
            both_looked.wait()  # each has listed the commit and found no marker

    def publish() -> None:
        results.append(simulator.github_comments().publish_once(REPO, SHA, MARKER, "review"))

    crashpoints.install(hold_before_post)
    try:
        threads = [threading.Thread(target=publish) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        crashpoints.install(None)

    stored = simulator.control.github_comments()["comments"]
    assert commit_counts(simulator) == {"posts": 2, "comments": 1}
    assert sorted(r.created for r in results) == [False, True]
    assert {r.comment_id for r in results} == {stored[0]["id"]}  # both agree on the survivor
    assert stored[0]["id"] == min(r.comment_id for r in results)


def test_a_duplicate_found_later_is_deleted_and_the_oldest_kept(simulator: Any) -> None:
    oldest = post_raw(simulator, f"first {MARKER}").json()["id"]
    post_raw(simulator, f"second {MARKER}")

    result = simulator.github_comments().publish_once(REPO, SHA, MARKER, "third")

    assert (result.comment_id, result.created, len(result.deleted)) == (oldest, False, 1)
    assert commit_counts(simulator) == {"posts": 2, "comments": 1}
    [kept] = simulator.control.github_comments()["comments"]
    assert (kept["id"], kept["body"]) == (oldest, f"third\n\n{MARKER}")  # shows the newest


def test_lost_ownership_before_an_edit_changes_nothing(simulator: Any) -> None:
    existing = post_raw(simulator, f"old review {MARKER}").json()["id"]
    window = Window(owner=False)

    with pytest.raises(OwnershipLost):
        simulator.github_comments().publish_once(REPO, SHA, MARKER, "new", ownership=window)

    [kept] = simulator.control.github_comments()["comments"]
    assert (kept["id"], kept["body"], window.asked) == (existing, f"old review {MARKER}", 1)
    assert writes(simulator) == ["POST"]  # post_raw's own


def test_editing_a_comment_answers_it_in_githubs_shape(simulator: Any) -> None:
    posted = post_raw(simulator, "before").json()
    url = f"{simulator.url}/repos/{REPO}/comments/{posted['id']}"

    edited = requests.patch(url, json={"body": "after"}, timeout=10)
    missing = requests.patch(f"{url}0", json={"body": "after"}, timeout=10)
    empty = requests.patch(url, json={}, timeout=10)

    assert edited.status_code == 200
    shaped = edited.json()
    assert (shaped["id"], shaped["body"], shaped["commit_id"]) == (posted["id"], "after", SHA)
    assert shaped["created_at"] == posted["created_at"] and "updated_at" in shaped
    assert (missing.status_code, empty.status_code) == (404, 422)
    [stored] = simulator.control.github_comments()["comments"]  # the 404 and 422 changed nothing
    assert (stored["id"], stored["body"]) == (posted["id"], "after")


def test_too_little_time_left_sends_nothing(simulator: Any) -> None:
    comments = simulator.github_comments(timeout_s=5.0)

    with pytest.raises(GitHubUnavailable, match="left before the deadline"):
        comments.publish_once(REPO, SHA, MARKER, "review", ownership=Window(seconds=4.9))

    assert simulator.control.requests_log() == []


def test_lost_ownership_is_retryable_and_posts_nothing(simulator: Any) -> None:
    window = Window(owner=False)

    with pytest.raises(OwnershipLost) as raised:
        simulator.github_comments().publish_once(REPO, SHA, MARKER, "review", ownership=window)

    assert retryable(raised.value) and window.asked == 1
    assert commit_counts(simulator) == {"posts": 0, "comments": 0}


def test_a_comment_with_an_older_marker_counts_as_already_there(simulator: Any) -> None:
    old = review_marker("batches/abc123")
    existing = post_raw(simulator, f"review {old}").json()["id"]
    marker = push_marker(REPO, SHA)

    result = simulator.github_comments().publish_once(REPO, SHA, marker, "review", also=[old])

    assert (result.comment_id, result.created) == (existing, False)
    assert commit_counts(simulator) == {"posts": 1, "comments": 1}


def test_push_marker_is_one_html_comment_per_push() -> None:
    assert push_marker("Octo-Org/Handbook", "ABCDEF12") == (
        "<!-- hookledger:review:octo-org/handbook@abcdef12 -->"
    )
    assert "--" not in push_marker("a--b/c", "abcd")[4:-3]
    with pytest.raises(GitHubRejected):
        push_marker("not a repo", "abcd")
