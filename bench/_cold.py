"""Cold-start import time of a function against the least it must import, in fresh interpreters.

    cold_start("ingress", repeats)  -> the figures bench.ack reports under "cold_start"
    cold_start("worker", repeats)   -> the same keys with worker_* names (bench.cold)
    tracing_cold_start("worker", repeats, trace_dir) -> its import with tracing off and on

Each probe is a fresh `python -c` (median of `repeats`, base and function run alternately,
one unmeasured run each first so both start from warm bytecode and OS caches): `base` is
the import of what the function cannot do without, the function is that plus loading
functions/main.py with functions-framework's own loader; `build` adds building the
function's endpoint (what its first request does). No probe connects anywhere.

`cold_start` loads functions/main.py as a tool does (no FUNCTION_TARGET: no startup
check). `tracing_cold_start` loads it as the function being served, as functions-framework
does (`FUNCTION_TARGET` set, so `runtime.check_startup` runs `tracing.configure`), with
`TRACING=off` and with `TRACING=file` (OpenTelemetry's SDK loaded and a tracer built; the
cloudtrace sink would add the Cloud Trace client on top): the difference is what tracing
adds to a cold start.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROJECT = "demo-hookledger"
IMPORT_GOAL = 1.15

# What each function needs at minimum: the server, and the clients its work calls.
BASE_IMPORTS = {
    "ingress": "import functions_framework, google.cloud.tasks_v2",
    "worker": "import functions_framework, google.cloud.firestore, google.genai",
    "reconcile": "import functions_framework, google.cloud.firestore, google.genai",
}
FACTORIES = {"ingress": "ingress", "worker": "worker", "reconcile": "reconcile_endpoint"}


def _load(function: str) -> str:
    # functions-framework's own loader (what create_app does), then touch the lazy factory.
    return (
        "from functions_framework import _function_registry as r; "
        "m, s = r.load_function_module('functions/main.py'); s.loader.exec_module(m); "
        f"import shared.entrypoints.runtime; shared.entrypoints.runtime.{FACTORIES[function]}"
    )


def _timed_code(*steps: str, then: str | None = None) -> str:
    """A probe printing the ms from its start to the end of each step, then the value of
    the expression `then` (read after the last mark), as one JSON list."""
    lines = ["import time, json", "t0 = time.perf_counter()"]
    marks = []
    for i, step in enumerate(steps):
        lines.append(step)
        lines.append(f"t{i + 1} = time.perf_counter()")
        marks.append(f"(t{i + 1} - t0) * 1000")
    if then is not None:
        marks.append(then)
    lines.append(f"print(json.dumps([{', '.join(marks)}]))")
    return "\n".join(lines)


def _run_timed(code: str, env: dict[str, str]) -> tuple[float, list[float]]:
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    wall = (time.perf_counter() - began) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"cold-start probe failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return wall, json.loads(done.stdout.strip().splitlines()[-1])


def probe_env() -> dict[str, str]:
    env = {
        **os.environ,
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        # Building the clients never connects; these only keep them off real endpoints.
        "CLOUD_TASKS_EMULATOR_HOST": "127.0.0.1:9",
        "FIRESTORE_EMULATOR_HOST": "127.0.0.1:9",
        "GEMINI_BASE_URL": "http://127.0.0.1:9",
        "GEMINI_API_KEY": "cold-start-probe",
    }
    for name in ("PYTHONPROFILEIMPORTTIME", "PYTHONDONTWRITEBYTECODE", "FUNCTION_TARGET"):
        env.pop(name, None)
    return env


def cold_start(function: str, repeats: int) -> dict[str, Any]:
    env = probe_env()
    base_code = _timed_code(BASE_IMPORTS[function])
    build = f"shared.entrypoints.runtime.{FACTORIES[function]}()"
    code = _timed_code(BASE_IMPORTS[function], _load(function), build)
    _run_timed(base_code, env)
    _run_timed(code, env)
    base_import, base_wall, fn_import, fn_wall, fn_build = [], [], [], [], []
    for _ in range(repeats):
        wall, marks = _run_timed(base_code, env)
        base_wall.append(wall)
        base_import.append(marks[0])
        wall, marks = _run_timed(code, env)
        fn_wall.append(wall)
        fn_import.append(marks[1])
        fn_build.append(marks[2])
    med = statistics.median
    ratio = med(fn_import) / med(base_import)
    return {
        "repeats": repeats,
        "base_import_ms": round(med(base_import), 1),
        f"{function}_import_ms": round(med(fn_import), 1),
        f"{function}_import_and_build_ms": round(med(fn_build), 1),
        "base_process_wall_ms": round(med(base_wall), 1),
        f"{function}_process_wall_ms": round(med(fn_wall), 1),
        "ratio": round(ratio, 3),
        "ratio_process_wall": round(med(fn_wall) / med(base_wall), 3),
        "goal": IMPORT_GOAL,
        "met": ratio <= IMPORT_GOAL,
        "what": f"in-process import time, median; base = {BASE_IMPORTS[function]}; "
        f"{function} = that + functions/main.py via functions-framework's loader; "
        f"build = + shared.entrypoints.runtime.{FACTORIES[function]}() (first request)",
    }


# The apps `make run` loads, and Terraform's default: the ingress imports each at start.
THREE_APPS = "apps.review,apps.articles,apps.classify"


def apps_cold_start(repeats: int, apps: str = THREE_APPS) -> dict[str, Any]:
    """The ingress's import with `apps` loaded (functions/main.py, then `shared.apps.load()`,
    as the served ingress does at start) against its minimum, in fresh interpreters."""
    env = {**probe_env(), "HOOKLEDGER_APPS": apps}
    base_code = _timed_code(BASE_IMPORTS["ingress"])
    loaded = "import shared.apps; shared.apps.load()"
    code = _timed_code(BASE_IMPORTS["ingress"], f"{_load('ingress')}; {loaded}")
    _run_timed(base_code, env)
    _run_timed(code, env)
    base_import, fn_import = [], []
    for _ in range(repeats):
        base_import.append(_run_timed(base_code, env)[1][0])
        fn_import.append(_run_timed(code, env)[1][1])
    med = statistics.median
    ratio = med(fn_import) / med(base_import)
    return {
        "apps": apps,
        "repeats": repeats,
        "base_import_ms": round(med(base_import), 1),
        "ingress_with_apps_import_ms": round(med(fn_import), 1),
        "ratio": round(ratio, 3),
        "goal": IMPORT_GOAL,
        "met": ratio <= IMPORT_GOAL,
    }


def _configure_file(trace_dir: str) -> str:
    """Probe code: tracing.configure with this process's config, but TRACING=file."""
    return (
        "import dataclasses, shared.entrypoints.runtime, shared.tracing; shared.tracing.configure("
        "dataclasses.replace(shared.entrypoints.runtime.config(), tracing='file', "
        f"trace_dir={trace_dir!r}))"
    )


