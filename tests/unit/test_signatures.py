"""Webhook signature verification: known answers, the standardwebhooks oracle, rotation,
tampering, malformed headers, v1a (Ed25519), and Gemini dynamic webhooks (RS256 JWT, keys
from a JWKS served over loopback HTTP)."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import jwt as pyjwt
import pytest
import standardwebhooks
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st
from werkzeug.datastructures import EnvironHeaders

from local.fakes import FakeClock
from shared.config import LOCAL_GEMINI_SECRET, LOCAL_GITHUB_SECRET
from shared.handoff.envelope import select_headers
from shared.signatures import (
    DynamicWebhookVerifier,
    GeminiVerifier,
    GitHubVerifier,
    KeysUnavailable,
    RequestHeaders,
    SecretError,
    StandardWebhookVerifier,
    VerificationError,
    header,
    parse_jwks,
    sign_github,
    sign_jwt_rs256,
    sign_standard_webhook,
    sign_standard_webhook_ed25519,
)
from tests.jwks_server import AUDIENCE, JwksServer

NOW = 1_767_225_600  # 2026-01-01T00:00:00Z, FakeClock's default start
SECRET_A = "whsec_" + base64.b64encode(b"A" * 24).decode()
SECRET_B = "whsec_" + base64.b64encode(b"secret-b-0123456789abcdef").decode()
SECRET_C = "whsec_" + base64.b64encode(bytes(range(32))).decode()
BODY = b'{"type":"batch.succeeded","version":"v1","data":{"id":"batches/abc"}}'


def fake_clock(at: int = NOW) -> FakeClock:
    return FakeClock(datetime.fromtimestamp(at, UTC))


def verify_outcome(call: Callable[[], object]) -> BaseException | None:
    """Run `call`; return whatever it raised (any type), or None."""
    try:
        call()
    except BaseException as exc:  # the point is to see exceptions of ANY type
        return exc
    return None


# ------------------------------------------------------------------ known answers


def test_github_known_answer_from_githubs_docs():
    # docs.github.com "Validating webhook deliveries": testing the webhook payload validation.
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    secret = "It's a Secret to Everybody"

    assert sign_github(secret, b"Hello, World!") == expected
    GitHubVerifier([secret]).verify({"X-Hub-Signature-256": expected}, b"Hello, World!")


def test_standard_webhooks_known_answer_from_the_reference_tests():
    # standard-webhooks libraries/python/tests/test_webhooks.py::test_sign_function
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    msg_id = "msg_p5jXN8AQM9LWM0D4loKWxJek"
    body = b'{"test": 2432232314}'
    expected = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

    assert sign_standard_webhook(secret, msg_id, 1614265330, body) == expected
    verifier = StandardWebhookVerifier([secret], clock=fake_clock(1614265330))
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": "1614265330",
        "webhook-signature": expected,
    }
    assert verifier.verify(headers, body) == msg_id


ED25519_SEED = base64.b64decode("VEVTVFNJR05JTkdLRVlET05PVFVTRVRISVNGT1JBTlk=")


def test_v1a_known_answer_from_the_reference_go_tests():
    # standard-webhooks libraries/go/webhook_asymmetric_test.go::TestAsymmetricWebhookSign
    key = Ed25519PrivateKey.from_private_bytes(ED25519_SEED)
    expected = (
        "v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHe"
        "YGb7KaaBRdM5WqyeFiL8Ag=="
    )
    msg_id = "msg_p5jXN8AQM9LWM0D4loKWxJek"
    body = b'{"test": 2432232314}'

    assert sign_standard_webhook_ed25519(key, msg_id, 1614265330, body) == expected
    verifier = StandardWebhookVerifier([whpk(key)], clock=fake_clock(1614265330))
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": "1614265330",
        "webhook-signature": expected,
    }
    assert verifier.verify(headers, body) == msg_id


def test_rfc8032_test_1_verifies_through_a_jwk():
    # RFC 8032 §7.1 TEST 1: empty message.
    public = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    signature = bytes.fromhex(
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
        "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
    )
    jwk = {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": base64.urlsafe_b64encode(public).decode().rstrip("="),
    }
    key = parse_jwks(json.dumps({"keys": [{**jwk, "kid": "rfc"}]}).encode())["rfc"]

    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert raw == public
    assert verify_outcome(lambda: key.verify(signature, b"")) is None
    assert isinstance(verify_outcome(lambda: key.verify(signature, b"x")), InvalidSignature)


# ---------------------------------------------------- standardwebhooks as the oracle

ORACLE_SECRETS = [SECRET_A, SECRET_B, SECRET_C, LOCAL_GEMINI_SECRET]


@pytest.mark.parametrize("secret", ORACLE_SECRETS)
def test_what_standardwebhooks_signs_we_verify(secret):
    now = int(time.time())
    oracle = standardwebhooks.Webhook(secret)
    signature = oracle.sign("msg_1", datetime.fromtimestamp(now, UTC), BODY.decode())
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(now), "webhook-signature": signature}

    assert StandardWebhookVerifier([secret], clock=fake_clock(now)).verify(headers, BODY) == "msg_1"


@pytest.mark.parametrize("secret", ORACLE_SECRETS)
def test_what_we_sign_standardwebhooks_verifies(secret):
    now = int(time.time())  # the oracle reads the real clock
    signature = StandardWebhookVerifier([secret]).sign("msg_2", now, BODY)
    headers = {"webhook-id": "msg_2", "webhook-timestamp": str(now), "webhook-signature": signature}

    assert standardwebhooks.Webhook(secret).verify(BODY, headers) == json.loads(BODY)


def test_rotation_the_first_secret_signs_and_every_secret_verifies():
    rotated = StandardWebhookVerifier([SECRET_B, SECRET_A], clock=fake_clock())
    old_sig = standardwebhooks.Webhook(SECRET_A).sign("m", datetime.fromtimestamp(NOW, UTC), "x")
    new_sig = standardwebhooks.Webhook(SECRET_B).sign("m", datetime.fromtimestamp(NOW, UTC), "x")
    stranger = sign_standard_webhook(SECRET_C, "m", NOW, b"x")

    def headers(sig: str) -> dict[str, str]:
        return {"webhook-id": "m", "webhook-timestamp": str(NOW), "webhook-signature": sig}

    assert rotated.sign("m", NOW, b"x") == new_sig, "the first secret signs"
    assert rotated.verify(headers(old_sig), b"x") == "m", "the old secret still verifies"
    assert rotated.verify(headers(new_sig), b"x") == "m"
    assert rotated.verify(headers(f"{stranger} {old_sig}"), b"x") == "m", "any entry may match"
    with pytest.raises(VerificationError):
        rotated.verify(headers(stranger), b"x")
    with pytest.raises(VerificationError):
        StandardWebhookVerifier([SECRET_B], clock=fake_clock()).verify(headers(old_sig), b"x")


def test_github_rotation():
    new, old = "new-github-secret-0123", LOCAL_GITHUB_SECRET
    verifier = GitHubVerifier([new, old])

    verifier.verify({"x-hub-signature-256": sign_github(old, BODY)}, BODY)
    verifier.verify({"x-hub-signature-256": sign_github(new, BODY)}, BODY)
    assert verifier.sign(BODY) == sign_github(new, BODY)
    with pytest.raises(VerificationError):
        GitHubVerifier([new]).verify({"x-hub-signature-256": sign_github(old, BODY)}, BODY)


# ------------------------------------------------------------------------ tampering

WIDE = 10**11  # a tolerance that admits any timestamp, so only the signature can fail


@settings(max_examples=60, deadline=None)
@given(body=st.binary(min_size=1, max_size=200), data=st.data())
def test_any_single_byte_change_to_the_body_fails(body, data):
    index = data.draw(st.integers(0, len(body) - 1))
    new_byte = data.draw(st.integers(0, 255).filter(lambda b: b != body[index]))
    changed = body[:index] + bytes([new_byte]) + body[index + 1 :]
    verifier = StandardWebhookVerifier([SECRET_A], tolerance_s=WIDE, clock=fake_clock())
    headers = {
        "webhook-id": "msg_x",
        "webhook-timestamp": str(NOW),
        "webhook-signature": sign_standard_webhook(SECRET_A, "msg_x", NOW, body),
    }
    github = GitHubVerifier([LOCAL_GITHUB_SECRET])

    assert verifier.verify(headers, body) == "msg_x"
    with pytest.raises(VerificationError, match="match"):
        verifier.verify(headers, changed)
    with pytest.raises(VerificationError, match="match"):
        github.verify({"x-hub-signature-256": sign_github(LOCAL_GITHUB_SECRET, body)}, changed)


PRINTABLE = [chr(c) for c in range(0x21, 0x7F)]


@settings(max_examples=60, deadline=None)
@given(msg_id=st.text(alphabet=PRINTABLE, min_size=1, max_size=40), data=st.data())
def test_any_single_character_change_to_the_id_fails(msg_id, data):
    index = data.draw(st.integers(0, len(msg_id) - 1))
    new_char = data.draw(st.sampled_from(PRINTABLE).filter(lambda c: c != msg_id[index]))
    verifier = StandardWebhookVerifier([SECRET_A], tolerance_s=WIDE, clock=fake_clock())
    signature = sign_standard_webhook(SECRET_A, msg_id, NOW, BODY)
    changed = msg_id[:index] + new_char + msg_id[index + 1 :]
    headers = {"webhook-id": changed, "webhook-timestamp": str(NOW), "webhook-signature": signature}

    with pytest.raises(VerificationError, match="match"):
        verifier.verify(headers, BODY)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_single_digit_change_to_the_timestamp_fails(data):
    text = str(NOW)
    index = data.draw(st.integers(0, len(text) - 1))
    digit = data.draw(st.sampled_from("0123456789").filter(lambda d: d != text[index]))
    changed = text[:index] + digit + text[index + 1 :]
    verifier = StandardWebhookVerifier([SECRET_A], tolerance_s=WIDE, clock=fake_clock())
    signature = sign_standard_webhook(SECRET_A, "msg_t", NOW, BODY)
    headers = {"webhook-id": "msg_t", "webhook-timestamp": changed, "webhook-signature": signature}

    with pytest.raises(VerificationError, match="match"):
        verifier.verify(headers, BODY)


# ----------------------------------------------------------------- malformed headers

GOOD_SIG = sign_standard_webhook(SECRET_A, "msg_ok", NOW, BODY)
GOOD_HEADERS = {
    "webhook-id": "msg_ok",
    "webhook-timestamp": str(NOW),
    "webhook-signature": GOOD_SIG,
}
_SIG_B64 = GOOD_SIG.split(",", 1)[1]


def _without(name: str) -> dict[str, object]:
    return {k: v for k, v in GOOD_HEADERS.items() if k != name}


def _with(**changes: object) -> dict[str, object]:
    return {**GOOD_HEADERS, **{k.replace("_", "-"): v for k, v in changes.items()}}


STANDARD_MALFORMED = [
    ("missing webhook-id", _without("webhook-id")),
    ("missing webhook-timestamp", _without("webhook-timestamp")),
    ("missing webhook-signature", _without("webhook-signature")),
    ("no headers at all", {}),
    ("empty signature", _with(webhook_signature="")),
    ("blank signature", _with(webhook_signature="   ")),
    ("missing comma", _with(webhook_signature="v1" + _SIG_B64)),
    ("empty version", _with(webhook_signature="," + _SIG_B64)),
    ("empty signature part", _with(webhook_signature="v1,")),
    ("bad base64", _with(webhook_signature="v1,not*base64!")),
    ("base64 with a bad length", _with(webhook_signature="v1,abcde")),
    (
        "v1 of the wrong length",
        _with(webhook_signature="v1," + base64.b64encode(b"x" * 16).decode()),
    ),
    ("v1 of 33 bytes", _with(webhook_signature="v1," + base64.b64encode(b"x" * 33).decode())),
    ("unknown version only", _with(webhook_signature="v9," + _SIG_B64)),
    (
        "v1a when only v1 is configured",
        _with(webhook_signature="v1a," + base64.b64encode(b"x" * 64).decode()),
    ),
    ("good entry then garbage entry", _with(webhook_signature=f"{GOOD_SIG} garbage")),
    ("too many entries", _with(webhook_signature=" ".join([GOOD_SIG] * 17))),
    ("non-ASCII signature", _with(webhook_signature="v1,é" + _SIG_B64)),
    ("non-ASCII id", _with(webhook_id="msg_é")),
    ("id with a space", _with(webhook_id="msg ok")),
    ("id too long", _with(webhook_id="m" * 257)),
    ("non-integer timestamp", _with(webhook_timestamp="abc")),
    ("decimal timestamp", _with(webhook_timestamp=f"{NOW}.5")),
    ("negative timestamp", _with(webhook_timestamp="-1")),
    ("signed timestamp", _with(webhook_timestamp=f"+{NOW}")),
    ("timestamp with underscores", _with(webhook_timestamp="1_767_225_600")),
    ("timestamp with spaces", _with(webhook_timestamp=f" {NOW} ")),
    ("Arabic-Indic digits", _with(webhook_timestamp="١٧٦٧٢٢٥٦٠٠")),
    ("enormous timestamp", _with(webhook_timestamp="9" * 400)),
    ("timestamp too old", _with(webhook_timestamp=str(NOW - 301))),
    ("timestamp too new", _with(webhook_timestamp=str(NOW + 301))),
    ("bytes value", _with(webhook_signature=GOOD_SIG.encode())),
    ("None value", _with(webhook_id=None)),
    ("control character", _with(webhook_id="msg\x00ok")),
    ("header too long", _with(webhook_signature="v1," + "A" * 9000)),
    ("duplicate in two spellings", {**GOOD_HEADERS, "Webhook-Signature": GOOD_SIG}),
]


def test_the_good_headers_in_the_table_do_verify():
    verifier = StandardWebhookVerifier([SECRET_A], clock=fake_clock())
    assert verifier.verify(GOOD_HEADERS, BODY) == "msg_ok"


# Each table runs on the mapping as given and read once (`RequestHeaders`, as served).
READ_AS = pytest.mark.parametrize("read", [dict, RequestHeaders], ids=["mapping", "read-once"])


@READ_AS
@pytest.mark.parametrize(
    ("name", "headers"), STANDARD_MALFORMED, ids=[c[0] for c in STANDARD_MALFORMED]
)
def test_malformed_standard_webhook_headers_raise_only_verification_error(name, headers, read):
    verifier = StandardWebhookVerifier([SECRET_A], clock=fake_clock())

    raised = verify_outcome(lambda: verifier.verify(read(headers), BODY))

    assert isinstance(raised, VerificationError), name
    assert _SIG_B64 not in raised.reason, name
    assert SECRET_A[6:] not in raised.reason, name


def test_the_timestamp_tolerance_is_inclusive_and_configurable():
    verifier = StandardWebhookVerifier([SECRET_A], tolerance_s=60, clock=fake_clock())
    for offset, ok in [(-60, True), (60, True), (-61, False), (61, False)]:
        ts = NOW + offset
        headers = {
            "webhook-id": "m",
            "webhook-timestamp": str(ts),
            "webhook-signature": sign_standard_webhook(SECRET_A, "m", ts, BODY),
        }
        outcome = verify_outcome(lambda h=headers: verifier.verify(h, BODY))
        assert (outcome is None) == ok, f"offset {offset}"


GITHUB_SIG = sign_github(LOCAL_GITHUB_SECRET, BODY)
GITHUB_MALFORMED = [
    ("missing header", {}),
    ("empty header", {"X-Hub-Signature-256": ""}),
    ("sha1 scheme", {"X-Hub-Signature-256": "sha1=" + GITHUB_SIG[7:]}),
    ("no equals sign", {"X-Hub-Signature-256": "sha256" + GITHUB_SIG[7:]}),
    ("bare hex", {"X-Hub-Signature-256": GITHUB_SIG[7:]}),
    ("short hex", {"X-Hub-Signature-256": GITHUB_SIG[:-2]}),
    ("long hex", {"X-Hub-Signature-256": GITHUB_SIG + "00"}),
    ("non-hex", {"X-Hub-Signature-256": "sha256=" + "zz" * 32}),
    ("non-ASCII", {"X-Hub-Signature-256": "sha256=" + "é" * 64}),
    ("bytes value", {"X-Hub-Signature-256": GITHUB_SIG.encode()}),
    ("two spellings", {"X-Hub-Signature-256": GITHUB_SIG, "x-hub-signature-256": GITHUB_SIG}),
    ("other secret", {"X-Hub-Signature-256": sign_github("another-secret-0123456", BODY)}),
]


@READ_AS
@pytest.mark.parametrize(
    ("name", "headers"), GITHUB_MALFORMED, ids=[c[0] for c in GITHUB_MALFORMED]
)
def test_malformed_github_headers_raise_only_verification_error(name, headers, read):
    verifier = GitHubVerifier([LOCAL_GITHUB_SECRET])

    raised = verify_outcome(lambda: verifier.verify(read(headers), BODY))

    assert isinstance(raised, VerificationError), name
    assert GITHUB_SIG[7:] not in raised.reason, name


def test_header_names_match_in_any_case_including_werkzeugs_headers():
    github = GitHubVerifier([LOCAL_GITHUB_SECRET])
    github.verify({"X-HUB-SIGNATURE-256": GITHUB_SIG}, BODY)
    github.verify(EnvironHeaders({"HTTP_X_HUB_SIGNATURE_256": GITHUB_SIG}), BODY)

    standard = StandardWebhookVerifier([SECRET_A], clock=fake_clock())
    upper = {k.upper(): v for k, v in GOOD_HEADERS.items()}
    environ = {"HTTP_" + k.upper().replace("-", "_"): v for k, v in GOOD_HEADERS.items()}
    assert standard.verify(upper, BODY) == "msg_ok"
    assert standard.verify(EnvironHeaders(environ), BODY) == "msg_ok"
    assert standard.verify(RequestHeaders(EnvironHeaders(environ)), BODY) == "msg_ok"
    github.verify(RequestHeaders(EnvironHeaders({"HTTP_X_HUB_SIGNATURE_256": GITHUB_SIG})), BODY)


def test_request_headers_read_once_answer_as_the_headers_they_read():
    environ = {
        "CONTENT_TYPE": "application/json",
        "HTTP_X_GITHUB_EVENT": "push",
        "HTTP_X_HUB_SIGNATURE_256": GITHUB_SIG,
        "wsgi.input": None,
    }
    served = EnvironHeaders(environ)

    read = RequestHeaders(served)

    assert list(read.items()) == list(served.items())
    assert len(read) == len(served) == 3
    assert read.get("x-github-event") == read["X-GITHUB-EVENT"] == "push"
    assert read.get("X-GitHub-Delivery") is None and "X-GitHub-Delivery" not in read
    assert header(read, "x-hub-signature-256") == header(served, "x-hub-signature-256")
    assert select_headers(read) == select_headers(served)


def test_request_headers_read_off_the_environ_are_werkzeugs():
    environ = {
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": "",  # empty: werkzeug leaves it out
        "HTTP_CONTENT_TYPE": "text/plain",  # never a header of its own
        "HTTP_X_GITHUB_EVENT": "push",
        "HTTP_X_HUB_SIGNATURE_256": GITHUB_SIG,
        "HTTP_USER_AGENT": "GitHub-Hookshot/abc",
        "HTTP_X_EMPTY": "",  # present, empty
        "REQUEST_METHOD": "POST",
        "wsgi.input": None,
    }
    served = RequestHeaders(EnvironHeaders(environ))

    read = RequestHeaders.from_environ(environ)

    assert list(read.items()) == list(served.items())
    names = ("content-type", "X-GitHub-Event", "x-hub-signature-256", "Content-Length", "x-empty")
    for name in (*names, "X-GitHub-Delivery", "request-method"):
        assert read.get(name) == served.get(name), name
        assert read.values_of(name) == served.values_of(name), name
        assert (name in read) == (name in served), name
    assert len(read) == len(served) and list(read) == list(served)
    assert select_headers(read) == select_headers(served)
    picked = ["X-GitHub-Event", "x-empty", "absent", "Content-Length", "content-type"]
    expected = [("X-GitHub-Event", "push"), ("x-empty", ""), ("content-type", "application/json")]
    assert read.pick(picked) == served.pick(picked) == expected


def test_request_headers_keep_a_name_read_twice_so_it_is_still_refused():
    read = RequestHeaders({"X-Hub-Signature-256": GITHUB_SIG, "x-hub-signature-256": "sha256=0"})

    assert list(read.items()) == [
        ("X-Hub-Signature-256", GITHUB_SIG),
        ("x-hub-signature-256", "sha256=0"),
    ]
    assert read["X-HUB-SIGNATURE-256"] == GITHUB_SIG  # the first, as werkzeug's get answers
    with pytest.raises(VerificationError, match="more than once"):
        header(read, "X-Hub-Signature-256")


# ------------------------------------------------------------------------- secrets

BAD_SECRETS = [
    ("no secrets", GitHubVerifier, []),
    ("one string instead of a list", GitHubVerifier, LOCAL_GITHUB_SECRET),
    ("empty secret", GitHubVerifier, [""]),
    ("15-byte secret", GitHubVerifier, ["x" * 15]),
    ("secret with whitespace", GitHubVerifier, [" " + LOCAL_GITHUB_SECRET]),
    ("good then empty", GitHubVerifier, [LOCAL_GITHUB_SECRET, ""]),
    ("whsec without prefix", StandardWebhookVerifier, [SECRET_A[6:]]),
    ("whsec bad base64", StandardWebhookVerifier, ["whsec_!!!not-base64!!!"]),
    ("whsec too short", StandardWebhookVerifier, ["whsec_" + base64.b64encode(b"x" * 15).decode()]),
    ("whsec empty", StandardWebhookVerifier, ["whsec_"]),
    ("second whsec bad", StandardWebhookVerifier, [SECRET_A, "whsec_@@@@"]),
]


@pytest.mark.parametrize(("name", "cls", "secrets"), BAD_SECRETS, ids=[c[0] for c in BAD_SECRETS])
def test_bad_secrets_fail_at_construction_without_echoing_them(name, cls, secrets):
    with pytest.raises(SecretError) as caught:
        cls(secrets)
    for secret in secrets if isinstance(secrets, list) else [secrets]:
        if len(secret) > 6:
            assert secret not in str(caught.value), name


def test_the_local_secrets_are_accepted():
    github = GitHubVerifier([LOCAL_GITHUB_SECRET])
    gemini = StandardWebhookVerifier([LOCAL_GEMINI_SECRET], clock=fake_clock())
    signed = {"x-hub-signature-256": sign_github(LOCAL_GITHUB_SECRET, BODY)}
    assert verify_outcome(lambda: github.verify(signed, BODY)) is None
    headers = {
        "webhook-id": "msg_local",
        "webhook-timestamp": str(NOW),
        "webhook-signature": sign_standard_webhook(LOCAL_GEMINI_SECRET, "msg_local", NOW, BODY),
    }
    assert gemini.verify(headers, BODY) == "msg_local"


# ------------------------------------------------------------- v1a (Standard Webhooks)

ED_KEY = Ed25519PrivateKey.generate()
OTHER_ED_KEY = Ed25519PrivateKey.generate()


def whpk(key: Ed25519PrivateKey) -> str:
    """The spec's `whpk_` form of an Ed25519 public key."""
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "whpk_" + base64.b64encode(raw).decode()


