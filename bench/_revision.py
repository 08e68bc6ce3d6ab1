"""Another revision of this repository, served by a bench beside this tree (`--compare REV`).

    revision_worktree(rev)   a detached temporary git worktree of `rev`, removed at the end
    check_served_tree(root)  refuses a tree whose functions would not import its own shared/

bench/e2e.py and bench/ack.py serve its functions with `start_function(root=...)`: the
same interpreter and packages, that tree first on PYTHONPATH.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from local.functions_server import REPO


def git(*args: str, cwd: Path = REPO) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=120
    )
    if done.returncode != 0:
        raise CompareError(f"git {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


class CompareError(RuntimeError):
    """The other revision cannot be checked out or served; the message says why."""


@contextlib.contextmanager
def revision_worktree(rev: str) -> Iterator[tuple[Path, str]]:
    """A detached git worktree of `rev` in a temporary directory, and its commit; removed
    (and pruned from the repository's worktree list) when the block ends, however it ends."""
    sha = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    parent = Path(tempfile.mkdtemp(prefix="hookledger-bench-rev-"))
    path = parent / sha[:12]
    try:
        git("worktree", "add", "--detach", str(path), sha)
        yield path, sha
    finally:
        # Each step on its own: a failed add leaves no worktree to remove, only the dir.
        with contextlib.suppress(CompareError, subprocess.SubprocessError):
            git("worktree", "remove", "--force", str(path))
        shutil.rmtree(parent, ignore_errors=True)
        with contextlib.suppress(CompareError, subprocess.SubprocessError):
            git("worktree", "prune")


def check_served_tree(root: Path) -> None:
    """Refuse to measure `root` unless its functions would import its own `shared/` and
    load their entry points (an older tree needing other packages fails here, not midway)."""
    env = {**os.environ, "PYTHONPATH": str(root), "GOOGLE_CLOUD_PROJECT": "demo-hookledger"}
    probe = (
        "import importlib.util, pathlib, shared\n"
        "spec = importlib.util.spec_from_file_location('main', 'functions/main.py')\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print(pathlib.Path(shared.__file__).resolve().parent.parent)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0 or Path(done.stdout.strip()) != root.resolve():
        raise CompareError(
            f"{root}: its functions would not import its own shared/ "
            f"(got {done.stdout.strip()!r}): {done.stderr.strip()[-500:]}"
        )
