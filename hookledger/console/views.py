"""The console's pages: overview, operations, deliveries (with replay), reconcile runs.

Every table is one ledger query with a limit (`PAGE`) and a cursor; detail pages read one
document plus bounded lists. Nothing here names a Firestore collection or field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from flask import Blueprint, abort, current_app, redirect, render_template, request, url_for
from markupsafe import Markup

from apps.review.results import Reviews
from hookledger.cli.deliveries import recoveries_of, recovery_summary, replay_headers
from hookledger.cli.ops import app_of
from hookledger.cli.output import CliError
from hookledger.console import charts, check_run, cursors, figures, traces
from shared import apps
from shared.ledger import DELIVERY_STATUSES, OPERATION_STATUSES, SETTLED_BY, Delivery, Ledger

PAGE = 50
PREVIEW_CHARS = 2048
RUNS_SHOWN = 20
REVIEWS_SHOWN = 50
AGES = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7)}

pages = Blueprint("pages", __name__)


def _ledger() -> Ledger:
    return current_app.config["LEDGER"]()  # type: ignore[no-any-return]


def _now() -> Any:
    return current_app.config["CLOCK"]()


def _choice(name: str, allowed: Any) -> str | None:
    value = request.args.get(name) or None
    if value is not None and value not in allowed:
        abort(400, f"{name} must be one of {sorted(allowed)}")
    return value


def _text(name: str) -> str | None:
    value = (request.args.get(name) or "").strip()
    if len(value) > 200:
        abort(400, f"{name} is too long")
    return value or None


def _next_url(endpoint: str, after: str, **extra: Any) -> str:
    args = {k: v for k, v in request.args.items() if k != "after"}
    return url_for(endpoint, **extra) + "?" + urlencode({**args, "after": after})


def preview(payload: Any) -> tuple[str, bool]:
    """At most PREVIEW_CHARS of a stored body (pretty JSON when it parses); cut or not."""
    if payload is None:
        return "", False
    text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else str(payload)
    with contextlib.suppress(ValueError):
        text = json.dumps(json.loads(text), indent=2)[: PREVIEW_CHARS + 1]
    return text[:PREVIEW_CHARS], len(text) > PREVIEW_CHARS


@pages.route("/")
def overview() -> str:
    now = _now()
    data = figures.overview(_ledger(), now)
    hourly = data["hourly"]
    return render_template(
        "overview.html",
        data=data,
        now=now,
        # Built from numbers and fixed labels only, each escaped in charts.py.
        settlements_svg=Markup(  # noqa: S704
            charts.settlements_chart(hourly.labels, hourly.webhook, hourly.reconcile)
        ),
        latency_svg=Markup(charts.latency_chart(hourly.labels, hourly.p50, hourly.p99)),  # noqa: S704
        sample_cap=figures.LATENCY_SAMPLE,
    )


@pages.route("/operations")
def operations() -> str:
    status = _choice("status", OPERATION_STATUSES)
    settled_by = _choice("settled_by", SETTLED_BY)
    age = _choice("age", AGES)
    kind = _text("kind")
    after = _cursor()
    since = _now() - AGES[age] if age else None
    rows = _ledger().queries.operations_page(
        status, kind, settled_by, submitted_since=since, limit=PAGE, after=after
    )
    next_url = None
    if len(rows) == PAGE:
        last = rows[-1]
        next_url = _next_url("pages.operations", cursors.encode(last.submitted_at, last.doc_id))
    return render_template(
        "operations.html",
        rows=rows,
        app_of=app_of,
        next_url=next_url,
        statuses=OPERATION_STATUSES,
        settled_bys=sorted(SETTLED_BY),
        ages=list(AGES),
        args=request.args,
    )


@pages.route("/operations/<path:name>")
def operation(name: str) -> str:
    ledger = _ledger()
    record = ledger.operations.get(name)
    if record is None:
        abort(404, f"operation {name} not found")
    app = app_of(record.kind)
    reviews = Reviews(ledger).reviews_for(record.name, REVIEWS_SHOWN) if app == "review" else []
    return render_template(
        "operation.html",
        op=record,
        app=app,
        runs=ledger.runs.for_operation(record.name, RUNS_SHOWN),
        reviews=reviews,
        results=[] if reviews else _app_results(ledger, app, record.name),
        reviews_cap=REVIEWS_SHOWN,
        check=check_run.view(record, current_app.config["CHECK_RUNS"]()),
        trace=_marked(traces.for_operation(current_app.config["TRACES"], record)),
    )


def _app_results(ledger: Any, app: str | None, operation: str) -> list[dict[str, Any]]:
    """The documents `operation`'s settlement wrote in its app's collections, as rows of
    (collection, fields): what any app's write-back left, shown as stored."""
    record = apps.get(app) if app else None
    found = []
    for collection in sorted(record.collections) if record is not None else ():
        for doc in ledger.results.find(collection, REVIEWS_SHOWN, operation=operation):
            shown = {k: v for k, v in sorted(doc.items()) if k != "operation"}
            found.append({"collection": collection, "fields": shown})
    return found[:REVIEWS_SHOWN]


