"""The signed worker envelope: round trip, tampering, rotation, age, malformed input, and
a large body stored apart (with the in-memory store; the Firestore store is in
integration)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from local.fakes import FakeClock, MemoryPayloadStore
from shared.config import LOCAL_ENVELOPE_KEY
from shared.handoff.envelope import (
    DEFAULT_MAX_AGE_S,
    KEPT_HEADERS,
    MAX_SEALED_BYTES,
    SOURCES,
    Envelope,
    EnvelopeError,
    EnvelopeSealer,
    EnvelopeTooLarge,
    resolve_body,
    select_headers,
)
from shared.handoff.payloads import PayloadCorrupt, PayloadError, payload_key
from shared.signatures import SecretError, VerificationError

OLD_KEY = LOCAL_ENVELOPE_KEY
NEW_KEY = "new-envelope-key-0123456789"
RECEIVED = datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)
BODY = b'{"ref":"refs/heads/main","commits":[]}'
HEADERS = {"x-github-event": "push", "x-github-delivery": "d-1", "content-type": "application/json"}


def envelope(**changes: object) -> Envelope:
    fields: dict[str, object] = {
        "source": "github",
        "event": "push",
        "delivery_id": "d-1",
        "received_at": RECEIVED,
        "headers": HEADERS,
        "body": BODY,
    }
    fields.update(changes)
    return Envelope(**fields)  # type: ignore[arg-type]


def sealer(keys=(OLD_KEY,), clock=None, **options) -> EnvelopeSealer:
    return EnvelopeSealer(list(keys), clock=clock or FakeClock(), **options)


def _split(data: bytes) -> tuple[dict, bytes]:
    """A version 2 envelope's signed line, parsed, and the body after it."""
    line, newline, body = data.partition(b"\n")
    assert newline, "a version 2 envelope has a line end"
    return json.loads(line), body


def _join(outer: dict, body: bytes) -> bytes:
    return json.dumps(outer).encode() + b"\n" + body


def test_seal_then_open_returns_the_same_envelope():
    clock = FakeClock()
    original = envelope()

    data = sealer(clock=clock).seal(original)
    opened = sealer(clock=clock).open(data)

    assert opened == original
    assert opened.body == BODY
    assert opened.sealed_at == clock()
    outer, body = _split(data)
    assert outer["v"] == 2
    assert body == BODY, "the body travels as is, after the signed line"
    assert json.loads(outer["payload"])["body_sha256"] == hashlib.sha256(BODY).hexdigest()


def test_the_body_is_sealed_by_its_digest_not_copied():
    body = b"x" * 100_000
    data = sealer().seal(envelope(body=body))

    assert len(data) < len(body) + 1_000, "no base64, no second copy"
    assert data.count(b"x" * 1000) == 100


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("a byte changed", lambda body: body.replace(b"main", b"evil")),
        ("a byte added", lambda body: body + b" "),
        ("a byte cut", lambda body: body[:-1]),
        ("the body removed", lambda body: b""),
    ],
)
def test_a_tampered_body_is_refused(name, change):
    outer, body = _split(sealer().seal(envelope()))

    with pytest.raises(EnvelopeError, match="sha256"):
        sealer().open(_join(outer, change(body)))


def test_an_envelope_with_a_stored_body_and_a_body_is_refused():
    data = sealer(payloads=MemoryPayloadStore(), payload_threshold_bytes=8).seal(envelope())
    outer, body = _split(data)
    assert body == b""

    with pytest.raises(EnvelopeError, match="stored body"):
        sealer().open(_join(outer, BODY))


def test_a_binary_body_and_unicode_fields_round_trip():
    clock = FakeClock()
    original = envelope(body=bytes(range(256)) * 4, event="issues", delivery_id="dé-1/ü")

    assert sealer(clock=clock).open(sealer(clock=clock).seal(original)) == original


def test_reserializing_the_signed_line_does_not_break_the_signature():
    outer, body = _split(sealer().seal(envelope()))
    reformatted = json.dumps(outer, sort_keys=True, ensure_ascii=False).encode()

    assert sealer().open(reformatted + b"\n" + body) == envelope()