def _v1a_entry(key: Ed25519PrivateKey, msg_id: str = "msg_v1a", body: bytes = BODY) -> str:
    return sign_standard_webhook_ed25519(key, msg_id, NOW, body)


def _v1a_headers(*entries: str) -> dict[str, str]:
    return {"webhook-id": "msg_v1a", "webhook-timestamp": str(NOW),
            "webhook-signature": " ".join(entries)}  # fmt: skip


def test_v1a_verifies_against_a_configured_public_key_beside_whsec_secrets():
    verifier = StandardWebhookVerifier([LOCAL_GEMINI_SECRET, whpk(ED_KEY)], clock=fake_clock())

    assert verifier.verify(_v1a_headers(_v1a_entry(ED_KEY)), BODY) == "msg_v1a"
    assert verifier.sign("m", NOW, BODY) == sign_standard_webhook(
        LOCAL_GEMINI_SECRET, "m", NOW, BODY
    )
    with pytest.raises(VerificationError, match="match"):
        verifier.verify(_v1a_headers(_v1a_entry(ED_KEY)), BODY + b" ")
    with pytest.raises(VerificationError, match="match"):
        verifier.verify(_v1a_headers(_v1a_entry(OTHER_ED_KEY)), BODY)


V1A_ROTATION = [
    ("good entry first", [0], True),
    ("good entry second (a rotation)", [1], True),
    ("good entry third: only two are tried", [2], False),
]


