"""Every import inside a function in `shared/`, with the module it keeps out and its cost.

An import belongs at the top of its module. The one exception is an import that keeps a
heavy module out of a cold start, above all the ingress's: it must answer GitHub within
milliseconds and scales from zero, and it never touches Firestore or Gemini. Each such
import is listed here, once, by where it is (`module:function`) and what it imports; the
module's row in `KEPT_OUT` says what that import brings in which the process has not
loaded, and what it costs: milliseconds to import it in a fresh interpreter that has
already loaded the ingress as served with its three apps (`python -m bench.cold`, its
`kept_out` figures, median of 7, on this project's 2-core machine).

tests/unit/test_lazy_imports.py walks every function in `shared/` and fails on an import
inside one that is not listed here, on a row here that names no such import, and (in a
fresh interpreter) on a kept-out module the served ingress has loaded after all. The
apps follow their own rule (shared/api: "import heavy libraries inside handlers").
"""

from __future__ import annotations

from typing import NamedTuple


class KeptOut(NamedTuple):
    """What importing one module inside a function keeps out, and what it would cost."""

    brings: str  # the heavy package the import loads
    ms: float  # bench.cold `kept_out`: import after the served ingress, median ms
    cold_start: str = "ingress"  # whose cold start it keeps it out of


FIRESTORE = "google.cloud.firestore (the ledger)"
GEMINI = "google.genai (the Gemini client)"
GITHUB = "shared.github (the REST clients and the operations catalogue)"
BOTH = "google.cloud.firestore and google.genai"

# The imported module -> what importing it costs a process that has loaded the ingress.
KEPT_OUT: dict[str, KeptOut] = {
    "google.cloud.firestore": KeptOut(FIRESTORE, 43.5),
    "shared.ledger": KeptOut(FIRESTORE, 62.1),
    "shared.ledger.groups": KeptOut(FIRESTORE, 65.4),
    "shared.ledger.group_records": KeptOut(FIRESTORE, 67.9),
    "shared.ledger.submissions": KeptOut(FIRESTORE, 71.1),
    "shared.entrypoints.worker": KeptOut(FIRESTORE, 65.2),
    "shared.recovery": KeptOut(f"{FIRESTORE} and {GITHUB}", 79.8),
    "shared.gemini": KeptOut(GEMINI, 301.4),
    "shared.gemini.listing": KeptOut(GEMINI, 349.4),
    "shared.gemini.errors": KeptOut(GEMINI, 353.6),
    "shared.reconcile": KeptOut(BOTH, 413.3),
    "shared.reconcile.settings": KeptOut(BOTH, 525.9),
    "shared.settlement.settler": KeptOut(BOTH, 414.0),
    "shared.sharing.seal": KeptOut(BOTH, 431.7),
    "shared.github": KeptOut(GITHUB, 5.8),
    "shared.github.auth": KeptOut(GITHUB, 6.3),
    "shared.github.app": KeptOut(f"{GITHUB}, the App JWT", 6.8),
    "shared.github.checks": KeptOut(GITHUB, 8.3),
    "shared.github.rest": KeptOut(GITHUB, 9.7),
    "shared.github.installations": KeptOut(GITHUB, 7.2),
    "shared.github.hook_deliveries": KeptOut(GITHUB, 9.6),
    "shared.github.transport": KeptOut(GITHUB, 5.9),
    "shared.tracing.otel": KeptOut("opentelemetry.sdk (TRACING=off loads none of it)", 19.7),
    # A traced function builds its Cloud Trace exporter on the export thread's first trace.
    "google.cloud.trace_v2": KeptOut("the Cloud Trace client", 7.3, "a traced function"),
    "opentelemetry.exporter.cloud_trace": KeptOut(
        "the Cloud Trace exporter", 36.3, "a traced function"
    ),
}

# `module:function` -> the modules imported inside that function.
SITES: dict[str, tuple[str, ...]] = {
    "shared.entrypoints.runtime:firestore_client": ("google.cloud.firestore",),
    "shared.entrypoints.runtime:payloads_firestore_client": ("google.cloud.firestore",),
    "shared.entrypoints.runtime:ledger": ("shared.ledger",),
    "shared.entrypoints.runtime:gemini": ("shared.gemini",),
    "shared.entrypoints.runtime:gemini_call_deadline_s": ("shared.reconcile.settings",),
    "shared.entrypoints.runtime:build_github_auth": ("shared.github.auth", "shared.github.app"),
    "shared.entrypoints.runtime:app_credentials": ("shared.github.app",),
    "shared.entrypoints.runtime:github": ("shared.github",),
    "shared.entrypoints.runtime:comments": ("shared.github",),
    "shared.entrypoints.runtime:checks": ("shared.github.checks",),
    "shared.entrypoints.runtime:worker": ("shared.entrypoints.worker",),
    "shared.entrypoints.runtime:reconciler": ("shared.reconcile",),
    "shared.entrypoints.runtime:delivery_sweep": (
        "shared.github.hook_deliveries",
        "shared.github.transport",
        "shared.recovery",
    ),
    "shared.handlers.builtin:resolve_operation": ("shared.ledger",),
    "shared.handlers.builtin:echoed_id": ("shared.gemini",),
    "shared.handlers.builtin:settle_operation": ("shared.ledger", "shared.settlement.settler"),
    "shared.handlers.builtin:record_installation": ("shared.github.installations",),
    "shared.handlers.builtin:check_page": ("shared.reconcile",),
    "shared.handlers.context:HandlerContext._checks": ("shared.github.checks",),
    "shared.handlers.context:HandlerContext._github_api": ("shared.github.rest",),
    "shared.handlers.context:HandlerContext._token_auth": ("shared.github.auth",),
    "shared.settlement.cancel:supersede": ("shared.ledger",),
    "shared.settlement.cancel:cancel_batch": ("shared.ledger.groups",),
    "shared.sharing.join:join": ("shared.ledger.groups",),
    "shared.sharing.join:group_of": ("shared.ledger.group_records",),
    "shared.sharing.join:_seal": ("shared.sharing.seal",),
    "shared.submission:Submitter.__init__": ("shared.ledger.submissions",),
    "shared.submission:Submitter._decided_or_busy": ("shared.ledger.submissions",),
    "shared.submission:Submitter.claim": ("shared.ledger.submissions",),
    "shared.submission:Submitter._deliver": ("shared.ledger",),
    "shared.submission:Submitter.release": ("shared.ledger",),
    "shared.submission:tagged_batches": ("shared.gemini.listing",),
    "shared.submission:_refused_outright": ("shared.gemini.errors",),
    "shared.tracing:configure": ("shared.tracing.otel",),
    "shared.tracing.cloud:default_exporter": ("google.cloud.trace_v2",),
    "shared.tracing.cloud:published_exporter": ("opentelemetry.exporter.cloud_trace",),
}
