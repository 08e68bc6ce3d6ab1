"""Point the CLI at the local stack (`make run`) when no real project is configured.

For a `demo-` project (the default; Firebase's emulator-only prefix, so it can never
reach real GCP) every unset emulator address gets its local default (docs/architecture.md,
"Contracts"). With a real `GOOGLE_CLOUD_PROJECT` nothing is added: the usual Google
environment applies.
"""

from __future__ import annotations

from collections.abc import MutableMapping

from shared.config import LOCAL_TASKS_SERVICE_ACCOUNT

DEFAULT_PROJECT = "demo-hookledger"
SIMULATOR_URL = "http://127.0.0.1:8090"

LOCAL_DEFAULTS = {
    "FIRESTORE_EMULATOR_HOST": "127.0.0.1:8686",
    "CLOUD_TASKS_EMULATOR_HOST": "127.0.0.1:8123",
    "GEMINI_BASE_URL": SIMULATOR_URL,
    "GEMINI_API_KEY": "local-simulator-key",
    "GITHUB_API_URL": SIMULATOR_URL,
    "TASKS_SERVICE_ACCOUNT": LOCAL_TASKS_SERVICE_ACCOUNT,
}


def apply_local_defaults(env: MutableMapping[str, str]) -> bool:
    """Fill in the local addresses for a `demo-` project; True when the project is local."""
    if not env.get("GOOGLE_CLOUD_PROJECT", DEFAULT_PROJECT).startswith("demo-"):
        return False
    for name, value in LOCAL_DEFAULTS.items():
        if not env.get(name):
            env[name] = value
    return True


def ingress_url(env: MutableMapping[str, str]) -> str:
    """`INGRESS_URL`, else `http://127.0.0.1:$INGRESS_PORT` (8080), without a trailing slash."""
    if env.get("INGRESS_URL"):
        return env["INGRESS_URL"].rstrip("/")
    return f"http://127.0.0.1:{env.get('INGRESS_PORT') or 8080}"


def check_reachable(variable: str, env: MutableMapping[str, str], timeout_s: float = 2.0) -> None:
    """Raise OSError naming `variable` when the emulator it points at does not accept a connection.

    Without this a stopped emulator costs minutes: the Firestore client keeps retrying.
    """
    import socket

    address = env.get(variable, "")
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return
    except OSError as exc:
        raise OSError(
            f"nothing answers at {variable}={address} ({exc.strerror or exc}); "
            "start the local stack with `make run`, or set the variable"
        ) from None
