"""The pinned extract of GitHub's OpenAPI description and the assertion built on it
(tools/github_openapi.py, tests/github_openapi.py), offline: the extract matches the
generator's pins and endpoints and describes the REST API version hookledger's requests
name, GitHub's breaking changes apply for their version as meant, OpenAPI 3.0 schemas
become JSON Schema as meant, and a body GitHub would not send fails naming the endpoint
and the field."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from shared.github import API_VERSION
from shared.github.operations import CATALOG
from tests.github_openapi import (
    assert_documented,
    assert_request_documented,
    documented_schema,
    extract,
    request_template,
)
from tools.github_openapi import ENDPOINTS, INTEGRITY, PACKAGE, VERSION, json_schema
from tools.github_versions import BREAKING, as_version
from tools.requirements import GenerateError

CHECK_RUN = "/repos/{owner}/{repo}/check-runs/{check_run_id}"
COMMENT = "/repos/{owner}/{repo}/comments/{comment_id}"


def test_the_extract_is_of_the_pinned_package_and_names_every_endpoint():
    source = extract()["source"]
    assert (source["package"], source["version"], source["integrity"]) == (
        PACKAGE,
        VERSION,
        INTEGRITY,
    )
    assert list(extract()["endpoints"]) == [f"{e.method} {e.path}" for e in ENDPOINTS]
    for key, entry in extract()["endpoints"].items():
        assert entry["responses"], key


def test_the_extract_and_the_catalog_describe_the_version_hookledger_sends():
    catalog = json.loads(CATALOG.read_text(encoding="utf-8"))["source"]
    for made_from in (extract()["source"], catalog):
        assert made_from["api_version"] == API_VERSION
        assert "remove_singular_assignee_from_issues_and_pull_requests" in made_from["changesets"]
    issue = extract()["components"]["schemas"]["issue"]
    assert "assignee" not in issue["properties"] and "assignee" not in issue["required"]


DESCRIPTION = {
    "openapi": "3.0.3",
    "paths": {
        "/things": {
            "delete": {
                BREAKING: [
                    {
                        "changeset": "accept_deletes",
                        "version": "2026-03-10",
                        "patch": {"responses": {"202": {"description": "Accepted"}, "204": None}},
                    }
                ],
                "responses": {"204": {"description": "Gone"}},
            }
        }
    },
    "components": {
        "schemas": {
            "thing": {
                BREAKING: [
                    {
                        "changeset": "drop_old",
                        "version": "2026-03-10",
                        "patch": [
                            {"op": "remove", "path": "/properties/old"},
                            {"op": "remove", "path": "/required/1"},
                        ],
                    },
                    {
                        "changeset": "later",
                        "version": "2027-01-01",
                        "patch": {"properties": {"kept": None}},
                    },
                ],
                "properties": {"id": {}, "old": {}, "kept": {}},
                "required": ["id", "old"],
            }
        }
    },
}


@pytest.mark.parametrize(
    ("name", "version", "responses", "thing", "applied"),
    [
        (
            "the first calendar version: nothing applied",
            "2022-11-28",
            {"204": {"description": "Gone"}},
            {"properties": {"id": {}, "old": {}, "kept": {}}, "required": ["id", "old"]},
            [],
        ),
        (
            "2026-03-10: its merge patch and its JSON Patch, not the later change",
            "2026-03-10",
            {"202": {"description": "Accepted"}},
            {"properties": {"id": {}, "kept": {}}, "required": ["id"]},
            ["accept_deletes", "drop_old"],
        ),
        (
            "a later version: every change up to it",
            "2027-01-01",
            {"202": {"description": "Accepted"}},
            {"properties": {"id": {}}, "required": ["id"]},
            ["accept_deletes", "drop_old", "later"],
        ),
    ],
)
def test_breaking_changes_apply_from_their_version_on(name, version, responses, thing, applied):
    described, changesets = as_version(DESCRIPTION, version)
    assert described["paths"]["/things"]["delete"] == {"responses": responses}, name
    assert described["components"]["schemas"]["thing"] == thing, name
    assert changesets == applied, name
    assert BREAKING in DESCRIPTION["components"]["schemas"]["thing"]  # the input is untouched


def test_a_version_never_described_or_a_patch_that_does_not_fit_is_refused():
    with pytest.raises(GenerateError, match="not '2025-01-01'"):
        as_version(DESCRIPTION, "2025-01-01")
    misfit = json.loads(json.dumps(DESCRIPTION))
    misfit["components"]["schemas"]["thing"][BREAKING][0]["patch"][0]["path"] = "/properties/x"
    with pytest.raises(GenerateError, match=r"thing \(drop_old\): remove /properties/x"):
        as_version(misfit, "2026-03-10")


def test_every_ref_resolves_inside_the_extract():
    schemas = extract()["components"]["schemas"]

    def refs(node):
        if isinstance(node, dict):
            if "$ref" in node:
                yield node["$ref"]
            for value in node.values():
                yield from refs(value)
        elif isinstance(node, list):
            for value in node:
                yield from refs(value)

    names = {ref.removeprefix("#/components/schemas/") for ref in refs(extract())}
    assert names <= set(schemas)
    for schema in schemas.values():
        Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize(
    ("openapi", "expected"),
    [
        ({"type": "string", "nullable": True}, {"type": ["string", "null"]}),
        (
            {"type": "string", "enum": ["a", "b"], "nullable": True},
            {"type": ["string", "null"], "enum": ["a", "b", None]},
        ),
        (
            {"allOf": [{"$ref": "#/components/schemas/x"}], "nullable": True},
            {"anyOf": [{"allOf": [{"$ref": "#/components/schemas/x"}]}, {"type": "null"}]},
        ),
        (  # annotations go; a property named like one stays
            {
                "type": "object",
                "description": "A thing",
                "example": {"description": "x"},
                "x-github-breaking-changes": [],
                "properties": {"description": {"type": "string", "example": "x"}},
                "required": ["description"],
            },
            {
                "type": "object",
                "properties": {"description": {"type": "string"}},
                "required": ["description"],
            },
        ),
        (
            {"type": "array", "items": {"type": "integer", "nullable": True}},
            {"type": "array", "items": {"type": ["integer", "null"]}},
        ),
    ],
)
def test_openapi_schemas_become_json_schema(openapi, expected):
    assert json_schema(openapi) == expected


def test_a_missing_field_fails_naming_the_endpoint_and_the_field():
    with pytest.raises(AssertionError) as failed:
        assert_documented("GET", CHECK_RUN, 200, {"id": 1})
    message = str(failed.value)
    assert "GET /repos/{owner}/{repo}/check-runs/{check_run_id} answered 200" in message
    assert "(check-run)" in message
    assert "$: 'node_id' is a required property" in message


def test_a_wrong_type_and_format_are_named_with_their_place():
    body = {"message": "Not Found", "documentation_url": 404}
    with pytest.raises(AssertionError, match=r"\$\.documentation_url: 404 is not of type"):
        assert_documented("DELETE", COMMENT, 404, body)
    token = {"token": "ghs_x", "expires_at": "soon", "repository_selection": "some"}
    with pytest.raises(AssertionError, match=r"\$\.repository_selection: 'some' is not one of"):
        assert_documented("POST", "/app/installations/{installation_id}/access_tokens", 201, token)
    with pytest.raises(AssertionError, match=r"\$\.started_at: '2024-01-01 10:00' is not a"):
        assert_documented("GET", CHECK_RUN, 200, {"started_at": "2024-01-01 10:00"})


def test_statuses_and_bodies_are_as_documented():
    assert_documented("DELETE", COMMENT, 204, None)
    with pytest.raises(AssertionError, match="GitHub documents none"):
        assert_documented("DELETE", COMMENT, 204, {"deleted": True})
    with pytest.raises(AssertionError, match="does not document for it"):
        assert_documented("DELETE", COMMENT, 500, None)
    with pytest.raises(AssertionError, match=r"is not in github_openapi\.json"):
        documented_schema("GET", "/repos/{owner}/{repo}/releases", 200)


def test_a_one_of_failure_shows_the_closest_alternative():
    with pytest.raises(AssertionError) as failed:
        assert_documented(
            "GET", "/repos/{owner}/{repo}/contents/{path}", 200, {"type": "file", "size": 1}
        )
    assert "closest, content-file: $: '_links' is a required property" in str(failed.value)


ISSUES = "/repos/{owner}/{repo}/issues"
CHECK_RUNS = "/repos/{owner}/{repo}/check-runs"
COMMIT_COMMENTS = "/repos/{owner}/{repo}/commits/{commit_sha}/comments"
RUN = {"name": "hookledger review", "head_sha": "a" * 40, "status": "in_progress"}


def test_a_request_is_matched_to_its_documented_template():
    assert request_template("GET", "/repos/o/r/contents/docs/a.md") == (
        "/repos/{owner}/{repo}/contents/{path}"
    )
    with pytest.raises(AssertionError, match="GitHub documents no such operation"):
        request_template("GET", "/repos/o/r/nothing-here")
    with pytest.raises(AssertionError, match=r"is not in github_openapi\.json"):
        request_template("GET", "/repos/o/r/releases")


def test_a_documented_request_passes():
    assert_request_documented("POST", CHECK_RUNS, {}, RUN)
    assert_request_documented("GET", COMMIT_COMMENTS, {"per_page": "100", "page": "2"}, None)
    assert_request_documented("POST", ISSUES, {}, {"title": "T", "assignees": ["mona"]})


@pytest.mark.parametrize(
    ("name", "method", "template", "query", "body", "said"),
    [
        (
            "a field 2026-03-10 removed",
            "POST",
            ISSUES,
            {},
            {"title": "T", "assignee": "mona"},
            r"body \$\.assignee: a field GitHub does not document here",
        ),
        (
            "a nested field nobody documents",
            "POST",
            CHECK_RUNS,
            {},
            {**RUN, "output": {"title": "t", "summary": "s", "colour": "red"}},
            r"body \$\.output\.colour: a field",
        ),
        ("a wrong type", "POST", CHECK_RUNS, {}, {**RUN, "status": 1}, r"body \$\.status: 1"),
        ("no body where one is required", "POST", CHECK_RUNS, {}, None, "GitHub requires one"),
        ("a body where none is taken", "GET", COMMIT_COMMENTS, {}, {"x": 1}, "documents none"),
        ("an unknown query parameter", "GET", COMMIT_COMMENTS, {"limit": "5"}, None, r"\?limit"),
        (
            "a query value its schema does not allow",
            "GET",
            "/repos/{owner}/{repo}/commits/{ref}/check-runs",
            {"filter": "newest", "per_page": "many"},
            None,
            r"\?filter=newest: \$: 'newest' is not one of(.|\n)*\?per_page=many: \$: 'many'",
        ),
    ],
)
def test_a_request_github_does_not_document_fails_naming_why(
    name, method, template, query, body, said
):
    with pytest.raises(AssertionError, match=said) as failed:
        assert_request_documented(method, template, query, body)
    assert f"{method} {template} sent as GitHub does not document it" in str(failed.value), name