def test_reserializing_a_legacy_envelope_does_not_break_its_signature():
    clock = FakeClock()
    data = _legacy_seal(envelope(), int(clock().timestamp()), OLD_KEY)
    reformatted = json.dumps(json.loads(data), indent=4, sort_keys=True, ensure_ascii=False)

    assert sealer(clock=clock).open(reformatted.encode()) == envelope()


def test_select_headers_keeps_delivery_headers_and_drops_every_secret():
    request_headers = {
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": "d-1",
        "X-Hub-Signature-256": "sha256=abc",
        "X-Hub-Signature": "sha1=abc",
        "Webhook-Id": "msg_1",
        "Webhook-Timestamp": "1767225600",
        "Webhook-Signature": "v1,abc",
        "Authorization": "Bearer token",
        "Cookie": "session=1",
    }

    assert select_headers(request_headers) == {
        "x-github-event": "push",
        "x-github-delivery": "d-1",
        "webhook-id": "msg_1",
        "webhook-timestamp": "1767225600",
    }


BAD_ENVELOPES = [
    ("unknown source", {"source": "gitlab"}),
    ("empty event", {"event": ""}),
    ("empty delivery id", {"delivery_id": ""}),
    ("naive received_at", {"received_at": datetime(2026, 1, 1)}),
    ("a signature header", {"headers": {"x-hub-signature-256": "sha256=abc"}}),
    ("an authorization header", {"headers": {"authorization": "Bearer x"}}),
    ("neither body nor payload_ref", {"body": None}),
    ("both body and payload_ref", {"payload_ref": "github:d-1", "body_sha256": "0" * 64}),
    ("payload_ref without sha256", {"body": None, "payload_ref": "github:d-1"}),
    ("body that is text", {"body": "text"}),
]


@pytest.mark.parametrize(("name", "changes"), BAD_ENVELOPES, ids=[c[0] for c in BAD_ENVELOPES])
def test_an_envelope_refuses_bad_fields(name, changes):
    with pytest.raises(ValueError):
        envelope(**changes)


# ------------------------------------------------------------------------ tampering


def _tamper_payload(data: bytes, old: str, new: str) -> bytes:
    outer, body = _split(data)
    assert old in outer["payload"]
    outer["payload"] = outer["payload"].replace(old, new)
    return _join(outer, body)


def test_a_tampered_payload_is_rejected():
    data = sealer().seal(envelope())

    with pytest.raises(EnvelopeError, match="signature"):
        sealer().open(_tamper_payload(data, '"event":"push"', '"event":"ping"'))


def test_a_tampered_signature_is_rejected():
    outer, body = _split(sealer().seal(envelope()))
    sig = outer["sig"]
    outer["sig"] = ("B" if sig[0] == "A" else "A") + sig[1:]

    with pytest.raises(EnvelopeError, match="signature"):
        sealer().open(_join(outer, body))


def test_a_digest_swapped_for_the_tampered_bodys_is_rejected():
    tampered = BODY.replace(b"main", b"evil")
    data = _tamper_payload(
        sealer().seal(envelope()),
        hashlib.sha256(BODY).hexdigest(),
        hashlib.sha256(tampered).hexdigest(),
    )
    outer, _ = _split(data)

    with pytest.raises(EnvelopeError, match="signature"):
        sealer().open(_join(outer, tampered))


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_any_single_character_change_to_the_payload_is_rejected(data):
    outer, body = _split(sealer().seal(envelope()))
    payload = outer["payload"]
    index = data.draw(st.integers(0, len(payload) - 1))
    char = data.draw(st.characters(codec="ascii").filter(lambda c: c != payload[index]))
    outer["payload"] = payload[:index] + char + payload[index + 1 :]

    with pytest.raises(EnvelopeError):
        sealer().open(_join(outer, body))


