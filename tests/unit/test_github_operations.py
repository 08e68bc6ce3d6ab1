"""GitHub by documented operation (shared/github/operations.py, `GitHubApi.call`): a call is
built from the catalog or refused before anything is sent, naming the operation and the
parameter; `match` tells which operation a request path is; `call` and `bound` send over a
real loopback HTTP server, authenticated as an App installation; the catalog's generator
(tools/github_catalog.py) resolves `$ref` parameters and leaves headers out."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from local.loopback import QuietHandler, serve
from shared.errors import PermanentError
from shared.github import operations
from shared.github.app import AppAuth, AppCredentials
from shared.github.operations import InvalidCall, UnknownOperation, build, match
from shared.github.rest import GitHubApi
from tools.github_catalog import catalog
from tools.requirements import GenerateError

REPO = Path(__file__).resolve().parents[2]
LABELS = "/repos/{owner}/{repo}/issues/{issue_number}/labels"


def test_a_call_is_built_from_the_documented_operation():
    op, path, query = build(
        "issues/add-labels", {"owner": "octo", "repo": "hello", "issue_number": 3}
    )
    assert (op.id, op.method, op.path, op.path_params) == (
        "issues/add-labels",
        "POST",
        LABELS,
        ("owner", "repo", "issue_number"),
    )
    assert (path, query) == ("/repos/octo/hello/issues/3/labels", {})
    assert op.docs == "https://docs.github.com/rest/issues/labels#add-labels-to-an-issue"


def test_an_unknown_operation_names_the_closest_ids():
    with pytest.raises(UnknownOperation) as refused:
        build("issues/add-label", {})
    assert "'issues/add-label'" in str(refused.value)
    assert "did you mean issues/add-labels" in str(refused.value)
    # A bad call is a bug: permanent (the delivery goes dead), and a ValueError.
    assert isinstance(refused.value, InvalidCall)
    assert isinstance(refused.value, PermanentError)
    assert isinstance(refused.value, ValueError)
    assert not refused.value.retryable


@pytest.mark.parametrize(
    ("name", "params", "said"),
    [
        (
            "a missing path parameter",
            {"owner": "o", "repo": "r"},
            "issues/add-labels needs the path parameter issue_number "
            "(path parameters: owner, repo, issue_number; query parameters: none; "
            "a JSON body (optional) as json=)",
        ),
        (
            "an unknown parameter (a body field)",
            {"owner": "o", "repo": "r", "issue_number": 3, "labels": ["bug"]},
            "issues/add-labels takes no parameter labels (path parameters: owner, repo, "
            "issue_number;",
        ),
        (
            "a path parameter given as None",
            {"owner": "o", "repo": "r", "issue_number": None},
            "issues/add-labels needs the path parameter issue_number",
        ),
    ],
)
def test_a_bad_call_names_the_operation_and_the_parameter(name, params, said):
    with pytest.raises(InvalidCall) as refused:
        build("issues/add-labels", params)
    assert said in str(refused.value), name


def test_a_missing_required_query_parameter_is_named():
    # DELETE /repos/{owner}/{repo}/actions/caches requires `key` in the query.
    with pytest.raises(
        InvalidCall, match="actions/delete-actions-cache-by-key needs the query parameter key"
    ):
        build("actions/delete-actions-cache-by-key", {"owner": "o", "repo": "r"})
    _, path, query = build(
        "actions/delete-actions-cache-by-key", {"owner": "o", "repo": "r", "key": "k"}
    )
    assert (path, query) == ("/repos/o/r/actions/caches", {"key": "k"})


def test_defaults_fill_only_what_the_operation_takes_and_the_caller_did_not_give():
    event = {"owner": "octo", "repo": "hello", "issue_number": 3, "pull_number": 3}
    _, path, _ = build("issues/add-labels", {}, defaults=event)  # pull_number: not taken, ignored
    assert path == "/repos/octo/hello/issues/3/labels"
    _, path, _ = build("repos/get", {}, defaults=event)
    assert path == "/repos/octo/hello"
    _, path, _ = build("issues/add-labels", {"issue_number": 7, "repo": "other"}, defaults=event)
    assert path == "/repos/octo/other/issues/7/labels"  # explicit wins
    _, _, query = build(
        "issues/list-for-repo", {"state": None}, defaults={**event, "state": "open"}
    )
    assert query == {}  # an explicit None wins too: left out


def test_query_parameters_go_to_the_query_and_none_is_left_out():
    _, path, query = build(
        "issues/list-for-repo",
        {
            "owner": "o",
            "repo": "r",
            "state": "open",
            "labels": "bug,ui",
            "per_page": 100,
            "sort": None,
        },
    )
    assert path == "/repos/o/r/issues"
    assert query == {"state": "open", "labels": "bug,ui", "per_page": 100}
    _, _, query = build(
        "repos/get-content", {"owner": "o", "repo": "r", "path": "a.md", "ref": "main"}
    )
    assert query == {"ref": "main"}
    _, _, query = build("pulls/list", {"owner": "o", "repo": "r", "per_page": 5})
    assert query == {"per_page": 5}


def test_a_file_path_keeps_its_slashes_and_other_values_are_quoted():
    _, path, _ = build("repos/get-content", {"owner": "o", "repo": "r", "path": "docs/a b#1.md"})
    assert path == "/repos/o/r/contents/docs/a%20b%231.md"
    _, path, _ = build(
        "issues/remove-label",
        {"owner": "o", "repo": "r/x", "issue_number": 3, "name": "needs review/ok?"},
    )
    assert path == "/repos/o/r%2Fx/issues/3/labels/needs%20review%2Fok%3F"
    _, path, _ = build("git/get-ref", {"owner": "o", "repo": "r", "ref": "heads/feature/x"})
    assert path == "/repos/o/r/git/ref/heads/feature/x"  # GitHub marks `ref` multi-segment


@pytest.mark.parametrize(
    ("operation_id", "params"),
    [
        ("repos/get-content", {"path": "../secrets"}),
        ("repos/get-content", {"path": "docs//a.md"}),
        ("repos/get-content", {"path": "/a.md"}),
        ("repos/get", {"repo": ".."}),
        ("repos/get", {"repo": ""}),
    ],
)
def test_a_value_that_would_move_the_path_is_refused(operation_id, params):
    with pytest.raises(InvalidCall, match="path segment"):
        build(operation_id, {"owner": "o", "repo": "r", **params})


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("POST", "/repos/o/r/issues/3/labels", "issues/add-labels"),
        ("GET", "/repos/o/r", "repos/get"),
        ("get", "/repos/o/r/issues/comments", "issues/list-comments-for-repo"),  # not issues/get
        ("GET", "/repos/o/r/issues/3", "issues/get"),
        ("GET", "/repos/o/r/contents/docs/a.md?ref=main", "repos/get-content"),
        ("GET", "/repos/o/r/commits/abc/statuses", "repos/list-commit-statuses-for-ref"),
        ("GET", "/repos/o/r/compare/main...topic", "repos/compare-commits"),
        ("POST", "/app/installations/42/access_tokens", "apps/create-installation-access-token"),
    ],
)
def test_match_finds_the_documented_operation_of_a_request(method, path, expected):
    found = match(method, path)
    assert found is not None and found.id == expected, (method, path)


def test_match_finds_nothing_for_an_undocumented_request():
    assert match("GET", "/nowhere/at/all") is None
    assert match("DELETE", "/repos/o/r") is not None  # repos/delete, documented
    assert match("PATCH", "/repos/o/r/issues/3/labels") is None


def test_the_catalog_holds_every_rest_operation_once():
    document = json.loads(operations.CATALOG.read_text(encoding="utf-8"))
    assert document["source"]["package"] == "@octokit/openapi"
    ids = operations.ids()
    assert len(ids) > 1000
    assert len(ids) == len(set(ids)) == len(document["operations"])
    routes = {(e["method"], e["path"]) for e in document["operations"].values()}
    assert len(routes) == len(ids)  # no two ids for one method and path
    assert {
        "issues/add-labels",
        "repos/get",
        "checks/create",
        "apps/create-installation-access-token",
    } <= set(ids)


def test_importing_the_modules_does_not_load_the_catalog():
    probe = (
        "import shared.github.rest, shared.github.operations as o; "
        "print(o._catalog.cache_info().currsize)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "0"


class FakeGitHub:
    """Loopback GitHub: mints installation tokens, records every other request, answers 200."""

    def __init__(self) -> None:
        self.requests: list[dict[str, object]] = []
        self.mints: list[str] = []
        fake = self

        class Handler(QuietHandler):
            def _answer(self) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                if self.command == "POST" and url.path.endswith("/access_tokens"):
                    fake.mints.append(url.path)
                    expires = datetime.now(UTC) + timedelta(hours=1)
                    status, answer = (
                        201,
                        {
                            "token": f"ghs_{len(fake.mints)}",
                            "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        },
                    )
                else:
                    fake.requests.append(
                        {
                            "method": self.command,
                            "path": url.path,
                            "query": dict(parse_qsl(url.query)),
                            "json": body,
                            "authorization": self.headers.get("Authorization"),
                        }
                    )
                    status, answer = 200, {"ok": True}
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer

        self.server = serve(Handler, name="fake-github")
        self.url = self.server.url


@pytest.fixture
def github():
    fake = FakeGitHub()
    yield fake
    fake.server.close()


@pytest.fixture(scope="module")
def pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


def test_call_and_bound_send_the_documented_request_as_the_installation(github, pem):
    auth = AppAuth(AppCredentials.from_pem("Iv23liTEST0001", pem), github.url, timeout_s=5)
    api = GitHubApi(github.url, auth=auth, timeout_s=5, attempts=1)
    event = api.bound(
        installation_id=42,
        params={"owner": "octo", "repo": "hello", "issue_number": 3, "pull_number": 3},
    )

    answer = event.call("issues/add-labels", json={"labels": ["bug"]})
    assert (answer.status, answer.json()) == (200, {"ok": True})
    event.call("issues/list-for-repo", state="open", labels="bug", per_page=5)
    event.call(
        "issues/add-labels", installation_id=7, repo="other", issue_number=9, json={"labels": ["x"]}
    )
    event.request("GET", "/repos/octo/hello")  # a raw path: the bound installation too
    api.call("repos/get", owner="o", repo="r")  # unbound: GITHUB_TOKEN's (here: none)

    assert github.requests == [
        {
            "method": "POST",
            "path": "/repos/octo/hello/issues/3/labels",
            "query": {},
            "json": {"labels": ["bug"]},
            "authorization": "Bearer ghs_1",
        },
        {
            "method": "GET",
            "path": "/repos/octo/hello/issues",
            "query": {"state": "open", "labels": "bug", "per_page": "5"},
            "json": None,
            "authorization": "Bearer ghs_1",
        },
        {
            "method": "POST",
            "path": "/repos/octo/other/issues/9/labels",
            "query": {},
            "json": {"labels": ["x"]},
            "authorization": "Bearer ghs_2",
        },
        {
            "method": "GET",
            "path": "/repos/octo/hello",
            "query": {},
            "json": None,
            "authorization": "Bearer ghs_1",
        },
        {"method": "GET", "path": "/repos/o/r", "query": {}, "json": None, "authorization": None},
    ]
    # The bound installation's token minted once, the explicit one's once.
    assert github.mints == [
        "/app/installations/42/access_tokens",
        "/app/installations/7/access_tokens",
    ]


def test_a_bad_call_sends_nothing(github):
    event = GitHubApi(github.url, timeout_s=5, attempts=1).bound(params={"owner": "o", "repo": "r"})
    with pytest.raises(
        InvalidCall, match="issues/add-labels needs the path parameter issue_number"
    ):
        event.call("issues/add-labels", json={"labels": ["bug"]})
    with pytest.raises(InvalidCall, match="repos/get takes no JSON body"):
        event.call("repos/get", json={"x": 1})
    with pytest.raises(InvalidCall, match="repos/create-or-update-file-contents needs a JSON body"):
        event.call("repos/create-or-update-file-contents", path="a.md")
    with pytest.raises(UnknownOperation, match="did you mean issues/create-comment"):
        event.call("issues/create-coment", issue_number=1)
    assert github.requests == [] and github.mints == []


def test_bound_views_share_the_client_and_add_to_its_defaults(github):
    api = GitHubApi(github.url, timeout_s=5, attempts=1)
    first = api.bound(installation_id=1, params={"owner": "o", "repo": "r"})
    second = first.bound(params={"repo": "s"})
    second.call("repos/get")
    api.request("GET", "/repos/x/y")
    assert [r["path"] for r in github.requests] == ["/repos/o/s", "/repos/x/y"]
    assert second._session is api._session and second._installation_id == 1
    assert api._installation_id is None and dict(api._params) == {}


def test_the_generator_resolves_parameter_refs_and_leaves_headers_out():
    description = {
        "components": {
            "parameters": {"owner": {"name": "owner", "in": "path", "required": True}},
            "requestBodies": {"file": {"required": True, "content": {}}},
        },
        "paths": {
            "/repos/{owner}/files/{path}": {
                "parameters": [{"$ref": "#/components/parameters/owner"}],
                "put": {
                    "operationId": "x/put-file",
                    "externalDocs": {"url": "https://docs.example/put-file"},
                    "parameters": [
                        {"name": "path", "in": "path", "required": True, "x-multi-segment": True},
                        {"name": "ref", "in": "query", "required": True},
                        {"name": "page", "in": "query"},
                        {"name": "accept", "in": "header"},
                    ],
                    "requestBody": {"$ref": "#/components/requestBodies/file"},
                },
            }
        },
    }
    assert catalog(description) == {
        "x/put-file": {
            "method": "PUT",
            "path": "/repos/{owner}/files/{path}",
            "path_params": ["owner", "path"],
            "query": {"ref": True, "page": False},
            "body": "required",
            "docs": "https://docs.example/put-file",
            "slashes": ["path"],
        }
    }
    put = description["paths"]["/repos/{owner}/files/{path}"]["put"]
    description["paths"]["/other"] = {"get": {"operationId": "x/put-file"}}
    with pytest.raises(GenerateError, match="'x/put-file' is used twice"):
        catalog(description)
    del description["paths"]["/other"]
    put["parameters"] = put["parameters"][1:]
    with pytest.raises(GenerateError, match="do not fit the template"):
        catalog(description)
