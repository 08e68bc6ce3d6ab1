"""Terraform refuses a queue rate the worker cannot absorb, by the capacity model's rule.

terraform/tasks.tf carries preconditions on the queue: max_dispatches_per_second x
worker_request_seconds <= worker max_instances x concurrency (Little's law: requests in
flight), and max_concurrent_dispatches within the same bound. These tests find them in
the parsed HCL, evaluate their expressions in Python for several settings and compare
with bench/_capacity.py's `queue_fits_worker`, and check that the defaults in
terraform/variables.tf are the ones the model (docs/performance.md "Scale") chose.
"""

from __future__ import annotations

import ast
import json
import operator
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import hcl2
import pytest

from bench._capacity import Deployment, Measured, model, queue_fits_worker
from bench._terraform import variable_defaults

REPO = Path(__file__).resolve().parents[2]
TERRAFORM = REPO / "terraform"
RATE_CHECK = (
    "var.queue.max_dispatches_per_second * var.worker_request_seconds"
    " <= var.worker_function.max_instances * var.worker_function.concurrency"
)
CONCURRENCY_CHECK = (
    "var.queue.max_concurrent_dispatches"
    " <= var.worker_function.max_instances * var.worker_function.concurrency"
)
_OPS: dict[type, Any] = {
    ast.Mult: operator.mul,
    ast.Add: operator.add,
    ast.LtE: operator.le,
    ast.Lt: operator.lt,
}


def queue_preconditions() -> list[str]:
    parsed = hcl2.loads((TERRAFORM / "tasks.tf").read_text())
    [queue] = [
        r["google_cloud_tasks_queue"]["deliveries"]
        for r in parsed["resource"]
        if "google_cloud_tasks_queue" in r
    ]
    conditions = []
    for check in queue["lifecycle"][0]["precondition"]:
        value = check["condition"]
        value = value[0] if isinstance(value, list) else value
        conditions.append(re.sub(r"\s+", " ", str(value).removeprefix("${").removesuffix("}")))
    return conditions


def check(expression: str, values: Mapping[str, float]) -> bool:
    """The HCL condition with each `var.*` replaced by its value: numbers, *, + and <=."""
    text = expression
    for name in sorted(values, key=len, reverse=True):
        text = text.replace(f"var.{name}", repr(float(values[name])))

    def value(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OPS:
            return _OPS[type(node.ops[0])](value(node.left), value(node.comparators[0]))
        raise AssertionError(f"unexpected part of {expression!r}: {ast.dump(node)}")

    return bool(value(ast.parse(text, mode="eval").body))


def test_the_queue_carries_both_capacity_preconditions() -> None:
    conditions = queue_preconditions()
    assert RATE_CHECK in conditions, conditions
    assert CONCURRENCY_CHECK in conditions, conditions


@pytest.mark.parametrize(
    ("rate", "request_s", "instances", "concurrency"),
    [
        (50, 2, 20, 8),  # the defaults: 100 in flight of 160
        (80, 2, 20, 8),  # exactly full
        (81, 2, 20, 8),  # one over
        (500, 2, 20, 8),  # the documented queue maximum against the default worker
        (500, 0.5, 250, 1),
        (20, 2, 10, 8),  # the defaults before the capacity model
        (10, 30, 4, 80),
    ],
)
def test_the_rate_check_is_the_models_rule(
    rate: float, request_s: float, instances: int, concurrency: int
) -> None:
    values = {
        "queue.max_dispatches_per_second": rate,
        "worker_request_seconds": request_s,
        "worker_function.max_instances": instances,
        "worker_function.concurrency": concurrency,
    }
    expected = queue_fits_worker(rate, request_s, instances, concurrency)
    assert check(RATE_CHECK, values) is expected, values


def test_the_defaults_pass_and_a_rate_the_worker_cannot_absorb_is_refused() -> None:
    defaults = variable_defaults(TERRAFORM / "variables.tf")
    names = (
        "queue.max_dispatches_per_second",
        "queue.max_concurrent_dispatches",
        "worker_request_seconds",
        "worker_function.max_instances",
        "worker_function.concurrency",
    )
    values = {name: float(defaults[name]) for name in names}
    assert check(RATE_CHECK, values) and check(CONCURRENCY_CHECK, values)
    assert not check(RATE_CHECK, {**values, "worker_function.max_instances": 124})
    assert not check(CONCURRENCY_CHECK, {**values, "queue.max_concurrent_dispatches": 1001})


def test_the_defaults_are_the_ones_the_capacity_model_chose() -> None:
    inputs = Measured.from_json(json.loads((REPO / "docs" / "capacity-inputs.json").read_text()))
    deployment = Deployment.from_terraform(TERRAFORM)
    result = model(inputs, deployment)
    # The check's planning figure covers the modelled worker request, with the assumptions.
    assert deployment.worker_request_s >= result["per_push"]["worker_request_s"]
    # 100 pushes/s sustained: none of our settings binds, each keeps 2x headroom.
    hundred = next(r for r in result["tiers"] if r["pushes_per_s"] == 100 and r["burst_s"] is None)
    assert hundred["first_of_our_settings"]["utilization"] <= 0.5, hundred
    assert hundred["queue"]["backlog_tasks"]["grows_per_s"] == 0
    # Its 10x burst for a minute drains within 10 minutes.
    burst = next(r for r in result["tiers"] if r["burst_over"] == 100)
    assert burst["queue"]["backlog_tasks"]["drain_s"] <= 600
    # And the variables say where they come from.
    text = (TERRAFORM / "variables.tf").read_text()
    for variable in ("queue", "worker_function", "worker_request_seconds"):
        block = text.split(f'variable "{variable}"')[0].rsplit("}\n", 1)[-1]
        assert 'docs/performance.md "Scale"' in block and "bench/capacity.py" in block, variable
