"""The one error tree (shared/errors.py, docs/architecture.md "Errors"), checked over every
exception class `shared/` defines: one root, and transient or permanent, never both."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import shared
from shared import crashpoints
from shared.errors import HookledgerError, PermanentError, TransientError

# Outside the tree on purpose: a crash point is an event for tests, not an error to handle
# (a BaseException, so no `except Exception` sees it).
EXEMPT: frozenset[type[BaseException]] = frozenset({crashpoints.Crashed})


def exception_classes() -> list[type[BaseException]]:
    """Every BaseException subclass defined at module level in a module of `shared`."""
    modules = [shared] + [
        importlib.import_module(found.name)
        for found in pkgutil.walk_packages(shared.__path__, prefix="shared.")
    ]
    return sorted(
        {
            value
            for module in modules
            for value in vars(module).values()
            if inspect.isclass(value)
            and issubclass(value, BaseException)
            and value.__module__ == module.__name__
        },
        key=lambda cls: f"{cls.__module__}.{cls.__qualname__}",
    )


def named(classes: list[type[BaseException]]) -> list[str]:
    return [f"{cls.__module__}.{cls.__qualname__}" for cls in classes]


def test_the_walk_finds_the_tree_and_its_exemption() -> None:
    found = exception_classes()
    # A walk that found nothing would pass every check below.
    assert {HookledgerError, TransientError, PermanentError} <= set(found)
    assert set(found) >= EXEMPT, "an exemption names a class that is gone: drop it"
    assert len(found) > 40, named(found)


def test_every_exception_class_in_shared_has_the_one_root() -> None:
    outside = [
        cls
        for cls in exception_classes()
        if cls not in EXEMPT and not issubclass(cls, HookledgerError)
    ]
    assert outside == [], f"outside shared.errors.HookledgerError: {named(outside)}"


def test_the_exemptions_stay_out_of_except_exception() -> None:
    assert all(not issubclass(cls, Exception) for cls in EXEMPT), named(sorted(EXEMPT, key=str))


def test_no_class_is_both_transient_and_permanent() -> None:
    both = [
        cls
        for cls in exception_classes()
        if issubclass(cls, TransientError) and issubclass(cls, PermanentError)
    ]
    assert both == [], f"transient and permanent at once: {named(both)}"


def test_isinstance_and_retryable_give_one_answer() -> None:
    disagree = [
        cls
        for cls in exception_classes()
        if (issubclass(cls, TransientError) and cls.retryable is not True)  # type: ignore[attr-defined]
        or (issubclass(cls, PermanentError) and cls.retryable is not False)  # type: ignore[attr-defined]
    ]
    assert disagree == [], f"`.retryable` contradicts the branch: {named(disagree)}"
