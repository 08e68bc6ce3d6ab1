"""A test app for tests/integration/test_testing_kit.py: an outbox deliverer and a dead
delivery, for what `assert_nothing_pending` and `wait_delivered` must see.

On a GitHub `milestone` event whose payload has `"action": "submit"` it submits one Gemini
batch (tag `hookledger:kit-outbox:{key}`, one request); when the batch settles, the kind's
outbox holds one item: a commit comment on the payload's `repo` at `sha`, marked with the
item's idempotency key. The deliverer looks for that marker before posting (a crash
between its POST and the mark must not post twice). A `sha` GitHub refuses (`"not-a-sha"`:
422) makes the item given up. `"action": "refuse"` raises `PermanentError`: the delivery
is dead. `"action": "settings"` records the app's settings as the worker read them in
`kit_outbox_seen/{delivery id}`. Loaded by the functions' processes through HOOKLEDGER_APPS.
"""

from __future__ import annotations

from typing import Any

from shared import api

app = api.App(
    "kit_outbox",
    settings=[api.Setting("KIT_OUTBOX_LABELS", type="list", default="bug,feature")],
    collections=["kit_outbox_seen"],
)
KIND_NAME = "kit-outbox"
COMMENT = "kit_outbox_comment"


def _comment(record: Any, result: Any) -> list[dict[str, Any]]:
    context = record.context
    return [{"kind": COMMENT, "repo": context["repo"], "sha": context["sha"]}]


KIND = app.kind(api.OperationKind(name=KIND_NAME, tag="kit-outbox", outbox=_comment))


@app.deliverer(COMMENT)
def post_comment(item: Any, services: api.DeliveryServices) -> None:
    """One commit comment per item: look for its marker first, post only when missing."""
    repo, sha = item.payload["repo"], item.payload["sha"]
    marker = f"<!-- kit-outbox {item.idempotency_key} -->"
    path = f"/repos/{repo}/commits/{sha}/comments"
    installation = api_installation(repo)
    for page in services.github_api.pages(path, installation_id=installation):
        if any(marker in (c.get("body") or "") for c in page):
            return
    services.github_api.request(
        "POST",
        path,
        json={"body": f"settled {item.operation}\n{marker}"},
        installation_id=installation,
        retry=False,
    )


def api_installation(repo: str) -> int:
    """The kit's installation on the repository's account (hookledger/testing/accounts.py)."""
    from hookledger.testing.accounts import INSTALLATIONS

    return INSTALLATIONS[repo.split("/")[0]]


@app.handler("github", "milestone")
def on_milestone(event: api.Event, ctx: api.Context) -> api.Outcome:
    payload = event.json()
    if payload.get("action") == "refuse":
        raise api.PermanentError("kit_outbox refuses this delivery (its payload says so)")
    if payload.get("action") == "settings":
        seen = {"labels": list(ctx.settings["KIT_OUTBOX_LABELS"])}
        ctx.results.update("kit_outbox_seen", api.doc_id(event.delivery_id), lambda _: seen)
        return api.Done("recorded the settings")
    tag = KIND.make_tag(str(payload["key"]))
    context = {"repo": payload["repo"], "sha": payload["sha"], "keys": ["only"]}
    run = ctx.submitter(event, tag, kind=KIND.name)
    decided = run.claim(context)
    if decided is not None:
        return api.Done(decided)
    try:
        name = ctx.gemini.create_batch(
            "models/gemini-2.5-flash", [("only", "Hello.")], display_name=tag
        )
    except Exception:
        run.release()
        raise
    lost = run.register(name, context, event.end)
    return api.Done(lost or f"submitted {name}")
