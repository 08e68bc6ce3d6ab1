"""Every lease, deadline and expiry comparison reads the injected clock: no module of the
`shared` package calls the wall clock (`system_clock()`, `datetime.now()`, `datetime.utcnow()`,
`time.time()` and their kin) except `shared/clock.py`, the one place that reads it, and
`shared/entrypoints/runtime.py`, the production wiring (`functions/` is wiring too, and not scanned).

Passing `system_clock` as a default or an argument (`clock: Clock = system_clock`) is a
reference, not a call: the caller injects the clock, and tests inject a `FakeClock`.
The scan reads the AST, so imports under another name are followed
(`from datetime import datetime as dt; dt.now()`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ROOT / "shared"
# The clock module and the production wiring, which build the real clock once.
ALLOWED = {"shared/clock.py", "shared/entrypoints/runtime.py"}
WALL_CLOCK = {
    "shared.clock.system_clock",
    "datetime.datetime.now",
    "datetime.datetime.utcnow",
    "datetime.datetime.today",
    "datetime.date.today",
    "time.time",
    "time.time_ns",
}


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Each name the module binds by import, to the dotted name it stands for."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:  # `import a.b` binds `a`
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node: ast.expr, names: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return names.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, names)
        return f"{base}.{node.attr}" if base is not None else None
    return None


def _callees(func: ast.expr) -> list[ast.expr]:
    """What a call may call: `f`, or each operand of `(a or b)()` / `(a if c else b)()`."""
    if isinstance(func, ast.BoolOp):
        return [callee for value in func.values for callee in _callees(value)]
    if isinstance(func, ast.IfExp):
        return _callees(func.body) + _callees(func.orelse)
    return [func]


def wall_clock_calls(source: str, filename: str = "<source>") -> list[str]:
    """`line: dotted name` of every call in `source` that reads the wall clock."""
    tree = ast.parse(source, filename)
    names = _aliases(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for callee in _callees(node.func):
            dotted = _dotted(callee, names)
            if dotted in WALL_CLOCK:
                found.append(f"{node.lineno}: {dotted}()")
    return found


CASES = [
    ("system_clock() called", "from shared.clock import system_clock\nsystem_clock()\n", 1),
    ("renamed", "from shared.clock import system_clock as wall\nwall()\n", 1),
    ("through the module", "from shared import clock\nclock.system_clock()\n", 1),
    ("datetime.now", "from datetime import UTC, datetime\ndatetime.now(UTC)\n", 1),
    ("datetime.utcnow", "from datetime import datetime as dt\ndt.utcnow()\n", 1),
    ("module datetime", "import datetime\ndatetime.datetime.now()\n", 1),
    ("time.time", "import time\ntime.time()\n", 1),
    ("time imported", "from time import time\ntime()\n", 1),
    ("a fallback called", "from shared.clock import system_clock\n(c or system_clock)()\n", 1),
    (
        "a default is a reference",
        "from shared.clock import Clock, system_clock\ndef f(clock: Clock = system_clock): clock()\n",
        0,
    ),
    ("passed on", "from shared.clock import system_clock\nLedger(c, clock=system_clock)\n", 0),
    ("the injected clock", "def f(clock):\n    return clock()\n", 0),
    ("a sleep", "import time\ntime.sleep(1)\n", 0),
    ("monotonic", "from shared.clock import monotonic\nmonotonic()\n", 0),
    ("a parse", "from datetime import datetime\ndatetime.fromisoformat('2026-01-01')\n", 0),
]


@pytest.mark.parametrize(("name", "source", "calls"), CASES, ids=[c[0] for c in CASES])
def test_the_scan_tells_a_call_from_a_reference(name: str, source: str, calls: int) -> None:
    assert len(wall_clock_calls(source)) == calls, name


def test_no_shared_module_reads_the_wall_clock_outside_the_clock_and_the_wiring() -> None:
    offenders = []
    for path in sorted(SCANNED.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative in ALLOWED:
            continue
        offenders += [f"{relative}:{call}" for call in wall_clock_calls(path.read_text(), relative)]
    assert offenders == [], "wall clock read outside shared/clock.py and the wiring:\n" + "\n".join(
        offenders
    )
