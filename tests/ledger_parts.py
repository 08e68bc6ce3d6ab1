"""The ledger on one client, for tests that call its parts (`ledger.operations`, …) directly.

The index and exemption tests drive every part; this is the one place they build it.
`installation_event` is the facts of one GitHub App installation event, for the tests
that record one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from local.firestore_emulator import reset
from shared.clock import Clock
from shared.github.installations import InstallationEvent
from shared.ledger import Ledger
from tests.plugins.firestore import CLAIMS_DATABASE, PROJECT


def installation_event(number: int, *, suspended: bool = False, **facts: Any) -> InstallationEvent:
    """An `installation` event's facts (shared/github/installations.py), a selected one."""
    fields: dict[str, Any] = {
        "installation_id": number,
        "action": "suspend" if suspended else "created",
        "account": "octo-org",
        "deleted": False,
        "suspended": suspended,
        "repository_selection": "selected",
        "repositories": ("octo-org/handbook",),
        **facts,
    }
    return InstallationEvent(**fields)


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
