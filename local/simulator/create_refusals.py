"""Gemini refusing `batches.create` the ways the real API does, set through the control API
(`create_refusal_routes.py`): the deployment refused, or one poisoned request in a batch.

A refused deployment (`POST /_sim/gemini/create-refusal`): while set, every create is
answered, before its body is read (Google checks the caller first), with one of:

    status  reason                          message (details)
    403     CONSUMER_SUSPENDED (default)    Permission denied: Consumer 'api_key:KEY' has been
                                            suspended. (ErrorInfo, LocalizedMessage)
    403     SERVICE_DISABLED                Generative Language API has not been used in
                                            project N before or it is disabled. … (ErrorInfo,
                                            LocalizedMessage, Help)
    403     PERMISSION_DENIED               The caller does not have permission (none)
    401     ACCESS_TOKEN_TYPE_UNSUPPORTED   Request had invalid authentication credentials. …
            (default)                       (ErrorInfo)
    401     CREDENTIALS_MISSING             Request is missing required authentication
                                            credential. … (ErrorInfo)
    400     API_KEY_INVALID (default)       API key not valid. Please pass a valid API key.
                                            (ErrorInfo, LocalizedMessage)

the bodies as Gemini sends them (reports of real answers; the 400 is the documented
invalid-key answer), KEY the caller's `x-goog-api-key` (or `?key=`), N the simulator's
project number. `PERMISSION_DENIED` is no ErrorInfo reason: Gemini's "The caller does not
have permission" carries no details, the name only picks it. Only creates are refused: the
batches made before stay readable, so a test can still finish them.

A poisoned request (`POST /_sim/gemini/poison`): a create any of whose requests has a text
part containing the marker is Gemini's 400 INVALID_ARGUMENT naming each such request the
way Google APIs name a bad field, one line per request (its first poisoned part):

    * BatchGenerateContentRequest.batch.input_config.requests.requests[3].request.contents[0]
    .parts[0].text: <why>

(one line, no break), with a `google.rpc.BadRequest` detail holding one `fieldViolations`
entry per line. A batch from an uploaded JSONL file is named the same way, `requests[i]`
being the request's 0-based position in the file (blank lines skipped): the simulator's
choice, Gemini documents no field path for a file's lines. With `name_index` false the
400 is Gemini's bare "Request contains an invalid argument." with no details.

Nothing is created on a refusal; each refused create is counted (`refused`) until
`POST /_sim/reset`, which also turns both off. Settings are immutable values replaced whole
after validation, so a bad control body changes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from local.simulator.errors import BadRequest, SimError
from local.simulator.gemini import error_body

SERVICE = "generativelanguage.googleapis.com"
# The project the simulated key belongs to, as Google's answers name it (a made-up number).
PROJECT_NUMBER = "100000000001"
CONSUMER = f"projects/{PROJECT_NUMBER}"
ACTIVATION_URL = (
    f"https://console.developers.google.com/apis/api/{SERVICE}/overview?project={PROJECT_NUMBER}"
)
SIGN_IN_DOCS = "https://developers.google.com/identity/sign-in/web/devconsole-project"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
LOCALIZED_MESSAGE = "type.googleapis.com/google.rpc.LocalizedMessage"
HELP = "type.googleapis.com/google.rpc.Help"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
INVALID_ARGUMENT = "Request contains an invalid argument."
REQUESTS_FIELD = "batch.input_config.requests.requests"
MAX_COUNT = 1_000_000
MAX_MARKER_CHARS = 1_000


class RefusedCreate(SimError):
    """A `batches.create` Gemini refuses; `body` is its whole answer."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body["error"]["message"])
        self.status = body["error"]["code"]
        self.body = body


@dataclass(frozen=True)
class Caller:
    """What a refusal names: the caller's API key and the API version it called."""

    api_key: str
    version: str

    @property
    def method(self) -> str:
        return f"google.ai.generativelanguage.{self.version}.GenerativeService.BatchGenerateContent"


def _localized(message: str) -> dict[str, Any]:
    return {"@type": LOCALIZED_MESSAGE, "locale": "en-US", "message": message}


def _with_details(status: int, message: str, details: list[dict[str, Any]]) -> dict[str, Any]:
    body = error_body(status, message)
    if details:
        body["error"]["details"] = details
    return body


def _consumer_suspended(caller: Caller) -> dict[str, Any]:
    message = f"Permission denied: Consumer 'api_key:{caller.api_key}' has been suspended."
    info = {
        "@type": ERROR_INFO,
        "reason": "CONSUMER_SUSPENDED",
        "domain": "googleapis.com",
        "metadata": {
            "consumer": CONSUMER,
            "service": SERVICE,
            "containerInfo": f"api_key:{caller.api_key}",
        },
    }
    return _with_details(403, message, [info, _localized(message)])


