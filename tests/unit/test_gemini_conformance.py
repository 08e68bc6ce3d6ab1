"""Pure logic against the published Gemini API: event ids, interaction statuses, video
safety filtering, and the error model (408/429/5xx, RetryInfo, QuotaFailure)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from google.genai import errors as genai_errors

from shared.errors import retryable
from shared.gemini import (
    DAILY_QUOTA_DEFER_S,
    INTERACTION_STATES,
    GeminiGateway,
    GeminiNotFound,
    GeminiRateLimited,
    GeminiRefusedDeployment,
    GeminiRejected,
    GeminiUnavailable,
    rate_limit_details,
    sdk_retry_options,
)
from shared.gemini.errors import SPEND_QUOTA_DEFER_S, mapped
from shared.handlers.builtin import DOCUMENTED_EVENTS, candidate_names


def quota_body(retry_delay: str | None, quota_id: str) -> dict[str, Any]:
    """A 429 body as Gemini sends it: QuotaFailure, Help and (optionally) RetryInfo."""
    details: list[dict[str, Any]] = [
        {
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            "violations": [
                {
                    "quotaMetric": "generativelanguage.googleapis.com/generate_requests_per_model",
                    "quotaId": quota_id,
                }
            ],
        },
        {"@type": "type.googleapis.com/google.rpc.Help", "links": []},
    ]
    if retry_delay is not None:
        details.append(
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}
        )
    return {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "quota",
            "details": details,
        }
    }


# ------------------------------------------------------------------ data.id forms


@pytest.mark.parametrize(
    ("name", "data_id", "event", "expected"),
    [
        ("full batch name", "batches/abc", "batch.succeeded", ["batches/abc"]),
        ("bare batch id", "abc", "batch.failed", ["batches/abc", "abc"]),
        (
            "documented batch_123456 form",
            "batch_123456",
            "batch.succeeded",
            ["batches/batch_123456", "batch_123456", "batches/123456", "123456"],
        ),
        ("bare interaction id", "i1", "interaction.completed", ["interactions/i1", "i1"]),
        (
            "full video operation",
            "models/veo/operations/v1",
            "video.generated",
            ["models/veo/operations/v1"],
        ),
        ("bare video id: last segment", "v1", "video.generated", ["v1"]),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_every_data_id_form_names_its_ledger_candidates(name, data_id, event, expected):
    assert candidate_names(data_id, event) == expected, name


def test_the_default_events_are_the_api_references_seven_without_cancelled():
    assert set(DOCUMENTED_EVENTS) == {
        "batch.succeeded",
        "batch.expired",
        "batch.failed",
        "interaction.requires_action",
        "interaction.completed",
        "interaction.failed",
        "video.generated",
    }


# ------------------------------------------------------------------ interactions


class _Interaction:
    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body

    def model_dump(self, **_: Any) -> dict[str, Any]:
        return dict(self._body)


def gateway_reporting(body: dict[str, Any]) -> GeminiGateway:
    """A gateway whose SDK client's `interactions.get` answers `body` (the SDK's edge)."""

    def get(id: str) -> _Interaction:
        # The SDK takes the bare interaction id, not the `interactions/…` name.
        assert "/" not in id
        return _Interaction({"id": id, **body})

    client = SimpleNamespace(interactions=SimpleNamespace(get=get))
    return GeminiGateway(client)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "terminal", "error", "waits"),
    [
        ("completed", "succeeded", None, None),
        ("incomplete", "succeeded", None, None),
        ("failed", "failed", "tool crashed; quota gone", None),
        ("budget_exceeded", "failed", "interaction ended budget_exceeded", None),
        ("cancelled", "cancelled", "interaction ended cancelled", None),
        ("in_progress", None, None, None),
        ("queued", None, None, None),
        ("requires_action", None, None, "tool result"),
        ("requires_continuation", None, None, "continuation"),
        ("idle", None, None, "new turn"),
        ("some_future_status", None, None, None),
    ],
)
def test_every_interaction_status_is_mapped_deliberately(status, terminal, error, waits):
    body: dict[str, Any] = {"status": status}
    if status == "failed":
        body["errors"] = [
            {"code": 13, "message": "tool crashed"},
            {"code": 8, "message": "quota gone"},
        ]
    result = gateway_reporting(body).fetch("interactions/i-1")
    assert result.terminal_status == terminal, status
    assert (result.error or {}).get("message") == error, status
    assert (waits or "") in (result.waits_for or ""), status
    assert (result.waits_for is None) == (waits is None), status


@pytest.mark.parametrize(
    ("status", "outcome"), [("completed", {}), ("incomplete", {"incomplete": True})]
)
def test_a_completed_interactions_output_is_its_one_row(status, outcome):
    result = gateway_reporting({"status": status, "output_text": "the answer so far"}).fetch(
        "interactions/i-1"
    )
    assert [(row.key, row.text, row.error) for row in result.rows] == [
        ("interactions/i-1", "the answer so far", None)
    ], status
    assert result.outcome == outcome, status


def test_every_documented_interaction_status_has_a_mapping():
    documented = {
        "in_progress",
        "requires_action",
        "completed",
        "failed",
        "cancelled",
        "incomplete",
        "budget_exceeded",
        "queued",
        "idle",
        "requires_continuation",
    }
    assert set(INTERACTION_STATES) == documented


# ------------------------------------------------------------------ video


class _RawGateway(GeminiGateway):
    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body

    def _raw(self, name: str) -> dict[str, Any]:
        return self._body


def test_a_video_whose_samples_were_all_filtered_settles_failed_with_the_reasons():
    body = {
        "name": "models/veo/operations/v1",
        "done": True,
        "response": {
            "generateVideoResponse": {
                "raiMediaFilteredCount": 1,
                "raiMediaFilteredReasons": ["The video violated the usage guidelines."],
            }
        },
    }
    result = _RawGateway(body).fetch("models/veo/operations/v1")
    assert result.terminal_status == "failed"
    assert "violated the usage guidelines" in result.error["message"]  # type: ignore[index]
    assert result.error["rai_media_filtered_count"] == 1  # type: ignore[index]


def test_a_video_with_samples_succeeds_even_if_some_were_filtered():
    body = {
        "done": True,
        "response": {
            "generateVideoResponse": {
                "generatedSamples": [{"video": {"uri": "files/v"}}],
                "raiMediaFilteredCount": 1,
            }
        },
    }
    assert _RawGateway(body).fetch("models/veo/operations/v2").terminal_status == "succeeded"


# ------------------------------------------------------------------ errors


def raised(exc: Exception) -> BaseException:
    with pytest.raises(Exception) as info, mapped("batches/x"):
        raise exc
    return info.value


def api_error(code: int, body: dict[str, Any] | None = None) -> genai_errors.APIError:
    body = body or {"error": {"code": code, "message": f"answer {code}", "status": "X"}}
    return genai_errors.APIError(code, body)


@pytest.mark.parametrize(
    ("code", "kind", "is_retryable"),
    [
        (400, GeminiRejected, False),
        (401, GeminiRefusedDeployment, False),
        (403, GeminiRefusedDeployment, False),
        (404, GeminiNotFound, False),
        (408, GeminiUnavailable, True),
        (429, GeminiRateLimited, True),
        (500, GeminiUnavailable, True),
        (502, GeminiUnavailable, True),
        (503, GeminiUnavailable, True),
        (504, GeminiUnavailable, True),
    ],
)
def test_each_http_error_maps_to_its_place_in_the_tree(code, kind, is_retryable):
    error = raised(api_error(code))
    assert type(error) is kind, code
    assert retryable(error) is is_retryable, code
    assert "batches/x" in str(error)


def test_the_interactions_clients_errors_are_mapped_too():
    class APIStatusError(Exception):  # the shape google.genai._interactions raises
        def __init__(self, status_code: int, body: Any) -> None:
            super().__init__(f"status {status_code}")
            self.status_code = status_code
            self.body = body

    error = raised(
        APIStatusError(429, quota_body("7s", "GenerateRequestsPerMinutePerProjectPerModel"))
    )
    assert isinstance(error, GeminiRateLimited) and error.retry_after_s == 7.0
    assert isinstance(raised(APIStatusError(408, {})), GeminiUnavailable)
    assert isinstance(raised(APIStatusError(404, {})), GeminiNotFound)


def test_a_429_carries_retry_delay_and_quota_ids():
    error = raised(
        api_error(429, quota_body("120s", "GenerateRequestsPerMinutePerProjectPerModel"))
    )
    assert isinstance(error, GeminiRateLimited)
    assert error.retry_after_s == 120.0
    assert error.quota_ids == ("GenerateRequestsPerMinutePerProjectPerModel",)
    assert not error.daily_quota and error.defer_s == 120.0


def test_a_per_day_quota_defers_at_least_an_hour():
    error = raised(api_error(429, quota_body("30s", "GenerateRequestsPerDayPerProjectPerModel")))
    assert isinstance(error, GeminiRateLimited)
    assert error.daily_quota and error.defer_s == DAILY_QUOTA_DEFER_S


def test_a_429_without_details_leaves_the_delay_to_backoff():
    error = raised(api_error(429))
    assert isinstance(error, GeminiRateLimited) and error.defer_s is None


@pytest.mark.parametrize("delay", ["1.5s", "0s", "120s"])
def test_retry_delay_durations_parse(delay):
    assert rate_limit_details(quota_body(delay, "q"))[0] == float(delay[:-1])


@pytest.mark.parametrize(
    "body", [None, {}, {"error": "x"}, {"error": {"details": "x"}}, quota_body("soon", "q")]
)
def test_malformed_error_bodies_give_no_delay(body):
    assert rate_limit_details(body)[0] is None


# ------------------------------------------------------------------ quota kinds and SDK retries

# QuotaFailure violations as the published 429 examples carry them, and spend limits.
QUOTA_CASES = [
    ("requests per minute", "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "per_minute"),
    (
        "input tokens per minute, paid tier",
        "GenerateContentPaidTierInputTokensPerModelPerMinute-PaidTier2",
        "per_minute",
    ),
    ("requests per day", "GenerateRequestsPerDayPerProjectPerModel-FreeTier", "per_day"),
    # The docs publish no spend quota id: an illustrative one naming spend.
    ("spend limit", "GenerateContentSpendPerBillingAccountPerTenMinutes", "spend"),
    ("a quota nobody documented", "SomethingNew", "unknown"),
]


@pytest.mark.parametrize(("name", "quota_id", "kind"), QUOTA_CASES)
def test_every_published_quota_kind_is_classified_and_its_retry_delay_kept(name, quota_id, kind):
    error = raised(api_error(429, quota_body("45s", quota_id)))
    assert isinstance(error, GeminiRateLimited), name
    assert error.quota_kind == kind, name
    assert error.defer_s is not None and error.defer_s >= 45.0, name  # RetryInfo honoured


def test_a_spend_limit_without_quota_details_is_recognised_by_its_message():
    body = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "Your prepayment credits are depleted.",
        }
    }
    error = raised(api_error(429, body))
    assert isinstance(error, GeminiRateLimited) and error.quota_kind == "spend"
    assert error.defer_s == SPEND_QUOTA_DEFER_S


def test_the_usual_billing_hint_in_a_quota_message_is_not_a_spend_limit():
    body = quota_body("9s", "GenerateRequestsPerMinutePerProjectPerModel")
    body["error"]["message"] = (
        "You exceeded your current quota, please check your plan and billing details."
    )
    error = raised(api_error(429, body))
    assert isinstance(error, GeminiRateLimited) and error.quota_kind == "per_minute"
    assert error.defer_s == 9.0


@pytest.mark.parametrize(
    ("timeout_s", "deadline_s", "attempts"),
    [
        (30.0, 30.0, 3),
        (5.0, 30.0, 3),
        (10.0, 30.0, 5),
        (2.0, 7.0, 3),
        (5.0, 12.0, 3),
        (1.0, 60.0, 3),
    ],
)
def test_the_sdks_retries_fit_the_callers_deadline(timeout_s, deadline_s, attempts):
    options = sdk_retry_options(timeout_s, deadline_s, attempts)
    n, wait = options.attempts or 1, options.max_delay or 0.0
    # Each SDK wait is capped by max_delay: n attempts and n − 1 waits, worst case.
    assert n == 1 or n * timeout_s + (n - 1) * wait <= deadline_s + 1e-9
    assert 1 <= n <= attempts
    assert 429 not in (options.http_status_codes or [])  # 429's delay is ours to honour


def test_the_default_deadline_leaves_one_attempt_and_a_short_timeout_keeps_three():
    assert sdk_retry_options(30.0, 30.0).attempts == 1
    assert sdk_retry_options(5.0, 30.0).attempts == 3
