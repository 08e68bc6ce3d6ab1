"""A GitHub App's webhook deliveries, as GitHub records them: listed, read, redelivered.

GitHub's "REST API endpoints for GitHub App webhooks" (authenticated with the App JWT,
not an installation token):

- `GET /app/hook/deliveries?per_page=&cursor=&status=`: the App's deliveries, newest
  first, each a "hook-delivery-item" (`id`, `guid`, `delivered_at`, `redelivery`,
  `duration`, `status`, `status_code`, `event`, `action`, `installation_id`,
  `repository_id`, `throttled_at`); the next page is the `Link` header's `rel="next"` URL
  (a `cursor`). `status=failure` keeps those with a `status_code` of 400-599, as the
  parameter's description says; it does not say where an attempt that got no answer at
  all falls (docs/performance.md, "Scale");
- `GET /app/hook/deliveries/{delivery_id}`: one delivery with its `request`
  (`headers`, `payload`) and `response`;
- `POST /app/hook/deliveries/{delivery_id}/attempts`: 202, GitHub sends the delivery
  again (the same `guid`), recorded as a new delivery with `redelivery: true`.

Every attempt is its own delivery; the attempts of one event share its `guid` (the
`X-GitHub-Delivery` header). GitHub keeps deliveries, and redelivers them, for 3 days
("Redelivering webhooks"). A delivery succeeded when GitHub's `status` is `OK`
("Handling failed webhook deliveries": a failed delivery has a status other than `OK`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from shared.clock import Clock, system_clock
from shared.github.app import AppCredentials, app_jwt
from shared.github.errors import GitHubUnavailable
from shared.github.transport import Deadline, _RestClient, response_json

# How long GitHub keeps a delivery and lets it be redelivered ("Redelivering webhooks").
GITHUB_DELIVERY_WINDOW = timedelta(days=3)
PER_PAGE = 100  # the most GitHub serves in one page


class AppJwtAuth:
    """`GitHubAuth` for the App's own endpoints (`/app/...`): a fresh App JWT per request."""

    def __init__(self, credentials: AppCredentials, clock: Clock = system_clock) -> None:
        self._credentials = credentials
        self._clock = clock

    def headers(self, installation_id: int | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {app_jwt(self._credentials, self._clock())}"}

    def invalidate(self, installation_id: int | None, used: Mapping[str, str]) -> bool:
        return False  # every request carries a new JWT: a 401 stands

    def __repr__(self) -> str:  # never the key
        return f"AppJwtAuth(app={self._credentials.app_id!r})"


@dataclass(frozen=True)
class HookDelivery:
    """One attempt to deliver one event (a "hook-delivery-item")."""

    id: int
    guid: str
    delivered_at: datetime
    redelivery: bool
    status: str
    status_code: int
    event: str
    action: str | None
    installation_id: int | None
    repository_id: int | None
    throttled_at: datetime | None

    @property
    def succeeded(self) -> bool:
        """GitHub's `OK` (a 2xx answer in time); a throttled attempt never did."""
        return self.throttled_at is None and (self.status == "OK" or 200 <= self.status_code < 300)


@dataclass(frozen=True)
class DeliveryPage:
    deliveries: tuple[HookDelivery, ...]
    next_url: str | None  # the `Link` header's `rel="next"`, on the API's own host
    # Items GitHub sent that could not be read (each said why), left out of `deliveries`:
    # one bad item must not stop the page, or every later listing, at it.
    malformed: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeliveryRequest:
    """What GitHub sent in one delivery: its headers and its JSON payload."""

    delivery: HookDelivery
    headers: dict[str, str]
    payload: dict[str, Any]


class HookDeliveriesClient(_RestClient):
    """The three App webhook delivery endpoints; `calls` counts the requests sent."""

    def __init__(self, api_url: str, credentials: AppCredentials, **options: Any) -> None:
        clock = options.get("clock", system_clock)
        super().__init__(api_url, auth=AppJwtAuth(credentials, clock), **options)
        self.calls = 0

    def page(
        self,
        next_url: str | None = None,
        *,
        failed_only: bool = False,
        deadline: Deadline | None = None,
    ) -> DeliveryPage:
        """The newest page (`next_url` None), of failed deliveries only with `failed_only`,
        or the page a previous one links to (its link keeps the filter)."""
        where = "GitHub App webhook deliveries"
        if next_url is None:
            url = f"{self._api_url}/app/hook/deliveries"
            listing: dict[str, Any] = {"per_page": PER_PAGE}
            if failed_only:
                listing["status"] = "failure"
            params: dict[str, Any] | None = listing
        else:
            url, params = self._same_host(next_url, where), None
        response = self._counted("GET", url, where, params=params, deadline=deadline)
        body = response_json(response, where)
        if not isinstance(body, list):
            raise GitHubUnavailable(f"{where}: the answer is not a list of deliveries")
        items: list[HookDelivery] = []
        malformed: list[str] = []
        for item in body:
            try:
                items.append(delivery_from(item, where))
            except GitHubUnavailable as exc:
                malformed.append(str(exc))
        following = response.links.get("next", {}).get("url")
        next_url = self._same_host(following, where) if following else None
        return DeliveryPage(tuple(items), next_url, tuple(malformed))

    def get(self, delivery_id: int, *, deadline: Deadline | None = None) -> DeliveryRequest:
        """Delivery `delivery_id` with the headers and payload GitHub sent."""
        where = f"GitHub App webhook delivery {int(delivery_id)}"
        response = self._counted("GET", self._url(delivery_id), where, deadline=deadline)
        body = response_json(response, where)
        request = body.get("request") if isinstance(body, Mapping) else None
        headers = request.get("headers") if isinstance(request, Mapping) else None
        payload = request.get("payload") if isinstance(request, Mapping) else None
        if not isinstance(headers, Mapping) or not isinstance(payload, Mapping):
            raise GitHubUnavailable(f"{where}: the answer has no request headers and payload")
        return DeliveryRequest(
            delivery_from(body, where),
            {str(k): str(v) for k, v in headers.items()},
            dict(payload),
        )

    def redeliver(self, delivery_id: int, *, deadline: Deadline | None = None) -> None:
        """Ask GitHub to send delivery `delivery_id` again (it answers 202 and sends later).

        `GitHubRejected` when GitHub refuses (e.g. a delivery past its 3 days)."""
        where = f"GitHub App webhook delivery {int(delivery_id)}: redelivery"
        url = f"{self._url(delivery_id)}/attempts"
        self._counted("POST", url, where, deadline=deadline, retry=False)

    def _url(self, delivery_id: int) -> str:
        return f"{self._api_url}/app/hook/deliveries/{quote(str(int(delivery_id)), safe='')}"

    def _counted(self, method: str, url: str, where: str, **options: Any) -> Any:
        self.calls += 1
        return self._send(method, url, where, **options)


def delivery_from(item: object, where: str) -> HookDelivery:
    """A "hook-delivery-item" read strictly: `GitHubUnavailable` naming what is missing."""
    if not isinstance(item, Mapping):
        raise GitHubUnavailable(f"{where}: a delivery is not an object")
    try:
        delivery_id = item["id"]
        guid = item["guid"]
        event = item["event"]
        delivered_at = _time(item["delivered_at"])
    except (KeyError, ValueError, TypeError) as exc:
        raise GitHubUnavailable(f"{where}: a delivery lacks a usable {exc}") from None
    if not isinstance(delivery_id, int) or not isinstance(guid, str) or not guid:
        raise GitHubUnavailable(f"{where}: a delivery has no usable id and guid")
    throttled = item.get("throttled_at")
    return HookDelivery(
        id=delivery_id,
        guid=guid,
        delivered_at=delivered_at,
        redelivery=bool(item.get("redelivery")),
        status=str(item.get("status") or ""),
        status_code=_int(item.get("status_code")) or 0,
        event=str(event),
        action=item.get("action") if isinstance(item.get("action"), str) else None,
        installation_id=_int(item.get("installation_id")),
        repository_id=_int(item.get("repository_id")),
        throttled_at=_time(throttled) if throttled else None,
    )


def _time(value: object) -> datetime:
    if not isinstance(value, str):
        raise TypeError("delivered_at")
    when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if when.tzinfo is None:
        raise ValueError("delivered_at")
    return when


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
