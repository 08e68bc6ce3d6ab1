"""`ContentsClient.fetch_many`: a push's files in few GraphQL requests, each failure naming
its file (shared/github/blobs.py). The wire is a scripted session: what is sent is read
back from it, what GitHub answers is GitHub's documented shape."""

from __future__ import annotations

import json

import pytest

from local.fakes import FakeClock
from shared.github import FILES_PER_QUERY, ContentsClient
from shared.github.blobs import graphql_url
from tests.unit.test_github import ScriptedSession

API = "http://github.local"


def client(answers, clock=None) -> tuple[ContentsClient, ScriptedSession]:
    session = ScriptedSession(answers)
    extra = {"clock": clock} if clock is not None else {}
    return ContentsClient(API, session=session, attempts=2, sleep=lambda s: None, **extra), session


def blob(content: str | None, **fields) -> dict:
    return {
        "__typename": "Blob",
        "text": content,
        "isBinary": False,
        "isTruncated": False,
        "byteSize": len((content or "").encode()),
        **fields,
    }


def answer(*objects, errors=None) -> tuple[int, dict, dict]:
    body: dict = {"data": {"repository": {f"f{i}": o for i, o in enumerate(objects)}}}
    if errors is not None:
        body["errors"] = errors
    return 200, {}, body


def sent(session: ScriptedSession, n: int = 0) -> dict:
    return session.calls[n][1]["json"]


def test_twenty_small_files_cost_one_request_with_each_path_a_variable():
    paths = [f"docs/{i}.md" for i in range(20)]
    contents, session = client([answer(*(blob(f"# {p}\n") for p in paths))])
    fetched = contents.fetch_many("o/r", paths, "abc123")
    assert fetched.texts == {p: f"# {p}\n" for p in paths}
    assert (fetched.refused, fetched.unavailable, fetched.requests) == ({}, {}, 1)
    url, kwargs = session.calls[0]
    assert url == f"{API}/graphql" and kwargs["timeout"] > 0
    body = sent(session)
    assert body["variables"]["f7"] == "abc123:docs/7.md" and body["variables"]["owner"] == "o"
    assert "docs/7.md" not in body["query"]  # no path is spliced into the query text


def test_files_beyond_one_query_take_one_more_request_each_fifty():
    paths = [f"{i}.md" for i in range(FILES_PER_QUERY * 2 + 3)]
    chunks = [paths[:50], paths[50:100], paths[100:]]
    contents, session = client([answer(*(blob("x") for _ in c)) for c in chunks])
    fetched = contents.fetch_many("o/r", paths, "abc")
    assert len(fetched.texts) == len(paths) and fetched.requests == len(session.calls) == 3
    assert sent(session, 2)["variables"]["f2"] == "abc:102.md"


def test_each_unreviewable_file_is_refused_alone_naming_itself():
    paths = ["ok.md", "gone.md", "dir.md", "sub.md", "bin.md", "huge.md"]
    contents, _ = client(
        [
            answer(
                blob("# ok\n"),
                None,
                {"__typename": "Tree"},
                {"__typename": "Commit"},
                blob(None, isBinary=True),
                blob(None, isTruncated=True, byteSize=200 * 1024 * 1024),
            )
        ]
    )
    fetched = contents.fetch_many("o/r", paths, "abc")
    assert fetched.texts == {"ok.md": "# ok\n"} and fetched.unavailable == {}
    reasons = {path: str(error) for path, error in fetched.refused.items()}
    assert reasons == {
        "gone.md": "o/r:gone.md@abc: not found at this commit",
        "dir.md": "o/r:dir.md@abc: is a folder, not a file",
        "sub.md": "o/r:sub.md@abc: is a submodule, not a file",
        "bin.md": "o/r:bin.md@abc: is binary, not text",
        "huge.md": f"o/r:huge.md@abc: is {200 * 1024 * 1024} bytes, over the 104857600 "
        "GitHub serves",
    }


def test_a_file_graphql_cuts_short_is_read_again_through_the_contents_api():
    whole = b"# big\n" + b"x" * 600_000
    truncated = blob(whole[:512_000].decode(), isTruncated=True, byteSize=len(whole))
    contents, session = client([answer(blob("small"), truncated), (200, {}, whole)])
    fetched = contents.fetch_many("o/r", ["a.md", "big.md"], "abc")
    assert fetched.texts == {"a.md": "small", "big.md": whole.decode()}
    assert fetched.requests == 2
    assert session.calls[1][0] == f"{API}/repos/o/r/contents/big.md"


def test_a_refused_path_is_never_asked_for_and_the_rest_are():
    contents, session = client([answer(blob("fine"))])
    fetched = contents.fetch_many("o/r", ["../etc/passwd.md", "a.md", "a.md"], "abc")
    assert fetched.texts == {"a.md": "fine"} and fetched.requests == 1
    assert "'..' segment" in str(fetched.refused["../etc/passwd.md"])
    assert list(sent(session)["variables"]) == ["owner", "name", "f0"]


