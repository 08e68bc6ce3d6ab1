"""OIDC tokens: key rotation heals on the next call, garbage kids cannot hammer the certs URL.

A loopback certs server stands in for Google's (and the emulator's) key endpoint; tokens
are signed with real RSA keys, including the Cloud Tasks emulator's own `TokenMinter`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from local.cloudtasks_emulator.oidc import KeyServer, TokenMinter
from local.fakes import FakeClock
from local.loopback import QuietHandler, serve
from shared.config import Config
from shared.entrypoints.reconcile import ReconcileEndpoint
from shared.entrypoints.worker import Worker
from shared.errors import retryable
from shared.handoff.envelope import EnvelopeSealer
from shared.signatures import public_jwk
from shared.signatures.dynamic import sign_jwt_rs256
from shared.signatures.oidc import (
    Forbidden,
    OidcUnavailable,
    OidcVerifier,
    SigningKeys,
    Unauthorized,
)
from tests.ports import refusing_port, silent_port

AUDIENCE = "https://worker.example/"
CALLER = "tasks@demo-hookledger.iam.gserviceaccount.com"
KEY_A = rsa.generate_private_key(public_exponent=65537, key_size=2048)
KEY_B = rsa.generate_private_key(public_exponent=65537, key_size=2048)


class CertsServer:
    """Serves `document` as JSON on loopback and counts the GETs it answered."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document: Mapping[str, Any] = document
        self.status = 200
        self.hits = 0
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                server.hits += 1
                body = json.dumps(server.document).encode()
                self.send_response(server.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = serve(Handler)
        self.url = f"{self._server.url}/certs"

    def publish(self, *keys: tuple[rsa.RSAPrivateKey, str]) -> None:
        self.document = {"keys": [public_jwk(key.public_key(), kid) for key, kid in keys]}

    def close(self) -> None:
        self._server.close()


@pytest.fixture
def certs() -> Iterator[CertsServer]:
    server = CertsServer({})
    server.publish((KEY_A, "a"))
    yield server
    server.close()


def claims(clock: FakeClock, **overrides: Any) -> dict[str, Any]:
    now = int(clock().timestamp())
    base = {
        "aud": AUDIENCE,
        "iss": "https://accounts.google.com",
        "email": CALLER,
        "email_verified": True,
        "iat": now,
        "exp": now + 3600,
        "sub": "1234",
    }
    return {k: v for k, v in {**base, **overrides}.items() if v is not None}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def verifier_for(url: str, clock: FakeClock, **options: Any) -> OidcVerifier:
    keys = SigningKeys(url, timeout_s=2, refresh_min_interval_s=5, clock=clock)
    return OidcVerifier(AUDIENCE, keys, CALLER, clock=clock, **options)


def test_a_token_signed_by_a_rotated_key_is_accepted_on_the_next_call(certs, clock):
    verifier = verifier_for(certs.url, clock)
    assert verifier.verify(bearer(sign_jwt_rs256(KEY_A, "a", claims(clock))))["email"] == CALLER

    certs.publish((KEY_B, "b"))  # the signer rotated: key a is gone, key b is new
    clock.advance(10)
    token_b = sign_jwt_rs256(KEY_B, "b", claims(clock))

    assert verifier.verify(bearer(token_b))["email"] == CALLER
    assert certs.hits == 2, "one load, one refetch for the new kid; the TTL is far away"


def test_unknown_kids_fetch_at_most_once_per_interval(certs, clock):
    verifier = verifier_for(certs.url, clock)
    verifier.verify(bearer(sign_jwt_rs256(KEY_A, "a", claims(clock))))
    clock.advance(5)

    for i in range(50):
        token = sign_jwt_rs256(KEY_B, f"made-up-{i}", claims(clock))
        with pytest.raises(Unauthorized, match="unknown signing key"):
            verifier.verify(bearer(token))
    assert certs.hits == 2, "the first unknown kid refetched; the other 49 waited"

    clock.advance(4.9)
    with pytest.raises(Unauthorized):
        verifier.verify(bearer(sign_jwt_rs256(KEY_B, "x", claims(clock))))
    assert certs.hits == 2
    clock.advance(0.1)
    with pytest.raises(Unauthorized):
        verifier.verify(bearer(sign_jwt_rs256(KEY_B, "x", claims(clock))))
    assert certs.hits == 3


def test_a_known_kid_is_served_from_the_cache_until_the_ttl(certs, clock):
    keys = SigningKeys(certs.url, ttl_s=300, clock=clock)
    verifier = OidcVerifier(AUDIENCE, keys, clock=clock)
    for _ in range(5):
        verifier.verify(bearer(sign_jwt_rs256(KEY_A, "a", claims(clock))))
        clock.advance(59)
    assert certs.hits == 1
    clock.advance(10)  # 305 s after the load
    verifier.verify(bearer(sign_jwt_rs256(KEY_A, "a", claims(clock))))
    assert certs.hits == 2


def test_a_certs_outage_is_oidc_unavailable_503_not_401(certs, clock):
    token = sign_jwt_rs256(KEY_A, "a", claims(clock))
    certs.status = 500
    verifier = verifier_for(certs.url, clock)

    with pytest.raises(OidcUnavailable) as caught:
        verifier.verify(bearer(token))
    assert (caught.value.status, retryable(caught.value)) == (503, True)
    with pytest.raises(OidcUnavailable):
        verifier.verify(bearer(token))
    assert certs.hits == 1, "a failed fetch is rate-limited too"

    certs.status = 200
    clock.advance(5)
    assert verifier.verify(bearer(token))["email"] == CALLER


@pytest.mark.parametrize("port", [refusing_port, silent_port], ids=["refused", "silent"])
def test_an_unreachable_certs_url_is_oidc_unavailable_within_the_timeout(port, clock):
    with port() as number:
        keys = SigningKeys(f"http://127.0.0.1:{number}/certs", timeout_s=0.3, clock=clock)
        verifier = OidcVerifier(AUDIENCE, keys, clock=clock)
        with pytest.raises(OidcUnavailable, match=f"127.0.0.1:{number}/certs"):
            verifier.verify(bearer(sign_jwt_rs256(KEY_A, "a", claims(clock))))


def _token_with_header(clock: FakeClock, header: dict[str, Any]) -> str:
    from shared.signatures._common import _b64url

    head = _b64url(json.dumps(header).encode())
    body = _b64url(json.dumps(claims(clock)).encode())
    return f"{head}.{body}.{_b64url(b'sig')}"


@pytest.mark.parametrize(
    ("name", "make", "error"),
    [
        ("no exp", lambda c: sign_jwt_rs256(KEY_A, "a", claims(c, exp=None)), Unauthorized),
        ("no iat", lambda c: sign_jwt_rs256(KEY_A, "a", claims(c, iat=None)), Unauthorized),
        ("no iss", lambda c: sign_jwt_rs256(KEY_A, "a", claims(c, iss=None)), Unauthorized),
        (
            "another issuer",
            lambda c: sign_jwt_rs256(KEY_A, "a", claims(c, iss="https://evil.example")),
            Unauthorized,
        ),
        (
            "expired",
            lambda c: sign_jwt_rs256(KEY_A, "a", claims(c, exp=int(c().timestamp()) - 11)),
            Unauthorized,
        ),
        (
            "issued in the future",
            lambda c: sign_jwt_rs256(KEY_A, "a", claims(c, iat=int(c().timestamp()) + 60)),
            Unauthorized,
        ),
        (
            "exp is text",
            lambda c: sign_jwt_rs256(KEY_A, "a", claims(c, exp="tomorrow")),
            Unauthorized,
        ),
        (
            "wrong audience",
            lambda c: sign_jwt_rs256(KEY_A, "a", claims(c, aud="https://elsewhere/")),
            Unauthorized,
        ),
        ("signed by another key", lambda c: sign_jwt_rs256(KEY_B, "a", claims(c)), Unauthorized),
        ("alg none", lambda c: _token_with_header(c, {"alg": "none", "kid": "a"}), Unauthorized),
        ("alg HS256", lambda c: _token_with_header(c, {"alg": "HS256", "kid": "a"}), Unauthorized),
        ("no kid", lambda c: _token_with_header(c, {"alg": "RS256"}), Unauthorized),
        ("not a jwt", lambda c: "not-a-jwt", Unauthorized),
        (
            "email not verified",
            lambda c: sign_jwt_rs256(KEY_A, "a", claims(c, email_verified=False)),
            Forbidden,
        ),
        (
            "another account",
            lambda c: sign_jwt_rs256(KEY_A, "a", claims(c, email="evil@x.example")),
            Forbidden,
        ),
    ],
)
def test_bad_tokens_are_refused(certs, clock, name, make, error):
    verifier = verifier_for(certs.url, clock)
    with pytest.raises(error) as caught:
        verifier.verify(bearer(make(clock)))
    assert caught.value.status == (403 if error is Forbidden else 401), name
    assert "eyJ" not in str(caught.value), "the message never contains the token"


def test_both_google_issuer_spellings_pass_and_the_issuers_are_configurable(certs, clock):
    verifier = verifier_for(certs.url, clock)
    for issuer in ("https://accounts.google.com", "accounts.google.com"):
        token = sign_jwt_rs256(KEY_A, "a", claims(clock, iss=issuer))
        assert verifier.verify(bearer(token))["iss"] == issuer

    local = verifier_for(certs.url, clock, issuers=["http://127.0.0.1:8124"])
    with pytest.raises(Unauthorized, match="issuer"):
        local.verify(bearer(sign_jwt_rs256(KEY_A, "a", claims(clock))))
    token = sign_jwt_rs256(KEY_A, "a", claims(clock, iss="http://127.0.0.1:8124"))
    assert local.verify(bearer(token))["iss"] == "http://127.0.0.1:8124"


@pytest.mark.parametrize("form", ["jwks.json", "certs"])
def test_the_cloud_tasks_emulators_tokens_verify_in_both_certs_forms(form):
    minter = TokenMinter()
    server = KeyServer(minter, "127.0.0.1", 0)
    server.start()
    try:
        verifier = OidcVerifier(AUDIENCE, f"http://127.0.0.1:{server.port}/{form}", CALLER)
        claims_seen = verifier.verify(bearer(minter.mint(CALLER, AUDIENCE)))
    finally:
        server.stop()
    assert (claims_seen["email"], claims_seen["aud"]) == (CALLER, AUDIENCE)


def test_a_restarted_emulators_new_key_is_accepted_on_the_next_attempt():
    """Two real emulator key sets at one URL: a restart makes a new key (issue 12)."""
    before, after = TokenMinter(), TokenMinter()
    assert before.kid != after.kid, "each emulator start makes its own signing key"
    certs = CertsServer(before.jwks)
    try:
        verifier = OidcVerifier(AUDIENCE, certs.url, CALLER)
        assert verifier.verify(bearer(before.mint(CALLER, AUDIENCE)))["email"] == CALLER
        certs.document = after.jwks  # the emulator restarted on the same ports
        assert verifier.verify(bearer(after.mint(CALLER, AUDIENCE)))["email"] == CALLER
    finally:
        certs.close()


def _endpoints(verifier: OidcVerifier) -> list[Any]:
    never = pytest.fail  # neither endpoint may get past the token check
    worker = Worker(
        Config(),
        sealer=EnvelopeSealer(["local-envelope-key"]),
        ledger=None,  # type: ignore[arg-type]
        services=lambda name: never(f"the worker built {name}"),
        oidc=verifier,
    )
    return [worker, ReconcileEndpoint(lambda: never("reconcile ran"), oidc=verifier)]


def test_the_worker_and_reconcile_answer_503_when_the_keys_cannot_be_fetched(clock):
    token = sign_jwt_rs256(KEY_A, "a", claims(clock))
    with refusing_port() as port:
        verifier = OidcVerifier(AUDIENCE, f"http://127.0.0.1:{port}/certs", clock=clock)
        for endpoint in _endpoints(verifier):
            reply = endpoint.handle("POST", "/", bearer(token), b"{}")
            assert reply.status == 503, type(endpoint).__name__
