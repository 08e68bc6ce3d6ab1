"""Loading apps (shared/apps.py): explicit, once per process, and a bad app stops the
function at start with one ERROR line naming it."""

from __future__ import annotations

import logging
import textwrap
import uuid
from pathlib import Path

import functions_framework
import pytest

from shared import apps, handlers, kinds
from tests.unit.test_config_guards import MAIN, PROD, _use


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """`write(source) -> module name`: a module on sys.path, as an app outside the repo."""
    monkeypatch.syspath_prepend(str(tmp_path))
    saved = handlers.snapshot()

    def write(source: str) -> str:
        name = f"app_{uuid.uuid4().hex[:8]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        return name

    yield write
    handlers.restore(saved)


def test_an_app_outside_the_repository_registers_its_handler(app_dir) -> None:
    name = app_dir(
        """
        from shared import api
        app = api.App("outside-" + __name__[-8:])

        @app.handler("github", "issues")
        def on_issue(event, ctx):
            return api.Done("seen")
        """
    )
    [record] = apps.load([name])
    assert record.module == name
    assert [r.app for r in handlers.registrations("github", "issues")] == [record.name]
    assert apps.load([name]) == [record]  # once per process: a second load is free


def test_an_app_that_fails_to_import_is_named(app_dir) -> None:
    name = app_dir("raise RuntimeError('the app is broken')\n")
    with pytest.raises(apps.AppError, match=f"app {name} failed to import: RuntimeError"):
        apps.load([name])


def test_a_module_with_no_app_is_refused(app_dir) -> None:
    name = app_dir("x = 1\n")
    with pytest.raises(apps.AppError, match=f"app {name} defines no `app = App"):
        apps.load([name])


def test_a_kind_or_tag_another_app_has_is_refused_naming_both(app_dir) -> None:
    apps.load(["apps.review"])
    name = app_dir(
        """
        from shared import api
        app = api.App("thief-" + __name__[-8:])
        app.kind(api.OperationKind(name="stolen-" + __name__[-8:], tag="review"))
        """
    )
    with pytest.raises(apps.AppError, match="batch tag 'review' is already registered by app"):
        apps.load([name])
    assert kinds.get("github-review").app == "review"


def test_a_collection_another_app_declared_or_the_ledgers_own_is_refused(app_dir) -> None:
    apps.load(["apps.review"])
    taken = app_dir(
        """
        from shared import api
        app = api.App("copycat-" + __name__[-8:], collections=["reviews"])
        """
    )
    with pytest.raises(apps.AppError, match="collection 'reviews' belongs to app 'review'"):
        apps.load([taken])
    core = app_dir(
        """
        from shared import api
        app = api.App("greedy-" + __name__[-8:], collections=["operations"])
        """
    )
    with pytest.raises(apps.AppError, match="'operations' is the ledger's own"):
        apps.load([core])


def test_a_setting_the_core_reads_is_refused(app_dir) -> None:
    name = app_dir(
        """
        from shared import api
        app = api.App("shadow-" + __name__[-8:], settings=[api.Setting("WORKER_URL")])
        """
    )
    with pytest.raises(apps.AppError, match="setting WORKER_URL is the core's"):
        apps.load([name])


def test_a_bad_module_name_in_hookledger_apps_is_refused() -> None:
    with pytest.raises(apps.AppError, match="is not a module name"):
        apps.names_from_env({"HOOKLEDGER_APPS": "apps.review, not a module"})
    assert apps.names_from_env({"HOOKLEDGER_APPS": " apps.review , "}) == ("apps.review",)
    assert apps.names_from_env({}) == ()


@pytest.mark.parametrize("function", sorted(PROD))
def test_a_function_whose_app_fails_exits_at_start_with_one_line_naming_it(
    function, app_dir, monkeypatch, caplog
) -> None:
    name = app_dir("import no_such_dependency_of_this_app\n")
    _use(monkeypatch, {**PROD[function], "HOOKLEDGER_APPS": f"apps.review,{name}"})
    caplog.set_level(logging.ERROR, logger="hookledger")

    with pytest.raises(SystemExit) as exited:
        functions_framework.create_app(target=function, source=MAIN)

    assert exited.value.code == 1
    [record] = [r for r in caplog.records if r.name.startswith("hookledger")]
    assert record.levelno == logging.ERROR
    assert f"app {name} failed to import" in record.getMessage()
    assert function in record.getMessage()
