"""terraform fmt and checkov over terraform/, both offline (no provider, no download)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TERRAFORM_DIR = REPO / "terraform"
TERRAFORM_CLI = os.environ.get("TERRAFORM", "/usr/local/bin/terraform")
CHECKOV = Path(sys.executable).with_name("checkov")

# Each accepted checkov finding, with the reason written next to it in the .tf file.
ALLOWED_SKIPS = {
    "CKV_GCP_62": "google_storage_bucket.source",
    "CKV_GCP_84": "google_artifact_registry_repository.functions",
    "CKV_GCP_124": "google_cloudfunctions2_function.function",
}


def _offline_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BC_", "PRISMA_"))}
    cli_config = tmp_path / "terraformrc"
    cli_config.write_text("")
    env.update(
        CHECKPOINT_DISABLE="1",  # terraform: no version/security bulletin call home
        TF_CLI_CONFIG_FILE=str(cli_config),
        TF_IN_AUTOMATION="1",
        BC_SKIP_MAPPING="TRUE",  # checkov: no guideline/mapping download
        CKV_SKIP_PACKAGE_UPDATE_CHECK="true",  # checkov: no PyPI version check
        CKV_CACHE_DIR=str(tmp_path / "checkov-cache"),
    )
    return env


def _terraform() -> str:
    path = shutil.which(TERRAFORM_CLI) or shutil.which("terraform")
    if path is None:
        pytest.fail(
            f"terraform CLI not found at {TERRAFORM_CLI} nor on PATH: install Terraform >= 1.5 "
            "(https://developer.hashicorp.com/terraform/install) or set TERRAFORM=/path/to/it"
        )
    return path


def test_terraform_fmt_check_passes(tmp_path: Path) -> None:
    result = subprocess.run(
        [_terraform(), "fmt", "-check", "-recursive", "-diff", str(TERRAFORM_DIR)],
        capture_output=True,
        text=True,
        timeout=60,
        env=_offline_env(tmp_path),
        check=False,
    )
    assert result.returncode == 0, (
        f"terraform fmt -check failed on {TERRAFORM_DIR}; run `terraform fmt -recursive "
        f"terraform`:\n{result.stdout}\n{result.stderr}"
    )


def test_terraform_fmt_check_detects_misformatted_files(tmp_path: Path) -> None:
    # Guards the test above against a CLI that accepts anything.
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "main.tf").write_text('locals {\nx=1\n    yy = "a"\n}\n')
    result = subprocess.run(
        [_terraform(), "fmt", "-check", "-recursive", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        env=_offline_env(tmp_path),
        check=False,
    )
    assert result.returncode != 0
    assert "main.tf" in result.stdout


def _run_checkov(tmp_path: Path) -> dict:
    if not CHECKOV.exists():
        pytest.fail(
            f"checkov not found at {CHECKOV}: install the dev extras (pip install -e '.[dev]')"
        )
    result = subprocess.run(
        [
            str(CHECKOV),
            "--directory",
            str(TERRAFORM_DIR),
            "--framework",
            "terraform",
            "--skip-download",
            "--compact",
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=_offline_env(tmp_path),
        cwd=tmp_path,
        check=False,
    )
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"checkov gave no JSON report (exit {result.returncode}):\n{result.stderr}")
    # One framework gives one report object; several give a list.
    assert isinstance(report, dict), f"expected one terraform report, got {type(report)}"
    return report


@pytest.mark.slow
def test_checkov_reports_no_failed_check_and_only_reasoned_skips(tmp_path: Path) -> None:
    report = _run_checkov(tmp_path)
    summary = report["summary"]
    results = report["results"]
    failed = [
        f"{c['check_id']} {c['resource']} ({c['file_path']}:{c['file_line_range'][0]}): "
        f"{c['check_name']}"
        for c in results["failed_checks"]
    ]
    assert not failed, "checkov failed checks:\n" + "\n".join(failed)
    assert summary["parsing_errors"] == 0, summary
    # It really looked: the bucket, the IAM grants and the functions were all checked.
    assert summary["passed"] >= 20 and summary["resource_count"] >= 40, summary

    skipped = {}
    for check in results["skipped_checks"]:
        resource = re.sub(r"\[[^\]]*\]$", "", check["resource"])
        reason = (check["check_result"].get("suppress_comment") or "").strip()
        assert len(reason) >= 20, f"{check['check_id']} on {resource} is skipped without a reason"
        skipped[check["check_id"]] = resource
    assert skipped == ALLOWED_SKIPS
