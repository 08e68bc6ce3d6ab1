"""`CommentsClient` against the simulator process: one comment per marker, whatever fails."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from shared.github import ContentsClient, GitHubRejected, GitHubUnavailable, review_marker

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

    second = comments.publish_once(REPO, SHA, MARKER, f"Review again {MARKER}")

    assert (second.comment_id, second.created) == (first.comment_id, False)
    assert commit_counts(simulator) == {"posts": 1, "comments": 1}


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
