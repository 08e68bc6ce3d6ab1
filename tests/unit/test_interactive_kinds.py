"""`OperationKind(interactive=True)` (shared/kinds.py) and the priority a submission's batch
is created with (`SubmitDeps`, shared/submission.py): what each kind gets, and the
combinations refused when a kind is registered."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from shared import api, kinds
from shared.submission import SubmitDeps

SHARING = api.Sharing(max_requests=10, window_s=60)


@pytest.fixture
def registered() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        kind = kinds._KINDS.pop(name, None)
        if kind is not None:
            kinds._BY_TAG.pop(kind.tag, None)


def deps(kind: str, priority: int | None = None) -> SubmitDeps:
    unused: Any = None  # no call reaches the ledger or Gemini here
    return SubmitDeps(ledger=unused, gemini=unused, kind=kind, priority=priority)


def test_an_interactive_kind_goes_ahead_and_never_shares(registered: list[str]) -> None:
    kind = kinds.register(api.OperationKind("probe-pressed", "probe-pressed", interactive=True))
    registered.append(kind.name)

    assert kind.priority == api.INTERACTIVE_PRIORITY > api.BACKGROUND_PRIORITY
    assert kind.sharing_under(None) is None
    assert deps(kind.name).batch_priority() == api.INTERACTIVE_PRIORITY
    assert deps(kind.name).interactive
    assert deps(kind.name).create_options() == {"priority": api.INTERACTIVE_PRIORITY}


def test_every_other_kind_keeps_geminis_default_and_names_none(registered: list[str]) -> None:
    kind = kinds.register(api.OperationKind("probe-background", "probe-background"))
    registered.append(kind.name)

    assert kind.priority == api.BACKGROUND_PRIORITY == 0
    assert not deps(kind.name).interactive
    assert deps(kind.name).create_options() == {}  # the create is called as it always was
    assert deps("never-registered").create_options() == {}  # a generic kind


def test_a_priority_given_wins_over_the_kinds(registered: list[str]) -> None:
    kind = kinds.register(api.OperationKind("probe-chosen", "probe-chosen"))
    registered.append(kind.name)

    assert deps(kind.name, priority=7).create_options() == {"priority": 7}
    assert deps(kind.name, priority=7).interactive
    assert not deps(kind.name, priority=-1).interactive  # below background: may share


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        (
            api.OperationKind("probe-both", "probe-both", interactive=True, sharing=SHARING),
            "is interactive: its batches are never shared",
        ),
        (
            api.OperationKind(
                "probe-both-fn", "probe-both-fn", interactive=True, sharing=lambda s: SHARING
            ),
            "is interactive: its batches are never shared",
        ),
        (
            api.OperationKind("probe-word", "probe-word", interactive="yes"),  # type: ignore[arg-type]
            "interactive must be True or False, got 'yes'",
        ),
    ],
    ids=["with sharing", "with a sharing function", "not a bool"],
)
def test_a_kind_that_cannot_be_interactive_is_refused_naming_it(kind: Any, says: str) -> None:
    with pytest.raises(ValueError) as caught:
        kinds.register(kind)
    assert says in str(caught.value) and kind.name in str(caught.value)
    assert kind.name not in {k.name for k in kinds.registered()}
