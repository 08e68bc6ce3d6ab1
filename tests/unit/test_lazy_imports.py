"""Imports inside functions in `shared/` are exactly those shared/lazy_imports.py lists.

Each is allowed only to keep a heavy module out of a cold start: the list names the
module it imports and what that brings, with the figure from `bench.cold`. The walk counts
every import inside a function (nested ones too), except those under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.lazy_imports import KEPT_OUT, SITES

REPO = Path(__file__).resolve().parents[2]


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules `node` imports: `from a import b` is `a.b` when b is a module, else `a`."""
    if not isinstance(node, ast.ImportFrom):
        return [alias.name for alias in node.names]
    found = []
    for alias in node.names:
        name = f"{node.module}.{alias.name}"
        try:
            found.append(name if importlib.util.find_spec(name) else str(node.module))
        except ModuleNotFoundError:
            found.append(str(node.module))
    return sorted(set(found))


def function_imports(source: str, module: str) -> Iterator[tuple[str, str]]:
    """(`module:qualname`, imported module) of each import inside a function of `source`."""
    scopes: list[tuple[str, bool]] = []  # (name, is a function)

    class Walk(ast.NodeVisitor):
        def _scoped(self, node: ast.AST, name: str, function: bool) -> None:
            scopes.append((name, function))
            self.generic_visit(node)
            scopes.pop()

        def visit_ClassDef(self, node: ast.ClassDef) -> None:
            self._scoped(node, node.name, False)

        def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
            self._scoped(node, node.name, True)

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_If(self, node: ast.If) -> None:
            if "TYPE_CHECKING" not in ast.unparse(node.test):
                self.generic_visit(node)
            else:
                for child in node.orelse:
                    self.visit(child)

        def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
            if any(function for _, function in scopes):
                # A function nested in another is named by the outermost function's path.
                names = []
                for name, function in scopes:
                    names.append(name)
                    if function:
                        break
                for imported in _imported(node):
                    found.append((f"{module}:{'.'.join(names)}", imported))

        visit_ImportFrom = visit_Import

    found: list[tuple[str, str]] = []
    Walk().visit(ast.parse(source))
    yield from found


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def shared_function_imports() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for path in sorted((REPO / "shared").rglob("*.py")):
        found.update(function_imports(path.read_text(), module_name(path)))
    return found


def listed() -> set[tuple[str, str]]:
    return {(site, module) for site, modules in SITES.items() for module in modules}


def test_every_import_inside_a_function_is_listed_and_every_row_is_one() -> None:
    found = shared_function_imports()
    unlisted = sorted(found - listed())
    stale = sorted(listed() - found)
    assert not unlisted, (
        "imports inside functions not in shared/lazy_imports.py (move them to the top of "
        f"the module, or list what they keep out of a cold start): {unlisted}"
    )
    assert not stale, f"shared/lazy_imports.py lists imports that are not there: {stale}"


def test_every_listed_module_says_what_it_keeps_out_and_its_figure() -> None:
    imported = {module for modules in SITES.values() for module in modules}
    assert imported == set(KEPT_OUT), sorted(imported ^ set(KEPT_OUT))
    for module, kept in KEPT_OUT.items():
        assert kept.brings and kept.cold_start, module
        assert kept.ms > 0, module


@pytest.mark.parametrize(
    "source",
    [
        "def f():\n    import json\n",
        "class C:\n    def m(self):\n        from shared import logs\n",
        "def f():\n    def g():\n        import os\n",
    ],
)
def test_the_walk_finds_an_import_inside_a_function(source: str) -> None:
    # The check cannot pass by finding nothing: each of these is an unlisted import.
    found = list(function_imports(source, "shared.probe"))
    assert len(found) == 1
    assert found[0] not in listed()


def test_the_walk_skips_module_level_and_type_checking_imports() -> None:
    source = (
        "import json\nfrom typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from shared import logs\n"
        "def f():\n    if TYPE_CHECKING:\n        from shared import errors\n    return 1\n"
    )
    assert list(function_imports(source, "shared.probe")) == []


# Loads functions/main.py as the served ingress with the three apps, then reports which of
# argv[1] it has loaded.
PROBE = """
import json, os, sys
os.environ["FUNCTION_TARGET"] = "ingress"
import functions_framework
functions_framework.create_app(target="ingress", source="functions/main.py")
print(json.dumps([name for name in json.loads(sys.argv[1]) if name in sys.modules]))
"""


@pytest.mark.slow
def test_the_served_ingress_has_loaded_none_of_what_the_list_keeps_out_of_it() -> None:
    kept = sorted(name for name, row in KEPT_OUT.items() if row.cold_start == "ingress")
    env = {
        **os.environ,
        "HOOKLEDGER_APPS": "apps.review,apps.articles,apps.classify",
        "GOOGLE_CLOUD_PROJECT": "demo-hookledger",
        "CLOUD_TASKS_EMULATOR_HOST": "127.0.0.1:9",  # nothing listens: never reaches GCP
    }
    env.pop("TRACING", None)
    env.pop("FIRESTORE_EMULATOR_HOST", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(kept)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
