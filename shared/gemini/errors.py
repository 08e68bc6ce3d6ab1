"""Gemini's errors, and how google-genai's and httpx's errors map onto them (shared/errors.py).

    GeminiError
    ├── GeminiUnavailable   timeout, connection error, 408, 429 or 5xx: leave pending, retry later
    │   ├── GeminiRateLimited   429: `retry_after_s` from RetryInfo, `quota_ids` from QuotaFailure,
    │   │                       `quota_kind` per_minute | per_day | spend | unknown
    │   └── GeminiRowsUnread    a terminal batch's result rows could not all be read
    ├── GeminiNotFound      404: the operation does not exist (yet, or any more)
    └── GeminiRejected      any other 4xx: `status`, `reason` (ErrorInfo), and the batch
        │                   requests it names (`request_indices`, from `requests[i]`)
        └── GeminiRefusedDeployment   the deployment, not the request: 401, 403 (billing,
                                      permission) or an API key refused (400 API_KEY_*)

`mapped(what)` is the context manager every Gemini call runs in; messages name `what`.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any, Literal

from google.genai import errors as genai_errors

from shared.errors import HookledgerError, PermanentError, TransientError
from shared.retry import retryable_status


def _transport_errors() -> tuple[type[BaseException], ...]:
    # The SDK speaks through httpx or its fork httpx2, whichever is installed.
    found: list[type[BaseException]] = [TimeoutError, ConnectionError]
    for module in ("httpx", "httpx2"):
        try:
            found.append(importlib.import_module(module).HTTPError)
        except (ImportError, AttributeError):
            continue
    return tuple(found)


_TRANSPORT_ERRORS = _transport_errors()


class GeminiError(HookledgerError):
    """Base of the Gemini gateway's errors; messages name the operation."""


class GeminiUnavailable(GeminiError, TransientError):
    """Transient: a later poll may succeed."""


class GeminiRowsUnread(GeminiUnavailable):
    """A terminal batch's results could not all be read (e.g. its results file): retry later."""


class GeminiNotFound(GeminiError, PermanentError):
    """Gemini does not know the operation. `recheck_after_s`, when set, is how long until
    a second 404 would settle it `gone` (shared/settlement/settler.py): check again no sooner."""

    def __init__(self, message: str, *, recheck_after_s: float | None = None) -> None:
        super().__init__(message)
        self.recheck_after_s = recheck_after_s


