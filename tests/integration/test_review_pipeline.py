"""The review pipeline called directly, with the real google-genai client against the simulator."""

from __future__ import annotations

import json

import pytest

from shared.gemini import GeminiGateway, make_client
from shared.github import ContentsClient
from shared.handlers import Done, Ignored, PermanentError, RetryableError
from shared.kinds.review import review_tag
from shared.kinds.review.pipeline import ReviewDeps, review_push
from shared.ledger import Ledger

REPO, SHA = "octo-org/handbook", "a" * 40


def payload(files: list[str], ref: str = "refs/heads/main", deleted: bool = False) -> dict:
    return {
        "ref": ref,
        "after": SHA,
        "deleted": deleted,
        "repository": {"full_name": REPO, "default_branch": "main"},
        "commits": [{"added": files, "modified": [], "removed": []}],
    }


@pytest.fixture
def deps(simulator, firestore_client) -> ReviewDeps:
    for path in ("docs/a.md", "docs/b.md", "notes/c.md"):
        simulator.control.put_file("octo-org", "handbook", path, SHA, f"# {path}\n".encode())
    gateway = GeminiGateway(make_client("sim-key", simulator.url, timeout_s=5, attempts=1))
    return ReviewDeps(
        ledger=Ledger(firestore_client),
        gemini=gateway,
        github=ContentsClient(simulator.url, timeout_s=5, attempts=2, sleep=lambda s: None),
        review_path="docs",
        model="models/gemini-2.5-flash",
    )


class CrashingLedger:
    """Raises on the first register, as if the process died between create and register."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger, self.crashed = ledger, False

    def register(self, *args, **kwargs):
        if not self.crashed:
            self.crashed = True
            raise RuntimeError("process died")
        return self._ledger.register(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._ledger, name)


def test_a_retry_after_a_crash_between_create_and_register_adopts_the_batch(deps, simulator):
    crashing = CrashingLedger(deps.ledger)
    with pytest.raises(RuntimeError):
        review_push(
            payload(["docs/a.md", "docs/b.md"]),
            "d1",
            deps.__class__(**{**deps.__dict__, "ledger": crashing}),
        )

    outcome = review_push(payload(["docs/a.md", "docs/b.md"]), "d1", deps)

    [batch] = simulator.control.batches()
    assert isinstance(outcome, Done) and "already submitted" in outcome.detail
    record = deps.ledger.get(batch["name"])
    assert record is not None and record.context["paths"] == ["docs/a.md", "docs/b.md"]
    assert record.kind == "github-review"


def test_the_batch_is_tagged_and_has_one_request_per_file_under_the_review_path(deps, simulator):
    outcome = review_push(
        payload(["docs/a.md", "notes/c.md", "docs/b.md", "docs/x.py"]), "d2", deps
    )

    assert isinstance(outcome, Done)
    [batch] = simulator.control.batches()
    assert batch["display_name"] == review_tag(REPO, SHA)
    keys = sorted(json.dumps(r) for r in batch["requests"])
    assert len(keys) == 2 and "docs/a.md" in keys[0] + keys[1] and "notes/c.md" not in "".join(keys)


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("a push to another branch", payload(["docs/a.md"], ref="refs/heads/feature")),
        ("a deleted ref", payload([], deleted=True)),
        ("no Markdown under the path", payload(["notes/c.md", "docs/x.py"])),
    ],
)
def test_pushes_with_nothing_to_review_are_ignored(deps, simulator, name, body):
    assert isinstance(review_push(body, "d3", deps), Ignored), name
    assert simulator.control.batches() == [], name


def test_a_missing_file_is_permanent_and_a_flaky_one_retryable(deps, simulator):
    with pytest.raises(PermanentError, match=r"docs/missing\.md"):
        review_push(payload(["docs/missing.md"]), "d4", deps)
    simulator.control.github_fault("docs/a.md", status=503, count=2)
    with pytest.raises(RetryableError, match=r"docs/a\.md"):
        review_push(payload(["docs/a.md"]), "d5", deps)
    assert simulator.control.batches() == []


def test_a_malformed_push_is_permanent(deps):
    with pytest.raises(PermanentError, match="missing"):
        review_push({"ref": "refs/heads/main"}, "d6", deps)


def test_a_second_delivery_of_the_same_push_waits_while_the_first_holds_a_fresh_claim(
    deps, simulator
):
    from datetime import timedelta

    from shared.clock import FakeClock

    clock = FakeClock()
    tag = review_tag(REPO, SHA)
    assert deps.ledger.claim_submission(tag, "org-hook-delivery", clock()) is None
    waiting = ReviewDeps(**{**deps.__dict__, "clock": clock})

    with pytest.raises(RetryableError, match="org-hook-delivery"):
        review_push(payload(["docs/a.md"]), "repo-hook-delivery", waiting)
    assert simulator.control.batches() == []

    clock.advance(timedelta(minutes=11).total_seconds())  # the other claim went stale
    assert isinstance(review_push(payload(["docs/a.md"]), "repo-hook-delivery", waiting), Done)
    assert len(simulator.control.batches()) == 1
