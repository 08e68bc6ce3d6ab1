"""Shared batches in the ledger: many items (e.g. pushes) in one Gemini batch, each once.

One batch per push caps throughput at Gemini's batch jobs in flight per project divided by
a batch's lifetime. A kind that shares lets its items join the open GROUP of its kind and
model; the group is sealed when it holds enough requests or its window ends, and exactly
one sealer creates its batch (docs/architecture.md, "Shared batches"). Its collections:

- `batch_groups/{gid}`: one group: `kind` (its items' operation kind), `model`,
  `generation_config`, `tag` (the batch's display name `hookledger:group:{gid}`),
  `status` (`open` → `sealed`; `failed` when its whole batch never can be made), `opened_at`,
  `seal_at` (the window's end), `count` (its items), `requests`, `bytes`, `key_bytes`
  (its item names' and request keys' bytes, which its batch's context carries): lane 0's
  while open, the sum once sealed; `lanes`, `lane_counts` (each lane's items, sealed),
  `due_at` (when somebody must seal it, see its batches registered or settle its failed
  items; cleared once nothing is left), `operation` (its batch, once registered whole),
  `parts` (`lo`, `hi`, `operation`, `failed`: the batches it is made as, group_records.py),
  `refused` (item index → Gemini's reason), `fail_cursor` (failures settled before it),
  `held_since`, `holds`, `hold_reason` (Gemini refusing the deployment);
- `group_heads/{kind}~{model, config and fair key's hash}~{shard}`: the group joined now;
- `group_lanes/{gid}~{lane}`: lane l > 0 of a busy group (shared/ledger/group_lanes.py):
  its `status`, `count`, `requests`, `bytes`, `key_bytes`, written instead of the group's;
- `group_members/{gid}~{index}`: one item: `group`, `tag` (its submission), `operation`,
  `requests` (its count) and `pages` (its stored requests), created by its join;
- `group_requests/{…}`: one page of one item's requests (key, prompt), written by its join
  (or before it, when it has more than one), read by the sealer, expired with the group;
- `group_alerts/{name}~{window}`: created by the first alert of its kind in a window.

An item joins exactly once (shared/ledger/group_joins.py): its join is ONE commit that
creates the item's operation (pending, `group` = gid, its outbox's start items), decides
the item's submission with it, adds it to its lane of the group, and may carry the
delivery's `done`; a retried or overlapping run of the item finds the submission decided
and joins nothing. A sealed group takes no item: a joiner that finds the head's group
sealed or full opens the next one::

    join:  read submission (ours, undecided), group, a lane (the head's when those do not
           take it) ─ commit on "all unchanged":
             lane open & fits → its count += 1, item created │ else → new group, head → it
             operation created, submission decided, delivery done (when given)
    seal:  group and its lanes open → sealed (conditional) ─ the group's submission claimed
             (shared/submission.py, keyed by the group's tag) ─ create ─ register
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from google.api_core import exceptions as gexc

from shared.ledger.errors import InvalidArgument, StoreUnavailable
from shared.ledger.group_joins import MAX_KEY_BYTES, GroupJoins, Joined, JoinRequest
from shared.ledger.group_records import (
    FAILED,
    GROUP_TAG,
    GROUPS,
    HEADS,
    MEMBER_PREFIX,
    MEMBERS,
    OPEN,
    REQUESTS,
    SEALED,
    Group,
    Member,
    Part,
    group_from,
    group_tag,
    member_from,
    member_id,
    member_key,
    member_name,
    split_member_key,
)

__all__ = [
    "FAILED",
    "GROUPS",
    "GROUP_TAG",
    "HEADS",
    "MAX_KEY_BYTES",
    "MEMBERS",
    "MEMBER_PREFIX",
    "OPEN",
    "REQUESTS",
    "SEALED",
    "Group",
    "Groups",
    "JoinRequest",
    "Joined",
    "Member",
    "Part",
    "RequestPages",
    "group_from",
    "group_tag",
    "member_key",
    "member_name",
    "split_member_key",
]

# Item documents read in one call (`get_all`).
MEMBERS_PER_READ = 300
# One page of an item's stored requests stays under Firestore's 1 MiB document limit.
PAGE_BYTES = 900_000


class RequestPages(NamedTuple):
    """An item's requests as pages: their ids, documents and bytes (`Groups.request_pages`)."""

    ids: tuple[str, ...]
    documents: tuple[Mapping[str, Any], ...]
    bytes: int


