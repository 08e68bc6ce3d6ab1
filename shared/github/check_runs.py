"""The check-run REST calls `ChecksClient` builds on (`_CheckRunsClient`): create,
update, get, list a commit's runs by name, list a run's annotations, find by
`external_id`; with the request and page limits they keep to (`checks.py`'s docstring).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from shared.github.check_state import MAX_OUTPUT_CHARS, CheckRun, _check_run
from shared.github.errors import GitHubRejected, GitHubUnavailable
from shared.github.names import _repo_url, check_sha
from shared.github.transport import Deadline, _RestClient, response_json

MAX_ANNOTATIONS_PER_REQUEST = 50
CHECK_RUNS_PER_PAGE = 100  # GitHub's maximum page size
MAX_CHECK_RUN_PAGES = 10  # 1000 runs of one name per check suite, 100 a page
ANNOTATIONS_PER_PAGE = 100  # "List check run annotations": per_page at most 100
# 5000 annotations: ten generations of a state capped at 500, each page one short GET
# inside the caller's lease.
MAX_ANNOTATION_PAGES = 50


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_output(output: Mapping[str, Any] | None, where: str) -> None:
    """Refuse, before the wire, an output GitHub would answer 422 for its size."""
    if output is None:
        return
    annotations = output.get("annotations") or []
    if len(annotations) > MAX_ANNOTATIONS_PER_REQUEST:
        raise GitHubRejected(
            f"{where}: {len(annotations)} annotations in one request, over GitHub's "
            f"{MAX_ANNOTATIONS_PER_REQUEST}"
        )
    for field in ("summary", "text"):
        value = output.get(field)
        if isinstance(value, str) and len(value) > MAX_OUTPUT_CHARS:
            raise GitHubRejected(f"{where}: output.{field} is over {MAX_OUTPUT_CHARS} characters")


class _CheckRunsClient(_RestClient):
    """Check runs through GitHub's REST API, one request (or one listing) a call:
    `ChecksClient` adds `publish` to these."""

    @property
    def timeout_s(self) -> float:
        """The timeout of one request: an outbox lease must hold several of them."""
        return self._timeout_s

    def _runs_url(self, repo: str) -> str:
        return f"{_repo_url(self._api_url, repo)}/check-runs"

    def create(
        self,
        repo: str,
        sha: str,
        name: str,
        *,
        status: str = "queued",
        external_id: str | None = None,
        details_url: str | None = None,
        output: Mapping[str, Any] | None = None,
        conclusion: str | None = None,
        completed_at: datetime | None = None,
        deadline: Deadline | None = None,
        installation_id: int | None = None,
    ) -> CheckRun:
        """Create a check run `name` on commit `sha` ("Create a check run"); never retried."""
        where = f"{repo}@{sha}: check run {name!r}"
        check_sha(sha)
        if not name:
            raise GitHubRejected(f"{where}: a check run needs a name")
        _check_output(output, where)
        body: dict[str, Any] = {"name": name, "head_sha": sha, "status": status}
        if external_id is not None:
            body["external_id"] = external_id
        if details_url:
            body["details_url"] = details_url
        if conclusion is not None:
            body["conclusion"] = conclusion
        if completed_at is not None:
            body["completed_at"] = _rfc3339(completed_at)
        if output is not None:
            body["output"] = dict(output)
        response = self._send(
            "POST",
            self._runs_url(repo),
            where,
            json=body,
            retry=False,
            deadline=deadline,
            installation_id=installation_id,
        )
        return _check_run(response_json(response, where), where)

    def update(
        self,
        repo: str,
        check_run_id: int,
        *,
        sha: str = "",
        status: str | None = None,
        conclusion: str | None = None,
        completed_at: datetime | None = None,
        details_url: str | None = None,
        output: Mapping[str, Any] | None = None,
        deadline: Deadline | None = None,
        installation_id: int | None = None,
    ) -> CheckRun:
        """PATCH check run `check_run_id` ("Update a check run"); `output.annotations` are
        appended by GitHub, so an update carrying some is never retried. `sha` only names
        the commit in errors."""
        where = f"{repo}@{sha or '?'}: check run #{check_run_id}"
        if isinstance(check_run_id, bool) or not isinstance(check_run_id, int) or check_run_id < 1:
            raise GitHubRejected(f"{where}: not a check run id")
        _check_output(output, where)
        body: dict[str, Any] = {}
        if status is not None:
            body["status"] = status
        if conclusion is not None:
            body["conclusion"] = conclusion
        if completed_at is not None:
            body["completed_at"] = _rfc3339(completed_at)
        if details_url:
            body["details_url"] = details_url
        if output is not None:
            body["output"] = dict(output)
        appends = bool(output and output.get("annotations"))
        url = f"{self._runs_url(repo)}/{check_run_id}"
        response = self._send(
            "PATCH",
            url,
            where,
            json=body,
            retry=not appends,
            deadline=deadline,
            installation_id=installation_id,
        )
        return _check_run(response_json(response, where), where)

    def get(
        self,
        repo: str,
        check_run_id: int,
        *,
        sha: str = "",
        deadline: Deadline | None = None,
        installation_id: int | None = None,
    ) -> CheckRun:
        """Check run `check_run_id` ("Get a check run"); `sha` only names the commit in errors."""
        where = f"{repo}@{sha or '?'}: check run #{check_run_id}"
        url = f"{self._runs_url(repo)}/{int(check_run_id)}"
        response = self._send("GET", url, where, deadline=deadline, installation_id=installation_id)
        return _check_run(response_json(response, where), where)

    def list_for_ref(
        self,
        repo: str,
        sha: str,
        name: str,
        deadline: Deadline | None = None,
        *,
        installation_id: int | None = None,
    ) -> list[CheckRun]:
        """Every check run named `name` on commit `sha`, all pages (`filter=all`).

        More than `MAX_CHECK_RUN_PAGES` pages is `GitHubRejected`, not a guess.
        """
        where = f"{repo}@{sha}: check runs {name!r}"
        base = _repo_url(self._api_url, repo)
        url = f"{base}/commits/{quote(check_sha(sha), safe='')}/check-runs"
        params: dict[str, str | int] | None = {
            "check_name": name,
            "filter": "all",
            "per_page": CHECK_RUNS_PER_PAGE,
        }
        found: list[CheckRun] = []
        for _page in range(MAX_CHECK_RUN_PAGES):
            response = self._send(
                "GET",
                url,
                where,
                params=params,
                deadline=deadline,
                installation_id=installation_id,
            )
            body = response_json(response, where)
            runs = body.get("check_runs") if isinstance(body, Mapping) else None
            if not isinstance(runs, list):
                raise GitHubUnavailable(f"{where}: the answer has no check_runs list")
            # GitHub matches check_name itself; checking again costs nothing.
            found += [run for run in (_check_run(r, where) for r in runs) if run.name == name]
            following = response.links.get("next", {}).get("url")
            if not following:
                return found
            url, params = self._same_host(following, where), None
        raise GitHubRejected(f"{where}: more than {MAX_CHECK_RUN_PAGES} pages of check runs")

    def list_annotations(
        self,
        repo: str,
        check_run_id: int,
        *,
        sha: str = "",
        deadline: Deadline | None = None,
        installation_id: int | None = None,
    ) -> list[Mapping[str, Any]]:
        """Every annotation check run `check_run_id` holds, as GitHub lists them ("List check
        run annotations": `path`, lines, `annotation_level`, `message`, `raw_details`, …),
        all pages; `sha` only names the commit in errors.

        More than `MAX_ANNOTATION_PAGES` pages is `GitHubRejected`, not a guess.
        """
        where = f"{repo}@{sha or '?'}: check run #{check_run_id} annotations"
        url: str = f"{self._runs_url(repo)}/{int(check_run_id)}/annotations"
        params: dict[str, str | int] | None = {"per_page": ANNOTATIONS_PER_PAGE}
        found: list[Mapping[str, Any]] = []
        for _page in range(MAX_ANNOTATION_PAGES):
            response = self._send(
                "GET", url, where, params=params, deadline=deadline, installation_id=installation_id
            )
            body = response_json(response, where)
            if not isinstance(body, list) or not all(isinstance(a, Mapping) for a in body):
                raise GitHubUnavailable(f"{where}: the answer is not a list of annotations")
            found += body
            following = response.links.get("next", {}).get("url")
            if not following:
                return found
            url, params = self._same_host(following, where), None
        raise GitHubRejected(f"{where}: more than {MAX_ANNOTATION_PAGES} pages of annotations")

    def find(
        self,
        repo: str,
        sha: str,
        name: str,
        external_id: str,
        deadline: Deadline | None = None,
        *,
        installation_id: int | None = None,
    ) -> CheckRun | None:
        """The oldest (lowest id) run named `name` on `sha` carrying `external_id`, or None."""
        mine = self._mine(repo, sha, name, external_id, deadline, installation_id)
        return mine[0] if mine else None

    def _mine(
        self,
        repo: str,
        sha: str,
        name: str,
        external_id: str,
        deadline: Deadline | None,
        installation_id: int | None,
    ) -> list[CheckRun]:
        runs = self.list_for_ref(repo, sha, name, deadline, installation_id=installation_id)
        return sorted((r for r in runs if r.external_id == external_id), key=lambda r: r.id)
