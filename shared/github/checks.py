"""GitHub check runs: create, update, find by `external_id`, and publish one run's state.

GitHub REST "Check runs" (docs.github.com/rest/checks/runs): "Create a check run" (`POST
/repos/{o}/{r}/check-runs`, `name` and `head_sha` required), "Update a check run" (`PATCH
/repos/{o}/{r}/check-runs/{id}`), "List check runs for a Git reference" (`GET
/repos/{o}/{r}/commits/{ref}/check-runs?check_name=&filter=&per_page=&page=`, answered
`{total_count, check_runs}`). What this module relies on from those pages:
- `status` is `queued`, `in_progress` or `completed`; `conclusion` (`action_required`,
  `cancelled`, `failure`, `neutral`, `success`, `skipped`, `timed_out`) is "Required if you
  provide `completed_at` or a `status` of `completed`", and providing one sets the status to
  `completed`; `stale` is GitHub's alone;
- `output` carries `title` and `summary` (both required on create), `text` and
  `annotations`; summary and text are at most 65535 characters; an annotation has `path`,
  `start_line`, `end_line`, `annotation_level` (`notice`, `warning`, `failure`), `message`
  (at most 64 KB) and an optional `title` (at most 255 characters);
- "The Checks API limits the number of annotations to a maximum of 50 per API request ...
  Each time you update the check run, annotations are appended"; more than 50 is a 422;
- an annotation's optional `raw_details` ("Details about this annotation", at most 64 KB)
  is returned by "List check run annotations" with `path`, `start_line`, `end_line`,
  `start_column`, `end_column`, `annotation_level`, `title`, `message` and `blob_href`
  (`per_page` at most 100, `page`);
- the list's `filter` defaults to `latest` (the most recent run per name): `all` is asked
  for, so a run made by an earlier attempt is never hidden by a later one; GitHub keeps at
  most 1000 runs of one name per check suite, so `MAX_CHECK_RUN_PAGES` pages of 100 cover it.

Only a GitHub App can write check runs; the token passed in is the installation's.

`ChecksClient.publish` is the exactly-once building block: whatever failed before (a lost
answer, a crash between two requests), calling it again with the same state ends with ONE
run carrying that state and every annotation of it once. Every annotation a state sends
carries the state's `mark` as its `raw_details` (an app marks each with its operation,
`hookledger operation batches/abc`), and a publish that finds the run counts, right then,
how many annotations GitHub holds for it carrying that mark ("List check run
annotations", `GET /repos/{o}/{r}/check-runs/{id}/annotations`, 100 a page): those are the
prefix this state sent before, since GitHub only appends and never removes, and requests
go out in order. The run is `completed` only by the request carrying the last
annotations (a run found completed by another state is set back to `in_progress` by the
first of several appends), so a completed run always has all of them:

    publisher                                    GitHub
    ── list runs by name → none with ext id ────▶
    ── POST run, annotations 1-50 (marked M) ───▶ creates #7 (in_progress, 50 annotations)
    ── PATCH #7, annotations 51-100 (M) ────────▶ #7 holds 100
       (crash, or the answer is lost)
    ── retry: list → #7, annotations_count 100 ─▶
    ── list #7's annotations: 100 carry M ──────▶
    ── PATCH #7, annotations 101-120, completed ─▶ #7 completed, 120 annotations

Annotations of another state on the same run (an earlier generation of a re-run,
or one appended between two of this state's requests) carry another mark and are never
counted as this state's, whenever they were appended. The annotations are listed only
when the state has some to send and the run holds some (`annotations_count` > 0), at most
`MAX_ANNOTATION_PAGES` pages: a run holding more is `GitHubRejected` naming it, never a
guess. A state without a mark counts every annotation on the run as its own (a run only
that state writes). A state holding fewer annotations than it finds sends none.
Annotations sent before marks existed carry none: a publish cut short before that release
and retried after it sends its first requests' annotations again (once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import requests

from shared.github import (
    Deadline,
    GitHubRejected,
    GitHubUnavailable,
    Ownership,
    OwnershipLost,
    _repo_url,
    _RestClient,
    check_path,
    check_sha,
)

STATUSES = ("queued", "in_progress", "completed")
CONCLUSIONS = (
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "skipped",
    "success",
    "timed_out",
)
ANNOTATION_LEVELS = ("notice", "warning", "failure")
MAX_ANNOTATIONS_PER_REQUEST = 50
MAX_OUTPUT_CHARS = 65535  # output.summary and output.text
MAX_ANNOTATION_TITLE_CHARS = 255
MAX_ANNOTATION_BYTES = 64 * 1024  # annotation message ("The maximum size is 64 KB")
CHECK_RUNS_PER_PAGE = 100  # GitHub's maximum page size
MAX_CHECK_RUN_PAGES = 10  # 1000 runs of one name per check suite, 100 a page
ANNOTATIONS_PER_PAGE = 100  # "List check run annotations": per_page at most 100
# 5000 annotations: ten generations of a state capped at 500, each page one short GET
# inside the caller's lease.
MAX_ANNOTATION_PAGES = 50


@dataclass(frozen=True)
class Annotation:
    """One annotation: lines `start_line`..`end_line` (1-based) of `path`, at `level`."""

    path: str
    start_line: int
    end_line: int
    level: str
    message: str
    title: str = ""

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "annotation_level": self.level,
            "message": self.message,
        }
        if self.title:
            body["title"] = self.title
        return body

    def problem(self) -> str | None:
        """Why GitHub would refuse this annotation (422), or None."""
        try:
            check_path(self.path)
        except GitHubRejected as exc:
            return str(exc)
        lines = (self.start_line, self.end_line)
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in lines):
            return f"{self.path}: lines must be whole numbers"
        if self.start_line < 1 or self.end_line < self.start_line:
            return f"{self.path}: lines {self.start_line}-{self.end_line} are not a range from 1"
        if self.level not in ANNOTATION_LEVELS:
            return f"{self.path}: annotation level {self.level!r} is not one of {ANNOTATION_LEVELS}"
        if not self.message:
            return f"{self.path}:{self.start_line}: an annotation needs a message"
        if len(self.message.encode("utf-8")) > MAX_ANNOTATION_BYTES:
            return f"{self.path}:{self.start_line}: message over {MAX_ANNOTATION_BYTES} bytes"
        if len(self.title) > MAX_ANNOTATION_TITLE_CHARS:
            return f"{self.path}:{self.start_line}: title over {MAX_ANNOTATION_TITLE_CHARS} chars"
        return None


@dataclass(frozen=True)
class CheckRunState:
    """What one check run should show: its identity (`name`, `external_id`), status and
    conclusion, and its output. `publish` makes GitHub's run match it.

    `conclusion` goes with `status` "completed" and only with it; `completed_at` (aware) is
    sent only then (GitHub stamps the time itself when it is None). `mark` is the
    `raw_details` every annotation of this state carries: `publish` counts the run's
    annotations carrying it to know which of this state's GitHub holds already (module
    docstring); it names the state's author, the same on every retry.
    """

    name: str
    external_id: str
    status: str = "in_progress"
    conclusion: str | None = None
    title: str = ""
    summary: str = ""
    text: str = ""
    annotations: tuple[Annotation, ...] = ()
    details_url: str | None = None
    completed_at: datetime | None = None
    mark: str = ""

    def problem(self) -> str | None:
        """Why GitHub would refuse this state (422), or None."""
        if not self.name or not self.external_id:
            return "a check run needs a name and an external_id"
        if self.status not in STATUSES:
            return f"status {self.status!r} is not one of {STATUSES}"
        completed = self.status == "completed"
        if completed and self.conclusion not in CONCLUSIONS:
            return f"a completed run needs a conclusion from {CONCLUSIONS}, not {self.conclusion!r}"
        if not completed and (self.conclusion is not None or self.completed_at is not None):
            return f"a conclusion or completed_at needs status completed, not {self.status!r}"
        if self.completed_at is not None and self.completed_at.tzinfo is None:
            return "completed_at must carry a time zone"
        if not self.title or not self.summary:
            return "the output needs a title and a summary"
        for field, value in (("summary", self.summary), ("text", self.text)):
            if len(value) > MAX_OUTPUT_CHARS:
                return f"output.{field} is {len(value)} characters, over {MAX_OUTPUT_CHARS}"
        if len(self.mark.encode("utf-8")) > MAX_ANNOTATION_BYTES:
            return f"the mark (an annotation's raw_details) is over {MAX_ANNOTATION_BYTES} bytes"
        for annotation in self.annotations:
            reason = annotation.problem()
            if reason is not None:
                return reason
        return None

    def output(self, annotations: Sequence[Annotation] = ()) -> dict[str, Any]:
        """The `output` object of one request, carrying `annotations` (at most 50), each
        marked with `mark` as its `raw_details`."""
        body: dict[str, Any] = {"title": self.title, "summary": self.summary}
        if self.text:
            body["text"] = self.text
        if annotations:
            marked = {"raw_details": self.mark} if self.mark else {}
            body["annotations"] = [{**a.as_json(), **marked} for a in annotations]
        return body


@dataclass(frozen=True)
class CheckRun:
    """A check run as GitHub answered it (the fields hookledger reads)."""

    id: int
    name: str
    head_sha: str
    external_id: str | None
    status: str
    conclusion: str | None
    annotations_count: int
    html_url: str | None = None
    details_url: str | None = None


@dataclass(frozen=True)
class PublishedCheckRun:
    """What `publish` did: the run (`check_run_id`), whether this call created it, the
    annotations and write requests this call sent, and newer runs carrying the same
    `external_id` (`duplicates`), each completed as a pointer to the one kept."""

    check_run_id: int
    created: bool
    annotations_sent: int
    writes: int
    duplicates: tuple[int, ...] = ()


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_run(body: Any, where: str) -> CheckRun:
    """A `CheckRun` from one JSON object; `GitHubUnavailable` when it has no usable id."""
    if not isinstance(body, Mapping):
        raise GitHubUnavailable(f"{where}: GitHub answered {type(body).__name__}, not a check run")
    try:
        run_id = int(body["id"])
    except (KeyError, TypeError, ValueError):
        # The run may exist; the next `publish` finds it by its external_id.
        raise GitHubUnavailable(f"{where}: GitHub's answer carries no check run id") from None
    output = body.get("output") if isinstance(body.get("output"), Mapping) else {}
    count = output.get("annotations_count") if isinstance(output, Mapping) else 0
    return CheckRun(
        id=run_id,
        name=str(body.get("name") or ""),
        head_sha=str(body.get("head_sha") or ""),
        external_id=body.get("external_id") if isinstance(body.get("external_id"), str) else None,
        status=str(body.get("status") or ""),
        conclusion=body.get("conclusion") if isinstance(body.get("conclusion"), str) else None,
        annotations_count=count if isinstance(count, int) and count > 0 else 0,
        html_url=body.get("html_url") if isinstance(body.get("html_url"), str) else None,
        details_url=body.get("details_url") if isinstance(body.get("details_url"), str) else None,
    )


def _json(response: requests.Response, where: str) -> Any:
    try:
        return response.json()
    except ValueError:
        raise GitHubUnavailable(f"{where}: GitHub answered non-JSON") from None


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


class ChecksClient(_RestClient):
    """Check runs through GitHub's REST API: each call has the client's timeout; errors
    name the repository, the commit and the check run (`shared.github` error tree).

    Writes are never retried here when a retry could double their effect: a create (GitHub
    has no idempotency key) and an update carrying annotations (appended). A 5xx, 429 or
    timeout of those is `GitHubUnavailable` at once, and the caller's next `publish` finds
    the run and what it already holds. An update without annotations is retried as usual.
    """

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
        return _check_run(_json(response, where), where)

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
        return _check_run(_json(response, where), where)

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
        return _check_run(_json(response, where), where)

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
            body = _json(response, where)
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
            body = _json(response, where)
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

    def publish(
        self,
        repo: str,
        sha: str,
        run: CheckRunState,
        *,
        ownership: Ownership | None = None,
        if_absent: bool = False,
        installation_id: int | None = None,
    ) -> PublishedCheckRun:
        """Make the run named `run.name` with `run.external_id` on `sha` show `run`: found
        (oldest first) or created, then brought to `run`'s state with its annotations sent
        50 a request (the first request carries up to 50, each further PATCH the next).

        A run found gets only the annotations of `run` it lacks: those carrying `run.mark`
        are counted on it now (listed only when `run` has annotations and the run holds
        some), whatever other states appended before or in between. `if_absent`: a run
        found is left as it is (writes 0): an `in_progress` state delivered late, after the
        completed one, must not reopen the run. Every request
        uses `installation_id`'s credentials (an App's installation: only an App can write
        check runs; None: the client's token).

        Safe to call again after any failure (module docstring). With `ownership`: no
        request starts unless its timeout fits in `ownership.seconds_left()`
        (`GitHubUnavailable`), and `ownership.still_owner()` is asked right before each
        write (`OwnershipLost`, nothing more sent). A state GitHub would refuse is
        `GitHubRejected` before anything is sent.
        """
        where = f"{repo}@{sha}: check run {run.name!r} (external_id {run.external_id})"
        check_sha(sha)
        reason = run.problem()
        if reason is not None:
            raise GitHubRejected(f"{where}: {reason}")
        app = installation_id
        mine = self._mine(repo, sha, run.name, run.external_id, ownership, app)
        annotations = list(run.annotations)
        step = MAX_ANNOTATIONS_PER_REQUEST
        writes = 0
        before = 0  # annotations on the run before this call
        if mine and if_absent:
            return PublishedCheckRun(mine[0].id, False, 0, 0, tuple(r.id for r in mine[1:]))
        if mine:
            target, created = mine[0], False
            before = sent = self._sent_before(repo, sha, target, run, ownership, app)
        else:
            first = annotations[:step]
            final = len(annotations) <= step  # everything fits in the create
            self._still_owner(ownership, where, "create it")
            target = self.create(
                repo,
                sha,
                run.name,
                status=run.status if final else _unfinished(run.status),
                external_id=run.external_id,
                details_url=run.details_url,
                output=run.output(first),
                conclusion=run.conclusion if final else None,
                completed_at=run.completed_at if final else None,
                deadline=ownership,
                installation_id=app,
            )
            created, sent, writes = True, len(first), 1
            if final:
                return PublishedCheckRun(target.id, True, sent, writes)
        where = f"{repo}@{sha}: check run #{target.id} {run.name!r} (external_id {run.external_id})"
        batches = [annotations[i : i + step] for i in range(sent, len(annotations), step)]
        # A run found completed (another state's) is reopened by the first append: it shows
        # `completed` again only with the last of this state's annotations.
        reopen = target.status == "completed"
        for batch in batches[:-1]:  # all but the last: appended, the run not yet completed
            self._still_owner(ownership, where, "append annotations")
            self.update(
                repo,
                target.id,
                sha=sha,
                status=_unfinished(run.status) if reopen else None,
                output=run.output(batch),
                deadline=ownership,
                installation_id=app,
            )
            writes, reopen = writes + 1, False
        last = batches[-1] if batches else []
        self._still_owner(ownership, where, "complete it" if run.conclusion else "update it")
        self.update(
            repo,
            target.id,
            sha=sha,
            status=run.status,
            conclusion=run.conclusion,
            completed_at=run.completed_at,
            details_url=run.details_url,
            output=run.output(last),
            deadline=ownership,
            installation_id=app,
        )
        writes += 1
        duplicates = tuple(r.id for r in mine[1:])
        for duplicate in duplicates:
            writes += self._point_to(repo, sha, duplicate, target.id, run, ownership, where, app)
        return PublishedCheckRun(target.id, created, len(annotations) - before, writes, duplicates)

    def _sent_before(
        self,
        repo: str,
        sha: str,
        target: CheckRun,
        run: CheckRunState,
        ownership: Ownership | None,
        installation_id: int | None,
    ) -> int:
        """How many of `run`'s annotations `target` holds already: those carrying its mark,
        counted on what GitHub lists now (module docstring); without a mark, all of them."""
        if not run.annotations or target.annotations_count == 0:
            return 0  # nothing to send, or nothing there: no listing
        if not run.mark:
            return min(target.annotations_count, len(run.annotations))
        where = f"{repo}@{sha}: check run #{target.id} {run.name!r} (external_id {run.external_id})"
        most = MAX_ANNOTATION_PAGES * ANNOTATIONS_PER_PAGE
        if target.annotations_count > most:
            raise GitHubRejected(
                f"{where}: holds {target.annotations_count} annotations, more than the {most} "
                "listed to count which this state sent"
            )
        listed = self.list_annotations(
            repo, target.id, sha=sha, deadline=ownership, installation_id=installation_id
        )
        mine = sum(1 for a in listed if a.get("raw_details") == run.mark)
        return min(mine, len(run.annotations))

    def _point_to(
        self,
        repo: str,
        sha: str,
        duplicate: int,
        kept: int,
        run: CheckRunState,
        ownership: Ownership | None,
        where: str,
        installation_id: int | None,
    ) -> int:
        """Complete duplicate run `duplicate` with `run`'s conclusion and a summary naming
        the run kept, so whichever one GitHub shows tells the same (no annotations)."""
        self._still_owner(ownership, where, f"complete duplicate #{duplicate}")
        note = f"Duplicate of check run #{kept}, which carries these annotations.\n\n"
        pointer = CheckRunState(
            name=run.name,
            external_id=run.external_id,
            status=run.status,
            conclusion=run.conclusion,
            title=run.title,
            summary=(note + run.summary)[:MAX_OUTPUT_CHARS],
            details_url=run.details_url,
            completed_at=run.completed_at,
        )
        self.update(
            repo,
            duplicate,
            sha=sha,
            status=pointer.status,
            conclusion=pointer.conclusion,
            completed_at=pointer.completed_at,
            details_url=pointer.details_url,
            output=pointer.output(),
            deadline=ownership,
            installation_id=installation_id,
        )
        return 1

    @staticmethod
    def _still_owner(ownership: Ownership | None, where: str, what: str) -> None:
        if ownership is not None and not ownership.still_owner():
            raise OwnershipLost(f"{where}: the claim passed to another caller; did not {what}")


def _unfinished(status: str) -> str:
    """The status a run is created with while more annotations are still to come."""
    return "in_progress" if status == "completed" else status
