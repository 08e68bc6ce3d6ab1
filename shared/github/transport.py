"""The REST transport every GitHub client shares (`_RestClient`: headers, credentials,
timeout, retries, deadlines), the retry policy of GitHub calls (`github_policy`,
`github_rate_limits`), and what a caller passes to bound a call: a `Deadline`, or an
`Ownership` whose loss is `OwnershipLost`.

Every request names the REST API version it is written for (`X-GitHub-Api-Version`,
GitHub's "API Versions"): `API_VERSION` unless the client is given another
(`GITHUB_API_VERSION`, to pin an older one); `rest_headers` is the one place the headers
are made, for the clients and the App's token mint alike.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

import requests

from shared import tracing
from shared.clock import Clock, system_clock
from shared.github.auth import GitHubAuth, TokenAuth
from shared.github.errors import GitHubError, GitHubRejected, GitHubUnavailable
from shared.retry import Backoff, RetryPolicy, parse_retry_after, server_error

# The REST API version hookledger is written for: its requests and the answers it reads
# were checked against GitHub's description of this version (docs/github-app.md, "REST
# API version"). The one copy: GITHUB_API_VERSION, empty by default, may pin another.
API_VERSION = "2026-03-10"


def rest_headers(api_version: str | None = None) -> dict[str, str]:
    """The headers of every REST request but its credential: JSON media type, the REST API
    version the request is written for (`api_version`, or `API_VERSION` when None or
    empty), and who sends it."""
    return {
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": api_version or API_VERSION,
        "User-Agent": "hookledger",
    }


class Deadline(Protocol):
    """How long a caller may still spend (e.g. the rest of an outbox lease)."""

    def seconds_left(self) -> float: ...


class Ownership(Deadline, Protocol):
    """A deadline, and whether the caller still holds the right to act (a ledger read)."""

    def still_owner(self) -> bool: ...


class OwnershipLost(GitHubUnavailable):
    """The caller's claim passed to someone else before the POST: nothing was posted."""


class _NoCredential(GitHubUnavailable):
    """The auth provider could not produce a credential now (`error`): one failed attempt,
    told apart from a deadline's `GitHubUnavailable`, which ends the call at once."""

    def __init__(self, error: GitHubUnavailable) -> None:
        super().__init__(str(error), status=error.status)
        self.error = error


