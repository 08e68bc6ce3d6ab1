"""The scaffold cannot rot: `hookledger new` in a copy of this repository, then the test it
generated, run as a user would run it (`python -m pytest apps/NAME`), passes; the
generated files are up to date and the new app type-checks; and the suite's in-process
tests still pass beside it (an app's test, imported in pytest's process, must not lend the
app's push handler to the review's tests: tests/conftest.py `pytest_collection_finish`).

The generated test uses the test kit (hookledger.testing, a pytest plugin found through
its `pytest11` entry point): it starts its own emulators, simulator and functions.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hookledger.cli import main

pytestmark = pytest.mark.slow  # a copy of the repository and a whole stack in a subprocess

REPO = Path(__file__).resolve().parents[2]
NAME = "scaffolded"


def copy_of_the_repository(target: Path) -> Path:
    """The files git knows (tracked, and new ones not ignored), copied to `target`."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    for relative in filter(None, listed.split("\0")):
        source = REPO / relative
        if source.is_file():  # a file deleted in the work tree is still listed
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / relative)
    return target


def python(root: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("HOOKLEDGER_APPS", None)  # as a user's shell has it
    return subprocess.run(
        [sys.executable, *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_a_scaffolded_apps_own_test_passes_in_a_fresh_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = copy_of_the_repository(tmp_path / "repo")

    assert main(["new", NAME, "--dir", str(root), "--json"]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert result["regenerated"] == ["terraform/app_settings.json"]  # its two settings
    for generator in ("tools.requirements", "tools.app_settings"):
        done = python(root, "-m", generator, "--check", timeout=300)
        assert done.returncode == 0, f"{generator} --check: {done.stderr}"

    done = python(root, "-m", "mypy", f"apps/{NAME}", timeout=600)
    assert done.returncode == 0, f"mypy: {done.stdout}{done.stderr}"

    done = python(root, "-m", "pytest", f"apps/{NAME}", "-q", "-p", "no:cacheprovider", timeout=900)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0 and "2 passed" in summary, f"{done.stdout}{done.stderr}"

    # A user's app test may import its app (registering its push handler in pytest's
    # process): the review's in-process push tests, collected with it, must not see it.
    test_file = root / "apps" / NAME / "tests" / f"test_{NAME}.py"
    test_file.write_text(test_file.read_text() + f"\nimport apps.{NAME}  # noqa: E402, F401\n")
    beside = ("tests/integration/test_claims_database.py", f"apps/{NAME}")
    done = python(root, "-m", "pytest", *beside, "-q", "-p", "no:cacheprovider", timeout=900)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0 and " passed" in summary, f"{done.stdout}{done.stderr}"
