"""The articles app's push handler through the real Firestore emulator and the local GitHub
simulator (Contents API, faults): full syncs, removals, redeliveries, pushes out of order
and files that fail to fetch.

The tree of each commit comes from the simulator's Git Trees API through a real
`GitHubApi` (`RecordedTrees` records each call, and answers `truncated: true` for a commit
the test names, as GitHub does past its limits); every file is fetched from the simulator
by a `ContentsClient`.
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import pytest

from local.fakes import FakeClock
from shared import api, apps, handlers
from shared.config import Config
from shared.github import ContentsClient
from shared.github.rest import GitHubApi, GitHubResponse
from shared.handlers.context import ClientFactories, HandlerContext
from shared.ledger import Ledger

OWNER, NAME = "octo-org", "handbook"
REPO = f"{OWNER}/{NAME}"
SHA1, SHA2, SHA3 = "1" * 40, "2" * 40, "3" * 40
T1 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
T2 = T1 + timedelta(minutes=1)
T3 = T1 + timedelta(minutes=2)


def _load_quietly() -> ModuleType:
    """The app, without leaving its push handler registered for the rest of the session
    (other tests post pushes to workers that run every registered app)."""
    saved = handlers.snapshot()
    try:
        apps.load(["apps.articles"])
        return importlib.import_module("apps.articles")
    finally:
        handlers.restore(saved)


articles = _load_quietly()


class RecordedTrees(GitHubApi):
    """`ctx.github_api`: the simulator's Git Trees API, each request recorded; a commit in
    `truncated` comes back `truncated: true` (GitHub's answer past its limits, which the
    simulator never gives)."""

    def __init__(self, api_url: str) -> None:
        super().__init__(api_url, timeout_s=5, attempts=2, sleep=lambda _s: None)
        self.truncated: set[str] = set()
        self.calls: list[tuple[str, str, dict[str, Any], int | None]] = []

    def request(  # type: ignore[override]
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        installation_id: int | None = None,
        **options: Any,
    ) -> GitHubResponse:
        self.calls.append((method, path, dict(params or {}), installation_id))
        answer = super().request(
            method, path, params=params, installation_id=installation_id, **options
        )
        if path.rsplit("/", 1)[-1] not in self.truncated:
            return answer
        body = {**answer.json(), "truncated": True}
        return GitHubResponse(answer.status, answer.headers, json.dumps(body).encode())


class Context(HandlerContext):
    """A handler context whose `github_api` records the tree listings."""

    trees: RecordedTrees

    @property
    def github_api(self) -> Any:
        return self.trees


class Harness:
    def __init__(self, simulator: Any, firestore_client: Any) -> None:
        self.simulator = simulator
        self.clock = FakeClock(T1 + timedelta(seconds=5))
        self.ledger = Ledger(firestore_client, clock=self.clock)
        self.trees = RecordedTrees(simulator.url)
        contents = ContentsClient(simulator.url, timeout_s=5, attempts=2, sleep=lambda _s: None)

        def unused(name: str) -> Any:
            def build() -> Any:
                raise AssertionError(f"the articles app used {name}")

            return build

        factories = ClientFactories(
            ledger=lambda: self.ledger,
            firestore=lambda: firestore_client,
            gemini=unused("gemini"),
            github=lambda: contents,
            tasks=unused("tasks"),
            payloads=unused("payloads"),
            comments=unused("comments"),
        )
        context = Context(Config(), factories, clock=self.clock)
        context.trees = self.trees
        self.ctx = context.for_app("articles")

    def commit(self, sha: str, files: Mapping[str, str]) -> None:
        """Store `files` at `sha` in the simulator: the commit's tree is what is stored."""
        for path, text in files.items():
            self.simulator.control.put_file(OWNER, NAME, path, sha, text.encode())

    def push(
        self, sha: str, received_at: datetime, ref: str = "refs/heads/main", delivery: str = ""
    ) -> api.Outcome:
        payload = {
            "ref": ref,
            "after": sha,
            "repository": {"full_name": REPO, "default_branch": "main"},
            "installation": {"id": 4242},
            "commits": [],
        }
        event = api.Event(
            "github",
            "push",
            delivery or f"push-{sha[:6]}",
            received_at,
            json.dumps(payload).encode(),
        )
        return articles.sync_push(event, self.ctx)

    def docs(self) -> dict[str, dict[str, Any]]:
        """The stored articles of REPO by path (checked to sit at `doc_id(repo, path)`)."""
        found = {doc["path"]: doc for doc in self.ctx.results.find("articles", repo=REPO)}
        for path, doc in found.items():
            assert self.ctx.results.get("articles", api.doc_id(REPO, path)) == doc
        return found


