"""Access token and CSRF tokens for the console.

- Bound to loopback, the console needs no token. Bound elsewhere, `serve` refuses to
  start without `--token`; then every request must carry it: the `X-Console-Token`
  header, or the cookie set when `/?token=...` is visited once (the URL is then cleaned).
- The one write (replay) is a POST whose form carries `csrf_token(delivery)`: an HMAC of
  the delivery under a per-process secret, which a page from another origin cannot read.
  A POST without it is refused with 403 before anything is read or written.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets

TOKEN_COOKIE = "hookledger_console_token"  # noqa: S105 (a cookie name, not a secret)
TOKEN_HEADER = "X-Console-Token"  # noqa: S105 (a header name)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Guard:
    """Checks the access token (when one is configured) and issues/verifies CSRF tokens."""

    def __init__(self, token: str | None = None, csrf_secret: bytes | None = None) -> None:
        self.token = token or None
        self._secret = csrf_secret or secrets.token_bytes(32)

    def allowed(self, header: str | None, cookie: str | None) -> bool:
        if self.token is None:
            return True
        return any(
            value is not None and hmac.compare_digest(value.encode(), self.token.encode())
            for value in (header, cookie)
        )

    def csrf_token(self, subject: str) -> str:
        return hmac.new(self._secret, f"replay:{subject}".encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, subject: str, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(self.csrf_token(subject), str(given))
