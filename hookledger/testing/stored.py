"""What the stack's Firestore holds, as `Stack` shows it to a test."""

from __future__ import annotations

from typing import Any

from hookledger.testing.launch import PROJECT
from hookledger.testing.running import TIMEOUT_S, Running
from local.firestore_emulator import client_on
from shared.ledger.records import DELIVERIES, OPERATIONS


class Stored(Running):
    """The inspection part of `Stack`: documents, operations, deliveries, queued tasks."""

    @property
    def firestore(self) -> Any:
        """A Firestore client on the stack's emulator (the ledger's database)."""
        if self._client is None:
            self._client = client_on(self._stores.firestore_host, PROJECT)
        return self._client

    def documents(self, collection: str) -> dict[str, dict[str, Any]]:
        """Every document of `collection`, by id."""
        return {s.id: s.to_dict() for s in self.firestore.collection(collection).stream()}

    def operation(self, name: str) -> dict[str, Any] | None:
        """Operation `name` (`batches/abc`) as the ledger reads it, or None."""
        from shared.ledger.ids import operation_id
        from shared.ledger.records import operation_from_snapshot

        snapshot = self.firestore.collection(OPERATIONS).document(operation_id(name)).get()
        return operation_from_snapshot(snapshot).to_dict() if snapshot.exists else None

    def operations(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Every operation (of `kind`), as the ledger reads it, oldest first."""
        from shared.ledger.records import operation_from_snapshot

        found = [
            operation_from_snapshot(s).to_dict()
            for s in self.firestore.collection(OPERATIONS).stream()
        ]
        chosen = [op for op in found if kind is None or op["kind"] == kind]
        return sorted(chosen, key=lambda op: (op["submitted_at"], op["name"]))

    def queued_tasks(self) -> list[str]:
        """The names of the tasks waiting in the stack's Cloud Tasks queue."""
        client = self._tasks_client()
        tasks = client.list_tasks(parent=self._running.queue_path, timeout=TIMEOUT_S)
        return [task.name for task in tasks]

    def _delivery(self, source: str, delivery_id: str) -> dict[str, Any] | None:
        from shared.ledger.ids import delivery_id as doc_id

        snapshot = self.firestore.collection(DELIVERIES).document(doc_id(source, delivery_id)).get()
        return snapshot.to_dict() if snapshot.exists else None
