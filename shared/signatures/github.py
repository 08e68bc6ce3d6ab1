"""GitHub webhook signatures.

GitHub sends ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>``, keyed
with the UTF-8 bytes of the webhook secret (at least `MIN_KEY_BYTES` of them).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence

from shared.signatures._common import (
    GITHUB_SIGNATURE_HEADER,
    MIN_KEY_BYTES,
    _check_secrets,
    _required,
)
from shared.signatures.errors import SecretError, VerificationError


def _github_digest(key: bytes, body: bytes) -> bytes:
    """The one computation behind both signing and verifying GitHub deliveries."""
    return hmac.digest(key, body, "sha256")


def _github_key(secret: str, position: int = 1) -> bytes:
    key = secret.encode("utf-8")
    if len(key) < MIN_KEY_BYTES:
        raise SecretError(f"GitHub secret #{position} is shorter than {MIN_KEY_BYTES} bytes")
    return key


def sign_github(secret: str, body: bytes) -> str:
    """The `X-Hub-Signature-256` value GitHub sends for `body` signed with `secret`."""
    return "sha256=" + _github_digest(_github_key(secret), body).hex()


def github_headers(
    event: str, body: bytes, secret: str, delivery_id: str, *, agent: str = "hookledger"
) -> dict[str, str]:
    """The headers GitHub sends with a webhook and the ingress reads, `body` signed with
    `secret`: the one signer of the CLI, the demo, the test kit, the chaos load and the
    benches (each names itself in the user agent)."""
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id,
        "X-Hub-Signature-256": sign_github(secret, body),
        "User-Agent": f"GitHub-Hookshot/{agent}",
        "Content-Type": "application/json",
    }


class GitHubVerifier:
    """Checks `X-Hub-Signature-256` against every configured secret (rotation)."""

    def __init__(self, secrets: Sequence[str]) -> None:
        values = _check_secrets(secrets, "GitHub webhook secrets")
        self._keys = tuple(_github_key(s, i) for i, s in enumerate(values, start=1))
        self._signing_secret = values[0]

    def sign(self, body: bytes) -> str:
        """The header value for `body`, signed with the first secret."""
        return sign_github(self._signing_secret, body)

    def verify(self, headers: Mapping[str, str], body: bytes) -> None:
        """Return if some secret signed `body`; raise `VerificationError` otherwise."""
        value = _required(headers, GITHUB_SIGNATURE_HEADER)
        scheme, sep, hex_digest = value.partition("=")
        if not sep or scheme != "sha256":
            raise VerificationError("signature is not in the sha256=<hex> form")
        if len(hex_digest) != 64:
            raise VerificationError("signature has the wrong length")
        try:
            given = bytes.fromhex(hex_digest)
        except ValueError:
            raise VerificationError("signature is not hexadecimal") from None
        # Compute every candidate so timing does not reveal which secret matched.
        matched = False
        for key in self._keys:
            matched |= hmac.compare_digest(_github_digest(key, body), given)
        if not matched:
            raise VerificationError("signature does not match")
