"""The `clock` and `ledger` fixtures most ledger tests share.

- `clock`: a fresh `FakeClock` (2026-01-01T00:00:00Z), advanced only by the test.
- `ledger`: a `Ledger` on the emulator's `firestore_client`, reading `clock`.

A module that needs another ledger (a grace of 0, seeded operations) defines its own
`ledger` fixture, which takes precedence over this one.
"""

from __future__ import annotations

from typing import Any

import pytest

from local.fakes import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ledger(firestore_client: Any, clock: FakeClock) -> Any:
    from shared.ledger import Ledger  # imports google.cloud.firestore: only when used

    return Ledger(firestore_client, clock=clock)