def _plain_canonical(fields: dict) -> bytes:
    """The signed text, as the format has always written it: the standard library's JSON."""
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _plain_mac(key: str, payload: bytes, version: int) -> str:
    domain = b"hookledger-envelope-v%d\n" % version
    digest = hmac.new(key.encode(), domain + payload, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _reference_seal(original: Envelope, sealed_at: int, key: str) -> bytes:
    """The wire format (version 2) as its module docstring states it, built the plain way."""
    body = original.body
    fields = {
        "v": 2,
        "source": original.source,
        "event": original.event,
        "delivery_id": original.delivery_id,
        "received_at": original.received_at.astimezone(UTC).isoformat(),
        "sealed_at": sealed_at,
        "headers": dict(original.headers),
        "claim": original.payload_ref,
        "body_sha256": original.body_sha256 if body is None else hashlib.sha256(body).hexdigest(),
    }
    payload = _plain_canonical(fields)
    outer = {"v": 2, "payload": payload.decode("ascii"), "sig": _plain_mac(key, payload, 2)}
    return json.dumps(outer, separators=(",", ":")).encode("ascii") + b"\n" + (body or b"")


def _legacy_seal(original: Envelope, sealed_at: int, key: str) -> bytes:
    """A version 1 envelope, as sealers wrote them before version 2 (tasks still queued)."""
    fields = {
        "v": 1,
        "source": original.source,
        "event": original.event,
        "delivery_id": original.delivery_id,
        "received_at": original.received_at.astimezone(UTC).isoformat(),
        "sealed_at": sealed_at,
        "headers": dict(original.headers),
        "body": None if original.body is None else base64.b64encode(original.body).decode(),
        "claim": original.payload_ref,
        "body_sha256": original.body_sha256,
    }
    payload = _plain_canonical(fields)
    outer = {"v": 1, "payload": payload.decode("ascii"), "sig": _plain_mac(key, payload, 1)}
    return json.dumps(outer, separators=(",", ":")).encode("ascii")


# Any text (quotes, backslashes, control and non-ASCII characters: escaped), and ASCII
# from space to DEL, which mostly needs no escape: the signed text's two ways of writing.
_TEXT = st.one_of(
    st.text(min_size=1, max_size=40),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7F), min_size=1, max_size=40),
)
_HEADERS = st.dictionaries(st.sampled_from(sorted(KEPT_HEADERS)), _TEXT, max_size=4)


@settings(max_examples=60, deadline=None)
@given(
    source=st.sampled_from(SOURCES),
    event=_TEXT,
    delivery_id=_TEXT,
    headers=_HEADERS,
    body=st.one_of(st.none(), st.binary(max_size=600)),
    offset_s=st.integers(-(10**9), 10**9),
)
def test_seal_is_byte_for_byte_the_plain_construction(
    source, event, delivery_id, headers, body, offset_s
):
    clock = FakeClock()
    stored = {} if body is not None else {"payload_ref": "claims/x", "body_sha256": "ab" * 32}
    original = Envelope(
        source=source,
        event=event,
        delivery_id=delivery_id,
        received_at=RECEIVED + timedelta(seconds=offset_s),
        headers=headers,
        body=body,
        **stored,  # type: ignore[arg-type]
    )

    sealed = sealer(clock=clock).seal(original)

    assert sealed == _reference_seal(original, int(clock().timestamp()), OLD_KEY)
    if body is not None:  # the digest a caller already has seals the same bytes
        digest = hashlib.sha256(body).hexdigest()
        assert sealer(clock=clock).seal(original, body_sha256=digest) == sealed
    assert sealer(clock=clock).open(sealed) == original
    # A version 1 envelope of the same delivery, queued before version 2, still opens.
    legacy = _legacy_seal(original, int(clock().timestamp()), OLD_KEY)
    assert sealer(clock=clock).open(legacy) == original


# ------------------------------------------------------------------------- rotation


def test_key_rotation_first_key_seals_every_key_opens():
    clock = FakeClock()
    sealed_with_old = sealer([OLD_KEY], clock).seal(envelope())
    rotating = sealer([NEW_KEY, OLD_KEY], clock)

    assert rotating.open(sealed_with_old) == envelope(), "the old key still opens"
    sealed_with_new = rotating.seal(envelope())
    assert sealer([NEW_KEY], clock).open(sealed_with_new) == envelope(), "the new key seals"
    with pytest.raises(EnvelopeError):
        sealer([NEW_KEY], clock).open(sealed_with_old)  # the old key was removed


