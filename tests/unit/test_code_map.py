"""The code map in docs/architecture.md matches the tree, both ways, and the layer contract.

Each row's first column names a path; its second column names files (`x.py`),
directories (`x/`) or modules (`x`) inside that path. Every path the map names must
exist, and every module under `shared/` and `local/` must be named: by its own row, in
its directory's row, or through a subdirectory the map names as a whole (`review/`).

The map's group rows (`| **layer `x`** | … |`) are pyproject.toml's `[tool.importlinter]`
layers, in the contract's order and spelling, each holding the rows of its modules and
no other `shared/` row; one `**outside the core**` group follows with everything else.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
PYPROJECT = REPO / "pyproject.toml"
MAPPED_PACKAGES = ("shared", "local")
_TICKED = re.compile(r"`([^`\s]+)`")
_MODULE = re.compile(r"[a-z_][a-z0-9_]*")
_GROUP = re.compile(r"\*\*(?:layer `(?P<layer>[^`]+)`|(?P<other>[^*`]+))\*\*")
OUTSIDE = "outside the core"


def _cells(line: str) -> list[str]:
    """A table row's cells, split on the pipes that are not escaped (`a \\| b`)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def code_map_table(doc: str) -> list[tuple[str | None, list[str], list[str]]]:
    """(group, path-column names, holds-column names) for each row of the code map, in order.

    A group row (`| **layer `x`** | … |`, `| **outside the core** | … |`) starts a group:
    its name is the layer as written (an escaped pipe read as `|`) or the bold words; the
    rows below it are its own. A row before any group row has the group None.
    """
    section = doc.split("\n## Code map\n", 1)[1].split("\n## ", 1)[0]
    rows: list[tuple[str | None, list[str], list[str]]] = []
    group: str | None = None
    for line in section.splitlines():
        cells = _cells(line)
        if not line.startswith("|") or len(cells) != 2 or cells[0] in {"path", "---"}:
            continue
        if found := _GROUP.fullmatch(cells[0]):
            group = (found["layer"] or found["other"]).replace("\\|", "|").strip()
            continue
        rows.append((group, _TICKED.findall(cells[0]), _TICKED.findall(cells[1])))
    return rows


def code_map_rows(doc: str) -> list[tuple[list[str], list[str]]]:
    """(backticked names of the path column, of the holds column) for each table row."""
    return [(paths, holds) for _, paths, holds in code_map_table(doc)]


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


# --- the code map is the layer contract ------------------------------------------------------


def contract_layers(pyproject: str) -> list[str]:
    """pyproject.toml's layers of `shared`, top to bottom, as the contract writes them."""
    contracts = tomllib.loads(pyproject)["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in contracts if c["type"] == "layers" and c["containers"] == ["shared"]]
    return [" ".join(layer.split()) for layer in layers["layers"]]


def layer_modules(layer: str) -> set[str]:
    """The modules of one layer: `reconcile | recovery` -> {reconcile, recovery}."""
    return {name.strip() for name in re.split(r"[|:]", layer)}


def shared_module(path: str) -> str | None:
    """The top module of `shared` a path is in (`shared/ledger/ids.py` -> `ledger`), or None."""
    parts = PurePosixPath(path.rstrip("/")).parts
    return parts[1].removesuffix(".py") if len(parts) > 1 and parts[0] == "shared" else None


def disagreements(doc: str, layers: list[str]) -> list[str]:
    """Where the code map's groups and the layer contract differ; empty when they agree."""
    table = code_map_table(doc)
    groups = list(dict.fromkeys(group for group, _, _ in table))
    problems = []
    if groups != [*layers, OUTSIDE]:
        problems.append(f"the map's groups {groups} are not the layers {layers} + {OUTSIDE!r}")
    for group, paths, _ in table:
        module = shared_module(paths[0]) if paths else None
        if module is not None and (group not in layers or module not in layer_modules(group)):
            problems.append(f"{paths[0]} is mapped under {group!r}, not under its layer")
        if module is None and group != OUTSIDE:
            problems.append(
                f"{paths[0] if paths else '?'} is outside shared/, mapped under {group!r}"
            )
    for layer in layers:
        mapped = {shared_module(p[0]) for g, p, _ in table if g == layer and p}
        problems += [
            f"shared.{m} has no row under its layer {layer!r}"
            for m in sorted(layer_modules(layer) - mapped)
        ]
    return problems


def test_the_code_map_is_the_layer_contract() -> None:
    layers = contract_layers(PYPROJECT.read_text(encoding="utf-8"))
    assert layers[0] == "api" and len(layers) > 10  # the contract was found and read
    problems = disagreements(DOC.read_text(encoding="utf-8"), layers)
    assert not problems, "docs/architecture.md's code map and pyproject's layers differ:\n" + (
        "\n".join(problems)
    )


def _swap(text: str, a: str, b: str) -> str:
    return text.replace(a, "\0").replace(b, a).replace("\0", b)


def _swapped_layers(layers: list[str], a: str, b: str) -> list[str]:
    i, j = layers.index(a), layers.index(b)
    changed = list(layers)
    changed[i], changed[j] = changed[j], changed[i]
    return changed


def test_a_map_that_disagrees_with_the_contract_is_caught() -> None:
    doc = DOC.read_text(encoding="utf-8")
    layers = contract_layers(PYPROJECT.read_text(encoding="utf-8"))
    # Two groups swapped, rows and all: the order differs from the contract's.
    sharing, submission = "| **layer `sharing`** |", "| **layer `submission`** |"
    start, middle = doc.index(sharing), doc.index(submission)
    end = doc.index("| **layer `settlement`** |")
    swapped = doc[:start] + doc[middle:end] + doc[start:middle] + doc[end:]
    assert any("are not the layers" in p for p in disagreements(swapped, layers))
    # Two group names swapped, rows left: each row is under another layer.
    renamed = _swap(doc, sharing, submission)
    assert any("not under its layer" in p for p in disagreements(renamed, layers))
    # A module's row moved into a layer above its own.
    kinds = next(line for line in doc.splitlines() if line.startswith("| `shared/kinds.py` |"))
    moved = doc.replace(kinds + "\n", "").replace(
        "| **layer `signatures`** |", kinds + "\n| **layer `signatures`** |"
    )
    assert set(disagreements(moved, layers)) >= {
        "shared/kinds.py is mapped under 'handoff | gemini | github', not under its layer",
        "shared.kinds has no row under its layer 'kinds'",
    }
    # The contract changed and the map did not.
    assert disagreements(doc, _swapped_layers(layers, "kinds", "events"))
    assert disagreements(doc, [*layers[:-1], layers[-1] + " : newmodule"])