def _service_disabled(_caller: Caller) -> dict[str, Any]:
    message = (
        f"Generative Language API has not been used in project {PROJECT_NUMBER} before or it "
        f"is disabled. Enable it by visiting {ACTIVATION_URL} then retry. If you enabled this "
        "API recently, wait a few minutes for the action to propagate to our systems and retry."
    )
    info = {
        "@type": ERROR_INFO,
        "reason": "SERVICE_DISABLED",
        "domain": "googleapis.com",
        "metadata": {
            "consumer": CONSUMER,
            "service": SERVICE,
            "activationUrl": ACTIVATION_URL,
            "serviceTitle": "Generative Language API",
            "containerInfo": PROJECT_NUMBER,
        },
    }
    links = [{"description": "Google developers console API activation", "url": ACTIVATION_URL}]
    return _with_details(403, message, [info, _localized(message), {"@type": HELP, "links": links}])


def _permission_denied(_caller: Caller) -> dict[str, Any]:
    return error_body(403, "The caller does not have permission")


def _unauthenticated(
    reason: str, opening: str, *, domain: bool
) -> Callable[[Caller], dict[str, Any]]:
    message = (
        f"{opening} Expected OAuth 2 access token, login cookie or other valid authentication "
        f"credential. See {SIGN_IN_DOCS}."
    )

    def body(caller: Caller) -> dict[str, Any]:
        info: dict[str, Any] = {"@type": ERROR_INFO, "reason": reason}
        if domain:
            info["domain"] = "googleapis.com"
        info["metadata"] = {"method": caller.method, "service": SERVICE}
        return _with_details(401, message, [info])

    return body


def _api_key_invalid(_caller: Caller) -> dict[str, Any]:
    message = "API key not valid. Please pass a valid API key."
    info = {
        "@type": ERROR_INFO,
        "reason": "API_KEY_INVALID",
        "domain": "googleapis.com",
        "metadata": {"service": SERVICE},
    }
    return _with_details(400, message, [info, _localized(message)])


# Per status, its reasons (the first is the default) and the body each answers.
REFUSALS: dict[int, dict[str, Callable[[Caller], dict[str, Any]]]] = {
    403: {
        "CONSUMER_SUSPENDED": _consumer_suspended,
        "SERVICE_DISABLED": _service_disabled,
        "PERMISSION_DENIED": _permission_denied,
    },
    401: {
        "ACCESS_TOKEN_TYPE_UNSUPPORTED": _unauthenticated(
            "ACCESS_TOKEN_TYPE_UNSUPPORTED",
            "Request had invalid authentication credentials.",
            domain=False,  # as real answers show it: an ErrorInfo without a domain
        ),
        "CREDENTIALS_MISSING": _unauthenticated(
            "CREDENTIALS_MISSING",
            "Request is missing required authentication credential.",
            domain=True,
        ),
    },
    400: {"API_KEY_INVALID": _api_key_invalid},
}
REFUSAL_KEYS = ("status", "reason", "count")
POISON_KEYS = ("marker", "name_index")


def refusal_body(status: int, reason: str, caller: Caller) -> dict[str, Any]:
    """The whole answer of a create refused with `status` for `reason` (REFUSALS)."""
    return REFUSALS[status][reason](caller)


@dataclass(frozen=True)
class Refusal:
    """The deployment refused: every create answers `status` for `reason`, `left` more
    times (None: until stopped)."""

    status: int
    reason: str
    left: int | None


@dataclass(frozen=True)
class Poison:
    """Requests whose text holds `marker` are refused, named by index when `name_index`."""

    marker: str
    name_index: bool


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _unknown(body: dict[str, Any], known: tuple[str, ...], what: str) -> None:
    unknown = sorted(set(body) - set(known))
    if unknown:
        raise BadRequest(f"Unknown {what} keys {unknown}; known keys: {list(known)}.")


def parse_refusal(body: dict[str, Any]) -> Refusal | None:
    """The `Refusal` a `POST /_sim/gemini/create-refusal` body sets (None: stop), or
    `BadRequest` naming the bad key."""
    _unknown(body, REFUSAL_KEYS, "create-refusal")
    statuses = sorted(REFUSALS)
    if "status" not in body:
        raise BadRequest(f"status is required: one of {statuses}, or null to stop refusing.")
    status = body["status"]
    if status is None:
        for key in ("reason", "count"):
            if body.get(key) is not None:
                raise BadRequest(f"{key} applies only with a status; null stops refusing.")
        return None
    if not _is_int(status) or status not in REFUSALS:
        raise BadRequest(f"status must be one of {statuses} or null, got {status!r}.")
    reasons = list(REFUSALS[status])
    reason = body.get("reason")
    if reason is None:
        reason = reasons[0]
    elif reason not in reasons:
        raise BadRequest(f"reason for status {status} must be one of {reasons}, got {reason!r}.")
    count = body.get("count")
    if count is not None and (not _is_int(count) or not 1 <= count <= MAX_COUNT):
        raise BadRequest(
            f"count must be null (until stopped) or a whole number 1..{MAX_COUNT}, got {count!r}."
        )
    return Refusal(status, reason, count)


