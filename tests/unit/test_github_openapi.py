"""The pinned extract of GitHub's OpenAPI description and the assertion built on it
(tools/github_openapi.py, tests/github_openapi.py), offline: the extract matches the
generator's pins and endpoints, OpenAPI 3.0 schemas become JSON Schema as meant, and a
body GitHub would not send fails naming the endpoint and the field."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from tests.github_openapi import assert_documented, documented_schema, extract
from tools.github_openapi import ENDPOINTS, INTEGRITY, PACKAGE, VERSION, json_schema

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
