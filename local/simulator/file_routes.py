"""Files API routes (uploads, metadata, downloads) and the download-failure control.

The shapes are the ones google-genai 3.x speaks (`files.upload`, `files.get`,
`files.download`); the store and the upload protocol are in `files.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flask import Flask, Response, request

from local.simulator.errors import BadRequest, SimError
from local.simulator.wire import json_response, read_json

if TYPE_CHECKING:
    from local.simulator.engine import Simulator

VERSION = "<any(v1, v1beta, v1alpha):version>"


class DownloadFault(SimError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _header_int(name: str) -> int:
    raw = request.headers.get(name, "")
    try:
        return int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number, got {raw!r}.") from None


def files_routes(app: Flask, sim: Simulator) -> None:
    """Register the Files API on `app`."""

    def base_url() -> str:
        return request.host_url.rstrip("/")

    @app.post(f"/upload/{VERSION}/files")
    def upload(version: str) -> Response:
        upload_id = request.args.get("upload_id")
        command = request.headers.get("X-Goog-Upload-Command", "")
        if upload_id is None:
            if command != "start" or request.headers.get("X-Goog-Upload-Protocol") != "resumable":
                raise BadRequest("Only resumable uploads are supported: start one first.")
            meta = read_json().get("file") or {}
            upload_id = sim.files.start_upload(
                str(meta.get("displayName") or meta.get("display_name") or ""),
                request.headers.get("X-Goog-Upload-Header-Content-Type", ""),
                _header_int("X-Goog-Upload-Header-Content-Length"),
            )
            answer = json_response({})
            answer.headers["X-Goog-Upload-URL"] = (
                f"{base_url()}/upload/{version}/files?upload_id={upload_id}"
                "&upload_protocol=resumable"
            )
            answer.headers["X-Goog-Upload-Status"] = "active"
            return answer
        commands = {part.strip() for part in command.split(",")}
        if "upload" not in commands:
            raise BadRequest(f"X-Goog-Upload-Command {command!r} is not supported.")
        stored = sim.files.append(
            upload_id,
            _header_int("X-Goog-Upload-Offset"),
            request.get_data(),
            "finalize" in commands,
        )
        if stored is None:
            answer = json_response({})
            answer.headers["X-Goog-Upload-Status"] = "active"
            return answer
        answer = json_response({"file": stored.resource(base_url(), version)})
        answer.headers["X-Goog-Upload-Status"] = "final"
        return answer

    @app.get(f"/{VERSION}/files/<file_id>:download")
    def download(version: str, file_id: str) -> Response:
        name = f"files/{file_id}"
        stored = sim.files.get(name)
        if stored.source != "GENERATED":
            raise BadRequest(f"File {name} was uploaded: only generated files can be downloaded.")
        status = sim.files.take_download_failure(name)
        if status is not None:
            raise DownloadFault(status, f"Simulated fault while downloading {name}.")
        return Response(stored.data, 200, mimetype="application/octet-stream")

    @app.get(f"/{VERSION}/files/<file_id>")
    def get_file(version: str, file_id: str) -> Response:
        return json_response(sim.files.get(f"files/{file_id}").resource(base_url(), version))

    @app.delete(f"/{VERSION}/files/<file_id>")
    def delete_file(version: str, file_id: str) -> Response:
        sim.files.delete(f"files/{file_id}")
        return json_response({})

    @app.post("/_sim/files/<file_id>:fail-downloads")
    def fail_downloads(file_id: str) -> Response:
        body: dict[str, Any] = read_json()
        times, status = body.get("times", 1), body.get("status", 503)
        if not isinstance(times, int) or not isinstance(status, int) or not 400 <= status < 600:
            raise BadRequest("times must be a whole number and status an HTTP error code.")
        sim.files.fail_downloads(f"files/{file_id}", times, status)
        return json_response({"file": f"files/{file_id}", "times": times, "status": status})