class _RestClient:
    """The request/retry code shared by every GitHub client: headers, timeout, backoff.

    Credentials come from `auth` (`shared/github/auth.py`: a personal token, or a GitHub
    App's installation tokens per `installation_id`); without one, `token` (or none). They
    go only into the Authorization header; no message built here contains them. Every
    request says it is written for REST API `api_version` (`rest_headers`).
    """

    def __init__(
        self,
        api_url: str,
        token: str = "",
        *,
        auth: GitHubAuth | None = None,
        session: requests.Session | None = None,
        timeout_s: float = 30.0,
        attempts: int = 3,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
        policy: RetryPolicy | None = None,
        clock: Clock = system_clock,
        api_version: str | None = None,
    ) -> None:
        self._api_url = api_url.rstrip("/")
        self._session = session or requests.Session()
        self._headers = rest_headers(api_version)
        self._auth: GitHubAuth = auth if auth is not None else TokenAuth(token)
        self._timeout_s = timeout_s
        self._policy = policy or github_policy(attempts)
        self._sleep = sleep
        self._rand = rand
        self._clock = clock

    def _send(
        self,
        method: str,
        url: str,
        where: str,
        *,
        params: Mapping[str, str | int] | None = None,
        json: Any = None,
        retry: bool = True,
        deadline: Deadline | None = None,
        missing_ok: bool = False,
        accept: str | None = None,
        installation_id: int | None = None,
    ) -> requests.Response:
        """A 2xx response; what the policy retries (408, 429, 5xx, a rate-limit 403, timeouts)
        is retried (when `retry`) then `GitHubUnavailable`.

        Any other answer is `GitHubRejected`. `where` names the object in every message.
        Waits follow the policy's jittered backoff, or what GitHub asked for when longer:
        `retry-after`, or with `x-ratelimit-remaining: 0` the time until
        `x-ratelimit-reset` ("Rate limits for the REST API"); one over the policy's
        `max_wait_s` is not waited for (`GitHubUnavailable` at once). With a `deadline`, no
        request starts unless its whole timeout fits in the time left: `GitHubUnavailable`
        instead, so a call never outlives the caller's lease. With `missing_ok`, a 404 is
        answered like a 2xx. Credentials are `installation_id`'s (`_authorized`): a 401 is
        answered by one more try with a renewed credential, never more.
        """
        attempts = self._policy.attempts if retry else 1
        last: GitHubError | None = None
        asked: float | None = None
        for attempt in range(attempts):
            if attempt:
                wait = self._policy.wait_s(attempt - 1, asked, self._rand)
                if wait is None:
                    assert last is not None
                    raise GitHubUnavailable(
                        f"{last} (retry-after {asked:g} s: not waited for)",
                        status=last.status,
                        retry_after_s=asked,
                    )
                if deadline is not None:  # a wait that leaves no room for the attempt: stop now
                    self._check_time(deadline, f"{where}: {method}", last, wait_s=wait)
                self._sleep(wait)
            try:
                response = self._authorized(
                    method,
                    url,
                    where,
                    installation_id=installation_id,
                    deadline=deadline,
                    last=last,
                    params=params,
                    json=json,
                    headers={**self._headers, "Accept": accept} if accept else self._headers,
                )
            except requests.RequestException as exc:
                last, asked = GitHubUnavailable(f"{where}: {type(exc).__name__}: {exc}"), None
                continue
            except _NoCredential as exc:
                status = exc.error.status
                last, asked = GitHubUnavailable(f"{where}: {exc.error}", status=status), None
                continue
            if self._policy.retryable(response.status_code, response.headers):
                asked = self._asked_wait(response.headers)
                last = GitHubUnavailable(
                    f"{where}: GitHub answered {response.status_code}",
                    status=response.status_code,
                    retry_after_s=asked,
                )
                continue
            if missing_ok and response.status_code == 404:
                return response
            if not 200 <= response.status_code < 300:
                raise GitHubRejected(
                    f"{where}: GitHub answered {response.status_code}{_said(response)}",
                    status=response.status_code,
                )
            return response
        assert last is not None
        raise last

    def _same_host(self, url: str, where: str) -> str:
        """A pagination URL on the API's own host; the token never goes anywhere else."""
        wanted, got = urlsplit(self._api_url), urlsplit(url)
        if (got.scheme, got.netloc) != (wanted.scheme, wanted.netloc):
            raise GitHubRejected(f"{where}: pagination link leaves {wanted.netloc}")
        return url

    def _authorized(
        self,
        method: str,
        url: str,
        where: str,
        *,
        installation_id: int | None,
        deadline: Deadline | None,
        last: GitHubError | None,
        headers: Mapping[str, str],
        **kwargs: Any,
    ) -> requests.Response:
        """One attempt with `installation_id`'s credentials; on a 401 the auth provider may
        renew them (an installation token expired or revoked) and the request is sent once
        more. GitHub authenticates before it acts, so a request answered 401 did nothing:
        even a POST is safe to send again. The deadline is checked before each send, after
        any token was minted. `_NoCredential` when no credential could be had now."""
        for renewed in (False, True):
            try:
                credential = self._auth.headers(installation_id)
            except GitHubUnavailable as exc:
                raise _NoCredential(exc) from exc
            if deadline is not None:
                self._check_time(deadline, f"{where}: {method}", last)
            with tracing.span(
                "github.request",
                kind="client",
                **{"http.request.method": method, "url.path": urlsplit(url).path},
            ) as span:
                sent = {**headers, **credential}
                response = self._session.request(
                    method, url, headers=sent, timeout=self._timeout_s, **kwargs
                )
                span.set(**{"http.response.status_code": response.status_code})
                if server_error(response.status_code):
                    span.fail(f"{where}: GitHub answered {response.status_code}")
            if response.status_code != 401 or renewed:
                return response
            if not self._auth.invalidate(installation_id, credential):
                return response
        raise AssertionError("unreachable: the loop returns")  # pragma: no cover

    def _asked_wait(self, headers: Mapping[str, str]) -> float | None:
        """How long GitHub asked us to wait, in seconds: `retry-after`, else (a primary rate
        limit, `x-ratelimit-remaining: 0`) until `x-ratelimit-reset` (Unix seconds) and one
        more second; None when it said neither ("Rate limits for the REST API")."""
        now = self._clock().timestamp()
        asked = parse_retry_after(headers.get("retry-after"), now)
        if asked is not None or headers.get("x-ratelimit-remaining") != "0":
            return asked
        reset = (headers.get("x-ratelimit-reset") or "").strip()
        return max(0.0, float(reset) - now) + 1.0 if reset.isdigit() else None

    def _check_time(
        self, deadline: Deadline, what: str, last: GitHubError | None, wait_s: float = 0.0
    ) -> None:
        """`GitHubUnavailable` when, after waiting `wait_s`, less than one request's timeout
        is left before `deadline` (`RetryPolicy.fits`)."""
        left = deadline.seconds_left() - wait_s
        if self._policy.fits(0.0, self._timeout_s, left):
            return
        reason = f" (after: {last})" if last is not None else ""
        raise GitHubUnavailable(
            f"{what}: {max(left, 0.0):.1f} s left before the deadline, less than one "
            f"request's {self._timeout_s:g} s timeout; not sent{reason}"
        )


