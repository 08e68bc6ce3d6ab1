"""The simulator's Files API store: uploaded batch inputs and generated batch results.

The upload protocol is the resumable one google-genai 3.x speaks (`files.upload`):

    POST /upload/{v}/files            X-Goog-Upload-Command: start  -> X-Goog-Upload-URL
    POST {that URL}                   X-Goog-Upload-Command: upload[, finalize]
                                      X-Goog-Upload-Offset: n       -> X-Goog-Upload-Status
                                                                       active | final {"file"}

Files are kept in memory; like Gemini's they expire 48 h after creation (checked on read).
Only generated files (batch results) can be downloaded, as with Gemini.
"""

from __future__ import annotations

import base64
import hashlib
import threading
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from local.simulator.errors import BadRequest, NotFound
from local.simulator.gemini import rfc3339
from shared.clock import Clock

FILE_TTL = timedelta(hours=48)


@dataclass
class StoredFile:
    name: str
    display_name: str
    mime_type: str
    created_at: datetime
    source: str  # UPLOADED | GENERATED
    data: bytes = b""

    def resource(self, base_url: str, version: str) -> dict[str, Any]:
        """The file as the Files API shows it (`GET /{v}/files/{id}`)."""
        body: dict[str, Any] = {
            "name": self.name,
            "displayName": self.display_name,
            "mimeType": self.mime_type,
            "sizeBytes": str(len(self.data)),
            "createTime": rfc3339(self.created_at),
            "updateTime": rfc3339(self.created_at),
            "expirationTime": rfc3339(self.created_at + FILE_TTL),
            "sha256Hash": base64.b64encode(hashlib.sha256(self.data).digest()).decode(),
            "uri": f"{base_url}/{version}/{self.name}",
            "state": "ACTIVE",
            "source": self.source,
        }
        if self.source == "GENERATED":
            body["downloadUri"] = f"{base_url}/{version}/{self.name}:download?alt=media"
        return body


@dataclass
class Upload:
    file: StoredFile
    size: int
    received: bytearray = field(default_factory=bytearray)


class FileStore:
    """Thread-safe store of files and open uploads; `reset()` empties it."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._files: dict[str, StoredFile] = {}
            self._uploads: dict[str, Upload] = {}
            self._failures: dict[str, tuple[int, int]] = {}  # name -> (times left, status)

    def start_upload(self, display_name: str, mime_type: str, size: int) -> str:
        """Open a resumable upload of `size` bytes; returns its upload id."""
        if size < 0:
            raise BadRequest("X-Goog-Upload-Header-Content-Length must be a byte count.")
        stored = StoredFile(
            name=f"files/{uuid.uuid4().hex[:12]}",
            display_name=display_name,
            mime_type=mime_type or "application/octet-stream",
            created_at=self._clock(),
            source="UPLOADED",
        )
        upload_id = uuid.uuid4().hex
        with self._lock:
            self._uploads[upload_id] = Upload(stored, size)
        return upload_id

    def append(self, upload_id: str, offset: int, data: bytes, finalize: bool) -> StoredFile | None:
        """Add a chunk at `offset`; on `finalize` the file is stored and returned."""
        with self._lock:
            upload = self._uploads.get(upload_id)
            if upload is None:
                raise NotFound(f"Upload {upload_id} not found.")
            if offset != len(upload.received):
                raise BadRequest(
                    f"X-Goog-Upload-Offset {offset} does not follow {len(upload.received)} bytes."
                )
            upload.received += data
            if not finalize:
                return None
            if len(upload.received) != upload.size:
                raise BadRequest(f"Uploaded {len(upload.received)} bytes, announced {upload.size}.")
            del self._uploads[upload_id]
            stored = replace(upload.file, data=bytes(upload.received))
            self._files[stored.name] = stored
            return replace(stored)

    def put_generated(self, name: str, data: bytes, display_name: str) -> StoredFile:
        """Store a file Gemini made (a batch's results)."""
        now = self._clock()
        stored = StoredFile(name, display_name, "application/jsonl", now, "GENERATED", data)
        with self._lock:
            self._files[name] = stored
        return replace(stored)

    def get(self, name: str) -> StoredFile:
        with self._lock:
            found = self._files.get(name)
            if found is None or self._clock() - found.created_at >= FILE_TTL:
                raise NotFound(f"File {name} not found.")
            return replace(found)

    def delete(self, name: str) -> None:
        with self._lock:
            if self._files.pop(name, None) is None:
                raise NotFound(f"File {name} not found.")

    def fail_downloads(self, name: str, times: int, status: int) -> None:
        """Control: the next `times` downloads of `name` answer `status`."""
        with self._lock:
            self._failures[name] = (times, status)

    def take_download_failure(self, name: str) -> int | None:
        """The status the next download of `name` must fail with, if one was asked for."""
        with self._lock:
            times, status = self._failures.get(name, (0, 0))
            if times <= 0:
                return None
            self._failures[name] = (times - 1, status)
            return status
