"""GitHub's OpenAPI description as one REST API version answers: `as_version`.

GitHub publishes one description of its REST API and writes every breaking change of a
later version beside what it changes ("Breaking changes"; github/rest-api-description
builds its per-version files the same way): an operation or a component carries
`x-github-breaking-changes`, a list of `{"changeset", "version", "patch"}`, where `patch`
changes that very object, for `version` and every later one, either as a JSON Merge Patch
(RFC 7396: an object, `null` removes a member) or as a JSON Patch (RFC 6902: a list of
`add`, `remove`, `replace` operations). Without them the description is the first
calendar version, `BASE_VERSION`.

    described, changesets = as_version(description, "2026-03-10")

answers a copy with every change of that version or an earlier one applied, object by
object in the order GitHub lists them, no `x-github-breaking-changes` left, and the names
of the changesets applied. A version the description never names, or a patch that does
not fit what it patches, is a `GenerateError`: the extract is never half of one version.
"""

from __future__ import annotations

import copy
from typing import Any

from tools.requirements import GenerateError

BREAKING = "x-github-breaking-changes"
# The first calendar version: the description without any of its breaking changes.
BASE_VERSION = "2022-11-28"


def versions(description: dict[str, Any]) -> list[str]:
    """Every REST API version the description describes, oldest first."""
    named = {BASE_VERSION}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for change in node.get(BREAKING) or []:
                named.add(str(change.get("version")))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(description)
    return sorted(named)


def as_version(description: dict[str, Any], version: str) -> tuple[dict[str, Any], list[str]]:
    """(`description` as REST API `version` answers, the changesets applied, sorted)."""
    known = versions(description)
    if version not in known:
        raise GenerateError(
            f"the description describes REST API versions {', '.join(known)}, not {version!r}"
        )
    described = copy.deepcopy(description)
    applied: set[str] = set()

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for change in node.pop(BREAKING, None) or []:
                if str(change["version"]) <= version:  # ISO dates sort as they fall
                    _apply(node, change["patch"], f"{where} ({change['changeset']})")
                    applied.add(change["changeset"])
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{where}/{index}")

    walk(described, "#")
    return described, sorted(applied)


def _apply(node: dict[str, Any], patch: Any, where: str) -> None:
    """`patch` applied to `node` in place: a merge patch (an object) or a JSON Patch."""
    if isinstance(patch, dict):
        merged = _merged(node, patch)
        node.clear()
        node.update(merged)
    elif isinstance(patch, list):
        for operation in patch:
            _operate(node, operation, where)
    else:
        raise GenerateError(f"{where}: a patch is an object or a list, not {patch!r:.80}")


def _merged(target: Any, patch: Any) -> Any:
    """RFC 7396: `target` with `patch` merged in (`null` removes; anything else replaces,
    objects member by member)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merged(result.get(key), value)
    return result


def _operate(node: dict[str, Any], operation: dict[str, Any], where: str) -> None:
    """One RFC 6902 operation (`add`, `remove`, `replace`) on `node` in place."""
    kind, pointer = operation.get("op"), str(operation.get("path", ""))
    if kind not in ("add", "remove", "replace") or not pointer.startswith("/"):
        raise GenerateError(f"{where}: unsupported JSON Patch operation {operation!r:.120}")
    parts = [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]
    try:
        parent: Any = node
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        value = None if kind == "remove" else copy.deepcopy(operation["value"])
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if kind == "remove":
                del parent[index]
            elif kind == "add":
                parent.insert(index, value)
            else:
                parent[index] = value
        elif kind == "add":
            parent[last] = value
        elif last not in parent:  # remove and replace need the member there
            raise KeyError(last)
        elif kind == "remove":
            del parent[last]
        else:
            parent[last] = value
    except (KeyError, IndexError, ValueError, TypeError):
        raise GenerateError(f"{where}: {kind} {pointer} does not fit what it patches") from None
