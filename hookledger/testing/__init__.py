"""hookledger's test kit for apps (a pytest plugin); see docs/apps.md, "Testing an app"."""

from hookledger.testing.examples import github_example, github_example_path

__all__ = ["github_example", "github_example_path"]
