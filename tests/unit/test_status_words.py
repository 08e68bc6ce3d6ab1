"""The status words are defined once, in shared/ledger/records.py: a guard over the source.

A module may use one word (`status == "done"`), but a collection of them (a tuple, list,
set or dict keyed by status words) is a second copy of the vocabulary, its order or which
words are terminal: it belongs in records.py, and everyone else imports it from there.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from shared.ledger import records
from shared.ledger.records import (
    DELIVERY_STATUSES,
    FINISHED_DELIVERY_STATUSES,
    INSTALLATION_STATUSES,
    OPERATION_STATUSES,
    PENDING,
    SUPERSEDED,
    TERMINAL_STATUSES,
    UNRESOLVED,
)

REPO = Path(__file__).resolve().parents[2]
# The deployed code and the operator tools; local/ speaks Gemini's and GitHub's words.
PACKAGES = ("shared", "functions", "hookledger")
OWNER = Path(records.__file__).resolve()
WORDS = (
    frozenset(OPERATION_STATUSES) | frozenset(DELIVERY_STATUSES) | frozenset(INSTALLATION_STATUSES)
)


def _word_collections(tree: ast.AST) -> Iterator[tuple[int, list[str]]]:
    """(line, words) of each literal collection of two or more status words and nothing else."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items: list[ast.expr | None] = list(node.elts)
        elif isinstance(node, ast.Dict):
            items = list(node.keys)
        else:
            continue
        words = [
            item.value
            for item in items
            if isinstance(item, ast.Constant) and isinstance(item.value, str)
        ]
        if len(words) >= 2 and len(words) == len(items) and set(words) <= WORDS:
            yield node.lineno, words


def _copies(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        if path.resolve() == OWNER:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, words in _word_collections(tree):
            found.append(f"{path.relative_to(REPO)}:{line}: {words}")
    return found


def test_no_module_but_records_builds_a_collection_of_status_words() -> None:
    paths = sorted(p for package in PACKAGES for p in (REPO / package).rglob("*.py"))
    assert len(paths) > 50, f"found only {len(paths)} modules under {PACKAGES}"
    copies = _copies(paths)
    assert not copies, "import these from shared/ledger/records.py instead:\n" + "\n".join(copies)


def test_the_guard_sees_a_copy() -> None:
    # Copies like the ones it replaced (the CLI's delivery order, the Gemini client's set).
    cases = {
        "order": 'ORDER = ("queued", "done", "ignored", "unresolved", "dead")\n',
        "set": 'if status in {"failed", "cancelled", "expired"}:\n    pass\n',
        "dict": 'COUNTS = {"pending": 0, "succeeded": 0}\n',
    }
    for name, source in cases.items():
        tree = ast.parse(source)
        assert list(_word_collections(tree)), name
    # One word, or a collection mixing in other words, is not a copy of the vocabulary.
    for source in ('status == "done"\n', 'ROWS = ("succeeded", "failed", "blocked")\n'):
        assert not list(_word_collections(ast.parse(source))), source


def test_the_vocabulary_hangs_together() -> None:
    assert OPERATION_STATUSES[0] == PENDING and OPERATION_STATUSES[-1] == SUPERSEDED
    assert set(OPERATION_STATUSES) == {PENDING, SUPERSEDED} | TERMINAL_STATUSES
    assert len(set(OPERATION_STATUSES)) == len(OPERATION_STATUSES)
    assert len(set(DELIVERY_STATUSES)) == len(DELIVERY_STATUSES)
    assert DELIVERY_STATUSES[0] == "queued"
    # Finished: every delivery status but queued, unresolved included (the worker's table).
    assert {"done", "ignored", "unresolved", "dead"} == FINISHED_DELIVERY_STATUSES
    assert UNRESOLVED in FINISHED_DELIVERY_STATUSES
