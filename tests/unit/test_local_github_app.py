"""The local stack's GitHub App (local/github_app.py): the mode switch, which installation
a repository's webhook carries, and that the private key never shows in a repr."""

from __future__ import annotations

from typing import Any

import pytest

from local.github_app import LocalApp, app_mode, installation_for, with_installation
from local.stack import Ports, function_env


@pytest.mark.parametrize(
    ("name", "env", "expected"),
    [
        ("unset: an App", {}, True),
        ("app", {"LOCAL_GITHUB_AUTH": "app"}, True),
        ("token", {"LOCAL_GITHUB_AUTH": "Token"}, False),
    ],
)
def test_app_mode(name: str, env: dict[str, str], expected: bool) -> None:
    assert app_mode(env) is expected, name


def test_an_unknown_mode_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="LOCAL_GITHUB_AUTH"):
        app_mode({"LOCAL_GITHUB_AUTH": "pat"})


APP = LocalApp(1001, "Iv23liLOCAL", "-----BEGIN RSA PRIVATE KEY-----\nsecret\n", (("octo-org", 7),))


def test_the_app_names_its_installation_per_account_and_hides_its_key() -> None:
    assert APP.installation_for("Octo-Org/chaos") == 7
    assert APP.installation_for("someone/else") is None
    assert "secret" not in repr(APP) and "secret" not in str(APP)


def test_function_env_gives_the_app_and_the_console_url() -> None:
    ports = Ports(1, 2, 3, 4, 5, 6, 7, 8099)
    env = function_env(ports, {}, app=APP)
    assert (env["GITHUB_APP_ID"], env["GITHUB_APP_PRIVATE_KEY"]) == (APP.client_id, APP.private_key)
    assert env["CONSOLE_URL"] == "http://127.0.0.1:8099"
    assert "GITHUB_APP_ID" not in function_env(ports, {})  # token mode
    assert function_env(ports, {"CONSOLE_URL": "https://c"})["CONSOLE_URL"] == "https://c"


class _Sim:
    def __init__(self, installations: list[dict[str, Any]]) -> None:
        self.installations = installations

    def github_apps(self) -> dict[str, Any]:
        return {"installations": self.installations}


@pytest.mark.parametrize(
    ("name", "installations", "expected"),
    [
        ("all of the account", [{"id": 5, "account": {"login": "hookledger"}}], 5),
        ("selected repositories", [{"id": 6, "repositories": ["hookledger/demo"]}], 6),
        ("another repository", [{"id": 6, "repositories": ["hookledger/other"]}], None),
        ("suspended", [{"id": 5, "account": {"login": "hookledger"}, "suspended": True}], None),
        ("none", [], None),
    ],
)
def test_installation_for(name: str, installations: list[dict[str, Any]], expected: Any) -> None:
    sim: Any = _Sim(installations)
    for entry in installations:
        entry.setdefault("repositories", None)
    assert installation_for(sim, "hookledger/demo") == expected, name


def test_with_installation() -> None:
    assert with_installation({"a": 1}, None) == {"a": 1}
    assert with_installation({"a": 1}, 9) == {"a": 1, "installation": {"id": 9}}