class GeminiRejected(GeminiError, PermanentError):
    """Gemini refused the request (4xx other than 404 and 429). `status` is the HTTP
    status, `reason` the `google.rpc.ErrorInfo` reason (e.g. `API_KEY_INVALID`), and
    `request_indices` the indices of a batch's requests the answer names as invalid
    (`…requests[3]…` in its message or its `BadRequest` field violations), empty when it
    names none."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str | None = None,
        request_indices: Sequence[int] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.request_indices = tuple(sorted(set(request_indices)))


class GeminiRefusedDeployment(GeminiRejected):
    """Gemini refused the deployment, whatever the request: its key, billing or permission
    (401, 403, or a 400 whose ErrorInfo reason is an API key's). Fixed by an operator, not
    by changing the request: work waits for it rather than failing."""


# ErrorInfo reasons of a 400 that is about the key, not the request (Gemini
# "Troubleshooting": an invalid key is 400 INVALID_ARGUMENT with reason API_KEY_INVALID).
_KEY_REASONS = frozenset({"API_KEY_INVALID", "API_KEY_EXPIRED", "API_KEY_SERVICE_BLOCKED"})
# How Google APIs name a batch's bad request: `…requests[3].request.contents…`.
_REQUEST_INDEX = re.compile(r"requests\[(\d+)\]")


# Seconds to wait before re-reading after a per-day quota ran out: it resets daily, so an
# hour keeps the checks sparse without holding an operation back for a whole day.
DAILY_QUOTA_DEFER_S = 3600.0
# Spend-based limits are evaluated over a rolling 10-minute window (Gemini "Rate limits",
# spend-based limits): wait that long at least.
SPEND_QUOTA_DEFER_S = 600.0

PER_MINUTE = "per_minute"
PER_DAY = "per_day"
SPEND = "spend"
UNKNOWN_QUOTA = "unknown"
# Words in a QuotaFailure violation's `quotaId`/`quotaMetric` that name a spend or billing
# limit, and in a 429's message (every quota message says "check your plan and billing
# details", so the message needs the spend words themselves: spend-based limits, prepay
# credits depleted).
_SPEND_WORDS = ("spend", "billing", "cost", "credit", "prepay")
_SPEND_MESSAGE_WORDS = ("spend", "credits are depleted", "prepayment credits")


def quota_kind(quota_ids: Sequence[str], metrics: Sequence[str] = (), message: str = "") -> str:
    """Which limit a 429 hit, from its QuotaFailure violations (the published examples'
    ids: `GenerateRequestsPerMinutePerProjectPerModel[-FreeTier]`,
    `GenerateContent[PaidTier]InputTokensPerModelPerMinute-…`,
    `GenerateRequestsPerDayPerProjectPerModel[-FreeTier]`), else its message: a per-day
    quota wins over a per-minute one (it lasts longer), a spend limit over both."""
    names = [q.lower() for q in (*quota_ids, *metrics)]
    if any(word in name for name in names for word in _SPEND_WORDS):
        return SPEND
    if any("perday" in name for name in names):
        return PER_DAY
    if any("perminute" in name for name in names):
        return PER_MINUTE
    text = message.lower()
    if any(word in text for word in _SPEND_MESSAGE_WORDS):
        return SPEND
    return UNKNOWN_QUOTA


class GeminiRateLimited(GeminiUnavailable):
    """429: Gemini's quota ran out. `retry_after_s` is its `RetryInfo.retryDelay` (None
    when absent); `quota_ids` the `QuotaFailure` violations' `quotaId`s; `quota_kind`
    which limit it was (`quota_kind()`)."""

    def __init__(
        self,
        message: str,
        *,
        retry_after_s: float | None = None,
        quota_ids: Sequence[str] = (),
        quota_kind: str = UNKNOWN_QUOTA,
    ) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.quota_ids = tuple(quota_ids)
        self.quota_kind = quota_kind

    @property
    def daily_quota(self) -> bool:
        """A per-day quota (e.g. `GenerateRequestsPerDayPerProjectPerModel`) ran out."""
        return self.quota_kind == PER_DAY

    @property
    def defer_s(self) -> float | None:
        """How long to leave the operation alone: RetryInfo's delay, whatever the kind; at
        least an hour for a per-day quota and ten minutes for a spend limit; None when
        Gemini gave no delay for a per-minute or unknown quota (backoff decides)."""
        floor = {PER_DAY: DAILY_QUOTA_DEFER_S, SPEND: SPEND_QUOTA_DEFER_S}.get(self.quota_kind)
        if floor is not None:
            return max(self.retry_after_s or 0.0, floor)
        return self.retry_after_s


def _duration_s(value: Any) -> float | None:
    """A google.protobuf.Duration as JSON (`"120s"`, `"1.5s"`) in seconds; None if not one."""
    if not isinstance(value, str) or not value.endswith("s"):
        return None
    try:
        seconds = float(value[:-1])
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def rate_limit_details(body: Any) -> tuple[float | None, tuple[str, ...]]:
    """`(RetryInfo.retryDelay in s, QuotaFailure quotaIds)` from a Gemini error body
    `{"error": {"details": [...]}}`; `(None, ())` where absent or malformed."""
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    delay: float | None = None
    quotas: list[str] = []
    for detail in details if isinstance(details, list) else []:
        if not isinstance(detail, dict):
            continue
        kind = str(detail.get("@type", ""))
        if kind.endswith("google.rpc.RetryInfo"):
            delay = _duration_s(detail.get("retryDelay"))
        elif kind.endswith("google.rpc.QuotaFailure"):
            for violation in detail.get("violations") or []:
                if isinstance(violation, dict) and violation.get("quotaId"):
                    quotas.append(str(violation["quotaId"]))
    return delay, tuple(quotas)


def _quota_metrics(body: Any) -> tuple[str, ...]:
    """The `quotaMetric`s of a 429 body's QuotaFailure violations."""
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    metrics: list[str] = []
    for detail in details if isinstance(details, list) else []:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("QuotaFailure"):
            for violation in detail.get("violations") or []:
                if isinstance(violation, dict) and violation.get("quotaMetric"):
                    metrics.append(str(violation["quotaMetric"]))
    return tuple(metrics)


