"""hookledger as a GitHub App against the simulator as a GitHub App's GitHub: the App JWT
checked with GitHub's refusals, installation tokens that really expire, permissions and
repositories enforced, and GitHub's rate limits waited out, all through the real clients.

Nothing here waits for time: an expiry is a control call, and a client's wait for a rate
limit is recorded by its injected `sleep`, which restores the budget as time would.
"""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from apps.review.comments import push_marker
from local.simulator.apps import EXP_INVALID, EXP_TOO_FAR, IAT_INVALID, NO_ACCESS, NOT_DECODED
from shared.github import (
    CommentsClient,
    ContentsClient,
    GitHubRejected,
)
from shared.github.app import AppAuth, AppCredentials
from shared.github.auth import TokenAuth

OWNER, REPO = "octo", "docs"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
DATA = b"# Docs\n\nHello.\n"


def make_auth(url: str, client_id: str, pem: str, **kwargs: Any) -> AppAuth:
    return AppAuth(AppCredentials.from_pem(client_id, pem), url, timeout_s=5, **kwargs)


def clients(url: str, auth: Any, sleep=lambda _s: None) -> tuple[ContentsClient, CommentsClient]:
    settings: dict[str, Any] = {"auth": auth, "timeout_s": 5, "attempts": 2, "sleep": sleep}
    return ContentsClient(url, **settings), CommentsClient(url, **settings)


@pytest.fixture
def app(simulator) -> dict[str, Any]:
    """A registered App (the simulator made its key pair) installed on `octo/docs`."""
    registered = simulator.control.register_github_app()
    installation = simulator.control.install_github_app(
        registered["id"], OWNER, repositories=[f"{OWNER}/{REPO}"]
    )
    simulator.control.put_file(OWNER, REPO, "a.md", SHA, DATA)
    return {**registered, "installation": installation["id"]}


def commit(simulator) -> dict[str, Any]:
    seen = simulator.control.github_comments()
    found = [c for c in seen["commits"] if c["sha"] == SHA]
    return found[0] if found else {"posts": 0, "comments": 0, "deletes": 0}


def test_an_app_fetches_and_comments_with_one_installation_token(simulator, app):
    auth = make_auth(simulator.url, app["client_id"], app["private_key"])
    contents, comments = clients(simulator.url, auth)
    installation = app["installation"]

    assert contents.fetch(f"{OWNER}/{REPO}", "a.md", SHA, installation_id=installation) == DATA
    result = comments.publish_once(
        f"{OWNER}/{REPO}",
        SHA,
        push_marker(f"{OWNER}/{REPO}", SHA),
        "review",
        installation_id=installation,
    )

    assert result.created
    assert (commit(simulator)["posts"], commit(simulator)["comments"]) == (1, 1)
    assert simulator.control.github_apps()["tokens_issued"] == 1  # shared by both clients
    assert auth.minted == 1


def test_the_app_id_works_as_the_issuer_too(simulator, app):
    auth = make_auth(simulator.url, str(app["id"]), app["private_key"])
    contents, _ = clients(simulator.url, auth)
    assert (
        contents.fetch(f"{OWNER}/{REPO}", "a.md", SHA, installation_id=app["installation"]) == DATA
    )


def test_a_token_that_expires_mid_run_is_renewed_and_the_comment_posted_exactly_once(
    simulator, app
):
    """The token expires between the look for the marker and the POST: the POST is
    answered 401 (nothing created), renewed once, sent once more, and one comment exists."""
    auth = make_auth(simulator.url, app["client_id"], app["private_key"])
    _, comments = clients(simulator.url, auth)

    class ExpireBeforePost(requests.Session):
        expired = 0

        def request(self, method, url, **kwargs):  # type: ignore[override]
            if method == "POST" and not self.expired:  # once: right before the first POST
                self.expired = simulator.control.github_tokens(expire=True)["expired"]
            return super().request(method, url, **kwargs)

    comments._session = ExpireBeforePost()
    marker = push_marker(f"{OWNER}/{REPO}", SHA)
    result = comments.publish_once(
        f"{OWNER}/{REPO}", SHA, marker, "review", installation_id=app["installation"]
    )

    seen = commit(simulator)
    assert result.created and (seen["posts"], seen["comments"], seen["deletes"]) == (1, 1, 0)
    assert auth.minted == 2 and simulator.control.github_apps()["tokens_issued"] == 2
    # A second publish (a retried delivery) finds it: still one.
    again = comments.publish_once(
        f"{OWNER}/{REPO}", SHA, marker, "review", installation_id=app["installation"]
    )
    assert not again.created and commit(simulator)["comments"] == 1


