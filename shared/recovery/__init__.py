"""GitHub delivery recovery: find every GitHub App delivery that never reached the
worker, and bring it back (docs/architecture.md, "Reconcile").

GitHub does not retry a failed delivery: one that met the ingress down (a deploy), a 503
(Cloud Tasks unreachable, so no task was made) or an answer after its 10 s is lost
unless someone redelivers it within 3 days. A sweep run, on its own Cloud Scheduler job
(the reconcile function's `/github-deliveries` route) with the App's JWT:

1. lists the App's deliveries newest first (`GET /app/hook/deliveries`), from where the
   last complete listing began down to its newest delivery less an overlap
   (`SweepSettings.overlap`, so a delivery GitHub records late is not missed), resuming
   a listing an earlier run's budget stopped; the position is the checkpoint,
   `reconcile_state/github_deliveries`;
2. opens a recovery, `github_recoveries/{guid}` (created once), for each event with no
   successful attempt in the listing that an app takes: a failed or throttled attempt;
3. takes every open recovery one step (`act.py`): closed when the ledger has the
   delivery (`accepted` if the ingress had taken it after all, `recovered` if the sweep
   brought it back); after `grace`, GitHub is asked once to redeliver it; if that has not
   arrived `grace` later, the sweep reads the delivery from GitHub and hands it to the
   worker itself (`handoff.py`, which says why that is as trustworthy as a signature);
   one `github_delivery_unrecoverable` alert when it is about to leave GitHub's 3 days.

A run costs O(new deliveries) GitHub calls (one per 100 listed, one per recovery step)
and Firestore reads (the checkpoint, one per open recovery and its ledger check); it
starts nothing after `budget_s` and does not call GitHub before a `retry-after` passes.
Overlapping runs are safe: a recovery is opened by a create and every step that sends
something is claimed by a conditional write; a delivery that arrives twice anyway is
one delivery to the worker's ledger.

Modules: `report` (SweepReport, SweepSettings), `sweep` (DeliverySweep), `act`
(RecoveryActions), `handoff` (WorkerHandOff).
"""

from __future__ import annotations

from shared.recovery.act import ALERT
from shared.recovery.handoff import WorkerHandOff, recovered_task_id
from shared.recovery.report import SweepReport, SweepSettings
from shared.recovery.sweep import DeliverySweep

__all__ = [
    "ALERT",
    "DeliverySweep",
    "SweepReport",
    "SweepSettings",
    "WorkerHandOff",
    "recovered_task_id",
]
