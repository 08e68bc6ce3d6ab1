"""Deployed code never imports what is not deployed.

The functions' source archive (terraform/functions.tf) holds `functions/`, `shared/` and
the in-repo apps (`apps/`) only, so an import of `local` (dev-only) or `hookledger` (the
CLI and console) from there would fail in Cloud Functions, perhaps only on the rare path
that runs it lazily. This scan reads every .py with `ast` (nothing is imported or run) and
names each offending import.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# apps/: the in-repo apps var.apps may ship (terraform/functions.tf, local.app_files).
DEPLOYED_DIRS = ("functions", "shared", "apps")
NOT_DEPLOYED = frozenset({"local", "hookledger"})
# Calls that import a module named by their first (string) argument.
DYNAMIC_IMPORTERS = frozenset({"import_module", "__import__"})


def _package_of(path: Path, root: Path) -> list[str]:
    """The dotted package a module file sits in, as parts (`shared/a/b.py` -> shared, a)."""
    return list(path.relative_to(root).parent.parts)


def _absolute(node: ast.ImportFrom, package: list[str]) -> str:
    """The module a `from … import` names, with relative levels resolved against `package`."""
    if node.level == 0:
        return node.module or ""
    base = package[: len(package) - (node.level - 1)] if node.level - 1 <= len(package) else []
    return ".".join([*base, *([node.module] if node.module else [])])


def _imported_modules(tree: ast.AST, package: list[str]) -> list[tuple[int, str]]:
    """(line, module) for every import in the tree: top level, inside functions, dynamic."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, package)
            # `from . import local` names a module in its alias, not in `module`.
            found += [(node.lineno, f"{module}.{alias.name}".lstrip(".")) for alias in node.names]
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0] if node.args else None
            module = first.value if isinstance(first, ast.Constant) else None
            if name in DYNAMIC_IMPORTERS and isinstance(module, str):
                found.append((node.lineno, module))
    return found


def forbidden_imports(path: Path, root: Path = REPO) -> list[str]:
    """`file:line imports module` for each import of a package that is not deployed."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(root).as_posix()
    return [
        f"{rel}:{line} imports {module}"
        for line, module in _imported_modules(tree, _package_of(path, root))
        if module.split(".")[0] in NOT_DEPLOYED
    ]


def _deployed_sources(root: Path) -> list[Path]:
    """Every .py Terraform may ship; an app's own tests (apps/<name>/tests/) are not."""
    return sorted(
        p
        for d in DEPLOYED_DIRS
        for p in (root / d).rglob("*.py")
        if p.is_file() and not _app_test(p.relative_to(root))
    )


def _app_test(rel: Path) -> bool:
    return len(rel.parts) > 3 and rel.parts[0] == "apps" and rel.parts[2] == "tests"


def test_deployed_code_never_imports_the_cli_or_local() -> None:
    sources = _deployed_sources(REPO)
    assert REPO / "functions" / "main.py" in sources
    assert REPO / "shared" / "ledger" / "__init__.py" in sources
    assert REPO / "apps" / "review" / "__init__.py" in sources
    offences = [offence for path in sources for offence in forbidden_imports(path)]
    assert not offences, "deployed code imports what is not deployed:\n" + "\n".join(offences)


def test_no_cli_left_inside_the_deployed_package() -> None:
    assert not (REPO / "shared" / "cli").exists(), "shared/cli would be zipped into every function"
    assert (REPO / "hookledger" / "cli" / "__init__.py").is_file()


def _requirement_lines(lines: list[str]) -> set[str]:
    """Requirement specifiers without comments or spaces, e.g. `pyjwt[crypto]>=2.8`."""
    stripped = (re.sub(r"\s+", "", line.split("#")[0]) for line in lines)
    return {line for line in stripped if line}


def test_functions_install_the_project_runtime_dependencies_and_the_apps_only() -> None:
    # The CLI needs nothing beyond the project's; a console dependency would go in an extra.
    # Anything else must be an in-repo app's `requires`, listed under its `# apps.<name>`.
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deployed = (REPO / "functions" / "requirements.txt").read_text().splitlines()
    assert _requirement_lines(project["dependencies"]) <= _requirement_lines(deployed)
    first_app = next((i for i, line in enumerate(deployed) if line.startswith("# apps.")), None)
    core = deployed if first_app is None else deployed[:first_app]
    assert _requirement_lines(core) == _requirement_lines(project["dependencies"])
    for line in deployed[len(core) :]:
        assert line.startswith("# apps.") or _requirement_lines([line]), line


@pytest.mark.parametrize(
    ("name", "source", "expected"),
    [
        ("top-level import", "import local.stack\n", ["local.stack"]),
        ("aliased", "import hookledger as h\n", ["hookledger"]),
        ("from import", "from local.simulator.client import X\n", ["local.simulator.client.X"]),
        (
            "lazy, in a function",
            "def f():\n    from hookledger.cli import main\n",
            ["hookledger.cli.main"],
        ),
        ("lazy, in a method", "class A:\n    def m(self):\n        import local\n", ["local"]),
        (
            "importlib",
            "import importlib\nimportlib.import_module('local.stack')\n",
            ["local.stack"],
        ),
        ("__import__", "__import__('hookledger.cli')\n", ["hookledger.cli"]),
        ("relative, out of shared", "from ... import local\n", ["local"]),
        ("allowed: shared", "import shared.ledger\nfrom shared import runtime\n", []),
        ("allowed: look-alike names", "import localization\nimport hookledgerx\n", []),
        ("allowed: relative inside shared", "from . import local_time\n", []),
    ],
)
def test_the_scan_finds_every_way_of_importing(
    tmp_path: Path, name: str, source: str, expected: list[str]
) -> None:
    module = tmp_path / "shared" / "sub" / "mod.py"
    module.parent.mkdir(parents=True)
    module.write_text(source)
    found = [offence.split(" imports ")[1] for offence in forbidden_imports(module, tmp_path)]
    assert found == expected, name
    assert all(o.startswith("shared/sub/mod.py:") for o in forbidden_imports(module, tmp_path))