@pytest.fixture
def harness(simulator, firestore_client) -> Harness:
    return Harness(simulator, firestore_client)


FIRST = {
    "articles/hello-world.md": "# Hello, world\n\nFirst post.\n",
    "articles/Second Post.markdown": "No heading here.\n",
    "articles/deep/nested.md": "intro\n# Nested title\n",
    "articles/image.png": "not markdown",
    "README.md": "# Outside the articles folder\n",
}


def test_the_first_push_upserts_every_article_under_the_folder(harness):
    harness.commit(SHA1, FIRST)

    outcome = harness.push(SHA1, T1)

    assert isinstance(outcome, api.Done), outcome
    assert outcome.detail.startswith("3 articles synced, 0 removed"), outcome.detail
    docs = harness.docs()
    assert sorted(docs) == [
        "articles/Second Post.markdown",
        "articles/deep/nested.md",
        "articles/hello-world.md",
    ]
    hello = docs["articles/hello-world.md"]
    assert {k: v for k, v in hello.items() if k not in ("pushed_at", "updated_at")} == {
        "repo": REPO,
        "path": "articles/hello-world.md",
        "slug": "hello-world",
        "title": "Hello, world",
        "content_sha256": api_sha256(FIRST["articles/hello-world.md"]),
        "commit": SHA1,
    }
    assert hello["pushed_at"] == T1 and hello["updated_at"] == harness.clock()
    assert docs["articles/Second Post.markdown"]["title"] == "second-post"
    assert docs["articles/deep/nested.md"]["title"] == "Nested title"
    assert harness.trees.calls == [
        ("GET", f"/repos/{REPO}/git/trees/{SHA1}", {"recursive": "1"}, 4242)
    ]


def test_a_second_push_updates_the_changed_file_and_deletes_the_removed_one(harness):
    harness.commit(SHA1, FIRST)
    harness.push(SHA1, T1)
    before = harness.docs()
    second = dict(FIRST)
    del second["articles/deep/nested.md"]
    second["articles/hello-world.md"] = "# Hello again\n\nEdited.\n"
    harness.commit(SHA2, second)
    harness.clock.advance(60)

    outcome = harness.push(SHA2, T2)

    assert isinstance(outcome, api.Done)
    assert outcome.detail.startswith("2 articles synced, 1 removed"), outcome.detail
    after = harness.docs()
    assert sorted(after) == ["articles/Second Post.markdown", "articles/hello-world.md"]
    hello = after["articles/hello-world.md"]
    assert (hello["title"], hello["commit"], hello["pushed_at"]) == ("Hello again", SHA2, T2)
    assert hello["content_sha256"] == api_sha256(second["articles/hello-world.md"])
    assert hello["updated_at"] == harness.clock()
    # Unchanged content: the same document, recording the newer push that still has it.
    same = after["articles/Second Post.markdown"]
    old = before["articles/Second Post.markdown"]
    assert same["content_sha256"] == old["content_sha256"] and same["title"] == old["title"]
    assert (same["commit"], same["pushed_at"]) == (SHA2, T2)


def test_a_redelivery_of_the_same_push_changes_nothing(harness):
    harness.commit(SHA1, FIRST)
    harness.push(SHA1, T1)
    before = harness.docs()
    harness.clock.advance(3600)

    again = harness.push(SHA1, T1)  # the same delivery run again
    github_redelivery = harness.push(SHA1, T1 + timedelta(seconds=30), delivery="redelivered")

    assert harness.docs() == before  # updated_at included
    for outcome in (again, github_redelivery):
        assert isinstance(outcome, api.Done)
        assert outcome.detail.startswith("3 articles synced, 0 removed (0 written, 3 unchanged)")


def test_an_older_push_run_after_a_newer_one_changes_nothing(harness):
    harness.commit(SHA1, FIRST)
    second = {"articles/hello-world.md": "# Newest\n", "articles/new.md": "# New\n"}
    harness.commit(SHA2, second)
    harness.push(SHA2, T2)
    newest = harness.docs()
    harness.clock.advance(60)

    late = harness.push(SHA1, T1)  # the older push's delivery, late (or retried)

    assert isinstance(late, api.Ignored) and "newer push" in late.detail, late
    assert harness.docs() == newest


