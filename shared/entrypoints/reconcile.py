"""The reconcile entry point: check Cloud Scheduler's token, run one pass, report.

Two routes, each on its own Cloud Scheduler job: `POST /github-deliveries` runs one
GitHub delivery sweep (shared/recovery), any other path one reconcile pass.

Answers (docs/architecture.md, "reconcile"):
- 200 with the run's report (`RunReport.to_dict()`, `SweepReport.to_dict()`), also when
  it stopped at its deadline (the next run resumes where it stopped); a sweep without a
  GitHub App configured answers 200 `{"skipped": ...}`;
- 401/403: the OIDC token does not verify, or comes from another account; nothing runs;
- 503 when the run failed with a retryable error (Firestore unavailable…), 500 for any
  other failure: Cloud Scheduler records the attempt as failed either way.

The reconciler is built on the first authorized POST, not for `/healthz`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from shared import logs, tracing
from shared.entrypoints.http import Endpoint, Reply
from shared.errors import retryable
from shared.signatures.oidc import OidcError, OidcVerifier

if TYPE_CHECKING:
    from shared.reconcile import Reconciler
    from shared.recovery import DeliverySweep

log = logs.get_logger("reconcile")
SWEEP_ROUTE = "github-deliveries"


class ReconcileEndpoint(Endpoint):
    """POST (any path) runs one pass of `reconciler()`; built once per process."""

    def __init__(
        self,
        reconciler: Callable[[], Reconciler],
        *,
        oidc: OidcVerifier | None = None,
        sweep: Callable[[], DeliverySweep | None] | None = None,
    ) -> None:
        self._reconciler = reconciler
        self._oidc = oidc
        self._sweep = sweep

    def post(self, route: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """Run one pass once the caller is verified (when OIDC is configured)."""
        if self._oidc is not None:
            try:
                self._oidc.verify(headers)
            except OidcError as exc:
                logs.event(log, logging.WARNING, "reconcile call refused", reason=str(exc))
                return Reply(exc.status, {"error": str(exc)})
        if route.strip("/") == SWEEP_ROUTE:
            return self._run_sweep(headers)
        try:
            with tracing.server_span("reconcile.run", headers) as span:
                report = self._reconciler().run()
                span.set(**{f"reconcile.{k}": v for k, v in _counts(report.to_dict()).items()})
        except Exception as exc:  # answer, and log it, rather than a bare 500 from Flask
            return _failed("reconcile pass", exc)
        return Reply(200, report.to_dict())

    def _run_sweep(self, headers: Mapping[str, str]) -> Reply:
        """One GitHub delivery sweep (its own errors are in its report)."""
        try:
            sweep = self._sweep() if self._sweep is not None else None
            if sweep is None:
                return Reply(200, {"skipped": "no GitHub App is configured (GITHUB_APP_ID)"})
            with tracing.server_span("reconcile.github_deliveries", headers):
                report = sweep.run()
        except Exception as exc:  # answer, and log it, rather than a bare 500 from Flask
            return _failed("github delivery sweep", exc)
        return Reply(200, report.to_dict())


def _failed(what: str, exc: Exception) -> Reply:
    """503 for a retryable failure, else 500; logged with its traceback."""
    status = 503 if retryable(exc) else 500
    logs.event(
        log,
        logging.ERROR,
        f"{what} failed: {type(exc).__name__}: {exc}",
        exc_info=True,
        status=status,
    )
    return Reply(status, {"error": f"{what} failed: {type(exc).__name__}"})


def _counts(report: Mapping[str, Any]) -> dict[str, int]:
    """The report's counters (settled, examined, …), the numbers a run's span carries."""
    return {k: v for k, v in report.items() if isinstance(v, int) and not isinstance(v, bool)}
