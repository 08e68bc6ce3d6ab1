"""The ledger's parts built on one client, as `shared.ledger.Ledger` composes them.

The index and exemption tests call the parts (`Operations`, `Deliveries`, `Queries`, …)
directly, so they follow each module, not the facade's method names; this is the one place
that knows how the facade wires them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from local.firestore_emulator import reset
from shared.clock import Clock
from shared.ledger.commits import Commits
from shared.ledger.deliveries import Deliveries
from shared.ledger.operations import Operations
from shared.ledger.outbox import Outbox, OutboxPolicy
from shared.ledger.queries import ConsoleQueries, Queries
from shared.ledger.results import Reviews
from shared.ledger.runs import AdoptionWatermark, Runs
from shared.ledger.submissions import Submissions
from tests.plugins.firestore import CLAIMS_DATABASE, PROJECT

RETENTION = timedelta(days=14)
GRACE = timedelta(seconds=90)


@dataclass(frozen=True)
class Parts:
    operations: Operations
    outbox: Outbox
    deliveries: Deliveries
    reviews: Reviews
    submissions: Submissions
    queries: Queries
    console: ConsoleQueries
    runs: Runs
    watermark: AdoptionWatermark


def ledger_parts(client: Any, clock: Clock) -> Parts:
    commits = Commits(client)
    operations = Operations(commits, clock, grace=GRACE, retention=RETENTION)
    return Parts(
        operations=operations,
        outbox=Outbox(commits, operations, clock, OutboxPolicy(), retention=RETENTION),
        deliveries=Deliveries(commits, clock, retention=RETENTION),
        reviews=Reviews(commits),
        submissions=Submissions(commits, operations),
        queries=Queries(commits, operations),
        console=ConsoleQueries(commits, operations),
        runs=Runs(commits, retention=RETENTION),
        watermark=AdoptionWatermark(commits),
    )


@contextlib.contextmanager
def emptied_clients(emulator: str) -> Iterator[tuple[Any, Any]]:
    """Clients on the ledger's and the claim store's databases, both emptied: for a
    module-scoped fixture that runs one scenario and keeps only what it recorded."""
    from google.cloud import firestore

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FIRESTORE_EMULATOR_HOST", emulator)
        reset(emulator, PROJECT)
        reset(emulator, PROJECT, CLAIMS_DATABASE)
        ledger = firestore.Client(project=PROJECT)
        claims = firestore.Client(project=PROJECT, database=CLAIMS_DATABASE)
        try:
            yield ledger, claims
        finally:
            ledger.close()
            claims.close()
