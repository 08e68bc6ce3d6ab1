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

`--data-dir DIR` makes it durable like the real queue: queues, tasks (counts, schedule
times, last answers), name tombstones, the OIDC signing key and the manual clock's time
survive a restart, even a SIGKILL; a task in flight at the crash is sent again. Without
it, every start is empty and signs with a new key.

429 and 503 answers get twice the RetryConfig backoff, or the `Retry-After` delay
(seconds or HTTP-date) when that is longer, within [min_backoff, max_backoff] (the
reference's "higher backoff rate" gives no figure). A task created with a past or unset
`schedule_time` gets the current time.

Not emulated: App Engine and OAuth-token tasks (UNIMPLEMENTED), IAM and CMEK methods,
BatchCreateTasks, the queue-wide slow-down on a high error rate and the ramp-up of a new
or idle queue (system throttling), and the 7-day reuse block on a deleted queue's name.
"""

from local.cloudtasks_emulator.emulator import Emulator

__all__ = ["Emulator"]