@pytest.mark.parametrize(
    ("name", "good_at", "accepted"), V1A_ROTATION, ids=[c[0] for c in V1A_ROTATION]
)
def test_at_most_two_v1a_entries_are_tried(name, good_at, accepted):
    verifier = StandardWebhookVerifier([whpk(ED_KEY)], clock=fake_clock())
    entries = [_v1a_entry(ED_KEY) if i in good_at else _v1a_entry(OTHER_ED_KEY) for i in range(3)]

    outcome = verify_outcome(lambda: verifier.verify(_v1a_headers(*entries), BODY))

    assert (outcome is None) == accepted, f"{name}: {outcome!r}"


@pytest.mark.parametrize(
    "bad", ["whpk_", "whpk_" + base64.b64encode(b"x" * 31).decode(), "whpk_not*base64"]
)
def test_an_unusable_public_key_fails_at_construction(bad):
    with pytest.raises(SecretError, match="#2"):
        StandardWebhookVerifier([LOCAL_GEMINI_SECRET, bad])


def test_public_keys_alone_verify_but_cannot_sign():
    verifier = StandardWebhookVerifier([whpk(ED_KEY)], clock=fake_clock())
    with pytest.raises(SecretError):
        verifier.sign("m", NOW, BODY)
    with pytest.raises(VerificationError):
        verifier.verify(_v1_headers(), BODY)


