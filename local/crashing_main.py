"""functions/main.py's entry points with the crash plan's hook installed, each request
marked while it runs (local only).

Served by functions-framework (`--source=local/crashing_main.py`) in place of
functions/main.py when a test may make the functions really die at a crash point
(local/crash_plan.py; the test kit's `crash_at`), and where the kit must know when the
functions are idle (local/inflight.py). Never deployed: Terraform zips
functions/, shared/ and apps/ only.
"""

from __future__ import annotations

import importlib.util
import sys

from local.crash_plan import hook
from local.functions_server import MAIN
from local.inflight import tracked
from shared import crashpoints

crashpoints.install(hook)

# functions/main.py is a file, not a package module: load it by path, as functions-framework does.
_spec = importlib.util.spec_from_file_location("main", MAIN)
assert _spec is not None and _spec.loader is not None
_main = importlib.util.module_from_spec(_spec)
sys.modules["main"] = _main
_spec.loader.exec_module(_main)

ingress = tracked(_main.ingress)
worker = tracked(_main.worker)
reconcile = tracked(_main.reconcile)
