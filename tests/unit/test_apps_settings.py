"""An app's settings (shared/apps.py `Setting`): a default parses as the environment's text
would, so a setting reads the same whether it is set or not."""

from __future__ import annotations

import pytest

from shared.apps import Setting
from shared.errors import ConfigError

CASES = [
    # (name, setting, the environment's text or None, expected value)
    ("a list's string default", Setting("X_LIST", type="list", default="bug,feature"), None,
     ("bug", "feature")),
    ("a list's string default, spaced and with empties",
     Setting("X_LIST", type="list", default=" bug , ,feature,"), None, ("bug", "feature")),
    ("the same text from the environment",
     Setting("X_LIST", type="list", default="bug,feature"), " bug , ,feature,", ("bug", "feature")),
    ("a list's tuple default", Setting("X_LIST", type="list", default=("a", "b")), None,
     ("a", "b")),
    ("an empty list default", Setting("X_LIST", type="list", default=""), None, ()),
    ("a str default stays a str", Setting("X_TEXT", default="a,b"), None, "a,b"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "setting", "raw", "expected"), CASES, ids=[c[0] for c in CASES])
def test_a_setting_reads_its_default_as_the_environment_would(
    name: str, setting: Setting, raw: str | None, expected: object
) -> None:
    assert setting.parse(raw) == expected, name


def test_a_list_default_is_checked_as_parsed() -> None:
    with pytest.raises(ConfigError, match="X_LIST must be one of"):
        Setting("X_LIST", type="list", default="a,b", choices=(("a",),))
    assert Setting("X_LIST", type="list", default="a", choices=(("a",),)).parse(None) == ("a",)
