"""GitHub App webhooks the simulator sends: `check_run` `rerequested`, signed like GitHub.

GitHub's "Webhook events and payloads" and "Validating webhook deliveries" pages: a
delivery is a POST of the JSON payload with `X-GitHub-Event`, `X-GitHub-Delivery` (a GUID),
`X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body keyed by the webhook secret>`
(and the legacy SHA-1 `X-Hub-Signature`), `X-GitHub-Hook-ID`,
`X-GitHub-Hook-Installation-Target-Type`/`-ID` (`integration` and the App's id for an App's
webhook) and a `GitHub-Hookshot/…` user agent. GitHub waits 10 s for an answer and does
not retry on its own: one attempt, its outcome returned to the caller.

The HMAC is computed here with `hmac` directly, not with hookledger's own signer, so a
test that sends this to the ingress cross-checks the two.

`check_run` payload ("check_run" in "Webhook events and payloads"): `action`, the
`check_run` (as the REST API shows it, its `check_suite` with `head_branch` and
`head_sha`), `repository`, `installation` `{id, node_id}` and `sender`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
import zlib
from dataclasses import asdict, dataclass
from typing import Any

import requests

from local.simulator.check_runs import APP, StoredRun, run_json

HOOK_ID = 424242
SENDER = {"login": "octocat", "id": 583231, "node_id": "MDQ6VXNlcjU4MzIzMQ==", "type": "User"}
# The installation a delivery names when the caller names none.
DEFAULT_INSTALLATION_ID = 1


@dataclass(frozen=True)
class Delivery:
    """One webhook POST and its outcome (`status` None: no answer, see `error`)."""

    delivery_id: str
    event: str
    action: str
    target: str
    status: int | None
    ok: bool
    error: str | None
    answer: str


def signatures(secret: str, body: bytes) -> dict[str, str]:
    """`X-Hub-Signature-256` and the legacy `X-Hub-Signature` of `body`."""
    key = secret.encode()
    return {
        "X-Hub-Signature-256": "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest(),
        "X-Hub-Signature": "sha1=" + hmac.new(key, body, hashlib.sha1).hexdigest(),
    }


def repository_json(owner: str, repo: str, default_branch: str) -> dict[str, Any]:
    """The `repository` object of a payload (ids derived from the name: stable per repo)."""
    full = f"{owner}/{repo}"
    return {
        "id": zlib.crc32(full.lower().encode()),
        "node_id": f"R_sim{zlib.crc32(full.encode())}",
        "name": repo,
        "full_name": full,
        "private": False,
        "owner": {"login": owner, "id": zlib.crc32(owner.lower().encode()), "type": "Organization"},
        "html_url": f"https://github.com/{full}",
        "default_branch": default_branch,
    }


def check_run_payload(
    base_url: str,
    run: StoredRun,
    action: str,
    *,
    installation_id: int,
    head_branch: str,
    sender: str | None = None,
) -> dict[str, Any]:
    """A `check_run` event for `run` with `action` (e.g. `rerequested`)."""
    check_run = run_json(base_url, run)
    check_run["check_suite"] = {
        "id": run.suite_id,
        "node_id": f"CS_sim{run.suite_id}",
        "head_branch": head_branch,
        "head_sha": run.head_sha,
        "status": "completed" if run.status == "completed" else "in_progress",
        "conclusion": run.conclusion,
        "app": dict(APP),
        "pull_requests": [],
    }
    return {
        "action": action,
        "check_run": check_run,
        "repository": repository_json(run.owner, run.repo, head_branch),
        "installation": {
            "id": installation_id,
            "node_id": f"MDIzOkludGVncmF0aW9u{installation_id}",
        },
        "sender": {**SENDER, "login": sender} if sender else dict(SENDER),
    }


def send(
    url: str,
    secret: str,
    event: str,
    payload: dict[str, Any],
    *,
    timeout_s: float = 10.0,
) -> Delivery:
    """POST `payload` as GitHub delivers event `event` to an App's webhook; one attempt."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    delivery_id = str(uuid.uuid4())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/sim",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id,
        "X-GitHub-Hook-ID": str(HOOK_ID),
        "X-GitHub-Hook-Installation-Target-Type": "integration",
        "X-GitHub-Hook-Installation-Target-ID": str(APP["id"]),
        **signatures(secret, body),
    }
    action = str(payload.get("action") or "")
    try:
        response = requests.post(url, data=body, headers=headers, timeout=timeout_s)
    except requests.RequestException as exc:
        error = f"{type(exc).__name__}: {exc}"
        return Delivery(delivery_id, event, action, url, None, False, error, "")
    ok = 200 <= response.status_code < 300
    return Delivery(
        delivery_id,
        event,
        action,
        url,
        response.status_code,
        ok,
        None if ok else f"HTTP {response.status_code}",
        response.text[:2000],
    )


def delivery_json(delivery: Delivery) -> dict[str, Any]:
    return asdict(delivery)
