"""The hand-off from the ingress to the worker: what travels, where, and how.

    envelope.py  Envelope, EnvelopeSealer: the signed wrapper of a verified delivery
    claims.py    PayloadStore: bodies over 512 KiB, stored apart and passed by reference
    tasks.py     TaskQueue, make_client, ensure_queue, task_id_for: the Cloud Tasks queue
    to_worker.py hand_to_worker: seal an envelope and create its task to the worker

Import the module you need: the ingress loads these, so nothing here is heavy.
"""
