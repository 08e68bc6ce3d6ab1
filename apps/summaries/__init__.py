"""Each opened issue summarized by Gemini: the summary stored, and posted on the issue once."""

from __future__ import annotations

from typing import Any

from shared import api

app = api.App(
    "summaries",
    settings=[api.Setting("SUMMARY_MODEL", default="models/gemini-2.5-flash")],
    collections=["summaries"],
)


def write_back(writes: Any, record: Any, result: Any) -> None:
    row, issue = result.row("issue"), record.context["issue"]
    summary = {"issue": issue, "status": result.terminal_status}
    if row is not None:
        summary |= {"text": row.text, "error": row.error, "outcome": row.outcome}
    writes.put("summaries", api.doc_id(issue), summary)


def outbox(record: Any, result: Any) -> list[dict[str, Any]]:
    row = result.row("issue")
    return [{"kind": "summary-comment", "text": row.text}] if row and row.text else []


SUMMARY = app.kind(
    api.OperationKind("issue-summary", "summary", writeback=write_back, outbox=outbox)
)


@app.on("issues.opened")
def summarize(event: api.Event, ctx: api.Context) -> api.Outcome:
    issue = event.json()["issue"]
    key = f"{event.subject.repository}#{issue['number']}"
    prompt = f"Summarize this issue in two sentences:\n\n{issue['title']}\n\n{issue.get('body')}"
    model = ctx.settings["SUMMARY_MODEL"]
    return ctx.submit(SUMMARY, key, [("issue", prompt)], {"issue": key}, model=model)


@app.deliverer("summary-comment")
def post_summary(item: Any, services: Any) -> None:
    # Creating a comment is not idempotent: look for this item's mark before posting.
    github, mark = services.github_api, f"<!-- summary {item.idempotency_key} -->"
    posted = github.call("issues/list-comments", per_page=100).json()
    if any(mark in (comment.get("body") or "") for comment in posted):
        return  # an earlier attempt posted it, then crashed before the mark
    github.call("issues/create-comment", json={"body": f"{item.payload['text']}\n\n{mark}"})
