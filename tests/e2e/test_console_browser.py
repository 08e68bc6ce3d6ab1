"""The console in a real headless Chromium, over a ledger filled by the real pipeline.

Pushes go through the ingress, the worker submits batches to the simulator, the simulator
completes them (one webhook sent, one dropped and settled by a reconcile run, one left
running), and one delivery dies (GitHub 502s with WORKER_MAX_RETRIES=0). Chromium and
chromedriver are Debian's (`make browser` installs them); Selenium never downloads
anything (explicit driver path, SE_OFFLINE=1). Screenshots go to a temporary folder, or to
`SCREENSHOTS_DIR` when set: `make screenshots` refreshes docs/screenshots/ that way.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
import requests

from local.processes import ServiceError
from shared import tracing
from shared.config import LOCAL_TASKS_SERVICE_ACCOUNT
from shared.entrypoints import runtime
from shared.handoff.tasks import ensure_queue, make_client
from tests.plugins.pipeline import OWNER_REPO, PROJECT, pipeline_stack, push_payload
from tests.trace_samples import PUSH_ROWS, push_trace
from tests.waiting import wait_until

SHOTS_VARIABLE = "SCREENSHOTS_DIR"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SHA_WEBHOOK, SHA_DROPPED, SHA_RUNNING, SHA_DEAD = (f"{c * 40}" for c in "abcd")
FILES = {"docs/intro.md": b"# Intro\n\nHookledger settles things.\n"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go: never the tree, unless `make screenshots` asks for it."""
    chosen = os.environ.get(SHOTS_VARIABLE)
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.fail(
            f"{CHROMIUM} / {CHROMEDRIVER} missing: run `make browser` (Debian's chromium and "
            "chromium-driver)",
            pytrace=False,
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "1"  # Selenium Manager must never fetch a driver or browser
    options = Options()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1100",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def filled(firestore_client, firestore_emulator, cloudtasks_emulator_fast, monkeypatch, tmp_path):
    """The pipeline run for four pushes and a reconcile run, every function tracing into the
    span store as `make run` does (TRACE_DIR under tmp_path; the reconcile run in this
    process too), and the console serving it."""
    cloudtasks = cloudtasks_emulator_fast
    queue = f"console-{uuid.uuid4().hex[:8]}"
    ensure_queue(
        make_client(cloudtasks.host),
        f"projects/{PROJECT}/locations/us-central1/queues/{queue}",
    )
    extra = {
        "TASKS_QUEUE": queue,
        "RECONCILE_GRACE_S": "0",
        "WORKER_MAX_RETRIES": "0",
        "TRACE_DIR": str(tmp_path / "traces"),
        "TRACING": "file",
        "TRACE_SAMPLE_RATIO": "1",
    }
    try:
        with pipeline_stack(firestore_emulator, cloudtasks, extra) as stack:
            for name, value in {
                "GOOGLE_CLOUD_PROJECT": PROJECT,
                "CLOUD_TASKS_EMULATOR_HOST": cloudtasks.host,
                "WORKER_URL": f"{stack.worker_url}/",
                "TASKS_SERVICE_ACCOUNT": LOCAL_TASKS_SERVICE_ACCOUNT,
                "GEMINI_BASE_URL": stack.sim_url,
                "GEMINI_API_KEY": "sim-key",
                **extra,
            }.items():
                monkeypatch.setenv(name, value)
            runtime.reset()
            try:
                run_pipeline(stack)
                with console() as url:
                    yield stack, url
            finally:
                runtime.reset()
    except ServiceError as exc:
        pytest.fail(str(exc), pytrace=False)


def run_pipeline(stack: Any) -> None:
    ledger = runtime.ledger()

    def pushed(sha: str, delivery: str) -> Any:
        stack.put_files(sha, FILES)
        assert stack.push(push_payload(sha, list(FILES)), delivery).status_code == 202
        return wait_until(
            lambda: ledger.queries.find_operation("context.sha", sha), 60, f"operation of {sha[:6]}"
        )

    sent = pushed(SHA_WEBHOOK, "push-webhook")
    stack.sim.complete(sent.name, webhook="send")
    dropped = pushed(SHA_DROPPED, "push-dropped")
    stack.sim.complete(dropped.name, webhook="drop")
    pushed(SHA_RUNNING, "push-running")
    wait_until(
        lambda: (ledger.operations.get(sent.name) or sent).settled_by, 60, "the webhook settles"
    )
    # The dead delivery: its one file fetch fails retryably, and no retry is allowed.
    stack.put_files(SHA_DEAD, FILES)
    stack.sim.github_fault("docs/intro.md", status=502, count=3)  # the client tries 3 times
    assert stack.push(push_payload(SHA_DEAD, list(FILES)), "push-dead").status_code == 202
    wait_until(
        lambda: (ledger.deliveries.get("github", "push-dead") or sent).status == "dead",
        60,
        "the delivery dies",
    )
    from shared.gemini import GeminiGateway
    from shared.gemini import make_client as gemini_client
    from shared.reconcile import Reconciler

    gemini = GeminiGateway(gemini_client("sim-key", stack.sim_url, timeout_s=5))
    reconciler = Reconciler.from_config(runtime.config(), ledger, gemini, adopt_orphans=False)
    with _reconcile_tracing():
        report = reconciler.run()
    # The dropped webhook's batch is settled here; the running one (at least) is deferred.
    assert report.settled == 1 and report.deferred >= 1, report.to_dict()


def _reconcile_tracing() -> AbstractContextManager[None]:
    """This process traces its reconcile run as the reconcile function would."""
    from shared.tracing.otel import OtelTracer
    from shared.tracing.store import SpanFileWriter

    service = "hookledger-reconcile"
    sink = SpanFileWriter(runtime.config().trace_dir, service)
    return tracing.installed(OtelTracer(service, PROJECT, 1.0, sink))


class console:
    """The console app served on a free loopback port in this process (real replay)."""

    def __enter__(self) -> str:
        from werkzeug.serving import make_server

        from hookledger.console import create_app

        self.server = make_server("127.0.0.1", 0, create_app(runtime.ledger), threaded=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_port}"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


def shot(driver: Any, shots: Path, name: str) -> None:
    height = driver.execute_script("return document.body.scrollHeight")
    driver.set_window_size(1280, max(800, min(int(height) + 40, 2400)))
    assert driver.save_screenshot(str(shots / f"{name}.png"))


def text(driver: Any, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.ID, element_id).text).strip()


