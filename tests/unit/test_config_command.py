"""`hookledger config`: the loaded apps' settings as declared, with a bad value named."""

from __future__ import annotations

import json

from hookledger.cli import main
from hookledger.cli.config_cmd import rows


def test_every_setting_of_every_named_app_is_listed_with_its_value() -> None:
    env = {"HOOKLEDGER_APPS": "apps.review,apps.classify", "REVIEW_PATH": "docs"}
    found = {(row["app"], row["name"]): row for row in rows(env)}
    assert ("review", "REVIEW_PATH") in found and ("classify", "CLASSIFY_LABELS") in found
    assert all(app in ("review", "classify") for app, _ in found)
    assert found[("review", "REVIEW_PATH")]["value"] == "docs"
    assert found[("review", "REVIEW_PATH")]["set"] is True
    assert (
        found[("review", "GITHUB_COMMENTS")] | {"value": False, "set": False}
        == found[("review", "GITHUB_COMMENTS")]
    )


def test_a_value_the_app_refuses_is_shown_with_the_problem_and_fails(capsys, monkeypatch) -> None:
    monkeypatch.setenv("HOOKLEDGER_APPS", "apps.review")
    monkeypatch.setenv("GITHUB_REPOSITORIES", "not-a-repo")
    assert main(["config", "--json"]) == 1
    listed = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert "owner/name" in listed["GITHUB_REPOSITORIES"]["problem"]


def test_an_app_that_cannot_load_is_one_error_naming_it(capsys, monkeypatch) -> None:
    monkeypatch.setenv("HOOKLEDGER_APPS", "no_such_app_module")
    assert main(["config"]) == 1
    assert "app no_such_app_module failed to import" in capsys.readouterr().err
