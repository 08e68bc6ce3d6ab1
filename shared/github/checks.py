"""GitHub check runs: create, update, find by `external_id`, and publish one run's state.

GitHub REST "Check runs" (docs.github.com/rest/checks/runs): "Create a check run" (`POST
/repos/{o}/{r}/check-runs`, `name` and `head_sha` required), "Update a check run" (`PATCH
/repos/{o}/{r}/check-runs/{id}`), "List check runs for a Git reference" (`GET
/repos/{o}/{r}/commits/{ref}/check-runs?check_name=&filter=&per_page=&page=`, answered
`{total_count, check_runs}`). What these modules rely on from those pages:
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

The modules: `check_state.py` (`CheckRunState`, `Annotation`, `CheckRun`,
`PublishedCheckRun` and the limits a state is checked against), `check_runs.py` (the REST
calls and their page limits) and this one (`ChecksClient`: those calls and `publish`),
which re-exports the public names of the other two.

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

from shared.github.check_runs import (
    ANNOTATIONS_PER_PAGE,
    CHECK_RUNS_PER_PAGE,
    MAX_ANNOTATION_PAGES,
    MAX_ANNOTATIONS_PER_REQUEST,
    MAX_CHECK_RUN_PAGES,
    _CheckRunsClient,
)
from shared.github.check_state import (
    ANNOTATION_LEVELS,
    CONCLUSIONS,
    MAX_ANNOTATION_BYTES,
    MAX_ANNOTATION_TITLE_CHARS,
    MAX_OUTPUT_CHARS,
    STATUSES,
    Annotation,
    CheckRun,
    CheckRunState,
    PublishedCheckRun,
)
from shared.github.errors import GitHubRejected, GitHubUnavailable
from shared.github.names import check_path, check_sha
from shared.github.transport import Deadline, Ownership, OwnershipLost

__all__ = [
    "ANNOTATIONS_PER_PAGE",
    "ANNOTATION_LEVELS",
    "CHECK_RUNS_PER_PAGE",
    "CONCLUSIONS",
    "MAX_ANNOTATIONS_PER_REQUEST",
    "MAX_ANNOTATION_BYTES",
    "MAX_ANNOTATION_PAGES",
    "MAX_ANNOTATION_TITLE_CHARS",
    "MAX_CHECK_RUN_PAGES",
    "MAX_OUTPUT_CHARS",
    "STATUSES",
    "Annotation",
    "CheckRun",
    "CheckRunState",
    "ChecksClient",
    "Deadline",
    "GitHubRejected",
    "GitHubUnavailable",
    "Ownership",
    "OwnershipLost",
    "PublishedCheckRun",
    "check_path",
    "check_sha",
]


class ChecksClient(_CheckRunsClient):
    """Check runs through GitHub's REST API: each call has the client's timeout; errors
    name the repository, the commit and the check run (`shared.github` error tree).

    Writes are never retried here when a retry could double their effect: a create (GitHub
    has no idempotency key) and an update carrying annotations (appended). A 5xx, 429 or
    timeout of those is `GitHubUnavailable` at once, and the caller's next `publish` finds
    the run and what it already holds. An update without annotations is retried as usual.
    """

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
