"""The Firestore claim store against the official emulator, in its own database as deployed:
big payloads round-trip, stay out of the task and out of the ledger's database, any
delivery id gives a usable key, and corruption is detected."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from local.fakes import FakeClock
from shared.handoff.envelope import Envelope, EnvelopeSealer, resolve_body
from shared.handoff.payloads import (
    CHUNK_BYTES,
    FirestorePayloadStore,
    PayloadConflict,
    PayloadCorrupt,
    PayloadNotFound,
    payload_key,
)

MIB = 1024 * 1024
START = datetime(2026, 1, 1, tzinfo=UTC)


def payload(size: int) -> bytes:
    """Incompressible-looking, position-dependent bytes: a misplaced chunk changes them."""
    block = hashlib.sha256(str(size).encode()).digest() * 2048  # 64 KiB
    whole, rest = divmod(size, len(block))
    return b"".join(i.to_bytes(4, "big") + block[4:] for i in range(whole)) + block[:rest]


def envelope(body: bytes, delivery_id: str = "d-big") -> Envelope:
    return Envelope(
        source="github",
        event="push",
        delivery_id=delivery_id,
        received_at=START,
        headers={"x-github-event": "push", "x-github-delivery": delivery_id},
        body=body,
    )


@pytest.fixture
def store(claims_firestore_client):
    return FirestorePayloadStore(claims_firestore_client, clock=FakeClock(START))


@pytest.mark.slow
def test_a_5_mib_body_round_trips_and_the_sealed_envelope_stays_under_1_mb(
    claims_firestore_client, store
):
    body = payload(5 * MIB)
    clock = FakeClock(START)
    sealer = EnvelopeSealer(["local-envelope-key"], clock=clock, payloads=store)

    sealed = sealer.seal(envelope(body))
    opened = EnvelopeSealer(["local-envelope-key"], clock=clock).open(sealed)

    assert len(sealed) < 1_000_000
    assert resolve_body(opened, store) == body
    parent = (
        claims_firestore_client.collection("payloads").document(opened.payload_ref).get().to_dict()
    )
    assert parent["sha256"] == hashlib.sha256(body).hexdigest()
    assert parent["size"] == len(body)
    assert parent["chunks"] == -(-len(body) // CHUNK_BYTES) == 6
    assert parent["expire_at"] == START + timedelta(days=14)
    chunks = list(
        claims_firestore_client.collection("payloads")
        .document(opened.payload_ref)
        .collection("chunks")
        .stream()
    )
    assert len(chunks) == 6
    assert all(len(c.get("data")) <= CHUNK_BYTES for c in chunks)
    assert all(c.get("expire_at") == START + timedelta(days=14) for c in chunks)


@pytest.mark.slow
def test_a_25_mib_body_round_trips(store):
    body = payload(25 * MIB)

    ref = store.put(payload_key("gemini", "msg_25"), body)

    assert store.get(ref) == body


def test_putting_the_same_payload_again_is_a_no_op_and_a_different_one_conflicts(
    claims_firestore_client, store
):
    body = payload(2 * MIB)
    key = payload_key("github", "d-again")

    first = store.put(key, body)
    created = claims_firestore_client.collection("payloads").document(key).get().update_time
    second = store.put(key, body)

    assert first == second == key
    assert claims_firestore_client.collection("payloads").document(key).get().update_time == created
    with pytest.raises(PayloadConflict, match=key):
        store.put(key, payload(2 * MIB + 1))
    assert store.get(key) == body


def test_a_corrupted_chunk_is_detected(claims_firestore_client, store):
    body = payload(3 * MIB)
    key = store.put(payload_key("github", "d-corrupt"), body)
    chunk = (
        claims_firestore_client.collection("payloads")
        .document(key)
        .collection("chunks")
        .document("00001")
    )
    data = bytearray(chunk.get().get("data"))
    data[1000] ^= 0x01
    chunk.update({"data": bytes(data)})

    with pytest.raises(PayloadCorrupt, match=key):
        store.get(key)


def test_a_missing_chunk_is_detected(claims_firestore_client, store):
    key = store.put(payload_key("github", "d-missing"), payload(2 * MIB))
    claims_firestore_client.collection("payloads").document(key).collection("chunks").document(
        "00002"
    ).delete()

    with pytest.raises(PayloadCorrupt, match="chunk 2"):
        store.get(key)


def test_an_unknown_claim_is_not_found(store):
    with pytest.raises(PayloadNotFound, match="github:nothing"):
        store.get("github:nothing")


def test_a_200_character_non_ascii_delivery_id_seals_and_resolves(claims_firestore_client, store):
    delivery = ("délivrance-配達-🚚" * 12)[:200]
    body = payload(MIB)
    clock = FakeClock(START)
    sealer = EnvelopeSealer(["local-envelope-key"], clock=clock, payloads=store)

    opened = sealer.open(sealer.seal(envelope(body, delivery_id=delivery)))

    assert opened.payload_ref == payload_key("github", delivery)
    assert len(opened.payload_ref.encode()) <= 256
    assert resolve_body(opened, store) == body
    assert claims_firestore_client.collection("payloads").document(opened.payload_ref).get().exists


def test_claims_land_in_the_claims_database_and_nothing_in_the_ledgers(
    firestore_client, claims_firestore_client, store
):
    key = store.put(payload_key("github", "d-apart"), payload(2 * MIB))

    assert {c.id for c in claims_firestore_client.collections()} == {"payloads"}
    assert list(firestore_client.collections()) == []
    assert store.get(key) == payload(2 * MIB)
