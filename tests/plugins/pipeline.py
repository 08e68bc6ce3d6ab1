"""The whole pipeline as real processes: simulator, ingress and worker under functions-framework.

    with pipeline_stack(firestore_host, cloudtasks, {"GITHUB_COMMENTS": "true"}) as stack:
        stack.push(payload)

The worker requires the OIDC token the Cloud Tasks emulator mints (verified against its
JWKS); the simulator signs its completion webhooks to the ingress like Gemini. The processes
are started by local/stack.py's launcher, beside the session's emulators.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import requests

from hookledger.sending import github_headers
from local.processes import Service
from local.simulator.client import SimulatorClient
from local.stack import Ports, fresh_ports, start_on_fresh_ports, start_pipeline
from shared.config import LOCAL_GITHUB_SECRET, LOCAL_TASKS_SERVICE_ACCOUNT
from shared.handoff.tasks import ensure_queue, make_client

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
    services: list[Service] = field(default_factory=list)  # the simulator's first

    def push(self, payload: bytes, delivery: str | None = None) -> requests.Response:
        """POST a push signed with the local GitHub secret, byte for byte."""
        headers = github_headers(
            "push", payload, LOCAL_GITHUB_SECRET, delivery or str(uuid.uuid4())
        )
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
    emulators = {
        "firestore": int(firestore_host.rsplit(":", 1)[1]),
        "tasks": int(cloudtasks.host.rsplit(":", 1)[1]),
        "jwks": urlparse(cloudtasks.jwks_url).port or 0,
        "reconcile": 0,  # not started: a test starts its own beside them
        "console": 0,
    }
    running = start_on_fresh_ports(lambda services: _start(env, fresh_ports(**emulators), services))
    try:
        yield running
    finally:
        for service in reversed(running.services):
            service.stop()


def _start(env: dict[str, str], ports: Ports, services: list[Service]) -> PipelineStack:
    """Simulator, ingress and worker on `ports`, appended to `services` as each comes up."""
    ingress_url = f"http://127.0.0.1:{ports.ingress}"
    worker_url = f"http://127.0.0.1:{ports.worker}"
    sim_url = f"http://127.0.0.1:{ports.simulator}"
    env = {
        **env,
        "WORKER_URL": f"{worker_url}/",
        "GEMINI_BASE_URL": sim_url,
        "GITHUB_API_URL": sim_url,
    }
    start_pipeline(ports, env, services, functions=("ingress", "worker"))
    sim = SimulatorClient(sim_url)
    return PipelineStack(
        ingress_url, worker_url, sim_url, sim, services[1], services[2], env, services
    )
