"""var.apps and var.app_settings: the archive, the environment and the validations.

These run the Terraform CLI (offline, no provider) on a scratch module holding the real
`apps` and `app_settings` variable blocks of terraform/variables.tf and the real archive
locals of terraform/functions.tf, copied verbatim: `terraform plan` evaluates the
validations as a deployment would, and `terraform console` evaluates fileset() against a
checkout. The catalogue they read, terraform/app_settings.json, must be what
tools/app_settings.py generates from the apps in apps/.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shared.apps import AppRecord, Setting
from shared.config import PRODUCTION_ENV_NAMES
from tests.terraform.test_terraform_tools import _offline_env, _terraform
from tests.terraform.test_terraform_wiring import Module, _load_module
from tools.app_settings import GenerateError, entry, pattern, render
from tools.requirements import RepoApp

REPO = Path(__file__).resolve().parents[2]
TERRAFORM = REPO / "terraform"
CATALOGUE = TERRAFORM / "app_settings.json"
NEVER_DEPLOYED = frozenset({"hookledger", "local", "tests", "bench", "terraform", "docs", "tools"})


@pytest.fixture(scope="module")
def tf() -> Module:
    return _load_module()


# --- the scratch module ---------------------------------------------------------------------


def _top_level_blocks(text: str) -> list[str]:
    """Each top-level block as written (terraform fmt closes one with `}` at column 0)."""
    blocks: list[str] = []
    current: list[str] | None = None
    for line in text.splitlines(keepends=True):
        if current is None:
            if re.match(r"[a-z]+( \"[^\"]+\")* \{$", line.rstrip("\n")):
                current = [line]
        else:
            current.append(line)
            if line.rstrip("\n") == "}":
                blocks.append("".join(current))
                current = None
    return blocks


def _scratch_source() -> str:
    """The apps variables and the app/archive locals, verbatim from terraform/."""
    variables = [
        block
        for block in _top_level_blocks((TERRAFORM / "variables.tf").read_text())
        if block.startswith(('variable "apps" {', 'variable "app_settings" {'))
    ]
    assert len(variables) == 2, "variables.tf must declare `apps` and `app_settings`"
    functions = (TERRAFORM / "functions.tf").read_text()
    archive = [
        block
        for block in _top_level_blocks(functions)
        if block.startswith("locals {") and "  source_files = " in block
    ]
    assert len(archive) == 1, "functions.tf must keep the archive locals in a block of their own"
    app_env = re.findall(r"^  app_env += .*$", functions, flags=re.M)
    assert len(app_env) == 1, "functions.tf must define local.app_env on one line"
    return "\n".join([*variables, *archive, "locals {", app_env[0], "}", ""])


def _module(root: Path, catalogue: str | None = None) -> Path:
    """terraform/ under `root` with the scratch module and a catalogue (default: the real)."""
    module = root / "terraform"
    module.mkdir(parents=True)
    (module / "main.tf").write_text(_scratch_source())
    text = CATALOGUE.read_text() if catalogue is None else catalogue
    (module / "app_settings.json").write_text(text)
    return module


def _bare(tmp_path: Path, catalogue: str) -> Path:
    """A scratch module over the least checkout the archive locals can hash."""
    root = tmp_path / "repo"
    _write(root, "functions/main.py", "functions/requirements.txt", "shared/__init__.py")
    return _module(root, catalogue)


def _write(root: Path, *paths: str) -> None:
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("")


def _checkout(tmp_path: Path) -> Path:
    """The repository as the scratch module sees it: every top-level entry but terraform/
    linked, so fileset() walks the real files and the real hookledger/, local/, tests/."""
    root = tmp_path / "repo"
    root.mkdir()
    for entry_ in REPO.iterdir():
        if entry_.name != "terraform" and not entry_.name.startswith("."):
            (root / entry_.name).symlink_to(entry_)
    return root


def _terraform_cmd(
    module: Path, args: list[str], tfvars: dict[str, Any], tmp_path: Path, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    (module / "terraform.tfvars.json").write_text(json.dumps(tfvars))
    return subprocess.run(
        [_terraform(), *args],
        cwd=module,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=_offline_env(tmp_path),
        check=False,
    )


def _plan(module: Path, tfvars: dict[str, Any], tmp_path: Path) -> tuple[int, str]:
    """(exit code, output with whitespace collapsed: Terraform wraps long messages)."""
    result = _terraform_cmd(module, ["plan", "-input=false", "-no-color"], tfvars, tmp_path)
    return result.returncode, " ".join((result.stdout + result.stderr).split())


def _evaluate(module: Path, expression: str, tfvars: dict[str, Any], tmp_path: Path) -> Any:
    result = _terraform_cmd(
        module, ["console"], tfvars, tmp_path, stdin=f"jsonencode({expression})\n"
    )
    assert result.returncode == 0, f"terraform console failed:\n{result.stdout}{result.stderr}"
    return json.loads(json.loads(result.stdout.strip()))


# --- the archive ----------------------------------------------------------------------------


def _expected_archive(root: Path, packages: list[str]) -> set[str]:
    """main.py's neighbours, requirements.txt, shared/**.py and each package's **.py but
    its own tests (apps/<name>/tests/)."""
    names = {p.name for p in (root / "functions").glob("*.py")} | {"requirements.txt"}
    names |= {f"shared/{name}" for name in _py(root / "shared")}
    names |= {f"shared/{name}" for name in _files(root / "shared", "*.json")}
    for package in packages:
        shipped = (n for n in _py(root / "apps" / package) if not n.startswith("tests/"))
        names |= {f"apps/{package}/{name}" for name in shipped}
    if packages and (root / "apps" / "__init__.py").is_file():
        names.add("apps/__init__.py")
    return names


def _py(directory: Path) -> set[str]:
    """Every .py file under `directory` (through its link), relative to it."""
    return _files(directory, "*.py")


def _files(directory: Path, pattern: str) -> set[str]:
    real = directory.resolve()
    return {p.relative_to(real).as_posix() for p in real.rglob(pattern) if p.is_file()}


@pytest.mark.parametrize(
    ("apps", "packages"),
    [
        (None, ["review"]),  # the default
        (["apps.review", "apps.articles", "apps.classify"], ["review", "articles", "classify"]),
        (["apps.classify"], ["classify"]),
        (["apps.articles", "some_package.app"], ["articles"]),
        (["some_package.app"], []),
    ],
)
def test_the_archive_ships_the_in_repo_apps_named_and_nothing_undeployable(
    tmp_path: Path, apps: list[str] | None, packages: list[str]
) -> None:
    root = _checkout(tmp_path)
    module = _module(root)
    tfvars = {} if apps is None else {"apps": apps}
    names = set(_evaluate(module, "sort(keys(local.source_files))", tfvars, tmp_path))
    assert names == _expected_archive(root, packages)
    assert {"main.py", "requirements.txt", "shared/apps.py"} <= names
    for package in packages:
        assert f"apps/{package}/__init__.py" in names, package
    shipped = {n.split("/")[1] for n in names if n.startswith("apps/") and n.count("/") > 1}
    assert shipped == set(packages), shipped
    leaked = sorted(n for n in names if n.split("/")[0] in NEVER_DEPLOYED)
    assert not leaked, f"the deployed archive would contain {leaked}"
    assert not [n for n in names if "__pycache__" in n or not n.endswith((".py", ".txt", ".json"))]


def test_an_app_package_ships_whole_and_only_its_python(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    _write(
        root,
        "functions/main.py",
        "functions/requirements.txt",
        "functions/fixtures/stub.py",
        "shared/__init__.py",
        "apps/__init__.py",
        "apps/review/__init__.py",
        "apps/review/sub/deep.py",
        "apps/review/tests/test_review.py",  # its kit tests (docs/apps.md) stay home
        "apps/review/prompt.txt",
        "apps/review/__pycache__/deep.cpython-312.pyc",
        "apps/other/__init__.py",
        "hookledger/__init__.py",
        "local/stack.py",
        "tests/test_x.py",
    )
    module = _module(root)
    # A module inside an app ships its whole package, and apps/__init__.py with it.
    names = _evaluate(
        module, "sort(keys(local.source_files))", {"apps": ["apps.review.sub"]}, tmp_path
    )
    assert names == [
        "apps/__init__.py",
        "apps/review/__init__.py",
        "apps/review/sub/deep.py",
        "main.py",
        "requirements.txt",
        "shared/__init__.py",
    ]
    # No in-repo app: not even apps/__init__.py.
    names = _evaluate(module, "sort(keys(local.source_files))", {"apps": ["ext.app"]}, tmp_path)
    assert names == ["main.py", "requirements.txt", "shared/__init__.py"]


def test_every_function_gets_hookledger_apps_and_the_app_settings(
    tf: Module, tmp_path: Path
) -> None:
    module = _module(_checkout(tmp_path))
    tfvars = {
        "apps": ["apps.articles", "apps.review", "ext.app"],
        "app_settings": {"ARTICLES_PATH": "docs", "EXT_FLAG": "on"},
    }
    assert _evaluate(module, "local.app_env", tfvars, tmp_path) == {
        "ARTICLES_PATH": "docs",
        "EXT_FLAG": "on",
        "HOOKLEDGER_APPS": "apps.articles,apps.review,ext.app",
    }
    assert _evaluate(module, "local.app_env", {}, tmp_path) == {"HOOKLEDGER_APPS": "apps.review"}
    # A deployment serves the reference app unless told otherwise (the code's own default,
    # for tools and tests, is no app at all).
    assert tf.variables["apps"]["default"] == [["apps.review"]]


# --- validation of var.apps -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("apps", "message"),
    [
        ([], "apps must name at least one app module"),
        (
            ["apps/review", "apps.review", "1st.app", "apps.re-view"],
            'apps entries must be dotted Python module names such as apps.review, not: "apps/review", "1st.app", "apps.re-view".',
        ),
        (
            ["apps.review", "apps.articles", "apps.review"],
            "apps names a module twice: apps.review.",
        ),
        (["apps"], 'apps names "apps": name an app of apps/ as apps.<name>'),
        (
            ["apps.review", "apps.nope", "apps.gone.sub"],
            "apps names apps.nope, apps.gone.sub, but apps/ has no such package",
        ),
    ],
)
def test_a_bad_apps_list_is_refused_at_plan_naming_the_entries(
    tmp_path: Path, apps: list[str], message: str
) -> None:
    module = _module(_checkout(tmp_path))
    code, output = _plan(module, {"apps": apps}, tmp_path)
    assert code != 0 and message in output, output


def test_the_three_apps_and_an_outside_module_plan(tmp_path: Path) -> None:
    module = _module(_checkout(tmp_path))
    apps = ["apps.review", "apps.articles", "apps.classify", "company_apps.triage"]
    code, output = _plan(module, {"apps": apps}, tmp_path)
    assert code == 0, output


# --- validation of var.app_settings ---------------------------------------------------------

DEMO = AppRecord(
    name="demo",
    module="apps.demo",
    settings=(
        Setting("DEMO_TEXT"),
        Setting("DEMO_INT", type="int", default=1),
        Setting("DEMO_FLOAT", type="float", default=0.5),
        Setting("DEMO_FLAG", type="bool", default=False),
        Setting("DEMO_LIST", type="list", default=()),
        Setting("DEMO_MODE", default="fast", choices=("fast", "slow", "a.b|c")),
        Setting("DEMO_LEVEL", type="int", default=1, choices=(1, 10, -2, 0)),
        Setting("DEMO_RATIO", type="float", default=0.5, choices=(0.5, 2, 0.0)),
        Setting("DEMO_PAIR", type="list", default=("a", "b"), choices=(("a", "b"), ())),
        Setting("DEMO_SWITCH", type="bool", default=True, choices=(True,)),
        Setting("DEMO_TOKEN", default="dev-only-token", secret=True),
    ),
)
DEMO_SETTINGS = {setting.name: setting for setting in DEMO.settings}
# Values Terraform accepts; Setting.parse accepts each of them too.
GOOD: dict[str, list[str]] = {
    "DEMO_TEXT": ["anything at all", ""],
    "DEMO_INT": ["42", " -7 ", "+3", "007"],
    "DEMO_FLOAT": ["0.5", "1e3", ".5", "-2.", "3"],
    "DEMO_FLAG": ["true", "False", " TRUE "],
    "DEMO_LIST": ["a, b,,c", ""],
    "DEMO_MODE": ["fast", " slow ", "a.b|c"],
    "DEMO_LEVEL": ["10", "+10", "010", "-2", "0", "-0", "+00"],
    "DEMO_RATIO": ["0.5", ".50", "2", "2.0", "0", "0.0", ".0"],
    "DEMO_PAIR": ["a,b", " a , b ", ",a,,b,", "", " , "],
    "DEMO_SWITCH": ["true", "TRUE"],
}
# Values Terraform refuses, with what the message says the setting expects.
BAD: dict[str, tuple[str, list[str]]] = {
    "DEMO_INT": ("a whole number", ["abc", "1.5", "", "1_000", "0x10"]),
    "DEMO_FLOAT": ("a number", ["x", "1,5", "inf", "nan"]),
    "DEMO_FLAG": ("true or false", ["maybe", "yes", "1", ""]),
    "DEMO_MODE": ('one of ["fast", "slow", "a.b|c"]', ["medium", "FAST", "a.b", "axb|c"]),
    "DEMO_LEVEL": ("one of [1, 10, -2, 0]", ["2", "1.0", "100", "-20", "1e1"]),
    "DEMO_RATIO": ("one of [0.5, 2, 0.0]", ["0.4", "20", "0.05", "5e-1"]),
    "DEMO_PAIR": ('one of ["a,b", ""]', ["b,a", "a", "a,b,c", "ab"]),
    "DEMO_SWITCH": ("one of [true]", ["false"]),
}
# Refused here though Setting.parse takes them: the catalogue is stricter, never laxer.
STRICTER = {
    ("DEMO_INT", "1_000"),
    ("DEMO_FLOAT", "inf"),
    ("DEMO_FLOAT", "nan"),
    ("DEMO_FLAG", "yes"),
    ("DEMO_FLAG", "1"),
    ("DEMO_FLAG", ""),
    ("DEMO_RATIO", "5e-1"),
}


def _demo_catalogue() -> str:
    return render([RepoApp("apps.demo", DEMO)], reserved=["CORE_ONLY", "HOOKLEDGER_APPS"])


def _rounds(values: dict[str, list[str]]) -> list[dict[str, str]]:
    """app_settings maps, the i-th holding each name's i-th value (a map has one per name)."""
    most = max(len(v) for v in values.values())
    return [{n: v[i] for n, v in values.items() if i < len(v)} for i in range(most)]


