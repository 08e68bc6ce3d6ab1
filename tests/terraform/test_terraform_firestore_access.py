"""Who may reach which Firestore database, evaluated over the parsed Terraform (offline).

The public ingress's account must reach only the claim store's database; the ledger
(`(default)`) belongs to the worker and reconcile. The grants are evaluated for a sample
project the way Terraform would, so a broadened condition or a new unconditional grant
fails here.
"""

from __future__ import annotations

import json
import re

import pytest

from shared.config import PRODUCTION_ENV_NAMES, Config
from shared.handoff.payloads import CHUNKS, COLLECTION
from tests.terraform.test_terraform_wiring import (
    FUNCTIONS,
    TERRAFORM,
    Module,
    _attr,
    _block,
    _load_module,
    _render,
    _strings,
)

PROJECT = "p-1"
REFS = {"var.project_id": PROJECT, "var.name_prefix": "hookledger"}
MAIN = f"projects/{PROJECT}/databases/(default)"
CLAIMS = f"projects/{PROJECT}/databases/hookledger-claims"
# Roles that read or write Firestore documents, or every resource in the project.
DATA_ROLES = re.compile(r"^roles/(datastore\.|firestore\.|owner$|editor$|viewer$)")
FUNCTION_MEMBER = "${google_service_account.function[each.value.function].member}"


@pytest.fixture(scope="module")
def tf() -> Module:
    return _load_module()


def _database_names(tf: Module) -> dict[str, str]:
    """local.firestore_database_names evaluated for the sample project."""
    names = {
        "google_firestore_database.main.name": _attr(
            tf.resource("google_firestore_database", "main"), "name"
        ),
        "google_firestore_database.claims.name": _render(
            _attr(tf.resource("google_firestore_database", "claims"), "name"), REFS
        ),
    }
    return {
        key: _render(template, {**REFS, **names})
        for key, template in tf.locals["firestore_database_names"].items()
    }


def _firestore_reach(tf: Module) -> dict[str, set[str]]:
    """Function => the database resource names its account may use, as Terraform grants them."""
    grant = tf.resource("google_project_iam_member", "firestore_user")
    assert _attr(grant, "for_each") == "${local.firestore_grants}"
    assert _attr(grant, "role") == "roles/datastore.user"
    assert _attr(grant, "member") == FUNCTION_MEMBER
    grants = tf.locals["firestore_grants"]
    assert isinstance(grants, dict), f"local.firestore_grants must be a literal map: {grants!r}"
    for key, pair in grants.items():
        assert set(pair) == {"function", "database"}, key
        assert key == f"{pair['function']}-{pair['database']}", key

    condition = _block(grant, "condition")
    template = _attr(condition, "expression")
    # One database: its resource name, or a name under it. A bare prefix match would also
    # admit "hookledger-claims2"; the "/" keeps it out.
    name = "${local.firestore_database_names[each.value.database]}"
    assert template == (
        f'resource.name == \\"{name}\\" || resource.name.startsWith(\\"{name}/\\")'
    ), template
    names = _database_names(tf)
    reach: dict[str, set[str]] = {}
    for pair in grants.values():
        rendered = _render(
            template,
            {"local.firestore_database_names[each.value.database]": names[pair["database"]]},
        )
        match = re.fullmatch(
            r'resource\.name == \\"(projects/[^"\\]+)\\" \|\| '
            r'resource\.name\.startsWith\(\\"(projects/[^"\\]+)/\\"\)',
            rendered,
        )
        assert match and match.group(1) == match.group(2), rendered
        reach.setdefault(pair["function"], set()).add(match.group(1))
    return reach


def test_the_ingress_account_reaches_only_the_claims_database(tf: Module) -> None:
    assert _firestore_reach(tf) == {
        "ingress": {CLAIMS},
        "worker": {MAIN, CLAIMS},
        "reconcile": {MAIN, CLAIMS},
    }


def test_no_other_grant_gives_any_account_firestore_data_access(tf: Module) -> None:
    data_grants = {
        f"{rtype}.{name}": _attr(body, "role")
        for (rtype, name), body in tf.resources.items()
        if "role" in body and DATA_ROLES.match(str(_attr(body, "role")))
    }
    assert data_grants == {"google_project_iam_member.firestore_user": "roles/datastore.user"}
    # Nor a role granted through a binding or policy that could hold a datastore role.
    for rtype in ("google_project_iam_binding", "google_project_iam_policy"):
        assert not tf.of_type(rtype), rtype


# Project-wide roles a function account may hold unconditioned, each with why: a role whose
# service recognises no resource attribute in an IAM condition cannot be narrowed by one.
UNCONDITIONAL_ROLES = {
    "roles/cloudtrace.agent": "writes spans only; Cloud Trace has no resource to narrow it to",
}


def test_project_wide_grants_to_function_accounts_are_all_conditional(tf: Module) -> None:
    for name, body in tf.of_type("google_project_iam_member").items():
        if any("google_service_account.function[" in text for text in _strings(body["member"])):
            if _attr(body, "role") in UNCONDITIONAL_ROLES:
                continue
            assert body.get("condition"), f"google_project_iam_member.{name} is unconditional"


def test_the_claims_database_matches_the_ledger_and_the_code(tf: Module) -> None:
    main = tf.resource("google_firestore_database", "main")
    claims = tf.resource("google_firestore_database", "claims")
    assert _attr(claims, "location_id") == "${google_firestore_database.main.location_id}"
    assert _attr(claims, "type") == "${google_firestore_database.main.type}"
    assert _attr(main, "type") == "FIRESTORE_NATIVE"
    for name in ("point_in_time_recovery_enablement", "delete_protection_state"):
        assert _attr(claims, name) == _attr(main, name), name
    # The default prefix gives the code's default database name.
    assert _render(_attr(claims, "name"), REFS) == Config().claims_database
    # Firestore database ids: 4-63 of [a-z0-9-], starting with a letter, not ending in "-".
    db_id = re.compile(r"^[a-z][a-z0-9-]{2,61}[a-z0-9]$")
    for prefix in ("abcd", "a" * 20, "hook-ledger"):
        assert db_id.match(_render(_attr(claims, "name"), {"var.name_prefix": prefix})), prefix


def test_claims_database_name_reaches_the_functions_that_read_it(tf: Module) -> None:
    readers = {fn for fn in FUNCTIONS if "CLAIMS_DATABASE" in PRODUCTION_ENV_NAMES[fn]}
    granted = {
        g["function"] for g in tf.locals["firestore_grants"].values() if g["database"] == "claims"
    }
    assert readers == granted
    env = tf.locals["function_env"]
    for fn in readers:
        assert env[fn].get("CLAIMS_DATABASE") == "${google_firestore_database.claims.name}", fn


def test_payload_ttls_are_set_on_the_claims_database_and_the_ledgers_on_main(tf: Module) -> None:
    assert tf.locals["claims_collections"] == [COLLECTION, CHUNKS]
    field_res = tf.resource("google_firestore_field", "ttl")
    assert _attr(field_res, "database") == (
        "${contains(local.claims_collections,each.value.collectionGroup) ? "
        "google_firestore_database.claims.name : google_firestore_database.main.name}"
    )
    spec = json.loads((TERRAFORM / "firestore_indexes.json").read_text())
    claims_ttl = {t["collectionGroup"] for t in spec["ttl"]} & set(tf.locals["claims_collections"])
    assert claims_ttl == {COLLECTION, CHUNKS}
    # The composite indexes serve the ledger's queries: none belongs to the claims database.
    assert not {i["collectionGroup"] for i in spec["indexes"]} & claims_ttl
