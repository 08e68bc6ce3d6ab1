"""The push's GitHub check run on an operation's page, read live from GitHub.

Which run: the operation's `github-check-run` outbox items name it (repo, sha,
`external_id` = the push's submission id, installation), as the deliverer finds it
(docs/architecture.md, "Check runs"). What it shows now (status, conclusion, annotation
count, link) is asked of GitHub — the simulator locally — with the App's installation
token and a short timeout, so a slow or refusing GitHub costs the page at most
`TIMEOUT_S` and says why instead of the run. Nothing is stored: the ledger keeps no copy
of GitHub's state to drift from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shared.github.checks import CheckRun
    from shared.ledger import Operation

TIMEOUT_S = 3.0
# (repo, sha, external_id, installation id) -> the oldest run carrying external_id, or None
Find = Callable[[str, str, str, int], "CheckRun | None"]


@dataclass(frozen=True)
class CheckRunView:
    """What the page shows: the run GitHub answered, or `error` saying why there is none."""

    repo: str
    sha: str
    external_id: str
    run: CheckRun | None = None
    error: str | None = None


def wanted(record: Operation) -> Mapping[str, Any] | None:
    """The check-run outbox payload of `record` (its push's run), or None without one."""
    from apps.review.check_runs import CHECK_RUN

    for item in record.outbox:
        payload = item.payload
        if isinstance(payload, Mapping) and payload.get("kind") == CHECK_RUN:
            return payload
    return None


def view(record: Operation, find: Find | None) -> CheckRunView | None:
    """The check run of `record`'s push as GitHub shows it now; None when it has none."""
    from shared.github import GitHubError

    payload = wanted(record)
    if payload is None:
        return None
    repo, sha = str(payload.get("repo")), str(payload.get("sha"))
    external_id, installation = str(payload.get("external_id")), payload.get("installation_id")
    if find is None or type(installation) is not int:
        return CheckRunView(repo, sha, external_id, error="no GitHub App configured here")
    try:
        run = find(repo, sha, external_id, installation)
    except GitHubError as exc:
        return CheckRunView(repo, sha, external_id, error=f"GitHub did not answer: {exc}")
    if run is None:
        return CheckRunView(repo, sha, external_id, error="not on GitHub (yet)")
    return CheckRunView(repo, sha, external_id, run=run)


def live_finder(timeout_s: float = TIMEOUT_S) -> Find | None:
    """A `Find` through GitHub's Checks API as this process's App, or None without an App."""
    from apps.review.checks import CHECK_NAME
    from shared.entrypoints import runtime
    from shared.github.checks import ChecksClient

    cfg = runtime.config()
    if not cfg.github_app_id:
        return None
    client = ChecksClient(
        cfg.github_api_url,
        auth=runtime.github_auth(),
        timeout_s=timeout_s,
        attempts=1,
        api_version=cfg.github_api_version,
    )

    def find(repo: str, sha: str, external_id: str, installation: int) -> CheckRun | None:
        return client.find(repo, sha, CHECK_NAME, external_id, installation_id=installation)

    return find
