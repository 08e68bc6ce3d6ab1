"""The web console: the ledger at a glance in a browser, and replay of what died.

    hookledger console [--host 127.0.0.1] [--port 8099] [--token T]

`create_app(ledger, clock=..., token=None)` (app.py) builds the Flask app; `serve`
(server.py) runs it. Pages (views.py): overview (counts, oldest pending, alerts, two
inline SVG charts from charts.py), operations, deliveries (replay behind a POST with a
CSRF token and a confirmation page), reconcile runs. Everything reads the ledger with
bounded queries (docs/architecture.md, "Console"); replay is the only write. A delivery's
and an operation's page draw their trace as a waterfall (waterfall.py) from the local
span store, `TRACE_DIR` (traces.py).
"""

from __future__ import annotations

from typing import Any

from hookledger.console.server import DEFAULT_PORT, add_parsers, serve

__all__ = ["DEFAULT_PORT", "add_parsers", "create_app", "serve"]


def create_app(*args: Any, **kwargs: Any) -> Any:
    """`hookledger.console.app.create_app`, imported on first use (Flask is not cheap)."""
    from hookledger.console.app import create_app as build

    return build(*args, **kwargs)
