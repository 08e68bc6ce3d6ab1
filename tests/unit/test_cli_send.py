"""`hookledger send SOURCE EVENT PAYLOAD`, against a loopback ingress that records what it
got: what is signed and sent, the exit status for each answer, and the refusals that send
nothing. The real ingress and a handler: tests/integration/test_cli_send.py.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from hookledger.cli import main
from hookledger.testing import github_example_path
from shared.config import LOCAL_GITHUB_SECRET
from shared.signatures import sign_github
from tests.plugins.loopback import QuietHandler, Serve

PUSH = github_example_path("push")


class Ingress(QuietHandler):
    """Answers each POST with `status` and a JSON body; keeps (path, headers, body)."""

    status: ClassVar[int] = 202
    received: ClassVar[list[tuple[str, dict[str, str], bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.received.append((self.path, dict(self.headers.items()), body))
        answer = json.dumps({"status": "queued" if self.status == 202 else "refused"}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


@pytest.fixture
def ingress(serve: Serve) -> Iterator[Any]:
    Ingress.status, Ingress.received = 202, []
    os.environ.pop("GITHUB_WEBHOOK_SECRETS", None)
    os.environ["GOOGLE_CLOUD_PROJECT"] = "demo-hookledger"
    server = serve(Ingress)
    os.environ["INGRESS_URL"] = server.url
    yield server


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_recorded_push_is_sent_byte_for_byte_signed_with_the_local_secret(
    ingress: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "send", "github", "push", str(PUSH), "--delivery", "d-1", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "ingress": f"{ingress.url}/github",
        "source": "github",
        "event": "push",
        "delivery_id": "d-1",
        "status": 202,
        "answer": {"status": "queued"},
    }
    [(path, headers, body)] = Ingress.received
    assert (path, body) == ("/github", PUSH.read_bytes())
    assert headers["X-GitHub-Event"] == "push"
    assert headers["X-GitHub-Delivery"] == "d-1"
    assert headers["X-Hub-Signature-256"] == sign_github(LOCAL_GITHUB_SECRET, body)


def test_the_first_configured_secret_signs_and_ingress_overrides_the_environment(
    ingress: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    os.environ["GITHUB_WEBHOOK_SECRETS"] = "the-new-github-secret,the-old-github-secret"
    os.environ["INGRESS_URL"] = "http://127.0.0.1:9"  # unused: --ingress wins
    code, out, err = run(capsys, "send", "github", "push", str(PUSH), "--ingress", ingress.url)
    assert (code, err) == (0, "")
    [(_, headers, body)] = Ingress.received
    assert headers["X-Hub-Signature-256"] == sign_github("the-new-github-secret", body)
    assert "status       202" in out and headers["X-GitHub-Delivery"] in out


def test_stdin_is_read_for_a_dash(
    ingress: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b'{"zen": "Keep it simple"}')))
    assert run(capsys, "send", "github", "ping", "-")[0] == 0
    assert [body for _, _, body in Ingress.received] == [b'{"zen": "Keep it simple"}']


def test_a_refusing_ingress_exits_1_naming_its_url_and_status(
    ingress: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    Ingress.status = 401
    code, out, err = run(capsys, "send", "github", "push", str(PUSH), "--json")
    assert code == 1
    assert json.loads(out)["status"] == 401
    assert err == f"hookledger: error: the ingress at {ingress.url}/github answered 401\n"


def test_an_ingress_that_does_not_answer_exits_1_naming_it(
    ingress: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    url = ingress.url
    ingress.close()  # the port is free now: nothing answers there
    code, out, err = run(capsys, "send", "github", "push", str(PUSH))
    assert (code, out) == (1, "")
    assert f"the ingress at {url} does not answer" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("name", "argv", "env", "reason"),
    [
        ("unknown source", ["gitlab", "push", str(PUSH)], {}, "unknown source 'gitlab'"),
        ("no such file", ["github", "push", "missing.json"], {}, "missing.json: cannot read"),
        ("a directory", ["github", "push", str(PUSH.parent)], {}, "cannot read the payload"),
        (
            "over the ingress's limit",
            ["github", "push", str(PUSH)],
            {"MAX_BODY_BYTES": "100"},
            "over the ingress's limit of 100",
        ),
        (
            "a Gemini body of another type",
            ["gemini", "batch.succeeded", "BODY"],
            {},
            "the body's type is 'batch.failed', not 'batch.succeeded'",
        ),
        (
            "no secret to sign with",
            ["github", "push", str(PUSH)],
            {"GITHUB_WEBHOOK_SECRETS": ""},
            "configuration: GITHUB_WEBHOOK_SECRETS is set but holds no secret",
        ),
        (
            "a real project with no secret set",
            ["github", "push", str(PUSH)],
            {"GOOGLE_CLOUD_PROJECT": "acme-prod", "GITHUB_WEBHOOK_SECRETS": None},
            "GITHUB_WEBHOOK_SECRETS is not set: nothing to sign the github event with",
        ),
        (
            "a secret too short to sign with",
            ["github", "push", str(PUSH)],
            {"GITHUB_WEBHOOK_SECRETS": "short"},
            "configuration: GitHub secret #1 is shorter than 16 bytes",
        ),
    ],
)
def test_a_bad_argument_exits_2_and_sends_nothing(
    ingress: Any,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    name: str,
    argv: list[str],
    env: dict[str, str | None],
    reason: str,
) -> None:
    body = tmp_path / "gemini.json"
    body.write_text(json.dumps({"type": "batch.failed", "data": {"id": "batches/1"}}))
    for variable, value in env.items():  # None: unset
        if value is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = value
    code, out, err = run(capsys, "send", *[str(body) if a == "BODY" else a for a in argv])
    assert (code, out) == (2, ""), name
    assert reason in err and err.count("\n") == 1, f"{name}: {err}"
    assert Ingress.received == [], name


def test_send_needs_no_firestore(ingress: Any, capsys: pytest.CaptureFixture[str]) -> None:
    os.environ["FIRESTORE_EMULATOR_HOST"] = "127.0.0.1:9"  # nothing listens there
    assert run(capsys, "send", "github", "push", str(PUSH))[0] == 0
