"""The official Firestore emulator (from the gcloud CLI), started on a chosen loopback port."""

from __future__ import annotations

import os
import shutil
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from local.processes import Service, ServiceError, printed, start

INSTALL_HINT = (
    "The Firestore emulator was not found. Install the gcloud CLI "
    "(https://cloud.google.com/sdk/docs/install), then run "
    "`gcloud components install cloud-firestore-emulator` "
    "(on a Debian package install: `apt-get install google-cloud-cli-firestore-emulator`). "
    "Java 17+ must be on PATH. Or set FIRESTORE_EMULATOR_BIN to the "
    "`cloud_firestore_emulator` script."
)


def find_emulator() -> Path:
    """Locate the `cloud_firestore_emulator` script; raise `ServiceError` with how to install."""
    explicit = os.environ.get("FIRESTORE_EMULATOR_BIN")
    candidates: list[Path] = [Path(explicit)] if explicit else []
    gcloud = shutil.which("gcloud")
    if gcloud:
        sdk_root = Path(os.path.realpath(gcloud)).parent.parent
        candidates.append(sdk_root / "platform/cloud-firestore-emulator/cloud_firestore_emulator")
    candidates += [
        Path(
            "/usr/lib/google-cloud-sdk/platform/cloud-firestore-emulator/cloud_firestore_emulator"
        ),
        Path("/opt/google-cloud-sdk/platform/cloud-firestore-emulator/cloud_firestore_emulator"),
    ]
    for candidate in candidates:
        if candidate.is_file():
            if shutil.which("java") is None and "JAVA" not in os.environ:
                raise ServiceError("Java is not on PATH; the Firestore emulator needs Java 17+.")
            return candidate
    raise ServiceError(INSTALL_HINT)


def start_firestore(
    port: int,
    host: str = "127.0.0.1",
    *,
    timeout: float = 90.0,
    echo: Callable[[str, str], None] | None = None,
) -> Service:
    """Start the emulator on `host:port`; returns once it answers."""
    script = find_emulator()
    return start(
        "firestore",
        [str(script), "start", f"--host={host}", f"--port={port}"],
        env=os.environ.copy(),
        ready=printed("Dev App Server is now running"),
        timeout=timeout,
        echo=echo,
    )


def reset(host_port: str, project: str, database: str = "(default)") -> None:
    """Delete every document in one of `project`'s databases (the emulator's reset endpoint).

    The emulator serves any named database on first use (no setup): the claim store's
    (`CLAIMS_DATABASE`) is reset by naming it here.
    """
    url = f"http://{host_port}/emulator/v1/projects/{project}/databases/{database}/documents"
    request = urllib.request.Request(url, method="DELETE")
    # The emulator's first request warms its JVM: seconds on a loaded machine, hence 30 s.
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (loopback)
        response.read()


def client_on(host_port: str, project: str) -> Any:
    """A Firestore client on the emulator at `host_port`, whatever this process's
    environment says (the client reads FIRESTORE_EMULATOR_HOST when it is built)."""
    from google.cloud import firestore

    previous = os.environ.get("FIRESTORE_EMULATOR_HOST")
    os.environ["FIRESTORE_EMULATOR_HOST"] = host_port
    try:
        return firestore.Client(project=project)
    finally:
        if previous is None:
            os.environ.pop("FIRESTORE_EMULATOR_HOST", None)
        else:
            os.environ["FIRESTORE_EMULATOR_HOST"] = previous