def test_an_expired_token_on_a_fetch_is_renewed_once(simulator, app):
    auth = make_auth(simulator.url, app["client_id"], app["private_key"])
    contents, _ = clients(simulator.url, auth)
    installation = app["installation"]
    contents.fetch(f"{OWNER}/{REPO}", "a.md", SHA, installation_id=installation)

    simulator.control.github_tokens(expire=True, installation_id=installation)

    assert contents.fetch(f"{OWNER}/{REPO}", "a.md", SHA, installation_id=installation) == DATA
    assert auth.minted == 2


# --- the App JWT, refused as GitHub refuses it --------------------------------------------


def _pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


@pytest.fixture(scope="module")
def keypair() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def other_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def own_key_app(simulator, keypair) -> dict[str, Any]:
    public = keypair.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    registered = simulator.control.register_github_app(
        client_id="Iv23liOWNKEY", public_key=public.decode()
    )
    installation = simulator.control.install_github_app(registered["id"], OWNER)
    return {**registered, "installation": installation["id"]}


def _claims(iss: str, iat: int = -60, exp: int = 540) -> dict[str, Any]:
    now = int(time.time())
    return {"iat": now + iat, "exp": now + exp, "iss": iss}


@pytest.mark.parametrize(
    ("name", "claims", "signer", "status", "message"),
    [
        ("signed with another key", {}, "other", 401, NOT_DECODED),
        ("exp 11 minutes ahead", {"exp": 660}, "own", 401, EXP_TOO_FAR),
        ("exp in the past", {"exp": -5}, "own", 401, EXP_INVALID),
        ("iat 2 minutes ahead", {"iat": 120}, "own", 401, IAT_INVALID),
        ("unknown issuer", {"iss": "Iv23liNOBODY"}, "own", 404, "Integration not found"),
        ("not a JWT at all", None, "own", 401, NOT_DECODED),
    ],
)
def test_a_bad_app_jwt_is_refused_with_githubs_body(
    simulator, own_key_app, keypair, other_key, name, claims, signer, status, message
):
    if claims is None:
        token = "not-a-jwt"
    else:
        fields = {"iss": own_key_app["client_id"], "iat": -60, "exp": 540, **claims}
        body = _claims(fields["iss"], fields["iat"], fields["exp"])
        key = keypair if signer == "own" else other_key
        token = jwt.encode(body, key, algorithm="RS256")
    url = f"{simulator.url}/app/installations/{own_key_app['installation']}/access_tokens"

    answer = requests.post(url, headers={"Authorization": f"Bearer {token}"}, timeout=5)

    assert answer.status_code == status, name
    assert answer.json()["message"] == message, name
    assert answer.json()["documentation_url"].startswith("https://docs.github.com/"), name


def test_the_client_reports_githubs_refusal_of_a_wrong_key(simulator, own_key_app, other_key):
    auth = make_auth(simulator.url, own_key_app["client_id"], _pem(other_key))
    contents, _ = clients(simulator.url, auth)
    with pytest.raises(GitHubRejected, match="could not be decoded") as caught:
        contents.fetch(f"{OWNER}/{REPO}", "a.md", SHA, installation_id=own_key_app["installation"])
    assert "BEGIN" not in str(caught.value) and "ghs_" not in str(caught.value)


