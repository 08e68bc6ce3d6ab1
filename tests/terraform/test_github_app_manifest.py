"""The GitHub App manifest shipped in terraform/: the least the App needs, and valid as GitHub reads it.

GitHub's "Registering a GitHub App from a manifest" takes `name`, `url`, `hook_attributes`
(`url`, `active`), `redirect_url`, `public`, `default_permissions` (permission → access)
and `default_events`. Every App receives `installation` and `installation_repositories`
without subscribing to them, so they are not listed (docs/github-app.md).
"""

from __future__ import annotations

import json
from pathlib import Path

MANIFEST = Path(__file__).resolve().parents[2] / "terraform" / "github-app-manifest.json"
KEYS = {
    "name",
    "url",
    "description",
    "public",
    "hook_attributes",
    "redirect_url",
    "default_permissions",
    "default_events",
}


def _manifest() -> dict[str, object]:
    return json.loads(MANIFEST.read_text())


def test_the_manifest_uses_only_the_documented_keys() -> None:
    manifest = _manifest()
    assert set(manifest) <= KEYS, set(manifest) - KEYS
    assert manifest["public"] is False  # installed by its owner only
    hook = manifest["hook_attributes"]
    assert isinstance(hook, dict) and hook["active"] is True
    assert str(hook["url"]).endswith("/github")  # the ingress's GitHub route


def test_permissions_are_the_least_the_review_needs() -> None:
    # contents: read the pushed files; checks: write the review; metadata: always granted.
    assert _manifest()["default_permissions"] == {
        "checks": "write",
        "contents": "read",
        "metadata": "read",
    }


def test_events_are_pushes_and_re_runs_and_never_the_implicit_installation_events() -> None:
    events = _manifest()["default_events"]
    assert isinstance(events, list)
    assert sorted(events) == ["check_run", "check_suite", "push"]