# ------------------------------------------------------- Gemini dynamic webhooks (JWT)

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
RSA_KEY_2 = rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def keys() -> Iterator[JwksServer]:
    with JwksServer([(RSA_KEY, "rsa-1"), (ED_KEY, "ed-1")]) as server:
        yield server


def dynamic(keys: JwksServer, **options: object) -> DynamicWebhookVerifier:
    settings: dict[str, object] = {"clock": fake_clock(), "issuer": "gemini", **options}
    return DynamicWebhookVerifier(keys.url, AUDIENCE, **settings)  # type: ignore[arg-type]


def claims(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "iat": NOW, "exp": NOW + 300, "aud": AUDIENCE, "iss": "gemini", "jti": "evt-1",
        "type": "batch.succeeded", "version": "v1", "data": {"id": "batches/abc"},
    }  # fmt: skip
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def jwt_headers(token: str, msg_id: str = "msg_unsigned") -> dict[str, str]:
    return {"webhook-id": msg_id, "webhook-timestamp": str(NOW), "webhook-signature": token}


def _forged(token: str, **changes: object) -> str:
    head, payload, sig = token.split(".")
    data = json.loads(base64.urlsafe_b64decode(payload + "=="))
    data.update(changes)
    forged = base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")
    return f"{head}.{forged}.{sig}"