@pytest.mark.parametrize(
    ("name", "repo", "ref"),
    [
        ("bad repo", "not-a-repo", "abc"),
        ("ref with a colon", "o/r", "abc:x"),
        ("..", "o/r", "a..b"),
    ],
)
def test_a_malformed_repo_or_ref_refuses_every_file_before_the_wire(name, repo, ref):
    contents, session = client([])
    fetched = contents.fetch_many(repo, ["a.md", "b.md"], ref)
    assert sorted(fetched.refused) == ["a.md", "b.md"], name
    assert session.calls == [] and fetched.requests == 0, name
    assert all(str(e).startswith(f"{repo}:{p}@") for p, e in fetched.refused.items()), name


def test_a_repository_out_of_reach_refuses_each_file_with_githubs_words():
    error = {
        "type": "NOT_FOUND",
        "path": ["repository"],
        "locations": [{"line": 1, "column": 60}],
        "message": "Could not resolve to a Repository with the name 'o/r'.",
    }
    contents, _ = client([(200, {}, {"data": {"repository": None}, "errors": [error]})])
    fetched = contents.fetch_many("o/r", ["a.md", "b.md"], "abc")
    assert sorted(fetched.refused) == ["a.md", "b.md"] and not fetched.texts
    assert str(fetched.refused["b.md"]) == (
        "o/r:b.md@abc: GraphQL query of 2 file(s): NOT_FOUND: Could not resolve to a "
        "Repository with the name 'o/r'."
    )


def test_an_error_on_one_alias_refuses_that_file_only():
    error = {"type": "FORBIDDEN", "path": ["repository", "f1"], "message": "no"}
    contents, _ = client([answer(blob("a"), None, errors=[error])])
    fetched = contents.fetch_many("o/r", ["a.md", "b.md"], "abc")
    assert fetched.texts == {"a.md": "a"}
    assert str(fetched.refused["b.md"]) == "o/r:b.md@abc: FORBIDDEN: no"


def test_a_graphql_rate_limit_is_transient_waits_until_reset_and_stops_later_queries():
    clock = FakeClock()
    reset = int(clock().timestamp()) + 120
    limited = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}
    body = {"errors": [{"type": "RATE_LIMITED", "message": "API rate limit exceeded for user."}]}
    contents, session = client([(200, limited, body)], clock=clock)
    paths = [f"{i}.md" for i in range(FILES_PER_QUERY + 1)]
    fetched = contents.fetch_many("o/r", paths, "abc")
    assert len(session.calls) == fetched.requests == 1  # the second query is never sent
    assert sorted(fetched.unavailable) == sorted(paths) and not fetched.refused
    first = fetched.unavailable["0.md"]
    assert first.retry_after_s == pytest.approx(121, abs=1)
    assert "o/r:0.md@abc" in str(first) and "RATE_LIMITED" in str(first)
    assert "an earlier request failed" in str(fetched.unavailable["50.md"])


def test_githubs_timeout_and_5xx_are_transient_naming_each_file():
    timeout = {"data": None, "errors": [{"message": "Something went wrong while executing"}]}
    contents, _ = client([(200, {}, timeout)])
    fetched = contents.fetch_many("o/r", ["a.md", "b.md"], "abc")
    assert sorted(fetched.unavailable) == ["a.md", "b.md"]
    assert "o/r:b.md@abc" in str(fetched.unavailable["b.md"])

    contents, session = client([(502, {}, {}), (502, {}, {})])
    fetched = contents.fetch_many("o/r", ["a.md"], "abc")
    assert len(session.calls) == 2  # retried as every GitHub call is
    assert (
        str(fetched.unavailable["a.md"])
        == "o/r:a.md@abc: GraphQL query of 1 file(s): GitHub answered 502"
    )


def test_a_secondary_limit_is_waited_out_then_the_files_come():
    contents, session = client([(403, {"retry-after": "1"}, {}), answer(blob("a"))])
    fetched = contents.fetch_many("o/r", ["a.md"], "abc")
    assert fetched.texts == {"a.md": "a"} and len(session.calls) == 2


def test_bad_credentials_refuse_every_file():
    contents, _ = client([(401, {}, {"message": "Bad credentials"})])
    fetched = contents.fetch_many("o/r", ["a.md"], "abc")
    assert "Bad credentials" in str(fetched.refused["a.md"])


@pytest.mark.parametrize(
    ("api", "endpoint"),
    [
        ("https://api.github.com", "https://api.github.com/graphql"),
        ("https://ghe.example.com/api/v3", "https://ghe.example.com/api/graphql"),
        ("https://ghe.example.com/api/v3/", "https://ghe.example.com/api/graphql"),
        ("http://127.0.0.1:8090", "http://127.0.0.1:8090/graphql"),
    ],
)
def test_the_graphql_endpoint_sits_beside_the_rest_root(api, endpoint):
    assert graphql_url(api) == endpoint


def test_the_query_is_one_document_with_an_alias_per_file():
    contents, session = client([answer(blob("a"), blob("b"))])
    contents.fetch_many("o/r", ["a.md", "b.md"], "abc")
    query = sent(session)["query"]
    assert query.count("object(expression:") == 2 and "f1: object(expression: $f1)" in query
    assert json.dumps(sent(session))  # plain JSON: what requests sends as the body
