"""The simulator's one error root: a request it refuses, answered with `status` and the
message (`app.py` turns each into Gemini's error body).

    SimError                400 unless a subclass says otherwise
    ├── BadRequest          400: bad input, the message names the field
    ├── NotFound            404
    ├── Conflict            409: the object already ended otherwise
    ├── FailedPrecondition  400: the call does not apply to the object now
    ├── BatchQuotaExceeded  429: a create beyond the concurrent-batch quota
    └── elsewhere: `app.InjectedFault`, `create_refusals.RefusedCreate`,
        `file_routes.DownloadFault` (each carries its own body or status)
"""

from __future__ import annotations


class SimError(Exception):
    """A request the simulator refuses; `status` is the HTTP code to answer with."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(SimError):
    status = 400


class NotFound(SimError):
    status = 404


class Conflict(SimError):
    status = 409


class FailedPrecondition(SimError):
    status = 400


class BatchQuotaExceeded(SimError):
    """A create beyond the concurrent-batch quota: `limit` batches are already in flight."""

    status = 429

    def __init__(self, limit: int) -> None:
        super().__init__(f"{limit} batches are already in flight (the project's quota).")
        self.limit = limit