def test_a_good_jwt_gets_a_token_valid_one_hour(simulator, own_key_app, keypair):
    token = jwt.encode(_claims(own_key_app["client_id"]), keypair, algorithm="RS256")
    url = f"{simulator.url}/app/installations/{own_key_app['installation']}/access_tokens"
    answer = requests.post(url, headers={"Authorization": f"Bearer {token}"}, timeout=5)
    assert answer.status_code == 201
    body = answer.json()
    assert body["token"].startswith("ghs_")
    expires = time.mktime(time.strptime(body["expires_at"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert 3500 < expires - time.time() <= 3600


# --- installations, permissions and repositories ------------------------------------------


def test_a_token_without_write_on_contents_cannot_comment(simulator):
    registered = simulator.control.register_github_app()
    installation = simulator.control.install_github_app(
        registered["id"], OWNER, permissions={"contents": "read", "metadata": "read"}
    )["id"]
    simulator.control.put_file(OWNER, REPO, "a.md", SHA, DATA)
    auth = make_auth(simulator.url, registered["client_id"], registered["private_key"])
    contents, comments = clients(simulator.url, auth)

    assert contents.fetch(f"{OWNER}/{REPO}", "a.md", SHA, installation_id=installation) == DATA
    with pytest.raises(GitHubRejected, match="GitHub answered 403"):
        comments.publish_once(
            f"{OWNER}/{REPO}",
            SHA,
            push_marker(f"{OWNER}/{REPO}", SHA),
            "x",
            installation_id=installation,
        )
    assert commit(simulator)["comments"] == 0

    raw = requests.post(
        f"{simulator.url}/repos/{OWNER}/{REPO}/commits/{SHA}/comments",
        json={"body": "x"},
        headers=auth.headers(installation),
        timeout=5,
    )
    assert (raw.status_code, raw.json()["message"]) == (403, NO_ACCESS)
    assert raw.headers["X-Accepted-GitHub-Permissions"] == "contents=write"


def test_a_repository_outside_the_installation_is_403(simulator, app):
    simulator.control.put_file(OWNER, "elsewhere", "a.md", SHA, DATA)
    simulator.control.put_file("someone", REPO, "a.md", SHA, DATA)
    auth = make_auth(simulator.url, app["client_id"], app["private_key"])
    contents, _ = clients(simulator.url, auth)
    for repo in (f"{OWNER}/elsewhere", f"someone/{REPO}"):
        with pytest.raises(GitHubRejected, match="GitHub answered 403"):
            contents.fetch(repo, "a.md", SHA, installation_id=app["installation"])


def test_a_suspended_installation_gets_no_token_and_a_deleted_one_is_gone(simulator, app):
    auth = make_auth(simulator.url, app["client_id"], app["private_key"])
    contents, _ = clients(simulator.url, auth)
    simulator.control.change_installation(app["installation"], suspended=True)
    with pytest.raises(GitHubRejected, match="This installation has been suspended"):
        contents.fetch(f"{OWNER}/{REPO}", "a.md", SHA, installation_id=app["installation"])
    simulator.control.change_installation(app["installation"], suspended=False, deleted=True)
    with pytest.raises(GitHubRejected, match="404"):
        contents.fetch(f"{OWNER}/{REPO}", "a.md", SHA, installation_id=app["installation"])


def test_an_unknown_installation_token_is_bad_credentials(simulator, app):
    answer = requests.get(
        f"{simulator.url}/repos/{OWNER}/{REPO}/contents/a.md",
        params={"ref": SHA},
        headers={"Authorization": "Bearer ghs_madeup0000000000000000000000000000"},
        timeout=5,
    )
    assert (answer.status_code, answer.json()["message"]) == (401, "Bad credentials")


def test_a_personal_token_or_none_is_served_as_before(simulator, app):
    for auth in (TokenAuth("ghp_personal"), TokenAuth()):
        contents, _ = clients(simulator.url, auth)
        assert contents.fetch(f"{OWNER}/{REPO}", "a.md", SHA) == DATA


# --- rate limits -------------------------------------------------------------------------


def test_every_github_answer_carries_the_rate_limit_headers(simulator, app):
    answer = requests.get(
        f"{simulator.url}/repos/{OWNER}/{REPO}/contents/a.md", params={"ref": SHA}, timeout=5
    )
    again = requests.get(f"{simulator.url}/repos/{OWNER}/{REPO}/contents/none.md", timeout=5)
    for got in (answer, again):
        assert got.headers["x-ratelimit-limit"] == "5000"
        assert got.headers["x-ratelimit-resource"] == "core"
        assert int(got.headers["x-ratelimit-reset"]) > time.time()
    assert int(again.headers["x-ratelimit-used"]) == int(answer.headers["x-ratelimit-used"]) + 1


def test_an_exhausted_primary_limit_is_waited_out_until_its_reset(simulator, app):
    simulator.control.set_fault_model(github_rate_limit={"remaining": 0, "reset_in_s": 3})
    waits: list[float] = []

    def sleep(seconds: float) -> None:  # time passes: the window resets
        waits.append(seconds)
        simulator.control.set_fault_model(github_rate_limit={"remaining": 5000})

    auth = make_auth(simulator.url, app["client_id"], app["private_key"])
    contents, _ = clients(simulator.url, auth, sleep=sleep)

    assert (
        contents.fetch(f"{OWNER}/{REPO}", "a.md", SHA, installation_id=app["installation"]) == DATA
    )
    [wait] = waits
    assert 1.0 <= wait <= 5.0  # until x-ratelimit-reset (3 s away), plus one
    assert simulator.control.faults()["github_rate_limited"]["primary"] >= 1


def test_a_refused_primary_limit_says_so_in_githubs_words(simulator, app):
    simulator.control.set_fault_model(github_rate_limit={"remaining": 0, "reset_in_s": 600})
    answer = requests.get(
        f"{simulator.url}/repos/{OWNER}/{REPO}/contents/a.md", params={"ref": SHA}, timeout=5
    )
    assert answer.status_code == 403
    assert answer.headers["x-ratelimit-remaining"] == "0"
    assert answer.json()["message"] == "API rate limit exceeded for user ID 4242."


@pytest.mark.parametrize("status", [403, 429])
def test_a_secondary_limit_is_waited_for_as_retry_after_asks(simulator, app, status):
    simulator.control.set_fault_model(
        github_secondary_limit={"count": 1, "status": status, "retry_after_s": 2}
    )
    waits: list[float] = []
    contents, _ = clients(simulator.url, TokenAuth("ghp_x"), sleep=waits.append)

    assert contents.fetch(f"{OWNER}/{REPO}", "a.md", SHA) == DATA
    assert waits == [2.0]
