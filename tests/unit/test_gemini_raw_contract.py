"""The one private google-genai call (shared/gemini/raw.py): still there, and the only one."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from google.genai import version

from shared.gemini import make_client
from shared.gemini import raw as gemini_raw
from shared.gemini.raw import SdkContractError, check_contract

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_sdk_still_offers_the_private_call_the_adapter_uses() -> None:
    major = int(version.__version__.split(".")[0])
    assert major == gemini_raw.SDK_MAJOR, (
        f"google-genai {version.__version__} is installed; shared/gemini/raw.py was written "
        f"for {gemini_raw.SDK_MAJOR}.x: re-check the private call, then move the pin"
    )
    check_contract(make_client("contract-test", "http://127.0.0.1:9"))  # raises with the reason


def test_the_pin_in_pyproject_matches_the_adapters_major() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    pin = re.search(r'"google-genai>=([0-9]+)[^"]*<([0-9]+)"', pyproject)
    assert pin is not None, "pyproject.toml must pin google-genai's major (>=X…,<X+1)"
    assert (int(pin[1]), int(pin[2])) == (gemini_raw.SDK_MAJOR, gemini_raw.SDK_MAJOR + 1)


@pytest.mark.parametrize(
    ("client", "says"),
    [
        (SimpleNamespace(), "has no `_api_client`"),
        (SimpleNamespace(_api_client=SimpleNamespace()), "`Client._api_client.request` is gone"),
        (
            SimpleNamespace(_api_client=SimpleNamespace(request=lambda method, url: None)),
            "now takes ('method', 'url')",
        ),
    ],
    ids=["no api client", "no request", "new signature"],
)
def test_a_changed_sdk_fails_the_contract_with_a_clear_message(client: Any, says: str) -> None:
    with pytest.raises(SdkContractError) as caught:
        check_contract(client)
    assert says in str(caught.value)


def test_only_the_adapter_touches_the_sdks_private_client() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("shared", "functions")
        for path in (ROOT / folder).rglob("*.py")
        if "_api_client" in path.read_text() and path != ROOT / "shared" / "gemini" / "raw.py"
    ]
    assert offenders == []
