"""The reconcile entry point: check Cloud Scheduler's token, run one reconcile pass, report.

Answers (docs/architecture.md, "reconcile"):
- 200 with the run's report (`RunReport.to_dict()`), also when it stopped at its deadline
  (the next run resumes where it stopped);
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

log = logs.get_logger("reconcile")


class ReconcileEndpoint(Endpoint):
    """POST (any path) runs one pass of `reconciler()`; built once per process."""

    def __init__(
        self, reconciler: Callable[[], Reconciler], *, oidc: OidcVerifier | None = None
    ) -> None:
        self._reconciler = reconciler
        self._oidc = oidc

    def post(self, route: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """Run one pass once the caller is verified (when OIDC is configured)."""
        if self._oidc is not None:
            try:
                self._oidc.verify(headers)
            except OidcError as exc:
                logs.event(log, logging.WARNING, "reconcile call refused", reason=str(exc))
                return Reply(exc.status, {"error": str(exc)})
        try:
            with tracing.server_span("reconcile.run", headers) as span:
                report = self._reconciler().run()
                span.set(**{f"reconcile.{k}": v for k, v in _counts(report.to_dict()).items()})
        except Exception as exc:  # answer, and log it, rather than a bare 500 from Flask
            status = 503 if retryable(exc) else 500
            logs.event(
                log,
                logging.ERROR,
                f"reconcile pass failed: {type(exc).__name__}: {exc}",
                exc_info=True,
                status=status,
            )
            return Reply(status, {"error": f"reconcile pass failed: {type(exc).__name__}"})
        return Reply(200, report.to_dict())


def _counts(report: Mapping[str, Any]) -> dict[str, int]:
    """The report's counters (settled, examined, …), the numbers a run's span carries."""
    return {k: v for k, v in report.items() if isinstance(v, int) and not isinstance(v, bool)}