def _b64url_json(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def _with_header(token: str, head: dict[str, object]) -> str:
    return _b64url_json(head) + token[token.index(".") :]


def _hs256_with_the_public_key() -> str:
    """The classic confusion: an HMAC keyed with the RSA public key's PEM."""
    pem = RSA_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    head = _b64url_json({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"})
    body = _b64url_json(claims())
    import hmac as _hmac

    mac = _hmac.new(pem, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}." + base64.urlsafe_b64encode(mac).decode().rstrip("=")


GOOD_JWT = sign_jwt_rs256(RSA_KEY, "rsa-1", claims())
BAD_JWTS = [
    ("expired", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(iat=NOW - 400, exp=NOW - 31))),
    ("issued in the future", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(iat=NOW + 31))),
    ("not valid yet", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(nbf=NOW + 31))),
    ("exp is text", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(exp="soon"))),
    ("exp is infinite", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(exp=float("inf")))),
    ("wrong audience", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(aud="https://evil.example"))),
    ("no audience", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(aud=None))),
    ("wrong issuer", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(iss="someone"))),
    ("no issuer", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(iss=None))),
    ("signed by a key not in the JWKS", sign_jwt_rs256(RSA_KEY_2, "rsa-1", claims())),
    ("unknown kid", sign_jwt_rs256(RSA_KEY, "rsa-9", claims())),
    ("no kid", _with_header(GOOD_JWT, {"alg": "RS256", "typ": "JWT"})),
    ("kid of an Ed25519 key", sign_jwt_rs256(RSA_KEY, "ed-1", claims())),
    ("claims changed after signing", _forged(GOOD_JWT, data={"id": "batches/other"})),
    ("alg none", _with_header(GOOD_JWT, {"alg": "none", "kid": "rsa-1"}).rsplit(".", 1)[0] + "."),
    ("alg none, signature kept", _with_header(GOOD_JWT, {"alg": "none", "kid": "rsa-1"})),
    ("alg HS256 keyed with the public key", _hs256_with_the_public_key()),
    ("alg RS512", _with_header(GOOD_JWT, {"alg": "RS512", "kid": "rsa-1"})),
    ("signature stripped", GOOD_JWT.rsplit(".", 1)[0] + "."),
    ("signature not base64url", GOOD_JWT.rsplit(".", 1)[0] + ".***"),
    ("header not JSON", "bm90anNvbg." + GOOD_JWT.split(".", 1)[1]),
    ("header is a list", _b64url_json([[[[]]]]) + ".e30.e30"),
    ("header nested past the parser", base64.urlsafe_b64encode(b"[" * 5000).decode() + ".e30.e30"),
]


