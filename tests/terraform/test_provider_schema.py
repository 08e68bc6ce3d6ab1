"""terraform/ against the Google provider's own schema (the pinned major), offline.

The schema comes from the cdktn-provider-google wheel that `make provider-schema` downloads
(tools/tfschema/requirements.txt); tools/tfschema reads it without importing it. The broken
copies below prove each rule can fail, with a message naming file, line, block and argument.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import hcl2
import pytest

from tools.tfschema import ProviderSchema, SchemaError, blocks_checked, check_files, load_pinned

REPO = Path(__file__).resolve().parents[2]
TERRAFORM = REPO / "terraform"


@pytest.fixture(scope="module")
def schema() -> ProviderSchema:
    try:
        return load_pinned()
    except SchemaError as exc:
        pytest.fail(str(exc))


def _tf_files(directory: Path) -> list[Path]:
    files = sorted(directory.glob("*.tf"))
    assert files, f"no .tf files in {directory}"
    return files


def test_the_provider_pin_is_the_major_of_the_schema(schema: ProviderSchema) -> None:
    versions = hcl2.loads((TERRAFORM / "versions.tf").read_text())
    google = versions["terraform"][0]["required_providers"][0]["google"][0]
    assert google["source"] == "hashicorp/google"
    assert google["version"] == f"~> {schema.major()}.0", (
        f"versions.tf pins google {google['version']} but the schema is provider "
        f"{schema.provider_version} ({schema.package}): move both together"
    )


def test_every_google_block_in_terraform_matches_the_provider_schema(
    schema: ProviderSchema,
) -> None:
    files = _tf_files(TERRAFORM)
    findings = check_files(files, schema, REPO)
    assert not findings, (
        f"terraform/ does not match the google provider {schema.provider_version} schema:\n"
        + "\n".join(str(f) for f in findings)
    )
    # It really looked: every resource file's google blocks were checked.
    checked = blocks_checked(files)
    assert len(checked) >= 25, checked
    assert "google_cloudfunctions2_function.function" in checked


# --- the check can fail: broken copies of the real files ----------------------------------------

# (name, file, text to replace, replacement, the finding expected after "<file>:<line>: ")
BROKEN = [
    (
        "misspelled argument in a nested block",
        "tasks.tf",
        "    max_attempts  = var.queue.max_attempts",
        "    max_attempt   = var.queue.max_attempts",
        "google_cloud_tasks_queue.deliveries: retry_config.max_attempt: unsupported argument 'max_attempt'",
    ),
    (
        "missing required argument",
        "tasks.tf",
        "  location = var.region\n  name     = var.queue.name\n\n  retry_config",
        "  name     = var.queue.name\n\n  retry_config",
        "google_cloud_tasks_queue.deliveries: location: required argument is missing",
    ),
    (
        "misspelled argument inside a dynamic block's content",
        "functions.tf",
        "        key        = secret_environment_variables.value",
        "        kee        = secret_environment_variables.value",
        "google_cloudfunctions2_function.function: service_config.secret_environment_variables.kee: unsupported argument 'kee'",
    ),
    (
        "nested block at the wrong depth",
        "functions.tf",
        "    source {\n      storage_source {",
        "    storage_source {\n      source {",
        "google_cloudfunctions2_function.function: build_config.storage_source: unsupported block 'storage_source'",
    ),
    (
        "block written as an attribute",
        "functions.tf",
        "  versioning {\n    enabled = true\n  }",
        "  versioning = {\n    enabled = true\n  }",
        "google_storage_bucket.source: versioning: is a block",
    ),
    (
        "attribute written as a block",
        "tasks.tf",
        "  name     = var.queue.name\n\n  retry_config",
        "  name {\n  }\n\n  retry_config",
        "google_cloud_tasks_queue.deliveries: name: is an argument",
    ),
    (
        "a block the provider allows once, twice",
        "tasks.tf",
        "  stackdriver_logging_config {",
        "  stackdriver_logging_config {\n    sampling_ratio = 0.5\n  }\n  stackdriver_logging_config {",
        "google_cloud_tasks_queue.deliveries: stackdriver_logging_config: the provider allows at most one such block",
    ),
    (
        "missing required nested block",
        "monitoring.tf",
        '  conditions {\n    display_name = "${each.key} logged"',
        '  not_conditions {\n    display_name = "${each.key} logged"',
        "google_monitoring_alert_policy.log_alert: conditions: required block is missing",
    ),
    (
        "a literal list where the schema wants a string",
        "scheduler.tf",
        "  time_zone        = var.scheduler.time_zone",
        '  time_zone        = ["Etc/UTC"]',
        "google_cloud_scheduler_job.reconcile: time_zone: expects a string, not a tuple",
    ),
    (
        "resource type the provider does not have",
        "secrets.tf",
        'resource "google_secret_manager_secret_iam_member" "reader"',
        'resource "google_secret_manager_secrets_iam_member" "reader"',
        "google_secret_manager_secrets_iam_member.reader: google_secret_manager_secrets_iam_member is not a resource of the google provider",
    ),
    (
        "timeouts the resource does not take",
        "tasks.tf",
        "  stackdriver_logging_config {",
        '  timeouts {\n    create = "5m"\n    creat  = "5m"\n  }\n\n  stackdriver_logging_config {',
        "google_cloud_tasks_queue.deliveries: timeouts.creat: unsupported argument 'creat'",
    ),
    (
        "not a lifecycle argument",
        "tasks.tf",
        "  lifecycle {\n    precondition {",
        "  lifecycle {\n    prevent_destroi = true\n    precondition {",
        "google_cloud_tasks_queue.deliveries: lifecycle.prevent_destroi: not a lifecycle argument",
    ),
]


def _broken_copy(tmp_path: Path, filename: str, old: str, new: str) -> tuple[Path, range]:
    """terraform/ copied with one replacement; the lines a finding about it may point at."""
    copy = tmp_path / "terraform"
    shutil.copytree(TERRAFORM, copy, ignore=shutil.ignore_patterns(".terraform", ".build"))
    path = copy / filename
    text = path.read_text()
    assert text.count(old) == 1, f"{filename} no longer holds {old!r} exactly once: update the case"
    path.write_text(text.replace(old, new))
    before = text[: text.index(old)].splitlines()
    # From the enclosing top-level block's first line (missing arguments are reported there)
    # to the last changed line.
    block_start = max(i for i, ln in enumerate(before, 1) if re.match(r"(resource|data) ", ln))
    return copy, range(block_start, len(before) + new.count("\n") + 2)


@pytest.mark.parametrize(
    ("name", "filename", "old", "new", "expected"), BROKEN, ids=[b[0] for b in BROKEN]
)
def test_a_broken_copy_is_rejected_with_file_line_block_and_argument(
    schema: ProviderSchema,
    tmp_path: Path,
    name: str,
    filename: str,
    old: str,
    new: str,
    expected: str,
) -> None:
    copy, lines = _broken_copy(tmp_path, filename, old, new)
    findings = [str(f) for f in check_files(_tf_files(copy), schema, copy)]
    assert any(expected in f for f in findings), f"{name}: no finding says {expected!r}: {findings}"
    # Nothing else in terraform/ is reported, and each finding points into the changed block.
    for finding in findings:
        where = re.match(rf"{re.escape(filename)}:(\d+): ", finding)
        assert where and int(where[1]) in lines, f"{name}: {finding!r} is not at lines {lines}"


def test_meta_arguments_and_google_beta_are_understood(
    schema: ProviderSchema, tmp_path: Path
) -> None:
    (tmp_path / "main.tf").write_text(
        """
resource "google_service_account" "beta" {
  provider   = google-beta.west
  count      = 2
  account_id = "sa-${count.index}"
  depends_on = [google_project_service.api]

  timeouts {
    create = "5m"
  }

  lifecycle {
    create_before_destroy = true
    ignore_changes        = [display_name]
    replace_triggered_by  = [terraform_data.x]
    postcondition {
      condition     = self.email != ""
      error_message = "no email"
    }
  }
}

data "google_client_config" "current" {
  lifecycle {
    postcondition {
      condition     = self.project != ""
      error_message = "no project"
    }
  }
}

resource "other_thing" "ignored" {
  anything = true
}
"""
    )
    assert check_files([tmp_path / "main.tf"], schema, tmp_path) == []
    assert blocks_checked([tmp_path / "main.tf"]) == [
        "google_service_account.beta",
        "data.google_client_config.current",
    ]
