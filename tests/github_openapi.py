"""GitHub's documented answers as one assertion: `assert_documented(method, path, status, body)`.

The documents are the pinned extract of GitHub's OpenAPI description
(tests/fixtures/github_openapi.json, written by tools/github_openapi.py from the
@octokit/openapi package): per endpoint hookledger calls, each documented status and the
JSON schema of its body. A body is validated with `jsonschema` (JSON Schema 2020-12, the
extract's `components` as the root its `$ref`s resolve against), `date-time` and `uri`
formats included, and every violation is named with the endpoint and the field's place:

    GET /repos/{owner}/{repo}/check-runs/{check_run_id} answered 200 against GitHub's
    documented schema (check-run), 1 violation(s):
      $.app: 'node_id' is a required property

`documented_schema` gives the schema itself (e.g. of the App webhook-delivery endpoints,
in the extract ahead of their simulator routes), `documented_json` validates a
`requests.Response`. `assert_request_documented(method, path, query, body)` holds a
request to the same documents: the operation it is (by GitHub's path templates), each
query parameter it sends against the parameter's schema, and its JSON body against the
documented request body.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError

from shared.github.operations import match

EXTRACT = Path(__file__).resolve().parent / "fixtures" / "github_openapi.json"
MAX_SHOWN = 20
# RFC 3339's date-time (GitHub's `format: date-time`): a date, "T", a time, an offset.
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")

FORMATS = FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True  # formats constrain strings only
    if not _RFC3339.fullmatch(value):
        return False
    datetime.fromisoformat(value.upper().replace("Z", "+00:00"))  # a real date and time
    return True


@FORMATS.checks("uri")
def _uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    parts = urlsplit(value)
    return bool(parts.scheme) and (bool(parts.netloc) or parts.scheme in ("mailto", "urn"))


@cache
def extract() -> dict[str, Any]:
    """The pinned extract, read once."""
    loaded: dict[str, Any] = json.loads(EXTRACT.read_text(encoding="utf-8"))
    return loaded


def endpoint(method: str, path_template: str) -> dict[str, Any]:
    """The extract's entry for `METHOD /path/{template}`; AssertionError when absent."""
    key = f"{method.upper()} {path_template}"
    endpoints = extract()["endpoints"]
    if key not in endpoints:
        raise AssertionError(
            f"{key} is not in {EXTRACT.name} (add it to tools/github_openapi.py ENDPOINTS and "
            f"regenerate); documented: {', '.join(endpoints)}"
        )
    found: dict[str, Any] = endpoints[key]
    return found


def documented_schema(method: str, path_template: str, status: int) -> dict[str, Any] | None:
    """The JSON schema GitHub documents for this answer, resolvable on its own (the
    extract's components inside); None when the status is documented with no body.
    AssertionError when the endpoint or the status is not documented."""
    entry = endpoint(method, path_template)
    response = entry["responses"].get(str(status))
    if response is None:
        raise AssertionError(
            f"{method.upper()} {path_template} answered {status}, a status GitHub does not "
            f"document for it (documented: {', '.join(entry['responses'])})"
        )
    if "schema" not in response:
        return None
    return {
        "$schema": extract()["$schema"],
        **response["schema"],
        "components": extract()["components"],
    }


def _where(error: ValidationError) -> str:
    place = "$"
    for part in error.absolute_path:
        place += f"[{part}]" if isinstance(part, int) else f".{part}"
    return place


def _explained(error: ValidationError) -> str:
    """One violation; for a failed oneOf/anyOf, also the complaints of the alternative
    that came closest: one whose type and enums (e.g. a `type: "file"` field) fit, with
    the fewest violations."""
    line = f"{_where(error)}: {error.message}"
    if not error.context:
        return line
    branches: dict[Any, list[ValidationError]] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    index, closest = min(branches.items(), key=lambda item: (_mismatched(item[1]), len(item[1])))
    alternatives = error.schema.get(error.validator, []) if isinstance(error.schema, dict) else []
    name = (
        _name(alternatives[index]) if isinstance(index, int) and index < len(alternatives) else ""
    )
    said = "; ".join(f"{_where(e)}: {e.message}" for e in closest[:3])
    return f"{line} (closest, {name or f'alternative {index}'}: {said})"


def _mismatched(errors: list[ValidationError]) -> bool:
    """Whether an alternative's errors say it describes another kind of value."""
    return any(e.validator in ("type", "enum", "const") for e in errors)


def _name(schema: Any) -> str:
    """The component a schema is (`$ref`) or lists (`items.$ref`), else ""."""
    if not isinstance(schema, dict):
        return ""
    ref = schema.get("$ref") or (schema.get("items") or {}).get("$ref") or ""
    return str(ref).rsplit("/", 1)[-1]