@pytest.mark.parametrize(("name", "token"), BAD_JWTS, ids=[c[0] for c in BAD_JWTS])
def test_bad_jwts_raise_only_verification_error(name, token, keys):
    verifier = dynamic(keys)

    raised = verify_outcome(lambda: verifier.verify_delivery(jwt_headers(token)))

    assert isinstance(raised, VerificationError), f"{name}: {raised!r}"
    assert not isinstance(raised, KeysUnavailable), name


def test_a_valid_token_gives_a_signed_id_and_the_signed_event(keys):
    verifier = dynamic(keys)

    found = verifier.verify_delivery(jwt_headers(GOOD_JWT))

    assert found.delivery_id == "jwt:evt-1", "the id comes from the signed jti, not webhook-id"
    assert found.event == {
        "type": "batch.succeeded",
        "version": "v1",
        "data": {"id": "batches/abc"},
    }
    assert found.claims["aud"] == AUDIENCE
    verifier.verify_delivery(jwt_headers(GOOD_JWT))
    assert keys.hits == 1, "the JWKS is cached"


def test_without_a_jti_the_id_is_the_tokens_hash_and_unsigned_headers_do_not_matter(keys):
    verifier = dynamic(keys)
    first = sign_jwt_rs256(RSA_KEY, "rsa-1", claims(jti=None))
    second = sign_jwt_rs256(RSA_KEY, "rsa-1", claims(jti=None, iat=NOW + 1))

    a = verifier.verify_delivery(jwt_headers(first, "msg_same")).delivery_id
    b = verifier.verify_delivery(jwt_headers(second, "msg_same")).delivery_id

    assert a == "jwt:sha256:" + hashlib.sha256(first.encode()).hexdigest()
    assert a != b, "same webhook-id, different signed tokens: two deliveries"
    assert verifier.verify_delivery(jwt_headers(first, "msg_other")).delivery_id == a


