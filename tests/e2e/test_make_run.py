"""`make run` as a new user runs it: ready line, a push reviewed with its webhook dropped and
settled by the reconcile loop, and Ctrl-C leaving no process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests

from local.processes import free_port, port_accepts
from shared.config import LOCAL_GITHUB_SECRET
from shared.signatures import sign_github

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def make_run():
    ports = {name: free_port() for name in
             ("firestore", "tasks", "jwks", "sim", "ingress", "worker", "reconcile")}
    env = {
        **os.environ,
        "FIRESTORE_EMULATOR_HOST": f"127.0.0.1:{ports['firestore']}",
        "CLOUD_TASKS_EMULATOR_HOST": f"127.0.0.1:{ports['tasks']}",
        "CLOUD_TASKS_JWKS_PORT": str(ports["jwks"]),
        "GEMINI_BASE_URL": f"http://127.0.0.1:{ports['sim']}",
        "INGRESS_PORT": str(ports["ingress"]),
        "WORKER_PORT": str(ports["worker"]),
        "RECONCILE_PORT": str(ports["reconcile"]),
        "RECONCILE_EVERY_S": "2",
        "RECONCILE_GRACE_S": "1",
    }
    process = subprocess.Popen(["make", "--no-print-directory", "run"], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")),
                              daemon=True)
    reader.start()
    try:
        yield process, ports, lines
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def _wait(what, check, timeout=90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_make_run_comes_up_settles_a_dropped_webhook_and_stops_cleanly(make_run):
    process, ports, lines = make_run
    ready = _wait("hookledger ready", lambda: next((line for line in lines if "hookledger ready" in line), None))
    assert f"ingress http://127.0.0.1:{ports['ingress']}" in ready

    sim, sha = f"http://127.0.0.1:{ports['sim']}", uuid.uuid4().hex + "00000000"
    for path in ("docs/a.md", "docs/b.md"):
        requests.put(f"{sim}/_sim/github/hookledger/demo/contents/{path}?ref={sha}",
                     data=b"# Title\n", timeout=5).raise_for_status()
    body = json.dumps({"ref": "refs/heads/main", "after": sha,
                       "repository": {"full_name": "hookledger/demo", "default_branch": "main"},
                       "commits": [{"added": ["docs/a.md", "docs/b.md"], "modified": [], "removed": []}]}).encode()
    answer = requests.post(f"http://127.0.0.1:{ports['ingress']}/github", data=body, timeout=5, headers={
        "X-GitHub-Event": "push", "X-GitHub-Delivery": "make-run-1",
        "X-Hub-Signature-256": sign_github(LOCAL_GITHUB_SECRET, body)})
    assert answer.status_code == 202
    name = _wait("the batch", lambda: (requests.get(f"{sim}/_sim/batches", timeout=5).json()["batches"] or [{}])[0].get("name"))
    requests.post(f"{sim}/_sim/operations/{name}:complete",
                  json={"state": "succeeded", "webhook": "drop"}, timeout=5).raise_for_status()

    settled = _wait("the reconcile loop to settle it",
                    lambda: next((line for line in lines if "operation settled" in line and name in line), None))
    assert "by=reconcile" in settled
    assert any("delivery_id=make-run-1" in line for line in lines)  # the compact per-delivery log

    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    assert process.wait(60) in (0, -signal.SIGINT, 2, 130)  # make passes the interrupt on its own way
    assert any("hookledger stopped" in line for line in lines)
    for name, port in ports.items():
        assert not port_accepts(port), f"{name} still listening on {port}"
    leftovers = subprocess.run(["pgrep", "-f", f"port={ports['tasks']}|port={ports['firestore']}|--port {ports['sim']}|port={ports['ingress']}"],
                               capture_output=True, text=True).stdout.split()
    assert leftovers == []
