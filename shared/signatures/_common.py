"""Helpers every scheme shares: header lookup, strict base64, secret and clock checks.

Secrets and rotation
--------------------
Every verifier takes a list of secrets: the first signs, every one verifies. Secrets are
checked when the verifier is built; a bad one raises `SecretError` then, never on a
request. The minimum is `MIN_KEY_BYTES` (16) bytes of key material: the UTF-8 bytes of a
GitHub secret or the decoded bytes of a ``whsec_`` secret.

Headers
-------
``headers`` may be any mapping of header names to values (a dict, werkzeug's
``EnvironHeaders``…); names are matched case-insensitively, as HTTP requires. A name that
appears twice (in two spellings, or repeated) is rejected rather than guessed at.
`RequestHeaders` reads such a mapping once and indexes it by lower-cased name, so each
lookup after is a dict access (`header` must otherwise walk every item of a mapping to
find a repeated name, and werkzeug's headers make each item from the WSGI environ).
`RequestHeaders.from_environ(environ)`, what `functions/main.py` hands the endpoints,
reads nothing up front: a name is one environ key, a repeated header's values already
joined into one by the server.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import ItemsView, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from shared.clock import Clock
from shared.signatures.errors import SecretError, VerificationError

MIN_KEY_BYTES = 16
DEFAULT_TOLERANCE_S = 300

GITHUB_SIGNATURE_HEADER = "x-hub-signature-256"
WEBHOOK_ID_HEADER = "webhook-id"
WEBHOOK_TIMESTAMP_HEADER = "webhook-timestamp"
WEBHOOK_SIGNATURE_HEADER = "webhook-signature"
AUTHORIZATION_HEADER = "authorization"

# Bounds that keep a hostile header from costing more than a few microseconds.
_MAX_HEADER_CHARS = 8192
# How werkzeug reads headers off a WSGI environ (`EnvironHeaders.__iter__`).
_CONTENT_KEYS = frozenset({"CONTENT_TYPE", "CONTENT_LENGTH"})
_CONTENT_KEYS_AS_HTTP = frozenset({"HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"})


class _Pairwise(Protocol):
    """What `RequestHeaders` reads: a Mapping, or werkzeug's `Headers` (not one to mypy)."""

    def items(self) -> Iterable[tuple[str, str]]: ...


class RequestHeaders(Mapping[str, str]):
    """A read-once copy of request headers: case-insensitive, every (name, value) kept.

    `self[name]` and `get(name)` ignore case and give the first value; `items()` gives
    the pairs exactly as read (a name in two spellings stays twice), so `header` still
    refuses a repeated header.
    """

    __slots__ = ("_by_name", "_pairs")

    def __init__(self, headers: _Pairwise) -> None:
        pairs = list(headers.items())
        by_name: dict[str, list[str]] = {}
        for key, value in pairs:
            if isinstance(key, str):
                by_name.setdefault(key.lower(), []).append(value)
        self._pairs = pairs
        self._by_name = by_name

    @staticmethod
    def from_environ(environ: Mapping[str, Any]) -> RequestHeaders:
        """The headers of a WSGI `environ`, each looked up in it by name: nothing is read
        up front (`items()` gives werkzeug's `EnvironHeaders` pairs, in its order)."""
        return _EnvironHeaders(environ)

    def values_of(self, name: str) -> list[str]:
        """Every value of header `name` (any case), in the order read."""
        return self._by_name.get(name.lower(), [])

    def pick(self, names: Iterable[str]) -> list[tuple[str, str]]:
        """(name, first value) for each of `names` present, in that order, named as given."""
        found = ((name, self._by_name.get(name.lower())) for name in names)
        return [(name, values[0]) for name, values in found if values]

    def __getitem__(self, name: str) -> str:
        found = self._by_name.get(name.lower()) if isinstance(name, str) else None
        if not found:
            raise KeyError(name)
        return found[0]

    def get(self, name: str, default: Any = None) -> Any:  # one dict access, not Mapping's
        found = self._by_name.get(name.lower()) if isinstance(name, str) else None
        return found[0] if found else default

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)

    def items(self) -> ItemsView[str, str]:
        return _Pairs(self._pairs)


