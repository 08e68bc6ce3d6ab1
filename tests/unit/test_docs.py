"""The user docs say only what the code does: every `hookledger` command and `make` target
they quote exists, every table row has its header's cells, every `docs/architecture.md`
heading the code cites exists, the reliability page lists the real scenarios and crash
points, and the README stays a newcomer's page (at most 300 lines, no revision history)."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookledger.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
USER_DOCS = sorted(
    [REPO / "README.md", *(REPO / "docs").glob("*.md"), REPO / "terraform/README.md"]
)
SHELL_LANGUAGES = {"sh", "bash", "shell", "console"}
ARCHITECTURE = REPO / "docs" / "architecture.md"
CODE_SUFFIXES = {".py", ".tf"}
CODE_DIRS = (
    "shared",
    "apps",
    "functions",
    "hookledger",
    "local",
    "tools",
    "bench",
    "tests",
    "terraform",
)


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def fenced_blocks(text: str) -> Iterator[tuple[str, int, list[str]]]:
    """(language, first line number, lines) of each fenced code block."""
    language: str | None = None
    start, lines = 0, list[str]()
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            if language is None:
                language, start, lines = stripped[3:].strip().lower(), number + 1, []
            else:
                yield language, start, lines
                language = None
        elif language is not None:
            lines.append(line)


def shell_commands(lines: list[str], first: int) -> Iterator[tuple[int, list[str]]]:
    """(line number, words) of each simple command; continuations joined, `$ ` dropped."""
    joined: list[tuple[int, str]] = []
    pending, at = "", first
    for offset, line in enumerate(lines):
        if not pending:
            at = first + offset
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        joined.append((at, pending + line))
        pending = ""
    for number, line in joined:
        line = re.sub(r"^\s*\$\s+", "", line)
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue  # not shell (an output line quoting a lone apostrophe)
        command: list[str] = []
        for word in [*words, ";"]:
            if word in {"|", "||", "&&", ";", "&"}:
                if command:
                    yield number, command
                command = []
            else:
                command.append(word)


def without_env(words: list[str]) -> list[str]:
    """The command after any leading `NAME=value` assignments."""
    index = 0
    while index < len(words) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[index]):
        index += 1
    return words[index:]


def is_hookledger(word: str) -> bool:
    return word == "hookledger" or word.endswith("/bin/hookledger")


def quoted_commands() -> Iterator[tuple[str, list[str]]]:
    """("doc:line", words) of every `hookledger` or `make` command in a fenced shell block."""
    for doc in USER_DOCS:
        for language, first, lines in fenced_blocks(doc.read_text(encoding="utf-8")):
            if language not in SHELL_LANGUAGES:
                continue
            for number, words in shell_commands(lines, first):
                words = without_env(words)
                if words and (is_hookledger(words[0]) or words[0] == "make"):
                    yield f"{rel(doc)}:{number}", words


def parse_error(argv: list[str]) -> str | None:
    """What the CLI's own parser says about `argv`, or None when it accepts it."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:
            if exc.code not in (0, None):
                return stderr.getvalue().strip() or f"exit {exc.code}"
    return None


def makefile_targets() -> set[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, flags=re.MULTILINE))


COMMANDS = list(quoted_commands())


def test_the_docs_quote_commands() -> None:
    # Guards the tests below against a parser of the docs that finds nothing.
    assert sum(is_hookledger(words[0]) for _, words in COMMANDS) >= 3
    assert sum(words[0] == "make" for _, words in COMMANDS) >= 3


@pytest.mark.parametrize(
    ("where", "words"), [c for c in COMMANDS if is_hookledger(c[1][0])], ids=lambda v: str(v)
)
def test_every_quoted_hookledger_command_parses(where: str, words: list[str]) -> None:
    problem = parse_error(words[1:])
    assert problem is None, f"{where}: `{shlex.join(words)}`: {problem}"


@pytest.mark.parametrize(
    ("where", "words"), [c for c in COMMANDS if c[1][0] == "make"], ids=lambda v: str(v)
)
def test_every_quoted_make_target_exists(where: str, words: list[str]) -> None:
    targets = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    missing = set(targets) - makefile_targets()
    assert not missing, f"{where}: `{shlex.join(words)}`: no such Makefile target {missing}"


