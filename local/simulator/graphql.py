"""GitHub's GraphQL endpoint (`POST /graphql`), for the one query hookledger sends.

Only that shape is parsed (shared/github/blobs.py: `blob_query`): a `query` whose
`repository(owner: $o, name: $n)` selects aliases `fN: object(expression: $fN)`, each
expression a variable "REF:PATH". Anything else — a mutation, another field, an inline
literal — is answered as GitHub answers a query it cannot run: HTTP 200 with `errors` and
no `data`. Answers follow GitHub's documented shapes:

- `data.repository.fN`: null for a path not stored at REF; `{"__typename": "Tree"}` for a
  folder holding stored files; else a `Blob` with `text` (null when binary: a NUL among
  its first 8,000 bytes, git's test), `isBinary`, `isTruncated` (text cut at 512,000 bytes,
  as GitHub cuts it) and `byteSize`; every field is answered whatever was selected;
- an installation that may not read the repository: `data.repository` null and an error
  `{"type": "FORBIDDEN", "path": ["repository"], "message": …}`; a bad token is HTTP 401;
- the per-path faults of `POST /_sim/github/faults` apply to the files of a query: a 5xx
  or 429 fails the whole request with that status (one count of the path spent), a 4xx
  makes that alias null with an error naming it (`NOT_FOUND` for 404, else `FORBIDDEN`);
- the primary rate limit, once spent, answers HTTP 200 with `errors: [{"type":
  "RATE_LIMITED", …}]` and `x-ratelimit-remaining: 0` (github_routes.py).

A query costs 1 point of the secondary per-endpoint limit, a mutation 5 (`points`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from local.simulator.app_records import Caller
from local.simulator.github_refusal import GitHubRefusal

if TYPE_CHECKING:
    from local.simulator.engine import Simulator

TEXT_LIMIT_BYTES = 512_000
BINARY_SNIFF_BYTES = 8000
_REPOSITORY = re.compile(r"repository\(\s*owner:\s*\$(\w+)\s*,\s*name:\s*\$(\w+)\s*\)")
_OBJECT = re.compile(r"(\w+)\s*:\s*object\(\s*expression:\s*\$(\w+)\s*\)")
_OPERATION = re.compile(r"\s*(query|mutation|subscription)?\s*[\w]*\s*[({]")


class Unsupported(Exception):
    """A query outside the one shape the simulator answers."""


@dataclass(frozen=True)
class BlobQuery:
    owner: str
    name: str
    expressions: dict[str, str]  # alias -> "REF:PATH"


def points(query: Any) -> int:
    """The secondary limit's cost of one GraphQL request: 5 with a mutation, else 1
    (GitHub's "Calculating points for the secondary rate limit")."""
    text = query if isinstance(query, str) else ""
    return 5 if text.lstrip().startswith("mutation") else 1


def parse(body: Any) -> BlobQuery:
    """The repository and each alias's expression; `Unsupported` for any other query."""
    if not isinstance(body, dict) or not isinstance(body.get("query"), str):
        raise Unsupported("A query attribute must be specified and must be a string.")
    query, variables = body["query"], body.get("variables") or {}
    if not isinstance(variables, dict):
        raise Unsupported("Variables are invalid JSON.")
    kind = _OPERATION.match(query)
    if kind is None or kind.group(1) not in (None, "query"):
        raise Unsupported("The simulator answers only hookledger's repository.object query.")
    repository = _REPOSITORY.search(query)
    aliases = _OBJECT.findall(query)
    if repository is None or not aliases:
        raise Unsupported("The simulator answers only hookledger's repository.object query.")

    def value(variable: str) -> str:
        found = variables.get(variable)
        if not isinstance(found, str):
            raise Unsupported(f"Variable ${variable} of type String! was provided invalid value")
        return found

    expressions = {alias: value(variable) for alias, variable in aliases}
    return BlobQuery(value(repository.group(1)), value(repository.group(2)), expressions)


def blob_json(data: bytes) -> dict[str, Any]:
    """A `Blob` as GitHub answers it (see the module docstring)."""
    binary = b"\0" in data[:BINARY_SNIFF_BYTES]
    cut = len(data) > TEXT_LIMIT_BYTES
    text = None if binary else data[:TEXT_LIMIT_BYTES].decode("utf-8", errors="replace")
    return {
        "__typename": "Blob",
        "text": text,
        "isBinary": binary,
        "isTruncated": cut and not binary,
        "byteSize": len(data),
    }


@dataclass(frozen=True)
class Answer:
    """An HTTP status and its JSON body."""

    status: int
    body: dict[str, Any]


def answer(sim: Simulator, caller: Caller, body: Any) -> Answer:
    """What GitHub answers `body` (a JSON request) from `caller`."""
    try:
        query = parse(body)
    except Unsupported as exc:
        return Answer(200, {"errors": [{"message": str(exc)}]})
    try:
        sim.apps.authorize(caller, query.owner, query.name, "contents", "read")
    except GitHubRefusal as exc:
        if exc.status == 401:
            raise
        error = {"type": "FORBIDDEN", "path": ["repository"], "message": str(exc)}
        return Answer(200, {"data": {"repository": None}, "errors": [error]})
    objects: dict[str, Any] = {}
    errors: list[dict[str, Any]] = []
    for alias, expression in query.expressions.items():
        ref, _, path = expression.partition(":")
        fault = sim.contents.take_fault(path)
        if fault is not None and (fault >= 500 or fault == 429):
            return Answer(fault, {"message": "Server Error (simulated)"})
        if fault is not None:
            kind = "NOT_FOUND" if fault == 404 else "FORBIDDEN"
            message = f"Simulated fault ({fault}) for {path}"
            errors.append({"type": kind, "path": ["repository", alias], "message": message})
            objects[alias] = None
            continue
        objects[alias] = _object(sim, query.owner, query.name, ref, path)
    result: dict[str, Any] = {"data": {"repository": objects}}
    if errors:
        result["errors"] = errors
    return Answer(200, result)


def _object(sim: Simulator, owner: str, name: str, ref: str, path: str) -> dict[str, Any] | None:
    data = sim.contents.get(owner, name, path, ref)
    if data is not None:
        return blob_json(data)
    folder = path.strip("/") + "/"
    if any(stored.startswith(folder) for stored, _ in sim.contents.tree(owner, name, ref)):
        return {"__typename": "Tree"}
    return None
