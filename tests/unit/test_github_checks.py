"""`ChecksClient` with the wire swapped for a script: what is refused before the wire, what
is (not) retried, and what ownership stops. Batching against a real stand-in of GitHub is
in tests/integration/test_github_checks.py."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from shared.github import GitHubRejected, GitHubUnavailable, OwnershipLost
from shared.github.checks import (
    ANNOTATIONS_PER_PAGE,
    MAX_ANNOTATION_PAGES,
    Annotation,
    CheckRunState,
    ChecksClient,
)
from tests.unit.test_github import ScriptedSession

REPO = "octo/repo"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
TOKEN = "s3cret-token"
DONE = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def checks(answers: list[Any], **kwargs: Any) -> tuple[ChecksClient, ScriptedSession]:
    session = ScriptedSession(answers)
    client = ChecksClient(
        "http://github.local", TOKEN, session=session, sleep=lambda _s: None, **kwargs
    )
    return client, session


def state(**changes: Any) -> CheckRunState:
    fields: dict[str, Any] = {
        "name": "hookledger review",
        "external_id": "sub-1",
        "status": "completed",
        "conclusion": "success",
        "title": "No findings",
        "summary": "| File | Status |",
        "completed_at": DONE,
    }
    return CheckRunState(**{**fields, **changes})


def note(line: int) -> Annotation:
    return Annotation("docs/a.md", line, line, "warning", f"finding {line}")


def run(run_id: int, external_id: str = "sub-1", count: int = 0) -> dict[str, Any]:
    return {
        "id": run_id,
        "name": "hookledger review",
        "head_sha": SHA,
        "external_id": external_id,
        "status": "in_progress",
        "conclusion": None,
        "output": {"annotations_count": count},
    }


def listing(*runs: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
    return (200, {}, {"total_count": len(runs), "check_runs": list(runs)})


class Window:
    """An `Ownership` for tests: a fixed number of seconds left, and a yes/no owner answer."""

    def __init__(self, seconds: float = 300.0, owner: bool = True) -> None:
        self.seconds, self.owner, self.asked = seconds, owner, 0

    def seconds_left(self) -> float:
        return self.seconds

    def still_owner(self) -> bool:
        self.asked += 1
        return self.owner


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("completed without a conclusion", state(conclusion=None)),
        ("a conclusion while in progress", state(status="in_progress", completed_at=None)),
        ("an unknown status", state(status="done")),
        ("stale is GitHub's", state(conclusion="stale")),
        ("a naive completed_at", state(completed_at=datetime(2026, 11, 30))),
        ("no title", state(title="")),
        ("a summary over 65535", state(summary="x" * 65536)),
        ("a text over 65535", state(text="x" * 65536)),
        ("no external id", state(external_id="")),
        ("an annotation level", state(annotations=(Annotation("a.md", 1, 1, "error", "m"),))),
        ("an upside-down range", state(annotations=(Annotation("a.md", 5, 4, "notice", "m"),))),
        ("line 0", state(annotations=(Annotation("a.md", 0, 1, "notice", "m"),))),
        ("no message", state(annotations=(Annotation("a.md", 1, 1, "notice", ""),))),
        ("a path GitHub refuses", state(annotations=(Annotation("../a.md", 1, 1, "notice", "m"),))),
        (
            "a 256-char title",
            state(annotations=(Annotation("a.md", 1, 1, "notice", "m", "t" * 256),)),
        ),
        (
            "a message over 64 KB",
            state(annotations=(Annotation("a.md", 1, 1, "notice", "é" * 40_000),)),
        ),
        ("a mark over 64 KB", state(mark="é" * 40_000)),
    ],
)
def test_a_state_github_would_refuse_is_refused_before_the_wire(name: str, bad: CheckRunState):
    client, session = checks([])
    with pytest.raises(GitHubRejected, match=f"{REPO}@{SHA}"):
        client.publish(REPO, SHA, bad)
    assert session.calls == [], name


def test_more_than_50_annotations_in_one_request_is_refused_before_the_wire():
    client, session = checks([])
    output = {"title": "t", "summary": "s", "annotations": [note(n).as_json() for n in range(51)]}
    with pytest.raises(GitHubRejected, match="51 annotations in one request"):
        client.update(REPO, 7, sha=SHA, output=output)
    assert session.calls == []


def test_nothing_found_one_create_carries_everything_when_it_fits():
    client, session = checks([listing(), (201, {}, run(7, count=2))])
    result = client.publish(REPO, SHA, state(annotations=(note(1), note(2))))
    assert (result.check_run_id, result.created, result.annotations_sent, result.writes) == (
        7,
        True,
        2,
        1,
    )
    list_call, create_call = session.calls
    assert list_call[1]["params"] == {
        "check_name": "hookledger review",
        "filter": "all",  # never hidden by a later run of the same name
        "per_page": 100,
    }
    sent = create_call[1]["json"]
    assert (sent["status"], sent["conclusion"], sent["completed_at"]) == (
        "completed",
        "success",
        "2026-11-30T12:00:00Z",
    )
    assert (sent["external_id"], len(sent["output"]["annotations"])) == ("sub-1", 2)


def test_a_lost_create_answer_is_transient_and_not_retried_here():
    client, session = checks([listing(), (502, {}, {"message": "Bad Gateway"})])
    with pytest.raises(GitHubUnavailable, match=f"{REPO}@{SHA}: check run") as caught:
        client.publish(REPO, SHA, state())
    assert [kwargs.get("json") is not None for _, kwargs in session.calls] == [False, True]
    assert TOKEN not in str(caught.value)


def test_a_lost_answer_to_an_appending_update_is_not_retried():
    notes = tuple(note(n) for n in range(1, 61))
    client, session = checks([listing(run(7, count=50)), (502, {}, {})])
    with pytest.raises(GitHubUnavailable, match="check run #7"):
        client.publish(REPO, SHA, state(annotations=notes))
    assert len(session.calls) == 2  # a retry could append annotations 51-60 twice


def test_an_update_without_annotations_is_retried():
    client, session = checks([listing(run(7)), (502, {}, {}), (200, {}, run(7))])
    result = client.publish(REPO, SHA, state())
    assert (result.created, result.writes, len(session.calls)) == (False, 1, 3)


def test_a_found_run_gets_only_the_annotations_it_lacks():
    notes = tuple(note(n) for n in range(1, 121))
    client, session = checks([listing(run(7, count=100)), (200, {}, run(7, count=120))])
    result = client.publish(REPO, SHA, state(annotations=notes))
    [patch] = [kwargs["json"] for _, kwargs in session.calls[1:]]
    assert [a["start_line"] for a in patch["output"]["annotations"]] == list(range(101, 121))
    assert (patch["status"], patch["conclusion"]) == ("completed", "success")
    assert (result.annotations_sent, result.writes) == (20, 1)


def test_if_absent_leaves_a_found_run_alone():
    client, session = checks([listing(run(7))])
    result = client.publish(
        REPO, SHA, state(status="in_progress", conclusion=None, completed_at=None), if_absent=True
    )
    assert (result.check_run_id, result.created, result.writes) == (7, False, 0)
    assert len(session.calls) == 1  # the listing only


MARK = "hookledger operation batches/r3"


def listed(*marks: str | None) -> list[dict[str, Any]]:
    """Annotations as "List check run annotations" answers them, one per `raw_details`."""
    return [
        {
            "path": "docs/a.md",
            "start_line": n,
            "end_line": n,
            "start_column": None,
            "end_column": None,
            "annotation_level": "warning",
            "title": None,
            "message": f"finding {n}",
            "raw_details": mark,
            "blob_href": f"https://github.com/{REPO}/blob/{SHA}/docs/a.md",
        }
        for n, mark in enumerate(marks, start=1)
    ]


def test_a_found_run_is_counted_at_publish_time_by_this_states_mark():
    # #7 holds 130: another generation's 120 (before and after ours) and 10 of this state's.
    page1 = listed(*["hookledger operation batches/b1"] * 95, *[MARK] * 5)
    page2 = listed(*[MARK] * 5, *["hookledger operation batches/r2"] * 25)
    following = f"http://github.local/repos/{REPO}/check-runs/7/annotations?per_page=100&page=2"
    notes = tuple(note(n) for n in range(1, 31))
    client, session = checks(
        [
            listing(run(7, count=130)),
            (200, {"link": f'<{following}>; rel="next"'}, page1),
            (200, {}, page2),
            (200, {}, run(7, count=150)),
        ]
    )

    result = client.publish(REPO, SHA, state(annotations=notes, mark=MARK))

    first_page, second_page, (_, patch) = session.calls[1:]
    assert first_page[0] == f"http://github.local/repos/{REPO}/check-runs/7/annotations"
    assert first_page[1]["params"] == {"per_page": 100}
    assert second_page[0] == following
    sent = patch["json"]["output"]["annotations"]
    assert [a["start_line"] for a in sent] == list(range(11, 31))  # only what it lacks
    assert {a["raw_details"] for a in sent} == {MARK}
    assert (result.annotations_sent, result.writes) == (20, 1)


def test_annotations_of_other_states_never_count_as_this_ones():
    notes = tuple(note(n) for n in range(1, 31))
    others = listed(*["hookledger operation batches/b1"] * 60, *[None] * 60)  # None: unmarked
    client, session = checks([listing(run(7, count=120)), (200, {}, others), (200, {}, run(7))])

    result = client.publish(REPO, SHA, state(annotations=notes, mark=MARK))

    assert [a["start_line"] for a in session.calls[-1][1]["json"]["output"]["annotations"]] == (
        list(range(1, 31))
    )
    assert result.annotations_sent == 30


@pytest.mark.parametrize(
    ("name", "held", "annotations"),
    [
        ("the run holds none", 0, 3),
        ("the state sends none", 120, 0),
    ],
)
def test_annotations_are_listed_only_when_some_are_to_send_and_some_are_there(
    name: str, held: int, annotations: int
):
    notes = tuple(note(n) for n in range(1, annotations + 1))
    client, session = checks([listing(run(7, count=held)), (200, {}, run(7))])

    result = client.publish(REPO, SHA, state(annotations=notes, mark=MARK))

    assert len(session.calls) == 2, name  # the runs listed, then one PATCH
    assert result.annotations_sent == annotations, name


def test_a_run_holding_more_than_can_be_counted_is_refused_naming_it():
    most = MAX_ANNOTATION_PAGES * ANNOTATIONS_PER_PAGE
    client, session = checks([listing(run(7, count=most + 1))])
    with pytest.raises(GitHubRejected, match=f"check run #7 .* holds {most + 1} annotations"):
        client.publish(REPO, SHA, state(annotations=(note(1),), mark=MARK))
    assert len(session.calls) == 1  # nothing listed, nothing written


def test_the_annotation_pages_are_bounded():
    following = f"http://github.local/repos/{REPO}/check-runs/7/annotations?page=2"
    endless = [(200, {"link": f'<{following}>; rel="next"'}, listed(None))] * MAX_ANNOTATION_PAGES
    client, session = checks([listing(run(7, count=120)), *endless])
    with pytest.raises(GitHubRejected, match=r"check run #7 annotations: more than 50 pages"):
        client.publish(REPO, SHA, state(annotations=(note(1),), mark=MARK))
    assert len(session.calls) == 1 + MAX_ANNOTATION_PAGES


@pytest.mark.parametrize(
    ("name", "answer", "error"),
    [
        ("not a list", (200, {}, {"annotations": []}), GitHubUnavailable),
        ("a list of something else", (200, {}, ["raw"]), GitHubUnavailable),
        ("gone", (404, {}, {"message": "Not Found"}), GitHubRejected),
        ("GitHub down", (502, {}, {"message": "Bad Gateway"}), GitHubUnavailable),
    ],
)
def test_a_failed_count_names_the_run_and_writes_nothing(name: str, answer: Any, error: type):
    client, session = checks([listing(run(7, count=120)), answer, answer, answer])
    with pytest.raises(error, match=f"{REPO}@{SHA}: check run #7 annotations"):
        client.publish(REPO, SHA, state(annotations=(note(1),), mark=MARK))
    assert all("json" not in kwargs or kwargs["json"] is None for _, kwargs in session.calls), name


def test_every_annotation_sent_carries_the_mark_and_none_without_one():
    notes = (note(1), note(2))
    marked, session = checks([listing(), (201, {}, run(7, count=2))])
    marked.publish(REPO, SHA, state(annotations=notes, mark=MARK))
    plain, plain_session = checks([listing(), (201, {}, run(7, count=2))])
    plain.publish(REPO, SHA, state(annotations=notes))

    assert [a["raw_details"] for a in session.calls[1][1]["json"]["output"]["annotations"]] == [
        MARK,
        MARK,
    ]
    assert all(
        "raw_details" not in a for a in plain_session.calls[1][1]["json"]["output"]["annotations"]
    )


def test_the_oldest_run_is_kept_and_a_newer_duplicate_points_to_it():
    answers = [
        listing(run(9), run(7), run(8, external_id="another-push")),
        (200, {}, run(7)),
        (200, {}, run(9)),
    ]
    client, session = checks(answers)
    result = client.publish(REPO, SHA, state(annotations=(note(1),)))
    assert (result.check_run_id, result.duplicates) == (7, (9,))
    kept, duplicate = session.calls[1:]
    assert kept[0].endswith("/check-runs/7") and "annotations" in kept[1]["json"]["output"]
    assert duplicate[0].endswith("/check-runs/9")
    assert "annotations" not in duplicate[1]["json"]["output"]
    assert duplicate[1]["json"]["conclusion"] == "success"
    assert duplicate[1]["json"]["output"]["summary"].startswith("Duplicate of check run #7")


def test_lost_ownership_stops_before_the_create():
    window = Window(owner=False)
    client, session = checks([listing()])
    with pytest.raises(OwnershipLost, match="did not create it"):
        client.publish(REPO, SHA, state(), ownership=window)
    assert len(session.calls) == 1 and window.asked == 1


def test_ownership_is_asked_before_every_write():
    notes = tuple(note(n) for n in range(1, 121))
    window = Window()
    answers = [listing(), (201, {}, run(7, count=50)), (200, {}, run(7)), (200, {}, run(7))]
    client, _ = checks(answers)
    result = client.publish(REPO, SHA, state(annotations=notes), ownership=window)
    assert (result.writes, window.asked) == (3, 3)


def test_no_request_starts_without_time_for_its_timeout():
    client, session = checks([], timeout_s=5.0)
    with pytest.raises(GitHubUnavailable, match="less than one request's 5 s timeout"):
        client.publish(REPO, SHA, state(), ownership=Window(seconds=4.9))
    assert session.calls == []


def test_listing_follows_pages_on_the_same_host_only():
    page2 = "http://github.local/repos/octo/repo/commits/x/check-runs?page=2"
    client, session = checks(
        [(200, {"link": f'<{page2}>; rel="next"'}, {"check_runs": [run(7)]}), listing(run(8))]
    )
    assert [r.id for r in client.list_for_ref(REPO, SHA, "hookledger review")] == [7, 8]
    assert session.calls[1][0] == page2

    foreign = '<https://elsewhere.example/p2>; rel="next"'
    client, _ = checks([(200, {"link": foreign}, {"check_runs": []})])
    with pytest.raises(GitHubRejected, match="pagination link leaves"):
        client.find(REPO, SHA, "hookledger review", "sub-1")


def test_a_refusal_carries_githubs_message():
    body = {"message": "Invalid request.\n\nNo more than 50 items are allowed; 51 were supplied."}
    client, _ = checks([listing(), (422, {}, body)])
    with pytest.raises(GitHubRejected, match=r"422: Invalid request\. No more than 50 items"):
        client.publish(REPO, SHA, state())
