"""Claim keys: a valid, bounded Firestore document id for any delivery id, stable per delivery."""

from __future__ import annotations

import pytest

from local.fakes import MemoryPayloadStore
from shared.handoff.payloads import MAX_PAYLOAD_KEY_CHARS, READABLE_ID_CHARS, payload_key

# Firestore: at most 1,500 bytes, no "/", not "." or "..", not __.*__.
FIRESTORE_ID_BYTES = 1500

LONG_NON_ASCII = "délivrance-配達-🚚" * 12  # 200 characters, ~470 UTF-8 bytes

CASES = [
    ("a GitHub GUID", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
    ("a Gemini message id", "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"),
    ("a 200-character non-ASCII id", LONG_NON_ASCII[:200]),
    ("a 10,000-character ASCII id", "a" * 10_000),
    ("slashes and dots", "../../payloads/x/chunks/00000"),
    ("dunder", "__id__"),
    ("a lone surrogate (decoded from JSON)", "id-\ud800-end"),
    ("a percent sign and a plus", "50%+off"),
]


@pytest.mark.parametrize(("name", "delivery_id"), CASES, ids=[c[0] for c in CASES])
def test_every_delivery_id_gives_a_usable_bounded_key(name: str, delivery_id: str) -> None:
    key = payload_key("github", delivery_id)

    assert key.isascii(), name
    assert len(key) <= MAX_PAYLOAD_KEY_CHARS < FIRESTORE_ID_BYTES, name
    assert "/" not in key and key not in (".", "..") and not key.startswith("__"), name
    assert key.startswith("github:"), name
    assert payload_key("github", delivery_id) == key, f"{name}: not stable"
    store = MemoryPayloadStore()
    assert store.get(store.put(key, b"body")) == b"body", name


def test_a_short_id_stays_readable() -> None:
    assert payload_key("github", "72d3162e-cc78") == "github:72d3162e-cc78"
    assert payload_key("gemini", "a b/c") == "gemini:a%20b%2Fc"


def test_a_long_id_keeps_a_readable_prefix_and_ends_in_its_hash() -> None:
    key = payload_key("github", LONG_NON_ASCII[:200])

    readable, digest = key.removeprefix("github:").split("+")
    assert readable.startswith("d%C3%A9livrance-")
    assert len(digest) == 64 and int(digest, 16) >= 0
    assert "%" not in readable[-2:], "the prefix was cut inside an escape"


def test_long_ids_sharing_a_prefix_get_different_keys() -> None:
    base = "x" * (READABLE_ID_CHARS + 10)

    keys = {payload_key("github", base + suffix) for suffix in ("a", "b", "é")}

    assert len(keys) == 3


def test_a_readable_key_never_equals_a_hashed_one() -> None:
    # Only a hashed key holds a "+": encoding turns every "+" of a delivery id into %2B.
    readable = payload_key("github", "+" * 20 + "a" * 10)
    hashed = payload_key("github", "+" * (READABLE_ID_CHARS + 1))

    assert readable == "github:" + "%2B" * 20 + "a" * 10
    assert hashed.count("+") == 1


def test_sources_keep_their_keys_apart() -> None:
    assert payload_key("github", "same") != payload_key("gemini", "same")


@pytest.mark.parametrize(("source", "delivery_id"), [("", "d"), ("github", "")])
def test_an_empty_source_or_id_is_a_caller_error(source: str, delivery_id: str) -> None:
    with pytest.raises(ValueError, match="source and a delivery id"):
        payload_key(source, delivery_id)
