"""ReconcileSettings and the RECONCILE_BACKOFF_* environment: pure logic, no emulator."""

from __future__ import annotations

from typing import Any

import pytest

from shared.clock import system_clock
from shared.config import PRODUCTION_ENV_NAMES, Config, ConfigError
from shared.reconcile import (
    BACKOFF_CAP_S,
    BACKOFF_FIRST_S,
    Reconciler,
    ReconcileSettings,
)
from shared.retry import Backoff
from tests.memory_ledger import MemoryLedger


@pytest.mark.parametrize("stuck_after_s", [0, 48 * 3600, 49 * 3600])
def test_stuck_after_must_come_before_geminis_expiry(stuck_after_s: int) -> None:
    with pytest.raises(ValueError, match="stuck_after_s"):
        ReconcileSettings(grace_s=0, budget_s=1, stuck_after_s=stuck_after_s)


@pytest.mark.parametrize(
    ("name", "changes", "field"),
    [
        ("zero concurrency", {"concurrency": 0}, "concurrency"),
        ("fractional concurrency", {"concurrency": 1.5}, "concurrency"),
        ("page too large", {"page_size": 1001}, "page_size"),
        ("page empty", {"page_size": 0}, "page_size"),
        ("threshold zero", {"fanout_threshold": 0}, "fanout_threshold"),
        ("negative grace", {"grace_s": -1}, "grace_s"),
        ("no budget", {"budget_s": 0}, "budget_s"),
        ("zero alert window", {"alert_window_s": 0}, "alert_window_s"),
        ("zero fan-out window", {"fanout_window_s": 0}, "fanout_window_s"),
        ("negative drain", {"drain_s": -1}, "drain_s"),
        ("backoff starting at 0", {"backoff": Backoff(first_s=0, cap_s=1)}, "backoff"),
    ],
)
def test_each_bad_setting_is_a_config_error_naming_the_field(
    name: str, changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError, match=field):
        ReconcileSettings(**changes)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        ReconcileSettings(concurrency=0, budget_s=0)
    assert "concurrency" in str(caught.value) and "budget_s" in str(caught.value)


def test_alert_window_defaults_to_stuck_after() -> None:
    settings = ReconcileSettings(stuck_after_s=600)
    assert settings.alert_window.total_seconds() == 600
    assert settings.replace(alert_window_s=60).alert_window.total_seconds() == 60


def test_from_config_maps_every_reconcile_variable() -> None:
    config = Config.from_env(
        {
            "RECONCILE_GRACE_S": "5",
            "RECONCILE_CONCURRENCY": "3",
            "RECONCILE_BUDGET_S": "50",
            "RECONCILE_FANOUT_THRESHOLD": "70",
            "STUCK_AFTER_S": "900",
            "RECONCILE_BACKOFF_FIRST_S": "2",
            "RECONCILE_BACKOFF_CAP_S": "64",
            "RECONCILE_BACKOFF_JITTER": "0.25",
        }
    )

    settings = ReconcileSettings.from_config(config, adopt_orphans=False)

    assert (settings.grace_s, settings.concurrency, settings.budget_s) == (5, 3, 50)
    assert (settings.fanout_threshold, settings.stuck_after_s) == (70, 900)
    assert (settings.backoff.first_s, settings.backoff.cap_s) == (2.0, 64.0)
    assert settings.backoff.jitter == 0.25 and settings.adopt_orphans is False


def test_backoff_defaults_are_30_s_to_30_min_half_jittered() -> None:
    settings = ReconcileSettings.from_config(Config.from_env({}))
    assert (settings.backoff.first_s, settings.backoff.cap_s) == (BACKOFF_FIRST_S, BACKOFF_CAP_S)
    assert (BACKOFF_FIRST_S, BACKOFF_CAP_S, settings.backoff.jitter) == (30.0, 1800.0, 0.5)


def test_reconciler_from_config_splits_settings_from_collaborators() -> None:
    pages: list[Any] = []

    reconciler = Reconciler.from_config(
        Config.from_env({"RECONCILE_CONCURRENCY": "2"}),
        MemoryLedger(system_clock),  # type: ignore[arg-type]  # only its parts are wired
        None,  # type: ignore[arg-type]
        adopt_orphans=False,
        enqueue_page=lambda page, task_id: pages.append(task_id),
    )

    assert reconciler.settings.concurrency == 2
    assert reconciler.settings.adopt_orphans is False


def test_reconciler_from_config_refuses_an_unknown_option() -> None:
    with pytest.raises(TypeError):
        Reconciler.from_config(Config.from_env({}), None, None, adopt_orphan=False)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"RECONCILE_BACKOFF_FIRST_S": "soon"}, "RECONCILE_BACKOFF_FIRST_S"),
        ({"RECONCILE_BACKOFF_FIRST_S": "0"}, "RECONCILE_BACKOFF_FIRST_S"),
        ({"RECONCILE_BACKOFF_CAP_S": "-5"}, "RECONCILE_BACKOFF_CAP_S"),
        ({"RECONCILE_BACKOFF_CAP_S": "inf"}, "RECONCILE_BACKOFF_CAP_S"),
        ({"RECONCILE_BACKOFF_FIRST_S": "60", "RECONCILE_BACKOFF_CAP_S": "30"}, "CAP_S"),
        ({"RECONCILE_BACKOFF_JITTER": "1.5"}, "RECONCILE_BACKOFF_JITTER"),
        ({"RECONCILE_BACKOFF_JITTER": "-0.1"}, "RECONCILE_BACKOFF_JITTER"),
        ({"RECONCILE_BACKOFF_JITTER": "nan"}, "RECONCILE_BACKOFF_JITTER"),
        ({"RECONCILE_BACKOFF_JITTER": "half"}, "RECONCILE_BACKOFF_JITTER"),
    ],
)
def test_bad_backoff_environment_names_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        Config.from_env(env)


@pytest.mark.parametrize("jitter", ["0", "1", "0.5"])
def test_jitter_bounds_are_accepted(jitter: str) -> None:
    assert Config.from_env({"RECONCILE_BACKOFF_JITTER": jitter}).reconcile_backoff_jitter == float(
        jitter
    )


@pytest.mark.parametrize("function", ["worker", "reconcile"])
def test_backoff_variables_are_part_of_the_deployment_contract(function: str) -> None:
    names = set(PRODUCTION_ENV_NAMES[function])
    assert {
        "RECONCILE_BACKOFF_FIRST_S",
        "RECONCILE_BACKOFF_CAP_S",
        "RECONCILE_BACKOFF_JITTER",
    } <= names


def test_every_constructor_default_is_configs() -> None:
    """`Config` is the one source: the settings and constructors that restate a setting
    take its default from there (shared/config.py)."""
    import inspect
    from datetime import timedelta

    from shared.handoff.payloads import FirestorePayloadStore
    from shared.ledger import Ledger

    defaults = Config()
    assert ReconcileSettings() == ReconcileSettings.from_config(defaults)
    ledger = inspect.signature(Ledger).parameters
    assert ledger["grace"].default == timedelta(seconds=defaults.reconcile_grace_s)
    assert ledger["retention"].default == timedelta(days=defaults.retention_days)
    claims = inspect.signature(FirestorePayloadStore).parameters
    assert claims["ttl"].default == timedelta(days=defaults.retention_days)
