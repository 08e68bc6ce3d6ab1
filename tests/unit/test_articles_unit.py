"""The articles app's pure parts: slugs, titles, which tree entries are articles, and the
change functions' rule that a newer push's document is never overwritten or deleted."""

from __future__ import annotations

import importlib
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from types import ModuleType

import pytest

from shared import api, apps, handlers


def _load_quietly() -> ModuleType:
    """apps.articles.sync, without leaving the app's push handler registered for the rest of
    the session (other tests post pushes to a worker that runs every registered app)."""
    saved = handlers.snapshot()
    try:
        apps.load(["apps.articles"])
        return importlib.import_module("apps.articles.sync")
    finally:
        handlers.restore(saved)


sync = _load_quietly()
Removal, Upsert, article_fields = sync.Removal, sync.Upsert, sync.article_fields
newer_than, select_articles = sync.newer_than, sync.select_articles
slug_of, title_of = sync.slug_of, sync.title_of

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
REPO, SHA = "octo-org/handbook", "b" * 40


@pytest.mark.parametrize(
    ("path", "slug"),
    [
        ("articles/Hello World.md", "hello-world"),
        ("articles/README.md", "readme"),
        ("a/b/notes.v2.markdown", "notes-v2"),
        ("UPPER.MD", "upper"),
        ("articles/--Why? (2026)--.md", "why-2026"),
        ("articles/snake_case_name.md", "snake-case-name"),
        ("articles/café.md", "caf"),
        ("articles/¿¡.md", "article"),
        ("articles/plain", "plain"),
    ],
)
def test_the_slug_is_the_file_name_lower_cased_with_other_characters_made_dashes(path, slug):
    assert slug_of(path) == slug


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("# Hello\n\nbody", "Hello"),
        ("\ufeff# With a BOM\n", "With a BOM"),
        ("intro\n\n## Second level\n# The title #\n# Later\n", "The title"),
        ("   # Indented three\n", "Indented three"),
        ("    # Indented four is code\n", "fallback"),
        ("#NoSpace\n", "fallback"),
        ("#\n# \n# Real\n", "Real"),
        ("```\n# not a title\n```\n# After the fence\n", "After the fence"),
        ("~~~~\n```\n# still in the fence\n~~~~\n", "fallback"),
        ("", "fallback"),
    ],
)
def test_the_title_is_the_first_level_one_heading_outside_code_else_the_fallback(text, title):
    assert title_of(text, "fallback") == title


def test_article_fields_hash_the_bytes_and_fall_back_to_the_slug_for_a_title():
    fields = article_fields(REPO, "articles/No Title.md", SHA, b"just text\n")

    assert fields == {
        "repo": REPO,
        "path": "articles/No Title.md",
        "slug": "no-title",
        "title": "no-title",
        "content_sha256": "e6c4d6609612f4b790faec9068ae5d1f1c22632945ce047b71da32bdb5bb0ed3",
        "commit": SHA,
    }


def blob(path: str, mode: str = "100644") -> dict[str, str]:
    return {"path": path, "mode": mode, "type": "blob", "sha": "0" * 40}


TREE = [
    blob("README.md"),
    {"path": "articles", "mode": "040000", "type": "tree", "sha": "1" * 40},
    blob("articles/b.md"),
    blob("articles/a.MARKDOWN"),
    blob("articles/image.png"),
    blob("articles/deep/c.md"),
    blob("articles/link.md", mode="120000"),  # a symbolic link: its blob is a path
    {"path": "articles/sub.md", "mode": "160000", "type": "commit", "sha": "2" * 40},
    blob("articles-old/x.md"),
    {"path": 7, "type": "blob"},
    "not an entry",
]


@pytest.mark.parametrize(
    ("under", "paths"),
    [
        ("articles", ["articles/a.MARKDOWN", "articles/b.md", "articles/deep/c.md"]),
        ("/articles/", ["articles/a.MARKDOWN", "articles/b.md", "articles/deep/c.md"]),
        ("articles/deep", ["articles/deep/c.md"]),
        (
            "",
            [
                "README.md",
                "articles-old/x.md",
                "articles/a.MARKDOWN",
                "articles/b.md",
                "articles/deep/c.md",
            ],
        ),
        ("missing", []),
    ],
)
def test_articles_are_the_markdown_blobs_under_the_folder_not_links_or_submodules(under, paths):
    assert select_articles(TREE, under) == paths


def stored(pushed_at: datetime, **fields) -> dict:
    base = article_fields(REPO, "articles/a.md", SHA, b"# A\n")
    return {**base, "pushed_at": pushed_at, "updated_at": pushed_at, **fields}


def test_an_upsert_leaves_a_document_a_newer_push_wrote():
    fields = article_fields(REPO, "articles/a.md", "c" * 40, b"# Older content\n")
    upsert = Upsert(fields, T0, updated_at=T0 + timedelta(hours=1))

    assert upsert(stored(T0 + timedelta(seconds=1))) is None
    assert upsert.wrote is False


def test_an_upsert_replaces_a_document_an_older_push_wrote():
    fields = article_fields(REPO, "articles/a.md", "c" * 40, b"# Newer content\n")
    now = T0 + timedelta(hours=1)
    upsert = Upsert(fields, T0, updated_at=now)

    assert upsert(stored(T0 - timedelta(seconds=1))) == {
        **fields,
        "pushed_at": T0,
        "updated_at": now,
    }
    assert upsert.wrote is True
    assert upsert(None) == {**fields, "pushed_at": T0, "updated_at": now}  # created


def test_an_upsert_of_the_same_fields_writes_nothing_so_a_redelivery_keeps_updated_at():
    doc = stored(T0)
    upsert = Upsert(article_fields(REPO, "articles/a.md", SHA, b"# A\n"), T0, T0 + timedelta(1))

    assert upsert(doc) is None and upsert.wrote is False
    # A GitHub redelivery of the same commit (received later): still nothing to write.
    later = Upsert(upsert.fields, T0 + timedelta(minutes=5), T0 + timedelta(1))
    assert later(doc) is None and later.wrote is False


def test_a_newer_push_of_the_same_content_still_records_its_commit_and_time():
    """So that an older push run later sees the document as newer and leaves it."""
    fields = article_fields(REPO, "articles/a.md", "d" * 40, b"# A\n")
    upsert = Upsert(fields, T0 + timedelta(seconds=1), T0 + timedelta(1))

    assert upsert(stored(T0)) is not None and upsert.wrote is True


def test_a_removal_deletes_only_a_document_an_older_push_wrote():
    removal = Removal(T0)

    assert removal(stored(T0 - timedelta(microseconds=1))) is api.DELETE and removal.deleted
    assert removal(stored(T0 + timedelta(microseconds=1))) is None and not removal.deleted
    assert removal(stored(T0)) is None and not removal.deleted  # this push's own
    assert removal(None) is None and not removal.deleted
    assert removal({"path": "articles/a.md"}) is api.DELETE  # no pushed_at: older


def test_a_naive_stored_time_is_read_as_utc():
    naive = (T0 + timedelta(seconds=1)).replace(tzinfo=None)
    assert newer_than({"pushed_at": naive}, T0)
    assert not newer_than({"pushed_at": "2027-01-01"}, T0)  # not a time: older
    assert not newer_than(None, T0)


def test_the_app_module_imports_nothing_heavy():
    code = (
        "import sys, apps.articles\n"
        "heavy = [m for m in ('requests', 'google.cloud.firestore', 'apps.articles.sync')"
        " if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
