"""App settings per test (hookledger/testing/stack.py `use`, `use_settings`): what a test
sets reaches the running functions, and the next test runs with its own.

The app is tests/integration/kit_outbox_app.py: its `KIT_OUTBOX_LABELS` (a list, default
"bug,feature") is recorded by its handler as the worker read it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hookledger.testing import Stack

pytestmark = pytest.mark.hookledger_apps("tests.integration.kit_outbox_app")
SETTING = "KIT_OUTBOX_LABELS"


def labels_seen(hookledger: Stack) -> list[str]:
    """The labels the worker's handler read, for one delivery sent now."""
    sent = hookledger.send_github("milestone", {"action": "settings"})
    assert hookledger.wait_handled(sent) == {"kit_outbox": "done"}
    [seen] = hookledger.documents("kit_outbox_seen").values()
    return list(seen["labels"])


@pytest.fixture
def two_labels(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(SETTING, "question, docs")
    yield


def test_a_setting_in_the_environment_before_the_fixture_reaches_the_functions(
    two_labels: None, hookledger: Stack
) -> None:
    assert hookledger.settings[SETTING] == "question, docs"
    assert labels_seen(hookledger) == ["question", "docs"]


def test_a_setting_the_test_chooses_reaches_the_functions(hookledger: Stack) -> None:
    hookledger.use_settings(KIT_OUTBOX_LABELS="wontfix")

    assert labels_seen(hookledger) == ["wontfix"]


@pytest.mark.parametrize("turn", ["after a test that set it", "again"])
def test_a_test_that_sets_nothing_gets_the_default(hookledger: Stack, turn: str) -> None:
    assert hookledger.settings[SETTING] is None, turn
    assert labels_seen(hookledger) == ["bug", "feature"], turn


def test_a_setting_changed_after_the_fixture_is_refused_naming_it(
    hookledger: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SETTING, "late")

    with pytest.raises(RuntimeError, match=rf"{SETTING}: None → 'late'.*use_settings"):
        hookledger.send_github("milestone", {"action": "settings"})


def test_a_setting_no_app_declares_is_refused(hookledger: Stack) -> None:
    with pytest.raises(KeyError, match=r"declares? the settings \['KIT_OUTBOX_LABELZ'\]"):
        hookledger.use_settings(KIT_OUTBOX_LABELZ="x")
