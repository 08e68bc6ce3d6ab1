"""`GITHUB_REPOSITORIES`: the worker's optional allowlist of repositories to review."""

from __future__ import annotations

import pytest

from shared.config import PRODUCTION_ENV_NAMES, Config, ConfigError


def test_unset_or_empty_reviews_every_repository() -> None:
    assert Config.from_env({}).github_repositories == ()
    assert Config.from_env({"GITHUB_REPOSITORIES": " , "}).github_repositories == ()


def test_a_comma_separated_list_of_globs_is_kept_in_order() -> None:
    config = Config.from_env({"GITHUB_REPOSITORIES": "octo-org/*, me/notes"})
    assert config.github_repositories == ("octo-org/*", "me/notes")


@pytest.mark.parametrize("value", ["octo-org", "octo/a/b", "*"])
def test_an_entry_that_could_never_name_a_repository_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="GITHUB_REPOSITORIES"):
        Config.from_env({"GITHUB_REPOSITORIES": value})


def test_the_worker_reads_it_in_production() -> None:
    assert "GITHUB_REPOSITORIES" in PRODUCTION_ENV_NAMES["worker"]
