"""The overlap scenario's count of file reads (local/chaos/scenarios.py `_file_reads`): a
GraphQL query counts each file it names, a Contents GET its own path at its ref."""

from __future__ import annotations

from local.chaos.scenarios import FULL_REPO, _file_reads


def test_graphql_queries_and_contents_gets_count_per_file_and_commit() -> None:
    log = [
        {"method": "POST", "path": "/graphql", "query": "", "files": ["s1:a.md", "s1:b.md"]},
        {"method": "GET", "path": f"/repos/{FULL_REPO}/contents/a.md", "query": "ref=s1"},
        {"method": "GET", "path": "/repos/someone/else/contents/a.md", "query": "ref=s1"},
        {"method": "GET", "path": "/v1beta/batches/x", "query": ""},
        {"method": "POST", "path": "/graphql", "query": ""},  # no files named: nothing read
    ]
    assert _file_reads(log) == {"s1:a.md": 2, "s1:b.md": 1}
