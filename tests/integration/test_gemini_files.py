"""Batch results in files and batch input over 20 MB, end to end through the real SDK,
the simulator and the Firestore emulator: rows read in full or not settled at all."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
from google.genai import errors, types

from apps.review.kind import KIND, review_tag
from apps.review.pipeline import ReviewDeps, review_push
from apps.review.results import Reviews
from local.fakes import FakeClock
from shared.gemini import MAX_INLINE_BYTES, GeminiGateway, GeminiRowsUnread, make_client
from shared.github import ContentsClient
from shared.handlers import Done
from shared.ledger import Ledger
from shared.settlement.settler import GIVE_UP_AFTER, Settler

MODEL = "models/gemini-2.5-flash"
REPO, SHA = "octo-org/handbook", "f" * 40


@pytest.fixture
def gateway(simulator: Any) -> GeminiGateway:
    return GeminiGateway(make_client("sim-key", simulator.url, timeout_s=10, attempts=1))


def file_batch(gateway: GeminiGateway, count: int, tag: str) -> str:
    """A batch made from an uploaded input file: its results come back as a file."""
    requests_ = [(f"docs/{i:03}.md", f"# file {i}\ntext {i}") for i in range(count)]
    file_name = gateway.upload_requests(requests_, tag)
    job = gateway._client.batches.create(model=MODEL, src=file_name, config={"display_name": tag})
    assert job.name
    return job.name


def register_review(ledger: Ledger, name: str, paths: list[str], sha: str) -> None:
    ledger.operations.register(
        name, KIND, {"repo": REPO, "sha": sha, "paths": paths, "refused": []}
    )


FAILED_ROWS = [{"index": i, "error": {"code": 3, "message": f"row {i} refused"}} for i in (4, 50)]


def test_a_file_result_batch_settles_with_every_row_and_the_right_reviews(
    simulator: Any, gateway: GeminiGateway, firestore_client: Any
) -> None:
    ledger = Ledger(firestore_client)
    name = file_batch(gateway, 100, review_tag(REPO, "1" * 40))
    paths = [f"docs/{i:03}.md" for i in range(100)]
    register_review(ledger, name, paths, "1" * 40)
    simulator.control.complete(name, "succeeded", webhook="drop", rows=FAILED_ROWS)

    status = gateway.fetch_batch(name)
    outcome = Settler(ledger, gateway).settle(name, "reconcile")

    assert status.rows_complete and len(status.rows) == 100
    assert outcome.result == "settled" and outcome.status == "succeeded"
    reviews = {r["path"]: r for r in Reviews(ledger).reviews_for(name)}
    assert sorted(reviews) == paths
    assert reviews["docs/004.md"] == {**reviews["docs/004.md"], "status": "error"}
    assert reviews["docs/004.md"]["error"] == "row 4 refused"
    assert reviews["docs/050.md"]["status"] == "error"
    ok = [p for p, r in reviews.items() if r["status"] == "ok"]
    assert len(ok) == 98
    assert "key=docs/007.md" in reviews["docs/007.md"]["text"]


def test_an_unreadable_results_file_leaves_the_batch_pending_until_a_later_run(
    simulator: Any, gateway: GeminiGateway, firestore_client: Any
) -> None:
    ledger = Ledger(firestore_client)
    name = file_batch(gateway, 3, review_tag(REPO, "2" * 40))
    register_review(ledger, name, ["docs/000.md", "docs/001.md", "docs/002.md"], "2" * 40)
    done = simulator.control.complete(name, "succeeded", webhook="drop")
    results_file = done["metadata"]["output"]["responsesFile"]
    file_id = results_file.removeprefix("files/")
    requests.post(
        f"{simulator.url}/_sim/files/{file_id}:fail-downloads",
        json={"times": 1, "status": 503},
        timeout=10,
    ).raise_for_status()
    settler = Settler(ledger, gateway)

    with pytest.raises(GeminiRowsUnread) as caught:
        settler.settle(name, "reconcile")

    assert name in str(caught.value) and results_file in str(caught.value)
    record = ledger.operations.get(name)
    assert record is not None and record.pending
    assert Reviews(ledger).reviews_for(name) == []
    later = settler.settle(name, "reconcile")
    assert later.result == "settled" and later.status == "succeeded"
    assert {r["status"] for r in Reviews(ledger).reviews_for(name)} == {"ok"}
    assert len(Reviews(ledger).reviews_for(name)) == 3


def test_a_malformed_results_line_is_an_error_row_with_its_line_and_every_other_row_settles(
    simulator: Any, gateway: GeminiGateway, firestore_client: Any, caplog: Any
) -> None:
    ledger = Ledger(firestore_client)
    name = file_batch(gateway, 4, review_tag(REPO, "3" * 40))
    paths = [f"docs/{i:03}.md" for i in range(4)]
    register_review(ledger, name, paths, "3" * 40)
    done = simulator.control.complete(name, "succeeded", webhook="drop", malformed_lines=[2])
    results_file = done["metadata"]["output"]["responsesFile"]

    with caplog.at_level("WARNING"):
        outcome = Settler(ledger, gateway).settle(name, "reconcile")

    assert (outcome.result, outcome.status) == ("settled", "succeeded")
    reviews = {r["path"]: r for r in Reviews(ledger).reviews_for(name)}
    assert sorted(reviews) == paths
    assert reviews["docs/001.md"]["status"] == "error"
    assert reviews["docs/001.md"]["error"] == f"{results_file}: line 2 is not a JSON object"
    assert [p for p, r in reviews.items() if r["status"] == "ok"] == [
        "docs/000.md",
        "docs/002.md",
        "docs/003.md",
    ]
    record = ledger.operations.get(name)
    assert record is not None and record.result_counts == {
        "succeeded": 3,
        "failed": 1,
        "blocked": 0,
        "truncated": 0,
    }
    # Gemini counts 4 successful requests; hookledger read 3 answers and one bad line.
    mismatch = [r for r in caplog.records if "disagree with Gemini's batchStats" in r.getMessage()]
    assert mismatch and name in mismatch[0].getMessage()


def test_inline_results_without_echoed_keys_are_placed_by_request_order(
    simulator: Any, gateway: GeminiGateway, firestore_client: Any
) -> None:
    ledger = Ledger(firestore_client)
    tag = review_tag(REPO, "4" * 40)
    paths = ["docs/a.md", "docs/b.md", "docs/c.md"]
    name = gateway.create_batch(MODEL, [(p, f"# {p}") for p in paths], tag)
    register_review(ledger, name, paths, "4" * 40)
    simulator.control.complete(
        name, "succeeded", webhook="drop", echo_metadata=False, rows={"docs/b.md": "safety"}
    )

    outcome = Settler(ledger, gateway).settle(name, "webhook")

    assert outcome.result == "settled"
    reviews = {r["path"]: r for r in Reviews(ledger).reviews_for(name)}
    assert "key=docs/a.md" in reviews["docs/a.md"]["text"]
    assert "key=docs/c.md" in reviews["docs/c.md"]["text"]
    assert reviews["docs/b.md"]["status"] == "error"
    assert reviews["docs/b.md"]["error"].startswith("answer withheld: finishReason SAFETY")
    assert reviews["docs/b.md"]["finish_reason"] == "SAFETY"


def test_a_results_file_unreadable_until_its_retention_nearly_ends_settles_failed_with_an_alert(
    simulator: Any, gateway: GeminiGateway, firestore_client: Any, caplog: Any
) -> None:
    clock = FakeClock(datetime.now(UTC))
    ledger = Ledger(firestore_client, clock)
    name = file_batch(gateway, 2, review_tag(REPO, "5" * 40))
    register_review(ledger, name, ["docs/000.md", "docs/001.md"], "5" * 40)
    done = simulator.control.complete(name, "succeeded", webhook="drop")
    file_id = done["metadata"]["output"]["responsesFile"].removeprefix("files/")
    requests.post(
        f"{simulator.url}/_sim/files/{file_id}:fail-downloads",
        json={"times": 2, "status": 503},
        timeout=10,
    ).raise_for_status()
    settler = Settler(ledger, gateway)
    clock.advance((GIVE_UP_AFTER - timedelta(minutes=1)).total_seconds())
    with pytest.raises(GeminiRowsUnread):
        settler.settle(name, "reconcile")  # still inside the window: stays pending

    clock.advance(120)
    with caplog.at_level("ERROR"):
        outcome = settler.settle(name, "reconcile")

    assert (outcome.result, outcome.status) == ("settled", "failed")
    record = ledger.operations.get(name)
    assert record is not None and record.error["reason"] == "results_unreadable"
    assert file_id in record.error["message"]
    reviews = Reviews(ledger).reviews_for(name)
    assert len(reviews) == 2 and {r["status"] for r in reviews} == {"error"}
    alerts = [r for r in caplog.records if "results unreadable" in r.getMessage()]
    assert alerts and name in alerts[0].getMessage()


@pytest.mark.slow
def test_a_push_over_the_inline_limit_is_reviewed_completely_through_file_input(
    simulator: Any, gateway: GeminiGateway, firestore_client: Any
) -> None:
    paths = [f"docs/big-{i}.md" for i in range(3)]
    for index, path in enumerate(paths):  # 3 x 7 MB of Markdown: over 20 MB together
        text = (f"# part {index}\n" + "A line of Markdown prose.\n" * 280_000).encode()
        simulator.control.put_file("octo-org", "handbook", path, SHA, text)
    ledger = Ledger(firestore_client)
    deps = ReviewDeps(
        ledger=ledger,
        gemini=gateway,
        github=ContentsClient(simulator.url, timeout_s=10, attempts=2, sleep=lambda s: None),
        review_path="docs",
        model=MODEL,
    )
    push = {
        "ref": "refs/heads/main",
        "after": SHA,
        "deleted": False,
        "repository": {"full_name": REPO, "default_branch": "main"},
        "commits": [{"added": paths, "modified": [], "removed": []}],
    }

    outcome = review_push(push, "big-push", deps)

    assert isinstance(outcome, Done)
    [batch] = simulator.control.batches()
    uploads = [r for r in simulator.control.requests_log() if r["path"].startswith("/upload/")]
    assert uploads, "the requests went as an uploaded file"
    simulator.control.complete(batch["name"], "succeeded", webhook="drop")
    settled = Settler(ledger, gateway).settle(batch["name"], "webhook")
    assert settled.result == "settled"
    reviews = {r["path"]: r for r in Reviews(ledger).reviews_for(batch["name"])}
    assert sorted(reviews) == paths
    assert all(r["status"] == "ok" and "key=docs/big-" in r["text"] for r in reviews.values())


def test_the_simulator_refuses_inline_requests_over_20_mib_with_gemini_400(
    simulator: Any,
) -> None:
    client = simulator.genai()
    prompt = "x" * (MAX_INLINE_BYTES // 2)
    src = [{"contents": [{"parts": [{"text": prompt}], "role": "user"}]} for _ in range(3)]

    with pytest.raises(errors.ClientError) as caught:
        client.batches.create(model=MODEL, src=src, config={"display_name": "too-big"})

    assert caught.value.code == 400
    assert "payload size exceeds the limit" in str(caught.value.message)
    assert simulator.control.batches() == []


def test_the_batch_list_carries_no_inlined_results(simulator: Any) -> None:
    client = simulator.genai()
    src = [{"contents": [{"parts": [{"text": "hi"}], "role": "user"}], "metadata": {"key": "k"}}]
    batch = client.batches.create(model=MODEL, src=src, config={"display_name": "listed"})
    simulator.control.complete(batch.name, "succeeded", webhook="drop")

    [listed] = list(client.batches.list())
    fetched = client.batches.get(name=batch.name)

    assert listed.state == types.JobState.JOB_STATE_SUCCEEDED and listed.dest is None
    assert fetched.dest is not None and fetched.dest.inlined_responses


def test_a_file_input_batch_reports_its_results_as_a_downloadable_jsonl_file(
    simulator: Any, gateway: GeminiGateway
) -> None:
    name = file_batch(gateway, 2, "file-batch")
    simulator.control.complete(
        name, "succeeded", webhook="drop", rows=[FAILED_ROWS[0] | {"index": 1}]
    )
    client = gateway._client

    job = client.batches.get(name=name)
    assert job.dest is not None and job.dest.file_name and not job.dest.inlined_responses
    lines = [
        json.loads(line) for line in client.files.download(file=job.dest.file_name).splitlines()
    ]

    assert [line["key"] for line in lines] == ["docs/000.md", "docs/001.md"]
    assert "response" in lines[0] and lines[1]["error"]["code"] == 3


def batch_reads(simulator: Any, name: str) -> int:
    """How many GETs of batch `name` the simulator has answered."""
    return sum(
        1
        for r in simulator.control.requests_log()
        if r["method"] == "GET" and r["path"].endswith(f"/{name}")
    )


@pytest.mark.parametrize(
    ("outcome", "extra"),
    [("succeeded", {"rows": {"docs/b.md": "safety"}}), ("failed", {})],
    ids=["succeeded", "failed"],
)
def test_a_finished_batch_is_read_with_one_get_its_stats_and_error_included(
    simulator: Any, gateway: GeminiGateway, outcome: str, extra: dict[str, Any]
) -> None:
    paths = ["docs/a.md", "docs/b.md", "docs/c.md"]
    name = gateway.create_batch(MODEL, [(p, f"# {p}") for p in paths], review_tag(REPO, "6" * 40))
    simulator.control.complete(name, outcome, webhook="drop", **extra)
    before = batch_reads(simulator, name)

    status = gateway.fetch_batch(name)

    # The SDK's typed batch drops `batchStats` and a failed batch's `error`: both come from
    # the same body, not from a second GET (bench.cost, settled_by_reconcile gemini_calls).
    assert batch_reads(simulator, name) - before == 1
    assert status.terminal_status == outcome
    if outcome == "succeeded":
        assert status.stats is not None and status.stats.requests == 3
        assert [row.key for row in status.rows] == paths
        assert status.error is None
    else:
        assert status.error is not None and status.error.get("message")