def assert_documented(method: str, path_template: str, status: int, body: Any) -> None:
    """Fail unless GitHub documents `status` for `METHOD path_template` and `body` (the
    parsed JSON, None for an empty body) is what it documents: naming the endpoint and,
    for each violation, the field's place and what is missing or wrong."""
    schema = documented_schema(method, path_template, status)
    what = f"{method.upper()} {path_template} answered {status}"
    if schema is None:
        if body not in (None, b"", ""):
            raise AssertionError(f"{what} with a body; GitHub documents none: {body!r:.200}")
        return
    if body is None:
        raise AssertionError(f"{what} with no body; GitHub documents one")
    validator = Draft202012Validator(schema, format_checker=FORMATS)
    errors = sorted(validator.iter_errors(body), key=lambda e: (list(map(str, e.path)), e.message))
    if not errors:
        return
    ref = _name(schema) or "inline"
    shown = [f"  {_explained(e)}" for e in errors[:MAX_SHOWN]]
    if len(errors) > MAX_SHOWN:
        shown.append(f"  … and {len(errors) - MAX_SHOWN} more")
    raise AssertionError(
        f"{what} against GitHub's documented schema ({ref}), {len(errors)} violation(s):\n"
        + "\n".join(shown)
    )


def _violations(schema: dict[str, Any], value: Any) -> list[str]:
    """Each way `value` breaks `schema` (resolved against the extract), named by place."""
    rooted = {"$schema": extract()["$schema"], **schema, "components": extract()["components"]}
    validator = Draft202012Validator(rooted, format_checker=FORMATS)
    errors = sorted(validator.iter_errors(value), key=lambda e: (list(map(str, e.path)), e.message))
    return [_explained(e) for e in errors[:MAX_SHOWN]]


def _resolved(schema: Any) -> Any:
    """`schema`, or the component its `$ref` names."""
    while isinstance(schema, dict) and "$ref" in schema:
        schema = extract()["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _branches(schema: Any) -> list[dict[str, Any]]:
    """`schema` and every alternative it allows (allOf, anyOf, oneOf), resolved."""
    schema = _resolved(schema)
    if not isinstance(schema, dict):
        return []
    found = [schema]
    for key in ("allOf", "anyOf", "oneOf"):
        for alternative in schema.get(key, []):
            found += _branches(alternative)
    return found


def _undocumented(schema: Any, value: Any, place: str = "$") -> list[str]:
    """The fields of a request body its schema names nowhere: JSON Schema lets an object
    carry fields it does not list, GitHub takes only those it documents (a field a version
    removed, such as an issue's `assignee` in 2026-03-10, is no longer listed)."""
    branches = _branches(schema)
    if isinstance(value, dict):
        fields: dict[str, Any] = {}
        for branch in branches:
            for name, sub in (branch.get("properties") or {}).items():
                fields.setdefault(name, sub)
        if not fields:
            return []  # a free-form object
        found = []
        for name, item in value.items():
            if name in fields:
                found += _undocumented(fields[name], item, f"{place}.{name}")
            else:
                found.append(f"{place}.{name}: a field GitHub does not document here")
        return found
    if isinstance(value, list):
        items = next((b["items"] for b in branches if "items" in b), None)
        return [f for i, v in enumerate(value) for f in _undocumented(items, v, f"{place}[{i}]")]
    return []


def _query_value(raw: str, schema: dict[str, Any]) -> Any:
    """A query string's value as its schema types it (`per_page=100` is the integer 100)."""
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "integer" in kinds and re.fullmatch(r"-?\d+", raw):
        return int(raw)
    if "boolean" in kinds and raw in ("true", "false"):
        return raw == "true"
    return raw


def request_template(method: str, concrete_path: str) -> str:
    """The extract's `METHOD /path/{template}` a request is; AssertionError naming the
    request when GitHub documents no such operation or the extract leaves it out."""
    operation = match(method, concrete_path)
    if operation is None:
        raise AssertionError(f"{method} {concrete_path}: GitHub documents no such operation")
    endpoint(method, operation.path)  # in the extract, or it names what to add
    return operation.path


def assert_request_documented(
    method: str, path_template: str, query: Mapping[str, str], body: Any
) -> None:
    """Fail unless GitHub documents this request: every query parameter a documented one
    with a value its schema allows, every required one sent, and `body` (the parsed JSON,
    None when none) what the documented request body describes (or none when it takes
    none), naming the endpoint and each violation."""
    entry = endpoint(method, path_template)
    what = f"{method.upper()} {path_template}"
    problems = []
    documented = entry["query"]
    for name, raw in query.items():
        if name not in documented:
            problems.append(f"?{name}: not a query parameter ({', '.join(documented) or 'none'})")
        else:
            schema = documented[name]["schema"]
            problems += [
                f"?{name}={raw}: {v}" for v in _violations(schema, _query_value(raw, schema))
            ]
    problems += [
        f"?{n}: required" for n, p in documented.items() if p["required"] and n not in query
    ]
    request = entry.get("request")
    if request is None:
        if body is not None:
            problems.append(f"a body {body!r:.120}; GitHub documents none")
    elif body is None:
        if request["required"]:
            problems.append("no body; GitHub requires one")
    else:
        problems += [f"body {v}" for v in _violations(request["schema"], body)]
        problems += [f"body {v}" for v in _undocumented(request["schema"], body)]
    if problems:
        shown = "\n".join(f"  {p}" for p in problems)
        raise AssertionError(f"{what} sent as GitHub does not document it:\n{shown}")


def documented_json(response: requests.Response, method: str, path_template: str) -> Any:
    """`response`'s JSON (None when it has no body) after `assert_documented`."""
    body = response.json() if response.content else None
    assert_documented(method, path_template, response.status_code, body)
    return body
