"""The local stack's GitHub App: registered in the simulator, installed on the demo accounts.

`make run` and the chaos stack run the functions as a GitHub App, as users deploy them
(docs/architecture.md, "GitHub App" and "Local processes"):

    app = LocalApp.register(sim, ("hookledger", "octo-org"))  # the simulator makes the key
    env = function_env(ports, base, app=app)  # GITHUB_APP_ID, GITHUB_APP_PRIVATE_KEY
    ...
    sim.reset(); app.restore(sim)  # same App, key and installation ids after a reset

The private key lives only in this process and the functions' environment (never a log or
a file). `installation_for(sim, repo)` finds the installation a webhook from `repo` carries
as `installation.id`; None when no App covers it (token mode).

`LOCAL_GITHUB_AUTH=token` runs the stack with the personal-token path instead (no App is
registered, pushes carry no installation, no check run is made).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import serialization

from local.simulator.client import SimulatorClient

AUTH_VARIABLE = "LOCAL_GITHUB_AUTH"
# The accounts of the demo (`hookledger demo`) and chaos (local/chaos/load.py) repositories.
DEMO_ACCOUNTS = ("hookledger", "octo-org")


def app_mode(env: Mapping[str, str]) -> bool:
    """True unless `LOCAL_GITHUB_AUTH=token` asks for the personal-token path."""
    value = env.get(AUTH_VARIABLE, "app").strip().lower() or "app"
    if value not in ("app", "token"):
        raise ValueError(f"{AUTH_VARIABLE} must be 'app' or 'token', got {value!r}")
    return value == "app"


@dataclass(frozen=True)
class LocalApp:
    """One registered App (`client_id`, its private key) and its installation per account."""

    app_id: int
    client_id: str
    private_key: str
    installations: tuple[tuple[str, int], ...]  # (account, installation id)

    def __repr__(self) -> str:  # the key never reaches a log through a repr
        return f"LocalApp(app_id={self.app_id}, client_id={self.client_id!r})"

    @classmethod
    def register(cls, sim: SimulatorClient, accounts: Sequence[str] = DEMO_ACCOUNTS) -> LocalApp:
        """Register a new App with a key the simulator generates, installed on every
        repository of each of `accounts`."""
        answer = sim.register_github_app(slug="hookledger-local")
        installed = tuple(
            (account, int(sim.install_github_app(int(answer["id"]), account)["id"]))
            for account in accounts
        )
        return cls(int(answer["id"]), str(answer["client_id"]), answer["private_key"], installed)

    def restore(self, sim: SimulatorClient) -> None:
        """Register this App and its installations again (after `sim.reset()` or a restart
        of the simulator), with the same ids and key: the running functions keep working."""
        sim.register_github_app(
            app_id=self.app_id,
            client_id=self.client_id,
            slug="hookledger-local",
            public_key=self.public_key(),
        )
        for account, number in self.installations:
            sim.install_github_app(self.app_id, account, id=number)

    def public_key(self) -> str:
        key = serialization.load_pem_private_key(self.private_key.encode(), password=None)
        return (
            key.public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )

    def installation_for(self, repo: str) -> int | None:
        owner = repo.split("/")[0].lower()
        return next((n for account, n in self.installations if account.lower() == owner), None)

    def env(self) -> dict[str, str]:
        """What the worker and reconcile need to act as this App."""
        return {"GITHUB_APP_ID": self.client_id, "GITHUB_APP_PRIVATE_KEY": self.private_key}


def installation_for(sim: SimulatorClient, repo: str) -> int | None:
    """The live installation covering `repo` ("owner/name") in the simulator, else None."""
    owner, _, name = repo.partition("/")
    for installation in sim.github_apps().get("installations") or []:
        if installation.get("deleted") or installation.get("suspended"):
            continue
        if _covers(installation, owner, name):
            return int(installation["id"])
    return None


def _covers(installation: Mapping[str, Any], owner: str, name: str) -> bool:
    repositories = installation.get("repositories")
    if repositories is None:
        account = installation.get("account") or {}
        login = account.get("login") if isinstance(account, Mapping) else account
        return str(login).lower() == owner.lower()
    return f"{owner}/{name}".lower() in {str(r).lower() for r in repositories}


def with_installation(payload: dict[str, Any], installation_id: int | None) -> dict[str, Any]:
    """`payload` as an App's webhook carries it: with `installation.id` (unchanged for None)."""
    if installation_id is None:
        return payload
    return {**payload, "installation": {"id": installation_id}}
