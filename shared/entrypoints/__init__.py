"""The three HTTP functions as plain objects: `handle(method, path, headers, body) -> Reply`.

    http.py       Reply, too_large, Endpoint (/healthz and the 405 answered in one place)
    ingress.py    Ingress: verify a webhook, hand it to Cloud Tasks
    worker.py     Worker: verify what Cloud Tasks brings, run its handler
    reconcile.py  ReconcileEndpoint: check Cloud Scheduler's token, run the reconciler

Import the module you need: this facade re-exports only `http`, so loading the ingress
never loads the worker's Firestore or Gemini clients.
"""

from shared.entrypoints.http import Endpoint, Reply, too_large

__all__ = ["Endpoint", "Reply", "too_large"]
