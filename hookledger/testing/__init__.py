"""hookledger's test kit for apps (a pytest plugin); see docs/apps.md, "Testing an app".

    import pytest
    from hookledger.testing import assert_nothing_pending, github_example

    pytestmark = pytest.mark.hookledger_apps("apps.myapp")

    def test_a_push_is_handled(hookledger):
        sent = hookledger.send_github("push", github_example("push-with-new-branch"))
        assert hookledger.wait_handled(sent) == {"myapp": "done"}
        assert_nothing_pending(hookledger)

The plugin (hookledger/testing/plugin.py) gives the `hookledger` fixture, a `Stack`
(hookledger/testing/stack.py). Importing this package starts nothing.
"""

from hookledger.testing.asserts import assert_nothing_pending, assert_one_result_per_item
from hookledger.testing.examples import github_example, github_example_path
from hookledger.testing.stack import Crashes, Stack

__all__ = [
    "Crashes",
    "Stack",
    "assert_nothing_pending",
    "assert_one_result_per_item",
    "github_example",
    "github_example_path",
]
