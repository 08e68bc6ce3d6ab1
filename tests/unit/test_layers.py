"""The core's layers, held: every import in `shared/` outside `if TYPE_CHECKING:`, those
inside functions included, points down the layers pyproject.toml's `[tool.importlinter]`
declares (docs/architecture.md, "Layers"), with no cycle between modules and no module
importing the package that contains it. import-linter and grimp read the source; nothing
is imported."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
TIMEOUT_S = 120


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter over the `shared` package found first on `root`, with the repository's
    contracts."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(REPO / "pyproject.toml")],
        cwd=root,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("shared", exclude_type_checking_imports=True, cache_dir=None)


def test_the_layer_contract_is_kept() -> None:
    ran = _lint_imports(REPO)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1 kept, 0 broken" in ran.stdout


def test_an_upward_import_breaks_the_contract_naming_it(tmp_path: Path) -> None:
    """A probe: the ledger importing an entry point, in a copy of `shared/`."""
    shutil.copytree(REPO / "shared", tmp_path / "shared", ignore=shutil.ignore_patterns("*.pyc"))
    records = tmp_path / "shared" / "ledger" / "records.py"
    records.write_text(
        records.read_text() + "\n\ndef _probe():\n    import shared.entrypoints.worker\n"
    )
    ran = _lint_imports(tmp_path)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "shared.ledger is not allowed to import shared.entrypoints" in ran.stdout
    assert "shared.ledger.records -> shared.entrypoints.worker" in ran.stdout


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_shared_has_no_import_cycle() -> None:
    graph = _graph()
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert not _cycles(edges), f"import cycles in shared/: {_cycles(edges)}"


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_the_package_that_contains_it() -> None:
    """A package's modules import their siblings, never the package re-exporting them."""
    graph = _graph()
    upward = sorted(
        f"{module} -> {imported}"
        for module in graph.modules
        for imported in graph.find_modules_directly_imported_by(module)
        if module.startswith(imported + ".")
    )
    assert not upward, f"modules importing their own package: {upward}"