def _python_accepts(name: str, value: str) -> bool:
    from shared.errors import ConfigError

    try:
        DEMO_SETTINGS[name].parse(value)
    except ConfigError:
        return False
    return True


def test_the_catalogue_patterns_agree_with_setting_parse() -> None:
    catalogue = json.loads(_demo_catalogue())["settings"]
    for name, values in GOOD.items():
        for value in values:
            assert re.search(catalogue[name]["pattern"], value.strip()), (name, value)
            assert _python_accepts(name, value), (name, value)
    for name, (_, values) in BAD.items():
        for value in values:
            assert not re.search(catalogue[name]["pattern"], value.strip()), (name, value)
            stricter = (name, value) in STRICTER
            assert _python_accepts(name, value) == stricter, (name, value)


def test_good_app_settings_plan(tmp_path: Path) -> None:
    module = _bare(tmp_path, _demo_catalogue())
    for app_settings in _rounds(GOOD):
        # An app from outside the repository: its names are not in the catalogue.
        app_settings["TRIAGE_LABEL"] = "anything goes"
        code, output = _plan(
            module, {"apps": ["company.triage"], "app_settings": app_settings}, tmp_path
        )
        assert code == 0, f"{app_settings}: {output}"


def test_bad_app_settings_values_are_refused_naming_each(tmp_path: Path) -> None:
    module = _bare(tmp_path, _demo_catalogue())
    values = {name: vals for name, (_, vals) in BAD.items()}
    for app_settings in _rounds(values):
        app_settings["DEMO_TEXT"] = "fine"  # a good entry is not named
        code, output = _plan(module, {"apps": ["x.y"], "app_settings": app_settings}, tmp_path)
        assert code != 0, app_settings
        for name, value in app_settings.items():
            if name == "DEMO_TEXT":
                assert "DEMO_TEXT (app demo)" not in output, output
                continue
            expects = BAD[name][0]
            said = f"{name} (app demo) must be {expects}, got {json.dumps(value)}"
            assert said in output, f"{said!r} not in {output}"


