"""docs/performance.md "Scale" is `python -m bench.capacity --inputs docs/capacity-inputs.json --markdown`.

docs/capacity-inputs.json records the measured figures the tables were made from
(`--save-inputs`); they sit between the capacity markers in docs/performance.md. Nothing is
measured or timed here: the model runs on the recorded figures and Terraform's defaults.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench._capacity import Deployment, Measured, model, render_markdown
from bench._limits import DOCUMENTED

REPO = Path(__file__).resolve().parents[2]
INPUTS = REPO / "docs" / "capacity-inputs.json"
PERFORMANCE = REPO / "docs" / "performance.md"
BEGIN, END = "<!-- capacity:begin -->", "<!-- capacity:end -->"


def scale_tables() -> str:
    text = PERFORMANCE.read_text()
    assert BEGIN in text and END in text, f"docs/performance.md has no {BEGIN} ... {END} section"
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def test_the_scale_tables_are_the_models_output_for_the_recorded_inputs() -> None:
    inputs = Measured.from_json(json.loads(INPUTS.read_text()))
    expected = render_markdown(model(inputs, Deployment.from_terraform()))
    assert scale_tables() == expected, (
        "docs/performance.md 'Scale' differs from `python -m bench.capacity --inputs "
        "docs/capacity-inputs.json --markdown`: paste that command's output between the markers"
    )


def test_every_documented_limit_in_the_doc_has_a_source_url() -> None:
    tables = scale_tables()
    for limit in DOCUMENTED:
        assert limit.source.startswith("https://"), limit.key
        assert f"<{limit.source}>" in tables, (
            f"{limit.key}: its source is not in docs/performance.md"
        )


def test_the_cli_prints_one_json_object_from_recorded_inputs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.capacity", "--inputs", str(INPUTS)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout)
    assert result["benchmark"] == "capacity"
    assert [r["pushes_per_s"] for r in result["tiers"]] == [10, 100, 100, 1000, 1000, 10000]
    markdown = subprocess.run(
        [sys.executable, "-m", "bench.capacity", "--inputs", str(INPUTS), "--markdown"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert markdown == scale_tables()
    assert "| 10 sustained |" in markdown