@pages.route("/reviews")
def review() -> str:
    repo, sha, path = _text("repo"), _text("sha"), _text("path")
    if not (repo and sha and path):
        abort(400, "repo, sha and path are required")
    found = Reviews(_ledger()).get_review(repo, sha, path)
    if found is None:
        abort(404, f"review of {repo}@{sha}:{path} not found")
    text, cut = preview(found.get("text") or "")
    return render_template("review.html", review=found, text=text, cut=cut)


@pages.route("/deliveries")
def deliveries() -> str:
    status = _choice("status", DELIVERY_STATUSES)
    source, event = _text("source"), _text("event")
    after = _cursor()
    start_after = _delivery_at(after) if after else None
    rows = _ledger().deliveries.listing(
        status, PAGE, source=source, event=event, start_after=start_after
    )
    recovered = {
        doc_id: recovery_summary(recovery)
        for doc_id, recovery in recoveries_of(_ledger(), rows).items()
    }
    next_url = None
    if len(rows) == PAGE:
        last = rows[-1]
        next_url = _next_url("pages.deliveries", cursors.encode(last.received_at, last.doc_id))
    return render_template(
        "deliveries.html",
        rows=rows,
        recovered=recovered,
        next_url=next_url,
        statuses=sorted(DELIVERY_STATUSES),
        args=request.args,
    )


def _delivery(source: str, delivery_id: str) -> Delivery:
    found = _ledger().deliveries.get(source, delivery_id)
    if found is None:
        abort(404, f"delivery {source}:{delivery_id} not found")
    return found


@pages.route("/deliveries/<source>/<path:delivery_id>")
def delivery(source: str, delivery_id: str) -> str:
    found = _delivery(source, delivery_id)
    text, cut = preview(found.payload)
    recovery = recoveries_of(_ledger(), [found]).get(found.doc_id)
    return render_template(
        "delivery.html",
        d=found,
        recovery=recovery,
        recovery_text=recovery_summary(recovery),
        headers=replay_headers(found),
        payload=text,
        cut=cut,
        preview_chars=PREVIEW_CHARS,
        replayed=request.args.get("replayed"),
        trace=_marked(traces.for_delivery(current_app.config["TRACES"], found.delivery_id)),
    )


@pages.route("/deliveries/<source>/<path:delivery_id>/replay", methods=["GET"])
def replay_confirm(source: str, delivery_id: str) -> str:
    found = _delivery(source, delivery_id)
    guard = current_app.config["GUARD"]
    return render_template("replay.html", d=found, csrf=guard.csrf_token(found.doc_id))


@pages.route("/deliveries/<source>/<path:delivery_id>/replay", methods=["POST"])
def replay_post(source: str, delivery_id: str) -> Any:
    guard = current_app.config["GUARD"]
    # Checked before any read: a forged request learns nothing and changes nothing.
    subject = f"{source}:{delivery_id}"
    try:
        doc_subject = _ledger_doc_id(source, delivery_id)
    except ValueError:
        abort(400, "bad delivery id")
    if not guard.csrf_ok(doc_subject, request.form.get("csrf_token")):
        abort(403, "missing or wrong CSRF token; open the replay page and confirm again")
    found = _delivery(source, delivery_id)
    try:
        result = current_app.config["REPLAY"](found, force=request.form.get("force") == "1")
    except CliError as exc:
        return render_template(
            "replay.html", d=found, csrf=guard.csrf_token(found.doc_id), error=str(exc)
        ), 409
    target = url_for("pages.delivery", source=source, delivery_id=delivery_id)
    current_app.logger.info("replayed %s as %s", subject, result.get("task"))
    return redirect(target + "?" + urlencode({"replayed": result.get("task", "")}), code=303)


@pages.route("/reconcile")
def reconcile_runs() -> str:
    after = _cursor()
    runs = _ledger().runs.recent(RUNS_SHOWN, after)
    next_url = None
    if len(runs) == RUNS_SHOWN:
        last = runs[-1]
        next_url = _next_url("pages.reconcile_runs", cursors.encode(last.finished_at, last.run_id))
    return render_template("reconcile.html", runs=runs, next_url=next_url)


def _marked(section: traces.Section) -> traces.Section:
    """`section` with each waterfall marked safe: waterfall.py escapes all it draws."""
    return dataclasses.replace(
        section,
        traces=[
            dataclasses.replace(t, svg=Markup(t.svg) if t.svg else None)  # noqa: S704
            for t in section.traces
        ],
    )


def _cursor() -> tuple[Any, str] | None:
    try:
        return cursors.decode(request.args.get("after"))
    except cursors.BadCursor as exc:
        abort(400, str(exc))


def _ledger_doc_id(source: str, delivery_id: str) -> str:
    from shared.ledger.errors import InvalidArgument
    from shared.ledger.ids import delivery_id as doc_id_of

    try:
        return doc_id_of(source, delivery_id)
    except InvalidArgument as exc:
        raise ValueError(str(exc)) from exc


def _delivery_at(after: tuple[Any, str]) -> Delivery:
    """A stand-in record carrying only what the deliveries cursor uses (time, doc id)."""
    received_at, doc_id = after
    source = doc_id.split(":", 1)[0]
    return Delivery(source, "", doc_id, "", "queued", 0, None, received_at, None, None)
