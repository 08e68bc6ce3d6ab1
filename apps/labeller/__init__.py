"""Each opened issue gets the label Gemini chooses for it: one batch, one label, once."""

from __future__ import annotations

from typing import Any

from shared import api

app = api.App(
    "labeller",
    settings=[
        api.Setting("LABELLER_LABELS", type="list", default="bug,feature,question"),
        api.Setting("LABELLER_MODEL", default="models/gemini-2.5-flash"),
    ],
    collections=["labelled"],
)


def chosen(record: Any, result: Any) -> str | None:
    """The label Gemini answered with, if it is one of those offered."""
    row = result.row("issue")
    answer = (row.text or "").strip().strip(".").lower() if row is not None else ""
    return answer if answer in record.context["labels"] else None


def write_back(writes: Any, record: Any, result: Any) -> None:
    issue = record.context["issue"]
    writes.put("labelled", api.doc_id(issue), {"issue": issue, "label": chosen(record, result)})


def outbox(record: Any, result: Any) -> list[dict[str, Any]]:
    label = chosen(record, result)
    return [{"kind": "add-label", "label": label}] if label else []


LABEL = app.kind(api.OperationKind("issue-label", "label", writeback=write_back, outbox=outbox))


@app.on("issues.opened", "issues.reopened")
def label_issue(event: api.Event, ctx: api.Context) -> api.Outcome:
    issue, labels = event.json()["issue"], list(ctx.settings["LABELLER_LABELS"])
    prompt = (
        f"Answer with one word: which of {', '.join(labels)} fits this issue best?\n\n"
        f"{issue['title']}\n\n{issue.get('body') or ''}"
    )
    key = f"{event.subject.repository}#{issue['number']}"
    context, model = {"issue": key, "labels": labels}, ctx.settings["LABELLER_MODEL"]
    return ctx.submit(LABEL, key, [("issue", prompt)], context, model=model)


@app.deliverer("add-label")
def add_label(item: Any, services: Any) -> None:
    # The issue and its installation are the event's; adding a label twice changes nothing.
    services.github_api.call("issues/add-labels", json={"labels": [item.payload["label"]]})
