"""`demo`: the lost-webhook story against a running `make run`, narrated step by step.

1. store two Markdown files in the simulator's GitHub at a random commit;
2. send the signed push GitHub would send to the ingress (with `installation.id` when the
   simulator has a GitHub App installed on the demo repository, as `make run` sets up);
3. wait for the review batch to be registered in the ledger (as a GitHub App: and for the
   push's check run "hookledger review" to show `in_progress`);
4. have the simulator complete the batch with its webhook dropped (the webhook is lost);
5. wait for the reconcile loop of `make run` to find and settle it;
6. read the `reviews` written in the settling transaction (as a GitHub App: and see the
   check run `completed`, with its conclusion, annotations and link).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import requests

from apps.review.results import Reviews
from hookledger.cli.localenv import SIMULATOR_URL, ingress_url
from hookledger.cli.output import CliError, Output
from hookledger.sending import send_event
from shared.entrypoints import runtime
from shared.ledger import Ledger, Operation
from shared.statuses import OperationStatus

T = TypeVar("T")
REPO = "hookledger/demo"
FILES = {
    "docs/getting-started.md": "# Getting started\n\nRun `make run`, then `hookledger demo`.\n",
    "docs/operations.md": "# Operating\n\n`hookledger status` shows what is pending or stuck.\n",
}
HTTP_TIMEOUT_S = 10.0


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("demo", parents=[common], help="show a lost webhook being recovered")
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long to wait for reconcile to settle the batch (default 60)",
    )
    parser.set_defaults(func=cmd_demo)


class Narrator:
    """Collects the steps (for --json) and prints each as it happens (for people)."""

    def __init__(self, out: Output, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.out = out
        self.steps: list[dict[str, Any]] = []
        self._monotonic = monotonic
        self._started = monotonic()

    def step(self, text: str, **fields: Any) -> None:
        elapsed = round(self._monotonic() - self._started, 1)
        self.steps.append({"at_s": elapsed, "step": text, **fields})
        self.out.say(f"[{elapsed:5.1f}s] {text}")


def wait_for(
    what: str,
    check: Callable[[], T | None],
    timeout: float,
    every: float = 0.5,
    *,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`check()`'s first truthy value, polled until `timeout`; CliError naming `what` after."""
    deadline = monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if monotonic() >= deadline:
            raise CliError(f"demo: timed out after {timeout:g} s waiting for {what}")
        sleep(every)


def push_body(sha: str, installation_id: int | None = None) -> bytes:
    """The push GitHub sends; an App's webhook also carries `installation.id`."""
    body: dict[str, Any] = {
        "ref": "refs/heads/main",
        "before": "0" * 40,
        "after": sha,
        "deleted": False,
        "repository": {"full_name": REPO, "default_branch": "main"},
        "commits": [
            {
                "id": sha,
                "message": "Add the demo docs",
                "added": list(FILES),
                "modified": [],
                "removed": [],
            }
        ],
        "head_commit": {"id": sha},
    }
    if installation_id is not None:
        body["installation"] = {"id": installation_id}
    return json.dumps(body).encode()


def check_run(sim: Any, sha: str, status: str) -> dict[str, Any] | None:
    """The push's check run once the simulator's GitHub shows it with `status`, else None."""
    from apps.review.checks import CHECK_NAME

    runs = [r for r in sim.check_runs(repo=REPO, sha=sha) if r.get("name") == CHECK_NAME]
    return runs[0] if len(runs) == 1 and runs[0].get("status") == status else None


def describe_run(run: Mapping[str, Any]) -> dict[str, Any]:
    output = run.get("output") if isinstance(run.get("output"), Mapping) else {}
    return {
        "id": run.get("id"),
        "status": run.get("status"),
        "conclusion": run.get("conclusion"),
        "annotations": (output or {}).get("annotations_count", 0),
        "html_url": run.get("html_url"),
        "details_url": run.get("details_url"),
    }


def group_batch(ledger: Any, gid: str) -> str | None:
    """The batch registered for the shared batch's group `gid`; None until it is."""
    from shared.ledger.groups import group_tag

    submission = ledger.submissions.get(group_tag(gid))
    return submission.operation if submission is not None and submission.operation else None


def settled_record(ledger: Ledger, name: str) -> Operation | None:
    """The operation `name` once it is settled; None while it is pending or unknown."""
    record = ledger.operations.get(name)
    return record if record is not None and not record.pending else None


