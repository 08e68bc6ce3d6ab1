"""The one private google-genai call (shared/gemini/raw.py): still there, and the only one."""

from __future__ import annotations

import ast
import importlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from google import genai
from google.genai import types, version

from shared.gemini import make_client
from shared.gemini import raw as gemini_raw
from shared.gemini.raw import SdkContractError, check_contract
from shared.gemini.requests import create_config, inline_requests

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


def test_an_sdk_without_its_batch_mapper_fails_the_contract_and_the_mapping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(gemini_raw.sdk_batches, "_BatchJob_from_mldev")

    with pytest.raises(SdkContractError) as caught:
        check_contract(make_client("contract-test", "http://127.0.0.1:9"))
    assert "`google.genai.batches._BatchJob_from_mldev` is gone" in str(caught.value)
    with pytest.raises(SdkContractError):
        gemini_raw.batch_job({"name": "batches/b1"})


def test_a_batchs_raw_json_maps_to_the_sdks_typed_job() -> None:
    body = {
        "name": "batches/b1",
        "metadata": {
            "displayName": "review:o/r@abc",
            "state": "BATCH_STATE_SUCCEEDED",
            "batchStats": {"requestCount": "2"},
            "output": {"inlinedResponses": {"inlinedResponses": [{"metadata": {"key": "a"}}]}},
        },
    }

    job = gemini_raw.batch_job(body)

    assert (job.name, job.display_name) == ("batches/b1", "review:o/r@abc")
    assert job.state is not None and job.state.value == "JOB_STATE_SUCCEEDED"
    assert job.dest is not None and job.dest.inlined_responses is not None
    assert [r.metadata for r in job.dest.inlined_responses] == [{"key": "a"}]


# Every package of the repository that ships or runs code (tests/ holds this check itself).
PACKAGES = ("shared", "apps", "functions", "hookledger", "local", "bench", "tools")
ADAPTER = Path("shared") / "gemini" / "raw.py"


def private_sdk_uses(source: str) -> list[str]:
    """Each use of google-genai's private surface in `source`: an import of a `_` module or
    name under `google.genai`, or the `_api_client` attribute; "line N: what" each."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("google.genai"):
            module = node.module or ""
            if _private(module) or any(
                module == "google.genai" and alias.name.startswith("_") for alias in node.names
            ):
                names = ", ".join(alias.name for alias in node.names)
                found.append(f"line {line}: from {module} import {names}")
        elif isinstance(node, ast.Import):
            found += [f"line {line}: import {a.name}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute) and node.attr == "_api_client":
            found.append(f"line {line}: ._api_client")
        elif isinstance(node, ast.Constant) and node.value in ("_api_client",):
            found.append(f"line {line}: '_api_client' by name")  # getattr(client, "_api_client")
    return found


def _private(module: str) -> bool:
    parts = module.split(".")
    return parts[:2] == ["google", "genai"] and any(p.startswith("_") for p in parts[2:])


def test_only_the_adapter_touches_the_sdks_private_surface() -> None:
    offenders = {
        str(path.relative_to(ROOT)): uses
        for folder in PACKAGES
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != ROOT / ADAPTER and (uses := private_sdk_uses(path.read_text()))
    }
    assert offenders == {}, f"only {ADAPTER} may use google-genai's private API"


def test_the_scan_covers_every_package_with_python_in_the_repository() -> None:
    with_python = {
        path.relative_to(ROOT).parts[0]
        for path in ROOT.rglob("*.py")
        if not any(part.startswith(".") or part == "__pycache__" for part in path.parts)
    }
    assert with_python - {"tests"} <= set(PACKAGES)


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("from google.genai import _interactions as errors\n", "from google.genai import"),
        ("from google.genai._interactions import APIError\n", "google.genai._interactions"),
        ("import google.genai._api_client\n", "import google.genai._api_client"),
        ("x = client._api_client.request('get', 'p', {}, None)\n", "._api_client"),
        ("x = getattr(client, '_api_client')\n", "'_api_client' by name"),
    ],
    ids=["private module by name", "from a private module", "import", "attribute", "getattr"],
)
def test_the_scan_finds_each_form_of_private_use(source: str, says: str) -> None:
    [use] = private_sdk_uses(source)
    assert says in use and use.startswith("line 1:")


def test_the_scan_lets_the_public_surface_through() -> None:
    source = "from google import genai\nfrom google.genai import errors, types\n"
    assert private_sdk_uses(source + "client.webhooks.ping('id')\n") == []


# --- Gemini's `batch.priority`, which the SDK's CreateBatchJobConfig lacks ----------------


def recording_transport(
    answer: Callable[[dict[str, Any]], tuple[int, dict[str, Any]]],
) -> tuple[Any, list[tuple[str, dict[str, Any]]]]:
    """A real google-genai client whose transport records each request (URL, JSON body) and
    answers what `answer(body)` says, (status, JSON): the SDK's own request building and
    error mapping, nothing of Gemini's."""
    transport = next(module for module in _http_modules() if hasattr(module, "MockTransport"))
    sent: list[tuple[str, dict[str, Any]]] = []

    def respond(request: Any) -> Any:
        body = json.loads(request.content)
        sent.append((str(request.url), body))
        status, answered = answer(body)
        return transport.Response(status, json=answered)

    http = transport.Client(transport=transport.MockTransport(respond))
    retry = types.HttpRetryOptions(attempts=1)  # the SDK's own retries are not under test
    options = types.HttpOptions(
        base_url="http://gemini.invalid", httpx_client=http, retry_options=retry
    )
    return genai.Client(api_key="contract-test", http_options=options), sent


