"""Which `check_run` / `check_suite` deliveries start a re-run, read from GitHub's published
example payloads (tests/fixtures/github/README.md), and what a re-run names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apps.review import CHECK_NAME as REVIEW_CHECK_NAME
from apps.review import rerun_refusal
from apps.review.checks import CHECK_NAME
from apps.review.kind import adopt as _adopt
from apps.review.reruns import parse_rerun, push_key, rerun_tag

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "github"


def fixture(file: str, **changes: Any) -> dict[str, Any]:
    payload = json.loads((FIXTURES / file).read_bytes())
    run = payload.get("check_run")
    if isinstance(run, dict) and "name" in changes:
        run["name"] = changes.pop("name")
    return {**payload, **changes}


def test_the_light_registry_names_the_check_run_the_review_publishes():
    assert REVIEW_CHECK_NAME == CHECK_NAME


@pytest.mark.parametrize(
    ("name", "event", "payload", "starts"),
    [
        (
            "our run re-requested",
            "check_run",
            fixture("check_run-rerequested.payload.json", name=CHECK_NAME),
            True,
        ),
        ("another app's run", "check_run", fixture("check_run-rerequested.payload.json"), False),
        (
            "our run created",
            "check_run",
            fixture("check_run-rerequested.payload.json", name=CHECK_NAME, action="created"),
            False,
        ),
        (
            "suite re-requested",
            "check_suite",
            fixture("check_suite-rerequested.payload.json"),
            True,
        ),
        (
            "suite requested with a push",
            "check_suite",
            fixture("check_suite-requested.payload.json"),
            False,
        ),
        ("no action", "check_suite", {"check_suite": {}}, False),
    ],
)
def test_only_rerequested_on_our_run_starts_a_rerun(name, event, payload, starts):
    assert (rerun_refusal(event, payload) is None) is starts, name


def test_a_rerun_names_the_repository_commit_installation_and_run():
    run = parse_rerun("check_run", fixture("check_run-rerequested.payload.json"))
    assert (run.repo, run.sha, run.installation_id) == (
        "github/hello-world",
        "d6fde92930d4715a2b49857d24b940956b26d2d3",
        1,
    )
    assert run.external_id is None  # the example's is empty: not one of ours
    suite = parse_rerun("check_suite", fixture("check_suite-rerequested.payload.json"))
    assert (suite.repo, suite.installation_id) == ("Codertocat/Hello-World", 957387)
    with pytest.raises(ValueError):
        parse_rerun("check_run", {"action": "rerequested"})


def test_a_rerun_tag_keeps_the_push_and_adds_the_delivery():
    tag = rerun_tag("o/r", "a" * 40, "d-1")
    assert tag == f"hookledger:review:o/r@{'a' * 40}~rerun:d-1"
    assert push_key(tag.removeprefix("hookledger:review:")) == f"o/r@{'a' * 40}"


def test_an_adopted_rerun_batch_is_read_as_its_push(monkeypatch):
    class Running:
        name, display_name, state = "batches/x", "t", "JOB_STATE_RUNNING"

    context = _adopt(f"o/r@{'b' * 40}~rerun:d-2", Running(), None)  # type: ignore[arg-type]
    assert context == {"repo": "o/r", "sha": "b" * 40, "paths": []}
