"""`GITHUB_REPOSITORIES`: the review app's optional allowlist of repositories to review."""

from __future__ import annotations

import pytest

from shared import apps
from shared.config import ConfigError

REVIEW = apps.load(["apps.review"])[0]


def test_unset_or_empty_reviews_every_repository() -> None:
    assert REVIEW.read_settings({})["GITHUB_REPOSITORIES"] == ()
    assert REVIEW.read_settings({"GITHUB_REPOSITORIES": " , "})["GITHUB_REPOSITORIES"] == ()


def test_a_comma_separated_list_of_globs_is_kept_in_order() -> None:
    settings = REVIEW.read_settings({"GITHUB_REPOSITORIES": "octo-org/*, me/notes"})
    assert settings["GITHUB_REPOSITORIES"] == ("octo-org/*", "me/notes")


@pytest.mark.parametrize("value", ["octo-org", "octo/a/b", "*"])
def test_an_entry_that_could_never_name_a_repository_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="GITHUB_REPOSITORIES"):
        REVIEW.read_settings({"GITHUB_REPOSITORIES": value})


def test_a_bad_value_stops_the_function_at_start_naming_the_app() -> None:
    with pytest.raises(apps.AppError, match="app 'review': GITHUB_REPOSITORIES"):
        apps.check_settings([REVIEW], {"GITHUB_REPOSITORIES": "octo-org"})
