"""How many GitHub requests a push's review costs (apps/review/pipeline.py `_fetch_all`,
`ContentsClient.fetch_many`), counted by the simulator's request log: one GraphQL query per
50 files, each unreviewable file refused on its own, each failure naming its files."""

from __future__ import annotations

import logging

import pytest

from apps.review.pipeline import ReviewDeps, review_push
from apps.review.results import Reviews
from shared.gemini import GeminiGateway, make_client
from shared.github import ContentsClient
from shared.handlers import Done, RetryableError
from shared.ledger import Ledger
from shared.settlement.settler import Settler

OWNER, NAME = "octo-org", "handbook"
REPO, SHA = f"{OWNER}/{NAME}", "b" * 40


def payload(files: list[str]) -> dict:
    return {
        "ref": "refs/heads/main",
        "after": SHA,
        "deleted": False,
        "repository": {"full_name": REPO, "default_branch": "main"},
        "commits": [{"added": files, "modified": [], "removed": []}],
    }


@pytest.fixture
def deps(simulator, firestore_client) -> ReviewDeps:
    gateway = GeminiGateway(make_client("sim-key", simulator.url, timeout_s=5, attempts=1))
    return ReviewDeps(
        ledger=Ledger(firestore_client),
        gemini=gateway,
        github=ContentsClient(simulator.url, timeout_s=5, attempts=2, sleep=lambda s: None),
        review_path="docs",
        model="models/gemini-2.5-flash",
    )


def store(simulator, paths: list[str]) -> None:
    for path in paths:
        simulator.control.put_file(OWNER, NAME, path, SHA, f"# {path}\n\nText.\n".encode())


def test_a_push_of_twenty_small_files_costs_one_github_request(deps, simulator):
    paths = [f"docs/page-{i:02}.md" for i in range(20)]
    store(simulator, paths)

    assert isinstance(review_push(payload(paths), "d-twenty", deps), Done)

    reads = simulator.control.github_reads()
    assert [(r["method"], r["path"]) for r in reads] == [("POST", "/graphql")]
    assert reads[0]["files"] == [f"{SHA}:{path}" for path in paths]
    [batch] = simulator.control.batches()
    assert len(batch["requests"]) == 20


def test_a_push_of_120_files_costs_three_requests(deps, simulator):
    paths = [f"docs/{i:03}.md" for i in range(120)]
    store(simulator, paths)

    assert isinstance(review_push(payload(paths), "d-many", deps), Done)

    assert [len(r["files"]) for r in simulator.control.github_reads()] == [50, 50, 20]


def test_one_unreviewable_file_among_many_gets_its_own_error_review(deps, simulator):
    paths = [f"docs/{i}.md" for i in range(8)]
    store(simulator, paths)
    simulator.control.put_file(OWNER, NAME, "docs/logo.md", SHA, b"\x89PNG\r\n\x1a\n\0\0")
    pushed = [*paths, "docs/logo.md", "docs/gone.md"]

    assert isinstance(review_push(payload(pushed), "d-mixed", deps), Done)

    assert len(simulator.control.github_reads()) == 1
    [batch] = simulator.control.batches()
    record = deps.ledger.operations.get(batch["name"])
    assert record.context["paths"] == paths
    refused = {r["path"]: r["error"] for r in record.context["refused"]}
    assert refused == {
        "docs/logo.md": f"{REPO}:docs/logo.md@{SHA[:12]}: is binary, not text",
        "docs/gone.md": f"{REPO}:docs/gone.md@{SHA[:12]}: not found at this commit",
    }
    simulator.control.complete(batch["name"], webhook="drop")
    assert Settler(deps.ledger, deps.gemini).settle(batch["name"], "webhook").result == "settled"
    reviews = {r["path"]: r for r in Reviews(deps.ledger).reviews_for(batch["name"])}
    assert {p for p, r in reviews.items() if r["status"] == "ok"} == set(paths)
    assert reviews["docs/logo.md"]["status"] == "error"
    assert "binary" in reviews["docs/logo.md"]["error"]
    assert "not found" in reviews["docs/gone.md"]["error"]


def test_a_transient_failure_names_every_file_of_the_push_and_submits_nothing(
    deps, simulator, caplog
):
    paths = ["docs/a.md", "docs/b.md"]
    store(simulator, paths)
    simulator.control.github_fault("docs/b.md", status=502, count=2)  # both tries fail
    caplog.set_level(logging.ERROR, logger="hookledger")

    with pytest.raises(RetryableError) as caught:
        review_push(payload(paths), "d-flaky", deps)

    assert str(caught.value) == f"{REPO}@{SHA[:12]}: could not fetch docs/a.md, docs/b.md"
    failed = sorted(r.getMessage() for r in caplog.records if "fetch failed" in r.getMessage())
    assert failed == ["fetch failed for docs/a.md", "fetch failed for docs/b.md"]
    assert simulator.control.batches() == []
    assert len(simulator.control.github_reads()) == 2  # the query and its one retry


def test_the_endpoint_limit_turns_the_next_push_into_a_retry(deps, simulator):
    store(simulator, ["docs/a.md"])
    simulator.control.set_github_endpoint_limit(graphql_points_per_minute=1)

    assert isinstance(review_push(payload(["docs/a.md"]), "d-first", deps), Done)
    other = {**payload(["docs/a.md"]), "after": "c" * 40}
    simulator.control.put_file(OWNER, NAME, "docs/a.md", "c" * 40, b"# again\n")
    with pytest.raises(RetryableError, match=r"docs/a\.md"):
        review_push(other, "d-second", deps)

    assert simulator.control.faults()["github_rate_limited"]["endpoint"] >= 1
