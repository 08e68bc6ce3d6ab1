"""Terraform variable defaults read from terraform/variables.tf (offline, python-hcl2).

The installed `hcl2` is checkov's fork (tests/terraform/test_terraform_wiring.py says how
it shapes values): an object variable's field defaults sit in its `type` as
`optional(type, value)` strings, which is where they are read from here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import hcl2

_OPTIONAL = re.compile(r"'(\w+)': '\$\{optional\(([a-z()]+),(.*?)\)\}'")


def _value(kind: str, raw: str) -> Any:
    if kind == "number":
        return float(raw)
    if kind == "bool":
        return raw == "True"
    if kind == "string":
        return json.loads(raw)
    return json.loads(raw.replace("'", '"'))


def _unwrap(value: Any) -> Any:
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def variable_defaults(path: Path) -> dict[str, Any]:
    """`{"queue.max_dispatches_per_second": 20.0, "region": "us-central1", ...}`."""
    parsed = hcl2.loads(path.read_text())
    out: dict[str, Any] = {}
    for entry in parsed.get("variable", []):
        for name, body in entry.items():
            for field, kind, raw in _OPTIONAL.findall(str(_unwrap(body.get("type", "")))):
                out[f"{name}.{field}"] = _value(kind, raw)
            if "default" in body:
                default = _unwrap(body["default"])
                if not isinstance(default, dict) or default:
                    out[name] = default
    return out
