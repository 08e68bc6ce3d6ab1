"""The status words, each vocabulary an enum, in the order the CLI and the console show it.

Every stored status word is a member here and nowhere else (tests/unit/test_status_words.py
fails on a copy of a vocabulary, or on a word written out where a status is compared or
stored outside this module). Members are strings (`StrEnum`): stored, logged and compared
as the words themselves. Which are terminal or finished is said beside the records that
carry them (shared/ledger/records.py).
"""

from __future__ import annotations

from enum import StrEnum


class Word(StrEnum):
    """A stored word of the ledger's (a status): a str equal to its value, shown as it in
    messages too (`repr` is the word's, so a list of them reads as the words)."""

    def __repr__(self) -> str:
        return repr(self.value)


class OperationStatus(Word):
    """An operation's status: pending until it settles into a terminal one."""

    PENDING = "pending"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    FAILED = "failed"
    SUCCEEDED = "succeeded"
    # A batch made for a push that already has its winning batch (docs/architecture.md,
    # "One winner per push"): recorded final at once, cancelled at Gemini through its
    # outbox, never settled, never written back.
    SUPERSEDED = "superseded"


class DeliveryStatus(Word):
    """A delivery's status: queued until the worker finishes it one way or another."""

    QUEUED = "queued"
    DONE = "done"
    IGNORED = "ignored"
    # A Gemini event whose `data.id` names no operation in the ledger; the operation (if
    # ours) is left to reconcile (docs/architecture.md, "worker").
    UNRESOLVED = "unresolved"
    DEAD = "dead"


class InstallationStatus(Word):
    """A GitHub App installation's status (docs/architecture.md, "installations/{id}");
    `deleted` is final: GitHub never reuses an installation id."""

    ACTIVE = "active"
    SUSPENDED = "suspended"
    DELETED = "deleted"


class GroupStatus(Word):
    """A group's status: open to joins, sealed (its parts being made), or failed whole."""

    OPEN = "open"
    SEALED = "sealed"
    FAILED = "failed"


class RecoveryStatus(Word):
    """What became of a delivery GitHub failed to make, in the order the console shows."""

    OPEN = "open"
    RECOVERED = "recovered"
    ACCEPTED = "accepted"
    IGNORED = "ignored"
    UNRECOVERABLE = "unrecoverable"
