"""Gemini refusing `batches.create` (`/_sim/gemini/create-refusal`, `/_sim/gemini/poison`),
seen through the real google-genai client: a `ClientError` with Gemini's status, message
and body, nothing created, and the refusal counted."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from google import genai
from google.genai import errors, types

from local.simulator.create_refusals import ACTIVATION_URL, PROJECT_NUMBER, SERVICE

MODEL = "models/gemini-2.5-flash"
API_KEY = "AIzaSimulatedKey"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
LOCALIZED = "type.googleapis.com/google.rpc.LocalizedMessage"
SIGN_IN = (
    "Expected OAuth 2 access token, login cookie or other valid authentication credential. "
    "See https://developers.google.com/identity/sign-in/web/devconsole-project."
)
METHOD = "google.ai.generativelanguage.v1beta.GenerativeService.BatchGenerateContent"


@pytest.fixture
def client(simulator: Any) -> genai.Client:
    """The real SDK, as hookledger builds it (an API key, the simulator as base URL)."""
    options = types.HttpOptions(base_url=simulator.url, api_version="v1beta", timeout=10_000)
    return genai.Client(api_key=API_KEY, http_options=options)


def inline(*prompts: str) -> list[types.InlinedRequest]:
    """Inline requests as shared/gemini/requests.py builds them."""
    return [
        types.InlinedRequest(
            contents=[types.Content(role="user", parts=[types.Part(text=prompt)])],
            metadata={"key": f"docs/{index}.md"},
        )
        for index, prompt in enumerate(prompts)
    ]


def create(client: genai.Client, src: Any) -> types.BatchJob:
    return client.batches.create(model=MODEL, src=src, config={"display_name": "refusals"})


def refused(client: genai.Client, src: Any) -> errors.ClientError:
    with pytest.raises(errors.ClientError) as caught:
        create(client, src)
    return caught.value


def nothing_created(client: genai.Client, simulator: Any) -> bool:
    return list(client.batches.list()) == [] and simulator.control.batches() == []


def error_info(reason: str, metadata: dict[str, str], domain: bool = True) -> dict[str, Any]:
    return {
        "@type": ERROR_INFO,
        "reason": reason,
        **({"domain": "googleapis.com"} if domain else {}),
        "metadata": metadata,
    }


def localized(message: str) -> dict[str, Any]:
    return {"@type": LOCALIZED, "locale": "en-US", "message": message}


SUSPENDED = f"Permission denied: Consumer 'api_key:{API_KEY}' has been suspended."
DISABLED = (
    f"Generative Language API has not been used in project {PROJECT_NUMBER} before or it is "
    f"disabled. Enable it by visiting {ACTIVATION_URL} then retry. If you enabled this API "
    "recently, wait a few minutes for the action to propagate to our systems and retry."
)
INVALID_KEY = "API key not valid. Please pass a valid API key."
CONSUMER = f"projects/{PROJECT_NUMBER}"

# (name, status, reason, google.rpc status, message, details or None)
DEPLOYMENT_REFUSALS = [
    (
        "403 consumer suspended",
        403,
        None,
        "PERMISSION_DENIED",
        SUSPENDED,
        [
            error_info(
                "CONSUMER_SUSPENDED",
                {"consumer": CONSUMER, "service": SERVICE, "containerInfo": f"api_key:{API_KEY}"},
            ),
            localized(SUSPENDED),
        ],
    ),
    (
        "403 service disabled",
        403,
        "SERVICE_DISABLED",
        "PERMISSION_DENIED",
        DISABLED,
        [
            error_info(
                "SERVICE_DISABLED",
                {
                    "consumer": CONSUMER,
                    "service": SERVICE,
                    "activationUrl": ACTIVATION_URL,
                    "serviceTitle": "Generative Language API",
                    "containerInfo": PROJECT_NUMBER,
                },
            ),
            localized(DISABLED),
            {
                "@type": "type.googleapis.com/google.rpc.Help",
                "links": [
                    {
                        "description": "Google developers console API activation",
                        "url": ACTIVATION_URL,
                    }
                ],
            },
        ],
    ),
    (
        "403 caller without permission",
        403,
        "PERMISSION_DENIED",
        "PERMISSION_DENIED",
        "The caller does not have permission",
        None,
    ),
    (
        "401 token type",
        401,
        None,
        "UNAUTHENTICATED",
        f"Request had invalid authentication credentials. {SIGN_IN}",
        [
            error_info(
                "ACCESS_TOKEN_TYPE_UNSUPPORTED",
                {"method": METHOD, "service": SERVICE},
                domain=False,
            )
        ],
    ),
    (
        "401 credentials missing",
        401,
        "CREDENTIALS_MISSING",
        "UNAUTHENTICATED",
        f"Request is missing required authentication credential. {SIGN_IN}",
        [error_info("CREDENTIALS_MISSING", {"method": METHOD, "service": SERVICE})],
    ),
    (
        "400 invalid key",
        400,
        None,
        "INVALID_ARGUMENT",
        INVALID_KEY,
        [error_info("API_KEY_INVALID", {"service": SERVICE}), localized(INVALID_KEY)],
    ),
]


@pytest.mark.parametrize(
    ("name", "status", "reason", "rpc_status", "message", "details"),
    DEPLOYMENT_REFUSALS,
    ids=[case[0] for case in DEPLOYMENT_REFUSALS],
)
def test_a_refused_deployment_is_gemini_s_error_to_the_sdk_and_creates_nothing(
    simulator: Any,
    client: genai.Client,
    name: str,
    status: int,
    reason: str | None,
    rpc_status: str,
    message: str,
    details: list[dict[str, Any]] | None,
) -> None:
    simulator.control.refuse_creates(status, reason=reason)

    error = refused(client, inline("# a\nSome text."))

    assert (error.code, error.status, error.message) == (status, rpc_status, message), name
    expected: dict[str, Any] = {"code": status, "message": message, "status": rpc_status}
    if details is not None:
        expected["details"] = details
    assert error.details == {"error": expected}, name
    assert nothing_created(client, simulator), name
    state = simulator.control.create_refusal_state()
    assert state["refused"] == 1 and state["status"] == status, name


def test_a_count_refuses_the_next_creates_then_gemini_takes_them_again(
    simulator: Any, client: genai.Client
) -> None:
    simulator.control.refuse_creates(403, count=2)

    codes = [refused(client, inline(f"# {n}")).code for n in range(2)]
    batch = create(client, inline("# 2"))

    assert codes == [403, 403]
    assert [b.name for b in client.batches.list()] == [batch.name]
    assert simulator.control.create_refusal_state() == {
        "status": None,
        "reason": None,
        "count": None,
        "refused": 2,
    }


def test_stopping_the_refusal_lets_the_same_create_through(
    simulator: Any, client: genai.Client
) -> None:
    simulator.control.refuse_creates(401)
    assert refused(client, inline("# a")).code == 401

    stopped = simulator.control.stop_refusing_creates()

    assert stopped == {"status": None, "reason": None, "count": None, "refused": 1}
    assert create(client, inline("# a")).name


def poisoned_line(index: int) -> str:
    field = f"batch.input_config.requests.requests[{index}].request.contents[0].parts[0].text"
    return (
        f"* BatchGenerateContentRequest.{field}: the text contains the marker 'POISON', "
        "which the simulator refuses.\n"
    )


def violations(*indexes: int) -> list[dict[str, Any]]:
    return [
        {
            "field": f"batch.input_config.requests.requests[{i}].request.contents[0].parts[0].text",
            "description": "the text contains the marker 'POISON', which the simulator refuses.",
        }
        for i in indexes
    ]


def bad_request(*indexes: int) -> dict[str, Any]:
    return {
        "error": {
            "code": 400,
            "message": "".join(poisoned_line(i) for i in indexes),
            "status": "INVALID_ARGUMENT",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.BadRequest",
                    "fieldViolations": violations(*indexes),
                }
            ],
        }
    }


PROMPTS = ("# a\nfine", "# b\nPOISON here", "# c\nfine", "# d\nmore POISON", "# e\nfine")


def test_a_poisoned_request_is_a_400_naming_each_poisoned_index(
    simulator: Any, client: genai.Client
) -> None:
    simulator.control.poison("POISON")

    error = refused(client, inline(*PROMPTS))

    assert (error.code, error.status) == (400, "INVALID_ARGUMENT")
    assert error.message == poisoned_line(1) + poisoned_line(3)
    assert error.details == bad_request(1, 3)
    assert nothing_created(client, simulator)
    assert simulator.control.poison_state() == {
        "marker": "POISON",
        "name_index": True,
        "refused": 1,
    }


def test_without_index_the_400_is_gemini_s_bare_invalid_argument(
    simulator: Any, client: genai.Client
) -> None:
    simulator.control.poison("POISON", name_index=False)

    error = refused(client, inline(*PROMPTS))

    assert error.details == {
        "error": {
            "code": 400,
            "message": "Request contains an invalid argument.",
            "status": "INVALID_ARGUMENT",
        }
    }
    assert nothing_created(client, simulator)
    assert simulator.control.poison_state()["refused"] == 1


def test_a_poisoned_line_of_an_input_file_is_named_by_its_index(
    simulator: Any, client: genai.Client
) -> None:
    lines = [
        {"key": f"docs/{i}.md", "request": {"contents": [{"parts": [{"text": p}], "role": "user"}]}}
        for i, p in enumerate(("# a", "# b", "# c POISON"))
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    uploaded = client.files.upload(
        file=io.BytesIO(data), config=types.UploadFileConfig(mime_type="jsonl")
    )
    simulator.control.poison("POISON")

    error = refused(client, uploaded.name)

    assert error.details == bad_request(2)
    assert nothing_created(client, simulator)


def test_clearing_the_poison_takes_the_same_batch(simulator: Any, client: genai.Client) -> None:
    simulator.control.poison("POISON")
    assert refused(client, inline(*PROMPTS)).code == 400

    cleared = simulator.control.clear_poison()

    assert cleared == {"marker": None, "name_index": True, "refused": 1}
    batch = create(client, inline(*PROMPTS))
    assert [b.name for b in client.batches.list()] == [batch.name]


def test_a_reset_between_tests_clears_both(simulator: Any, client: genai.Client) -> None:
    simulator.control.refuse_creates(403)
    simulator.control.poison("POISON")
    assert refused(client, inline("POISON")).code == 403  # the caller is refused first

    simulator.control.reset()

    assert create(client, inline("POISON")).name
    assert simulator.control.create_refusal_state()["refused"] == 0
    assert simulator.control.poison_state() == {"marker": None, "name_index": True, "refused": 0}
