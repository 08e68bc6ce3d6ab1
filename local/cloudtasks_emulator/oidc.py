"""OIDC tokens as Cloud Tasks attaches them, signed by a key made at start-up.

`/jwks.json` publishes the public key as a JWK Set (the format of Google's
`oauth2/v3/certs`) and `/certs` as `{kid: x509 PEM}` (Google's `oauth2/v1/certs`), so
`google.oauth2.id_token.verify_token(..., certs_url=...)` verifies the tokens
against either. Signing goes through google-auth's crypt; nothing is hand-rolled.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from google.auth import crypt, jwt

from local.cloudtasks_emulator.clock import ManualClock

ISSUER = "https://accounts.google.com"
TOKEN_LIFETIME_S = 3600


def _b64url_uint(value: int) -> str:
    raw = value.to_bytes((value.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def subject_for(email: str) -> str:
    """A stable numeric id for a service account, like Google's 21-digit `sub`."""
    return str(int(hashlib.sha256(email.encode()).hexdigest(), 16) % 10**21).zfill(21)


class TokenMinter:
    """Holds one RSA key; mints RS256 ID tokens and publishes the key.

    `private_pem` (PKCS#8, unencrypted) reuses a key, e.g. the one a data dir kept across
    a restart; None makes a new one. `private_pem` on the minter is the key in use.
    """

    def __init__(
        self, now: Callable[[], float] = time.time, private_pem: bytes | None = None
    ) -> None:
        self._now = now
        if private_pem is None:
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        else:
            loaded = serialization.load_pem_private_key(private_pem, password=None)
            if not isinstance(loaded, rsa.RSAPrivateKey):
                raise ValueError("the stored OIDC signing key is not an RSA key")
            key = loaded
        public = key.public_key()
        der = public.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.kid = hashlib.sha256(der).hexdigest()[:40]
        self.private_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        self._signer = crypt.RSASigner.from_string(self.private_pem, key_id=self.kid)
        numbers = public.public_numbers()
        self.jwks = {
            "keys": [
                {
                    "kty": "RSA",
                    "alg": "RS256",
                    "use": "sig",
                    "kid": self.kid,
                    "n": _b64url_uint(numbers.n),
                    "e": _b64url_uint(numbers.e),
                }
            ]
        }
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cloudtasks-emulator")])
        start = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + dt.timedelta(days=365))
            .sign(key, hashes.SHA256())
        )
        self.certs = {self.kid: cert.public_bytes(serialization.Encoding.PEM).decode("ascii")}

    def mint(self, email: str, audience: str) -> str:
        """An ID token for `email`, audience `audience`, valid for one hour."""
        issued = int(self._now())
        sub = subject_for(email)
        claims = {
            "aud": audience,
            "azp": sub,
            "email": email,
            "email_verified": True,
            "exp": issued + TOKEN_LIFETIME_S,
            "iat": issued,
            "iss": ISSUER,
            "sub": sub,
        }
        return jwt.encode(self._signer, claims).decode("ascii")


class KeyServer:
    """A loopback HTTP server answering GET /jwks.json and GET /certs.

    Given a `clock` (the emulator's `--manual-clock`), it also answers `GET /_clock`
    and `POST /_clock/advance` with `{"seconds": S}`, each with `{"now": epoch_seconds}`.
    Given a `log`, each GET of the keys logs one line, `keys GET /jwks.json kid=K
    agent=UA`, so a test can see who fetched which key (verifiers cache them, so rare).
    """

    def __init__(
        self,
        minter: TokenMinter,
        host: str,
        port: int,
        clock: ManualClock | None = None,
        *,
        log: Callable[[str], None] | None = None,
    ) -> None:
        documents = {
            "/jwks.json": json.dumps(minter.jwks).encode(),
            "/certs": json.dumps(minter.certs).encode(),
            "/healthz": b'{"status":"ok"}',
        }

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if clock is not None and self.path.split("?", 1)[0] == "/_clock":
                    self._answer(200, {"now": clock()})
                    return
                path = self.path.split("?", 1)[0]
                body = documents.get(path)
                if log is not None and path in ("/jwks.json", "/certs"):
                    agent = ((self.headers.get("User-Agent") or "").split() or ["-"])[0]
                    log(f"keys GET {path} kid={minter.kid} agent={agent[:80]}")
                self.send_response(200 if body is not None else 404)
                body = body if body is not None else b'{"error":"not found"}'
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "public, max-age=3600")
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                if clock is None or self.path.split("?", 1)[0] != "/_clock/advance":
                    self._answer(404, {"error": "not found"})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    seconds = float(json.loads(self.rfile.read(length) or b"{}")["seconds"])
                    self._answer(200, {"now": clock.advance(seconds)})
                except (KeyError, TypeError, ValueError) as exc:
                    self._answer(400, {"error": f"POST /_clock/advance: {exc}"})

            def _answer(self, status: int, document: dict[str, object]) -> None:
                body = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return  # the key server is not worth a log line per fetch

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self.host = host
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="jwks-server", daemon=True
        )

    @property
    def jwks_url(self) -> str:
        return f"http://{self.host}:{self.port}/jwks.json"

    @property
    def certs_url(self) -> str:
        return f"http://{self.host}:{self.port}/certs"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
