"""`new NAME [--dir ROOT]`: scaffold an app, `apps/NAME/`, and its test in a repository.

Writes `apps/NAME/__init__.py` (an `App` with two settings, one collection, an operation
kind with its write-back, and a GitHub push handler submitting one Gemini batch exactly
once) and `apps/NAME/tests/test_NAME.py` (the test kit, hookledger/testing), from the
templates in hookledger/cli/templates/app/. NAME is refused (one line, exit 2, nothing
written) unless it is lowercase letters, digits and underscores starting with a letter,
at most 32 characters, no Python keyword, none of the repository's packages, not an
existing `apps/NAME`, and the app loads beside the repository's others (no setting,
collection, kind or tag clash). The files are written to a temporary directory renamed
into place, so a failure leaves nothing. Inside a hookledger repository the generated
files (`make requirements`: tools/requirements.py, tools/app_settings.py) are then
regenerated. Prints the files, what was regenerated, and the next steps.
"""

from __future__ import annotations

import argparse
import keyword
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from hookledger.cli.output import CliError, Output

# Within every name the app derives: App ([a-z][a-z0-9_-]{0,39}), setting NAME_MODEL,
# kind `NAME-summary` and tag (shared/kinds.py: at most 40 characters).
NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
# The repository's top-level packages (and pytest): `apps/tests/`, say, would be read as
# the suite. A standard-library name is fine: `apps.json` shadows nothing.
SHADOWED = frozenset(
    {
        "apps",
        "bench",
        "functions",
        "hookledger",
        "local",
        "pytest",
        "shared",
        "tests",
        "tools",
    }
)
# What `make requirements` regenerates from apps/ (Makefile), in its order.
GENERATORS = (
    ("tools.requirements", "functions/requirements.txt"),
    ("tools.app_settings", "terraform/app_settings.json"),
)
SUBPROCESS_TIMEOUT_S = 300.0
EXAMPLE_PUSH = "hookledger/testing/payloads/github/push-with-new-branch.json"
# Imports the named app modules as the functions do; prints an AppError as one line. The
# core's own kinds first: an app's kind is checked against those registered before it.
LOAD_CHECK = """
import sys
from shared import apps, handlers
import shared.settlement.settler  # registers the core's kinds
try:
    handlers.load_apps(sys.argv[1:])
except apps.AppError as exc:
    print(exc, file=sys.stderr)
    sys.exit(2)
"""


@dataclass(frozen=True)
class Scaffold:
    """The files of app `name`, by path relative to the repository's root."""

    name: str
    files: dict[str, str]

    @property
    def directory(self) -> str:
        return f"apps/{self.name}"


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "new", parents=[common], help="scaffold an app, apps/NAME/, with its test"
    )
    parser.add_argument("name", metavar="NAME", help="the app's name: lowercase, a-z 0-9 _")
    parser.add_argument(
        "--dir", default=".", metavar="ROOT", help="the repository's root (default: here)"
    )
    parser.set_defaults(func=cmd_new)


def name_problem(name: str, root: Path) -> str | None:
    """Why `name` cannot be scaffolded in `root`, or None."""
    if not NAME.fullmatch(name):
        return (
            f"app name {name!r}: lowercase letters, digits and underscores, starting with a "
            "letter, at most 32 characters"
        )
    if keyword.iskeyword(name):
        return f"app name {name!r} is a Python keyword"
    if name in SHADOWED:
        return f"app name {name!r} is the name of one of the repository's packages; choose another"
    if not (root / "apps" / "__init__.py").is_file():
        return f"{root} has no apps/__init__.py: run this in a hookledger repository, or --dir"
    if (root / "apps" / name).exists():
        return f"apps/{name} exists already"
    return None


def render(name: str) -> Scaffold:
    """The files of app `name` from the templates."""
    values = {
        "name": name,
        "NAME": name.upper(),
        "collection": f"{name}_summaries",
        "kind": f"{name}-summary",
    }
    templates = resources.files("hookledger.cli") / "templates" / "app"

    def fill(template: str) -> str:
        text = (templates / template).read_text(encoding="utf-8")
        for key, value in values.items():
            text = text.replace("{{" + key + "}}", value)
        return text

    return Scaffold(
        name,
        {
            f"apps/{name}/__init__.py": fill("__init__.py.tmpl"),
            f"apps/{name}/tests/test_{name}.py": fill("tests/test_app.py.tmpl"),
        },
    )