def parse_poison(body: dict[str, Any]) -> Poison | None:
    """The `Poison` a `POST /_sim/gemini/poison` body sets (None: clear), or `BadRequest`
    naming the bad key."""
    _unknown(body, POISON_KEYS, "poison")
    if "marker" not in body:
        raise BadRequest("marker is required: the text that poisons a request, or null to clear.")
    marker = body["marker"]
    name_index = body.get("name_index")
    if marker is None:
        if name_index is not None:
            raise BadRequest("name_index applies only with a marker; null clears the poison.")
        return None
    if not isinstance(marker, str) or not marker.strip() or len(marker) > MAX_MARKER_CHARS:
        raise BadRequest(
            f"marker must be a non-blank string of at most {MAX_MARKER_CHARS} characters, "
            f"got {marker!r:.80}."
        )
    if name_index is None:
        name_index = True
    if not isinstance(name_index, bool):
        raise BadRequest(f"name_index must be true or false, got {name_index!r}.")
    return Poison(marker, name_index)


def poisoned_parts(requests: list[dict[str, Any]], marker: str) -> list[tuple[int, int, int]]:
    """(request, content, part) of the first text part holding `marker`, per request that
    has one, in request order."""
    found = []
    for index, item in enumerate(requests):
        contents = (item.get("request") or {}).get("contents") or []
        hit = next(
            (
                (index, c, p)
                for c, content in enumerate(contents)
                if isinstance(content, dict)
                for p, part in enumerate(content.get("parts") or [])
                if isinstance(part, dict)
                and isinstance(part.get("text"), str)
                and marker in part["text"]
            ),
            None,
        )
        if hit is not None:
            found.append(hit)
    return found


def poison_body(hits: list[tuple[int, int, int]], poison: Poison) -> dict[str, Any]:
    """Gemini's 400 for the poisoned parts `hits` (`poisoned_parts`)."""
    if not poison.name_index:
        return error_body(400, INVALID_ARGUMENT)
    why = f"the text contains the marker {poison.marker!r}, which the simulator refuses."
    fields = [f"{REQUESTS_FIELD}[{r}].request.contents[{c}].parts[{p}].text" for r, c, p in hits]
    message = "".join(f"* BatchGenerateContentRequest.{field}: {why}\n" for field in fields)
    violations = [{"field": field, "description": why} for field in fields]
    return _with_details(400, message, [{"@type": BAD_REQUEST, "fieldViolations": violations}])


class CreateRefusals:
    """The current `Refusal` and `Poison` and how many creates each refused; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._refusal: Refusal | None = None
            self._poison: Poison | None = None
            self._refused_deployment = 0
            self._refused_poison = 0

    def set_refusal(self, body: dict[str, Any]) -> dict[str, Any]:
        """Apply a `POST /_sim/gemini/create-refusal` body (a bad one changes nothing)."""
        refusal = parse_refusal(body)
        with self._lock:
            self._refusal = refusal
        return self.refusal_report()

    def refusal_report(self) -> dict[str, Any]:
        """`{"status", "reason", "count" (left; null: until stopped), "refused"}`."""
        with self._lock:
            refusal, refused = self._refusal, self._refused_deployment
        if refusal is None:
            return {"status": None, "reason": None, "count": None, "refused": refused}
        return {
            "status": refusal.status,
            "reason": refusal.reason,
            "count": refusal.left,
            "refused": refused,
        }

    def set_poison(self, body: dict[str, Any]) -> dict[str, Any]:
        """Apply a `POST /_sim/gemini/poison` body (a bad one changes nothing)."""
        poison = parse_poison(body)
        with self._lock:
            self._poison = poison
        return self.poison_report()

    def poison_report(self) -> dict[str, Any]:
        """`{"marker" (null: off), "name_index", "refused"}`."""
        with self._lock:
            poison, refused = self._poison, self._refused_poison
        return {
            "marker": poison.marker if poison else None,
            "name_index": poison.name_index if poison else True,
            "refused": refused,
        }

    def check_caller(self, caller: Caller) -> None:
        """`RefusedCreate` while the deployment is refused (counted; a `count` runs down
        and then the refusal stops)."""
        with self._lock:
            refusal = self._refusal
            if refusal is None:
                return
            left = None if refusal.left is None else refusal.left - 1
            self._refusal = None if left == 0 else Refusal(refusal.status, refusal.reason, left)
            self._refused_deployment += 1
        raise RefusedCreate(refusal_body(refusal.status, refusal.reason, caller))

    def check_requests(self, requests: list[dict[str, Any]]) -> None:
        """`RefusedCreate` (counted) when a request holds the poison marker."""
        with self._lock:
            poison = self._poison
        if poison is None:
            return
        hits = poisoned_parts(requests, poison.marker)
        if not hits:
            return
        with self._lock:
            self._refused_poison += 1
        raise RefusedCreate(poison_body(hits, poison))
