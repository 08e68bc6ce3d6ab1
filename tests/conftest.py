"""Fixtures shared by the whole suite; the service fixtures live in tests/plugins/, and
tests/plugins/worktree.py fails a run of the whole suite that changed `git status`.

The `slow` marker (registered in pyproject.toml, `--strict-markers`) goes on every test
whose own run takes over ~5 s; the summary lists unmarked ones that did, as a reminder.
It never fails a run: how long a test takes on a loaded machine is not a verdict.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# The functions' default (functions/main.py): tests that build the runtime in-process
# run the review app unless they name their own.
os.environ.setdefault("HOOKLEDGER_APPS", "apps.review")
# One batch per push unless a test shares them (tests/integration/test_shared_batches.py,
# the chaos `quota` scenario): most tests name the batch a push makes.
os.environ.setdefault("REVIEW_GROUP_REQUESTS", "0")

from shared import apps, handlers

# Loaded before any test snapshots the handler registry, so a test's restore keeps them.
apps.load(["apps.review"])
_REVIEW_ONLY = handlers.snapshot()

pytest_plugins = [
    "tests.plugins.firestore",
    "tests.plugins.cloudtasks",
    "tests.plugins.simulator",
    "tests.plugins.ledger",
    "tests.plugins.loopback",
    "tests.plugins.worktree",  # the whole suite fails if it changed `git status`
]

SLOW_S = 5.0
_unmarked_slow: list[tuple[str, float]] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    """An app's own tests (apps/NAME/tests, run by the test kit) may import their app, which
    registers its handlers in this process too; the suite under tests/ runs the review
    alone in-process, so its tests never fan an event out to an app they do not know."""
    handlers.restore(_REVIEW_ONLY)


@pytest.fixture(autouse=True)
def _restore_environ() -> Iterator[None]:
    """Every test leaves os.environ as it found it."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    yield
    # Only the test's own call: a session fixture's start-up lands on whichever test is first.
    if call.when == "call" and call.duration > SLOW_S and item.get_closest_marker("slow") is None:
        _unmarked_slow.append((item.nodeid, call.duration))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _unmarked_slow:
        terminalreporter.section(f"tests over {SLOW_S:g} s without @pytest.mark.slow")
        for nodeid, seconds in sorted(_unmarked_slow, key=lambda entry: -entry[1]):
            terminalreporter.write_line(f"{seconds:6.1f}s {nodeid}")
