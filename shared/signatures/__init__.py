"""Webhook signature verification for GitHub and the Gemini API.

Schemes, one module each
------------------------
- `github`: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>``.
- `standard_webhooks` (Gemini project webhooks): headers ``webhook-id``,
  ``webhook-timestamp`` and ``webhook-signature`` holding one or more space-separated
  ``v1,<base64 HMAC-SHA256>`` entries over ``<id>.<timestamp>.<body>``; secrets are
  ``whsec_<base64>`` and the decoded bytes are the key. ``v1a`` (Ed25519) as the
  Standard Webhooks spec defines it, against ``whpk_`` public keys.
- `dynamic` (Gemini per-request webhooks, as the Gemini "Webhooks" guide documents
  them): an RS256 JWT as the ``webhook-signature`` value, its key found by ``kid`` in
  the JWKS at `GEMINI_JWKS_URL`, checked with PyJWT (`jwt.decode`, `PyJWKClient`).
- `gemini`: `GeminiVerifier`, which sends a Gemini delivery to the scheme it names.
- `jwks`: `parse_jwks`, `public_jwk`, `http_fetch` (the OIDC token keys use them).

Shared rules (`_common`): every verifier takes a list of secrets, the first signs and
every one verifies, and a bad secret raises `SecretError` when the verifier is built;
header names match case-insensitively and a repeated header is rejected; `RequestHeaders`
reads a request's headers once for the many lookups after.

Exceptions (`errors`): ``verify`` raises `VerificationError` (permanent: answer 401), and
a verifier that fetches keys also `KeysUnavailable` (transient, not a `VerificationError`:
answer 503 so the sender retries); `SecretError` is raised only at construction.

Import from this package, not from its modules: the split may move again.
"""

from __future__ import annotations

from shared.signatures._common import (
    AUTHORIZATION_HEADER,
    DEFAULT_TOLERANCE_S,
    GITHUB_SIGNATURE_HEADER,
    MIN_KEY_BYTES,
    WEBHOOK_ID_HEADER,
    WEBHOOK_SIGNATURE_HEADER,
    WEBHOOK_TIMESTAMP_HEADER,
    RequestHeaders,
    header,
)
from shared.signatures.dynamic import (
    DEFAULT_GEMINI_JWKS_URL,
    DynamicDelivery,
    DynamicWebhookVerifier,
    looks_like_jwt,
    sign_jwt_rs256,
)
from shared.signatures.errors import (
    KeysUnavailable,
    SecretError,
    SignatureError,
    VerificationError,
)
from shared.signatures.gemini import GeminiDelivery, GeminiVerifier
from shared.signatures.github import GitHubVerifier, github_headers, sign_github
from shared.signatures.jwks import Fetch, PublicKey, http_fetch, parse_jwks, public_jwk
from shared.signatures.standard_webhooks import (
    StandardWebhookVerifier,
    decode_whpk,
    decode_whsec,
    sign_standard_webhook,
    sign_standard_webhook_ed25519,
)

__all__ = [
    "AUTHORIZATION_HEADER",
    "DEFAULT_GEMINI_JWKS_URL",
    "DEFAULT_TOLERANCE_S",
    "GITHUB_SIGNATURE_HEADER",
    "MIN_KEY_BYTES",
    "WEBHOOK_ID_HEADER",
    "WEBHOOK_SIGNATURE_HEADER",
    "WEBHOOK_TIMESTAMP_HEADER",
    "DynamicDelivery",
    "DynamicWebhookVerifier",
    "Fetch",
    "GeminiDelivery",
    "GeminiVerifier",
    "GitHubVerifier",
    "KeysUnavailable",
    "PublicKey",
    "RequestHeaders",
    "SecretError",
    "SignatureError",
    "StandardWebhookVerifier",
    "VerificationError",
    "decode_whpk",
    "decode_whsec",
    "github_headers",
    "header",
    "http_fetch",
    "looks_like_jwt",
    "parse_jwks",
    "public_jwk",
    "sign_github",
    "sign_jwt_rs256",
    "sign_standard_webhook",
    "sign_standard_webhook_ed25519",
]