def test_the_terraform_readme_quotes_the_makefiles_deploy_targets_as_they_are() -> None:
    text = (REPO / "terraform/README.md").read_text(encoding="utf-8")
    blocks = [lines for language, _, lines in fenced_blocks(text) if language == "make"]
    assert len(blocks) == 1, "terraform/README.md should quote one make block"
    quoted = "\n".join(blocks[0]) + "\n"
    assert quoted in (REPO / "Makefile").read_text(encoding="utf-8"), (
        "terraform/README.md 'Makefile targets' differs from the Makefile: copy it again"
    )


def test_a_bad_command_or_flag_is_caught() -> None:
    assert parse_error(["webhooks", "register", "--url", "https://x"]) is not None
    assert parse_error(["no-such-command"]) is not None
    assert parse_error(["webhooks", "register", "--uri", "https://x"]) is None
    assert "plan" in makefile_targets() and "no-such-target" not in makefile_targets()


def test_commands_are_found_after_a_prompt_env_and_continuation() -> None:
    lines = ["$ GEMINI_API_KEY=k .venv/bin/hookledger webhooks register \\", "  --uri U  # c"]
    ((number, words),) = list(shell_commands(lines, 10))
    assert number == 10
    assert without_env(words) == [".venv/bin/hookledger", "webhooks", "register", "--uri", "U"]


# --- inline commands: `hookledger …` quoted in prose ---------------------------------------


def subcommand_options(argv: list[str]) -> tuple[list[str], set[str]]:
    """The subcommand path `argv` names and the options that subcommand takes."""
    parser: argparse.ArgumentParser = build_parser()
    path: list[str] = []
    for word in argv:
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers or word not in subparsers[0].choices:
            break
        parser = subparsers[0].choices[word]
        path.append(word)
    options = {o for action in parser._actions for o in action.option_strings}
    return path, options


# `hookledger` in prose that is not a command: log lines and the check run's name.
NOT_COMMANDS = {"ready", "stopped", "review", "operation"}


def inline_commands() -> Iterator[tuple[str, str]]:
    for doc in USER_DOCS:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for span in re.findall(r"`([^`]+)`", line):
                words = without_env(span.split())
                if len(words) > 1 and is_hookledger(words[0]) and words[1] not in NOT_COMMANDS:
                    yield f"{rel(doc)}:{number}", " ".join(words)


@pytest.mark.parametrize(("where", "span"), list(inline_commands()), ids=lambda v: str(v))
def test_every_inline_hookledger_command_names_real_commands_and_flags(
    where: str, span: str
) -> None:
    words = span.split()[1:]
    path, options = subcommand_options(words)
    assert path, f"{where}: `{span}`: no such command"
    flags = {re.sub(r"[\[\](),]|=.*$", "", w) for w in words if w.lstrip("[(").startswith("--")}
    unknown = flags - options
    assert not unknown, f"{where}: `{span}`: {' '.join(path)} has no {sorted(unknown)}"


# --- links -----------------------------------------------------------------------------------


@pytest.mark.parametrize("doc", USER_DOCS, ids=rel)
def test_every_relative_link_names_a_file_that_exists(doc: Path) -> None:
    text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.DOTALL)
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    missing = [
        t
        for t in targets
        if not t.startswith(("http://", "https://", "#", "mailto:"))
        and not (doc.parent / t.split("#", 1)[0]).exists()
    ]
    assert not missing, f"{rel(doc)} links to files that do not exist: {missing}"


# --- tables ---------------------------------------------------------------------------------


def cells(row: str) -> int:
    """A GFM table row's cell count: pipes split cells unless escaped, even in code spans."""
    inner = row.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return len(re.split(r"(?<!\\)\|", inner))


