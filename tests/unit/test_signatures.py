"""Webhook signature verification: known answers, the standardwebhooks oracle, rotation,
tampering, malformed headers, and the dynamic (JWKS) schemes."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import standardwebhooks
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st
from werkzeug.datastructures import EnvironHeaders

from shared.clock import FakeClock
from shared.config import LOCAL_GEMINI_SECRET, LOCAL_GITHUB_SECRET
from shared.signatures import (
    DynamicWebhookVerifier,
    GeminiVerifier,
    GitHubVerifier,
    JwksCache,
    KeysUnavailable,
    SecretError,
    StandardWebhookVerifier,
    VerificationError,
    parse_jwks,
    public_jwk,
    sign_github,
    sign_jwt_rs256,
    sign_standard_webhook,
    sign_standard_webhook_ed25519,
)

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
    jwks = StaticJwks({"keys": [public_jwk(key.public_key(), "ed")]}, at=1614265330)
    verifier = DynamicWebhookVerifier(jwks.cache, clock=jwks.clock)
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

    key.verify(signature, b"")  # raises InvalidSignature if the JWK were parsed wrong


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


@pytest.mark.parametrize(
    ("name", "headers"), STANDARD_MALFORMED, ids=[c[0] for c in STANDARD_MALFORMED]
)
def test_malformed_standard_webhook_headers_raise_only_verification_error(name, headers):
    verifier = StandardWebhookVerifier([SECRET_A], clock=fake_clock())

    raised = verify_outcome(lambda: verifier.verify(headers, BODY))

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


@pytest.mark.parametrize(
    ("name", "headers"), GITHUB_MALFORMED, ids=[c[0] for c in GITHUB_MALFORMED]
)
def test_malformed_github_headers_raise_only_verification_error(name, headers):
    verifier = GitHubVerifier([LOCAL_GITHUB_SECRET])

    raised = verify_outcome(lambda: verifier.verify(headers, BODY))

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
    GitHubVerifier([LOCAL_GITHUB_SECRET])
    StandardWebhookVerifier([LOCAL_GEMINI_SECRET])


# ----------------------------------------------------------------- dynamic webhooks

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
RSA_KEY_2 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
ED_KEY = Ed25519PrivateKey.generate()


class StaticJwks:
    """A JWKS 'server' swapped in at the transport: counts fetches, can fail."""

    def __init__(self, document: dict, at: int = NOW, **cache_options: float) -> None:
        self.document = document
        self.fail = False
        self.clock = fake_clock(at)
        self.cache = JwksCache("https://keys.example/jwks.json", fetch=self.fetch,
                               clock=self.clock, **cache_options)  # fmt: skip

    def fetch(self, url: str, timeout_s: float) -> bytes:
        assert timeout_s > 0
        if self.fail:
            raise OSError("connection refused")
        return json.dumps(self.document).encode()


def default_jwks(**options: float) -> StaticJwks:
    return StaticJwks(
        {
            "keys": [
                public_jwk(RSA_KEY.public_key(), "rsa-1"),
                public_jwk(ED_KEY.public_key(), "ed-1"),
            ]
        },
        **options,
    )


def claims(**changes: object) -> dict[str, object]:
    base = {"iat": NOW, "exp": NOW + 300, "aud": "https://hooks.example/gemini", "iss": "gemini"}
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def jwt_headers(token: str, where: str = "signature") -> dict[str, str]:
    headers = {"webhook-id": "msg_jwt", "webhook-timestamp": str(NOW)}
    if where == "signature":
        headers["webhook-signature"] = token
    else:
        headers["Authorization"] = f"Bearer {token}"
    return headers


@pytest.mark.parametrize("where", ["signature", "authorization"])
def test_a_jwt_signed_by_a_jwks_key_verifies(where):
    jwks = default_jwks()
    verifier = DynamicWebhookVerifier(
        jwks.cache, clock=jwks.clock, audience="https://hooks.example/gemini"
    )
    token = sign_jwt_rs256(RSA_KEY, "rsa-1", claims())

    assert verifier.verify(jwt_headers(token, where), BODY) == "msg_jwt"
    assert jwks.cache.fetch_count == 1


def _forged(token: str, **changes: object) -> str:
    head, payload, sig = token.split(".")
    data = json.loads(base64.urlsafe_b64decode(payload + "=="))
    data.update(changes)
    forged = base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")
    return f"{head}.{forged}.{sig}"


def _header_alg(alg: str) -> str:
    token = sign_jwt_rs256(RSA_KEY, "rsa-1", claims())
    head = (
        base64.urlsafe_b64encode(json.dumps({"alg": alg, "kid": "rsa-1"}).encode())
        .decode()
        .rstrip("=")
    )
    return head + token[token.index(".") :]


GOOD_JWT = sign_jwt_rs256(RSA_KEY, "rsa-1", claims())
BAD_JWTS = [
    ("expired", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(iat=NOW - 200, exp=NOW - 301))),
    ("issued too long ago", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(iat=NOW - 301, exp=NOW + 600))),
    (
        "issued in the future",
        sign_jwt_rs256(RSA_KEY, "rsa-1", claims(iat=NOW + 301, exp=NOW + 900)),
    ),
    ("no exp", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(exp=None))),
    ("no iat", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(iat=None))),
    ("exp is text", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(exp="soon"))),
    ("exp is infinite", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(exp=1e400))),
    ("wrong audience", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(aud="https://evil.example"))),
    ("no audience", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(aud=None))),
    ("wrong issuer", sign_jwt_rs256(RSA_KEY, "rsa-1", claims(iss="someone"))),
    ("signed by a key not in the JWKS", sign_jwt_rs256(RSA_KEY_2, "rsa-1", claims())),
    ("unknown kid", sign_jwt_rs256(RSA_KEY, "rsa-9", claims())),
    ("kid of an Ed25519 key", sign_jwt_rs256(RSA_KEY, "ed-1", claims())),
    (
        "claims changed after signing",
        _forged(GOOD_JWT, aud="https://hooks.example/gemini", exp=NOW + 9999),
    ),
    ("alg none", _header_alg("none")),
    ("alg HS256", _header_alg("HS256")),
    ("signature stripped", GOOD_JWT.rsplit(".", 1)[0] + "."),
    ("signature not base64url", GOOD_JWT.rsplit(".", 1)[0] + ".***"),
    ("header not JSON", "bm90anNvbg." + GOOD_JWT.split(".", 1)[1]),
    (
        "deeply nested header",
        base64.urlsafe_b64encode(b"[" * 5000).decode().rstrip("=") + ".e30.e30",
    ),
    ("four segments", GOOD_JWT + ".x"),
]


@pytest.mark.parametrize(("name", "token"), BAD_JWTS, ids=[c[0] for c in BAD_JWTS])
def test_bad_jwts_raise_only_verification_error(name, token):
    jwks = default_jwks()
    verifier = DynamicWebhookVerifier(
        jwks.cache, clock=jwks.clock, audience="https://hooks.example/gemini", issuer="gemini"
    )

    raised = verify_outcome(lambda: verifier.verify(jwt_headers(token), BODY))

    assert isinstance(raised, VerificationError), f"{name}: {raised!r}"
    assert not isinstance(raised, KeysUnavailable), name


def test_v1a_signatures_verify_against_ed25519_keys_in_the_jwks():
    jwks = default_jwks()
    verifier = DynamicWebhookVerifier(jwks.cache, clock=jwks.clock)
    headers = {
        "webhook-id": "msg_ed",
        "webhook-timestamp": str(NOW),
        "webhook-signature": sign_standard_webhook_ed25519(ED_KEY, "msg_ed", NOW, BODY),
    }

    assert verifier.verify(headers, BODY) == "msg_ed"
    with pytest.raises(VerificationError, match="match"):
        verifier.verify(headers, BODY + b" ")


def test_an_unknown_kid_refetches_once_then_is_rate_limited():
    jwks = default_jwks(min_refetch_interval_s=60)
    verifier = DynamicWebhookVerifier(jwks.cache, clock=jwks.clock)
    stranger = jwt_headers(sign_jwt_rs256(RSA_KEY, "attacker-kid", claims()))
    with pytest.raises(VerificationError, match="unknown key"):
        verifier.verify(stranger, BODY)
    assert jwks.cache.fetch_count == 1, "keys fetched a moment ago are not fetched again"

    jwks.clock.advance(60)
    for _ in range(5):
        with pytest.raises(VerificationError, match="unknown key"):
            verifier.verify(stranger, BODY)
    assert jwks.cache.fetch_count == 2, "the first load plus one refetch, not one per request"

    # A key rotated in at the provider is picked up once the rate limit allows.
    jwks.document["keys"].append(public_jwk(RSA_KEY_2.public_key(), "rsa-2"))
    rotated = jwt_headers(sign_jwt_rs256(RSA_KEY_2, "rsa-2", claims(iat=NOW + 121, exp=NOW + 400)))
    jwks.clock.advance(61)
    assert verifier.verify(rotated, BODY) == "msg_jwt"
    assert jwks.cache.fetch_count == 3


def test_keys_expire_after_the_ttl_and_an_outage_becomes_keys_unavailable():
    jwks = default_jwks(ttl_s=600, min_refetch_interval_s=30)
    verifier = DynamicWebhookVerifier(jwks.cache, clock=jwks.clock)

    def fresh_jwt() -> dict[str, str]:
        now = int(jwks.clock().timestamp())
        return jwt_headers(sign_jwt_rs256(RSA_KEY, "rsa-1", claims(iat=now, exp=now + 300)))

    verifier.verify(fresh_jwt(), BODY)
    jwks.fail = True
    jwks.clock.advance(599)
    verifier.verify(fresh_jwt(), BODY)  # still within the TTL: no fetch needed
    assert jwks.cache.fetch_count == 1

    jwks.clock.advance(2)
    with pytest.raises(KeysUnavailable):
        verifier.verify(fresh_jwt(), BODY)
    with pytest.raises(KeysUnavailable):
        verifier.verify(fresh_jwt(), BODY)
    assert jwks.cache.fetch_count == 2, "a failed fetch is rate-limited too"

    jwks.fail = False
    jwks.clock.advance(30)
    assert verifier.verify(fresh_jwt(), BODY) == "msg_jwt"


def test_a_jwks_document_that_is_not_one_is_keys_unavailable():
    jwks = StaticJwks({"nokeys": []})
    verifier = DynamicWebhookVerifier(jwks.cache, clock=jwks.clock)

    with pytest.raises(KeysUnavailable):
        verifier.verify(jwt_headers(GOOD_JWT), BODY)


class _JwksHandler(BaseHTTPRequestHandler):
    document = b""
    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.document)))
        self.end_headers()
        self.wfile.write(self.document)

    def log_message(self, *args: object) -> None:
        pass


def test_the_default_transport_fetches_a_real_jwks_over_http():
    _JwksHandler.document = json.dumps(
        {"keys": [public_jwk(RSA_KEY.public_key(), "rsa-1")]}
    ).encode()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _JwksHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/jwks.json"
        clock = fake_clock()
        verifier = DynamicWebhookVerifier(JwksCache(url, timeout_s=5, clock=clock), clock=clock)
        assert verifier.verify(jwt_headers(GOOD_JWT), BODY) == "msg_jwt"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _jwks_document(*keys: tuple[rsa.RSAPrivateKey, str]) -> bytes:
    return json.dumps({"keys": [public_jwk(key.public_key(), kid) for key, kid in keys]}).encode()


def test_a_rotated_jwks_key_verifies_on_the_next_call_and_unknown_kids_are_rate_limited():
    _JwksHandler.document, _JwksHandler.hits = _jwks_document((RSA_KEY, "rsa-1")), 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _JwksHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/jwks.json"
        clock = fake_clock()
        verifier = DynamicWebhookVerifier(JwksCache(url, timeout_s=5, clock=clock), clock=clock)
        assert verifier.verify(jwt_headers(GOOD_JWT), BODY) == "msg_jwt"

        _JwksHandler.document = _jwks_document((RSA_KEY_2, "rsa-2"))  # Gemini rotated
        clock.advance(5)  # the default quiet interval after a fetch
        rotated = sign_jwt_rs256(RSA_KEY_2, "rsa-2", claims())
        assert verifier.verify(jwt_headers(rotated), BODY) == "msg_jwt"
        assert _JwksHandler.hits == 2

        for i in range(20):
            garbage = sign_jwt_rs256(RSA_KEY_2, f"made-up-{i}", claims())
            with pytest.raises(VerificationError):
                verifier.verify(jwt_headers(garbage), BODY)
        assert _JwksHandler.hits == 2, "within 5 s of the last fetch no unknown kid refetches"
        clock.advance(5)
        with pytest.raises(VerificationError):
            verifier.verify(jwt_headers(garbage), BODY)
        assert _JwksHandler.hits == 3, "then one refetch, not one per token"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_a_jwks_server_that_never_answers_times_out_as_keys_unavailable():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts connections, never answers
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/jwks.json"
        clock = fake_clock()
        verifier = DynamicWebhookVerifier(JwksCache(url, timeout_s=0.3, clock=clock), clock=clock)
        with pytest.raises(KeysUnavailable) as caught:
            verifier.verify(jwt_headers(GOOD_JWT), BODY)
        # Only the fetch's own timeout can end a wait on a server that never answers.
        assert "timed out" in str(caught.value.__cause__).lower(), repr(caught.value.__cause__)
    finally:
        silent.close()


# ------------------------------------------------------------------------- Gemini


def _gemini_verifier(jwks: StaticJwks, static: bool = True, dynamic: bool = True) -> GeminiVerifier:
    return GeminiVerifier(
        static=StandardWebhookVerifier([LOCAL_GEMINI_SECRET], clock=jwks.clock) if static else None,
        dynamic=DynamicWebhookVerifier(jwks.cache, clock=jwks.clock) if dynamic else None,
    )


def _v1_headers() -> dict[str, str]:
    sig = sign_standard_webhook(LOCAL_GEMINI_SECRET, "msg_v1", NOW, BODY)
    return {"webhook-id": "msg_v1", "webhook-timestamp": str(NOW), "webhook-signature": sig}


def _v1a_headers() -> dict[str, str]:
    sig = sign_standard_webhook_ed25519(ED_KEY, "msg_v1a", NOW, BODY)
    return {"webhook-id": "msg_v1a", "webhook-timestamp": str(NOW), "webhook-signature": sig}


def test_gemini_accepts_each_configured_scheme():
    jwks = default_jwks()
    verifier = _gemini_verifier(jwks)

    assert verifier.verify(_v1_headers(), BODY) == "msg_v1"
    assert verifier.verify(_v1a_headers(), BODY) == "msg_v1a"
    assert verifier.verify(jwt_headers(GOOD_JWT), BODY) == "msg_jwt"
    both = {**_v1a_headers(), "webhook-signature": _v1a_headers()["webhook-signature"] + " v1,"
            + base64.b64encode(b"x" * 32).decode()}  # fmt: skip
    assert verifier.verify(both, BODY) == "msg_v1a", "a failing v1 entry does not hide a good v1a"


def test_gemini_static_only_does_not_fetch_keys_and_rejects_dynamic_forms():
    jwks = default_jwks()
    verifier = _gemini_verifier(jwks, dynamic=False)

    assert verifier.verify(_v1_headers(), BODY) == "msg_v1"
    with pytest.raises(VerificationError):
        verifier.verify(_v1a_headers(), BODY)
    with pytest.raises(VerificationError):
        verifier.verify(jwt_headers(GOOD_JWT), BODY)
    assert jwks.cache.fetch_count == 0


def test_gemini_dynamic_only_rejects_v1_and_reports_a_key_outage_as_retryable():
    jwks = default_jwks()
    verifier = _gemini_verifier(jwks, static=False)

    with pytest.raises(VerificationError):
        verifier.verify(_v1_headers(), BODY)
    jwks.fail = True
    jwks.clock.advance(4000)  # past the default one-hour TTL
    with pytest.raises(KeysUnavailable):
        verifier.verify(jwt_headers(GOOD_JWT), BODY)


def test_gemini_without_any_signature_is_rejected():
    verifier = _gemini_verifier(default_jwks())

    with pytest.raises(VerificationError):
        verifier.verify({"content-type": "application/json"}, BODY)
    with pytest.raises(ValueError):
        GeminiVerifier()


def test_a_jwt_signed_by_pyjwt_verifies_and_ours_verifies_with_pyjwt():
    """PyJWT, an independent implementation, as the oracle for the RS256 path both ways."""
    import jwt as pyjwt

    jwks = default_jwks()
    verifier = DynamicWebhookVerifier(
        jwks.cache, clock=jwks.clock, audience="https://hooks.example/gemini"
    )
    theirs = pyjwt.encode(claims(), RSA_KEY, algorithm="RS256", headers={"kid": "rsa-1"})
    assert verifier.verify(jwt_headers(theirs), BODY) == "msg_jwt"

    ours = sign_jwt_rs256(RSA_KEY, "rsa-1", claims())
    decoded = pyjwt.decode(
        ours,
        RSA_KEY.public_key(),
        algorithms=["RS256"],
        audience="https://hooks.example/gemini",
        options={"verify_exp": False, "verify_iat": False},
    )
    assert decoded == claims()
    assert pyjwt.get_unverified_header(ours)["kid"] == "rsa-1"
