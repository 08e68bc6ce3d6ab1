"""GitHub App authentication: the App JWT's claims, the installation-token cache (expiry,
one renewal on a 401, one mint however many threads ask), the personal-token mode left as
it was, GitHub's rate-limit waits, and the settings that configure it all.

The wire is swapped (a scripted `requests.Session`), never the code; the clock is a
`FakeClock`.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import jwt
import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from local.fakes import FakeClock
from shared.config import Config, ConfigError
from shared.entrypoints.runtime import build_github_auth
from shared.github import ContentsClient, GitHubRejected, GitHubUnavailable, parse_push
from shared.github.app import (
    JWT_LIFETIME,
    AppAuth,
    AppCredentials,
    AppKeyError,
    app_claims,
    app_jwt,
)
from shared.github.auth import TokenAuth

API = "http://github.local"
APP_ID = "Iv23liTEST0001"


@pytest.fixture(scope="module")
def key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def pem(key) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


class GitHubWire(requests.Session):
    """Mints `ghs_<n>` tokens valid `lifetime_s`; answers API calls from `api_answers`
    (status per call, default 200 with a file). Records every request."""

    def __init__(self, clock: FakeClock, lifetime_s: int = 3600) -> None:
        super().__init__()
        self.clock, self.lifetime_s = clock, lifetime_s
        self.mints: list[dict[str, str]] = []
        self.calls: list[dict[str, str]] = []
        self.api_answers: list[tuple[int, dict[str, str]]] = []
        self.mint_answers: list[int] = []
        self.entered = threading.Event()
        self.release: threading.Event | None = None

    def _response(self, status: int, body, headers=None) -> requests.Response:
        response = requests.Response()
        response.status_code = status
        if isinstance(body, bytes):
            response._content = body
            response.headers["Content-Type"] = "application/vnd.github.raw"
        else:
            response._content = json.dumps(body).encode()
            response.headers["Content-Type"] = "application/json; charset=utf-8"
        response.headers.update(headers or {})
        return response

    def post(self, url, **kwargs):  # type: ignore[override]
        assert url.startswith(f"{API}/app/installations/") and url.endswith("/access_tokens")
        self.mints.append(dict(kwargs["headers"]))
        assert kwargs["timeout"] > 0
        self.entered.set()
        if self.release is not None:
            assert self.release.wait(10), "the test never released the mint"
        status = self.mint_answers.pop(0) if self.mint_answers else 201
        if status != 201:
            return self._response(status, {"message": "A JSON web token could not be decoded"})
        expires = self.clock() + timedelta(seconds=self.lifetime_s)
        body = {
            "token": f"ghs_{len(self.mints)}",
            "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        return self._response(201, body)

    def request(self, method, url, **kwargs):  # type: ignore[override]
        self.calls.append(dict(kwargs["headers"]))
        status, headers = self.api_answers.pop(0) if self.api_answers else (200, {})
        body = b"# doc\n" if status == 200 else {"message": "Bad credentials"}
        if status == 200 and url.endswith("/graphql"):  # every file asked for, as a Blob
            aliases = [k for k in kwargs["json"]["variables"] if k not in ("owner", "name")]
            blob = {"__typename": "Blob", "text": "# doc\n", "isBinary": False}
            body = {"data": {"repository": {alias: blob for alias in aliases}}}
        return self._response(status, body, headers)


def app_auth(pem: str, wire: GitHubWire, clock: FakeClock, **kwargs) -> AppAuth:
    return AppAuth(
        AppCredentials.from_pem(APP_ID, pem), API, session=wire, clock=clock, timeout_s=5, **kwargs
    )


def contents(auth, wire: GitHubWire, clock: FakeClock, sleeps: list[float] | None = None):
    record = sleeps.append if sleeps is not None else (lambda _s: None)
    return ContentsClient(
        API, auth=auth, session=wire, attempts=3, sleep=record, clock=clock, rand=lambda: 0.0
    )


# --- the App JWT ----------------------------------------------------------------------


def test_the_app_jwt_is_rs256_backdated_60s_expiring_within_10_minutes_issued_by_the_app(
    key, pem, clock
):
    token = app_jwt(AppCredentials.from_pem(APP_ID, pem), clock())
    now = int(clock().timestamp())

    assert jwt.get_unverified_header(token)["alg"] == "RS256"
    claims = jwt.decode(
        token, key.public_key(), algorithms=["RS256"], options={"verify_exp": False}
    )
    assert claims == {"iat": now - 60, "exp": now + 540, "iss": APP_ID}
    assert claims["exp"] - now <= 600  # GitHub refuses more than 10 minutes ahead
    assert timedelta(minutes=9) == JWT_LIFETIME


def test_claims_follow_the_injected_clock(clock):
    later = clock.advance(3600)
    assert app_claims("123", later)["iat"] == int(later.timestamp()) - 60


@pytest.mark.parametrize(
    ("name", "material"),
    [
        ("not PEM", b"hello"),
        ("an EC key", "ec"),
        ("an empty key", b""),
    ],
)
def test_an_unusable_key_is_refused_without_quoting_it(name, material):
    if material == "ec":
        material = (
            ec.generate_private_key(ec.SECP256R1())
            .private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            .decode()
        )
    with pytest.raises(AppKeyError) as caught:
        AppCredentials.from_pem(APP_ID, material)
    text = material if isinstance(material, str) else material.decode()
    assert not text or text not in str(caught.value), name


def test_credentials_never_show_their_key(pem):
    shown = repr(AppCredentials.from_pem(APP_ID, pem))
    assert "PRIVATE" not in shown and pem[40:80] not in shown


# --- the installation-token cache ------------------------------------------------------


def test_a_token_is_minted_once_and_reused_until_five_minutes_before_it_expires(pem, clock):
    wire = GitHubWire(clock)
    auth = app_auth(pem, wire, clock)

    first = auth.headers(42)
    clock.advance(54 * 60)  # 6 minutes left: still good
    assert auth.headers(42) == first
    clock.advance(60)  # 5 minutes left: renewed
    renewed = auth.headers(42)

    assert first == {"Authorization": "Bearer ghs_1"}
    assert renewed == {"Authorization": "Bearer ghs_2"}
    assert len(wire.mints) == 2
    assert wire.mints[0]["Authorization"].startswith("Bearer ey")  # the App JWT
    assert wire.mints[0]["Accept"] == "application/vnd.github+json"
    assert wire.mints[0]["X-GitHub-Api-Version"] == "2026-03-10"


def test_each_installation_has_its_own_token(pem, clock):
    wire = GitHubWire(clock)
    auth = app_auth(pem, wire, clock)
    assert auth.headers(1) != auth.headers(2)
    assert auth.headers(1) == {"Authorization": "Bearer ghs_1"}
    assert len(wire.mints) == 2


def test_a_short_lived_token_is_renewed_at_half_its_life_not_on_every_call(pem, clock):
    wire = GitHubWire(clock, lifetime_s=120)
    auth = app_auth(pem, wire, clock)
    first = auth.headers(7)
    clock.advance(59)
    assert auth.headers(7) == first
    clock.advance(1)
    assert auth.headers(7) != first
    assert len(wire.mints) == 2


def test_a_401_renews_the_token_and_the_request_is_sent_once_more(pem, clock):
    wire = GitHubWire(clock)
    auth = app_auth(pem, wire, clock)
    wire.api_answers = [(401, {}), (200, {})]

    data = contents(auth, wire, clock).fetch("o/r", "a.md", "abc", installation_id=9)

    assert data == b"# doc\n"
    assert [c["Authorization"] for c in wire.calls] == ["Bearer ghs_1", "Bearer ghs_2"]
    assert len(wire.mints) == 2


def test_a_second_401_is_final_never_a_third_request(pem, clock):
    wire = GitHubWire(clock)
    auth = app_auth(pem, wire, clock)
    wire.api_answers = [(401, {}), (401, {}), (200, {})]

    with pytest.raises(GitHubRejected, match=r"o/r:a\.md@abc: GitHub answered 401") as caught:
        contents(auth, wire, clock).fetch("o/r", "a.md", "abc", installation_id=9)

    assert len(wire.calls) == 2 and len(wire.mints) == 2
    assert "ghs_" not in str(caught.value)


def test_a_personal_token_401_is_not_retried(clock):
    wire = GitHubWire(clock)
    wire.api_answers = [(401, {})]
    with pytest.raises(GitHubRejected, match="401"):
        contents(TokenAuth("ghp_personal"), wire, clock).fetch("o/r", "a.md", "abc")
    assert [c["Authorization"] for c in wire.calls] == ["Bearer ghp_personal"]
    assert wire.mints == []


def test_without_an_installation_the_app_uses_its_fallback_as_before_apps(pem, clock):
    wire = GitHubWire(clock)
    auth = app_auth(pem, wire, clock, fallback=TokenAuth("ghp_personal"))
    contents(auth, wire, clock).fetch("o/r", "a.md", "abc")
    assert wire.calls[0]["Authorization"] == "Bearer ghp_personal" and wire.mints == []


def test_no_app_and_no_token_sends_no_authorization(clock):
    wire = GitHubWire(clock)
    contents(TokenAuth(), wire, clock).fetch("o/r", "a.md", "abc", installation_id=3)
    assert "Authorization" not in wire.calls[0]


def test_a_stale_401_does_not_throw_away_the_token_another_thread_renewed(pem, clock):
    """The timeline in shared/github/app.py: two requests refused with t1, one renewal."""
    wire = GitHubWire(clock)
    auth = app_auth(pem, wire, clock)
    t1 = auth.headers(42)
    assert auth.invalidate(42, t1) is True  # thread A
    t2 = auth.headers(42)  # thread A mints
    assert auth.invalidate(42, t1) is True  # thread B, late: t1 is no longer cached
    assert auth.headers(42) == t2  # thread B gets t2, no second mint
    assert len(wire.mints) == 2


def test_threads_asking_at_once_share_one_mint(pem, clock):
    wire = GitHubWire(clock)
    wire.release = threading.Event()
    auth = app_auth(pem, wire, clock)
    got: list[dict[str, str]] = []
    lock = threading.Lock()

    def ask() -> None:
        headers = auth.headers(42)
        with lock:
            got.append(headers)

    threads = [threading.Thread(target=ask) for _ in range(12)]
    for thread in threads:
        thread.start()
    assert wire.entered.wait(10)  # one thread is minting; the others queue or come later
    wire.release.set()
    for thread in threads:
        thread.join(10)

    assert len(got) == 12
    assert {h["Authorization"] for h in got} == {"Bearer ghs_1"}
    assert len(wire.mints) == 1 and auth.minted == 1


def test_a_refused_jwt_is_permanent_and_names_githubs_message_not_the_jwt(pem, clock):
    wire = GitHubWire(clock)
    wire.mint_answers = [401]
    auth = app_auth(pem, wire, clock)
    with pytest.raises(GitHubRejected, match="could not be decoded") as caught:
        auth.headers(42)
    assert "ey" not in str(caught.value).split("answered")[0]
    assert wire.mints[0]["Authorization"].split()[1] not in str(caught.value)


def test_a_mint_that_fails_for_now_is_retried_by_the_clients_policy(pem, clock):
    wire = GitHubWire(clock)
    wire.mint_answers = [502]
    sleeps: list[float] = []
    auth = app_auth(pem, wire, clock)

    data = contents(auth, wire, clock, sleeps).fetch("o/r", "a.md", "abc", installation_id=9)

    assert data == b"# doc\n"
    assert len(wire.mints) == 2 and len(sleeps) == 1
    assert len(wire.calls) == 1  # the request itself went out once, with the second token


# --- rate limits: what GitHub asked for is waited for, or not at all -------------------


def test_a_primary_limit_is_waited_out_until_its_reset(clock):
    wire = GitHubWire(clock)
    reset = int(clock().timestamp()) + 5
    wire.api_answers = [(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)})]
    sleeps: list[float] = []

    contents(TokenAuth("t"), wire, clock, sleeps).fetch("o/r", "a.md", "abc")

    assert sleeps == [6.0]  # until the reset, and one second more
    assert len(wire.calls) == 2


def test_a_primary_limit_resetting_beyond_the_longest_wait_ends_the_call_at_once(clock):
    wire = GitHubWire(clock)
    reset = int(clock().timestamp()) + 1800
    wire.api_answers = [(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)})]
    sleeps: list[float] = []

    with pytest.raises(GitHubUnavailable, match="not waited for"):
        contents(TokenAuth("t"), wire, clock, sleeps).fetch("o/r", "a.md", "abc")

    assert sleeps == [] and len(wire.calls) == 1


@pytest.mark.parametrize("status", [403, 429])
def test_a_secondary_limit_waits_its_retry_after(clock, status):
    wire = GitHubWire(clock)
    wire.api_answers = [(status, {"retry-after": "3"})]
    sleeps: list[float] = []
    contents(TokenAuth("t"), wire, clock, sleeps).fetch("o/r", "a.md", "abc")
    assert sleeps == [3.0] and len(wire.calls) == 2


# --- the installation id of a push, and the settings --------------------------------------


def test_a_push_carries_its_installation_id():
    payload = {
        "ref": "refs/heads/main",
        "after": "abc1",
        "repository": {"full_name": "o/r", "default_branch": "main"},
        "installation": {"id": 4242, "node_id": "MDIz"},
    }
    assert parse_push(payload).installation_id == 4242
    assert parse_push({**payload, "installation": None}).installation_id is None
    with pytest.raises(ValueError, match="installation"):
        parse_push({**payload, "installation": {"id": "4242"}})


ENV = {"GOOGLE_CLOUD_PROJECT": "demo-hookledger"}


def test_an_app_needs_both_its_id_and_its_key():
    with pytest.raises(ConfigError, match="GITHUB_APP_PRIVATE_KEY is not"):
        Config.from_env({**ENV, "GITHUB_APP_ID": "123"})
    with pytest.raises(ConfigError, match="GITHUB_APP_ID is not"):
        Config.from_env({**ENV, "GITHUB_APP_PRIVATE_KEY": "x"})


def test_the_key_may_come_on_one_line_and_never_shows_in_the_config(pem):
    one_line = pem.replace("\n", "\\n")
    cfg = Config.from_env({**ENV, "GITHUB_APP_ID": "123", "GITHUB_APP_PRIVATE_KEY": one_line})
    assert cfg.github_app_private_key == pem.strip()
    shown = repr(Config.from_env({**ENV, "GITHUB_TOKEN": "ghp_secret0123456789"}))
    assert pem[40:80] not in repr(cfg) and "ghp_secret" not in shown


def test_the_app_auth_is_built_from_the_settings_and_a_bad_key_names_its_variable(pem):
    cfg = Config.from_env({**ENV, "GITHUB_APP_ID": APP_ID, "GITHUB_APP_PRIVATE_KEY": pem})
    auth = build_github_auth(cfg)
    assert isinstance(auth, AppAuth) and auth.app_id == APP_ID
    assert isinstance(build_github_auth(Config.from_env(ENV)), TokenAuth)
    bad = Config.from_env({**ENV, "GITHUB_APP_ID": APP_ID, "GITHUB_APP_PRIVATE_KEY": "nope-key"})
    with pytest.raises(ConfigError, match="GITHUB_APP_PRIVATE_KEY is unusable") as caught:
        build_github_auth(bad)
    assert "nope-key" not in str(caught.value)


# --- the log-secret check of the App path (beside tests/integration/test_ingress.py's) ----


def test_no_key_jwt_or_installation_token_reaches_the_logs_or_errors(pem, clock, caplog):
    """A push's fetches through every App outcome (minted, renewed after a 401, a mint
    refused, a mint failing for now) log what failed, and never a credential."""
    import logging

    from apps.review.pipeline import _fetch_all
    from shared.github import Push
    from shared.handlers import RetryableError

    caplog.set_level(logging.DEBUG, logger="hookledger")
    wire = GitHubWire(clock)
    auth = app_auth(pem, wire, clock)
    client = contents(auth, wire, clock)
    push = Push("o/r", "abc1", "refs/heads/main", "main", False, (), installation_id=9)
    wire.api_answers = [(401, {}), (200, {})]  # the token renewed once, mid-query
    files, refused = _fetch_all(push, ["a.md", "b.md"], client, "d-1")
    assert sorted(files) == ["a.md", "b.md"] and refused == {}

    wire.mint_answers = [401]  # the JWT refused: the file is refused, the push goes on
    auth.invalidate(9, auth.headers(9))
    _files, refused = _fetch_all(push, ["c.md"], client, "d-2")
    errors = list(refused.values())
    wire.mint_answers = [502, 502, 502]  # GitHub down: retryable
    auth.invalidate(9, {"Authorization": f"Bearer ghs_{len(wire.mints)}"})
    with pytest.raises(RetryableError) as caught:
        _fetch_all(push, ["d.md"], client, "d-3")
    errors.append(str(caught.value))

    text = "\n".join(
        [
            *errors,
            *(f"{r.getMessage()} {getattr(r, 'hookledger_fields', {})}" for r in caplog.records),
        ]
    )
    assert "fetch refused for c.md" in text and "could not be decoded" in text
    jwts = [m["Authorization"].split()[1] for m in wire.mints]
    tokens = [c["Authorization"].split()[1] for c in wire.calls]
    for secret in [*pem.splitlines()[1:-1], *jwts, *tokens, "ghs_"]:
        assert secret not in text