def write(root: Path, scaffold: Scaffold) -> Path:
    """Write the files under a temporary directory in apps/, then rename it into place."""
    target = root / scaffold.directory
    staging = Path(tempfile.mkdtemp(prefix=f".new-{scaffold.name}-", dir=root / "apps"))
    try:
        for relative, text in scaffold.files.items():
            path = staging / Path(relative).relative_to(scaffold.directory)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        staging.rename(target)  # one step: apps/NAME is complete or absent
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def repo_app_modules(root: Path) -> list[str]:
    """`apps.<name>` for each apps/<name>/__init__.py in `root`, sorted."""
    return sorted(f"apps.{init.parent.name}" for init in (root / "apps").glob("*/__init__.py"))


def _python(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in `root`, with `root` first on the import path (its shared/, apps/)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(root), env.get("PYTHONPATH"))))
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a refused app leaves not even a __pycache__
    return subprocess.run(  # noqa: S603  this interpreter, with our own arguments
        [sys.executable, *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
        check=False,
    )


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def check_loads(root: Path, modules: Sequence[str]) -> str | None:
    """Why the apps `modules` do not load together in `root` (as one function would load
    them), or None."""
    done = _python(root, "-c", LOAD_CHECK, *modules)
    return None if done.returncode == 0 else _last_line(done.stderr)


def regenerate(root: Path) -> list[str]:
    """Run this repository's generators (`make requirements`); the files they rewrote.

    Nothing when `root` has no generators (not a hookledger repository). On a failure
    every file is restored and CliError names the generator."""
    present = [(m, f) for m, f in GENERATORS if (root / (m.replace(".", "/") + ".py")).is_file()]
    saved = {f: (root / f).read_bytes() for _, f in present if (root / f).is_file()}
    written: list[str] = []
    for module, _ in present:
        done = _python(root, "-m", module)
        if done.returncode != 0:
            for relative, data in saved.items():
                (root / relative).write_bytes(data)
            raise CliError(f"python -m {module} failed: {_last_line(done.stderr)}")
        written += [line.removeprefix("wrote ") for line in done.stdout.splitlines() if line]
    return written


def next_steps(name: str) -> list[dict[str, str]]:
    """What to do with the new app: test, run, feed and deploy it."""
    upper = name.upper()
    return [
        {"step": "test it", "command": f".venv/bin/python -m pytest apps/{name}"},
        {"step": "run it", "command": f"HOOKLEDGER_APPS=apps.{name} make run"},
        {
            "step": "send it a push",
            "command": f".venv/bin/hookledger send github push {EXAMPLE_PUSH}",
        },
        {
            "step": "deploy it",
            "command": (
                f'apps = ["apps.review", "apps.{name}"] in terraform/terraform.tfvars; '
                f"its settings {upper}_MODEL, {upper}_PROMPT in app_settings"
            ),
        },
    ]


def scaffold_app(root: Path, name: str) -> dict[str, Any]:
    """Scaffold app `name` in `root` (module docstring); CliError (exit 2) when refused."""
    problem = name_problem(name, root)
    if problem is not None:
        raise CliError(problem, 2)
    scaffold = render(name)
    target = write(root, scaffold)
    try:
        problem = check_loads(root, [*repo_app_modules(root)])
        if problem is not None:
            raise CliError(f"app {name!r} would not load: {problem}", 2)
        regenerated = regenerate(root)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return {
        "app": name,
        "module": f"apps.{name}",
        "files": list(scaffold.files),
        "regenerated": regenerated,
        "next_steps": next_steps(name),
    }


def cmd_new(args: argparse.Namespace, out: Output) -> int:
    result = scaffold_app(Path(args.dir).resolve(), args.name)
    out.emit(result, lambda: human(result))
    return 0


def human(result: dict[str, Any]) -> str:
    lines = [f"wrote {path}" for path in result["files"]]
    lines += [f"regenerated {path}" for path in result["regenerated"]]
    width = max(len(step["step"]) for step in result["next_steps"])
    lines.append("next:")
    lines += [f"  {s['step'].ljust(width)}  {s['command']}" for s in result["next_steps"]]
    return "\n".join(lines)
