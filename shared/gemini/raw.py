"""The one place hookledger reaches into google-genai's private API client and request layout.

Why it exists: the SDK drops fields hookledger must read. `batches.get` maps only the
fields its `_BatchJob_from_mldev` names, so a failed batch's top-level `error` (the
reason) and `metadata.batchStats` never reach `types.BatchJob`; generic operations and
interactions have no typed getter that keeps their raw body. No public SDK call returns a
resource as sent (checked against google-genai 3.x: `HttpOptions` and `GetBatchJobConfig`
have no "return the raw body" switch), so this module sends the GET through the client's
own transport (auth, base URL, timeout, retry options) with `Client._api_client.request`,
and `batch_job` maps a batch's body to the SDK's typed job as `batches.get` does: one GET
gives both (a second GET per batch was a second Gemini request on every settlement).

The contract relied on, pinned by the SDK's major in pyproject.toml and checked by
tests/unit/test_gemini_raw_contract.py (which fails with `SdkContractError`'s message
when a release changes it):

    client._api_client.request(http_method, path, request_dict, http_options)
        -> an object with `.body` (str, the JSON text as sent)
    google.genai.batches._BatchJob_from_mldev(body) -> the dict `types.BatchJob` reads

The SDK also lacks a field hookledger must send: Gemini's `batch.priority` (the REST
reference of `models.batchGenerateContent`, `GenerateContentBatch.priority`: "Optional.
The priority of the batch. Batches with a higher priority value will be processed before
batches with a lower priority value. Negative values are allowed. Default is 0", an int64,
so a JSON string) is not in `CreateBatchJobConfig`. `with_priority` sends it through the
public `HttpOptions.extra_body`, relying on the SDK's private request layout:

    HttpOptions.extra_body is merged into the body `batches.create` built, whose batch
    is under "batch" (`_CreateBatchJobParameters_to_mldev`): {"batch": {"priority": "N"}}
    lands beside `displayName`, `inputConfig` and `webhookConfig`

checked by `check_contract` (the field) and by the contract test, which sends a create
through the real SDK to a recording transport and reads the body.

Nothing outside this module may touch `_api_client` (docs/gemini-coverage.md).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from google import genai
from google.genai import batches as sdk_batches
from google.genai import types

from shared.errors import ConfigError

# The google-genai major this adapter was written against; pyproject.toml pins the same.
SDK_MAJOR = 3
_REQUEST_PARAMETERS = ("http_method", "path", "request_dict", "http_options")
# What `batches.get` maps a Gemini API batch's JSON with (google-genai 3.x batches.py).
_BATCH_MAPPER = "_BatchJob_from_mldev"
# Gemini's default, and what a create that names none gets.
DEFAULT_PRIORITY = 0
# `batch.priority` is an int64 (the REST reference): its range.
PRIORITY_MIN, PRIORITY_MAX = -(2**63), 2**63 - 1
# The API version whose REST reference documents `batch.priority` (its endpoint is
# `v1beta/{batch.model=models/*}:batchGenerateContent`); google-genai 3.x defaults to v1,
# and Google's front end refuses a field its version does not know ("Unknown name").
PRIORITY_API_VERSION = "v1beta"
# How Google's front end names a refused `batch.priority`: an unknown field, or a bad value.
_PRIORITY_REFUSED = re.compile(r"Unknown name \\?\"priority\\?\"|'batch\.priority'")


class SdkContractError(ConfigError):
    """The installed google-genai no longer offers the private call this module uses."""


def check_contract(client: genai.Client) -> None:
    """Raise `SdkContractError`, naming what changed, unless the private call still exists."""
    api = getattr(client, "_api_client", None)
    if api is None:
        raise SdkContractError(
            "google-genai: genai.Client has no `_api_client` any more; "
            "shared/gemini/raw.py must find another way to read raw resources"
        )
    request = getattr(api, "request", None)
    if not callable(request):
        raise SdkContractError(
            "google-genai: `Client._api_client.request` is gone; "
            "shared/gemini/raw.py must find another way to read raw resources"
        )
    names = tuple(inspect.signature(request).parameters)[: len(_REQUEST_PARAMETERS)]
    if names != _REQUEST_PARAMETERS:
        raise SdkContractError(
            f"google-genai: `Client._api_client.request` now takes {names}, "
            f"shared/gemini/raw.py calls it with {_REQUEST_PARAMETERS}"
        )
    _batch_mapper()
    if "extra_body" not in types.HttpOptions.model_fields:
        raise SdkContractError(
            "google-genai: `HttpOptions.extra_body` is gone; shared/gemini/raw.py must find "
            "another way to send a batch's `priority`"
        )


def checked_priority(priority: object) -> int:
    """`priority` when it is a whole number within int64, as Gemini takes it; else
    `ValueError` naming the value (a caller's mistake, seen before anything is sent)."""
    if type(priority) is not int or not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise ValueError(
            f"a batch's priority must be a whole number from {PRIORITY_MIN} to {PRIORITY_MAX} "
            f"(Gemini's int64 `batch.priority`), got {priority!r}"
        )
    return priority


def with_priority(options: types.HttpOptions, priority: int) -> types.HttpOptions:
    """`options` for a `batches.create` that also sends `batch.priority` = `priority`,
    to the API version that documents it (PRIORITY_API_VERSION). The default priority
    changes nothing: the create sends what it sent before this field existed."""
    if checked_priority(priority) == DEFAULT_PRIORITY:
        return options
    extra = dict(options.extra_body or {})
    batch = dict(extra.get("batch") or {})
    batch["priority"] = str(priority)  # an int64: JSON carries it as a string
    extra["batch"] = batch
    return options.model_copy(update={"extra_body": extra, "api_version": PRIORITY_API_VERSION})


def refuses_priority(message: str) -> bool:
    """True when a 400's message names `batch.priority` (an unknown field, or a bad value)."""
    return _PRIORITY_REFUSED.search(message) is not None


def get_body(client: genai.Client, path: str) -> str:
    """The body of `GET {base}/{version}/{path}` as Gemini sent it ("" when empty).

    Errors are the SDK's own (`google.genai.errors.APIError`, httpx errors): the caller
    maps them. Whether the private call still exists is `check_contract`'s to say.
    """
    response: Any = client._api_client.request("get", path, {}, None)
    body = getattr(response, "body", None)
    if body is not None and not isinstance(body, str):
        raise SdkContractError(
            f"google-genai: the raw response's `.body` is {type(body).__name__}, not str"
        )
    return body or ""


def batch_job(body: dict[str, Any]) -> types.BatchJob:
    """The SDK's typed batch from a Gemini API batch's raw JSON, mapped as `batches.get`
    maps it. A body the SDK's types refuse raises pydantic's `ValidationError` (a
    `ValueError`): the caller maps it."""
    return types.BatchJob._from_response(response=_batch_mapper()(body), kwargs={})


def _batch_mapper() -> Any:
    """The SDK's mapper of a batch's JSON; SdkContractError when a release dropped it."""
    mapper = getattr(sdk_batches, _BATCH_MAPPER, None)
    if not callable(mapper):
        raise SdkContractError(
            f"google-genai: `google.genai.batches.{_BATCH_MAPPER}` is gone; "
            "shared/gemini/raw.py must find another way to map a batch's raw JSON"
        )
    return mapper
