"""A local Cloud Tasks v2 emulator reached by the unmodified google-cloud-tasks client.

Run `python -m local.cloudtasks_emulator --host 127.0.0.1 --port 8123 [--http-port 8124]`.
It speaks the gRPC API (queues, named tasks with tombstones, views, paging), dispatches
HTTP tasks with the documented headers, retry/backoff, dispatch deadline and rate
limits, and signs OIDC tokens whose keys it serves at `/jwks.json` and `/certs`.

`--manual-clock` freezes the store's clock until `POST /_clock/advance` (tests).
`--time-scale F` multiplies every wait the emulator makes on its own account (retry
backoff, dispatch deadline, max_retry_duration, rate-limit refill) by F, for fast tests;
the default 1.0 is faithful. Absolute times (schedule_time) are never scaled; the
name tombstone has its own `--tombstone-s`.

Not emulated: App Engine and OAuth-token tasks (UNIMPLEMENTED), IAM and CMEK methods,
BatchCreateTasks, the higher backoff Cloud Tasks applies on 429/503/Retry-After, and the
7-day reuse block on a deleted queue's name.
"""

from local.cloudtasks_emulator.emulator import Emulator

__all__ = ["Emulator"]