@pytest.mark.parametrize(
    ("app_settings", "message"),
    [
        (
            {"demo_text": "x", "1BAD": "y", "DEMO_TEXT": "ok"},
            'app_settings names must be environment variable names matching ^[A-Z][A-Z0-9_]{1,63}$ (as shared.api.Setting requires), not: "1BAD", "demo_text".',
        ),
        (
            {"PORT": "8080", "X_GOOGLE_THING": "1", "DEMO_TEXT": "ok"},
            "app_settings cannot set PORT, X_GOOGLE_THING: Cloud Run functions reserves it.",
        ),
        (
            {"CORE_ONLY": "x", "HOOKLEDGER_APPS": "apps.x", "DEMO_TEXT": "ok"},
            "app_settings cannot set CORE_ONLY, HOOKLEDGER_APPS: Terraform sets it from its own variables",
        ),
        (
            {"DEMO_TOKEN": "s3cret", "DEMO_TEXT": "ok"},
            "app_settings cannot pass DEMO_TOKEN: a secret setting's value would be kept in Terraform state",
        ),
    ],
)
def test_names_app_settings_may_not_set_are_refused(
    tmp_path: Path, app_settings: dict[str, str], message: str
) -> None:
    module = _bare(tmp_path, _demo_catalogue())
    code, output = _plan(module, {"apps": ["x.y"], "app_settings": app_settings}, tmp_path)
    assert code != 0 and message in output, output


