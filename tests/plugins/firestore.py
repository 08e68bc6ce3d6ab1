"""The official Firestore emulator for the whole test session, emptied between tests.

Two databases, as deployed: `(default)` for the ledger and `CLAIMS_DATABASE` for the claim
store (the emulator serves a named database on first use, no setup).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from local.firestore_emulator import reset, start_firestore
from local.processes import ServiceError, start_on_free_ports
from shared.config import Config

PROJECT = "demo-hookledger"
CLAIMS_DATABASE = Config().claims_database


@pytest.fixture(scope="session")
def firestore_emulator() -> Iterator[str]:
    """`host:port` of a running emulator; FIRESTORE_EMULATOR_HOST points at it. Never skips."""
    try:
        service, (port,) = start_on_free_ports(start_firestore)
    except ServiceError as exc:
        pytest.fail(str(exc), pytrace=False)
    host_port = f"127.0.0.1:{port}"
    previous = os.environ.get("FIRESTORE_EMULATOR_HOST")
    os.environ["FIRESTORE_EMULATOR_HOST"] = host_port
    try:
        yield host_port
    finally:
        service.stop()
        if previous is None:
            os.environ.pop("FIRESTORE_EMULATOR_HOST", None)
        else:
            os.environ["FIRESTORE_EMULATOR_HOST"] = previous


@pytest.fixture
def firestore_client(firestore_emulator: str):  # type: ignore[no-untyped-def]
    """A Firestore client on the ledger's `(default)` database; both databases start empty."""
    from google.cloud import firestore

    reset(firestore_emulator, PROJECT)
    reset(firestore_emulator, PROJECT, CLAIMS_DATABASE)
    client = firestore.Client(project=PROJECT)
    yield client
    client.close()


@pytest.fixture
def claims_firestore_client(firestore_client):  # type: ignore[no-untyped-def]
    """A Firestore client on the claim store's own database (emptied with the ledger's)."""
    from google.cloud import firestore

    client = firestore.Client(project=PROJECT, database=CLAIMS_DATABASE)
    yield client
    client.close()
