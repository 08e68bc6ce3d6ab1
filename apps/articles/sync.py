"""One push's sync: the repository's articles made those of the pushed commit.

A FULL SCAN: every Markdown file under `ARTICLES_PATH` at the pushed commit is listed with
the Git Trees API (`GET /repos/{repo}/git/trees/{sha}?recursive=1`) and fetched, whatever
the push changed, so a run after missed or failed ones repairs everything.

Ordering: a push is ordered by its event's `received_at`, stored as `pushed_at`. Each
document is written by `Results.update` (one transaction): `upsert` leaves a document a
newer push wrote, or one already holding these fields (a redelivery: `updated_at` is kept),
and `removal` deletes only a document an older push wrote. A run that finds a stored
document newer than its push stops before writing anything (`Ignored`): the newer push's
full scan already stands for the repository, so an older run must not recreate what it
deleted. Limit: two runs overlapping in time can still race on a file the newer one
deletes while the older one recreates it (no transaction spans several documents); the
next push repairs it.

Failures: a file GitHub refuses (4xx) is named in the outcome and its document is kept as
it is; a transient one (timeouts, 5xx) is named in a `TransientError` raised after every
other file was written, so the worker retries the delivery (the writes are idempotent).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from apps.articles import COLLECTION
from shared import api
from shared.api import github

log = api.get_logger("articles")

# A folder holding more Markdown files than this is refused: `Results.where` reads at most
# 1,000 documents, so the documents of deleted files could not all be found.
MAX_ARTICLES = 1000
# Git's mode of a symbolic link: its blob is the target's name, not an article.
SYMLINK_MODE = "120000"
# Names shown in an outcome or an error before "…".
SHOWN_PATHS = 10

_NOT_SLUG = re.compile(r"[^0-9a-z]+")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_H1 = re.compile(r"^ {0,3}# +(.*?)(?: +#+)? *$")


# ---------------------------------------------------------------------------------------
# Parsing: pure, unit-tested.


def slug_of(path: str) -> str:
    """The file name without its Markdown suffix, lower-cased, each run of characters other
    than a-z and 0-9 made one '-' (none at either end); "article" when nothing is left."""
    name = path.rsplit("/", 1)[-1]
    lowered = name.lower()
    for suffix in github.MARKDOWN_SUFFIXES:
        if lowered.endswith(suffix):
            lowered = lowered[: -len(suffix)]
            break
    return _NOT_SLUG.sub("-", lowered).strip("-") or "article"


def title_of(text: str, fallback: str) -> str:
    """The text of the first level-1 ATX heading (`# Title`, closing #s dropped) outside a
    fenced code block, else `fallback` (the slug)."""
    fence: str | None = None
    for line in text.lstrip("\ufeff").splitlines():
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        heading = _H1.match(line)
        if heading and heading.group(1).strip():
            return heading.group(1).strip()
    return fallback


def select_articles(tree: Iterable[Any], under: str) -> list[str]:
    """The paths of the Markdown files (blobs, not symbolic links) under the folder `under`
    ('' = all) among a Git tree's entries, sorted."""
    blobs = [
        entry["path"]
        for entry in tree
        if isinstance(entry, Mapping)
        and entry.get("type") == "blob"
        and entry.get("mode") != SYMLINK_MODE
        and isinstance(entry.get("path"), str)
    ]
    return github.select_paths(blobs, under, github.MARKDOWN_SUFFIXES)


def article_fields(repo: str, path: str, sha: str, data: bytes) -> dict[str, Any]:
    """The fields of one article's document, except `pushed_at` and `updated_at`."""
    slug = slug_of(path)
    return {
        "repo": repo,
        "path": path,
        "slug": slug,
        "title": title_of(data.decode("utf-8", errors="replace"), slug),
        "content_sha256": hashlib.sha256(data).hexdigest(),
        "commit": sha,
    }


def instant(value: Any) -> datetime | None:
    """`value` as an aware datetime (a naive one is UTC); None when it is not a datetime."""
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def newer_than(stored: Mapping[str, Any] | None, pushed_at: datetime) -> bool:
    """Whether `stored` was written by a push after `pushed_at` (no `pushed_at`: older)."""
    at = instant(None if stored is None else stored.get("pushed_at"))
    return at is not None and at > pushed_at


# ---------------------------------------------------------------------------------------
# The change functions `Results.update` runs in its transaction (maybe more than once:
# each call only decides, and records what it decided for the counts).


@dataclass
class Upsert:
    """Write `fields` with `pushed_at` and `updated_at`, unless a newer push wrote the
    document or it holds these fields already (a redelivery keeps its `updated_at`)."""

    fields: Mapping[str, Any]
    pushed_at: datetime
    updated_at: datetime
    wrote: bool = False

    def __call__(self, stored: dict[str, Any] | None) -> dict[str, Any] | None:
        self.wrote = False
        if stored is not None and (
            newer_than(stored, self.pushed_at)
            or all(stored.get(name) == value for name, value in self.fields.items())
        ):
            return None
        self.wrote = True
        return {**self.fields, "pushed_at": self.pushed_at, "updated_at": self.updated_at}


@dataclass
class Removal:
    """Delete the document when a push before `pushed_at` wrote it."""

    pushed_at: datetime
    deleted: bool = False

    def __call__(self, stored: dict[str, Any] | None) -> object | None:
        self.deleted = False
        if stored is None or newer_than(stored, self.pushed_at):
            return None
        at = instant(stored.get("pushed_at"))
        if at is not None and at == self.pushed_at:
            return None  # written by this very push: its file is present, not removed
        self.deleted = True
        return api.DELETE


# ---------------------------------------------------------------------------------------
# The handler's work.


def sync_articles(event: api.Event, ctx: api.Context) -> api.Outcome:
    payload = event.json()
    if not isinstance(payload, dict):
        raise api.PermanentError(f"delivery {event.delivery_id}: push body is not an object")
    try:
        push = github.parse_push(payload)
    except ValueError as exc:
        raise api.PermanentError(f"delivery {event.delivery_id}: {exc}") from None
    if push.deleted:
        return api.Ignored(f"{push.ref} of {push.repo} was deleted")
    if not push.to_default_branch:
        return api.Ignored(f"{push.ref} is not {push.repo}'s default branch")
    settings = ctx.settings
    if not github.repository_allowed(push.repo, settings["ARTICLES_REPOSITORIES"]):
        return api.Ignored(f"{push.repo} is not in ARTICLES_REPOSITORIES")
    try:
        github.check_repo(push.repo)
        github.check_sha(push.sha)
    except github.GitHubRejected as exc:
        raise api.PermanentError(f"delivery {event.delivery_id}: {exc}") from None
    pushed_at = instant(event.received_at)
    if pushed_at is None:
        raise api.PermanentError(f"delivery {event.delivery_id}: no received_at")
    return _sync(push, pushed_at, settings["ARTICLES_PATH"].strip("/"), ctx)


def _sync(push: github.Push, pushed_at: datetime, under: str, ctx: api.Context) -> api.Outcome:
    repo, sha = push.repo, push.sha
    where = f"{repo}@{sha[:12]}"
    stored = ctx.results.find(COLLECTION, limit=MAX_ARTICLES, repo=repo)
    newest = max((instant(doc.get("pushed_at")) for doc in stored), key=_key, default=None)
    if newest is not None and newest > pushed_at:
        return api.Ignored(
            f"{where}: a newer push (received {newest.isoformat()}) already synced {repo}"
        )
    paths = list_articles(ctx, push, under)

    written = unchanged = 0
    refused: list[str] = []
    unavailable: list[str] = []
    for path in paths:
        try:
            data = ctx.github.fetch(repo, path, sha, installation_id=push.installation_id)
        except github.GitHubError as exc:
            transient = isinstance(exc, github.GitHubUnavailable)
            (unavailable if transient else refused).append(path)
            api.log_event(
                log,
                logging.WARNING,
                "article not fetched",
                path=path,
                repo=repo,
                commit=sha,
                transient=transient,
                error=str(exc),
            )
            continue
        upsert = Upsert(article_fields(repo, path, sha, data), pushed_at, ctx.clock())
        ctx.results.update(COLLECTION, api.doc_id(repo, path), upsert)
        if upsert.wrote:
            written += 1
        else:
            unchanged += 1

    present = set(paths)
    removed = 0
    for doc in stored:
        gone = doc.get("path")
        if not isinstance(gone, str) or not gone or gone in present:
            continue
        removal = Removal(pushed_at)
        ctx.results.update(COLLECTION, api.doc_id(repo, gone), removal)
        removed += removal.deleted

    synced = written + unchanged
    if unavailable:
        raise api.TransientError(
            f"{where}: {len(unavailable)} article(s) could not be fetched (GitHub unavailable), "
            f"{synced} synced: {_names(unavailable)}"
        )
    detail = (
        f"{synced} articles synced, {removed} removed ({written} written, {unchanged} "
        f"unchanged) in {where}"
    )
    if refused:
        detail += f"; {len(refused)} refused by GitHub, kept as they were: {_names(refused)}"
    return api.Done(detail)


def list_articles(ctx: api.Context, push: github.Push, under: str) -> list[str]:
    """The Markdown paths under `under` at the pushed commit (Git Trees API, recursive)."""
    owner, _, name = push.repo.partition("/")
    response = ctx.github_api.call(
        "git/get-tree",
        owner=owner,
        repo=name,
        tree_sha=push.sha,
        recursive="1",
        installation_id=push.installation_id,
    )
    body = response.json()
    if not isinstance(body, Mapping) or not isinstance(body.get("tree"), list):
        raise api.PermanentError(f"{push.repo}@{push.sha[:12]}: the Git tree answer has no tree")
    if body.get("truncated"):
        raise api.PermanentError(
            f"{push.repo}@{push.sha[:12]}: the Git tree is truncated (over GitHub's limit for "
            "one recursive listing): its articles cannot all be listed"
        )
    paths = select_articles(body["tree"], under)
    if len(paths) > MAX_ARTICLES:
        raise api.PermanentError(
            f"{push.repo}@{push.sha[:12]}: {len(paths)} Markdown files under "
            f"{under or 'the repository'!r}, over the {MAX_ARTICLES} an articles sync handles"
        )
    return paths


def _names(paths: list[str]) -> str:
    shown = ", ".join(paths[:SHOWN_PATHS])
    return shown + (f", … ({len(paths) - SHOWN_PATHS} more)" if len(paths) > SHOWN_PATHS else "")


def _key(value: datetime | None) -> datetime:
    return value or datetime.min.replace(tzinfo=UTC)
