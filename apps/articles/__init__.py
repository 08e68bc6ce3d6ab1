"""The articles app: a repository's Markdown articles synced into Firestore on each push.

A push to the default branch → every Markdown file (.md, .markdown) under `ARTICLES_PATH`
at the pushed commit, listed with the Git Trees API (a full scan, not only the files the
push changed) → one `articles` document per file (id `doc_id(repo, path)`: repo, path,
slug, title, content_sha256, commit, pushed_at, updated_at) → the repository's documents
whose file is gone are deleted. No Gemini job.

Idempotent and ordered: each document is written by `ctx.results.update` in its own
transaction, and a push never overwrites or deletes a document a newer push (a later
`pushed_at`, the event's `received_at`) wrote; a redelivery writes nothing (sync.py).

This module stays light (the ingress imports it): the handler imports sync.py when called.
"""

from __future__ import annotations

from shared import api

COLLECTION = "articles"


SETTINGS = (
    api.Setting(
        "ARTICLES_PATH",
        default="articles",
        help="folder whose Markdown files are the articles ('' = the whole repository)",
    ),
    api.Setting(
        "ARTICLES_REPOSITORIES",
        type="list",
        default=(),
        help="owner/name globs of the repositories whose articles are synced (empty: all)",
        check=api.owner_name_globs,
    ),
)

app = api.App(
    "articles",
    settings=SETTINGS,
    collections=[COLLECTION],
    description="a repository's Markdown articles synced into Firestore on each push",
)


@app.on("push")
def sync_push(event: api.Event, ctx: api.Context) -> api.Outcome:
    """A push to the default branch: the repository's articles made those of its commit."""
    from apps.articles.sync import sync_articles

    return sync_articles(event, ctx)
