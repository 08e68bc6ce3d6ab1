"""`ChecksClient.publish` against the simulator process: one run per external_id, its
annotations 50 a request, and every failure ending, on the next publish, in the same run
with each annotation once."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from shared.github import GitHubRejected, GitHubUnavailable
from shared.github.checks import Annotation, CheckRunState

REPO = "octo-org/handbook"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
NAME = "hookledger review"
DONE = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def findings(count: int) -> tuple[Annotation, ...]:
    return tuple(
        Annotation(f"docs/{n % 3}.md", n, n + 1, "warning", f"finding {n}", f"F{n}")
        for n in range(1, count + 1)
    )


def running(external_id: str = "sub-1") -> CheckRunState:
    return CheckRunState(
        name=NAME,
        external_id=external_id,
        status="in_progress",
        title="Reviewing 3 files",
        summary="The review is running.",
        details_url="http://127.0.0.1:8099/operations/batches/abc",
    )


def completed(
    annotations: tuple[Annotation, ...] = (),
    external_id: str = "sub-1",
    mark: str = "hookledger operation batches/abc",
) -> Any:
    return CheckRunState(
        name=NAME,
        external_id=external_id,
        status="completed",
        conclusion="neutral" if annotations else "success",
        title=f"{len(annotations)} findings",
        summary="| File | Status | Findings |",
        text="details",
        annotations=annotations,
        completed_at=DONE,
        mark=mark,
    )


def runs(simulator: Any) -> list[dict[str, Any]]:
    return simulator.control.check_runs(repo=REPO, sha=SHA)


def test_publish_creates_one_run(simulator: Any) -> None:
    result = simulator.github_checks().publish(REPO, SHA, running())

    [run] = runs(simulator)
    assert (result.check_run_id, result.created) == (run["id"], True)
    assert (run["name"], run["head_sha"], run["external_id"], run["status"]) == (
        NAME,
        SHA,
        "sub-1",
        "in_progress",
    )
    assert run["details_url"] == "http://127.0.0.1:8099/operations/batches/abc"
    assert run["output"]["title"] == "Reviewing 3 files"


def test_publishing_again_finds_the_run_and_updates_it(simulator: Any) -> None:
    checks = simulator.github_checks()
    first = checks.publish(REPO, SHA, running())

    second = checks.publish(REPO, SHA, completed())
    third = checks.publish(REPO, SHA, completed())

    [run] = runs(simulator)
    assert (second.check_run_id, second.created) == (first.check_run_id, False)
    assert third.check_run_id == first.check_run_id
    assert [w["method"] for w in run["writes"]] == ["POST", "PATCH", "PATCH"]
    assert (run["status"], run["conclusion"], run["completed_at"]) == (
        "completed",
        "success",
        "2026-11-30T12:00:00Z",
    )


def test_another_external_id_is_another_run(simulator: Any) -> None:
    checks = simulator.github_checks()
    first = checks.publish(REPO, SHA, running("sub-1"))
    other = checks.publish(REPO, SHA, running("sub-2"))

    assert other.created and other.check_run_id != first.check_run_id
    assert checks.find(REPO, SHA, NAME, "sub-1").id == first.check_run_id  # type: ignore[union-attr]
    assert checks.find(REPO, SHA, NAME, "sub-3") is None


def test_120_annotations_arrive_as_50_50_20(simulator: Any) -> None:
    notes = findings(120)

    result = simulator.github_checks().publish(REPO, SHA, completed(notes))

    [run] = runs(simulator)
    assert [(w["method"], w["annotations"], w["status"]) for w in run["writes"]] == [
        ("POST", 50, "in_progress"),
        ("PATCH", 50, "in_progress"),
        ("PATCH", 20, "completed"),  # completed only with the last annotations
    ]
    assert [a["message"] for a in run["annotations"]] == [n.message for n in notes]
    assert (result.annotations_sent, result.writes) == (120, 3)
    assert run["output"]["annotations_count"] == 120


def test_a_lost_answer_mid_way_resumes_with_each_annotation_once(simulator: Any) -> None:
    checks = simulator.github_checks()
    notes = findings(120)
    checks.publish(REPO, SHA, running())
    # The next write (annotations 1-50) is applied by "GitHub", its answer lost.
    simulator.control.set_check_run_write_fault(fail=1, status=502, after_apply=True)
    with pytest.raises(GitHubUnavailable, match=f"{REPO}@{SHA}: check run #"):
        checks.publish(REPO, SHA, completed(notes))

    retried = checks.publish(REPO, SHA, completed(notes))

    [run] = runs(simulator)
    assert [(w["method"], w["annotations"], w["status"]) for w in run["writes"]] == [
        ("POST", 0, "in_progress"),
        ("PATCH", 50, "in_progress"),  # applied, answer lost: that publish stopped there
        ("PATCH", 50, "in_progress"),  # the retry: the run held 50, so 51-100
        ("PATCH", 20, "completed"),
    ]
    assert [a["message"] for a in run["annotations"]] == [n.message for n in notes]
    assert (retried.created, retried.annotations_sent) == (False, 70)


def test_a_lost_create_answer_is_found_by_the_next_publish(simulator: Any) -> None:
    checks = simulator.github_checks()
    simulator.control.set_check_run_write_fault(fail=1, status=502, after_apply=True)
    with pytest.raises(GitHubUnavailable):
        checks.publish(REPO, SHA, completed(findings(60)))

    result = checks.publish(REPO, SHA, completed(findings(60)))

    [run] = runs(simulator)
    assert not result.created
    assert [(w["method"], w["annotations"]) for w in run["writes"]] == [("POST", 50), ("PATCH", 10)]
    assert (run["status"], len(run["annotations"])) == ("completed", 60)


def test_two_states_on_one_run_each_count_only_their_own_annotations(simulator: Any) -> None:
    checks = simulator.github_checks()
    checks.publish(REPO, SHA, completed(findings(120), mark="first"))

    second = checks.publish(REPO, SHA, completed(findings(60), mark="second"))
    again = checks.publish(REPO, SHA, completed(findings(60), mark="second"))

    [run] = runs(simulator)
    assert (second.annotations_sent, again.annotations_sent, again.writes) == (60, 0, 1)
    assert [a["raw_details"] for a in run["annotations"]] == ["first"] * 120 + ["second"] * 60
    assert [(w["annotations"], w["status"]) for w in run["writes"][3:]] == [
        (50, "in_progress"),  # the completed run reopened until its last annotations
        (10, "completed"),
        (0, "completed"),  # the last publish found all 60: one PATCH, nothing appended
    ]
    listings = [
        r
        for r in simulator.control.requests_log()
        if r["method"] == "GET" and r["path"].endswith("/annotations")
    ]
    assert len(listings) == 4  # 120, then 180 annotations on the run: two pages each time


def test_a_lost_answer_then_another_states_append_resumes_with_only_the_rest(
    simulator: Any,
) -> None:
    checks = simulator.github_checks()
    checks.publish(REPO, SHA, running())
    mine = completed(findings(120), mark="mine")
    # Annotations 1-50 are applied by "GitHub", the answer lost.
    simulator.control.set_check_run_write_fault(fail=1, status=502, after_apply=True)
    with pytest.raises(GitHubUnavailable):
        checks.publish(REPO, SHA, mine)
    # Another state appends 30 of its own in between.
    [run] = runs(simulator)
    theirs = completed(findings(30), mark="theirs")
    checks.update(REPO, run["id"], output=theirs.output(theirs.annotations))

    retried = checks.publish(REPO, SHA, mine)

    [run] = runs(simulator)
    own = [a["message"] for a in run["annotations"] if a["raw_details"] == "mine"]
    assert own == [n.message for n in findings(120)]  # each once, in order
    assert (retried.annotations_sent, run["status"], len(run["annotations"])) == (
        70,
        "completed",
        150,
    )


def test_find_reads_every_page(simulator: Any) -> None:
    checks = simulator.github_checks()
    for n in range(101):  # GitHub's page holds at most 100
        checks.create(REPO, SHA, NAME, external_id=f"old-{n}")
    wanted = checks.create(REPO, SHA, NAME, external_id="sub-1")

    assert checks.find(REPO, SHA, NAME, "sub-1") == wanted
    listed = simulator.control.requests_log()
    pages = [r for r in listed if r["method"] == "GET" and r["path"].endswith("/check-runs")]
    assert len(pages) == 2


# --- as a GitHub App: only an installation with `checks` may read and write runs -----------


def app_checks(simulator: Any, permissions: dict[str, str] | None = None) -> tuple[Any, int]:
    """A `ChecksClient` authenticating as a new App installed on `octo-org`, and the
    installation's id."""
    from shared.github.app import AppAuth, AppCredentials
    from shared.github.checks import ChecksClient

    registered = simulator.control.register_github_app()
    installation = simulator.control.install_github_app(
        registered["id"], "octo-org", repositories=[REPO], permissions=permissions
    )
    auth = AppAuth(
        AppCredentials.from_pem(registered["client_id"], registered["private_key"]),
        simulator.url,
        timeout_s=5,
    )
    client = ChecksClient(simulator.url, auth=auth, timeout_s=5, attempts=2, sleep=lambda _s: 0)
    return client, installation["id"]


def test_an_app_installation_publishes_its_run_with_one_token(simulator: Any) -> None:
    checks, installation = app_checks(simulator)

    checks.publish(REPO, SHA, running(), installation_id=installation)
    result = checks.publish(REPO, SHA, completed(findings(120)), installation_id=installation)

    [run] = runs(simulator)
    assert (result.check_run_id, result.created) == (run["id"], False)
    assert [w["annotations"] for w in run["writes"]] == [0, 50, 50, 20]
    assert simulator.control.github_apps()["tokens_issued"] == 1


def test_an_installation_without_checks_write_cannot_create_a_run(simulator: Any) -> None:
    read_only = {"contents": "read", "metadata": "read", "checks": "read"}
    checks, installation = app_checks(simulator, read_only)

    with pytest.raises(GitHubRejected, match="403") as refused:
        checks.publish(REPO, SHA, running(), installation_id=installation)

    assert refused.value.status == 403
    assert runs(simulator) == []  # the listing (checks: read) passed; the create did not
