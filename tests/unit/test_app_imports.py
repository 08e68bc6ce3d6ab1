"""The line between the core and its apps, held by reading the source (docs/apps.md):

- nothing in `shared/` names the review (the word "review" appears in none of its code);
- nothing in `shared/` imports `apps`;
- an app imports only the public API (`shared.api` and its submodules) from `shared`.

The layers of `shared/` and its acyclic imports are tests/unit/test_layers.py's.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / "shared"
APPS = REPO / "apps"
PUBLIC = "shared.api"


def _modules(root: Path) -> dict[str, Path]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(path: Path, *, top_level_only: bool = False) -> list[str]:
    """Every module `path` imports (resolved when relative); with `top_level_only`, only
    the imports run at import time (not inside functions, not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    nodes: list[ast.AST] = list(tree.body) if top_level_only else list(ast.walk(tree))
    if top_level_only:  # the bodies of module-level try/if (but not `if TYPE_CHECKING`)
        extra: list[ast.AST] = []
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.If | ast.Try):
                extra.extend(ast.walk(node))
        nodes += extra
    names = []
    for node in nodes:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.append(base)
            names += [f"{base}.{alias.name}" for alias in node.names]
    return names


def test_no_review_in_the_code_of_shared() -> None:
    named = [
        f"{path.relative_to(REPO)}:{number}"
        for path in SHARED.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if re.search("review", line, re.IGNORECASE)
    ]
    assert not named, f"shared/ names the review: {named}"


def test_nothing_in_shared_imports_apps() -> None:
    found = [
        f"{path.relative_to(REPO)} imports {name}"
        for path in SHARED.rglob("*.py")
        for name in _imports(path)
        if name == "apps" or name.startswith("apps.")
    ]
    assert not found


def test_apps_import_only_the_public_api_from_shared() -> None:
    apps = list(APPS.rglob("*.py"))
    assert len({p.parent.name for p in apps}) >= 2, "the apps are where this test looks"
    found = [
        f"{path.relative_to(REPO)} imports {name}"
        for path in apps
        for name in _imports(path)
        if (name == "shared" or name.startswith("shared."))
        and name != "shared"
        and not (name == PUBLIC or name.startswith(PUBLIC + "."))
    ]
    assert not found, found


def test_the_checker_sees_a_private_import(tmp_path: Path) -> None:
    module = APPS / "_probe_private.py"
    module.write_text("from shared.ledger import Ledger\n")
    try:
        assert "shared.ledger" in _imports(module)
    finally:
        module.unlink()