def cmd_demo(args: argparse.Namespace, out: Output) -> int:
    # dev-only: the demo needs the simulator
    from apps.review.checks import CHECK_NAME
    from local.github_app import installation_for
    from local.simulator.client import SimulatorClient

    cfg = runtime.config()
    ingress = ingress_url(os.environ)
    sim = SimulatorClient(cfg.gemini_base_url or SIMULATOR_URL)
    narrator = Narrator(out)
    ledger = runtime.ledger()  # one client for every poll below
    try:
        requests.get(f"{ingress}/healthz", timeout=HTTP_TIMEOUT_S).raise_for_status()
    except requests.RequestException as exc:
        raise CliError(
            f"demo: the ingress at {ingress} does not answer ({exc}); "
            "start the stack with `make run` (or set INGRESS_URL)"
        ) from exc

    sha = secrets.token_hex(20)
    owner, repo = REPO.split("/")
    try:
        for path, text in FILES.items():
            sim.put_file(owner, repo, path, sha, text.encode())
    except requests.RequestException as exc:
        raise CliError(f"demo: the simulator at {sim.url} refused the files: {exc}") from exc
    narrator.step(
        f"stored {len(FILES)} Markdown files in {REPO}@{sha[:12]} (simulated GitHub)",
        repo=REPO,
        sha=sha,
        files=list(FILES),
    )

    try:
        installation = installation_for(sim, REPO)
    except requests.RequestException as exc:
        raise CliError(f"demo: the simulator at {sim.url} does not answer: {exc}") from exc
    sent = send_event(
        ingress,
        "github",
        "push",
        push_body(sha, installation),
        secret=cfg.github_webhook_secrets[0],
        timeout_s=HTTP_TIMEOUT_S,
    )
    delivery = sent.delivery_id
    if not sent.accepted:
        raise CliError(
            f"demo: the ingress answered {sent.status} to push {delivery}: {sent.answer}"
        )
    how = f"as GitHub App installation {installation}" if installation else "token mode"
    narrator.step(
        f"sent a signed push (delivery {delivery}, {how}); ingress answered 202",
        delivery_id=delivery,
        installation_id=installation,
    )

    op = wait_for(
        "the review batch to be registered",
        lambda: ledger.queries.find_operation("context.sha", sha),
        30.0,
    )
    name = op.name
    what = "joined a shared batch as" if op.group is not None else "submitted batch"
    narrator.step(f"the worker {what} {name}, registered as pending", operation=name)
    runs: list[dict[str, Any]] = []
    if installation is not None:
        started = wait_for(
            f"the check run {CHECK_NAME!r} of {sha[:12]} in_progress",
            lambda: check_run(sim, sha, "in_progress"),
            30.0,
        )
        runs.append(describe_run(started))
        narrator.step(
            f"check run {CHECK_NAME!r} #{started['id']} is in_progress on {sha[:12]}",
            check_run=runs[-1],
        )

    batch = name
    if op.group is not None:  # the push joined a shared batch: wait for its group's batch
        batch = wait_for(
            f"the shared batch of group {op.group} (sealed when its window ends)",
            lambda: group_batch(ledger, op.group or ""),
            float(os.environ.get("REVIEW_GROUP_WINDOW_S") or 60) + 30.0,
        )
        narrator.step(f"its group {op.group} was sealed as batch {batch}", operation=batch)
    sim.complete(batch, state="succeeded", webhook="drop")
    narrator.step(f"Gemini finished {batch}; its webhook was dropped (lost)", operation=batch)

    narrator.step(f"waiting for the reconcile loop to notice (up to {args.timeout:g} s)")
    settled = wait_for(
        f"reconcile to settle {name}",
        lambda: settled_record(ledger, name),
        args.timeout,
    )
    narrator.step(
        f"{name} settled {settled.status} by {settled.settled_by}",
        operation=name,
        status=settled.status,
        settled_by=settled.settled_by,
    )

    written: list[dict[str, Any]] = wait_for(
        f"the reviews of {name}",
        lambda: docs if len(docs := Reviews(ledger).reviews_for(name)) >= len(FILES) else None,
        10.0,
    )
    reviews = [
        {"path": d.get("path"), "text": d.get("text"), "error": d.get("error")}
        for d in written  # the ledger answers them by path
    ]
    for review in reviews:
        first = (review["text"] or review["error"] or "").strip().splitlines()
        narrator.step(
            f"review of {review['path']}: {first[0] if first else '(empty)'}", path=review["path"]
        )
    if installation is not None:
        done = wait_for(
            f"the check run {CHECK_NAME!r} of {sha[:12]} completed",
            lambda: check_run(sim, sha, "completed"),
            30.0,
        )
        runs.append(describe_run(done))
        shown = runs[-1]
        narrator.step(
            f"check run #{done['id']} completed: {shown['conclusion']}, "
            f"{shown['annotations']} annotations, {shown['html_url']}",
            check_run=shown,
        )
        if shown["details_url"]:
            narrator.step(f"its Details link opens the console: {shown['details_url']}")
    result = {
        "operation": name,
        "status": settled.status,
        "settled_by": settled.settled_by,
        "reviews": reviews,
        "check_runs": runs,
        "steps": narrator.steps,
    }
    if out.json:
        out.emit(result, lambda: "")
    if (settled.status, settled.settled_by) != (OperationStatus.SUCCEEDED, "reconcile"):
        raise CliError(
            f"demo: {name} settled {settled.status} by {settled.settled_by}; "
            "expected succeeded by reconcile"
        )
    return 0
