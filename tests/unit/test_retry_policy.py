"""The one retry policy (shared/retry.py): one set of retryable statuses, defined once and
answered alike by GitHub, Gemini (our mapping and the SDK's options) and Cloud Tasks; the
jittered backoff; a server's Retry-After honoured up to a bound."""

from __future__ import annotations

import ast
import email.utils
from pathlib import Path

import pytest
import requests
from google.genai import errors as genai_errors

from shared.errors import retryable
from shared.gemini.client import SDK_RETRIED_STATUSES, sdk_retry_options
from shared.gemini.errors import mapped
from shared.github import ContentsClient, GitHubRejected, GitHubUnavailable, github_policy
from shared.handoff.tasks import CHANNEL_OPTIONS, TASKS_POLICY
from shared.retry import (
    RETRYABLE_STATUSES,
    Backoff,
    RetryPolicy,
    parse_retry_after,
    retryable_status,
)

SHARED = Path(__file__).resolve().parents[2] / "shared"
POLICY_MODULE = SHARED / "retry.py"
ERROR_STATUSES = range(400, 600)


def status_rules(source: str) -> list[str]:
    """Where `source` states which HTTP statuses are retryable on its own: a literal
    collection of two or more 4xx/5xx codes, a `range` over them, or an ordering
    comparison with a 5xx code ("any 5xx")."""
    found = []

    def is_status(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Constant)
            and type(node.value) is int
            and node.value in ERROR_STATUSES
        )

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Set | ast.List | ast.Tuple):
            if sum(is_status(element) for element in node.elts) >= 2:
                found.append(f"line {node.lineno}: a set of statuses")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "range":
            if node.args and is_status(node.args[0]):  # range(500, 600), not range(0, n, 500)
                found.append(f"line {node.lineno}: a range of statuses")
        elif isinstance(node, ast.Compare):
            ordering = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
            sides = [node.left, *node.comparators]
            if any(isinstance(op, ordering) for op in node.ops) and any(
                is_status(side) and side.value >= 500  # type: ignore[attr-defined]
                for side in sides
            ):
                found.append(f"line {node.lineno}: a comparison with a 5xx")
    return found


def test_no_module_but_shared_retry_defines_retryable_statuses():
    offenders = {
        str(path.relative_to(SHARED.parent)): rules
        for path in sorted(SHARED.rglob("*.py"))
        if path != POLICY_MODULE and (rules := status_rules(path.read_text()))
    }
    assert offenders == {}, offenders


def test_the_guard_sees_each_way_of_stating_a_status_rule():
    assert status_rules("S = frozenset({429, 500, 502, 503, 504})")
    assert status_rules("S = (408, 500)")
    assert status_rules("ok = code >= 500")
    assert status_rules("S = set(range(500, 600))")
    assert status_rules(POLICY_MODULE.read_text()), "the policy itself states the rule"
    assert not status_rules("if code == 404 or code == 429: pass")
    assert not status_rules("for start in range(0, total, 500): pass")


# --- one answer per status, whoever asks -----------------------------------------------


class ScriptedSession(requests.Session):
    def __init__(self, answers: list[tuple[int, dict[str, str]]]) -> None:
        super().__init__()
        self.answers = list(answers)
        self.calls = 0

    def request(self, method, url, **kwargs):  # type: ignore[override]
        self.calls += 1
        status, headers = self.answers.pop(0)
        response = requests.Response()
        response.status_code = status
        response._content = b"# hi\n"
        response.headers["Content-Type"] = "application/vnd.github.raw"
        response.headers.update(headers)
        return response


def fetch_outcome(status: int) -> tuple[str, int]:
    """How GitHub's client treats `status` twice in a row: the error kind and calls made."""
    session = ScriptedSession([(status, {}), (status, {})])
    contents = ContentsClient(
        "http://github.local", session=session, attempts=2, sleep=lambda s: None
    )
    try:
        contents.fetch("o/r", "a.md", "abc")
    except GitHubUnavailable as exc:
        assert exc.status == status, "a fetch failure carries its HTTP status"
        return "transient", session.calls
    except GitHubRejected as exc:
        assert exc.status == status
        return "permanent", session.calls
    return "ok", session.calls


def gemini_retryable(status: int) -> bool:
    body = {"error": {"code": status, "message": "x", "status": "X"}}
    with pytest.raises(Exception) as info, mapped("batches/x"):
        raise genai_errors.APIError(status, body)
    return retryable(info.value)