# Read in the probe after the import: did the startup load OpenTelemetry's SDK?
_OTEL_LOADED = "__import__('sys').modules.get('opentelemetry.sdk.trace') is not None"


def tracing_cold_start(function: str, repeats: int, trace_dir: str) -> dict[str, Any]:
    """`function`'s cold import as served (its startup check included), tracing off and on."""
    served = {**probe_env(), "FUNCTION_TARGET": function}
    envs = {
        "off": {**served, "TRACING": "off"},
        "on": {**served, "TRACING": "file", "TRACE_DIR": trace_dir, "TRACE_SAMPLE_RATIO": "1"},
    }
    steps = [BASE_IMPORTS[function], _load(function), f"loaded = {_OTEL_LOADED}"]
    codes = {
        # off then also times turning tracing on in the same process (the tracer's import
        # and build): its own cost, without the spread between two fresh interpreters.
        "off": _timed_code(*steps, _configure_file(trace_dir), then="loaded"),
        "on": _timed_code(*steps, then="loaded"),
    }
    imports: dict[str, list[float]] = {"off": [], "on": []}
    configure: list[float] = []
    loaded: dict[str, bool] = {}
    for mode, env in envs.items():
        _run_timed(codes[mode], env)  # unmeasured: warm bytecode and OS caches for both
    for _ in range(repeats):
        for mode, env in envs.items():
            _, marks = _run_timed(codes[mode], env)
            imports[mode].append(marks[1])
            loaded[mode] = bool(marks[-1])
            if mode == "off":
                configure.append(marks[3] - marks[2])
    off, on = statistics.median(imports["off"]), statistics.median(imports["on"])
    return {
        "repeats": repeats,
        "off_import_ms": round(off, 1),
        "on_import_ms": round(on, 1),
        "difference_ms": round(on - off, 1),
        "on_over_off": round(on / off, 3),
        "difference_spread_ms": [
            round(min(imports["on"]) - max(imports["off"]), 1),
            round(max(imports["on"]) - min(imports["off"]), 1),
        ],
        "configure_after_off_ms": round(statistics.median(configure), 1),
        "opentelemetry_loaded": loaded,
        "what": f"in-process time to {BASE_IMPORTS[function]} and load functions/main.py "
        f"with FUNCTION_TARGET={function} (the startup check, tracing.configure included), "
        "median of alternating off/on runs; off: TRACING=off; on: TRACING=file "
        "(TRACE_SAMPLE_RATIO=1); configure_after_off_ms: tracing.configure with TRACING=file "
        "(OpenTelemetry's import, the tracer's build) right after the off case's load, in "
        "the same process",
    }


def kept_out_cost(repeats: int) -> dict[str, Any]:
    """For each module shared/lazy_imports.py keeps out of a cold start: the ms to import it
    in a fresh interpreter that has loaded the ingress as served with the three apps
    (functions/main.py with FUNCTION_TARGET=ingress), median of `repeats`, beside the
    figure the list states."""
    from shared.lazy_imports import KEPT_OUT

    env = {**probe_env(), "HOOKLEDGER_APPS": THREE_APPS, "FUNCTION_TARGET": "ingress"}
    env.pop("FIRESTORE_EMULATOR_HOST")  # as deployed: the ingress has no Firestore
    served = f"{_load('ingress')}; import shared.apps; shared.apps.load()"
    figures: dict[str, Any] = {}
    for module, kept in KEPT_OUT.items():
        code = _timed_code(served, f"import {module}")
        if repeats > 1:  # one unmeasured run first, as above; --quick skips it
            _run_timed(code, env)
        after = []
        for _ in range(repeats):
            marks = _run_timed(code, env)[1]
            after.append(marks[1] - marks[0])
        figures[module] = {
            "ms": round(statistics.median(after), 1),
            "listed_ms": kept.ms,
            "brings": kept.brings,
        }
    return {
        "repeats": repeats,
        "modules": figures,
        "what": "import of each module after the served ingress with the three apps, median",
    }
