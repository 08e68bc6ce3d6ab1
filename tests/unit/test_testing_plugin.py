"""The kit's pytest plugin without a stack: light at import, the apps a test's markers
name, the crash plan's file (hookledger/testing/plugin.py, local/crash_plan.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hookledger.testing import plugin
from local import crash_plan

REPO = Path(__file__).resolve().parents[2]


def test_importing_the_plugin_starts_and_imports_nothing_of_the_stack() -> None:
    code = (
        "import sys, hookledger.testing.plugin\n"
        "heavy = [m for m in ('local.processes', 'hookledger.testing.stack', 'google.cloud.firestore')"
        " if m in sys.modules]\n"
        "print(heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


class Item(SimpleNamespace):
    def iter_markers(self, name: str) -> list[Any]:
        return [m for m in self.marks if m.name == name]


def mark(*args: Any) -> Any:
    return SimpleNamespace(name=plugin.MARKER, args=args)


def test_a_test_gets_the_apps_its_own_markers_name_in_first_seen_order() -> None:
    # iter_markers yields the closest first: the test's own, its class's, its module's.
    items = [
        Item(nodeid="a", marks=[mark("apps.one", "apps.two")]),
        Item(nodeid="b", marks=[]),
        Item(nodeid="c", marks=[mark("apps.two"), mark("my_project.apps.three", "apps.two")]),
    ]

    assert [plugin.marked_apps(item) for item in items] == [  # type: ignore[arg-type]
        ("apps.one", "apps.two"),
        (),
        ("apps.two", "my_project.apps.three"),
    ]


@pytest.mark.parametrize("module", ["apps/one", "", "apps.", 3])
def test_a_marker_naming_no_module_is_a_usage_error_naming_the_test(module: Any) -> None:
    config = SimpleNamespace(stash=pytest.Stash())

    with pytest.raises(pytest.UsageError, match=r"test_x\.py::t: hookledger_apps takes module"):
        plugin.pytest_collection_modifyitems(
            config,  # type: ignore[arg-type]
            [Item(nodeid="test_x.py::t", marks=[mark(module)])],  # type: ignore[list-item]
        )


def test_a_plan_counts_its_crashes_and_keeps_them_once_disarmed(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    crash_plan.write_plan(path, "outbox.posted", times=2)

    crash_plan.disarm(path)

    assert crash_plan.read_plan(path) == {"point": None, "left": 0, "crashed": []}
    with pytest.raises(KeyError, match=r"shared/crashpoints\.py"):
        crash_plan.write_plan(path, "outbox.postd")
    with pytest.raises(ValueError, match="times must be 0 or more"):
        crash_plan.write_plan(path, "outbox.posted", times=-1)


def test_the_hook_of_a_process_without_a_plan_does_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(crash_plan.CRASH_PLAN_VARIABLE, str(tmp_path / "none.json"))
    crash_plan.write_plan(tmp_path / "other.json", "outbox.posted")

    crash_plan.hook("outbox.posted")  # returns: this process's plan file does not exist


def test_a_process_at_the_planned_point_exits_and_is_recorded(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    crash_plan.write_plan(path, "outbox.posted", times=1)
    code = (
        "from local import crash_plan\n"
        "crash_plan.hook('outbox.marked')\n"  # another point: goes on
        "crash_plan.hook('outbox.posted')\n"
        "print('survived')\n"
    )
    env = {"PATH": "", crash_plan.CRASH_PLAN_VARIABLE: str(path)}

    died = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    again = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )

    assert (died.returncode, died.stdout) == (crash_plan.CRASH_EXIT_CODE, "")
    assert (again.returncode, again.stdout.strip()) == (0, "survived")  # times=1: once only
    plan = crash_plan.read_plan(path)
    assert plan["left"] == 0
    assert [c["point"] for c in plan["crashed"]] == ["outbox.posted"]


def test_processes_reaching_the_point_together_crash_only_as_often_as_planned(
    tmp_path: Path,
) -> None:
    path, go = tmp_path / "plan.json", tmp_path / "go"
    crash_plan.write_plan(path, "outbox.posted", times=1)
    code = (
        "import pathlib, sys, time\n"
        "from local import crash_plan\n"
        "print('ready', flush=True)\n"
        "while not pathlib.Path(sys.argv[1]).exists():\n"
        "    time.sleep(0.001)\n"
        "crash_plan.hook('outbox.posted')\n"
        "print('survived')\n"
    )
    env = {"PATH": "", crash_plan.CRASH_PLAN_VARIABLE: str(path)}
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(go)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for racer in racers:  # every one waits at the line before the hook
        assert racer.stdout is not None and racer.stdout.readline().strip() == "ready"
    go.touch()
    ends = sorted(racer.wait(timeout=60) for racer in racers)
    for racer in racers:
        assert racer.stdout is not None
        racer.stdout.close()

    assert ends == [0, 0, 0, crash_plan.CRASH_EXIT_CODE]
    plan = crash_plan.read_plan(path)
    assert (plan["left"], len(plan["crashed"])) == (0, 1)
