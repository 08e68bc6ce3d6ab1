"""functions/requirements.txt is what tools/requirements.py generates, and the generator
refuses what pip would misread.

The committed file is compared in a fresh interpreter (`python -m tools.requirements
--check`): loading the apps there keeps this process's app registry, which other tests
fill with their own apps, out of it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tools import requirements
from tools.requirements import GenerateError, render, write_or_check

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.requirements", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_committed_requirements_are_the_generated_ones() -> None:
    result = _run("--check")
    assert result.returncode == 0, (
        "functions/requirements.txt is not what tools/requirements.py generates (run `make "
        f"requirements`):\n{result.stdout}{result.stderr}"
    )


def test_the_committed_file_says_it_is_generated_and_how_to_regenerate() -> None:
    text = (REPO / "functions" / "requirements.txt").read_text()
    assert text.startswith(requirements.HEADER), text[:400]
    assert "make requirements" in requirements.HEADER
    assert "python -m tools.requirements" in requirements.HEADER


def test_every_project_dependency_and_app_requirement_is_listed_once() -> None:
    text = render(
        ["flask>=3.0", "PyJWT[crypto] >= 2.8", "google-genai>=3.6,<4"],
        [
            ("apps.alpha", ["numpy>=2", "pyjwt[crypto]>=2.8", "flask>=3.0"]),
            ("apps.beta", ["Flask >= 3.0"]),  # the same requirement spelled otherwise
            ("apps.gamma", ["google-genai<4,>=3.6", "numpy>=2", "pandas; python_version>'3.11'"]),
        ],
    )
    body = text.removeprefix(requirements.HEADER).splitlines()
    assert body == [
        "flask>=3.0",
        "PyJWT[crypto] >= 2.8",
        "google-genai>=3.6,<4",
        "# apps.alpha",
        "numpy>=2",
        # apps.beta adds nothing new: no empty section.
        "# apps.gamma",
        "pandas; python_version>'3.11'",
    ]
    # A different constraint on the same package is kept: pip applies both.
    assert "requests>=2.32" in render(["requests>=2.31"], [("apps.a", ["requests>=2.32"])])


@pytest.mark.parametrize(
    ("requires", "expected"),
    [
        (["--index-url https://evil.example/simple"], "'--index-url https://evil.example/simple'"),
        (["-r other.txt"], "'-r other.txt'"),
        (["numpy>=2\nrequests"], "is not a requirement"),
        (["not a requirement!"], "is not a requirement"),
        ([42], "42 is not a string"),
    ],
)
def test_an_app_requirement_pip_would_misread_is_refused_naming_the_app(
    requires: list[object], expected: str
) -> None:
    with pytest.raises(GenerateError) as caught:
        render(["flask>=3.0"], [("apps.bad", requires)])  # type: ignore[list-item]
    assert "app apps.bad: requires" in str(caught.value)
    assert expected in str(caught.value)


def test_pyproject_without_dependencies_is_refused_naming_it(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n')
    with pytest.raises(GenerateError, match=r"pyproject\.toml: no readable \[project\]"):
        requirements.project_dependencies(pyproject)
    pyproject.write_text('[project]\ndependencies = ["ok>=1", "--pre"]\n')
    with pytest.raises(GenerateError, match=r"\[project\]\.dependencies: '--pre'"):
        requirements.project_dependencies(pyproject)


def test_the_in_repo_apps_are_the_packages_under_apps(tmp_path: Path) -> None:
    assert requirements.repo_app_modules(tmp_path) == []  # no apps/ at all
    for name in ("zeta", "alpha"):
        (tmp_path / "apps" / name).mkdir(parents=True)
        (tmp_path / "apps" / name / "__init__.py").write_text("")
    (tmp_path / "apps" / "data").mkdir()  # not a package
    (tmp_path / "apps" / "loose.py").write_text("")
    assert requirements.repo_app_modules(tmp_path) == ["apps.alpha", "apps.zeta"]


def test_an_app_that_cannot_load_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from shared import apps

    (tmp_path / "apps" / "broken").mkdir(parents=True)
    (tmp_path / "apps" / "broken" / "__init__.py").write_text("")

    def load(modules: list[str]) -> None:
        raise apps.AppError(f"app {modules[0]} failed to import: ImportError: no numpy")

    monkeypatch.setattr(apps, "load", load)
    with pytest.raises(GenerateError, match=r"app apps\.broken failed to import: ImportError"):
        requirements.load_repo_apps(tmp_path)


def test_check_names_the_differing_lines_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "requirements.txt"
    target.write_text("# old\nflask>=2.0\nrequests>=2.31\n")
    expected = "# old\nflask>=3.0\nrequests>=2.31\n"
    assert write_or_check(target, expected, check=True, how="`make requirements`") == 1
    err = capsys.readouterr().err
    assert f"{target} is stale: run `make requirements`" in err
    assert "-flask>=2.0" in err and "+flask>=3.0" in err
    assert "-requests" not in err and "+requests" not in err  # unchanged lines are context
    assert target.read_text() == "# old\nflask>=2.0\nrequests>=2.31\n"
    # Without --check it writes, and then the check passes.
    assert write_or_check(target, expected, check=False, how="") == 0
    assert target.read_text() == expected
    assert write_or_check(target, expected, check=True, how="") == 0


def test_the_command_line_check_fails_on_a_stale_file(tmp_path: Path) -> None:
    # The real entry point against a copy of the repository's file with one line dropped.
    committed = (REPO / "functions" / "requirements.txt").read_text()
    stale = "\n".join(line for line in committed.splitlines() if not line.startswith("flask"))
    code = (
        "import sys, pathlib; from tools import requirements as r; "
        f"r.REQUIREMENTS = pathlib.Path({str(tmp_path / 'requirements.txt')!r}); "
        "sys.exit(r.main(['--check']))"
    )
    (tmp_path / "requirements.txt").write_text(stale + "\n")
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "is stale: run `make requirements`" in result.stderr
    assert "+flask>=3.0" in result.stderr, result.stderr