def rows(driver: Any, css: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, css))


def gone(element: Any) -> bool:
    """True once `element`'s document was replaced. Selenium's `staleness_of` expects a
    StaleElementReferenceException only; chromedriver may instead answer an element of a
    document being torn down with "Node with given id does not belong to the document"
    (an unknown error), which means the same."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    try:
        element.is_enabled()
    except StaleElementReferenceException:
        return True
    except WebDriverException as exc:
        if "does not belong to the document" in str(exc.msg or ""):
            return True
        raise
    return False


def click_through(driver: Any, element_id: str, lands_on: str) -> None:
    """Click `element_id` and return once the NEW page, whose URL contains `lands_on`, loaded.

    A click only starts the navigation: the old document stays readable until the new one
    replaces it, so reading right after the click can see the page before the click. Wait
    for the old root to go stale, then for the new document to finish loading.
    """
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    old_root = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.ID, element_id).click()
    wait = WebDriverWait(driver, 60)
    wait.until(lambda _d: gone(old_root), f"{element_id}: the page was never replaced")
    wait.until(
        lambda d: (
            lands_on in d.current_url
            and d.execute_script("return document.readyState") == "complete"
        ),
        f"{element_id}: no loaded page at a URL containing {lands_on!r}",
    )


def test_the_console_shows_the_ledger_and_replays_the_dead_delivery(filled, browser, shots):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _, url = filled
    ledger = runtime.ledger()
    driver = browser

    driver.get(url + "/")
    pending = ledger.queries.count_operations("pending")
    assert pending >= 1
    assert (text(driver, "ops-succeeded"), text(driver, "ops-pending")) == ("2", str(pending))
    assert text(driver, "deliveries-dead") == "1" and text(driver, "dead-count") == "1"
    assert (text(driver, "settled-webhook"), text(driver, "settled-reconcile")) == ("1", "1")
    assert len(rows(driver, "#chart-settlements svg rect.bar-W")) == 1
    assert len(rows(driver, "#chart-settlements svg rect.bar-R")) == 1
    assert len(rows(driver, "#chart-latency svg circle.p50")) == 1
    shot(driver, shots, "overview")

    driver.get(url + "/operations")
    assert len(rows(driver, "tr.op-row")) == ledger.queries.count_operations() >= 3
    Select(driver.find_element(By.ID, "filter-status")).select_by_value("pending")
    click_through(driver, "apply-filters", "status=pending")
    assert len(rows(driver, "tr.op-row")) == pending
    Select(driver.find_element(By.ID, "filter-status")).select_by_value("")
    Select(driver.find_element(By.ID, "filter-settled_by")).select_by_value("reconcile")
    click_through(driver, "apply-filters", "settled_by=reconcile")
    assert len(rows(driver, "tr.op-row")) == 1
    shot(driver, shots, "operations")

    running = ledger.queries.find_operation("context.sha", SHA_RUNNING)
    driver.get(f"{url}/operations/{running.name}")
    assert len(rows(driver, "#timeline li.ev-check")) == 1
    assert text(driver, "attempts") == "1"
    [answer] = rows(driver, "#timeline li.ev-answer")  # the check's own answer, from Gemini
    assert "still running" in answer.text
    shot(driver, shots, "operation")

    driver.get(url + "/deliveries")
    everything = len(rows(driver, "tr.delivery-row"))
    driver.find_element(By.ID, "filter-source").send_keys("gemini")
    click_through(driver, "apply-filters", "source=gemini")
    gemini_rows = rows(driver, "tr.delivery-row")
    assert 0 < len(gemini_rows) < everything
    assert all("gemini:" in row.text for row in gemini_rows)
    driver.get(url + "/deliveries")
    shot(driver, shots, "deliveries")

    # No CSRF token: refused, nothing changes.
    forged = requests.post(f"{url}/deliveries/github/push-dead/replay", data={}, timeout=10)
    assert forged.status_code == 403
    assert ledger.deliveries.get("github", "push-dead").status == "dead"

    driver.get(f"{url}/deliveries/github/push-dead")
    click_through(driver, "replay-link", "/replay")
    shot(driver, shots, "replay-confirm")
    click_through(driver, "confirm-replay", "?replayed=")
    assert "Replay enqueued" in text(driver, "replayed")

    def shows_done() -> bool:
        driver.refresh()
        return text(driver, "delivery-status") == "done"

    wait_until(shows_done, 60, "the replayed delivery shows done", every=0.5)
    shot(driver, shots, "delivery")
    assert OWNER_REPO  # the replayed push reviewed the same repository
    assert ledger.queries.find_operation("context.sha", SHA_DEAD) is not None

    driver.get(url + "/reconcile")
    assert len(rows(driver, "tr.run-row")) == 1
    shot(driver, shots, "reconcile")


TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_the_operation_and_delivery_pages_draw_the_push_trace(filled, browser):
    """The dropped-webhook push's spans (tests/trace_samples.py) stored where the console
    reads them; both pages draw them as one waterfall, the reconcile 3 minutes later."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    _, url = filled
    driver = browser
    dropped = runtime.ledger().queries.find_operation("context.sha", SHA_DROPPED)
    # Beside the pipeline's own trace of the push, a sample naming its operation and delivery.
    store = Path(runtime.config().trace_dir)
    spans = push_trace(TRACE, "push-dropped", dropped.name)
    (store / "hookledger-worker-1.jsonl").write_text("".join(s.to_json() + "\n" for s in spans))
    chart = f"#waterfall-{TRACE}"

    for page in (f"/operations/{dropped.name}", "/deliveries/github/push-dropped"):
        driver.get(url + page)
        WebDriverWait(driver, 30).until(
            ec.presence_of_element_located((By.CSS_SELECTOR, chart)), f"{page}: no waterfall"
        )
        names = [row.get_attribute("data-name") for row in rows(driver, f"{chart} g.span-row")]
        assert names == [name for name, _ in PUSH_ROWS], page
        gaps = [gap.text for gap in rows(driver, f"{chart} text.wf-gap")]
        assert gaps == ["⋯ 2.1 s until worker.attempt", "⋯ 3 min 2 s until reconcile.check"]
        failed = rows(driver, f"{chart} g.span-row.status-error")
        assert [row.get_attribute("data-name") for row in failed] == [
            "worker.attempt",
            "github.request",
        ]
        note = failed[0].find_element(By.CSS_SELECTOR, "text.wf-note").text
        assert note.startswith("✕ error") and "retry 0" in note and "HTTP 503" in note
        assert text(driver, f"trace-{TRACE}").startswith(f"trace {TRACE}")


