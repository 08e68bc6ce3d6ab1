"""The ingress's sizing must hold a burst of its largest bodies (terraform/functions.tf).

Each in-flight request may hold its body about three times (read, joined, sealed) on top of
~128 MiB of runtime. Terraform refuses a sizing that does not fit, by a precondition on the
functions; this test pins that rule and evaluates it on the defaults, and shows the old
defaults (80 requests of 25 MiB in 512 MiB) would be refused.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import hcl2

TERRAFORM = Path(__file__).resolve().parents[2] / "terraform"
UNITS = {"Mi": 1 << 20, "Gi": 1 << 30, "M": 10**6, "G": 10**9}
RUNTIME_BYTES = 128 << 20


def _parsed(name: str) -> dict[str, Any]:
    return dict(hcl2.loads((TERRAFORM / name).read_text()))


def _variable_type(name: str) -> str:
    for entry in _parsed("variables.tf")["variable"]:
        if name in entry:
            kind = entry[name]["type"]
            return str(kind[0] if isinstance(kind, list) else kind)
    raise AssertionError(f"terraform/variables.tf has no variable {name!r}")


def _default(type_text: str, field: str) -> str:
    found = re.search(
        rf"'{field}': '\$\{{optional\((?:number|string),\"?([^\")]+)\"?\)\}}'", type_text
    )
    assert found, f"no optional default for {field!r}"
    return found.group(1)


def fits(concurrency: int, memory: str, largest_body: int) -> bool:
    """The precondition's formula, evaluated in Python."""
    amount, unit = re.fullmatch(r"(\d+)([A-Za-z]+)", memory).groups()  # type: ignore[union-attr]
    return concurrency * largest_body * 3 + RUNTIME_BYTES <= int(amount) * UNITS[unit]


def test_the_functions_carry_the_memory_precondition() -> None:
    [resource] = [
        r["google_cloudfunctions2_function"]["function"]
        for r in _parsed("functions.tf")["resource"]
        if "google_cloudfunctions2_function" in r
    ]
    conditions = [str(p["condition"]) for p in resource["lifecycle"][0]["precondition"]]
    assert any("local.ingress_peak_bytes <= local.ingress_memory_bytes" in c for c in conditions)
    local_values = _parsed("functions.tf")["locals"][0]
    peak = str(local_values["ingress_peak_bytes"])
    assert "var.ingress_function.concurrency" in peak and "* 3 + 134217728" in peak, peak
    assert "max(var.settings.max_body_bytes,var.settings.max_gemini_body_bytes)" in peak, peak


def test_the_default_sizing_fits_and_the_old_one_would_not() -> None:
    ingress, settings = _variable_type("ingress_function"), _variable_type("settings")
    concurrency, memory = int(_default(ingress, "concurrency")), _default(ingress, "memory")
    largest = max(
        int(_default(settings, "max_body_bytes")), int(_default(settings, "max_gemini_body_bytes"))
    )
    assert fits(concurrency, memory, largest), (concurrency, memory, largest)
    assert not fits(80, "512Mi", largest)  # what the ingress was sized at before
