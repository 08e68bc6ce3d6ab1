"""The REST API version GitHub requests name (`X-GitHub-Api-Version`): every client and the
App's token mint send `API_VERSION` unless given another, and `GITHUB_API_VERSION` takes
a version only as GitHub names them, a date (docs/github-app.md, "REST API version").

The wire is swapped (a recording `requests.Session`), never the code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from shared.config import DEFAULTS, Config, ConfigError
from shared.entrypoints.runtime import build_github_auth
from shared.github import API_VERSION, CommentsClient, ContentsClient, GitHubUnavailable
from shared.github.app import AppAuth, AppCredentials
from shared.github.checks import ChecksClient
from shared.github.hook_deliveries import HookDeliveriesClient
from shared.github.rest import GitHubApi
from shared.handlers.context import ClientFactories, HandlerContext

API = "http://github.local"
REPO = "octo/docs"
ENV = {"GOOGLE_CLOUD_PROJECT": "demo-hookledger"}


class Wire(requests.Session):
    """Answers every request as GitHub would the one call each case makes; keeps each
    request's headers."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, str, dict[str, str]]] = []

    def request(self, method, url, **kwargs):  # type: ignore[override]
        self.sent.append((method, url, dict(kwargs["headers"])))
        response = requests.Response()
        response.status_code, body = self._answer(method, url)
        if isinstance(body, bytes):
            response._content = body
            response.headers["Content-Type"] = "application/vnd.github.raw"
        elif body is not None:
            response._content = json.dumps(body).encode()
            response.headers["Content-Type"] = "application/json; charset=utf-8"
        return response

    def post(self, url, **kwargs):  # type: ignore[override]
        return self.request("POST", url, **kwargs)

    @staticmethod
    def _answer(method: str, url: str) -> tuple[int, Any]:
        if url.endswith("/access_tokens"):
            expires = datetime.now(UTC) + timedelta(hours=1)
            return 201, {"token": "ghs_1", "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}
        if "/contents/" in url:
            return 200, b"# doc\n"
        if url.endswith("/attempts"):
            return 202, {}
        if method == "DELETE":
            return 204, None
        return 200, []


@pytest.fixture(scope="module")
def pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


@pytest.fixture(scope="module")
def credentials(pem) -> AppCredentials:
    return AppCredentials.from_pem("Iv23liTEST0001", pem)


def _contents(wire: Wire, version: str | None, _app: AppCredentials) -> None:
    ContentsClient(API, session=wire, api_version=version).fetch(REPO, "a.md", "main")


def _comments(wire: Wire, version: str | None, _app: AppCredentials) -> None:
    CommentsClient(API, session=wire, api_version=version).delete_comment(REPO, 7)


def _checks(wire: Wire, version: str | None, _app: AppCredentials) -> None:
    ChecksClient(API, session=wire, api_version=version).list_annotations(REPO, 5)


def _rest(wire: Wire, version: str | None, _app: AppCredentials) -> None:
    api = GitHubApi(API, session=wire, api_version=version)
    api.call("issues/list-comments", owner="octo", repo="docs", issue_number=1)


def _deliveries(wire: Wire, version: str | None, app: AppCredentials) -> None:
    HookDeliveriesClient(API, app, session=wire, api_version=version).redeliver(9)


def _installation(wire: Wire, version: str | None, app: AppCredentials) -> None:
    auth = AppAuth(app, API, session=wire, api_version=version)
    ContentsClient(API, auth=auth, session=wire, api_version=version).fetch(
        REPO, "a.md", "main", installation_id=42
    )


CLIENTS: list[tuple[str, Callable[[Wire, str | None, AppCredentials], None]]] = [
    ("ContentsClient", _contents),
    ("CommentsClient", _comments),
    ("ChecksClient", _checks),
    ("GitHubApi", _rest),
    ("HookDeliveriesClient", _deliveries),
    ("AppAuth's token mint and its installation's call", _installation),
]


@pytest.mark.parametrize(("name", "call"), CLIENTS, ids=[name for name, _ in CLIENTS])
@pytest.mark.parametrize(("given", "sent"), [(None, API_VERSION), ("2022-11-28", "2022-11-28")])
def test_every_request_names_the_version_the_client_was_given(name, call, given, sent, credentials):
    wire = Wire()
    call(wire, given, credentials)
    assert wire.sent, name
    for method, url, headers in wire.sent:
        assert headers["X-GitHub-Api-Version"] == sent, f"{name}: {method} {url}"


def test_hookledger_is_written_for_2026_03_10_and_pins_nothing_by_default():
    assert API_VERSION == "2026-03-10"
    assert DEFAULTS.github_api_version == ""  # empty: API_VERSION, the one copy


@pytest.mark.parametrize(
    ("name", "raw", "read"),
    [
        ("unset keeps the code's version", None, ""),
        ("empty keeps the code's version", "", ""),
        ("the previous version pins it", "2022-11-28", "2022-11-28"),
        ("the current version, spelled out", "2026-03-10", "2026-03-10"),
        ("spaces around are dropped", " 2022-11-28\n", "2022-11-28"),
    ],
)
def test_github_api_version_is_read(name, raw, read):
    env = ENV if raw is None else {**ENV, "GITHUB_API_VERSION": raw}
    assert Config.from_env(env).github_api_version == read, name


@pytest.mark.parametrize(
    "raw", ["v3", "latest", "2022-11-28x", "2022-13-01", "2022-02-30", "20221128", "2022/11/28"]
)
def test_a_version_that_is_not_a_date_is_refused_naming_the_variable(raw):
    with pytest.raises(ConfigError, match="GITHUB_API_VERSION must be a GitHub REST API version"):
        Config.from_env({**ENV, "GITHUB_API_VERSION": raw})


def test_the_functions_build_their_clients_for_the_configured_version(monkeypatch, pem):
    sent: list[tuple[str, str]] = []

    def record(self, method, url, **kwargs):  # the edge of requests: nothing leaves
        sent.append((url, kwargs["headers"]["X-GitHub-Api-Version"]))
        raise requests.ConnectionError("recorded, not sent")

    monkeypatch.setattr(requests.Session, "request", record)
    app = {"GITHUB_APP_ID": "Iv23liTEST0001", "GITHUB_APP_PRIVATE_KEY": pem}
    env = {**ENV, **app, "GITHUB_API_URL": API, "GITHUB_API_VERSION": "2022-11-28"}
    cfg = Config.from_env(env)
    auth = build_github_auth(cfg)
    context = HandlerContext(cfg, ClientFactories.from_lookup(None, {}.__getitem__))

    with pytest.raises(GitHubUnavailable):
        auth.headers(42)  # the App's token mint
    with pytest.raises(GitHubUnavailable):
        context.github_api.request("GET", "/repos/octo/docs", retry=False)

    assert [version for _, version in sent] == ["2022-11-28", "2022-11-28"], sent
