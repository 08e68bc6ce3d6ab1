"""The articles app on the whole local pipeline, through the test kit (docs/apps.md,
"Testing an app"): GitHub's example push, the files at its commit, the documents."""

from __future__ import annotations

import pytest

from hookledger.testing import (
    Stack,
    assert_nothing_pending,
    assert_one_result_per_item,
    github_example,
)

pytestmark = pytest.mark.hookledger_apps("apps.articles")

# GitHub's example push (push-with-new-branch): one commit on master, the default branch.
REPO = "Codertocat/Hello-World"
SHA = "6113728f27ae82c7b1a177c8d03f9e96e0adf246"
ARTICLES = {
    "articles/hello.md": b"# Hello\n\nThe first article.\n",
    "articles/guides/setup.markdown": b"# Setting up\n\nRun it.\n",
}


def put_commit(hookledger: Stack, files: dict[str, bytes] = ARTICLES) -> None:
    for path, data in {**files, "README.md": b"# Not an article\n"}.items():
        hookledger.put_file(REPO, path, SHA, data)


def test_a_push_syncs_one_document_per_article(hookledger: Stack) -> None:
    put_commit(hookledger)

    sent = hookledger.send_github("push", github_example("push-with-new-branch"))

    assert hookledger.wait_handled(sent)["articles"] == "done"
    assert_one_result_per_item(hookledger, "articles", ARTICLES, field="path")
    titles = {doc["path"]: doc["title"] for doc in hookledger.documents("articles").values()}
    assert titles == {"articles/hello.md": "Hello", "articles/guides/setup.markdown": "Setting up"}
    assert_nothing_pending(hookledger)


def test_github_failing_at_first_is_retried_until_every_article_synced(hookledger: Stack) -> None:
    put_commit(hookledger)
    hookledger.github_errors(status=503, times=2)

    sent = hookledger.send_github("push", github_example("push-with-new-branch"))

    assert hookledger.wait_handled(sent)["articles"] == "done"
    assert hookledger.sim.faults()["github_errors"]["injected"] == 2
    assert_one_result_per_item(hookledger, "articles", ARTICLES, field="path")
    assert_nothing_pending(hookledger)
