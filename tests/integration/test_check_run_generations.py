"""Generations on ONE check run (docs/architecture.md, "Re-run"): GitHub only appends
annotations, so a finish counts, when it publishes, which of ITS annotations the run holds,
whatever other generations appended before or in between. A count taken before the
re-run's batch existed (`annotations_before` in the contexts of earlier releases) is
ignored.

The check-run deliverer runs in this process against the simulator as GitHub; the ledger
reads it makes (the operation, the push's submission, the push's reviews) are stand-ins,
so each test sets the generation that is current and the reviews it shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from apps.review.check_runs import CHECK_RUN, publish_check_run
from apps.review.checks import CHECK_NAME
from local.fakes import FakeClock
from shared.github import GitHubUnavailable
from shared.github.checks import Annotation
from shared.ledger import Operation, OutboxItem
from shared.ledger.records import ItemLease

REPO = "octo-org/handbook"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
PUSH_TAG = f"{REPO}@{SHA}"
EXTERNAL_ID = "sub-push"
INSTALLATION = 42
SETTLED = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def rows(generation: str, findings: int) -> list[dict[str, Any]]:
    """The push's reviews as `generation` left them: one file, `findings` warnings."""
    found = [
        {
            "start_line": n,
            "end_line": n,
            "severity": "warning",
            "message": f"{generation} finding {n}",
            "title": f"F{n}",
        }
        for n in range(1, findings + 1)
    ]
    return [{"path": "docs/many.md", "status": "ok", "text": "reviewed", "findings": found}]


@dataclass
class Push:
    """The ledger as the deliverer reads it: operations, the push's current one, reviews."""

    operations: dict[str, Operation] = field(default_factory=dict)
    current: str | None = None
    reviews: list[dict[str, Any]] = field(default_factory=list)

    def settled(self, name: str, findings: int, **rerun: Any) -> OutboxItem:
        """Operation `name` settled and current, the push's reviews now its `findings`
        warnings: its finish item, leased. `rerun`: a re-run's context fields."""
        payload = {
            "kind": CHECK_RUN,
            "role": "finish",
            "repo": REPO,
            "sha": SHA,
            "operation": name,
            "external_id": EXTERNAL_ID,
            "installation_id": INSTALLATION,
            "details_url": None,
        }
        finish = OutboxItem(operation=name, index=0, idempotency_key=f"{name}:0", payload=payload)
        self.operations[name] = Operation(
            name=name,
            doc_id=name.replace("/", "-"),
            kind="github-review",
            status="succeeded",
            submitted_at=SETTLED,
            settled_at=SETTLED,
            attempts=0,
            next_check_at=None,
            writeback_done=False,
            context={"repo": REPO, "sha": SHA, **rerun},
            outbox=(finish,),
            submission=None if rerun else PUSH_TAG,
        )
        self.current, self.reviews = name, rows(name, findings)
        clock = FakeClock(SETTLED)
        lease = ItemLease("t", SETTLED + timedelta(minutes=5), clock, lambda: True)
        return replace(finish, lease=lease)

    def services(self, checks: Any) -> SimpleNamespace:
        ledger = SimpleNamespace(
            operations=SimpleNamespace(get=self.operations.get),
            submissions=SimpleNamespace(
                get=lambda tag: SimpleNamespace(current_operation=self.current)
            ),
            results=SimpleNamespace(find=lambda collection, *a, **equals: list(self.reviews)),
        )
        return SimpleNamespace(ledger=ledger, checks=checks)


def the_run(simulator: Any) -> dict[str, Any]:
    [run] = [r for r in simulator.control.check_runs(repo=REPO, sha=SHA) if r["name"] == CHECK_NAME]
    return run


def messages_of(run: dict[str, Any], generation: str) -> list[str]:
    return [a["message"] for a in run["annotations"] if a["message"].startswith(f"{generation} ")]


def expected(generation: str, findings: int) -> list[str]:
    return [f"{generation} finding {n}" for n in range(1, findings + 1)]


def test_a_rerun_appends_all_its_own_annotations_after_another_generation_appended(
    simulator: Any,
) -> None:
    push, checks = Push(), simulator.github_checks()
    publish_check_run(push.settled("batches/b1", 120), push.services(checks))
    assert the_run(simulator)["output"]["annotations_count"] == 120

    # Two re-runs pressed at once both read the run's 120 before their batches existed.
    r2 = push.settled("batches/r2", 120, check_submission=PUSH_TAG, annotations_before=120)
    publish_check_run(r2, push.services(checks))  # r2 settles first: 240 on the run
    # Then r3 registers, current: its finish publishes with the stored count stale.
    r3 = push.settled("batches/r3", 30, check_submission=PUSH_TAG, annotations_before=120)
    publish_check_run(r3, push.services(checks))

    run = the_run(simulator)
    assert messages_of(run, "batches/r3") == expected("batches/r3", 30)
    assert run["output"]["annotations_count"] == 270
    assert [(w["annotations"], w["status"]) for w in run["writes"][-1:]] == [(30, "completed")]


def test_a_finish_cut_short_resumes_with_the_rest_even_after_another_generation_appended(
    simulator: Any,
) -> None:
    push, checks = Push(), simulator.github_checks()
    publish_check_run(push.settled("batches/b1", 120), push.services(checks))
    r3 = push.settled("batches/r3", 120, check_submission=PUSH_TAG, annotations_before=120)
    # r3's first append (annotations 1-50) is applied by "GitHub", its answer lost.
    simulator.control.set_check_run_write_fault(fail=1, status=502, after_apply=True)
    with pytest.raises(GitHubUnavailable):
        publish_check_run(r3, push.services(checks))
    assert len(messages_of(the_run(simulator), "batches/r3")) == 50

    # A late item of an older generation appends 50 in between (it passed its own
    # "current" check before r3 registered): annotations without r3's mark.
    stale = [
        Annotation("docs/many.md", n, n, "warning", f"batches/r2 finding {n}") for n in range(1, 51)
    ]
    output = {"title": "r2", "summary": "r2", "annotations": [a.as_json() for a in stale]}
    checks.update(REPO, the_run(simulator)["id"], output=output)

    publish_check_run(r3, push.services(checks))  # the retry

    run = the_run(simulator)
    assert messages_of(run, "batches/r3") == expected("batches/r3", 120)  # each once, in order
    assert run["output"]["annotations_count"] == 120 + 120 + 50
    assert (run["status"], run["writes"][-1]["annotations"]) == ("completed", 20)