def test_github_and_gemini_answer_every_error_status_as_the_policy_does():
    disagree = []
    for status in ERROR_STATUSES:
        if status == 404:
            continue  # GitHub's `missing_ok` and Gemini's NotFound: never retried by either
        want = retryable_status(status)
        github = fetch_outcome(status)
        if github != (("transient", 2) if want else ("permanent", 1)):
            disagree.append((status, "github", github))
        if gemini_retryable(status) is not want:
            disagree.append((status, "gemini", not want))
    assert disagree == []


def test_the_sdk_retries_the_policys_statuses_but_429_whose_delay_we_honour():
    assert set(SDK_RETRIED_STATUSES) == RETRYABLE_STATUSES - {429}
    options = sdk_retry_options(5.0, 30.0)
    assert set(options.http_status_codes or []) == RETRYABLE_STATUSES - {429}
    assert (options.initial_delay, options.max_delay) == (0.5, 4.0)


def test_cloud_tasks_calls_are_one_attempt_and_reconnect_on_the_policys_backoff():
    assert TASKS_POLICY.attempts == 1
    options = dict(CHANNEL_OPTIONS)
    assert options["grpc.initial_reconnect_backoff_ms"] == 100
    assert options["grpc.max_reconnect_backoff_ms"] == 1000


def test_a_rate_limit_403_is_githubs_documented_rule_not_a_status():
    policy = github_policy()
    assert policy.retryable(403, {"x-ratelimit-remaining": "0"})
    assert policy.retryable(403, {"retry-after": "3"})
    assert not policy.retryable(403, {"x-ratelimit-remaining": "7"})
    assert not RetryPolicy().retryable(403, {"retry-after": "3"})


# --- waits -------------------------------------------------------------------------------


def test_githubs_waits_are_the_one_backoff_and_its_ceiling_is_the_old_formula():
    slept: list[float] = []
    session = ScriptedSession([(503, {})] * 4)
    contents = ContentsClient(
        "http://github.local", session=session, attempts=4, sleep=slept.append, rand=lambda: 1.0
    )
    with pytest.raises(GitHubUnavailable):
        contents.fetch("o/r", "a.md", "abc")
    # min(0.5 · 2ⁿ⁻¹, 4) at the top of the jitter, half of it at the bottom.
    assert slept == [0.5, 1.0, 2.0]
    assert github_policy(4).backoff.delay(0, rand=lambda: 0.0) == 0.25


def test_github_waits_as_long_as_retry_after_asks():
    slept: list[float] = []
    session = ScriptedSession([(429, {"retry-after": "3"}), (200, {})])
    contents = ContentsClient(
        "http://github.local", session=session, sleep=slept.append, rand=lambda: 1.0
    )
    assert contents.fetch("o/r", "a.md", "abc") == b"# hi\n"
    assert slept == [3.0]


def test_a_retry_after_past_the_bound_is_not_waited_for():
    slept: list[float] = []
    session = ScriptedSession([(403, {"retry-after": "3600"}), (200, {})])
    contents = ContentsClient("http://github.local", session=session, sleep=slept.append)
    with pytest.raises(GitHubUnavailable, match="retry-after 3600 s") as caught:
        contents.fetch("o/r", "a.md", "abc")
    assert (slept, session.calls, caught.value.status) == ([], 1, 403)


@pytest.mark.parametrize(
    ("name", "value", "seconds"),
    [
        ("absent", None, None),
        ("delay-seconds", "120", 120.0),
        ("http-date", email.utils.formatdate(1_000_090, usegmt=True), 90.0),
        ("a date in the past", email.utils.formatdate(999_000, usegmt=True), 0.0),
        ("unreadable", "soon", None),
    ],
)
def test_retry_after_is_read_as_rfc_9110_says(name, value, seconds):
    assert parse_retry_after(value, now=1_000_000) == seconds, name


def test_the_policy_waits_the_longer_of_its_backoff_and_the_servers_ask():
    policy = RetryPolicy(backoff=Backoff(attempts=3, first_s=1.0, cap_s=8.0), max_wait_s=10.0)
    assert policy.wait_s(1, None, rand=lambda: 1.0) == 2.0
    assert policy.wait_s(1, 5.0, rand=lambda: 1.0) == 5.0
    assert policy.wait_s(1, 0.5, rand=lambda: 1.0) == 2.0
    assert policy.wait_s(1, 11.0) is None
    assert policy.fits(2.0, 3.0, 5.0) and not policy.fits(2.0, 3.0, 4.9)
    assert policy.fits(60.0, 30.0, None)