def recording_client() -> tuple[Any, list[tuple[str, dict[str, Any]]]]:
    """`recording_transport` answering every create with a pending batch."""
    return recording_transport(
        lambda _body: (200, {"name": "batches/b1", "metadata": {"state": "BATCH_STATE_PENDING"}})
    )


def _http_modules() -> list[Any]:
    # google-genai speaks through httpx or its fork httpx2, whichever is installed.
    found = []
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name))
        except ImportError:
            continue
    return found


def create_through_the_sdk(priority: int) -> tuple[str, dict[str, Any]]:
    client, sent = recording_client()
    job = client.batches.create(
        model="models/gemini-2.5-flash",
        src=inline_requests([("docs/a.md", "review this")], None),
        config=create_config("hookledger:review:o/r@abc", (), priority),
    )
    assert job.name == "batches/b1"
    [request] = sent
    return request


def test_a_priority_rides_in_the_create_body_where_the_rest_reference_documents_it() -> None:
    url, body = create_through_the_sdk(100)

    batch = body["batch"]
    assert batch["priority"] == "100"  # int64 in JSON: a string
    # Beside what the SDK itself maps, which the priority must not disturb.
    assert batch["displayName"] == "hookledger:review:o/r@abc"
    assert batch["inputConfig"]["requests"]["requests"][0]["metadata"] == {"key": "docs/a.md"}
    assert "webhookConfig" in batch
    assert url.endswith(
        f"/{gemini_raw.PRIORITY_API_VERSION}/models/gemini-2.5-flash:batchGenerateContent"
    )


def test_the_default_priority_sends_the_create_as_before() -> None:
    url, body = create_through_the_sdk(gemini_raw.DEFAULT_PRIORITY)

    assert "priority" not in body["batch"]
    assert f"/{gemini_raw.PRIORITY_API_VERSION}/" not in url  # the client's own version


def test_negative_priorities_are_sent_too() -> None:
    _url, body = create_through_the_sdk(-5)
    assert body["batch"]["priority"] == "-5"


@pytest.mark.parametrize(
    "bad",
    [True, 1.5, "100", None, 2**63, -(2**63) - 1],
    ids=["bool", "float", "text", "none", "above int64", "below int64"],
)
def test_a_priority_gemini_would_refuse_is_a_clear_error_before_anything_is_sent(bad: Any) -> None:
    with pytest.raises(ValueError) as caught:
        create_config("hookledger:x:1", (), bad)
    assert "whole number" in str(caught.value) and repr(bad) in str(caught.value)


def test_an_sdk_without_extra_body_fails_the_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(types.HttpOptions.model_fields, "extra_body")

    with pytest.raises(SdkContractError) as caught:
        check_contract(make_client("contract-test", "http://127.0.0.1:9"))
    assert "`HttpOptions.extra_body` is gone" in str(caught.value)


@pytest.mark.parametrize(
    ("message", "refused"),
    [
        (
            "Invalid JSON payload received. Unknown name \"priority\" at 'batch': Cannot find field.",
            True,
        ),
        ("Invalid value at 'batch.priority' (TYPE_INT64), \"abc\"", True),
        ("* BatchGenerateContentRequest.batch.input_config.requests.requests[0]: refused", False),
        ("Request contains an invalid argument.", False),
    ],
    ids=["unknown field", "bad value", "a request", "bare"],
)
def test_a_400_naming_the_priority_is_told_from_any_other(message: str, refused: bool) -> None:
    assert gemini_raw.refuses_priority(message) is refused