@pytest.mark.parametrize("doc", USER_DOCS, ids=rel)
def test_every_table_row_has_its_headers_cell_count(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    in_code = False
    header: tuple[int, int] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("```"):
            in_code = not in_code
            continue
        if in_code or not line.lstrip().startswith("|"):
            header = None
            continue
        if header is None:
            header = (number, cells(line))
            continue
        assert cells(line) == header[1], (
            f"{rel(doc)}:{number} has {cells(line)} cells; its header (line {header[0]}) "
            f"has {header[1]}"
        )


def test_a_short_row_is_caught() -> None:
    assert cells("| a | b | c |") == 3
    assert cells("| `x\\|y` | b |") == 2
    assert cells("| a | b |") != cells("| a | b | c |")


# --- docs/architecture.md headings cited by the code ----------------------------------------


def headings() -> set[str]:
    found = set()
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            found.add(line.lstrip("#").strip().replace("`", "").lower())
    return found


def anchors() -> set[str]:
    """GitHub's anchors of the headings: lower case, punctuation dropped, spaces to '-'."""
    return {re.sub(r"[^\w\- ]", "", h).replace(" ", "-") for h in headings()}


def names_a_heading(cited: str, known: set[str]) -> bool:
    cited = cited.replace("`", "").lower().strip()
    return any(h == cited or h.startswith((cited + " ", cited + ":")) for h in known)


def citations() -> Iterator[tuple[str, str]]:
    """(file, cited heading or #anchor) of every `docs/architecture.md` citation in code."""
    pattern = re.compile(
        r'architecture\.md(?:,|:)?\s*\(?\s*"([A-Za-z`][^"]{0,60})"|architecture\.md#([\w-]+)'
    )
    for top in CODE_DIRS:
        for path in (REPO / top).rglob("*"):
            if path.suffix not in CODE_SUFFIXES or ".venv" in path.parts or path == Path(__file__):
                continue
            text = path.read_text(encoding="utf-8")
            # A citation may wrap onto a comment's next line.
            flat = re.sub(r"\s*\n\s*(#\s*)?", " ", text)
            for match in pattern.finditer(flat):
                yield rel(path), match.group(1) or "#" + match.group(2)


CITATIONS = sorted(set(citations()))


def test_the_code_cites_architecture_headings() -> None:
    assert len(CITATIONS) > 50  # the search above finds the citations


@pytest.mark.parametrize(("path", "cited"), CITATIONS, ids=lambda v: str(v))
def test_every_cited_architecture_heading_exists(path: str, cited: str) -> None:
    if cited.startswith("#"):
        assert cited[1:] in anchors(), f"{path} links docs/architecture.md{cited}: no such heading"
    else:
        assert names_a_heading(cited, headings()), (
            f'{path} cites docs/architecture.md, "{cited}": no such heading'
        )


def test_a_missing_heading_is_caught() -> None:
    assert names_a_heading("Worker", {"worker (post /; private, called by cloud tasks)"})
    assert not names_a_heading("Ledger", headings())


# --- docs/reliability.md against the code ---------------------------------------------------


def first_column(doc: Path, header: str) -> list[str]:
    lines = doc.read_text(encoding="utf-8").splitlines()
    start = lines.index(header) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[1].strip())
    return rows


def test_the_scenario_table_lists_every_chaos_scenario() -> None:
    from local.chaos.scenarios import SCENARIOS

    listed = [
        n.strip("`")
        for n in first_column(REPO / "docs/reliability.md", "| scenario | what happens |")
    ]
    assert sorted(listed) == sorted(SCENARIOS)


def test_the_crash_point_table_lists_every_crash_point() -> None:
    from shared.crashpoints import POINTS

    lines = (REPO / "docs/reliability.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("| path | crash points |") + 2
    listed = set()
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        listed |= set(re.findall(r"`([a-z_.]+)`", line.split("|")[2]))
    assert listed == set(POINTS)


# --- the README -----------------------------------------------------------------------------


def test_the_readme_is_at_most_300_lines() -> None:
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 300


HISTORY = re.compile(
    r"\b[Ii]ssue[ -]\d+|load average|--compare [0-9a-f]{7,40}\b|\b(?=[0-9a-f]*\d)[0-9a-f]{40}\b"
)


@pytest.mark.parametrize("doc", USER_DOCS, ids=rel)
def test_user_docs_quote_no_issue_numbers_revisions_or_machine_load(doc: Path) -> None:
    found = [
        f"{rel(doc)}:{n}: {m.group(0)}"
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
        for m in HISTORY.finditer(line)
    ]
    assert not found, found
