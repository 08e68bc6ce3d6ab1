"""What a batch create sends: its inline requests and its job config (with its priority).

`GeminiGateway.create_batch` (shared/gemini/client.py) sends these; the request bodies and
an input file's lines are built in shared/gemini/rows.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from google.genai import types

from shared.gemini.raw import DEFAULT_PRIORITY, with_priority

# The `webhook_config.user_metadata` key naming the job in hookledger's own terms (its tag,
# the display name): Gemini includes the user metadata in every event of the job.
HOOKLEDGER_ID = "hookledger_id"


def inline_requests(
    requests: Sequence[tuple[str, str]], generation_config: Mapping[str, Any] | None
) -> list[types.InlinedRequest]:
    """One inline request per (key, prompt), each with `generation_config` when given."""
    # The SDK's models take the REST (camelCase) names too; it sends them back as
    # `request.generationConfig`, as the file line (rows.file_line) spells it.
    config = (
        types.GenerateContentConfig.model_validate(dict(generation_config))
        if generation_config
        else None
    )
    return [
        types.InlinedRequest(
            contents=[types.Content(role="user", parts=[types.Part(text=prompt)])],
            metadata={"key": key},
            config=config,
        )
        for key, prompt in requests
    ]


def create_config(
    display_name: str, webhook_uris: Sequence[str], priority: int = DEFAULT_PRIORITY
) -> types.CreateBatchJobConfig:
    """The create's config: `display_name`, the job's `webhook_config` (its tag as user
    metadata, `webhook_uris` if any), a single attempt, and Gemini's `batch.priority`
    unless it is the default (the SDK's config has no such field: raw.py sends it)."""
    # Creating is not idempotent: a blind retry could make a second batch.
    # The caller's retry goes through the submission guard instead.
    options = types.HttpOptions(retry_options=types.HttpRetryOptions(attempts=1))
    return types.CreateBatchJobConfig(
        display_name=display_name,
        webhook_config=types.WebhookConfig(
            uris=list(webhook_uris) or None,
            user_metadata={HOOKLEDGER_ID: display_name},
        ),
        http_options=with_priority(options, priority),
    )
