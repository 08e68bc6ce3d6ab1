"""hookledger's test kit for apps (a pytest plugin); see docs/apps.md, "Testing an app".

    import pytest
    from hookledger.testing import assert_nothing_pending, github_example

    pytestmark = pytest.mark.hookledger_apps("apps.myapp")

    def test_a_push_is_handled(hookledger):
        sent = hookledger.send_github("push", github_example("push-with-new-branch"))
        assert hookledger.wait_handled(sent) == {"myapp": "done"}
        assert_nothing_pending(hookledger)

The plugin (hookledger/testing/plugin.py) gives the `hookledger` fixture, a `Stack`
(hookledger/testing/stack.py). The functions act as a GitHub App installed on the accounts
of `INSTALLATIONS` (account -> installation id: `hookledger` 5001, `octo-org` 5002,
`Codertocat` 1, the account of GitHub's example payloads). Importing this package starts
nothing and loads the stack's modules only when one of their names is first used (pytest
imports the plugin in every project that has hookledger installed).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hookledger.testing.accounts import EXAMPLES_ACCOUNT, EXAMPLES_INSTALLATION, INSTALLATIONS
from hookledger.testing.examples import github_example, github_example_path

if TYPE_CHECKING:
    from hookledger.testing.asserts import assert_nothing_pending, assert_one_result_per_item
    from hookledger.testing.stack import Crashes, Stack

_LAZY = {
    "Crashes": "hookledger.testing.stack",
    "Stack": "hookledger.testing.stack",
    "assert_nothing_pending": "hookledger.testing.asserts",
    "assert_one_result_per_item": "hookledger.testing.asserts",
}

__all__ = [
    "EXAMPLES_ACCOUNT",
    "EXAMPLES_INSTALLATION",
    "INSTALLATIONS",
    "Crashes",
    "Stack",
    "assert_nothing_pending",
    "assert_one_result_per_item",
    "github_example",
    "github_example_path",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'hookledger.testing' has no attribute {name!r}")
