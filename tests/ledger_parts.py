"""The ledger on one client, for tests that call its parts (`ledger.operations`, …) directly.

The index and exemption tests drive every part; this is the one place they build it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from local.firestore_emulator import reset
from shared.clock import Clock
from shared.ledger import Ledger
from tests.plugins.firestore import CLAIMS_DATABASE, PROJECT


def ledger_parts(client: Any, clock: Clock) -> Ledger:
    """A `Ledger` with the production defaults; its parts are its attributes."""
    return Ledger(client, clock=clock)


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
