"""Fixtures shared by the whole suite; the service fixtures live in tests/plugins/."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

pytest_plugins = [
    "tests.plugins.firestore",
    "tests.plugins.cloudtasks",
    "tests.plugins.simulator",
]


@pytest.fixture(autouse=True)
def _restore_environ() -> Iterator[None]:
    """Every test leaves os.environ as it found it."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)
