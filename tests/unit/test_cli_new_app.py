"""`hookledger new NAME`: every refusal writes nothing; the app written loads, registers its
kind and handler, imports only the public API, passes the linters, and a failed
regeneration is rolled back.

Each test scaffolds into a small root of its own: `apps/` with one real app (classify),
and this repository's `shared/` linked in, so the load check imports the real core.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hookledger.cli import main

REPO = Path(__file__).resolve().parents[2]
LONGEST = "a" * 32


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for package in ("shared", "hookledger"):  # hookledger: ruff sees it as first-party
        (tmp_path / package).symlink_to(REPO / package)
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "__init__.py").write_text("")
    (tmp_path / "apps" / "classify").symlink_to(REPO / "apps" / "classify")
    return tmp_path


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if "__pycache__" not in p.parts)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("MyApp", "lowercase letters, digits and underscores"),
        ("1app", "starting with a letter"),
        ("my-app", "lowercase letters, digits and underscores"),
        ("_app", "starting with a letter"),
        ("a" * 33, "at most 32 characters"),
        ("class", "is a Python keyword"),
        ("shared", "the name of one of the repository's packages"),
        ("tests", "the name of one of the repository's packages"),
        ("classify", "apps/classify exists already"),
        ("group", "batch tag 'group' is already registered"),  # the core's tag
    ],
)
def test_a_refused_name_exits_2_with_one_line_and_writes_nothing(
    root: Path, capsys: pytest.CaptureFixture[str], name: str, reason: str
) -> None:
    before = tree(root)
    code, out, err = run(capsys, "new", name, "--dir", str(root))
    assert (code, out) == (2, ""), name
    assert reason in err and err.count("\n") == 1, err
    assert tree(root) == before, name


def test_a_root_without_apps_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "new", "myapp", "--dir", str(tmp_path))
    assert code == 2 and "no apps/__init__.py" in err
    assert list(tmp_path.iterdir()) == []


def test_the_app_written_loads_with_its_kind_and_handler(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--json", "new", "myapp", "--dir", str(root))
    assert (code, err) == (0, "")
    result = json.loads(out)
    assert result["files"] == [
        "apps/myapp/__init__.py",
        "apps/myapp/tests/test_myapp.py",
    ]
    assert all((root / path).is_file() for path in result["files"])
    assert result["regenerated"] == []  # no generators in this root
    commands = {step["step"]: step["command"] for step in result["next_steps"]}
    assert commands["test it"] == ".venv/bin/python -m pytest apps/myapp"
    assert commands["run it"] == "HOOKLEDGER_APPS=apps.myapp make run"
    assert commands["send it a push"].startswith(".venv/bin/hookledger send github push ")
    assert Path(REPO / commands["send it a push"].split()[-1]).is_file()
    assert [p.name for p in (root / "apps").iterdir() if p.name.startswith(".")] == []

    assert registered(root, "apps.myapp") == {
        "app": "myapp",
        "collections": ["myapp_summaries"],
        "settings": ["MYAPP_MODEL", "MYAPP_PROMPT"],
        "kind": ["myapp-summary", "myapp", "myapp"],
        "push": ["myapp"],
    }


def test_the_human_output_lists_the_files_and_the_next_steps(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "new", "myapp", "--dir", str(root))
    assert code == 0
    lines = out.splitlines()
    assert lines[:2] == [
        "wrote apps/myapp/__init__.py",
        "wrote apps/myapp/tests/test_myapp.py",
    ]
    assert lines[2] == "next:"
    assert any("HOOKLEDGER_APPS=apps.myapp make run" in line for line in lines)


def registered(root: Path, module: str) -> dict[str, Any]:
    """What loading `module` in `root` registers, seen from a process of its own."""
    probe = f"""
import json
from shared import apps, handlers
from shared import kinds
(record,) = apps.load([{module!r}])
kind = [[k.name, k.tag, k.app] for k in kinds.registered() if k.app == record.name]
print(json.dumps({{
    "app": record.name,
    "collections": sorted(record.collections),
    "settings": [s.name for s in record.settings],
    "kind": kind[0] if len(kind) == 1 else kind,
    "push": [r.app for r in handlers.registrations("github", "push")],
}}))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def shared_imports(path: Path) -> list[str]:
    """The modules under `shared` that `path` imports (anywhere in it)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return [name for name in found if name.split(".")[0] == "shared"]


def test_the_app_imports_only_the_public_api(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "new", "myapp", "--dir", str(root))[0] == 0
    imported = shared_imports(root / "apps" / "myapp" / "__init__.py")
    assert "shared.api" in imported
    assert [name for name in imported if not name.startswith("shared.api")] == []


def test_the_checker_sees_a_private_import(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text("from shared.ledger import Ledger\n")
    assert shared_imports(module) == ["shared.ledger.Ledger"]


@pytest.mark.parametrize("name", ["a", LONGEST])
def test_the_files_written_pass_the_projects_linters(
    root: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    assert run(capsys, "new", name, "--dir", str(root))[0] == 0
    (root / "pyproject.toml").write_bytes((REPO / "pyproject.toml").read_bytes())
    for check in (["check"], ["format", "--check"]):
        done = subprocess.run(
            [sys.executable, "-m", "ruff", *check, f"apps/{name}"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"ruff {check}: {done.stdout}{done.stderr}"


GENERATOR = """
import sys
from pathlib import Path
Path("{target}").write_text("half written")
print("wrote {target}")
sys.exit({code})
"""


def test_a_failed_regeneration_restores_the_files_and_removes_the_app(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = root / "tools"
    tools.mkdir()
    (tools / "__init__.py").write_text("")
    for module, target, code in (
        ("requirements", "functions/requirements.txt", 0),
        ("app_settings", "terraform/app_settings.json", 1),
    ):
        (root / target).parent.mkdir()
        (root / target).write_text("as committed")
        (tools / f"{module}.py").write_text(GENERATOR.format(target=target, code=code))
    code, out, err = run(capsys, "new", "myapp", "--dir", str(root))
    assert (code, out) == (1, "")
    assert "tools.app_settings failed" in err
    assert not (root / "apps" / "myapp").exists()
    for target in ("functions/requirements.txt", "terraform/app_settings.json"):
        assert (root / target).read_text() == "as committed", target
