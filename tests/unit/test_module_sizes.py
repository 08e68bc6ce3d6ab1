"""Sizes (issue 46): no module over 450 lines and no class over 300 lines in the
packages we write, so each stays small enough to read whole.

One case per top folder: every Python file git tracks under it is measured. A class runs
from its `class` line to its last line; a nested class counts within its outer class and
is measured on its own too.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAX_MODULE_LINES = 450
MAX_CLASS_LINES = 300
FOLDERS = ("shared", "apps", "hookledger", "local")
# Still being split by their owners; each mark goes once its folder passes.
BEING_SPLIT: set[str] = set()


def tracked_modules(folder: str) -> list[Path]:
    """Every tracked `.py` under `folder` (a file deleted but not yet committed is skipped)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", f"{folder}/*.py"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [REPO / name for name in listed.split("\0") if name and (REPO / name).is_file()]


def oversized(source: str, where: str) -> list[str]:
    """One line per rule the module `where` breaks: its own size, then each class's."""
    found = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"{where}: {lines} lines (module limit {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(source, filename=where)):
        if isinstance(node, ast.ClassDef):
            assert node.end_lineno is not None
            size = node.end_lineno - node.lineno + 1
            if size > MAX_CLASS_LINES:
                found.append(
                    f"{where}: class {node.name} {size} lines (class limit {MAX_CLASS_LINES})"
                )
    return found


@pytest.mark.parametrize(
    "folder",
    [
        pytest.param(
            folder,
            marks=pytest.mark.xfail(reason="being split: issue 46", strict=False)
            if folder in BEING_SPLIT
            else (),
        )
        for folder in FOLDERS
    ],
)
def test_no_module_or_class_too_long(folder: str) -> None:
    modules = tracked_modules(folder)
    assert modules, f"git tracks no Python file under {folder}/"
    offenders = [
        line
        for path in modules
        for line in oversized(path.read_text(encoding="utf-8"), path.relative_to(REPO).as_posix())
    ]
    assert not offenders, "too long (split along a real seam):\n" + "\n".join(offenders)


def test_the_measure_names_each_offender_with_its_size() -> None:
    body = "\n".join(f"    x{n} = {n}" for n in range(MAX_CLASS_LINES))  # the class: one over
    one_class = "class Long:\n" + body + "\n"
    assert oversized(one_class, "probe.py") == ["probe.py: class Long 301 lines (class limit 300)"]
    longer = one_class + "\n".join(f"y{n} = {n}" for n in range(MAX_MODULE_LINES - 300))
    assert oversized(longer, "probe.py") == [
        "probe.py: 451 lines (module limit 450)",
        "probe.py: class Long 301 lines (class limit 300)",
    ]
    assert oversized("class Short:\n    pass\n", "probe.py") == []