def response_json(response: requests.Response, where: str) -> Any:
    """The JSON of a 2xx answer; a body that is not JSON is `GitHubUnavailable` (a proxy's
    page, a truncated answer: worth a retry), naming `where`."""
    try:
        return response.json()
    except ValueError:
        raise GitHubUnavailable(f"{where}: GitHub answered non-JSON") from None


# GitHub's error `message` (e.g. a 422's "No more than 50 items are allowed") is kept this
# long in an error: it says what was refused and never holds the token.
MAX_SAID_CHARS = 300


def _said(response: requests.Response) -> str:
    """`: <GitHub's message>` of a refusal, or "" when its body carries none."""
    try:
        message = response.json().get("message")
    except (ValueError, AttributeError):
        return ""
    if not isinstance(message, str) or not message.strip():
        return ""
    flat = " ".join(message.split())
    return ": " + (flat if len(flat) <= MAX_SAID_CHARS else flat[:MAX_SAID_CHARS] + "…")


def github_rate_limits(code: int, headers: Mapping[str, str]) -> bool:
    """GitHub's "Rate limits for the REST API": a primary or secondary rate limit may be
    answered with 403 (not only 429), saying so in `x-ratelimit-remaining: 0` or
    `retry-after`. Such a 403 is a wait, not a refusal. (`headers` as requests gives them:
    case-insensitive.)"""
    return code == 403 and (
        headers.get("x-ratelimit-remaining") == "0" or headers.get("retry-after") is not None
    )


def github_policy(attempts: int = 3) -> RetryPolicy:
    """The retry policy of GitHub calls: the shared one, `attempts` per call, with GitHub's
    documented rate-limit 403 (`github_rate_limits`); waits 0.5 s, 1 s, 2 s, 4 s (ceilings,
    half jittered) or as long as `retry-after` asks, up to the policy's `max_wait_s`."""
    return RetryPolicy(
        backoff=Backoff(attempts=max(1, attempts), first_s=0.5, cap_s=4.0, jitter=0.5),
        rate_limited=github_rate_limits,
    )
