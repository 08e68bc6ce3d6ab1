"""The `hookledger` CLI against the Firestore emulator, the simulator and the Cloud Tasks emulator.

Commands run in-process through `main([...])` (output read with capsys); one runs
through the installed `.venv/bin/hookledger` console script.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from google.cloud.tasks_v2 import types as task_types

from hookledger.cli import main
from hookledger.cli.demo import settled_record, wait_for
from hookledger.cli.output import CliError, ProgressBar
from local.fakes import FakeClock
from shared.config import LOCAL_ENVELOPE_KEY, Config
from shared.entrypoints import runtime
from shared.entrypoints.worker import Worker
from shared.handoff.envelope import EnvelopeSealer
from shared.handoff.tasks import ensure_queue, make_client, task_id_for
from shared.ledger import Ledger, Recovery
from tests.ledger_parts import installation_event

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / ".venv" / "bin" / "hookledger"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def cli(firestore_client: Any, simulator: Any) -> Iterator[Any]:
    """The environment a user of `make run` has, pointed at this test's services."""
    os.environ.update(
        {
            "GOOGLE_CLOUD_PROJECT": "demo-hookledger",
            "GEMINI_BASE_URL": simulator.url,
            "GEMINI_API_KEY": "sim-key",
            "HTTP_TIMEOUT_S": "5",
            "RECONCILE_GRACE_S": "0",
        }
    )
    runtime.reset()
    yield firestore_client
    runtime.reset()


def run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys: Any, *argv: str) -> Any:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def ledger_at(client: Any, when: datetime = T0) -> tuple[Ledger, FakeClock]:
    clock = FakeClock(when)
    return Ledger(client, clock=clock, grace=timedelta(0)), clock


def stored(client: Any, name: str) -> dict[str, Any] | None:
    """Every field the ledger stores for the operation `name`, as stored."""
    return Ledger(client).queries.stored_fields(name)


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["bogus"],
        ["ops"],
        ["ops", "list", "--limit", "0"],
        ["ops", "list", "--status", "done"],
        ["submit", "--kind", "k"],
        ["submit", "--kind", "k", "--prompt", "a", "--file", "x.jsonl"],
        ["deliveries", "replay"],
        ["webhooks", "register", "--uri", "https://x.test/h", "--events", "batch.exploded"],
        ["reconcile"],
    ],
    ids=lambda argv: " ".join(argv) or "nothing",
)
def test_bad_arguments_give_one_line_and_exit_2(capsys: Any, argv: list[str]) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("hookledger") and "error:" in err


