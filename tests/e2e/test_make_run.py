"""`make run` as a new user runs it: ready line, a push reviewed with its webhook dropped and
settled by the reconcile loop, and Ctrl-C leaving no process behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import uuid
from pathlib import Path

import pytest
import requests

from local.processes import free_port, port_accepts
from local.simulator.client import SimulatorClient
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]


def make_run_env(ports: dict[str, int]) -> dict[str, str]:
    """The environment that points make run, and the CLI, at these ports."""
    return {
        **os.environ,
        "FIRESTORE_EMULATOR_HOST": f"127.0.0.1:{ports['firestore']}",
        "CLOUD_TASKS_EMULATOR_HOST": f"127.0.0.1:{ports['tasks']}",
        "CLOUD_TASKS_JWKS_PORT": str(ports["jwks"]),
        "GEMINI_BASE_URL": f"http://127.0.0.1:{ports['sim']}",
        "GITHUB_API_URL": f"http://127.0.0.1:{ports['sim']}",
        "INGRESS_PORT": str(ports["ingress"]),
        "WORKER_PORT": str(ports["worker"]),
        "RECONCILE_PORT": str(ports["reconcile"]),
        "CONSOLE_PORT": str(ports["console"]),
    }


def _ports() -> dict[str, int]:
    names = ("firestore", "tasks", "jwks", "sim", "ingress", "worker", "reconcile", "console")
    return {name: free_port() for name in names}


@contextlib.contextmanager
def _make_run(ports: dict[str, int], extra: dict[str, str]):
    env = {
        **make_run_env(ports),
        "RECONCILE_EVERY_S": "2",
        "RECONCILE_GRACE_S": "1",
        "GITHUB_SWEEP_GRACE_S": "1",
        **extra,
    }
    process = subprocess.Popen(
        ["make", "--no-print-directory", "run"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True
    )
    reader.start()
    try:
        yield process, ports, lines
    finally:
        if process.poll() is None:
            # A failed test still stops the stack the way Ctrl-C does, so local.stack stops
            # the services it started (their own sessions); SIGKILL only if it hangs.
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


@pytest.fixture
def make_run():
    with _make_run(_ports(), {}) as running:
        yield running


def _wait(what, check, lines, timeout=90.0):
    """`wait_until`, failing with the stack's last lines of output (what it was doing)."""
    try:
        return wait_until(check, timeout, what, every=0.2)
    except pytest.fail.Exception as exc:
        pytest.fail(f"{exc}; make run's last lines:\n" + "".join(lines[-40:]), pytrace=False)


