"""The worker timeout, the tasks' dispatch deadline and the delivery lease made from them
(docs/architecture.md, "Delivery lease"): the deadline stays below the timeout, the lease
outlasts it, and a local (`demo-`) project gets the same refusal as a deployed one."""

from __future__ import annotations

import pytest

from shared.config import Config, ConfigError


def test_the_defaults_keep_the_deadline_below_the_timeout_and_the_lease_past_it() -> None:
    config = Config()
    assert (config.worker_timeout_s, config.task_dispatch_deadline_s) == (540, 480)
    assert config.delivery_lease_s == 540 + 60


@pytest.mark.parametrize(
    ("name", "env", "lease"),
    [
        (
            "the shortest deadline",
            {"WORKER_TIMEOUT_S": "20", "TASK_DISPATCH_DEADLINE_S": "15", "HTTP_TIMEOUT_S": "5"},
            25,
        ),
        ("only the timeout moved", {"WORKER_TIMEOUT_S": "900"}, 900 + 420),
    ],
)
def test_the_lease_is_the_timeout_plus_the_deadlines_margin(
    name: str, env: dict[str, str], lease: int
) -> None:
    assert Config.from_env(env).delivery_lease_s == lease, name


@pytest.mark.parametrize(
    ("name", "env", "says"),
    [
        ("deadline at the timeout", {"TASK_DISPATCH_DEADLINE_S": "540"}, "must be below"),
        ("timeout below the default deadline", {"WORKER_TIMEOUT_S": "300"}, "must be below"),
        ("deadline under Cloud Tasks' minimum", {"TASK_DISPATCH_DEADLINE_S": "5"}, "15-1800"),
        ("deadline not a number", {"TASK_DISPATCH_DEADLINE_S": "8m"}, "whole number"),
        # A lease that cannot hold the fetches and a create twice over: no push ever creates.
        (
            "lease too short for a create",
            {"WORKER_TIMEOUT_S": "40", "TASK_DISPATCH_DEADLINE_S": "30"},
            "too short for HTTP_TIMEOUT_S",
        ),
    ],
)
def test_a_local_project_refuses_a_bad_deadline_too(
    name: str, env: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        Config.from_env({"GOOGLE_CLOUD_PROJECT": "demo-hookledger", **env})