@pytest.mark.slow
def test_the_console_script_reports_bad_arguments_in_one_line() -> None:
    done = subprocess.run(
        [str(SCRIPT), "ops", "list", "--limit", "lots"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "hookledger ops list: error: argument --limit: must be a whole number, got 'lots' "
        "(try: hookledger ops list --help)"
    ]


# --------------------------------------------------------------------------- submit


def test_submit_creates_a_tagged_batch_and_registers_it(cli: Any, simulator: Any, capsys) -> None:
    code, out, err = run(
        capsys,
        "submit",
        "--kind",
        "summaries",
        "--model",
        "models/m",
        "--prompt",
        "one",
        "--prompt",
        "two",
    )

    assert code == 0, err
    name = out.strip()
    [batch] = simulator.control.batches()
    assert batch["name"] == name and batch["display_name"].startswith("hookledger:summaries:")
    stored = runtime.ledger().operations.get(name)
    assert (stored.kind, stored.status) == ("summaries", "pending")
    assert stored.context["keys"] == ["prompt-1", "prompt-2"]
    assert stored.context["display_name"] == batch["display_name"]


def test_submit_refuses_a_kind_a_loaded_app_registers(
    cli: Any, tmp_path: Path, capsys, monkeypatch
) -> None:
    """`submit --kind` makes generic batches: the kind of an app HOOKLEDGER_APPS names is
    that app's (its tag, its write-back), never a generic one, loaded or not before."""
    name = f"cli_kind_app_{uuid.uuid4().hex[:8]}"
    kind = f"owned-{uuid.uuid4().hex[:6]}"
    (tmp_path / f"{name}.py").write_text(
        "from shared import api\n"
        f"app = api.App({name.replace('_', '-')!r})\n"
        f"app.kind(api.OperationKind(name={kind!r}, tag={kind!r}))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("HOOKLEDGER_APPS", name)

    code, out, err = run(capsys, "submit", "--kind", kind, "--prompt", "one")

    assert (code, out) == (2, "")
    assert f"kind {kind!r} is a built-in pipeline's" in err


def test_submit_from_a_file_and_a_bad_line_named(cli: Any, tmp_path: Path, capsys) -> None:
    good = tmp_path / "requests.jsonl"
    good.write_text('{"key": "a.md", "prompt": "review a"}\n\n{"key": "b.md", "prompt": "b"}\n')
    data = run_json(capsys, "submit", "--kind", "docs", "--file", str(good))
    assert data["context"]["keys"] == ["a.md", "b.md"] and data["status"] == "pending"
    assert data["submitted_at"].endswith("Z")

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": "a", "prompt": "x"}\n{"key": "a"}\n')
    code, out, err = run(capsys, "submit", "--kind", "docs", "--file", str(bad))
    assert (code, out) == (1, "")
    assert err == f'hookledger: error: {bad}:2: needs non-empty string "key" and "prompt"\n'


# --------------------------------------------------------------------------- ops


def _three_operations(client: Any) -> Ledger:
    ledger, clock = ledger_at(client)
    ledger.operations.register("batches/old", "alpha", {"n": 1})
    clock.advance(60)
    ledger.operations.register("batches/mid", "beta")
    clock.advance(60)
    ledger.operations.register("batches/new", "alpha")
    clock.advance(5)
    ledger.settle("batches/old", "succeeded", "reconcile")
    return ledger


def test_ops_list_filters_and_orders_newest_first(cli: Any, capsys) -> None:
    _three_operations(cli)

    everything = run_json(capsys, "ops", "list")
    assert [o["name"] for o in everything] == ["batches/new", "batches/mid", "batches/old"]
    old = everything[2]
    assert (old["status"], old["settled_by"]) == ("succeeded", "reconcile")
    assert (old["submitted_at"], old["settled_at"]) == (
        "2026-03-01T12:00:00Z",
        "2026-03-01T12:02:05Z",
    )
    alpha_pending = run_json(capsys, "ops", "list", "--status", "pending", "--kind", "alpha")
    assert [o["name"] for o in alpha_pending] == ["batches/new"]
    assert [o["name"] for o in run_json(capsys, "ops", "list", "--limit", "1")] == ["batches/new"]

    code, out, _ = run(capsys, "ops", "list", "--kind", "alpha")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == [
        "NAME",
        "APP",
        "KIND",
        "STATUS",
        "BY",
        "SUBMITTED",
        "SETTLED",
        "ATTEMPTS",
    ]
    assert [line.split()[0] for line in lines[1:]] == ["batches/new", "batches/old"]
    assert lines[1].index("alpha") == lines[0].index("KIND")  # aligned under its header
    # A kind no loaded app registered (`submit --kind`) belongs to no app.
    assert [o["app"] for o in alpha_pending] == [None]


def test_ops_queries_are_served_by_declared_indexes(cli: Any, capsys, monkeypatch) -> None:
    from tests.firestore_indexes import capture_queries, load_spec, missing_index

    with capture_queries(monkeypatch) as log:
        for argv in (
            ["ops", "list"],
            ["ops", "list", "--status", "pending"],
            ["ops", "list", "--kind", "alpha"],
            ["ops", "list", "--kind", "alpha", "--status", "failed"],
            ["status"],
        ):
            assert run(capsys, *argv)[0] == 0
    assert log.queries
    missing = [m for q in log.queries if (m := missing_index(q.shape, load_spec()))]
    assert missing == []


def test_ops_show_prints_every_stored_field(cli: Any, capsys) -> None:
    ledger = _three_operations(cli)
    assert ledger.operations.mark_stuck_alerted(
        "batches/mid", T0 + timedelta(hours=7), timedelta(hours=1)
    )

    data = run_json(capsys, "ops", "show", "mid")  # a bare id

    assert data["name"] == "batches/mid" and data["kind"] == "beta"
    assert data["stuck_alerted_at"] == "2026-03-01T19:00:00Z"
    assert data["submitted_at"] == "2026-03-01T12:01:00Z"
    assert set(stored(cli, "batches/mid") or {"missing"}) <= set(data)
    code, out, _ = run(capsys, "ops", "show", "batches/mid")
    assert code == 0 and "stuck_alerted_at" in out and "2026-03-01T19:00:00Z" in out

    code, out, err = run(capsys, "ops", "show", "nope")
    assert (code, out, err) == (1, "", "hookledger: error: operation nope not found\n")


# --------------------------------------------------------------------------- deliveries


def _deliveries(client: Any) -> Ledger:
    ledger, clock = ledger_at(client)
    ledger.deliveries.record("github", "d-1", "push", payload=b'{"ref": "refs/heads/main"}')
    ledger.deliveries.mark("github", "d-1", "done")
    clock.advance(10)
    ledger.deliveries.record("gemini", "msg_2", "batch.failed", payload=b'{"type": "x"}')
    ledger.deliveries.mark("gemini", "msg_2", "dead", error="batches/zz: Gemini answered 400")
    clock.advance(10)
    ledger.deliveries.record("github", "same", "push", payload=b"{}")
    ledger.deliveries.record("gemini", "same", "batch.succeeded", payload=b"{}")
    return ledger


def test_deliveries_list_and_show(cli: Any, capsys) -> None:
    _deliveries(cli)

    dead = run_json(capsys, "deliveries", "list", "--status", "dead")
    assert [(d["id"], d["last_error"]) for d in dead] == [
        ("gemini:msg_2", "batches/zz: Gemini answered 400")
    ]
    assert len(run_json(capsys, "deliveries", "list")) == 4

    shown = run_json(capsys, "deliveries", "show", "d-1")
    assert (shown["status"], shown["payload"]) == ("done", {"ref": "refs/heads/main"})
    assert shown["received_at"] == "2026-03-01T12:00:00Z"
    assert run_json(capsys, "deliveries", "show", "gemini:same")["event"] == "batch.succeeded"

    code, _, err = run(capsys, "deliveries", "show", "same")
    assert code == 1 and err.count("\n") == 1
    assert "ambiguous" in err and "github:same" in err and "gemini:same" in err
    code, out, _ = run(capsys, "deliveries", "list", "--status", "dead")
    assert out.splitlines()[0].split()[:4] == ["SOURCE", "DELIVERY", "EVENT", "STATUS"]
    assert "msg_2" in out.splitlines()[1]


def test_deliveries_say_how_a_github_delivery_came_back(cli: Any, capsys) -> None:
    """A GitHub delivery the sweep recovered: its row says how and after how long, `show`
    carries the recovery, and `deliveries recovered` lists every failed one."""
    ledger = _deliveries(cli)
    at = T0 - timedelta(minutes=5)
    failed = {"event": "push", "action": None, "github_delivery_id": 7, "repository_id": 1}
    for guid in ("d-1", "lost"):
        ledger.recoveries.open_once(
            Recovery(
                guid=guid,
                installation_id=None,
                failed_at=at,
                found_at=at,
                status="open",
                **failed,
            )
        )
    [opened] = [r for r in ledger.recoveries.open_page() if r.guid == "d-1"]
    ledger.recoveries.change(opened, via="redelivery", sweep_run="sweep-1")
    [redelivered] = ledger.recoveries.get_many(["d-1"]).values()
    ledger.recoveries.change(redelivered, status="recovered", recovered_at=T0, after_s=300.0)

    rows = {row["id"]: row for row in run_json(capsys, "deliveries", "list")}
    assert rows["github:d-1"]["recovered"] == "by redelivery after 300 s"
    assert rows["github:same"]["recovered"] is None  # never failed at GitHub
    assert rows["gemini:msg_2"]["recovered"] is None
    shown = run_json(capsys, "deliveries", "show", "github:d-1")["recovery"]
    assert (shown["status"], shown["via"], shown["sweep_run"]) == (
        "recovered",
        "redelivery",
        "sweep-1",
    )
    listed = run_json(capsys, "deliveries", "recovered")
    assert sorted((r["guid"], r["status"]) for r in listed) == [
        ("d-1", "recovered"),
        ("lost", "open"),
    ]
    code, out, _ = run(capsys, "deliveries", "recovered")
    assert code == 0 and out.splitlines()[0].split()[:3] == ["GUID", "EVENT", "STATUS"]


@pytest.fixture
def paused_queue(cloudtasks_emulator: Any) -> Iterator[tuple[Any, str]]:
    queue_id = f"cli-{uuid.uuid4().hex[:10]}"
    path = f"projects/demo-hookledger/locations/us-central1/queues/{queue_id}"
    client = make_client(cloudtasks_emulator.host)
    ensure_queue(client, path)
    client.pause_queue(name=path)
    os.environ.update(
        {"TASKS_QUEUE": queue_id, "WORKER_URL": "http://127.0.0.1:9/", "TASKS_SERVICE_ACCOUNT": ""}
    )
    runtime.reset()
    yield client, path
    client.delete_queue(name=path)


def test_replay_of_a_settled_operation_changes_nothing(
    cli: Any, simulator: Any, paused_queue: tuple[Any, str], capsys
) -> None:
    tasks, queue = paused_queue
    ledger, _ = ledger_at(cli)
    ledger.operations.register("batches/done1", "summaries")
    ledger.settle("batches/done1", "succeeded", "webhook")
    before = stored(cli, "batches/done1")
    assert before is not None and before["status"] == "succeeded"
    payload = json.dumps({"type": "batch.succeeded", "data": {"id": "batches/done1"}}).encode()
    ledger.deliveries.record("gemini", "msg_done", "batch.succeeded", payload=payload)
    ledger.deliveries.mark("gemini", "msg_done", "done")

    data = run_json(capsys, "deliveries", "replay", "gemini:msg_done")

    assert data["previous_status"] == "done" and data["status"] == "created"
    [task] = list(tasks.list_tasks(parent=queue))
    assert task.name == data["task"] != f"{queue}/tasks/{task_id_for('gemini', 'msg_done')}"
    full = tasks.get_task(request={"name": task.name, "response_view": task_types.Task.View.FULL})
    sealer = EnvelopeSealer([LOCAL_ENVELOPE_KEY])
    envelope = sealer.open(full.http_request.body)
    assert (envelope.source, envelope.event, envelope.delivery_id, envelope.body) == (
        "gemini",
        "batch.succeeded",
        "msg_done",
        payload,
    )
    assert ledger.deliveries.get("gemini", "msg_done").status == "queued"

    # The worker runs the replayed envelope: the ledger says already_settled, nothing moves.
    import shared.handlers.builtin  # noqa: F401  registers the batch handlers

    services = {"firestore": cli, "gemini": runtime.gemini()}
    worker = Worker(Config.from_env(), sealer=sealer, ledger=ledger, services=services.__getitem__)
    reply = worker.handle("POST", "/", {}, full.http_request.body)
    assert (reply.status, reply.body["status"]) == (200, "done")
    assert "already_settled" in reply.body["detail"]
    assert stored(cli, "batches/done1") == before
    assert ledger.deliveries.get("gemini", "msg_done").status == "done"


def test_replay_refuses_a_delivery_without_payload(
    cli: Any, paused_queue: tuple[Any, str], capsys
) -> None:
    tasks, queue = paused_queue
    ledger, _ = ledger_at(cli)
    ledger.deliveries.record("github", "big-1", "push", payload=None, payload_ref="payloads/p1")
    ledger.deliveries.mark("github", "big-1", "dead", error="claim expired")

    code, out, err = run(capsys, "deliveries", "replay", "big-1")

    assert (code, out) == (1, "")
    assert err == (
        "hookledger: error: delivery github:big-1 has no stored payload (only a claim "
        "reference payloads/p1); nothing to replay\n"
    )
    assert list(tasks.list_tasks(parent=queue)) == []
    assert ledger.deliveries.get("github", "big-1").status == "dead"


def test_a_second_replay_is_refused_while_the_first_is_queued_unless_forced(
    cli: Any, paused_queue: tuple[Any, str], capsys
) -> None:
    tasks, queue = paused_queue
    ledger, _ = ledger_at(cli)
    ledger.deliveries.record("github", "q-1", "push", payload=b'{"ref": "x"}')
    ledger.deliveries.mark("github", "q-1", "done")

    assert run_json(capsys, "deliveries", "replay", "github:q-1")["status"] == "created"
    code, _, err = run(capsys, "deliveries", "replay", "github:q-1")

    assert code == 1 and "still queued" in err and "--force" in err
    assert len(list(tasks.list_tasks(parent=queue))) == 1
    forced = run_json(capsys, "deliveries", "replay", "github:q-1", "--force")
    assert forced["status"] == "created" and forced["previous_status"] == "queued"
    replays = list(tasks.list_tasks(parent=queue))
    assert len(replays) == 2
    deadline = Config().task_dispatch_deadline_s  # below the worker's timeout
    assert [task.dispatch_deadline.total_seconds() for task in replays] == [deadline] * 2


# --------------------------------------------------------------------------- reconcile


def test_reconcile_once_settles_a_batch_whose_webhook_was_lost(
    cli: Any, simulator: Any, capsys
) -> None:
    assert run(capsys, "submit", "--kind", "summaries", "--prompt", "p")[0] == 0
    [batch] = simulator.control.batches()
    simulator.control.complete(batch["name"], state="succeeded", webhook="drop")

    report = run_json(capsys, "reconcile", "--once")

    assert (report["examined"], report["settled"], report["errors"]) == (1, 1, 0)
    settled = runtime.ledger().operations.get(batch["name"])
    assert (settled.status, settled.settled_by) == ("succeeded", "reconcile")
    code, out, _ = run(capsys, "reconcile", "--once")  # the table: nothing left to do
    fields = dict(([*line.split(None, 1), ""])[:2] for line in out.splitlines() if line.strip())
    assert code == 0 and (fields["examined"].strip(), fields["settled"].strip()) == ("0", "0")


def test_progress_bar_draws_only_for_more_than_a_handful() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream, min_total=5, width=10, monotonic=lambda: 0.0)
    bar("poll", 1, 3)
    assert stream.getvalue() == ""
    bar("poll", 0, 8)
    bar("poll", 4, 8)  # throttled: the clock did not move
    bar("poll", 8, 8)
    bar.close()
    assert stream.getvalue() == "\rpoll    [..........] 0/8\rpoll    [##########] 8/8\n"


# --------------------------------------------------------------------------- webhooks


@pytest.mark.slow
def test_webhooks_register_list_rotate(cli: Any, simulator: Any, capsys) -> None:
    code, out, err = run(
        capsys,
        "webhooks",
        "register",
        "--uri",
        "https://hooks.example/gemini",
        "--events",
        "batch.succeeded",
        "batch.failed",
    )
    assert code == 0, err
    secret = out.splitlines()[1].removeprefix("signing secret: ")
    assert secret.startswith("whsec_") and "not shown again" in out
    hook_id = out.splitlines()[0].split()[-1]
    assert secret not in err

    listed = run_json(capsys, "webhooks", "list")
    assert [(h["id"], h["state"], h["subscribed_events"]) for h in listed] == [
        (hook_id, "enabled", ["batch.succeeded", "batch.failed"])
    ]
    assert listed[0]["signing_secrets"][0]["truncated_secret"] == secret[-4:]

    requests.patch(
        f"{simulator.url}/v1beta/webhooks/{hook_id}",
        timeout=5,
        json={"state": "disabled_due_to_failed_deliveries"},
    ).raise_for_status()
    assert run_json(capsys, "webhooks", "list")[0]["disabled_due_to_failed_deliveries"] is True
    code, out, _ = run(capsys, "webhooks", "list")
    assert "DISABLED" in out.splitlines()[1]
    assert f"webhook {hook_id} is disabled_due_to_failed_deliveries" in out

    rotated = run_json(capsys, "webhooks", "rotate", hook_id)
    assert rotated["signing_secret"].startswith("whsec_") and rotated["signing_secret"] != secret

    code, out, err = run(capsys, "webhooks", "rotate", "no-such-hook")
    assert (code, out) == (1, "") and err.count("\n") == 1
    assert "no-such-hook" in err and "404" in err


# --------------------------------------------------------------------------- status


def test_status_counts_oldest_pending_and_alerts(cli: Any, capsys) -> None:
    ledger = _three_operations(cli)
    _deliveries(cli)
    assert ledger.operations.mark_stuck_alerted(
        "batches/mid", T0 + timedelta(hours=7), timedelta(hours=1)
    )

    data = run_json(capsys, "status")

    assert data["operations"] == {
        "pending": 2,
        "cancelled": 0,
        "expired": 0,
        "failed": 0,
        "succeeded": 1,
        "superseded": 0,
    }
    assert data["deliveries"] == {
        "queued": 2,
        "done": 1,
        "ignored": 0,
        "unresolved": 0,
        "dead": 1,
    }
    assert data["dead_deliveries"] == 1
    assert data["oldest_pending"]["name"] == "batches/mid"
    assert data["oldest_pending"]["submitted_at"] == "2026-03-01T12:01:00Z"
    assert (data["stuck_alerts"], [s["name"] for s in data["stuck"]]) == (1, ["batches/mid"])
    code, out, _ = run(capsys, "status")
    assert code == 0 and "oldest pending  batches/mid" in out and "stuck alerts  1" in out


def test_installations_lists_by_id_with_status_selection_and_repositories(cli: Any, capsys) -> None:
    ledger, clock = ledger_at(cli)
    for number, facts in (
        (12, {"suspended": True}),
        (3, {"repository_selection": "all", "repositories": None}),
        (7, {"repositories": ("octo-org/a", "octo-org/b")}),
    ):
        event = installation_event(number, **facts)
        ledger.installations.apply(event, received_at=clock(), delivery_id=f"d-{number}")

    listed = run_json(capsys, "installations")
    assert [(i["installation_id"], i["status"], i["repos"]) for i in listed] == [
        (3, "active", "all"),
        (7, "active", "2"),
        (12, "suspended", "1"),
    ]
    assert listed[1]["repositories"] == ["octo-org/a", "octo-org/b"]
    assert listed[1]["updated_at"] == "2026-03-01T12:00:00Z"
    suspended = run_json(capsys, "installations", "--status", "suspended")
    assert [(i["installation_id"], i["delivery_id"]) for i in suspended] == [(12, "d-12")]
    assert run_json(capsys, "installations", "--limit", "1", "--after", "3")[0]["account"] == (
        "octo-org"
    )
    code, out, _ = run(capsys, "installations")
    assert code == 0 and out.split()[:5] == ["ID", "ACCOUNT", "STATUS", "SELECTION", "REPOS"]


@pytest.mark.slow
def test_the_console_script_lists_operations_as_json(cli: Any) -> None:
    _three_operations(cli)
    done = subprocess.run(
        [str(SCRIPT), "ops", "list", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr
    assert [o["name"] for o in json.loads(done.stdout)] == [
        "batches/new",
        "batches/mid",
        "batches/old",
    ]


def test_a_stopped_emulator_is_one_line_naming_the_variable(capsys) -> None:
    from local.processes import free_port

    address = f"127.0.0.1:{free_port()}"
    os.environ.update(
        {"GOOGLE_CLOUD_PROJECT": "demo-hookledger", "FIRESTORE_EMULATOR_HOST": address}
    )
    runtime.reset()
    try:
        code, out, err = run(capsys, "ops", "show", "batches/x")
    finally:
        runtime.reset()
    assert (code, out) == (1, "") and err.count("\n") == 1
    assert f"FIRESTORE_EMULATOR_HOST={address}" in err and "make run" in err


# --------------------------------------------------------------------------- demo helpers


def test_demo_waits_for_a_truthy_answer_and_names_what_timed_out() -> None:
    now = [0.0]
    answers = iter([None, None, "ready"])
    found = wait_for(
        "x", lambda: next(answers), 5.0, 1.0, monotonic=lambda: now[0], sleep=_advance(now)
    )
    assert (found, now[0]) == ("ready", 2.0)

    now[0] = 0.0
    with pytest.raises(CliError, match="timed out after 3 s waiting for the batch"):
        wait_for("the batch", lambda: None, 3.0, 1.0, monotonic=lambda: now[0], sleep=_advance(now))
    assert now[0] == 3.0


def _advance(now: list[float]) -> Any:
    def sleep(seconds: float) -> None:
        now[0] += seconds

    return sleep


def test_demo_sees_an_operation_only_once_it_is_settled(cli: Any) -> None:
    ledger, _ = ledger_at(cli)
    assert settled_record(ledger, "batches/unknown") is None
    ledger.operations.register("batches/d1", "review")
    assert settled_record(ledger, "batches/d1") is None

    ledger.settle("batches/d1", "succeeded", "reconcile")

    record = settled_record(ledger, "batches/d1")
    assert record is not None and (record.status, record.settled_by) == ("succeeded", "reconcile")
