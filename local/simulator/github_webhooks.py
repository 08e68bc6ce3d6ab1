"""GitHub App webhooks as GitHub sends them: the signed request, one POST, and its outcome.

GitHub's "Webhook events and payloads" and "Validating webhook deliveries" pages: a
delivery is a POST of the JSON payload with `X-GitHub-Event`, `X-GitHub-Delivery` (a GUID),
`X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body keyed by the webhook secret>`
(and the legacy SHA-1 `X-Hub-Signature`), `X-GitHub-Hook-ID`,
`X-GitHub-Hook-Installation-Target-Type`/`-ID` (`integration` and the App's id for an App's
webhook) and a `GitHub-Hookshot/…` user agent. GitHub waits 10 s for an answer ("Handling
failed webhook deliveries") and does not retry on its own: one attempt per `post()`.
Redirects are not followed and no proxy or netrc of the environment is used.

The outcome is described as GitHub records it (`Answer`, see `hook_deliveries.py` for the
record): "Troubleshooting webhooks" names the errors `failed to connect to host` (the URL
does not resolve, or the network forbids the connection), `failed to connect to network`
(the server refused the connection), `timed out` (no answer within the timeout) and
`invalid HTTP response` (a 4xx or 5xx answer). For an answer the status reads `OK` for a
2xx, else `Invalid HTTP Response: <code>` (a 3xx too: redirects are not followed);
GitHub's webhook page shows "Invalid HTTP Response. 404", as quoted in
ExperiDev1/T1basic130118#5, the API's exact spelling is not documented. Without an
answer `status_code` is `NO_ANSWER` (0): GitHub does not document what it records then
(the schema's property examples put "failed to connect" beside 502); 0 keeps such a
delivery out of both `status=success` (200-399) and `status=failure` (400-599), so a
sweep that relies on that filter is caught here rather than in production. A connection
that opens and then breaks without an answer is `invalid HTTP response` (our reading: no
page covers it).

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
import socket
import uuid
from dataclasses import dataclass
from typing import Any

import requests
from urllib3.exceptions import NewConnectionError

from local.simulator.check_runs import APP, StoredRun, run_json
from local.simulator.github_objects import github_app, repository
from shared.clock import monotonic

HOOK_ID = 424242
SENDER = {"login": "octocat", "id": 583231, "node_id": "MDQ6VXNlcjU4MzIzMQ==", "type": "User"}
# The installation a delivery names when the caller names none.
DEFAULT_INSTALLATION_ID = 1


def signatures(secret: str, body: bytes) -> dict[str, str]:
    """`X-Hub-Signature-256` and the legacy `X-Hub-Signature` of `body`."""
    key = secret.encode()
    return {
        "X-Hub-Signature-256": "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest(),
        "X-Hub-Signature": "sha1=" + hmac.new(key, body, hashlib.sha1).hexdigest(),
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
        "app": github_app(base_url, APP),  # whole, as the check run's own `app`
        "pull_requests": [],
    }
    return {
        "action": action,
        "check_run": check_run,
        "repository": repository(base_url, f"{run.owner}/{run.repo}", head_branch),
        "installation": {
            "id": installation_id,
            "node_id": f"MDIzOkludGVncmF0aW9u{installation_id}",
        },
        "sender": {**SENDER, "login": sender} if sender else dict(SENDER),
    }


OK = "OK"
TIMED_OUT = "timed out"
REFUSED = "failed to connect to network"
NO_HOST = "failed to connect to host"
BROKEN = "invalid HTTP response"
NO_ANSWER = 0
MAX_ANSWER_CHARS = 65536


@dataclass(frozen=True)
class SignedRequest:
    """One delivery's request as sent, and as sent again by a redelivery."""

    guid: str
    headers: dict[str, str]
    body: bytes

    def payload(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Answer:
    """What one POST got: GitHub's `status` description, `status_code` (`NO_ANSWER`
    without an answer), `duration` in seconds, and the response's headers and body."""

    status: str
    status_code: int
    duration: float
    headers: dict[str, str] | None
    payload: str | None

    @property
    def ok(self) -> bool:
        return self.status == OK


def signed_request(
    secret: str, event: str, payload: dict[str, Any], guid: str | None = None
) -> SignedRequest:
    """The POST GitHub makes to deliver `event` with `payload` to an App's webhook."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    guid = guid or str(uuid.uuid4())
    headers = {
        "Accept": "*/*",
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/sim",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": guid,
        "X-GitHub-Hook-ID": str(HOOK_ID),
        "X-GitHub-Hook-Installation-Target-Type": "integration",
        "X-GitHub-Hook-Installation-Target-ID": str(APP["id"]),
        **signatures(secret, body),
    }
    return SignedRequest(guid, headers, body)


def post(url: str, request: SignedRequest, timeout_s: float) -> Answer:
    """One attempt: POST `request` to `url`, waiting at most `timeout_s` for the answer."""
    started = monotonic()
    with requests.Session() as session:
        session.trust_env = False  # GitHub's sender knows no local proxy or netrc
        try:
            response = session.post(
                url,
                data=request.body,
                headers=request.headers,
                timeout=timeout_s,
                allow_redirects=False,
            )
        except requests.RequestException as exc:
            return Answer(no_answer(exc), NO_ANSWER, _since(started), None, None)
    code = response.status_code
    return Answer(
        OK if 200 <= code < 300 else f"Invalid HTTP Response: {code}",
        code,
        _since(started),
        dict(response.headers),
        response.text[:MAX_ANSWER_CHARS],
    )


def no_answer(exc: requests.RequestException) -> str:
    """GitHub's description of an attempt that got no HTTP answer."""
    if isinstance(exc, requests.Timeout):
        return TIMED_OUT
    causes = _causes(exc)
    if any(isinstance(c, ConnectionRefusedError) for c in causes):
        return REFUSED
    if any(isinstance(c, NewConnectionError | socket.gaierror) for c in causes):
        return NO_HOST
    return BROKEN


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and what it wraps (requests → urllib3 → socket), as far as it is known."""
    found: list[BaseException] = []
    todo: list[object] = [exc]
    while todo and len(found) < 32:
        item = todo.pop()
        if not isinstance(item, BaseException) or any(item is f for f in found):
            continue
        found.append(item)
        todo += [getattr(item, "reason", None), item.__cause__, item.__context__, *item.args]
    return found


def _since(started: float) -> float:
    return round(monotonic() - started, 2)
