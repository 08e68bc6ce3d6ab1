"""The ingress's cold start never loads the Firestore or Gemini clients, nor OpenTelemetry
while tracing is off (the default), whatever events its apps handle.

Each check runs in a fresh interpreter (this test process has long since imported
everything), loads functions/main.py with functions-framework's real loader for a set of
apps (HOOKLEDGER_APPS), serves requests through its test client, then reports what
`sys.modules` holds. Besides `/healthz`, it sends each event the apps register a handler
for, signed: GitHub's example payload of that event (hookledger/testing/payloads; its
first `{event}-{action}` one), else a minimal payload with an `action`.
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
DEPLOYED = ("apps.review",)  # functions/main.py's default HOOKLEDGER_APPS
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


def probe(
    requests: list[tuple[str, str, dict[str, str], str]], apps: tuple[str, ...] = DEPLOYED
) -> dict[str, object]:
    env = {
        **os.environ,
        "HOOKLEDGER_APPS": ",".join(apps),  # whatever the shell says
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


def handled_events(apps: tuple[str, ...]) -> list[str]:
    """The GitHub events `apps` register a handler for (learnt in a child process)."""
    from hookledger.testing.launch import registrations

    found = registrations(apps, REPO).handlers
    events = [key.split(":", 1) for key, names in found.items() if set(names) - {CORE}]
    assert all(source == "github" for source, _ in events), events  # only GitHub's are signed here
    return sorted(event for _, event in events)


def signed_event(event: str, number: int) -> tuple[str, str, dict[str, str], str]:
    """`event` as GitHub sends it: its example payload, else `{"action": ...}`, signed."""
    from hookledger.sending import github_headers
    from hookledger.testing.examples import PAYLOADS
    from shared.config import LOCAL_GITHUB_SECRET

    examples = sorted((PAYLOADS / "github").glob(f"{event}-*.json"))
    example = PAYLOADS / "github" / f"{event}.json"
    chosen = examples[0] if examples else example if example.is_file() else None
    body = chosen.read_bytes() if chosen else json.dumps({"action": "opened"}).encode()
    headers = github_headers(event, body, LOCAL_GITHUB_SECRET, f"cold-start-{event}-{number}")
    return ("POST", "/github", {"Content-Type": "application/json", **headers}, body.decode())


HEALTHZ = ("GET", "/healthz", {}, "")
CORE = "hookledger"  # the core's own handlers (installations, Gemini's events)
# The deployed default app; an app on `issues` only (its handler never runs here).
APP_SETS = [DEPLOYED, ("tests.integration.kit_probe_app",)]


CASES = [
    ("loaded only", [], []),
    ("after /healthz", [HEALTHZ], [200]),
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


@pytest.mark.parametrize("apps", APP_SETS, ids=[",".join(a) for a in APP_SETS])
def test_no_event_an_app_handles_loads_firestore_or_gemini(apps: tuple[str, ...]) -> None:
    events = handled_events(apps)
    requests = [HEALTHZ, *(signed_event(event, n) for n, event in enumerate(events))]

    report = probe(requests, apps)

    answered = report["statuses"]
    assert isinstance(answered, list)
    statuses = dict(zip(["healthz", *events], answered, strict=True))
    # Verified and decided: handed off (503: no queue answers: the whole request path) or,
    # refused by its app, ignored (200).
    assert events and all(status in (200, 503) for status in statuses.values()), statuses
    assert 503 in statuses.values(), statuses  # at least one went the whole way to the hand-off
    loaded = report["loaded"]
    assert isinstance(loaded, dict)
    assert loaded["shared.entrypoints.ingress"] and loaded["google.cloud.tasks_v2"], apps
    assert [module for module in HEAVY if loaded[module]] == [], (apps, statuses)