@pytest.mark.parametrize(
    ("name", "keys"),
    [
        ("no keys", []),
        ("a string, not a list", OLD_KEY),
        ("an empty key", [""]),
        ("a short key", ["x" * 15]),
        ("good then short", [OLD_KEY, "short"]),
    ],
)
def test_unusable_keys_fail_at_construction(name, keys):
    with pytest.raises(SecretError):
        EnvelopeSealer(keys)


# ------------------------------------------------------------------------------ age


def test_an_envelope_expires_after_max_age():
    clock = FakeClock()
    data = sealer(clock=clock, max_age_s=3600).seal(envelope())

    clock.advance(3600)
    assert sealer(clock=clock, max_age_s=3600).open(data) == envelope()
    clock.advance(1)
    with pytest.raises(EnvelopeError, match="expired"):
        sealer(clock=clock, max_age_s=3600).open(data)


def test_the_default_max_age_is_a_week():
    clock = FakeClock()
    data = sealer(clock=clock).seal(envelope())

    clock.advance(DEFAULT_MAX_AGE_S)
    sealer(clock=clock).open(data)
    clock.advance(1)
    with pytest.raises(EnvelopeError, match="expired"):
        sealer(clock=clock).open(data)


def test_an_envelope_from_the_future_is_rejected():
    ahead = FakeClock(datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=301))
    behind = FakeClock()
    data = sealer(clock=ahead).seal(envelope())

    with pytest.raises(EnvelopeError, match="future"):
        sealer(clock=behind).open(data)
    behind.advance(1)
    assert sealer(clock=behind).open(data) == envelope(), "within the allowed skew"


# ------------------------------------------------------------------- malformed input


def _signed(fields: dict[str, object], key: str = OLD_KEY) -> bytes:
    """Bytes signed with a real key whose payload is whatever `fields` says."""
    return _signed_raw(_plain_canonical(fields), key)


def _signed_raw(payload: bytes, key: str = OLD_KEY) -> bytes:
    sig = _plain_mac(key, payload, 1)
    return json.dumps({"v": 1, "payload": payload.decode(), "sig": sig}).encode()


# The malformed table is of version 1 envelopes (the legacy path), then of version 2.
GOOD_FIELDS = json.loads(
    json.loads(_legacy_seal(envelope(), int(FakeClock()().timestamp()), OLD_KEY))["payload"]
)


def _fields(**changes: object) -> dict[str, object]:
    return {**GOOD_FIELDS, **changes}


MALFORMED = [
    ("empty", b""),
    ("not JSON", b"{not json"),
    ("invalid UTF-8", b"\xff\xfe\xfa"),
    ("a JSON list", b"[1, 2]"),
    ("a JSON string", b'"hello"'),
    ("deeply nested", b"[" * 100_000),
    ("missing sig", json.dumps({"v": 1, "payload": "{}"}).encode()),
    ("extra outer field", json.dumps({"v": 1, "payload": "{}", "sig": "x", "kid": 1}).encode()),
    ("version 2", json.dumps({"v": 2, "payload": "{}", "sig": "AAAA"}).encode()),
    ("payload not a string", json.dumps({"v": 1, "payload": {}, "sig": "AAAA"}).encode()),
    ("sig not a string", json.dumps({"v": 1, "payload": "{}", "sig": 5}).encode()),
    ("sig not base64url", json.dumps({"v": 1, "payload": "{}", "sig": "+/+/"}).encode()),
    ("sig of the wrong length", json.dumps({"v": 1, "payload": "{}", "sig": "AAAA"}).encode()),
    ("too large", b" " * 1_100_000),
    ("signed payload not JSON", _signed_raw(b"not json")),
    ("signed payload a JSON list", _signed_raw(b"[]")),
    ("signed payload nested too deep", _signed_raw(b"[" * 50_000)),
    (
        "signed payload missing a field",
        _signed({k: v for k, v in GOOD_FIELDS.items() if k != "event"}),
    ),
    ("signed payload with an extra field", _signed(_fields(extra=1))),
    ("signed payload of another version", _signed(_fields(v=2))),
    ("signed unknown source", _signed(_fields(source="gitlab"))),
    ("signed sealed_at as text", _signed(_fields(sealed_at="now"))),
    ("signed sealed_at as bool", _signed(_fields(sealed_at=True))),
    ("signed sealed_at as float", _signed(_fields(sealed_at=1.5))),
    ("signed naive received_at", _signed(_fields(received_at="2026-01-01T00:00:00"))),
    ("signed garbage received_at", _signed(_fields(received_at="yesterday"))),
    ("signed received_at as number", _signed(_fields(received_at=5))),
    ("signed body not base64", _signed(_fields(body="***"))),
    ("signed headers as a list", _signed(_fields(headers=["a"]))),
    ("signed a forbidden header", _signed(_fields(headers={"authorization": "Bearer x"}))),
    ("signed neither body nor claim", _signed(_fields(body=None))),
    ("signed claim without sha", _signed(_fields(body=None, claim="github:d-1"))),
    ("signed with an unknown key", _signed(GOOD_FIELDS, key="some-other-key-0123456789")),
]


