"""The ingress's cold start never loads the Firestore or Gemini clients, nor OpenTelemetry
while tracing is off (the default).

Each check runs in a fresh interpreter (this test process has long since imported
everything), loads functions/main.py with functions-framework's real loader, serves
requests through its test client, then reports what `sys.modules` holds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Each case starts a fresh interpreter that imports the SDKs: several seconds each.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# google-api-core loads the `opentelemetry` namespace itself; the SDK is what tracing adds.
HEAVY = ("google.cloud.firestore", "google.cloud.firestore_v1", "google.genai", "opentelemetry.sdk")

# Prints {"statuses": [...], "loaded": {module: bool}} after serving the requests in argv[1].
PROBE = """
import json, sys
import functions_framework

import os
os.environ["FUNCTION_TARGET"] = "ingress"  # as deployed: main.py checks and configures it
app = functions_framework.create_app(target="ingress", source="functions/main.py")
client = app.test_client()
statuses = []
for method, path, headers, body in json.loads(sys.argv[1]):
    statuses.append(client.open(path, method=method, headers=headers, data=body.encode()).status_code)
names = json.loads(sys.argv[2])
print(json.dumps({"statuses": statuses, "loaded": {n: n in sys.modules for n in names}}))
"""


def probe(requests: list[tuple[str, str, dict[str, str], str]]) -> dict[str, object]:
    env = {
        **os.environ,
        "GOOGLE_CLOUD_PROJECT": "demo-hookledger",
        # Nothing listens on port 9: a hand-off fails fast with 503 instead of reaching GCP.
        "CLOUD_TASKS_EMULATOR_HOST": "127.0.0.1:9",
        "TASKS_TIMEOUT_S": "2",
    }
    env.pop("FIRESTORE_EMULATOR_HOST", None)
    env.pop("TRACING", None)
    names = [*HEAVY, "google.cloud.tasks_v2", "shared.entrypoints.ingress"]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(requests), json.dumps(names)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"probe failed:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def signed_push() -> tuple[str, str, dict[str, str], str]:
    from shared.config import LOCAL_GITHUB_SECRET
    from shared.signatures import sign_github

    body = (REPO / "tests/fixtures/github/push-with-new-branch.payload.json").read_bytes()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": "cold-start-delivery-1",
        "X-Hub-Signature-256": sign_github(LOCAL_GITHUB_SECRET, body),
    }
    return ("POST", "/github", headers, body.decode())


HEALTHZ = ("GET", "/healthz", {}, "")


CASES = [
    ("loaded only", [], []),
    ("after /healthz", [HEALTHZ], [200]),
    # Verify, seal and attempt the hand-off (no queue answers: 503): the whole request path.
    ("after a signed push", [HEALTHZ, signed_push()], [200, 503]),
]


@pytest.mark.parametrize(
    ("name", "requests", "statuses"), [pytest.param(*c, id=c[0]) for c in CASES]
)
def test_ingress_never_loads_firestore_or_gemini(
    name: str, requests: list[tuple[str, str, dict[str, str], str]], statuses: list[int]
) -> None:
    report = probe(requests)
    assert report["statuses"] == statuses, name
    loaded = report["loaded"]
    assert isinstance(loaded, dict)
    # The probe sees real imports: the ingress module and the Tasks client are loaded.
    assert loaded["shared.entrypoints.ingress"] and loaded["google.cloud.tasks_v2"], name
    assert [module for module in HEAVY if loaded[module]] == [], name