# A push's spans in the order the waterfall draws their first rows (tree order: a parent
# before its children, siblings by start), as the traced pipeline above makes them.
PUSH_SPANS = [
    "ingress.request",
    "ingress.verify",
    "ingress.hand_off",
    "tasks.create_task",
    "worker.attempt",
    "gemini.batches.create",
    "reconcile.check",
    "settle",
    "gemini.batches.get",
]


def test_the_pages_draw_the_trace_the_pipeline_recorded(filled, browser, shots):
    """Every function traced for real (TRACING=file): the dropped-webhook push's operation
    page and delivery page draw its one trace, from the ingress to reconcile's settlement;
    the dead push's trace is drawn with its failed attempt."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    _, url = filled
    driver = browser
    dropped = runtime.ledger().queries.find_operation("context.sha", SHA_DROPPED)
    trace_id = tracing.trace_id_of(dropped.trace)
    assert trace_id is not None, "the operation stores the run that registered it"
    chart = f"#waterfall-{trace_id}"

    for page, shot_name in (
        (f"/operations/{dropped.name}", "waterfall-operation"),
        ("/deliveries/github/push-dropped", "waterfall-delivery"),
    ):
        driver.get(url + page)
        WebDriverWait(driver, 30).until(
            ec.presence_of_element_located((By.CSS_SELECTOR, chart)), f"{page}: no waterfall"
        )
        names = [row.get_attribute("data-name") for row in rows(driver, f"{chart} g.span-row")]
        firsts = [name for index, name in enumerate(names) if name not in names[:index]]
        assert [name for name in firsts if name in PUSH_SPANS] == PUSH_SPANS, page
        assert "firestore.commit" in names and "github.request" in names, page
        figure_shot(driver, shots, f"trace-{trace_id}", shot_name)

    driver.get(url + "/deliveries/github/push-dead")
    WebDriverWait(driver, 30).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, "g.span-row.status-error")),
        "the dead push's failed attempt",
    )
    failed = [row.get_attribute("data-name") for row in rows(driver, "g.span-row.status-error")]
    assert "worker.attempt" in failed and "github.request" in failed


def figure_shot(driver: Any, shots: Path, element_id: str, name: str) -> None:
    """A screenshot of one element, the page first made tall enough to hold it whole."""
    from selenium.webdriver.common.by import By

    height, chrome = driver.execute_script(
        "return [document.body.scrollHeight, window.outerHeight - window.innerHeight]"
    )
    # The viewport, not the window, must hold the page: an element below it is cut.
    driver.set_window_size(1280, int(height) + int(chrome) + 40)
    assert driver.find_element(By.ID, element_id).screenshot(str(shots / f"{name}.png"))


@pytest.fixture
def app_filled(firestore_client, firestore_emulator, cloudtasks_emulator_fast, monkeypatch):
    """One push through the pipeline as a GitHub App, settled, its check run completed; the
    console (this process, the same App's credentials) serving it."""
    import json

    from tests.integration.test_github_app_pipeline import CLIENT_ID, INSTALLATION, PEM, PUBLIC

    queue = f"console-app-{uuid.uuid4().hex[:8]}"
    ensure_queue(
        make_client(cloudtasks_emulator_fast.host),
        f"projects/{PROJECT}/locations/us-central1/queues/{queue}",
    )
    app_env = {"GITHUB_APP_ID": CLIENT_ID, "GITHUB_APP_PRIVATE_KEY": PEM}
    extra = {"TASKS_QUEUE": queue, **app_env}
    try:
        with pipeline_stack(firestore_emulator, cloudtasks_emulator_fast, extra) as stack:
            for name, value in {
                "GOOGLE_CLOUD_PROJECT": PROJECT,
                "GITHUB_API_URL": stack.sim_url,
                **app_env,
            }.items():
                monkeypatch.setenv(name, value)
            runtime.reset()
            try:
                app = stack.sim.register_github_app(client_id=CLIENT_ID, public_key=PUBLIC)
                owner = OWNER_REPO.split("/")[0]
                stack.sim.install_github_app(
                    app["id"], owner, repositories=[OWNER_REPO], id=INSTALLATION
                )
                stack.put_files(SHA_WEBHOOK, FILES)
                payload = json.loads(push_payload(SHA_WEBHOOK, list(FILES)))
                payload["installation"] = {"id": INSTALLATION}
                assert stack.push(json.dumps(payload).encode(), "app-push").status_code == 202
                ledger = runtime.ledger()
                op = wait_until(
                    lambda: ledger.queries.find_operation("context.sha", SHA_WEBHOOK),
                    60,
                    "the App push's operation",
                )
                # The in_progress run first: the page under test shows a settled push's run.
                wait_until(
                    lambda: not any(i.open for i in ledger.operations.get(op.name).outbox),
                    60,
                    "the check run shown in progress",
                )
                stack.sim.complete(op.name, webhook="send")

                def completed() -> Any:
                    runs = stack.sim.check_runs(repo=OWNER_REPO, sha=SHA_WEBHOOK)
                    return runs if runs and runs[0]["status"] == "completed" else None

                [run] = wait_until(completed, 60, "the check run completed")
                with console() as url:
                    yield url, op.name, run
            finally:
                runtime.reset()
    except ServiceError as exc:
        pytest.fail(str(exc), pytrace=False)


def test_the_operation_page_shows_the_push_check_run_and_links_to_it(app_filled, browser, shots):
    url, name, run = app_filled
    driver = browser
    driver.get(url + "/operations")
    assert len(rows(driver, "tr.op-row")) == 1
    click_through(driver, "op-link-1", "/operations/")
    assert name in driver.current_url
    assert text(driver, "check-run-status") == "completed"
    assert text(driver, "check-run-conclusion") == run["conclusion"]
    assert text(driver, "check-run-annotations") == str(run["output"]["annotations_count"])
    link = rows(driver, "#check-run-link")[0]
    assert link.get_attribute("href") == run["html_url"]
    assert link.text == f"#{run['id']}"
    shot(driver, shots, "operation-check-run")
