"""The suite leaves the git tree as it found it: a run that changed it fails, naming the files.

At the start of the session `git status` is recorded with a digest of every listed file
(`--untracked-files=all`; ignored files are not listed, so what the suite may create there,
`.local/`, `.cache/`, is never counted); at its end it is taken again and compared. A file
the developer changed before the run counts only if the run changed it again.

It runs for the whole suite (pytest given no paths, as `make test` runs it) or when
`HOOKLEDGER_TREE_CHECK=1`; `HOOKLEDGER_TREE_CHECK=0` turns it off. A run of a few files
skips it: the developer is likely editing the tree meanwhile.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SWITCH = "HOOKLEDGER_TREE_CHECK"
_BEFORE = pytest.StashKey[dict[str, str]]()

Snapshot = Mapping[str, str]


def snapshot(root: Path = REPO) -> dict[str, str] | None:
    """{path: "XY digest"} for every file `git status` lists under `root`; None outside a
    git checkout (or without git)."""
    try:
        listed = subprocess.run(
            ["git", "status", "--porcelain=v1", "-z", "--untracked-files=all"],
            cwd=root,
            capture_output=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    state: dict[str, str] = {}
    entries = iter(listed.decode("utf-8", "surrogateescape").split("\0"))
    for entry in entries:
        if not entry:
            continue
        code, path = entry[:2], entry[3:]
        if "R" in code or "C" in code:
            next(entries, None)  # a rename's or copy's source path follows it
        state[path] = f"{code} {_digest(root / path)}"
    return state


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except IsADirectoryError:
        return "directory"  # a submodule or nested checkout
    except FileNotFoundError:
        return "absent"


def changed(before: Snapshot, after: Snapshot) -> list[str]:
    """The paths whose status or content differs between the two snapshots, sorted: one the
    run dirtied, rewrote again, created, deleted or put back as committed."""
    return sorted(
        path for path in before.keys() | after.keys() if before.get(path) != after.get(path)
    )


def _checked(config: pytest.Config) -> bool:
    switch = os.environ.get(SWITCH, "")
    if switch in ("0", "1"):
        return switch == "1"
    # No paths given: the whole suite from `testpaths`, as `make test` runs it.
    return config.args_source is pytest.Config.ArgsSource.TESTPATHS


def pytest_sessionstart(session: pytest.Session) -> None:
    if _checked(session.config) and (before := snapshot()) is not None:
        session.config.stash[_BEFORE] = before


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_BEFORE, None)
    after = snapshot() if before is not None else None
    if before is None or after is None:
        return
    paths = changed(before, after)
    if not paths:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [
        f"the run changed {len(paths)} file(s) git tracks or would add (a test wrote them, or"
        " they were edited while it ran); no test may write the tree:",
        *(f"  {path}" for path in paths),
    ]
    if reporter is not None:
        reporter.section("git status changed", red=True)
        for line in lines:
            reporter.write_line(line)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