class Groups(GroupJoins):
    """The groups, their heads, items and requests; see the module docstring. The join is
    `GroupJoins`'; how a group goes on once open (seal, parts, refusals, holds) is
    `GroupStates`'."""

    # -- requests -------------------------------------------------------------------------

    def request_pages(
        self, tag: str, attempt: str, requests: Sequence[tuple[str, str]]
    ) -> RequestPages:
        """An item's requests in pages named for this attempt (a rerun of the attempt makes
        the same pages), each under PAGE_BYTES; written by its join when there is one
        (`JoinRequest.page_documents`), else by `store_requests` before it joins."""
        if not requests:
            raise InvalidArgument(f"item {tag}: no requests to store")
        stem = hashlib.sha256(f"{tag}\x00{attempt}".encode("utf-8", "surrogatepass")).hexdigest()
        pages: list[list[list[str]]] = [[]]
        size = total = 0
        for key, prompt in requests:
            if not isinstance(key, str) or not key or not isinstance(prompt, str):
                raise InvalidArgument(f"item {tag}: a request needs a key and a prompt")
            cost = len(key.encode("utf-8", "surrogatepass")) + len(
                prompt.encode("utf-8", "surrogatepass")
            )
            if pages[-1] and size + cost > PAGE_BYTES:
                pages.append([])
                size = 0
            pages[-1].append([key, prompt])
            size += cost
            total += cost
        expire_at = self._clock() + self._retention
        documents = tuple(
            {
                "tag": tag,
                "requests": [{"key": k, "prompt": p} for k, p in page],
                "expire_at": expire_at,
            }
            for page in pages
        )
        ids = tuple(f"{stem[:40]}~{n}" for n in range(len(pages)))
        return RequestPages(ids, documents, total)

    def store_requests(
        self, tag: str, attempt: str, requests: Sequence[tuple[str, str]]
    ) -> tuple[tuple[str, ...], int]:
        """Store an item's requests in pages before it joins; (page ids, bytes).
        Idempotent: a rerun of the attempt writes the same pages."""
        pages = self.request_pages(tag, attempt, requests)
        try:
            for page_id, document in zip(pages.ids, pages.documents, strict=True):
                self._commits.collection(REQUESTS).document(page_id).set(
                    dict(document), timeout=self._commits.timeout_s
                )
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"item {tag}: storing its requests failed: {exc}") from exc
        return pages.ids, pages.bytes

    def members(self, group: Group, indices: Sequence[int] | None = None) -> list[Member]:
        """The group's items at `indices` (default all), in that order, from their own
        documents (a group written with its items inline: from it)."""
        chosen = list(group.indices if indices is None else indices)
        if group.legacy_members:
            return [group.legacy_members[i] for i in chosen]
        ids = [member_id(group.gid, i) for i in chosen]
        found = self._read_all(MEMBERS, ids, f"group {group.gid}: its items")
        return [member_from(found[doc_id]) for doc_id in ids]

    def requests(self, group: Group, indices: Sequence[int] | None = None) -> list[tuple[str, str]]:
        """Every request of the group's items (those at `indices`, default all) in join
        order, keyed `member_key(i, key)`."""
        chosen = list(group.indices if indices is None else indices)
        members = self.members(group, chosen)
        ids = [page for member in members for page in member.pages]
        pages = self._read_all(REQUESTS, ids, f"group {group.gid}: its requests")
        out: list[tuple[str, str]] = []
        for index, member in zip(chosen, members, strict=True):
            for page_id in member.pages:
                for request in pages[page_id].get("requests") or []:
                    out.append((member_key(index, request["key"]), request["prompt"]))
        return out

    def _read_all(self, collection: str, ids: Sequence[str], what: str) -> dict[str, Any]:
        """Each document `ids` names, read MEMBERS_PER_READ a call; StoreUnavailable naming
        the first one missing."""
        found: dict[str, Any] = {}
        refs = [self._commits.collection(collection).document(doc_id) for doc_id in ids]
        try:
            for first in range(0, len(refs), MEMBERS_PER_READ):
                page = refs[first : first + MEMBERS_PER_READ]
                for snapshot in self._commits.client.get_all(page, timeout=self._commits.timeout_s):
                    if snapshot.exists:
                        found[snapshot.id] = snapshot.to_dict() or {}
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"{what}: read failed: {exc}") from exc
        missing = next((doc_id for doc_id in ids if doc_id not in found), None)
        if missing is not None:
            raise StoreUnavailable(f"{what}: {collection}/{missing} is missing")
        return found
