"""A JWKS served over loopback HTTP, for Gemini dynamic-webhook tests.

    with JwksServer([(RSA_KEY, "rsa-1")]) as keys:
        keys.url            # http://127.0.0.1:<port>/jwks.json
        keys.hits           # GETs answered so far
        keys.publish(...)   # what the next GET answers (a key rotation)
        keys.fail = True    # answer 503 from now on

Gemini publishes its keys at a JWKS URL and signs each dynamic webhook with an RS256
JWT naming one of them by `kid`; `sign` makes such a token.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from local.loopback import QuietHandler, serve
from shared.signatures import public_jwk, sign_jwt_rs256

AUDIENCE = "https://hooks.example/gemini"


class JwksServer:
    """Serves `GET /jwks.json` on a free loopback port until `close()` (or the `with` ends)."""

    def __init__(self, keys: Iterable[tuple[Any, str]]) -> None:
        self.document = b""
        self.hits = 0
        self.fail = False
        self.publish(keys)
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                server.hits += 1
                status, body = (503, b"{}") if server.fail else (200, server.document)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = serve(Handler)
        self.url = f"{self._server.url}/jwks.json"

    def publish(self, keys: Iterable[tuple[Any, str]]) -> None:
        """Serve these (private key, kid) pairs' public halves from now on."""
        self.document = json.dumps(
            {"keys": [public_jwk(key.public_key(), kid) for key, kid in keys]}
        ).encode()

    def publish_raw(self, document: Mapping[str, Any]) -> None:
        self.document = json.dumps(document).encode()

    def close(self) -> None:
        self._server.close()

    def __enter__(self) -> JwksServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sign(key: RSAPrivateKey, kid: str, claims: Mapping[str, Any]) -> str:
    """An RS256 JWT over `claims` naming `kid`, as Gemini signs a dynamic webhook."""
    return sign_jwt_rs256(key, kid, claims)
