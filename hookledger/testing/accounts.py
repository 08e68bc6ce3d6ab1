"""The GitHub accounts the kit's App is installed on, and their installation ids.

The kit's functions act as one GitHub App registered in the simulator
(hookledger/testing/launch.py), installed on every repository of each account below, with
these ids in every test (the simulator is emptied and the App installed again before
each): `hookledger` and `octo-org` (the demo accounts of `make run`), and `Codertocat`,
the account of GitHub's example payloads (hookledger/testing/payloads), as installation 1,
the id those payloads carry. A payload naming another account's repository finds no
installation: the functions cannot act on it. Light at import (no stack is started).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# GitHub's example payloads come from this account, installation 1.
EXAMPLES_ACCOUNT, EXAMPLES_INSTALLATION = "Codertocat", 1
# account -> installation id (5001 on: the simulator's own numbering, made explicit).
INSTALLATIONS: Mapping[str, int] = MappingProxyType(
    {"hookledger": 5001, "octo-org": 5002, EXAMPLES_ACCOUNT: EXAMPLES_INSTALLATION}
)