@pytest.mark.parametrize("jti", ["has space", "j" * 151, "ünï"])
def test_an_unusable_jti_falls_back_to_the_token_hash(jti, keys):
    token = sign_jwt_rs256(RSA_KEY, "rsa-1", claims(jti=jti))

    found = dynamic(keys).verify_delivery(jwt_headers(token))

    assert found.delivery_id == "jwt:sha256:" + hashlib.sha256(token.encode()).hexdigest()


def test_claims_without_an_event_leave_the_body_to_the_caller(keys):
    token = sign_jwt_rs256(RSA_KEY, "rsa-1", claims(type=None, data=None, version=None))

    assert dynamic(keys).verify_delivery(jwt_headers(token)).event is None


def test_iat_and_exp_are_checked_only_when_present_and_the_issuer_only_when_configured(keys):
    bare = sign_jwt_rs256(RSA_KEY, "rsa-1", {"aud": AUDIENCE, "jti": "bare"})
    verifier = dynamic(keys, issuer="")

    assert verifier.verify_delivery(jwt_headers(bare)).delivery_id == "jwt:bare"
    late = sign_jwt_rs256(RSA_KEY, "rsa-1", claims(iss="anyone", exp=NOW - 29))
    assert verifier.verify_delivery(jwt_headers(late)).delivery_id == "jwt:evt-1", "within skew"


def test_the_audience_may_be_one_of_a_list(keys):
    token = sign_jwt_rs256(RSA_KEY, "rsa-1", claims(aud=["https://other.example", AUDIENCE]))

    assert dynamic(keys).verify_delivery(jwt_headers(token)).delivery_id == "jwt:evt-1"