def test_the_change_functions_keep_a_newer_document_when_an_older_run_overlaps(harness):
    """Overlapping runs: the older push's run already listed the repository before the newer
    one wrote; each of its writes still leaves what the newer push stored."""
    sync = importlib.import_module("apps.articles.sync")
    harness.commit(SHA2, {"articles/a.md": "# Newer\n"})
    harness.push(SHA2, T2)
    newer = harness.docs()
    doc = api.doc_id(REPO, "articles/a.md")

    older = sync.article_fields(REPO, "articles/a.md", SHA1, b"# Older\n")
    harness.ctx.results.update("articles", doc, sync.Upsert(older, T1, harness.clock()))
    harness.ctx.results.update("articles", doc, sync.Removal(T1))

    assert harness.docs() == newer


def test_a_file_failing_transiently_is_named_and_the_others_are_stored(harness, simulator):
    harness.commit(SHA1, FIRST)
    simulator.control.github_fault("articles/deep/nested.md", status=503, count=10)

    with pytest.raises(api.TransientError, match=r"articles/deep/nested\.md") as raised:
        harness.push(SHA1, T1)

    assert "hello-world" not in str(raised.value)
    assert sorted(harness.docs()) == ["articles/Second Post.markdown", "articles/hello-world.md"]

    simulator.control.github_fault("articles/deep/nested.md", status=503, count=0)
    retried = harness.push(SHA1, T1)  # the worker's retry of the whole delivery

    assert isinstance(retried, api.Done)
    assert retried.detail.startswith("3 articles synced, 0 removed (1 written, 2 unchanged)")
    assert len(harness.docs()) == 3


def test_a_file_github_refuses_is_named_and_its_document_is_kept(harness, simulator, caplog):
    harness.commit(SHA1, FIRST)
    harness.push(SHA1, T1)
    kept = harness.docs()["articles/deep/nested.md"]
    second = {**FIRST, "articles/hello-world.md": "# Changed\n"}
    harness.commit(SHA2, second)
    simulator.control.github_fault("articles/deep/nested.md", status=404, count=10)

    with caplog.at_level(logging.WARNING, logger="articles"):
        outcome = harness.push(SHA2, T2)

    assert isinstance(outcome, api.Done), outcome
    assert "2 articles synced, 0 removed" in outcome.detail
    assert "1 refused by GitHub" in outcome.detail and "articles/deep/nested.md" in outcome.detail
    docs = harness.docs()
    assert docs["articles/deep/nested.md"] == kept  # neither deleted nor rewritten
    assert docs["articles/hello-world.md"]["title"] == "Changed"
    warnings = [r for r in caplog.records if r.getMessage() == "article not fetched"]
    assert len(warnings) == 1


def test_pushes_elsewhere_are_ignored_and_nothing_is_listed(harness, monkeypatch):
    harness.commit(SHA1, FIRST)

    branch = harness.push(SHA1, T1, ref="refs/heads/feature")
    monkeypatch.setenv("ARTICLES_REPOSITORIES", "other-org/*")
    not_allowed = harness.push(SHA1, T1)

    assert isinstance(branch, api.Ignored) and "default branch" in branch.detail
    assert isinstance(not_allowed, api.Ignored) and "ARTICLES_REPOSITORIES" in not_allowed.detail
    assert harness.trees.calls == [] and harness.docs() == {}


def test_the_folder_setting_and_a_truncated_tree(harness, monkeypatch):
    harness.commit(SHA1, FIRST)
    monkeypatch.setenv("ARTICLES_PATH", "")

    outcome = harness.push(SHA1, T1)

    assert isinstance(outcome, api.Done) and outcome.detail.startswith("4 articles synced")
    assert "README.md" in harness.docs()

    harness.commit(SHA3, FIRST)
    harness.trees.truncated.add(SHA3)
    with pytest.raises(api.PermanentError, match=f"{REPO}.*truncated"):
        harness.push(SHA3, T3)


def test_a_malformed_push_is_permanent(harness):
    event = api.Event("github", "push", "bad-1", T1, b'{"ref": "refs/heads/main"}')
    with pytest.raises(api.PermanentError, match="bad-1"):
        articles.sync_push(event, harness.ctx)

    payload = {
        "ref": "refs/heads/main",
        "after": "not-a-sha",
        "repository": {"full_name": REPO, "default_branch": "main"},
    }
    event = api.Event("github", "push", "bad-2", T1, json.dumps(payload).encode())
    with pytest.raises(api.PermanentError, match="not-a-sha"):
        articles.sync_push(event, harness.ctx)


def api_sha256(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()
