"""docs/apps.md's complete examples are the apps' files, word for word: each block marked
`<!-- file: PATH -->` must equal PATH, and those apps' kit tests run in `make test`, so
an example can never drift from code that works. The first example stays small."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "apps.md"
MARKED = re.compile(r"<!-- file: (?P<path>[^ ]+) -->\n```python\n(?P<code>.*?)\n```", re.S)


def _examples() -> dict[str, str]:
    return {m["path"]: m["code"] for m in MARKED.finditer(DOC.read_text(encoding="utf-8"))}


def test_each_marked_example_is_its_file_word_for_word() -> None:
    examples = _examples()
    assert {"apps/labeller/__init__.py", "apps/summaries/__init__.py"} <= set(examples)
    for path, code in examples.items():
        assert (REPO / path).read_text(encoding="utf-8").rstrip("\n") == code, (
            f"docs/apps.md's example {path} differs from the file: copy the file into the doc"
        )
        tests = (REPO / path).parent / "tests"
        assert list(tests.glob("test_*.py")), f"{path} has no kit test under {tests}"


def test_the_first_example_is_an_app_in_a_screenful() -> None:
    first = next(iter(_examples()))
    assert first == "apps/labeller/__init__.py"
    source = (REPO / first).read_text(encoding="utf-8")
    assert len(source.splitlines()) <= 60
    names = {
        node.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "api"
    }
    assert len(names) <= 8, sorted(names)
    assert "submit" in source and '@app.on("issues.opened"' in source
