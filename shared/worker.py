"""Moved to `shared.entrypoints.worker`; these names stay importable here.

`Context` is the old name of `shared.handler_context.HandlerContext`.
"""

from shared.entrypoints.http import Reply
from shared.entrypoints.worker import FINISHED, Worker
from shared.handler_context import ClientFactories, HandlerContext

Context = HandlerContext

__all__ = ["FINISHED", "ClientFactories", "Context", "HandlerContext", "Reply", "Worker"]
