"""The control calls for the simulated GitHub's issues, pull requests, stubs and request
log, as methods of `SimulatorClient` (client.py), which this class is a part of.

Every call raises `requests.HTTPError` on a non-2xx answer, naming what was wrong.
"""

from __future__ import annotations

from typing import Any


class GitHubObjectsControl:
    """`seed_issue`, `seed_pull`, `seed_issue_comment`, `stub_github`, `github_stubs`,
    `clear_github_stubs`, `github_requests`; `_call` is `SimulatorClient`'s."""

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        raise NotImplementedError  # SimulatorClient's

    def seed_issue(
        self,
        repo: str,
        number: int | None = None,
        title: str = "An issue",
        body: str | None = None,
        labels: list[str] | None = None,
        user: str = "octocat",
        **fields: Any,
    ) -> dict[str, Any]:
        """An open issue of `repo` ("owner/name") by `user`, as `GET
        /repos/{owner}/{repo}/issues/{number}` shows it: the same object a REST create
        makes, numbered in the repository's one sequence (the next, unless `number`).
        `fields` may hold `assignees`, `state` ("closed"), `state_reason`."""
        spec = {"repo": repo, "title": title, "body": body, "user": user, **fields}
        if number is not None:
            spec["number"] = number
        if labels is not None:
            spec["labels"] = labels
        return dict(self._call("POST", "/_sim/github/issues", json=spec))

    def seed_pull(
        self,
        repo: str,
        head_sha: str,
        base_sha: str,
        files: list[str | dict[str, Any]] | None = None,
        *,
        number: int | None = None,
        title: str = "A pull request",
        body: str | None = None,
        head_ref: str = "feature",
        base_ref: str = "main",
        user: str = "octocat",
        **fields: Any,
    ) -> dict[str, Any]:
        """An open pull request of `repo` from `head_ref` at `head_sha` into `base_ref` at
        `base_sha`, as `GET /repos/{owner}/{repo}/pulls/{number}` shows it, numbered with
        the repository's issues. `files`: what it changes, each a file name or `{"filename",
        "status"?: "modified", "additions"?: 1, "deletions"?: 0, "patch"?,
        "previous_filename"?, "content"?}` (`content`, text, is also stored at `head_sha`
        for the contents API). `fields` may hold `labels`, `assignees`, `state`, `draft`."""
        spec: dict[str, Any] = {
            "repo": repo,
            "title": title,
            "body": body,
            "user": user,
            "head": {"ref": head_ref, "sha": head_sha},
            "base": {"ref": base_ref, "sha": base_sha},
            "files": files or [],
            **fields,
        }
        if number is not None:
            spec["number"] = number
        return dict(self._call("POST", "/_sim/github/pulls", json=spec))

    def seed_issue_comment(
        self, repo: str, number: int, body: str, user: str = "octocat"
    ) -> dict[str, Any]:
        """A comment by `user` on issue or pull request `number` of `repo`, as the API
        lists it."""
        path = f"/_sim/github/issues/{repo}/{int(number)}/comments"
        return dict(self._call("POST", path, json={"body": body, "user": user}))

    def stub_github(
        self,
        method: str,
        path: str,
        status: int = 200,
        body: Any = None,
        headers: dict[str, str] | None = None,
        times: int | None = None,
    ) -> dict[str, Any]:
        """Make GitHub answer `method path` with `status`, `body` (JSON; None: empty) and
        `headers`, ahead of any simulated route, for the next `times` requests (None:
        until the simulator is reset). `path` is exact or a template whose `{name}`
        segments match any one segment, e.g. `/repos/{owner}/{repo}/issues/{n}/lock`; the
        stub added last wins. Returns the stub `{id, method, path, status, body,
        headers, times, used}`."""
        spec = {
            "method": method,
            "path": path,
            "status": status,
            "body": body,
            "headers": headers or {},
            "times": times,
        }
        return dict(self._call("POST", "/_sim/github/stubs", json=spec))

    def github_stubs(self) -> list[dict[str, Any]]:
        """The stubs set since the last reset, each with `times` left and `used`."""
        return list(self._call("GET", "/_sim/github/stubs")["stubs"])

    def clear_github_stubs(self) -> None:
        self._call("DELETE", "/_sim/github/stubs")

    def github_requests(
        self, method: str | None = None, path_prefix: str | None = None
    ) -> list[dict[str, Any]]:
        """The GitHub requests the simulator received (the last ~1000 API requests are
        kept), oldest first, of `method` and under `path_prefix` when given: `{method,
        path, query, body, installation_id, auth, api_version}` (`body` the JSON sent,
        None when none or not JSON; `installation_id` of a token the simulator issued;
        `auth` "installation", "app", "token" or None; `api_version` the
        `X-GitHub-Api-Version` header sent, None without one), GraphQL queries with their
        `files`."""
        params = {k: v for k, v in (("method", method), ("path_prefix", path_prefix)) if v}
        return list(self._call("GET", "/_sim/github/requests", params=params)["requests"])
