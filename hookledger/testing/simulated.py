"""GitHub and Gemini at the simulator, as `Stack` lets a test shape them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hookledger.testing.accounts import EXAMPLES_INSTALLATION
from hookledger.testing.running import TIMEOUT_S, Running
from hookledger.testing.waiting import wait_for


class Simulated(Running):
    """The simulator part of `Stack`: files, batches and GitHub's answers."""

    def put_file(self, repo: str, path: str, sha: str, data: bytes) -> str:
        """Store `data` as `path` of `repo` ("owner/name") at commit `sha`; its blob sha."""
        owner, _, name = repo.partition("/")
        if not owner or not name:
            raise ValueError(f"repo must be 'owner/name', got {repo!r}")
        return self.sim.put_file(owner, name, path, sha, data)

    def batches(self) -> list[dict[str, Any]]:
        """Every batch the simulator holds, each with its requests' `keys`."""
        return [_with_keys(batch) for batch in self.sim.batches()]

    def wait_batch(self, display_name_prefix: str, *, timeout_s: float = 60.0) -> dict[str, Any]:
        """The first batch whose display name starts with the prefix, once created."""

        def found() -> dict[str, Any] | None:
            return next(
                (b for b in self.batches() if b["display_name"].startswith(display_name_prefix)),
                None,
            )

        return wait_for(
            found,
            timeout_s=timeout_s,
            what=lambda: (
                f"a batch named {display_name_prefix}…; the simulator holds "
                f"{[b['display_name'] for b in self.batches()]}"
            ),
        )

    def complete_batch(
        self, name: str, *, rows: Any = None, webhook: str = "send"
    ) -> dict[str, Any]:
        """Batch `name` succeeds (`rows`: per-request results, local/simulator/control.py);
        `webhook`: "send", "drop" (reconcile must find it) or "duplicate"."""
        extra = {} if rows is None else {"rows": rows}
        return self.sim.complete(name, "succeeded", _webhook(webhook), **extra)

    def fail_batch(self, name: str, *, webhook: str = "send") -> dict[str, Any]:
        """Batch `name` fails as a whole."""
        error = {"code": 13, "message": "the batch failed (hookledger test kit)"}
        return self.sim.complete(name, "failed", _webhook(webhook), error=error)

    def github_errors(self, status: int = 503, times: int = 1) -> dict[str, Any]:
        """GitHub answers `status` (500..599) to the next `times` calls, whatever the route."""
        return self.sim.github_errors(status=status, count=times)

    def github_api(self, installation_id: int = EXAMPLES_INSTALLATION) -> Any:
        """GitHub at the simulator as the kit's App acting for `installation_id` (default:
        Codertocat's, 1) sees it, to read what the functions did: a handler's
        `ctx.github_api` (`call(operation_id, **params)`, `request(method, path)`)."""
        from shared.github.app import AppAuth, AppCredentials
        from shared.github.rest import GitHubApi

        app, url = self._running.app, self._running.env["GITHUB_API_URL"]
        auth = AppAuth(AppCredentials.from_pem(app.client_id, app.private_key), url)
        return GitHubApi(url, auth=auth, timeout_s=TIMEOUT_S).bound(installation_id=installation_id)

    def stub_github(
        self,
        method: str,
        path: str,
        status: int = 200,
        body: Any = None,
        headers: dict[str, str] | None = None,
        times: int | None = None,
    ) -> dict[str, Any]:
        """GitHub answers `method path` (exact, or `{name}` segments matching any one) with
        `status`, `body` (JSON) and `headers`, ahead of any simulated route, the next
        `times` times (None: the whole test); the simulator's stub record."""
        return self.sim.stub_github(method, path, status, body, headers, times)

    def github_rate_limited(self, times: int = 1, *, status: int = 403) -> dict[str, Any]:
        """GitHub's secondary rate limit (403 or 429, `retry-after: 1`) on the next `times`
        calls, whatever the route."""
        return self.sim.github_rate_limited(count=times, status=status, retry_after_s=1)


def _webhook(webhook: str) -> str:
    if webhook not in ("send", "drop", "duplicate"):
        raise ValueError(f'webhook must be "send", "drop" or "duplicate", got {webhook!r}')
    return webhook


def _with_keys(batch: Mapping[str, Any]) -> dict[str, Any]:
    keys = [(r.get("metadata") or {}).get("key") for r in batch.get("requests", [])]
    return {**batch, "keys": keys}