def test_a_review_setting_goes_through_var_review_not_app_settings(tmp_path: Path) -> None:
    module = _module(_checkout(tmp_path))
    code, output = _plan(module, {"app_settings": {"REVIEW_PATH": "docs"}}, tmp_path)
    assert code != 0 and "app_settings cannot set REVIEW_PATH" in output, output


def test_a_missing_catalogue_fails_the_plan_naming_it(tmp_path: Path) -> None:
    module = _bare(tmp_path, _demo_catalogue())
    (module / "app_settings.json").unlink()
    code, output = _plan(module, {"apps": ["x.y"]}, tmp_path)
    assert code != 0 and "app_settings.json" in output, output


# --- the committed catalogue ----------------------------------------------------------------


def test_the_committed_catalogue_is_the_generated_one() -> None:
    # A fresh interpreter: this one's app registry holds other tests' apps.
    result = subprocess.run(
        [sys.executable, "-m", "tools.app_settings", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, (
        "terraform/app_settings.json is not what tools/app_settings.py generates (run `make "
        f"requirements`):\n{result.stdout}{result.stderr}"
    )


def test_the_catalogue_reserves_every_name_the_core_sets(tf: Module) -> None:
    catalogue = json.loads(CATALOGUE.read_text())
    expected = {name for env in tf.locals["function_env"].values() for name in env}
    expected |= set(tf.locals["secrets"]) | {"HOOKLEDGER_APPS"}
    expected |= {name for names in PRODUCTION_ENV_NAMES.values() for name in names}
    assert set(catalogue["reserved"]) == expected
    assert catalogue["reserved"] == sorted(catalogue["reserved"])


def test_an_app_setting_terraform_sets_itself_comes_from_var_review(tf: Module) -> None:
    # The review app's settings are var.review's; any other overlap would be set twice.
    catalogue = json.loads(CATALOGUE.read_text())
    overlap = set(catalogue["settings"]) & set(catalogue["reserved"])
    for name in overlap:
        setters = [env[name] for env in tf.locals["function_env"].values() if name in env]
        assert setters, f"{name}: an app's setting the core reserves but Terraform never sets"
        for value in setters:
            assert "var.review." in str(value), f"{name} = {value}: not from var.review"


def test_the_catalogue_describes_each_setting_of_the_in_repo_apps() -> None:
    catalogue = json.loads(CATALOGUE.read_text())
    fields = {"app", "module", "type", "default", "choices", "help", "secret", "pattern"}
    for name, setting in catalogue["settings"].items():
        assert fields | {"expects"} == set(setting), name
        assert re.fullmatch(r"apps\.[a-z_][a-z0-9_]*", setting["module"]), name
        assert (REPO / "apps" / setting["module"].split(".")[1] / "__init__.py").is_file(), name
        re.compile(setting["pattern"])
        if setting["secret"]:
            assert setting["default"] is None, name


# --- the generator's refusals ---------------------------------------------------------------


def test_a_secret_default_never_reaches_the_catalogue() -> None:
    text = _demo_catalogue()
    assert "dev-only-token" not in text
    assert json.loads(text)["settings"]["DEMO_TOKEN"]["default"] is None


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (Setting("BAD_DEFAULT", default=object()), "setting BAD_DEFAULT: default"),
        (
            Setting("BAD_CHOICE", type="int", default=1, choices=(1, "2")),
            "setting BAD_CHOICE: choice '2' is not of the setting's type, int",
        ),
        (
            Setting("BAD_FLOAT", type="float", default=1.0, choices=(1.0, float("inf"))),
            "setting BAD_FLOAT: choice inf is not a finite number",
        ),
    ],
)
def test_a_setting_terraform_cannot_read_is_refused_naming_it(
    setting: Setting, message: str
) -> None:
    record = AppRecord(name="bad", module="apps.bad", settings=(setting,))
    with pytest.raises(GenerateError, match=re.escape(message)):
        entry(RepoApp("apps.bad", record), setting)


def test_a_setting_without_choices_takes_its_types_pattern() -> None:
    assert pattern(Setting("PLAIN")) == ("", "text")
    assert pattern(Setting("COUNT", type="int", default=0))[1] == "a whole number"