@pytest.mark.parametrize(("name", "data"), MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_envelopes_raise_only_envelope_error(name, data):
    try:
        sealer().open(data)
    except EnvelopeError as exc:
        assert isinstance(exc, VerificationError), name
        assert len(exc.reason) < 120, name
    except BaseException as exc:  # any other type is the failure this test exists for
        pytest.fail(f"{name}: raised {exc!r}")
    else:
        pytest.fail(f"{name}: opened")


def test_the_signed_table_rows_differ_from_a_valid_envelope_only_in_their_change():
    assert sealer().open(_signed(GOOD_FIELDS)) == envelope()


@settings(max_examples=60, deadline=None)
@given(data=st.one_of(st.binary(max_size=300), st.text(max_size=300)))
def test_arbitrary_input_raises_only_envelope_error(data):
    with pytest.raises(EnvelopeError):
        sealer().open(data)


def _signed_v2(fields: dict[str, object], body: bytes = BODY, key: str = OLD_KEY) -> bytes:
    """A version 2 envelope signed with a real key, whose payload is whatever `fields` says."""
    payload = _plain_canonical(fields)
    sig = _plain_mac(key, payload, 2)
    return json.dumps({"v": 2, "payload": payload.decode(), "sig": sig}).encode() + b"\n" + body


GOOD_V2 = json.loads(_split(sealer().seal(envelope()))[0]["payload"])

MALFORMED_V2 = [
    ("signed line of version 1 fields", _signed_v2(GOOD_FIELDS)),
    ("signed inline body field", _signed_v2({**GOOD_V2, "body": "e30="})),
    ("signed payload version 1", _signed_v2({**GOOD_V2, "v": 1})),
    (
        "signed without the digest",
        _signed_v2({k: v for k, v in GOOD_V2.items() if k != "body_sha256"}),
    ),
    ("signed digest not text", _signed_v2({**GOOD_V2, "body_sha256": 5})),
    ("signed digest of another body", _signed_v2(GOOD_V2, body=b"{}")),
    ("signed claim with a body", _signed_v2({**GOOD_V2, "claim": "claims/x"})),
    (
        "signed claim with a bad digest",
        _signed_v2({**GOOD_V2, "claim": "claims/x", "body_sha256": "x"}, b""),
    ),
    (
        "signed with the version 1 tag",
        _signed_raw(_plain_canonical(GOOD_V2)).replace(b'"v": 1', b'"v": 2') + b"\n" + BODY,
    ),
    ("signed with an unknown key", _signed_v2(GOOD_V2, key="some-other-key-0123456789")),
    ("line not JSON", b'{"v":2,"payload":\n' + BODY),
]


@pytest.mark.parametrize(("name", "data"), MALFORMED_V2, ids=[c[0] for c in MALFORMED_V2])
def test_malformed_version_2_envelopes_raise_only_envelope_error(name, data):
    with pytest.raises(EnvelopeError):
        sealer().open(data)


def test_the_version_2_table_rows_differ_from_a_valid_envelope_only_in_their_change():
    assert sealer().open(_signed_v2(GOOD_V2)) == envelope()


# -------------------------------------------------------------- a large body stored apart


def test_a_large_body_is_stored_apart_and_resolves():
    store = MemoryPayloadStore()
    clock = FakeClock()
    big = bytes(range(256)) * 4096  # 1 MiB
    data = sealer(clock=clock, payloads=store).seal(envelope(body=big))

    opened = sealer(clock=clock).open(data)

    assert len(data) < 10_000
    assert opened.body is None
    assert opened.payload_ref == payload_key("github", "d-1")
    assert opened.body_sha256 == hashlib.sha256(big).hexdigest()
    assert resolve_body(opened, store) == big


def test_a_stored_body_keeps_the_digest_its_caller_gave():
    big = b"y" * 600_000
    digest = hashlib.sha256(big).hexdigest()
    data = sealer(payloads=MemoryPayloadStore()).seal(envelope(body=big), body_sha256=digest)

    assert sealer().open(data).body_sha256 == digest


def test_a_wrong_digest_from_the_caller_seals_an_envelope_open_refuses():
    data = sealer().seal(envelope(), body_sha256="0" * 64)

    with pytest.raises(EnvelopeError, match="sha256"):
        sealer().open(data)


def test_the_threshold_is_configurable_and_small_bodies_stay_inline():
    store = MemoryPayloadStore()
    small = sealer(payloads=store, payload_threshold_bytes=len(BODY)).open(
        sealer(payloads=store, payload_threshold_bytes=len(BODY)).seal(envelope())
    )
    over = sealer(payloads=store, payload_threshold_bytes=len(BODY) - 1).seal(envelope())

    assert small.body == BODY
    assert sealer().open(over).payload_ref is not None


def test_the_largest_inline_body_fits_in_a_task():
    threshold_body = b"\xff" * (512 * 1024)
    data = sealer().seal(envelope(body=threshold_body))

    assert len(data) <= MAX_SEALED_BYTES < 1_000_000


def test_sealing_the_same_delivery_twice_reuses_its_stored_payload():
    store = MemoryPayloadStore()
    big = b"x" * 600_000
    first = sealer(payloads=store).open(sealer(payloads=store).seal(envelope(body=big)))
    second = sealer(payloads=store).open(sealer(payloads=store).seal(envelope(body=big)))

    assert first.payload_ref == second.payload_ref


def test_a_large_body_without_a_payload_store_is_too_large():
    with pytest.raises(EnvelopeTooLarge):
        sealer().seal(envelope(body=b"x" * 600_000))


def test_a_body_over_25_mib_is_too_large_even_with_a_store():
    with pytest.raises(EnvelopeTooLarge):
        sealer(payloads=MemoryPayloadStore()).seal(envelope(body=b"x" * (25 * 1024 * 1024 + 1)))


def test_resolve_body_detects_a_payload_replaced_by_other_bytes():
    store = MemoryPayloadStore()
    data = sealer(payloads=store).seal(envelope(body=b"a" * 600_000))
    opened = sealer().open(data)
    store._items[opened.payload_ref] = b"b" * 600_000  # someone rewrote the stored payload

    with pytest.raises(PayloadCorrupt):
        resolve_body(opened, store)


def test_resolve_body_without_a_store_names_the_delivery():
    opened = sealer().open(
        sealer(payloads=MemoryPayloadStore()).seal(envelope(body=b"a" * 600_000))
    )

    with pytest.raises(PayloadError, match="d-1"):
        resolve_body(opened, None)


# ----------------------------------------------------------------------- cold start


def test_importing_the_ingress_modules_loads_neither_firestore_nor_genai():
    code = (
        "import sys, shared.handoff.envelope, shared.signatures, shared.handoff.payloads\n"
        "heavy = [m for m in sys.modules if m.startswith(('google.cloud.firestore', "
        "'google.genai'))]\n"
        "print(heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
        check=True,
    )

    assert result.stdout.strip() == "[]"


def test_a_requests_traceparent_is_never_copied_but_the_ingress_may_set_one() -> None:
    # Untraced, an envelope is what it was before tracing (a worker of that time opens it).
    caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert select_headers({"traceparent": caller, "X-GitHub-Event": "push"}) == {
        "x-github-event": "push"
    }
    traced = envelope(headers={"x-github-event": "push", "traceparent": caller})
    opened = EnvelopeSealer([LOCAL_ENVELOPE_KEY]).open(
        EnvelopeSealer([LOCAL_ENVELOPE_KEY]).seal(traced)
    )
    assert opened.headers["traceparent"] == caller
