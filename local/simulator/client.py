"""Start the simulator as a child process and drive its control API (tests, `make run`).

`start_simulator(port, webhook_url=…)` returns a `Service` once it printed `listening`;
`SimulatorClient(url)` wraps `/_sim/...` (its Gemini job calls in `gemini_client.py`, its
GitHub seeding, stubs and request log in `github_client.py`). Every call has a timeout and raises
`requests.HTTPError` on a non-2xx answer (the body names what was wrong).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import requests

from local.processes import Service, printed, start
from local.simulator.gemini_client import GeminiJobsControl
from local.simulator.github_client import GitHubObjectsControl
from shared.config import LOCAL_GEMINI_SECRET

TIMEOUT_S = 10.0
# A call that makes GitHub send a webhook waits for it: GitHub's own wait (10 s) and more.
SEND_TIMEOUT_S = 60.0


def start_simulator(
    port: int,
    host: str = "127.0.0.1",
    *,
    webhook_url: str = "",
    webhook_secret: str = LOCAL_GEMINI_SECRET,
    github_webhook_url: str = "",
    extra_args: Sequence[str] = (),
    echo: Callable[[str, str], None] | None = None,
    timeout: float = 30.0,
) -> Service:
    """`python -m local.simulator` on `host:port`, ready when it printed `listening`;
    `github_webhook_url`: where its GitHub App webhooks go (none by default)."""
    argv = [
        sys.executable,
        "-m",
        "local.simulator",
        "--host",
        host,
        "--port",
        str(port),
        "--webhook-url",
        webhook_url,
        "--webhook-secret",
        webhook_secret,
        *(["--github-webhook-url", github_webhook_url] if github_webhook_url else []),
        *extra_args,
    ]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return start(
        "simulator",
        argv,
        env=os.environ.copy(),
        cwd=root,
        ready=printed("listening"),
        timeout=timeout,
        echo=echo,
    )


class SimulatorClient(GeminiJobsControl, GitHubObjectsControl):
    """The control API of a running simulator at `url` (no trailing slash). Gemini's jobs,
    quotas and create refusals through the methods of `GeminiJobsControl`
    (gemini_client.py): `complete`, `set_interaction_status`, `delete_batch`,
    `create_operation`, `set_quotas`, `quotas`, `refuse_creates`, `stop_refusing_creates`,
    `create_refusal_state`, `poison`, `clear_poison`, `poison_state`, `deliveries`,
    `batches`; the simulated GitHub's issues, pull requests, stubs and request log through
    those of `GitHubObjectsControl` (github_client.py): `seed_issue`, `seed_pull`,
    `seed_issue_comment`, `stub_github`, `github_stubs`, `clear_github_stubs`,
    `github_requests`."""

    def __init__(self, url: str, session: requests.Session | None = None) -> None:
        self.url = url.rstrip("/")
        self.http = session or requests.Session()

    def _call(self, method: str, path: str, *, timeout: float = TIMEOUT_S, **kwargs: Any) -> Any:
        response = self.http.request(method, self.url + path, timeout=timeout, **kwargs)
        if not response.ok:
            raise requests.HTTPError(
                f"{method} {path} answered {response.status_code}: {response.text}",
                response=response,
            )
        return response.json()

    def reset(self) -> None:
        self._call("POST", "/_sim/reset")

    def set_faults(
        self,
        get_error_rate: float,
        status: int = 503,
        latency_ms: int = 0,
        seed: int | None = None,
    ) -> None:
        body = {"get_error_rate": get_error_rate, "status": status, "latency_ms": latency_ms}
        if seed is not None:
            body["seed"] = seed
        self._call("POST", "/_sim/faults", json=body)

    def set_fault_model(self, **faults: Any) -> dict[str, Any]:
        """Merge `faults` into the fault model; returns the full state `faults()` reports.

        Keys as `POST /_sim/faults` takes them (see `local/simulator/control.py`), e.g.
        `set_fault_model(error_rates={429: 0.1, 503: 0.1}, timeout_rate=0.05,
        latency_ms=50, latency_jitter_ms=30, webhook_drop_rate=0.3, webhook_copies=3,
        early_webhook=True, seed=7)`. An unknown key or a bad value raises
        `requests.HTTPError` and changes nothing.
        """
        return dict(self._call("POST", "/_sim/faults", json=faults))

    def faults(self) -> dict[str, Any]:
        """The full fault state: every knob, `github_comment_post`, and `injected` counts."""
        return dict(self._call("GET", "/_sim/faults"))

    def put_file(self, owner: str, repo: str, path: str, ref: str, data: bytes) -> str:
        """Store a file for the Contents API; returns its git blob sha."""
        url = f"/_sim/github/{owner}/{repo}/contents/{path}"
        return str(self._call("PUT", url, params={"ref": ref}, data=data)["sha"])

    def github_fault(self, path: str, status: int = 502, count: int = 1) -> None:
        body = {"path": path, "status": status, "count": count}
        self._call("POST", "/_sim/github/faults", json=body)

    def github_latency(self, latency_ms: int) -> None:
        """Every GitHub contents GET waits `latency_ms` first (0: none)."""
        self._call("POST", "/_sim/github/latency", json={"latency_ms": latency_ms})

    def set_comment_post_fault(
        self, fail: int = 1, status: int = 502, *, after_create: bool = False
    ) -> None:
        """The next `fail` comment posts answer `status`; after storing it when `after_create`."""
        fault = {"fail": fail, "status": status, "after_create": after_create}
        self._call("POST", "/_sim/faults", json={"github_comment_post": fault})

    def github_comments(self) -> dict[str, Any]:
        """`{"comments": [...], "commits": [{"repo", "sha", "posts", "comments", "deletes"}]}`."""
        return dict(self._call("GET", "/_sim/github/comments"))

    def set_check_run_write_fault(
        self, fail: int = 1, status: int = 502, *, after_apply: bool = False
    ) -> None:
        """The next `fail` check-run writes answer `status`; after applying them when
        `after_apply` (GitHub did the write, the answer was lost)."""
        fault = {"fail": fail, "status": status, "after_apply": after_apply}
        self._call("POST", "/_sim/faults", json={"github_check_run_write": fault})

    def check_runs(self, repo: str | None = None, sha: str | None = None) -> list[dict[str, Any]]:
        """Every check run (of `repo` "owner/name", of commit `sha`), oldest first: the
        API's shape plus `repo`, `annotations` and `writes` (`{method, annotations, status,
        conclusion}` per applied write)."""
        params = {k: v for k, v in (("repo", repo), ("sha", sha)) if v}
        return list(self._call("GET", "/_sim/github/check-runs", params=params)["check_runs"])

    def rerequest_check_run(self, check_run_id: int, **options: Any) -> dict[str, Any]:
        """Send the App's `check_run` `rerequested` webhook for run `check_run_id`, as GitHub
        does when someone presses "Re-run"; `options` may hold `url` (default: the
        simulator's --github-webhook-url), `installation_id`, `head_branch`, `sender`.
        Returns the delivery: `{delivery_id, event, action, target, status, ok, error,
        answer, hook_delivery_id}` (recorded like every App webhook delivery)."""
        path = f"/_sim/github/check-runs/{int(check_run_id)}/rerequest"
        return dict(self._call("POST", path, json=options, timeout=SEND_TIMEOUT_S))

    def send_github_webhook(
        self,
        event: str,
        payload: dict[str, Any],
        *,
        url: str | None = None,
        guid: str | None = None,
    ) -> dict[str, Any]:
        """Make GitHub send the App's webhook `event` with `payload` (to `url`, default the
        simulator's --github-webhook-url; `guid` as `X-GitHub-Delivery`, default a new one);
        once the attempt is over, the recorded delivery as `GET /app/hook/deliveries/{id}`
        shows it (`status` "OK", "Invalid HTTP Response: 503", "timed out", ...)."""
        body: dict[str, Any] = {"event": event, "payload": payload}
        if url is not None:
            body["url"] = url
        if guid is not None:
            body["guid"] = guid
        return dict(self._call("POST", "/_sim/github/webhooks", json=body, timeout=SEND_TIMEOUT_S))

    def github_hook_deliveries(self, guid: str | None = None) -> list[dict[str, Any]]:
        """Every recorded App webhook delivery (of `guid`), newest first, without a JWT: the
        full delivery plus `expired` (past GitHub's 3 days) and `held` (throttled, unsent)."""
        params = {"guid": guid} if guid else None
        found = self._call("GET", "/_sim/github/webhooks/deliveries", params=params)
        return list(found["deliveries"])

    def wait_for_github_hook_deliveries(
        self, guid: str, count: int = 1, timeout_s: float = 10.0
    ) -> list[dict[str, Any]]:
        """The deliveries of `guid`, newest first, once at least `count` are recorded (a
        redelivery is sent in the background); `requests.HTTPError` (504) after
        `timeout_s`."""
        body: dict[str, Any] = {"guid": guid, "count": count, "timeout_s": timeout_s}
        path = "/_sim/github/webhooks/deliveries/wait"
        found = self._call("POST", path, json=body, timeout=timeout_s + TIMEOUT_S)
        return list(found["deliveries"])

    def age_github_hook_deliveries(self, seconds: float, ids: list[int] | None = None) -> int:
        """Move `delivered_at` of the deliveries `ids` (default all) `seconds` back, e.g.
        past GitHub's 3 days; how many were moved."""
        body: dict[str, Any] = {"seconds": seconds}
        if ids is not None:
            body["ids"] = ids
        return int(self._call("POST", "/_sim/github/webhooks/deliveries/age", json=body)["aged"])

    def throttle_github_webhooks(self, count: int = 0, seconds: float = 0.0) -> dict[str, Any]:
        """Throttle the next `count` App webhook sends and every send for `seconds` from now
        (recorded with `throttled_at`, not sent); `(0, 0)` turns it off. `{"count", "until"}`."""
        body = {"count": count, "seconds": seconds}
        return dict(self._call("POST", "/_sim/github/webhooks/throttle", json=body))

    def release_throttled_github_webhooks(self) -> list[dict[str, Any]]:
        """Send the held (throttled) deliveries now; the updated deliveries."""
        path = "/_sim/github/webhooks/release"
        return list(self._call("POST", path, timeout=SEND_TIMEOUT_S)["deliveries"])

    def register_github_app(self, **fields: Any) -> dict[str, Any]:
        """Register a GitHub App (`app_id`, `client_id`, `public_key`, `slug`, each optional):
        `{"id", "client_id", "slug"}`, plus `private_key` (PEM) when the simulator made it."""
        return dict(self._call("POST", "/_sim/github/apps", json=fields))

    def install_github_app(
        self,
        app_id: int,
        account: str,
        repositories: list[str] | None = None,
        permissions: dict[str, str] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """Install App `app_id` on `account` (all its repositories unless `repositories`)."""
        body: dict[str, Any] = {"app_id": app_id, "account": account, **extra}
        if repositories is not None:
            body["repositories"] = repositories
        if permissions is not None:
            body["permissions"] = permissions
        return dict(self._call("POST", "/_sim/github/installations", json=body))

    def change_installation(self, installation_id: int, **changes: Any) -> dict[str, Any]:
        """`suspended`, `deleted`, `repositories`, `permissions` of an installation."""
        path = f"/_sim/github/installations/{installation_id}"
        return dict(self._call("PATCH", path, json=changes))

    def github_tokens(
        self,
        *,
        lifetime_s: int | None = None,
        expire: bool = False,
        installation_id: int | None = None,
    ) -> dict[str, Any]:
        """Set the lifetime of tokens issued from now on; with `expire`, end the issued ones
        (of `installation_id`, or all) now."""
        body: dict[str, Any] = {"expire": expire}
        if lifetime_s is not None:
            body["lifetime_s"] = lifetime_s
        if installation_id is not None:
            body["installation_id"] = installation_id
        return dict(self._call("POST", "/_sim/github/tokens", json=body))

    def github_apps(self) -> dict[str, Any]:
        """Apps, installations and `tokens_issued` / `tokens_live`."""
        return dict(self._call("GET", "/_sim/github/apps"))

    def set_github_endpoint_limit(self, **limit: Any) -> dict[str, Any]:
        """Turn GitHub's secondary per-endpoint limit on (`enabled=False`: off), e.g.
        `rest_points_per_minute=900, graphql_points_per_minute=2000, status=403`; returns
        the limit's state as `faults()` reports it."""
        state = self._call("POST", "/_sim/faults", json={"github_endpoint_limit": limit})
        return dict(state["github_endpoint_limit"])

    def github_errors(self, status: int = 503, count: int = 1) -> dict[str, Any]:
        """The next `count` GitHub API requests, any route, answer `status` (500..599);
        returns the fault's state `{"count" (left), "status", "injected"}`."""
        body = {"github_errors": {"count": count, "status": status}}
        return dict(self._call("POST", "/_sim/faults", json=body)["github_errors"])

    def github_rate_limited(
        self, count: int = 1, status: int = 403, retry_after_s: int = 60
    ) -> dict[str, Any]:
        """The next `count` GitHub requests answer GitHub's secondary rate limit (`status`
        403 or 429, `retry-after: retry_after_s`); returns that limit's state."""
        limit = {"count": count, "status": status, "retry_after_s": retry_after_s}
        state = self._call("POST", "/_sim/faults", json={"github_secondary_limit": limit})
        return dict(state["github_secondary_limit"])

    def github_reads(self, repo: str | None = None) -> list[dict[str, Any]]:
        """The GitHub requests that read files, oldest first, from `requests_log()`: each
        GraphQL query (`POST /graphql`) and each Contents GET (of `repo` only, when given;
        a GraphQL query names no repository in its path and is always kept)."""
        contents = f"/repos/{repo}/contents/" if repo else "/contents/"
        return [
            r
            for r in self.requests_log()
            if (r["method"], r["path"]) == ("POST", "/graphql")
            or (r["method"] == "GET" and contents in r["path"] and r["path"].startswith("/repos/"))
        ]

    def requests_log(self) -> list[dict[str, Any]]:
        """The last ~1000 GitHub and Gemini requests, oldest first: `{method, path, query}`,
        and for a GitHub GraphQL query its `files` ("REF:PATH", in order)."""
        return list(self._call("GET", "/_sim/requests")["requests"])
