"""The pytest plugin of hookledger's test kit (entry point `pytest11: hookledger`).

    pytestmark = pytest.mark.hookledger_apps("apps.myapp")

    def test_push(hookledger):
        sent = hookledger.send_github("push", github_example("push-with-new-branch"))
        assert hookledger.wait_handled(sent) == {"myapp": "done"}

The marker names the apps under test (module names, as HOOKLEDGER_APPS takes them), on a
module (`pytestmark`), a class or a test; a test gets exactly the apps its markers name.
The emulators start when the first test asks for the `hookledger` fixture and run until
the end of the session; the simulator and the functions start again only when a test
names other apps, or other app settings, than the one before it. Everything is stopped
by PID at the end of the session. Importing this module starts nothing and imports
nothing of hookledger's.

App settings: the functions get the apps' declared settings as `os.environ` holds them
when the fixture is set up, so set them in a fixture listed before `hookledger`:

    @pytest.fixture
    def two_labels(monkeypatch):
        monkeypatch.setenv("CLASSIFY_LABELS", "bug,feature")

    def test_two_labels(two_labels, hookledger): ...

or in the test with `hookledger.use_settings(CLASSIFY_LABELS="bug,feature")`, first thing.
The next test runs with its own. The functions act as a GitHub App installed on the
accounts of `hookledger.testing.INSTALLATIONS`.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from hookledger.testing.stack import Stack

MARKER = "hookledger_apps"
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# How much of each function's output a failing test's report shows.
SHOWN_OUTPUT_CHARS = 6000


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*modules): the apps the `hookledger` fixture's stack loads "
        "(module names, as HOOKLEDGER_APPS takes them)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A bad marker is a usage error before any test runs."""
    for item in items:
        marked_apps(item)


def marked_apps(item: pytest.Item) -> tuple[str, ...]:
    """The apps `item`'s markers name (test, class, module), in first-seen order."""
    apps: list[str] = []
    for mark in item.iter_markers(MARKER):
        for module in mark.args:
            if not isinstance(module, str) or not _MODULE.fullmatch(module):
                raise pytest.UsageError(
                    f"{item.nodeid}: {MARKER} takes module names such as 'apps.myapp', "
                    f"got {module!r}"
                )
            if module not in apps:
                apps.append(module)
    return tuple(apps)


@pytest.fixture(scope="session")
def hookledger_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """The session's stack: its emulators started, no apps running yet."""
    from hookledger.testing.launch import start_stores
    from hookledger.testing.stack import Stack
    from local.processes import ServiceError

    try:
        stores = start_stores()
    except ServiceError as exc:
        pytest.fail(f"the hookledger test stack did not start: {exc}", pytrace=False)
    try:
        workdir = tmp_path_factory.mktemp("hookledger")
    except BaseException:
        stores.stop()
        raise
    stack = Stack(stores, root=Path(request.config.rootpath), workdir=workdir)
    try:
        yield stack
    finally:
        stack.close()


@pytest.fixture
def hookledger(request: pytest.FixtureRequest, hookledger_stack: Stack) -> Stack:
    """The session's stack running this test's marked apps, emptied for this test
    (hookledger/testing/stack.py)."""
    from local.processes import ServiceError

    apps = marked_apps(request.node)
    if not apps:
        pytest.fail(
            f"{request.node.nodeid} uses the `hookledger` fixture but names no app: mark it "
            f"(or its module) with pytest.mark.{MARKER}('apps.NAME')",
            pytrace=False,
        )
    try:
        hookledger_stack.use(apps)
    except ServiceError as exc:
        pytest.fail(f"the hookledger test stack could not run {list(apps)}: {exc}", pytrace=False)
    hookledger_stack.reset()
    return hookledger_stack


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failing test that used the stack shows what its functions printed last."""
    report = yield
    stack = getattr(item, "funcargs", {}).get("hookledger")
    if report.failed and stack is not None:
        for name in ("ingress", "worker", "reconcile"):
            report.sections.append(
                (f"hookledger {name} output", stack.output(name)[-SHOWN_OUTPUT_CHARS:])
            )
    return report
