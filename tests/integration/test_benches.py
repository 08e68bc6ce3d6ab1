"""Every benchmark runs at its smallest size and prints one JSON object, so none can rot.

Each bench is run as `make bench` runs it (`python -m bench.NAME`), in its own process;
figures are checked for what they must say (invariants and counts), never for speed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shared import api
from shared.config import DEFAULTS
from shared.lazy_imports import KEPT_OUT
from shared.tracing import parse_traceparent

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def run_bench(name: str, *args: str, timeout: float = 600) -> dict[str, Any]:
    bench = subprocess.Popen(
        [sys.executable, "-m", f"bench.{name}", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = bench.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        bench.terminate()  # SIGTERM: the bench stops what it started (stop_on_sigterm)
        stdout, stderr = bench.communicate(timeout=60)
        pytest.fail(f"bench.{name} did not finish in {timeout:.0f} s:\n{stderr[-3000:]}")
    assert bench.returncode == 0, f"bench.{name} exited {bench.returncode}:\n{stderr[-3000:]}"
    return dict(json.loads(stdout))  # the whole of stdout is one JSON object


def test_e2e_reviews_every_push_exactly_once() -> None:
    result = run_bench("e2e", "--quick")
    assert result["ok"] is True
    for mode in ("webhook", "reconcile"):
        figures = result[mode]
        pushes = figures["pushes"]
        assert figures["violations"] == [], mode
        assert figures["census"]["operations"] == pushes, mode
        assert figures["census"]["reviews"] == 2 * pushes, mode
        assert figures["settled_by"][mode] == pushes, mode
        assert figures["accepted_per_s"] > 0 and figures["settled_per_s"] > 0
        # Where the time goes: each function's and emulator's CPU is measured.
        assert {"ingress", "worker", "firestore", "cloudtasks"} <= set(figures["cpu_s_by_process"])
    # The worker was served with the concurrency Terraform gives it.
    assert result["setup"]["worker_concurrency"] == DEFAULTS.worker_concurrency
    # The same rounds with shared batches: every push reviewed once, in fewer batches.
    shared = result["shared"]
    assert shared["settings"]["REVIEW_GROUP_REQUESTS"] == "100"
    for mode in ("webhook", "reconcile"):
        figures, alone = shared[mode], result[mode]
        pushes = figures["pushes"]
        assert pushes == alone["pushes"], mode
        assert figures["violations"] == [], mode
        assert figures["census"]["reviews"] == 2 * pushes, mode
        # The pushes' operations; each group's own is counted apart.
        assert figures["census"]["operations"] == pushes, mode
        assert 1 <= figures["census"]["groups"] <= figures["batches_created"], mode
        assert figures["settled_by"][mode] == pushes, mode
        assert alone["batches_created"] == pushes, mode  # one batch per push
        assert 1 <= figures["batches_created"] < pushes, mode
        side = result["sharing"][mode]
        assert side["on"]["batches_per_push"] < side["off"]["batches_per_push"] == 1, mode
        for sharing in ("off", "on"):
            latency = side[sharing]["accepted_to_settled_ms"]
            assert 0 < latency["p50"] <= latency["p95"] <= latency["max"], (mode, sharing)
    # A Re-run pressed behind a flood of pushes, Gemini's priority honoured and not: each
    # press made one batch with the interactive priority, settled, every invariant held.
    priority = result["priority"]
    for honoured in ("on", "off"):
        figures = priority[honoured]
        assert figures["violations"] == [], honoured
        assert figures["rerun_priorities"] == [api.INTERACTIVE_PRIORITY], honoured
        assert sum(figures["rerun_settled_by"].values()) == figures["presses"] >= 1, honoured
        assert figures["queued_at_press"] >= 1, honoured  # the flood was waiting
        spans = [figures[f"press_to_{span}_ms"]["p50"] for span in ("created", "done", "settled")]
        assert 0 < spans[0] <= spans[1] <= spans[2], honoured
    assert set(priority["side_by_side"]["press_to_started_ms"]) == {"on", "off"}


def test_cost_counts_each_event() -> None:
    result = run_bench("cost", "--quick")
    accepted = result["accepted_push"]
    assert accepted["tasks_create_task"] == 1
    assert accepted["gemini_calls"] == 1
    assert accepted["github_calls"] == accepted["github_graphql_calls"] == 1  # 2 files, 1 query
    assert result["settled_by_webhook"]["by_collection"]["writes:reviews"] == 2
    assert result["settled_by_reconcile"]["by_collection"]["writes:reviews"] == 2
    redelivered = result["redelivered_push"]
    assert redelivered["tasks_create_task"] == 1
    assert "firestore_reads" not in redelivered and "firestore_writes" not in redelivered
    for name in ("accepted_push", "settled_by_webhook", "reconcile_nothing_due"):
        assert "minimum" in result[name] and "above_minimum" in result[name]
    # Issue 23: a push takes two sequential commits, a webhook settlement one.
    assert accepted["firestore_commits"] == 2
    assert result["settled_by_webhook"]["firestore_commits"] == 1
    # One read of the delivery: the settling commit's done mark is conditional on it.
    assert result["settled_by_webhook"]["by_collection"]["reads:deliveries"] == 1
    assert result["settled_by_webhook"]["firestore_reads"] == 3
    # Every operation above a minimum is named (bench/cost.py ABOVE_MINIMUM_BECAUSE).
    for name, figure in result.items():
        if isinstance(figure, dict) and "because" in figure:
            unnamed = [k for k, v in figure["because"].items() if v.startswith("not named")]
            assert unnamed == [], (name, unnamed)
    # A settlement reads its batch with one GET, by webhook or by reconcile.
    assert result["settled_by_webhook"]["gemini_calls"] == 1
    assert result["settled_by_reconcile"]["gemini_calls"] == 1
    # Its row of the due query is reconcile's one read of each due operation.
    assert result["settled_by_reconcile"]["firestore_reads"] == 1
    # A replay's creates are refused (already there) and counted apart from writes.
    replayed = result["replayed_delivery"]
    assert replayed["firestore_writes"] == 3 and replayed["firestore_refused_writes"] == 6
    # The mode measured is said, beside the review's production default.
    mode = result["mode"]
    assert mode["measured"] == "a batch per push"
    assert mode["settings"]["REVIEW_GROUP_REQUESTS"] == "0"
    assert int(mode["production_default"]["REVIEW_GROUP_REQUESTS"]) > 0


def test_ack_reports_cpu_memory_cold_start_and_tracing() -> None:
    # --compare HEAD: a worktree of this revision's commit, served beside this tree.
    result = run_bench("ack", "--quick", "--clients", "8", "--compare", "HEAD")
    assert result["ok"] is True
    for scenario in ("bare", "enqueue", "ingress", "bare_enqueue", "floor", "floor_direct"):
        assert result[scenario]["errors"] == 0, scenario
    cpu = result["cpu"]
    for key in ("ingress", "floor", "floor_direct", "baseline"):
        assert cpu[f"{key}_server_s_per_1000"] > 0, key
    # The ingress against the floor (issue 36), against the floor making the ingress's own
    # CreateTask call (what the checks cost) and against the baseline, each per round.
    assert cpu["vs_floor_direct"]["goal"] is None  # reported, not a goal
    for versus in ("vs_floor", "vs_floor_direct", "vs_baseline"):
        assert cpu[versus]["ratio"] > 0, versus
        assert len(cpu[versus]["round_ratios"]) == result["setup"]["rounds"], versus
    memory = result["memory"]
    assert memory["errors"] == 0 and memory["requests"] == memory["clients"]
    assert memory["peak_rss_mib"] >= memory["idle_rss_mib"] > 0
    assert result["cold_start"]["ingress_import_ms"] > 0
    # Tracing on, as deployed: the file case wrote every request's spans, the sampled-out
    # case recorded them (its tasks carry a traceparent) and exported none.
    traced = result["tracing"]
    for key in ("off_cpu_ms", "file_all_cpu_ms", "sampled_out_cpu_ms"):
        assert traced[key] > 0, key
    assert traced["overhead_all"] > 0 and traced["overhead_sampled_out"] > 0
    assert len(traced["round_overhead_all"]) == result["setup"]["rounds"]
    assert traced["spans_per_request_file_all"] >= 4  # request, verify, hand-off, CreateTask
    accepted = traced["accepted"]["ingress_file_all"]
    assert traced["spans_by_name_file_all"]["ingress.request"] == accepted
    assert traced["spans_written_sampled_out"] == 0
    for name, expected in (("ingress_file_all", True), ("ingress_sampled_out", False)):
        parsed = parse_traceparent(traced["task_traceparent"][name])
        assert parsed is not None and parsed[2] is expected, name
    before = result["before"]
    assert before["before_cpu_ms"] > 0 and before["ratio"] > 0
    assert len(before["round_ratios"]) == result["setup"]["rounds"]
    assert result["ingress_before"]["errors"] == 0


def test_cold_measures_each_function_with_tracing_off_and_on() -> None:
    result = run_bench("cold", "--quick")
    for function in ("worker", "reconcile"):
        assert result[function][f"{function}_import_ms"] > 0
        assert result[function]["base_import_ms"] > 0
    for function in ("ingress", "worker", "reconcile"):
        traced = result["tracing"][function]
        assert traced["off_import_ms"] > 0 and traced["on_import_ms"] > 0, function
        assert traced["configure_after_off_ms"] > 0, function
        # Off, the served function never imports OpenTelemetry; on, its startup does.
        assert traced["opentelemetry_loaded"] == {"off": False, "on": True}, function
    # Each module shared/lazy_imports.py keeps out, measured beside its listed figure.
    kept = result["kept_out"]["modules"]
    assert set(kept) == set(KEPT_OUT)
    for module, figures in kept.items():
        assert figures["ms"] >= 0 and figures["listed_ms"] == KEPT_OUT[module].ms, module


def test_settle_keeps_exactly_once() -> None:
    result = run_bench("settle", "--operations", "20", "--callers", "2", "--racers", "3")
    assert result["ok"] is True
    assert result["many"]["settled"] == 20 and result["many"]["writebacks_performed"] == 20
    assert result["one"]["winners"] == 1


def test_reconcile_reads_only_what_is_due() -> None:
    result = run_bench(
        "reconcile",
        *("--settled", "300", "--due", "5", "--poll", "10", "--latency-ms", "1"),
        *("--scale-pending", "200", "--scale-due", "8"),
    )
    assert result["reconcile"]["settled"] == 5
    assert result["naive_full_scan"]["documents_read"] > result["reconcile"]["documents_read"]


def test_reconcile_at_scale_fans_out_and_reads_little_with_nothing_due() -> None:
    result = run_bench("reconcile", "--quick")
    scale = result["scale"]
    assert scale["settled"] == scale["due"] == 100
    assert scale["fan_out_run"]["fanned_out_ops"] == scale["due"]
    # The due query, the open-submissions query, the due-groups query, the outbox sweep's;
    # + the old watermark in a new process.
    assert scale["nothing_due"]["warm_process"]["documents_read"] <= 4
    assert scale["nothing_due"]["new_process"]["documents_read"] <= 5
    assert scale["nothing_due"]["warm_process"]["gemini_calls"] == 0  # nothing open: no listing
    assert scale["nothing_due"]["warm_process"]["examined"] == 0


def test_adoption_reads_and_lists_the_same_whatever_gemini_lists() -> None:
    result = run_bench("adoption", "--quick")
    assert result["ok"] is True
    rows = {(r["listed_at_gemini"], r["open_claims"]): r["passes"] for r in result["runs"]}
    assert set(rows) == {(n, k) for n in (0, 100, 1000) for k in (0, 3)}
    for n in (0, 100, 1000):
        assert rows[(n, 0)][0]["gemini_list_calls"] == 0  # nothing open: nothing listed
        assert rows[(n, 3)][0]["adopted"] == 3 and rows[(n, 3)][0]["gemini_list_calls"] == 1
        assert rows[(n, 3)][1]["gemini_list_calls"] == 0  # adopted: closed
    assert len({rows[(n, 3)][0]["firestore_reads"] for n in (0, 100, 1000)}) == 1


def test_the_github_sweep_costs_its_full_pages_and_a_call_per_100_failed_deliveries() -> None:
    result = run_bench("sweep", "--quick")
    by_size = {run["new_deliveries"]: run for run in result["runs"]}
    assert (set(by_size), result["full_pages"]) == ({0, 10, 250}, 1)
    idle, most = by_size[0], by_size[250]
    assert (idle["github_calls"], idle["firestore_reads"], idle["firestore_writes"]) == (1, 2, 1)
    # One page of every delivery, then one of the 13 failed; listing all would take 3.
    assert (most["pages"], most["github_calls"], most["opened"]) == (2, 2, most["failed"])
    assert (most["listing_every_delivery_calls"], most["failed_only"]) == (3, True)
    assert most["firestore_reads"] == 1 + 2 * most["failed"]  # never one per delivery listed
    assert all(run["ok"] for run in result["runs"])


def test_fairness_makes_the_lone_push_wait_its_turn_and_reviews_every_push_once() -> None:
    """One installation's flood, then one push of another's, fair and unfair: every push
    reviewed once, and the figures the docs quote there for both. (The order itself is
    held in tests/integration/test_group_queue.py, where no timing decides it.)"""
    result = run_bench("fairness", "--quick")
    assert result["ok"] is True
    for mode in ("fair", "unfair"):
        figures = result[mode]
        assert figures["violations"] == [], mode
        assert figures["batches_made"] == figures["groups"], mode
        assert 0 < figures["lone_to_batch_ms"] <= figures["lone_to_check_run_ms"], mode
        spans = figures["lone_group_ms"]
        assert spans["joined_to_sealed"] >= 0 and spans["sealed_to_batch"] >= 0, mode
        assert 0 <= figures["batches_made_after_lone"] < figures["batches_made"], mode
    assert set(result["side_by_side"]["lone_to_batch_ms"]) == {"fair", "unfair"}
