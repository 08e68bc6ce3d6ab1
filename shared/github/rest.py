"""`GitHubApi`: the GitHub REST API at any endpoint, for an app's handler or deliverer.

The same transport as hookledger's own GitHub clients (shared/github/__init__.py,
`_RestClient`): each request has a timeout; 408, 429, 5xx, a rate-limit 403 and timeouts
are retried with jittered backoff, waiting what GitHub asks (`retry-after`,
`x-ratelimit-reset`) when longer; a 401 renews an App installation token once. Any other
non-2xx answer is `GitHubRejected` (permanent), a retry that did not help is
`GitHubUnavailable` (transient): a handler lets them through as they are.

    api = ctx.github_api                                    # or `ctx.github_for(event)`
    issue = api.request("GET", "/repos/octo/hello/issues/1", installation_id=42).json()
    for page in api.pages("/repos/octo/hello/pulls", params={"state": "open"}): ...
    api.call("issues/add-labels", owner="octo", repo="hello", issue_number=1, json={...})

`call` names an operation as GitHub documents it (`operationId`, shared/github/operations.py)
and its parameters by name, checked before anything is sent (`InvalidCall`, permanent).
`bound(installation_id=…, params={…})` is the same API with defaults for both (an event's
installation, owner, repo, number): an explicit argument always wins.

The token never leaves the API's own host: a path is joined to `GITHUB_API_URL`, and a
`Link: next` page elsewhere is refused.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from shared.github import operations
from shared.github.errors import GitHubRejected
from shared.github.transport import Deadline, _RestClient

# A path as GitHub documents them: "/repos/{owner}/{repo}/…", no scheme, no host.
_PATH = re.compile(r"/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*")
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')
METHODS = frozenset({"GET", "POST", "PATCH", "PUT", "DELETE"})
# Pages followed at most by `pages` (100 per page: 10,000 items).
MAX_PAGES = 100


@dataclass(frozen=True)
class GitHubResponse:
    """A 2xx (or a 404 asked for with `missing_ok`) answer: status, headers, body."""

    status: int
    headers: Mapping[str, str]
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content) if self.content else None


class GitHubApi(_RestClient):
    """Any GitHub REST endpoint, authenticated as the given installation (or GITHUB_TOKEN)."""

    # What `bound` set: the installation and the operations' parameters a call defaults to.
    _installation_id: int | None = None
    _params: Mapping[str, Any] = MappingProxyType({})

    def bound(
        self, *, installation_id: int | None = None, params: Mapping[str, Any] | None = None
    ) -> GitHubApi:
        """This API (the same session, credentials and retries) with defaults: `request`,
        `pages` and `call` use `installation_id` when given none, and `call` fills the
        parameters an operation takes from `params` when not given. Binding a bound API
        adds to its defaults; None keeps the installation it had."""
        view = copy.copy(self)
        if installation_id is not None:
            view._installation_id = installation_id
        view._params = MappingProxyType({**self._params, **(params or {})})
        return view

    def call(
        self,
        operation_id: str,
        *,
        installation_id: int | None = None,
        json: Any = None,
        accept: str | None = None,
        missing_ok: bool = False,
        deadline: Deadline | None = None,
        retry: bool = True,
        **params: Any,
    ) -> GitHubResponse:
        """Send GitHub's documented operation `operation_id` (e.g. "issues/add-labels")
        with its path and query parameters by name (`operations.build`) and `json` as its
        body, as `request` sends a path. `InvalidCall` (permanent) before anything is sent
        for an unknown operation or parameter, a missing one, a body the operation takes
        none of, or no body where it needs one. `installation_id` authenticates the call
        and, for the few operations with an `installation_id` parameter, fills it too.
        """
        op = operations.operation(operation_id)
        installation = installation_id if installation_id is not None else self._installation_id
        takes_installation = "installation_id" in op.path_params or "installation_id" in op.query
        if installation is not None and takes_installation:
            params.setdefault("installation_id", installation)
        op, path, query = operations.build(operation_id, params, defaults=self._params)
        if json is not None and op.body is None:
            raise operations.InvalidCall(f"{op.id} takes no JSON body ({op.takes()})")
        if json is None and op.body == "required":
            raise operations.InvalidCall(f"{op.id} needs a JSON body as json= ({op.takes()})")
        return self.request(
            op.method,
            path,
            params=query,
            json=json,
            installation_id=installation,
            accept=accept,
            missing_ok=missing_ok,
            deadline=deadline,
            retry=retry,
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        json: Any = None,
        installation_id: int | None = None,
        accept: str | None = None,
        missing_ok: bool = False,
        deadline: Deadline | None = None,
        retry: bool = True,
    ) -> GitHubResponse:
        """Send `method path` (a path under the API, e.g. "/repos/o/r/issues"); raises
        `GitHubRejected` for a bad method or path before anything is sent.

        `retry=False` for a POST that must not be sent twice (GitHub takes no idempotency
        key: look before you create). `deadline`: no request starts unless its timeout fits.
        """
        verb = method.upper() if isinstance(method, str) else ""
        if verb not in METHODS:
            raise GitHubRejected(f"method must be one of {sorted(METHODS)}, got {method!r}")
        if not isinstance(path, str) or not _PATH.fullmatch(path) or "/../" in f"{path}/":
            raise GitHubRejected(f"path must be an API path like /repos/o/r, got {path!r}")
        if installation_id is None:
            installation_id = self._installation_id
        return self._call(
            verb,
            self._api_url + path,
            path,
            params,
            json,
            installation_id,
            accept,
            missing_ok,
            deadline,
            retry,
        )

    def pages(
        self,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        installation_id: int | None = None,
        max_pages: int = MAX_PAGES,
    ) -> Iterator[Any]:
        """Each page's JSON of a paginated GET, following `Link: rel="next"` on this host."""
        if installation_id is None:
            installation_id = self._installation_id
        response = self.request(
            "GET", path, params={"per_page": 100, **(params or {})}, installation_id=installation_id
        )
        for _ in range(max_pages):
            yield response.json()
            found = _NEXT.search(response.headers.get("link", "") or "")
            if found is None:
                return
            url = self._same_host(found.group(1), path)
            response = self._call(
                "GET", url, path, None, None, installation_id, None, False, None, True
            )

    def _call(
        self,
        method: str,
        url: str,
        where: str,
        params: Mapping[str, str | int] | None,
        json: Any,
        installation_id: int | None,
        accept: str | None,
        missing_ok: bool,
        deadline: Deadline | None,
        retry: bool,
    ) -> GitHubResponse:
        response = self._send(
            method,
            url,
            f"{method} {where}",
            params=params,
            json=json,
            retry=retry,
            deadline=deadline,
            missing_ok=missing_ok,
            accept=accept,
            installation_id=installation_id,
        )
        headers = {k.lower(): v for k, v in response.headers.items()}
        return GitHubResponse(response.status_code, headers, response.content)
