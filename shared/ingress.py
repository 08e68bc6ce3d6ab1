"""Moved to `shared.entrypoints.ingress` (and `.http`); these names stay importable here."""

from shared.entrypoints.http import Reply, too_large
from shared.entrypoints.ingress import Ingress

__all__ = ["Ingress", "Reply", "too_large"]
