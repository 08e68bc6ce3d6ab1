"""The status words are defined once: a guard over the source.

Each vocabulary is an enum in shared/statuses.py, and records.py says which words are
terminal or finished. A collection of status words anywhere else (a tuple, list, set or dict
keyed by them) is a second copy of a vocabulary, its order or which words are terminal; a
word written out where a status is compared, stored or passed (`status == "done"`,
`{"status": "queued"}`, `status="ignored"`) is a string the enum no longer checks. Both
fail here; import the enum member instead. The HTTP answers' own words (a dict built by a
function that returns a `Reply`: the ingress's `ignored`) are not the ledger's and pass.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

from shared import statuses
from shared.ledger import records
from shared.ledger.records import (
    DELIVERY_STATUSES,
    FINISHED_DELIVERY_STATUSES,
    OPERATION_STATUSES,
    PENDING,
    SUPERSEDED,
    TERMINAL_STATUSES,
    UNRESOLVED,
)

REPO = Path(__file__).resolve().parents[2]
# The deployed code and the operator tools; local/ speaks Gemini's and GitHub's words.
PACKAGES = ("shared", "functions", "hookledger")
OWNERS = {Path(records.__file__).resolve(), Path(statuses.__file__).resolve()}
WORDS = frozenset(
    str(word)
    for vocabulary in (
        statuses.OperationStatus,
        statuses.DeliveryStatus,
        statuses.InstallationStatus,
        statuses.GroupStatus,
        statuses.RecoveryStatus,
    )
    for word in vocabulary
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


def _found(finder: Callable[[ast.AST], Iterator[tuple[int, object]]]) -> list[str]:
    """`path:line: what` of each finding of `finder` in every module but the owners."""
    paths = sorted(p for package in PACKAGES for p in (REPO / package).rglob("*.py"))
    assert len(paths) > 50, f"found only {len(paths)} modules under {PACKAGES}"
    found = []
    for path in paths:
        if path.resolve() in OWNERS:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, what in finder(tree):
            found.append(f"{path.relative_to(REPO)}:{line}: {what}")
    return found


def test_no_module_but_records_builds_a_collection_of_status_words() -> None:
    copies = _found(_word_collections)
    assert not copies, "import these from shared/ledger/records.py instead:\n" + "\n".join(copies)


def _is_word(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in WORDS


def _words_only(node: ast.AST) -> bool:
    """A literal word, or a literal collection of nothing but words."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(_is_word(item) for item in node.elts)
    return _is_word(node)


def _about_a_status(node: ast.AST) -> bool:
    return "status" in ast.unparse(node).lower()


def _written_out(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, source) of each status word written out where a status is compared, stored
    or passed; a dict built by a function that answers a `Reply` (an HTTP answer's words)
    is not one."""
    answers = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.returns is not None
        and ast.unparse(node.returns).endswith("Reply")
        for inner in ast.walk(node)
        if isinstance(inner, ast.Dict)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            words = [side for side in sides if _words_only(side)]
            if words and any(_about_a_status(side) for side in sides if side not in words):
                yield node.lineno, ast.unparse(node)
        elif isinstance(node, ast.Dict) and id(node) not in answers:
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "status" and _is_word(value):
                    yield node.lineno, ast.unparse(node)[:80]
        elif (
            isinstance(node, ast.keyword) and "status" in (node.arg or "") and _is_word(node.value)
        ):
            yield node.lineno, ast.unparse(node)


def test_no_module_writes_out_a_status_word_it_compares_stores_or_passes() -> None:
    literals = _found(_written_out)
    assert not literals, "use the enum member (shared/statuses.py):\n" + "\n".join(literals)


def test_the_guard_sees_a_word_written_out() -> None:
    cases = {
        "compare": 'if record.status == "succeeded":\n    pass\n',
        "get": 'if data.get("status") != "queued":\n    pass\n',
        "in": 'if group.status in ("open", "sealed"):\n    pass\n',
        "stored": 'update = {"status": "queued", "attempts": 1}\n',
        "passed": 'change(recovery, status="ignored")\n',
    }
    for name, source in cases.items():
        assert list(_written_out(ast.parse(source))), name
    # The enum member, an HTTP answer's words, and a word compared with no status pass.
    for source in (
        "if record.status == OperationStatus.SUCCEEDED:\n    pass\n",
        'def answer() -> Reply:\n    return Reply(200, {"status": "ignored", "event": 1})\n',
        'if reply.body.get("status") in ("ignored", "pong"):\n    pass\n',
        'if conclusion == "failed":\n    pass\n',
    ):
        assert not list(_written_out(ast.parse(source))), source


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
    assert DELIVERY_STATUSES[0] == statuses.DeliveryStatus.QUEUED == "queued"
    # Finished: every delivery status but queued, unresolved included (the worker's table).
    assert {"done", "ignored", "unresolved", "dead"} == FINISHED_DELIVERY_STATUSES
    assert UNRESOLVED in FINISHED_DELIVERY_STATUSES
