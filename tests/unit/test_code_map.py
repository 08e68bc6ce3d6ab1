"""The code map in docs/architecture.md matches the tree, both ways.

Each row's first column names a path; its second column names files (`x.py`),
directories (`x/`) or modules (`x`) inside that path. Every path the map names must
exist, and every module under `shared/` and `local/` must be named: by its own row, in
its directory's row, or through a subdirectory the map names as a whole (`review/`).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
MAPPED_PACKAGES = ("shared", "local")
_TICKED = re.compile(r"`([^`\s]+)`")
_MODULE = re.compile(r"[a-z_][a-z0-9_]*")


def code_map_rows(doc: str) -> list[tuple[list[str], list[str]]]:
    """(backticked names of the path column, of the holds column) for each table row."""
    section = doc.split("\n## Code map\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 2 or cells[0] in {"path", "---"}:
            continue
        rows.append((_TICKED.findall(cells[0]), _TICKED.findall(cells[1])))
    return rows


def _row_dir(path: str) -> PurePosixPath:
    """The directory a row's names are relative to: the path itself, or a file's parent."""
    return PurePosixPath(path.rstrip("/")) if path.endswith("/") else PurePosixPath(path).parent


def named_paths(doc: str) -> tuple[dict[str, tuple[str, ...]], set[str]]:
    """(each name that must exist -> where it may be, every module or directory path named).

    A name in the path column is repo-relative once it holds a `/`; in the holds column it
    is relative to the row's directory or, failing that, to the repository (`functions/`).
    """
    must_exist: dict[str, tuple[str, ...]] = {}
    named: set[str] = set()
    for paths, holds in code_map_rows(doc):
        assert paths, "a code map row names no path"
        base = _row_dir(paths[0])
        for path in paths:
            full = path.rstrip("/") if "/" in path else str(base / path)
            must_exist[path] = (full,)
        for name in holds:
            if name.endswith((".py", "/")):
                must_exist[f"{paths[0]} {name}"] = (str(base / name), name.rstrip("/"))
            elif _MODULE.fullmatch(name):
                # A bare name is a module of that directory, or a function it holds.
                named.update({str(base / f"{name}.py"), str(base / name)})
    named |= {where[0] for where in must_exist.values()}
    return must_exist, named


def test_every_path_the_code_map_names_exists() -> None:
    must_exist, named = named_paths(DOC.read_text(encoding="utf-8"))
    assert {"functions/main.py", "shared/entrypoints/worker.py", "local/chaos"} <= named
    missing = sorted(
        name for name, where in must_exist.items() if not any((REPO / p).exists() for p in where)
    )
    assert not missing, f"docs/architecture.md's code map names paths that do not exist: {missing}"


def test_every_module_is_on_the_code_map() -> None:
    doc = DOC.read_text(encoding="utf-8")
    _, named = named_paths(doc)
    rows = {str(_row_dir(paths[0])) for paths, _ in code_map_rows(doc)}
    modules = [
        path.relative_to(REPO)
        for package in MAPPED_PACKAGES
        for path in (REPO / package).rglob("*.py")
        if path.name != "__init__.py" and "__pycache__" not in path.parts
    ]
    assert Path("shared/ledger/runs.py") in modules

    def on_map(module: Path) -> bool:
        # Named itself, or inside a subdirectory named as a whole (one with no row of its own).
        wholes = [p for p in module.parents if p.as_posix() in named and p.as_posix() not in rows]
        return module.as_posix() in named or bool(wholes)

    unmapped = sorted(m.as_posix() for m in modules if not on_map(m))
    assert not unmapped, f"modules missing from docs/architecture.md's code map: {unmapped}"
