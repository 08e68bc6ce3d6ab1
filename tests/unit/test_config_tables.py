"""docs/configuration.md's tables are `python -m tools.config_tables`'s output, and the
generator covers every variable `Config` reads and only names local variables that exist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools import config_tables
from tools.requirements import GenerateError

REPO = Path(__file__).resolve().parents[2]
# The variable the functions framework sets; `Config` reads it to know which function it is.
NOT_CONFIGURATION = {"FUNCTION_TARGET"}


def test_the_doc_is_the_generators_output() -> None:
    assert config_tables.DOC.read_text(encoding="utf-8") == config_tables.generate(), (
        "docs/configuration.md's tables are stale: run `python -m tools.config_tables`"
    )


def test_the_core_table_names_exactly_the_variables_config_reads() -> None:
    read = config_tables.read_names() - NOT_CONFIGURATION
    listed = {row.name for row in config_tables.CORE}
    assert read - listed == set(), f"Config reads variables the doc does not list: {read - listed}"
    assert listed - read == set(), f"the doc lists variables Config never reads: {listed - read}"


def test_every_variable_config_reads_in_production_is_in_the_core_table() -> None:
    from shared.config import PRODUCTION_ENV_NAMES

    deployed = {name for names in PRODUCTION_ENV_NAMES.values() for name in names}
    listed = {row.name for row in config_tables.CORE}
    assert deployed <= listed, f"missing: {deployed - listed}"


def test_every_core_row_names_a_config_field_or_gives_its_default() -> None:
    from shared.config import DEFAULTS

    for row in config_tables.CORE:
        if row.default is None:
            assert row.field is not None and hasattr(DEFAULTS, row.field), row.name


@pytest.mark.parametrize("name", [name for name, _, _ in config_tables.LOCAL])
def test_every_local_variable_is_read_by_a_local_tool(name: str) -> None:
    sources = [*(REPO / "local").rglob("*.py"), *(REPO / "hookledger").rglob("*.py")]
    assert any(re.search(rf"\b{name}\b", path.read_text(encoding="utf-8")) for path in sources), (
        f"{name} is in the doc's local table but no file in local/ or hookledger/ reads it"
    )


def test_the_issue_listed_variables_are_documented() -> None:
    table = config_tables.tables()
    for name in (
        "CLAIMS_DATABASE",
        "OUTBOX_LEASE_S",
        "RECONCILE_BACKOFF_FIRST_S",
        "RECONCILE_BACKOFF_CAP_S",
        "RECONCILE_BACKOFF_JITTER",
        "RECONCILE_URL",
    ):
        assert f"| `{name}` |" in table, name


def test_every_table_row_has_the_headers_cell_count() -> None:
    for block in config_tables.tables().split("\n\n"):
        rows = [line for line in block.splitlines() if line.startswith("|")]
        if rows:
            widths = {line.count(" | ") for line in rows}
            assert len(widths) == 1, block


def test_a_doc_without_its_markers_is_refused() -> None:
    with pytest.raises(GenerateError, match="config-tables"):
        config_tables.replace_between("# no markers\n", "x\n", what="doc")


def test_check_mode_fails_on_a_stale_doc_and_writes_nothing(tmp_path: Path) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text(f"intro\n{config_tables.BEGIN}\nold\n{config_tables.END}\n")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, pathlib; from tools import config_tables as c; "
            f"c.DOC = pathlib.Path({str(stale)!r}); sys.exit(c.main(['--check']))",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "stale" in done.stderr
    assert "old" in stale.read_text()
