"""The console's Flask app: pages (views.py), the access token and CSRF (security.py).

`create_app(ledger, clock=..., token=None)` builds it; `serve` (server.py) runs it. Jinja autoescape
is on for every template, and each answer carries a Content-Security-Policy that allows
only this origin (no script, no asset from the internet).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from flask import Flask, Response, redirect, render_template, request
from werkzeug.exceptions import HTTPException

from hookledger.cli.deliveries import replay
from hookledger.console.check_run import Find, live_finder
from hookledger.console.security import TOKEN_COOKIE, TOKEN_HEADER, Guard
from hookledger.console.traces import TraceSettings
from hookledger.console.views import pages
from shared.clock import Clock, system_clock
from shared.config import Config
from shared.ledger import InvalidArgument, Ledger, LedgerError

HERE = Path(__file__).resolve().parent
CSP = "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'"


def create_app(
    ledger: Ledger | Callable[[], Ledger],
    *,
    clock: Clock = system_clock,
    token: str | None = None,
    replay_fn: Callable[..., dict[str, Any]] = replay,
    csrf_secret: bytes | None = None,
    check_runs: Callable[[], Find | None] = live_finder,
    traces: TraceSettings | None = None,
) -> Flask:
    """The console for `ledger` (or a factory of it, called per request, built lazily).
    `check_runs`: builds (once, on first use) how an operation page finds its push's check
    run on GitHub; the default asks GitHub as this process's App (check_run.py).
    `traces`: where the pages' waterfalls are read from; default `TRACE_DIR` and
    `GOOGLE_CLOUD_PROJECT` of the environment (traces.py)."""
    app = Flask(
        "hookledger.console",
        template_folder=str(HERE / "templates"),
        static_folder=str(HERE / "static"),
    )
    app.config.update(
        LEDGER=ledger if callable(ledger) and not isinstance(ledger, Ledger) else (lambda: ledger),
        CLOCK=clock,
        GUARD=Guard(token, csrf_secret),
        REPLAY=replay_fn,
        CHECK_RUNS=_once(check_runs),
        TRACES=traces or TraceSettings.from_config(Config.from_env()),
    )
    app.register_blueprint(pages)
    app.before_request(_check_token)
    app.after_request(_secure_headers)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(LedgerError, _ledger_error)
    return app


def _once(build: Callable[[], Find | None]) -> Callable[[], Find | None]:
    built: list[Find | None] = []

    def get() -> Find | None:
        if not built:
            built.append(build())
        return built[0]

    return get


def _check_token() -> Any:
    guard: Guard = _guard()
    if guard.token is None:
        return None
    given = request.args.get("token")
    if given is not None and guard.allowed(given, None):
        # Move the token from the URL into an HttpOnly cookie, then show a clean URL.
        args = {k: v for k, v in request.args.items() if k != "token"}
        target = request.path + ("?" + urlencode(args) if args else "")
        response = redirect(target, code=303)
        response.set_cookie(TOKEN_COOKIE, given, httponly=True, samesite="Strict")
        return response
    if not guard.allowed(request.headers.get(TOKEN_HEADER), request.cookies.get(TOKEN_COOKIE)):
        return _error_page(401, "this console needs its access token (open /?token=...)")
    return None


def _guard() -> Guard:
    from flask import current_app

    return current_app.config["GUARD"]  # type: ignore[no-any-return]


def _secure_headers(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def _error_page(code: int, message: str) -> tuple[str, int]:
    return render_template("error.html", code=code, message=message), code


def _http_error(exc: HTTPException) -> tuple[str, int]:
    return _error_page(exc.code or 500, exc.description or exc.name)


def _ledger_error(exc: LedgerError) -> tuple[str, int]:
    # Store unavailable or a refused argument: say so on the page, never a traceback.
    from flask import current_app

    if isinstance(exc, InvalidArgument):
        return _error_page(400, str(exc))
    current_app.logger.warning("console: ledger error on %s: %s", request.path, exc)
    return _error_page(503, f"the ledger could not answer: {exc}")
