"""GitHub's REST operations by their documented id, checked before anything is sent.

    op, path, query = build("issues/add-labels", {"issue_number": 3}, defaults=event_params)
    # op.method == "POST"; path == "/repos/octo/hello/issues/3/labels"; query == {}

The catalog is operations.json beside this module: every operation of GitHub's OpenAPI
description (`operationId`, e.g. `issues/add-labels`), written by tools/github_openapi.py
from the pinned @octokit/openapi package. It is read on first use, once per process, never
at import: a function that never calls GitHub by operation never loads it.

A bad call is a bug in the app, not a bad moment: `InvalidCall` (an unknown parameter, a
missing required one, an unusable value) and `UnknownOperation` (with the closest ids) are
permanent errors, raised before any request, so the delivery goes dead with the message
instead of being retried into a 404.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple
from urllib.parse import quote

from shared.errors import PermanentError

CATALOG = Path(__file__).with_name("operations.json")
_TEMPLATE_PARAM = re.compile(r"\{([^}]+)\}")
_NO_DEFAULTS: Mapping[str, Any] = MappingProxyType({})


class InvalidCall(PermanentError, ValueError):
    """A call GitHub documents no way to answer: it names the operation and the parameter."""


class UnknownOperation(InvalidCall):
    """No operation has this id; the message names the closest ones."""


class Operation(NamedTuple):
    """One documented operation: `query` maps each query parameter to whether it is required;
    `body` is "required", "optional" or None (takes no JSON body); `slashes` are the path
    parameters whose values keep their "/" (a file path, a ref like `heads/main`)."""

    id: str
    method: str
    path: str
    path_params: tuple[str, ...]
    query: Mapping[str, bool]
    body: str | None
    docs: str | None
    slashes: frozenset[str]

    def takes(self) -> str:
        """What the operation takes, for error messages."""
        path = ", ".join(self.path_params) or "none"
        query = ", ".join(f"{n}{' (required)' if r else ''}" for n, r in self.query.items())
        body = f"; a JSON body ({self.body}) as json=" if self.body else ""
        return f"path parameters: {path}; query parameters: {query or 'none'}{body}"


@cache
def _catalog() -> Mapping[str, Any]:
    """operations.json's operations, read once (first use, never at import)."""
    loaded: dict[str, Any] = json.loads(CATALOG.read_text(encoding="utf-8"))
    return MappingProxyType(loaded["operations"])


def ids() -> list[str]:
    """Every documented operation id, sorted."""
    return sorted(_catalog())


def operation(operation_id: str) -> Operation:
    """The documented operation `operation_id`; `UnknownOperation` naming the closest ids."""
    if not isinstance(operation_id, str) or operation_id not in _catalog():
        close = difflib.get_close_matches(str(operation_id), list(_catalog()), n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise UnknownOperation(f"GitHub documents no REST operation {operation_id!r}{hint}")
    return _operation(operation_id)


@cache  # one Operation per known id: the catalog's ~1,200 at most
def _operation(operation_id: str) -> Operation:
    entry = _catalog()[operation_id]
    return Operation(
        operation_id,
        entry["method"],
        entry["path"],
        tuple(entry["path_params"]),
        MappingProxyType(dict(entry["query"])),
        entry["body"],
        entry["docs"],
        frozenset(entry["slashes"]),
    )


def build(
    operation_id: str, params: Mapping[str, Any], *, defaults: Mapping[str, Any] = _NO_DEFAULTS
) -> tuple[Operation, str, dict[str, Any]]:
    """(the operation, its concrete path, its query) for a call with `params` by name.

    Path values are URL-quoted (those in `slashes` keep their "/"); the other parameters
    go to the query, a None value left out (True/False as "true"/"false"). `defaults` fill
    only parameters the operation takes and `params` does not name: a name in `params`
    always wins, even with None. `InvalidCall` for an unknown name, a missing path or
    required query parameter, or an empty, "." or ".." path value."""
    op = operation(operation_id)
    known = {*op.path_params, *op.query}
    unknown = sorted(name for name in params if name not in known)
    if unknown:
        raise InvalidCall(f"{op.id} takes no parameter {', '.join(unknown)} ({op.takes()})")
    given = {name: value for name, value in defaults.items() if name in known} | dict(params)
    segments = {name: _segment(op, name, given.get(name)) for name in op.path_params}
    path = _TEMPLATE_PARAM.sub(lambda found: segments[found.group(1)], op.path)
    query: dict[str, Any] = {}
    for name, required in op.query.items():
        value = given.get(name)
        if value is None:
            if required:
                raise InvalidCall(f"{op.id} needs the query parameter {name} ({op.takes()})")
            continue
        query[name] = ("true" if value else "false") if isinstance(value, bool) else value
    return op, path, query


def _segment(op: Operation, name: str, value: Any) -> str:
    """`value` quoted for the path; no value, or one that would move the path, is refused."""
    if value is None:
        raise InvalidCall(f"{op.id} needs the path parameter {name} ({op.takes()})")
    text = str(value)
    parts = text.split("/") if name in op.slashes else [text]
    if any(part in ("", ".", "..") for part in parts):
        raise InvalidCall(f"{op.id}: {name}={text!r} has an empty, '.' or '..' path segment")
    return quote(text, safe="/" if name in op.slashes else "")


@cache
def _templates(method: str) -> list[tuple[re.Pattern[str], str]]:
    """`method`'s path templates as patterns, most literal characters first."""
    found: list[tuple[int, re.Pattern[str], str]] = []
    for operation_id, entry in _catalog().items():
        if entry["method"] != method:
            continue
        pattern, literal, at = "", 0, 0
        for param in _TEMPLATE_PARAM.finditer(entry["path"]):
            text = entry["path"][at : param.start()]
            pattern += re.escape(text) + (".+" if param.group(1) in entry["slashes"] else "[^/]+")
            literal, at = literal + len(text), param.end()
        pattern += re.escape(entry["path"][at:])
        literal += len(entry["path"]) - at
        found.append((literal, re.compile(pattern), operation_id))
    found.sort(key=lambda item: (-item[0], item[2]))
    return [(pattern, operation_id) for _, pattern, operation_id in found]


def match(method: str, concrete_path: str) -> Operation | None:
    """The documented operation a request is (`POST /repos/o/r/issues/3/labels` is
    `issues/add-labels`), the template with the most literal characters winning; None when
    none fits. A query string is ignored."""
    path = concrete_path.split("?", 1)[0]
    for pattern, operation_id in _templates(method.upper()):
        if pattern.fullmatch(path):
            return operation(operation_id)
    return None