def _details(body: Any) -> list[dict[str, Any]]:
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    return [d for d in details if isinstance(d, dict)] if isinstance(details, list) else []


def refusal_details(body: Any, message: str) -> tuple[str | None, tuple[int, ...]]:
    """`(ErrorInfo reason, indices of the batch requests named)` of a 4xx error body; the
    indices come from the message and from `BadRequest.fieldViolations[].field`."""
    reason: str | None = None
    texts = [message]
    for detail in _details(body):
        kind = str(detail.get("@type", ""))
        if kind.endswith("google.rpc.ErrorInfo") and detail.get("reason"):
            reason = str(detail["reason"])
        elif kind.endswith("google.rpc.BadRequest"):
            for violation in detail.get("fieldViolations") or []:
                if isinstance(violation, dict):
                    texts.append(str(violation.get("field", "")))
    indices = {int(found) for text in texts for found in _REQUEST_INDEX.findall(text)}
    return reason, tuple(sorted(indices))


def _status_error(what: str, code: int, message: str, body: Any) -> GeminiError:
    """The GeminiError for an HTTP error answer `code`, naming `what`."""
    text = f"{what}: Gemini answered {code}: {message}"
    if code == 404:
        return GeminiNotFound(text)
    if code == 429:
        delay, quotas = rate_limit_details(body)
        kind = quota_kind(quotas, _quota_metrics(body), message)
        return GeminiRateLimited(text, retry_after_s=delay, quota_ids=quotas, quota_kind=kind)
    if retryable_status(code):  # 408, any 5xx: the one policy (shared/retry.py)
        return GeminiUnavailable(text)
    reason, indices = refusal_details(body, message)
    if code in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN) or reason in _KEY_REASONS:
        return GeminiRefusedDeployment(text, status=code, reason=reason)
    return GeminiRejected(text, status=code, reason=reason, request_indices=indices)


class mapped:
    """Translate google-genai and httpx errors into the GeminiError tree, naming `what`.

    Both of the SDK's error families are read: `google.genai.errors.APIError` (`code`,
    `details` = the error body) and the Interactions/webhooks client's `APIStatusError`
    (`status_code`, `body`).
    """

    def __init__(self, what: str) -> None:
        self._what = what

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> Literal[False]:
        if exc is None or isinstance(exc, GeminiError) or not isinstance(exc, Exception):
            return False  # GeneratorExit and friends pass through untouched
        if isinstance(exc, genai_errors.APIError):
            raise _status_error(self._what, exc.code, str(exc.message), exc.details) from exc
        status_code = getattr(exc, "status_code", None)
        if isinstance(status_code, int) and not isinstance(status_code, bool):
            body = getattr(exc, "body", None)
            error = body.get("error") if isinstance(body, dict) else None
            message = error.get("message") if isinstance(error, dict) else None
            raise _status_error(self._what, status_code, str(message or exc), body) from exc
        if isinstance(exc, _TRANSPORT_ERRORS) or type(exc).__name__ in _SDK_TRANSPORT_ERRORS:
            raise GeminiUnavailable(f"{self._what}: {type(exc).__name__}: {exc}") from exc
        return False


# The Interactions client's own transport errors (it wraps httpx's).
_SDK_TRANSPORT_ERRORS = frozenset({"APIConnectionError", "APITimeoutError"})
