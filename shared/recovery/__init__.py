"""GitHub delivery recovery: find every GitHub App delivery that never reached the
worker, and bring it back (docs/architecture.md, "Reconcile").

GitHub does not retry a failed delivery: one that met the ingress down (a deploy), a 503
(Cloud Tasks unreachable, so no task was made) or an answer after its 10 s is lost
unless someone redelivers it within 3 days. A sweep run, on its own Cloud Scheduler job
(the reconcile function's `/github-deliveries` route) with the App's JWT:

1. lists the App's deliveries newest first (`GET /app/hook/deliveries`), from the newest
   down to the newest delivery of the last complete listing less an overlap
   (`SweepSettings.overlap`, so a delivery GitHub records late is not missed), after
   finishing a listing an earlier run's budget stopped; the checkpoint,
   `reconcile_state/github_deliveries`, keeps both. Past its first `full_pages` pages
   (`GITHUB_SWEEP_FULL_PAGES`, 10) a listing reads only the deliveries GitHub counts as
   failed (`status=failure`: a `status_code` of 400-599), from the newest again, so its
   cost grows with failures, not with deliveries; an attempt that got no answer at all is
   seen only within the full pages (GitHub does not say where `status=failure` puts it);
2. opens a recovery, `github_recoveries/{guid}` (created once), for each event with no
   successful attempt in the listing that an app takes: a failed or throttled attempt;
3. takes every open recovery one step (`act.py`): closed when the ledger has the
   delivery (`accepted` if the ingress had taken it after all, `recovered` if the sweep
   brought it back); after `grace`, GitHub is asked once to redeliver it; if that has not
   arrived `grace` later, the sweep reads the delivery from GitHub and hands it to the
   worker itself (`handoff.py`, which says why that is as trustworthy as a signature),
   stamped with when GitHub first sent it (installation events, which are ordered by
   that time, are handed off at once, never redelivered); a handed-off delivery still
   not in the ledger `unrecorded_after` later is handed off once more, and
   `unrecorded_after` after that raises one `github_recovery_unrecorded` alert;
   one `github_delivery_unrecoverable` alert when it is about to leave GitHub's 3 days;
   one recovery's failure stops no other's step.

A run costs at most `full_pages` plus O(new failed deliveries) GitHub calls (one per 100
listed, one per recovery step)
and Firestore reads (the checkpoint, one per open recovery and its ledger check). The
listing and the acting each have a budget (`RunBudget`: the listing's from the run's
start, the acting's from its own start plus what the listing left), so a long catch-up
listing never stops redeliveries; no GitHub call is made before a `retry-after` passes.
GitHub's `retry-after` holds every GitHub call of the run and of later runs until it
passes. A listing position GitHub refuses, or fails at 3 runs in a row, is dropped for a
fresh listing down to the same floor; no finished listing for 6 h raises
`github_sweep_behind`. Overlapping runs are safe: a recovery is opened by a create, a
redelivery is claimed by a conditional write, a hand-off is a task named after the guid;
a delivery that arrives twice anyway is one delivery to the worker's ledger.

Modules: `report` (SweepReport, SweepSettings, RunBudget), `sweep` (DeliverySweep), `act`
(RecoveryActions), `handoff` (WorkerHandOff, Recovered).
"""

from __future__ import annotations

from shared.recovery.act import ALERT, UNRECORDED_ALERT, RunContext
from shared.recovery.handoff import Recovered, WorkerHandOff, recovered_task_id, rehanded_task_id
from shared.recovery.report import RunBudget, SweepReport, SweepSettings
from shared.recovery.sweep import BEHIND_ALERT, DeliverySweep

__all__ = [
    "ALERT",
    "BEHIND_ALERT",
    "UNRECORDED_ALERT",
    "DeliverySweep",
    "Recovered",
    "RunBudget",
    "RunContext",
    "SweepReport",
    "SweepSettings",
    "WorkerHandOff",
    "recovered_task_id",
    "rehanded_task_id",
]
