"""The whole pipeline as real processes: simulator, ingress and worker under functions-framework.

    with pipeline_stack(firestore_host, cloudtasks, {"GITHUB_COMMENTS": "true"}) as stack:
        stack.push(payload)

The worker requires the OIDC token the Cloud Tasks emulator mints (verified against its
JWKS); the simulator signs its completion webhooks to the ingress like Gemini.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import requests

from local.functions_server import start_function
from local.processes import Service, ServiceError, free_port, port_was_taken
from local.simulator.client import SimulatorClient, start_simulator
from shared.config import LOCAL_GITHUB_SECRET, LOCAL_TASKS_SERVICE_ACCOUNT
from shared.handoff.tasks import ensure_queue, make_client
from shared.signatures import sign_github

PROJECT = "demo-hookledger"
OWNER_REPO = "octo-org/handbook"
SHA = "0f1e2d3c4b5a69788796a5b4c3d2e1f001122334"
FILES = {
    "docs/intro.md": b"# Intro\n\nHookledger settles things.\n",
    "docs/howto.markdown": b"# How to\n\nRun it.\n",
}


@dataclass
class PipelineStack:
    ingress_url: str
    worker_url: str
    sim_url: str
    sim: SimulatorClient
    ingress: Service
    worker: Service
    # What the functions were started with (another function started beside them needs it).
    env: Mapping[str, str]

    def push(self, payload: bytes, delivery: str | None = None) -> requests.Response:
        """POST a push signed with the local GitHub secret, byte for byte."""
        headers = {
            "X-GitHub-Event": "push",
            "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "X-Hub-Signature-256": sign_github(LOCAL_GITHUB_SECRET, payload),
            "Content-Type": "application/json",
        }
        return requests.post(
            f"{self.ingress_url}/github", data=payload, headers=headers, timeout=10
        )

    def put_files(self, sha: str = SHA, files: Mapping[str, bytes] = FILES) -> None:
        for path, data in files.items():
            self.sim.put_file(*OWNER_REPO.split("/"), path, sha, data)

    def install_app(
        self, client_id: str, public_key: str, installation: int, files: Mapping[str, bytes] = FILES
    ) -> None:
        """A clean simulator with the App registered under the worker's key, installed on
        OWNER_REPO as `installation`, and `files` stored at SHA."""
        self.sim.reset()
        app = self.sim.register_github_app(client_id=client_id, public_key=public_key)
        owner = OWNER_REPO.split("/")[0]
        self.sim.install_github_app(app["id"], owner, repositories=[OWNER_REPO], id=installation)
        self.put_files(files=files)


def push_payload(sha: str = SHA, files: list[str] | None = None) -> bytes:
    """A push to the default branch adding `files` (default: FILES) and one non-Markdown file."""
    return json.dumps(
        {
            "ref": "refs/heads/main",
            "before": "0" * 40,
            "after": sha,
            "deleted": False,
            "repository": {"full_name": OWNER_REPO, "default_branch": "main"},
            # GitHub dedupes on the body (ingress): every call is a distinct delivery's body.
            "pusher": {"name": f"pusher-{uuid.uuid4().hex[:8]}"},
            "commits": [
                {
                    "id": sha,
                    "added": files if files is not None else list(FILES),
                    "modified": ["src/app.py"],
                    "removed": [],
                }
            ],
        }
    ).encode()


@contextmanager
def pipeline_stack(
    firestore_host: str, cloudtasks: Any, extra_env: Mapping[str, str] | None = None
) -> Iterator[PipelineStack]:
    """Start simulator, ingress and worker on free ports (own queue); stop them by PID.

    Each part must know the others' ports before it starts, and a parallel run may take
    one of them in between: on a port clash everything starts over on new ports.
    """
    queue_id = f"e2e-{uuid.uuid4().hex[:10]}"
    ensure_queue(
        make_client(cloudtasks.host),
        f"projects/{PROJECT}/locations/us-central1/queues/{queue_id}",
    )
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "FIRESTORE_EMULATOR_HOST": firestore_host,
        "CLOUD_TASKS_EMULATOR_HOST": cloudtasks.host,
        "TASKS_QUEUE": queue_id,
        "TASKS_SERVICE_ACCOUNT": LOCAL_TASKS_SERVICE_ACCOUNT,
        "OIDC_CERTS_URL": cloudtasks.jwks_url,
        "GEMINI_API_KEY": "sim-key",
        "HTTP_TIMEOUT_S": "5",
        "REVIEW_PATH": "docs",
        **(extra_env or {}),
    }
    started: list[Service] = []
    try:
        for attempt in range(1, 4):
            try:
                running = _start(env, (free_port(), free_port(), free_port()), started)
                break
            except ServiceError as exc:
                for service in reversed(started):
                    service.stop()
                started.clear()
                if attempt == 3 or not port_was_taken(exc):
                    raise
        yield running
    finally:
        for service in reversed(started):
            service.stop()


def _start(
    env: dict[str, str], ports: tuple[int, int, int], started: list[Service]
) -> PipelineStack:
    """Simulator, ingress and worker on `ports`, appended to `started` as each comes up."""
    ingress_port, worker_port, sim_port = ports
    ingress_url, worker_url = f"http://127.0.0.1:{ingress_port}", f"http://127.0.0.1:{worker_port}"
    sim_url = f"http://127.0.0.1:{sim_port}"
    env = {
        **env,
        "WORKER_URL": f"{worker_url}/",
        "OIDC_AUDIENCE": f"{worker_url}/",
        "GEMINI_BASE_URL": sim_url,
        "GITHUB_API_URL": sim_url,
    }
    started.append(start_simulator(sim_port, webhook_url=f"{ingress_url}/gemini"))
    started.append(start_function("ingress", ingress_port, env))
    started.append(start_function("worker", worker_port, env))
    return PipelineStack(
        ingress_url, worker_url, sim_url, SimulatorClient(sim_url), started[1], started[2], env
    )
