"""bench.e2e --compare's parts: the other revision's worktree leaves nothing behind, its
functions import its own `shared/`, and the side-by-side figures are medians and ratios.

The worktree is made in this repository (git worktree add, then remove and prune), from
HEAD, so the test needs nothing but git; the load itself is bench.e2e's (test_benches.py).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench._revision import CompareError, check_served_tree, revision_worktree
from bench.e2e import ratios, summarize

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # a git worktree checkout and a fresh interpreter


def _worktrees() -> set[Path]:
    listed = subprocess.run(
        ["git", "worktree", "list", "--porcelain"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {
        Path(line.split(" ", 1)[1]).resolve()
        for line in listed.splitlines()
        if line.startswith("worktree ")
    }


class Boom(Exception):
    pass


def test_the_worktree_holds_the_revision_and_is_removed_even_when_the_run_fails() -> None:
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    seen: list[Path] = []
    with pytest.raises(Boom), revision_worktree("HEAD") as (path, sha):
        seen.append(path)
        assert sha == head
        assert (path / "functions" / "main.py").is_file()
        assert path.resolve() in _worktrees()
        check_served_tree(path)  # its functions would import its own shared/
        raise Boom
    assert not seen[0].exists()
    assert not seen[0].parent.exists()  # the temporary directory too
    assert seen[0].resolve() not in _worktrees()


def test_an_unknown_revision_is_refused_before_anything_is_made() -> None:
    before = _worktrees()
    with (
        pytest.raises(CompareError, match="no-such-revision"),
        revision_worktree("no-such-revision-anywhere"),
    ):
        pytest.fail("entered the block")
    # (Other worktrees may come and go meanwhile: only a bench one would be ours.)
    assert not [p for p in _worktrees() - before if "hookledger-bench-rev-" in str(p)]


def test_a_tree_without_its_own_shared_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CompareError, match="own shared"):
        check_served_tree(tmp_path)


def _round(settled_per_s: float, p50: float) -> dict[str, Any]:
    return {
        "settled_per_s": settled_per_s,
        "accepted_per_s": 100.0,
        "push_to_settled_ms": {"p50": p50, "p99": 2 * p50},
        "cpu_ms_per_push": {"worker": p50 / 100},
    }


def test_medians_with_their_spread_and_ratios_current_over_revision() -> None:
    other = summarize(
        [
            {"webhook": _round(10, 8000)},
            {"webhook": _round(12, 6000)},
            {"webhook": _round(11, 7000)},
        ],
        ("webhook",),
    )
    current = summarize([{"webhook": _round(22, 3500)}], ("webhook",))
    assert other["webhook"]["settled_per_s"] == {"median": 11, "min": 10, "max": 12}
    assert other["webhook"]["push_to_settled_p50_ms"]["median"] == 7000
    assert ratios(current, other)["webhook"] == {
        "settled_per_s": 2.0,
        "push_to_settled_p50_ms": 0.5,
        "push_to_settled_p99_ms": 0.5,
        "accepted_per_s": 1.0,
        "cpu_ms_per_push_worker": 0.5,
    }