class _EnvironHeaders(RequestHeaders):
    """`RequestHeaders.from_environ`: a name is one environ key (`HTTP_X_GITHUB_EVENT`), and
    has one value at most (a server joins a repeated header's values into one)."""

    __slots__ = ("_environ",)

    def __init__(self, environ: Mapping[str, Any]) -> None:  # nothing is read up front
        self._environ = environ

    def _value(self, name: str) -> Any:
        key = _ENVIRON_KEYS.get(name)
        if key is None:
            if not isinstance(name, str):
                return None
            key = _environ_key(name)
        value = self._environ.get(key)
        if not value and key in _CONTENT_KEYS:
            return None  # as werkzeug: an empty Content-Type or Content-Length is absent
        return value

    def values_of(self, name: str) -> list[str]:
        value = self._value(name)
        return [] if value is None else [value]

    def pick(self, names: Iterable[str]) -> list[tuple[str, str]]:
        found = ((name, self._value(name)) for name in names)
        return [(name, value) for name, value in found if value is not None]

    def __getitem__(self, name: str) -> str:
        value = self._value(name)
        if value is None:
            raise KeyError(name)
        return value  # type: ignore[no-any-return]

    def get(self, name: str, default: Any = None) -> Any:
        value = self._value(name)
        return default if value is None else value

    def _read(self) -> list[tuple[str, str]]:
        """The pairs werkzeug's `EnvironHeaders.__iter__` gives."""
        pairs = []
        for key, value in self._environ.items():
            if key.startswith("HTTP_"):
                if key not in _CONTENT_KEYS_AS_HTTP:
                    pairs.append((key[5:].replace("_", "-").title(), value))
            elif key in _CONTENT_KEYS and value:
                pairs.append((key.replace("_", "-").title(), value))
        return pairs

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self._read())

    def __len__(self) -> int:
        return len(self._read())

    def items(self) -> ItemsView[str, str]:
        return _Pairs(self._read())


# Names are looked up as the code spells them: a few dozen, each turned into a key once.
_ENVIRON_KEYS: dict[str, str] = {}


def _environ_key(name: str) -> str:
    """The environ key of header `name` (`CONTENT_TYPE`, else `HTTP_…`), remembered."""
    key = name.upper().replace("-", "_")
    key = key if key in _CONTENT_KEYS else f"HTTP_{key}"
    if len(_ENVIRON_KEYS) < 256:
        _ENVIRON_KEYS[name] = key
    return key


class _Pairs(ItemsView[str, str]):
    """`RequestHeaders.items()`: the pairs as read, a repeated name included."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._pairs = pairs

    def __len__(self) -> int:
        return len(self._pairs)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._pairs)

    def __contains__(self, item: object) -> bool:
        return item in self._pairs


def header(headers: Mapping[str, str], name: str) -> str | None:
    """The value of header `name` (case-insensitive), or None when absent.

    Raises `VerificationError` when the header appears more than once or its value is
    not a printable-ASCII string of reasonable length.
    """
    wanted = name.lower()
    found: Sequence[object]
    if isinstance(headers, RequestHeaders):
        found = headers.values_of(wanted)
    else:
        found = [
            value
            for key, value in headers.items()
            if isinstance(key, str) and key.lower() == wanted
        ]
    if not found:
        return None
    if len(found) > 1:
        raise VerificationError(f"header {name} appears more than once")
    text = found[0]
    if not isinstance(text, str):
        raise VerificationError(f"header {name} is not text")
    if len(text) > _MAX_HEADER_CHARS:
        raise VerificationError(f"header {name} is too long")
    if not text.isascii() or not text.isprintable():
        raise VerificationError(f"header {name} is not printable ASCII")
    return text


def _required(headers: Mapping[str, str], name: str) -> str:
    value = header(headers, name)
    if value is None or not value.strip():
        raise VerificationError(f"missing header {name}")
    return value


def _b64decode(text: str, *, urlsafe: bool = False) -> bytes:
    """Strict base64 (standard or URL alphabet, padding optional); ValueError if invalid."""
    if not text.isascii():
        raise ValueError("not ASCII")
    padded = text + "=" * (-len(text) % 4)
    try:
        if urlsafe:
            if any(c in padded for c in "+/"):
                raise ValueError("wrong alphabet")
            return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        return base64.b64decode(padded, validate=True)
    except binascii.Error as exc:
        raise ValueError("invalid base64") from exc


def _b64url(data: bytes) -> str:
    """Unpadded base64url, as JWKs and envelope signatures carry it."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _check_secrets(secrets: Sequence[str] | str, what: str) -> tuple[str, ...]:
    if isinstance(secrets, str):
        raise SecretError(f"{what}: pass a list of secrets, not one string")
    values = tuple(secrets)
    if not values:
        raise SecretError(f"{what}: at least one secret is required")
    for position, secret in enumerate(values, start=1):
        if not isinstance(secret, str) or not secret:
            raise SecretError(f"{what}: secret #{position} is empty")
        if secret != secret.strip():
            raise SecretError(f"{what}: secret #{position} has surrounding whitespace")
    return values


def _check_fresh(seconds: int, clock: Clock, tolerance_s: int, what: str) -> None:
    now = clock().timestamp()
    if seconds < now - tolerance_s:
        raise VerificationError(f"{what} is too old")
    if seconds > now + tolerance_s:
        raise VerificationError(f"{what} is in the future")


def _check_tolerance(tolerance_s: int) -> int:
    if isinstance(tolerance_s, bool) or not isinstance(tolerance_s, int) or tolerance_s < 1:
        raise ValueError(f"tolerance_s must be a positive whole number, got {tolerance_s!r}")
    return tolerance_s