@pytest.mark.slow
def test_make_run_comes_up_settles_a_dropped_webhook_and_stops_cleanly(make_run):
    process, ports, lines = make_run
    ready = _wait(
        "hookledger ready",
        lambda: next((line for line in lines if "hookledger ready" in line), None),
        lines,
    )
    assert f"ingress http://127.0.0.1:{ports['ingress']}" in ready
    assert f"console http://127.0.0.1:{ports['console']}/" in ready
    # The overview's first load runs its count aggregations: generous on a loaded machine.
    console = requests.get(f"http://127.0.0.1:{ports['console']}/", timeout=60)
    assert console.status_code == 200 and "hookledger" in console.text.lower()

    demo = subprocess.run(
        [str(REPO / ".venv" / "bin" / "hookledger"), "demo", "--json"],
        env=make_run_env(ports),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert demo.returncode == 0, demo.stderr
    result = json.loads(demo.stdout)
    assert (result["status"], result["settled_by"]) == ("succeeded", "reconcile")  # webhook dropped
    assert len(result["reviews"]) == 2
    assert all(review.get("text") for review in result["reviews"])
    # As a GitHub App (make run's default): one check run, seen in_progress then completed.
    started, done = result["check_runs"]
    assert started["id"] == done["id"]
    assert (started["status"], done["status"]) == ("in_progress", "completed")
    assert done["conclusion"] and done["html_url"]
    assert done["details_url"] == (
        f"http://127.0.0.1:{ports['console']}/operations/{result['operation']}"
    )
    assert any("github     as App" in line for line in lines)  # the banner says where to look
    name = result["operation"]
    assert any(
        "operation settled" in line and name in line and "by=reconcile" in line for line in lines
    )
    assert any("github delivery accepted" in line for line in lines)  # the compact per-delivery log
    # make run traces every function into .local/traces: the operation's page draws the push's
    # trace, from the ingress to the reconcile check that settled it (its spans are stored
    # when the check ends, just after the settlement the demo saw).
    page = f"http://127.0.0.1:{ports['console']}/operations/{name}"

    def drawn_to_the_check() -> str | None:
        html = requests.get(page, timeout=60).text
        return html if 'data-name="reconcile.check"' in html else None

    html = _wait("the operation's trace drawn", drawn_to_the_check, lines)
    assert 'data-name="ingress.request"' in html and 'data-name="gemini.batches.create"' in html

    _a_push_github_failed_to_deliver_is_recovered_by_the_sweep(ports, lines)

    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    assert process.wait(60) in (
        0,
        -signal.SIGINT,
        2,
        130,
    )  # make passes the interrupt on its own way
    assert any("hookledger stopped" in line for line in lines)
    for name, port in ports.items():
        assert not port_accepts(port), f"{name} still listening on {port}"
    leftovers = subprocess.run(
        [
            "pgrep",
            "-f",
            f"port={ports['tasks']}|port={ports['firestore']}|--port {ports['sim']}|port={ports['ingress']}",
        ],
        capture_output=True,
        text=True,
    ).stdout.split()
    assert leftovers == []


def _a_push_github_failed_to_deliver_is_recovered_by_the_sweep(ports, lines) -> None:
    """GitHub (the simulator) sends a push where nothing answers, as during a deploy, and
    never retries: make run's sweep loop redelivers it (to the same dead address), then
    hands it to the worker itself; `deliveries recovered` says so."""
    sim = SimulatorClient(f"http://127.0.0.1:{ports['sim']}")
    guid = f"lost-{uuid.uuid4()}"
    payload = {
        "ref": "refs/heads/main",
        "after": uuid.uuid4().hex + "0" * 8,
        "repository": {"full_name": "octo-org/docs", "default_branch": "main"},
        "commits": [],
    }
    dead = f"http://127.0.0.1:{free_port()}/github"
    sent = sim.send_github_webhook("push", payload, url=dead, guid=guid)
    assert sent["status"] != "OK"

    def recovered() -> dict | None:
        listed = subprocess.run(
            [str(REPO / ".venv" / "bin" / "hookledger"), "deliveries", "recovered", "--json"],
            env=make_run_env(ports),
            capture_output=True,
            text=True,
            timeout=60,
        )
        found = [r for r in json.loads(listed.stdout or "[]") if r["guid"] == guid]
        return found[0] if found and found[0]["status"] == "recovered" else None

    recovery = _wait("the lost push recovered by the sweep", recovered, lines, timeout=120)
    assert recovery["via"] == "handoff"  # its redelivery went to the same dead address
    assert len(sim.github_hook_deliveries(guid=guid)) == 2  # the push, one redelivery


# An app of the user's own, outside the repository: it records the `issues` events it gets.
EXTERNAL_APP = """
from shared import api

app = api.App("triage", collections=["triaged"])


@app.handler("github", "issues")
def on_issue(event, ctx):
    issue = event.json()["issue"]
    ctx.results.update(
        "triaged", api.doc_id(event.delivery_id), lambda stored: {"number": issue["number"]}
    )
    return api.Done(f"triaged #{issue['number']}")
"""


@pytest.mark.slow
def test_an_app_outside_the_repository_gets_an_event_the_built_in_apps_ignore(tmp_path):
    from google.cloud import firestore

    from shared.config import LOCAL_GITHUB_SECRET
    from shared.signatures import sign_github

    (tmp_path / "triage_app.py").write_text(EXTERNAL_APP)
    extra = {
        "HOOKLEDGER_APPS": "apps.review,apps.articles,apps.classify,triage_app",
        "PYTHONPATH": str(tmp_path),
    }
    with _make_run(_ports(), extra) as (_, ports, lines):
        _wait("hookledger ready", lambda: any("hookledger ready" in ln for ln in lines), lines)
        # A body of its own: the ingress names a GitHub task by its body's digest.
        delivery = f"external-app-{uuid.uuid4().hex[:8]}"
        body = json.dumps({"action": "opened", "issue": {"number": 7}, "id": delivery}).encode()
        headers = {
            "X-GitHub-Event": "issues",
            "X-GitHub-Delivery": delivery,
            "X-Hub-Signature-256": sign_github(LOCAL_GITHUB_SECRET, body),
            "Content-Type": "application/json",
        }
        ingress = f"http://127.0.0.1:{ports['ingress']}/github"
        answer = requests.post(ingress, data=body, headers=headers, timeout=30)
        assert answer.status_code == 202, answer.text

        os.environ["FIRESTORE_EMULATOR_HOST"] = f"127.0.0.1:{ports['firestore']}"
        client = firestore.Client(project="demo-hookledger")
        from shared.documents import doc_id

        ref = client.collection("triaged").document(doc_id(delivery))

        def recorded():
            found = ref.get(timeout=10)
            return found.to_dict() if found.exists else None

        assert _wait("the external app's handler ran", recorded, lines) == {"number": 7}
        record = client.collection("deliveries").document(f"github:{delivery}")

        def status():
            return (record.get(timeout=10).to_dict() or {}).get("status")

        assert _wait("the delivery done", lambda: status() == "done", lines)
