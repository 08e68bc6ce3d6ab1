"""The load driver: signed pushes into the ingress (their batches are completed by
local/chaos/sharing.py `Completer`).

Each push has its own sha and two Markdown files stored in the simulator's GitHub, so it
must end with exactly two reviews. Two ways to send one:

- `send` acts as GitHub plus an operator: a push answered 5xx or not answered at all is
  redelivered (same delivery id) until it is accepted or its deadline passes; the number
  of redeliveries is reported, never hidden;
- `send_as_github` has the simulator's GitHub send it, as GitHub does: one attempt, a
  10 s wait, never a retry, every attempt recorded as a delivery the GitHub delivery
  sweep lists; a failed one is recovered by the sweep or not at all.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import requests

from apps.review.kind import review_tag
from local.github_app import with_installation
from local.simulator.client import SimulatorClient
from shared.config import LOCAL_GITHUB_SECRET
from shared.signatures import github_headers

OWNER, REPO = "octo-org", "chaos"
FULL_REPO = f"{OWNER}/{REPO}"
PUSH_TIMEOUT_S = 10.0  # GitHub's own delivery timeout


@dataclass(frozen=True)
class Push:
    sha: str
    paths: tuple[str, ...]

    @property
    def tag(self) -> str:
        return review_tag(FULL_REPO, self.sha)

    def body(self, installation_id: int | None = None) -> dict[str, Any]:
        """The push event; with `installation_id`, as a GitHub App receives it."""
        commit = {"id": self.sha, "added": list(self.paths), "modified": [], "removed": []}
        body = {
            "ref": "refs/heads/main",
            "before": "0" * 40,
            "after": self.sha,
            "deleted": False,
            "repository": {"full_name": FULL_REPO, "default_branch": "main"},
            "commits": [commit],
        }
        return with_installation(body, installation_id)

    def payload(self, installation_id: int | None = None) -> bytes:
        """The push's webhook body, as bytes."""
        return json.dumps(self.body(installation_id)).encode()


@dataclass
class SendStats:
    """What the ingress answered: final status per delivery, and how many redeliveries."""

    statuses: dict[int, int] = field(default_factory=dict)
    redeliveries: int = 0
    lost: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, status: int) -> None:
        with self._lock:
            self.statuses[status] = self.statuses.get(status, 0) + 1

    def redelivered(self) -> None:
        with self._lock:
            self.redeliveries += 1

    def accepted(self) -> int:
        with self._lock:
            return sum(self.statuses.values())


class LoadDriver:
    def __init__(
        self,
        ingress_url: str,
        sim: SimulatorClient,
        rng: random.Random,
        installation_id: int | None = None,
    ) -> None:
        """`installation_id`: the GitHub App installation every push carries (None: token
        mode, as a personal token's webhook)."""
        self.ingress_url = ingress_url
        self.installation_id = installation_id
        self.sim = sim
        self.rng = rng
        self.stats = SendStats()
        self.http = requests.Session()

    def new_pushes(
        self, count: int, label: str, *, marked: Collection[int] = (), marker: str = ""
    ) -> list[Push]:
        """`count` pushes, each with its own sha and two Markdown files stored in the
        simulator; the files of the pushes at the indices in `marked` also hold `marker`
        (a request Gemini is told to refuse)."""
        pushes = []
        for index in range(count):
            sha = f"{self.rng.getrandbits(160):040x}"
            paths = (f"docs/{label}-{index}-a.md", f"docs/{label}-{index}-b.md")
            extra = f"\n{marker}\n" if index in marked else ""
            for path in paths:
                text = f"# {path}\n\nat {sha}\n{extra}"
                self.sim.put_file(OWNER, REPO, path, sha, text.encode())
            pushes.append(Push(sha, paths))
        return pushes

    def send(self, push: Push, copies: int = 1, deadline_s: float = 60.0) -> None:
        """Deliver `push` `copies` times, each under its own delivery id, redelivering on 5xx."""
        payload = push.payload(self.installation_id)
        for _ in range(copies):
            self._deliver(payload, str(uuid.uuid4()), deadline_s)

    def send_many(self, pushes: Iterable[Push], copies: int = 1, workers: int = 4) -> None:
        """`send` each push, `workers` at a time."""
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(lambda push: self.send(push, copies), pushes))

    def send_as_github(self, push: Push, guid: str | None = None) -> dict[str, Any]:
        """The simulator's GitHub sends `push` once, as GitHub does (as delivery `guid`, or
        a new one); the recorded delivery (`status_code` 0: no answer). Its answer is
        counted; nothing is ever resent."""
        delivery = self.sim.send_github_webhook(
            "push", push.body(self.installation_id), guid=guid or str(uuid.uuid4())
        )
        self.stats.count(int(delivery.get("status_code") or 0))
        return dict(delivery)

    def send_all(self, pushes: Iterable[Push], copies: int = 1) -> None:
        for push in pushes:
            self.send(push, copies)

    def _deliver(self, payload: bytes, delivery_id: str, deadline_s: float) -> None:
        headers = github_headers("push", payload, LOCAL_GITHUB_SECRET, delivery_id, agent="chaos")
        give_up = time.monotonic() + deadline_s
        while True:
            try:
                answer = self.http.post(
                    f"{self.ingress_url}/github",
                    data=payload,
                    headers=headers,
                    timeout=PUSH_TIMEOUT_S,
                )
                status: int | None = answer.status_code
            except requests.RequestException:
                status = None
            if status is not None and status < 500:
                self.stats.count(status)
                return
            if time.monotonic() >= give_up:
                self.stats.lost.append(delivery_id)
                return
            self.stats.redelivered()
            time.sleep(0.5)
