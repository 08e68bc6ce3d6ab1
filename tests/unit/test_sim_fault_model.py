"""The simulator's fault model (pure): merging and validation, and the seeded draws."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from local.simulator.faults import FaultModel, merge, unknown_keys
from local.simulator.injector import FaultInjector
from local.simulator.state import BadRequest

# --- merge and validation -------------------------------------------------------------


def test_defaults_inject_nothing() -> None:
    model = FaultModel()

    assert model.status_rates() == {}
    assert (model.timeout_rate, model.latency_ms, model.latency_jitter_ms) == (0, 0, 0)
    assert (model.webhook_drop_rate, model.webhook_copies, model.early_webhook) == (0, 1, False)


def test_keys_left_out_keep_their_value() -> None:
    model = merge(FaultModel(), {"latency_ms": 50, "webhook_copies": 3})

    merged = merge(model, {"error_rates": {"429": 0.1}})

    assert (merged.latency_ms, merged.webhook_copies) == (50, 3)
    assert merged.error_rates == {429: 0.1}


def test_error_rates_replace_the_whole_map() -> None:
    model = merge(FaultModel(), {"error_rates": {"429": 0.1, "500": 0.2}})

    assert merge(model, {"error_rates": {"503": 0.3}}).error_rates == {503: 0.3}


def test_the_single_status_spelling_adds_to_the_map() -> None:
    model = merge(FaultModel(), {"error_rates": {"503": 0.1, "429": 0.2}})

    merged = merge(model, {"get_error_rate": 0.3, "status": 503})

    assert merged.status_rates() == pytest.approx({503: 0.4, 429: 0.2})
    assert merged.report()["error_rates"] == {"429": 0.2, "503": 0.1}
    assert merged.report()["get_error_rate"] == 0.3


def test_a_positive_hold_turns_the_early_webhook_on_and_off_clears_it() -> None:
    early = merge(FaultModel(), {"webhook_before_register_ms": 200})
    assert (early.early_webhook, early.webhook_before_register_ms) == (True, 200)

    off = merge(early, {"early_webhook": False})
    assert (off.early_webhook, off.webhook_before_register_ms) == (False, 0)


BAD_BODIES: list[tuple[str, dict[str, Any], str]] = [
    ("rate above one", {"webhook_drop_rate": 1.5}, "webhook_drop_rate"),
    ("rate as a string", {"timeout_rate": "0.1"}, "timeout_rate"),
    ("rate as a bool", {"get_error_rate": True}, "get_error_rate"),
    ("status key not a code", {"error_rates": {"oops": 0.1}}, "error_rates"),
    ("status key not an error", {"error_rates": {"200": 0.1}}, "error_rates"),
    ("status rate negative", {"error_rates": {"503": -0.1}}, "error_rates"),
    ("error_rates not an object", {"error_rates": [429]}, "error_rates"),
    ("zero copies", {"webhook_copies": 0}, "webhook_copies"),
    ("copies as a float", {"webhook_copies": 2.0}, "webhook_copies"),
    ("negative latency", {"latency_ms": -1}, "latency_ms"),
    ("jitter too large", {"latency_jitter_ms": 60_001}, "latency_jitter_ms"),
    ("zero hold", {"timeout_hold_s": 0}, "timeout_hold_s"),
    ("early not a bool", {"early_webhook": 1}, "early_webhook"),
    ("seed as text", {"seed": "7"}, "seed"),
    ("rates past one", {"timeout_rate": 0.6, "error_rates": {"503": 0.5}}, "exceed 1"),
    (
        "hold with early off",
        {"early_webhook": False, "webhook_before_register_ms": 10},
        "webhook_before_register_ms",
    ),
]


@pytest.mark.parametrize(
    ("name", "body", "named"), BAD_BODIES, ids=[case[0] for case in BAD_BODIES]
)
def test_a_bad_value_is_refused_naming_the_key(name: str, body: dict[str, Any], named: str) -> None:
    with pytest.raises(BadRequest) as caught:
        merge(FaultModel(), body)

    assert named in caught.value.message, name


def test_unknown_keys_are_listed_sorted() -> None:
    body = {"latency_ms": 1, "webhook_drop": 0.3, "github_comment_post": {}, "copies": 2}

    assert unknown_keys(body, frozenset({"github_comment_post"})) == ["copies", "webhook_drop"]


# --- the injector's draws --------------------------------------------------------------


def draws(injector: FaultInjector, count: int) -> list[tuple[int, int | None, bool]]:
    outcomes = []
    for _ in range(count):
        fault = injector.draw_get()
        outcomes.append((fault.latency_ms, fault.status, fault.hang_s is not None))
    return outcomes


def test_a_seed_fixes_the_sequence_of_get_outcomes() -> None:
    body = {
        "error_rates": {"429": 0.2, "503": 0.2},
        "timeout_rate": 0.1,
        "latency_ms": 50,
        "latency_jitter_ms": 30,
        "seed": 7,
    }
    first, second = FaultInjector(), FaultInjector()
    first.update(body)
    second.update(body)

    outcomes = draws(first, 100)

    assert outcomes == draws(second, 100)
    assert {status for _, status, _ in outcomes} == {None, 429, 503}
    assert any(hang for _, _, hang in outcomes)
    assert all(20 <= latency <= 80 for latency, _, _ in outcomes)


def test_counts_match_the_outcomes_drawn() -> None:
    injector = FaultInjector()
    injector.update({"error_rates": {"500": 0.3}, "timeout_rate": 0.1, "seed": 3})

    outcomes = draws(injector, 200)

    injected = injector.report()["injected"]
    assert injected["gets"] == 200
    assert injected["errors"] == {"500": sum(1 for _, s, _ in outcomes if s == 500)}
    assert injected["timeouts"] == sum(1 for _, _, hang in outcomes if hang)


def test_the_single_status_spelling_keeps_its_old_sequence() -> None:
    """Before the fault model, a GET failed when `Random(seed).random() < rate`."""
    injector = FaultInjector()
    injector.update({"get_error_rate": 0.3, "status": 503, "latency_ms": 0, "seed": 7})
    old = random.Random(7)
    expected = [503 if old.random() < 0.3 else None for _ in range(50)]

    assert [status for _, status, _ in draws(injector, 50)] == expected


def test_webhook_copies_apply_to_send_only_and_a_drop_is_zero_copies() -> None:
    injector = FaultInjector()
    injector.update({"webhook_copies": 3})
    assert injector.draw_webhook(None) == 3
    assert injector.draw_webhook(2) == 2

    injector.update({"webhook_drop_rate": 1.0})
    assert injector.draw_webhook(None) == 0
    assert injector.report()["injected"]["webhooks_dropped"] == 1


def test_webhook_drops_do_not_depend_on_get_traffic() -> None:
    quiet, busy = FaultInjector(), FaultInjector()
    for injector in (quiet, busy):
        injector.update({"webhook_drop_rate": 0.5, "error_rates": {"503": 0.5}, "seed": 11})
    draws(busy, 37)

    assert [quiet.draw_webhook(None) for _ in range(40)] == [
        busy.draw_webhook(None) for _ in range(40)
    ]


def test_reset_turns_everything_off_and_lets_a_hung_get_go() -> None:
    injector = FaultInjector()
    injector.update({"timeout_rate": 1.0, "timeout_hold_s": 600, "webhook_copies": 2})
    fault = injector.draw_get()
    assert fault.hang_s == 600
    hung = threading.Thread(target=injector.hang, args=(fault.hang_s,), daemon=True)
    hung.start()

    injector.reset()

    hung.join(timeout=30)
    assert not hung.is_alive()
    assert injector.report() == FaultInjector().report()