def test_pyjwt_tokens_and_ours_are_the_same_thing(keys):
    theirs = pyjwt.encode(claims(), RSA_KEY, algorithm="RS256", headers={"kid": "rsa-1"})
    assert dynamic(keys).verify_delivery(jwt_headers(theirs)).delivery_id == "jwt:evt-1"
    decoded = pyjwt.decode(GOOD_JWT, RSA_KEY.public_key(), algorithms=["RS256"],
                           audience=AUDIENCE, options={"verify_exp": False, "verify_iat": False})  # fmt: skip
    assert decoded == claims()


def test_a_rotated_key_is_fetched_when_a_token_names_it(keys):
    verifier = dynamic(keys, refetch_cooldown_s=0)
    verifier.verify_delivery(jwt_headers(GOOD_JWT))

    keys.publish([(RSA_KEY_2, "rsa-2")])  # Gemini rotated
    rotated = sign_jwt_rs256(RSA_KEY_2, "rsa-2", claims())

    assert verifier.verify_delivery(jwt_headers(rotated)).delivery_id == "jwt:evt-1"
    assert keys.hits == 2


def test_made_up_kids_do_not_make_us_fetch_on_every_request(keys):
    verifier = dynamic(keys, refetch_cooldown_s=3600)
    verifier.verify_delivery(jwt_headers(GOOD_JWT))

    for i in range(20):
        stranger = sign_jwt_rs256(RSA_KEY_2, f"made-up-{i}", claims())
        with pytest.raises(VerificationError, match="unknown key"):
            verifier.verify_delivery(jwt_headers(stranger))

    assert keys.hits == 1, "within the cooldown an unknown kid fetches nothing"


def test_a_jwks_outage_is_keys_unavailable(keys):
    keys.fail = True

    with pytest.raises(KeysUnavailable):
        dynamic(keys).verify_delivery(jwt_headers(GOOD_JWT))


def test_a_document_that_is_not_a_jwks_is_keys_unavailable(keys):
    keys.publish_raw({"nokeys": []})

    with pytest.raises(KeysUnavailable):
        dynamic(keys).verify_delivery(jwt_headers(GOOD_JWT))


def test_a_jwks_server_that_never_answers_times_out_as_keys_unavailable():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts connections, never answers
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/jwks.json"
        verifier = DynamicWebhookVerifier(url, AUDIENCE, clock=fake_clock(), timeout_s=0.3)
        with pytest.raises(KeysUnavailable) as caught:
            verifier.verify_delivery(jwt_headers(GOOD_JWT))
        # Only the fetch's own timeout can end a wait on a server that never answers.
        assert "timed out" in str(caught.value.__cause__).lower(), repr(caught.value.__cause__)
    finally:
        silent.close()


@pytest.mark.parametrize(("url", "audience"), [("", AUDIENCE), ("http://127.0.0.1:9/", " ")])
def test_a_verifier_needs_a_url_and_an_audience(url, audience):
    with pytest.raises(ValueError):
        DynamicWebhookVerifier(url, audience)


# ------------------------------------------------------------------------- Gemini


def _v1_headers() -> dict[str, str]:
    sig = sign_standard_webhook(LOCAL_GEMINI_SECRET, "msg_v1", NOW, BODY)
    return {"webhook-id": "msg_v1", "webhook-timestamp": str(NOW), "webhook-signature": sig}


def _gemini(keys: JwksServer | None, static: bool = True) -> GeminiVerifier:
    return GeminiVerifier(
        static=StandardWebhookVerifier([LOCAL_GEMINI_SECRET], clock=fake_clock())
        if static
        else None,
        dynamic=dynamic(keys) if keys is not None else None,
    )


def test_gemini_sends_each_delivery_to_the_scheme_it_names(keys):
    verifier = _gemini(keys)

    assert verifier.verify_delivery(_v1_headers(), BODY).delivery_id == "msg_v1"
    found = verifier.verify_delivery(jwt_headers(GOOD_JWT), BODY)
    assert (found.delivery_id, found.dynamic) == ("jwt:evt-1", True)
    assert verifier.verify(jwt_headers(GOOD_JWT), BODY) == "jwt:evt-1"


def test_gemini_static_only_rejects_a_jwt_without_fetching_keys(keys):
    verifier = _gemini(None)

    with pytest.raises(VerificationError, match="not enabled"):
        verifier.verify_delivery(jwt_headers(GOOD_JWT), BODY)
    assert keys.hits == 0


def test_gemini_dynamic_only_rejects_v1_and_reports_a_key_outage_as_retryable(keys):
    verifier = _gemini(keys, static=False)

    with pytest.raises(VerificationError):
        verifier.verify_delivery(_v1_headers(), BODY)
    keys.fail = True
    with pytest.raises(KeysUnavailable):
        verifier.verify_delivery(jwt_headers(GOOD_JWT), BODY)


def test_gemini_without_any_signature_is_rejected(keys):
    with pytest.raises(VerificationError):
        _gemini(keys).verify({"content-type": "application/json"}, BODY)
    with pytest.raises(ValueError):
        GeminiVerifier()
