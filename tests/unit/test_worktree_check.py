"""The suite's tree check (tests/plugins/worktree.py) names what a run changed, and only that."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.plugins.worktree import changed, snapshot

CASES = [
    ("a clean tree stays clean", {}, {}, []),
    ("a tracked file rewritten", {}, {"docs/a.png": " M 1"}, ["docs/a.png"]),
    ("a new file", {}, {"new.txt": "?? 1"}, ["new.txt"]),
    ("the developer's edit left alone", {"x.py": " M 1"}, {"x.py": " M 1"}, []),
    ("the developer's edited file rewritten", {"x.py": " M 1"}, {"x.py": " M 2"}, ["x.py"]),
    ("the developer's edit undone", {"x.py": " M 1"}, {}, ["x.py"]),
    (
        "several, sorted",
        {"b": " M 1"},
        {"b": " M 1", "z": "?? 1", "a": " D absent"},
        ["a", "z"],
    ),
]


@pytest.mark.parametrize(("name", "before", "after", "expected"), CASES, ids=[c[0] for c in CASES])
def test_changed_names_only_what_the_run_changed(name, before, after, expected):
    assert changed(before, after) == expected, name


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_a_snapshot_of_a_real_checkout_sees_rewrites_not_ignored_files(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("scratch/\n")
    (tmp_path / "shot.png").write_bytes(b"old")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    (tmp_path / "mine.py").write_text("the developer's\n")  # before the run
    before = snapshot(tmp_path)
    assert before is not None and set(before) == {"mine.py"}

    (tmp_path / "scratch").mkdir()
    (tmp_path / "scratch" / "cache.json").write_text("{}")  # ignored: allowed
    (tmp_path / "shot.png").write_bytes(b"new")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "left.txt").write_text("behind")
    assert changed(before, snapshot(tmp_path) or {}) == ["shot.png", "sub/left.txt"]


def test_outside_a_checkout_there_is_no_snapshot(tmp_path: Path) -> None:
    assert snapshot(tmp_path) is None
