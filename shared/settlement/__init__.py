"""Settlement: each Gemini operation settled exactly once, its result written back in the
same commit (docs/architecture.md, "Settlement").

- settler.py: `Settler`, the one settlement path, and the core's kinds it registers;
- groups.py: the kind of a shared batch and each item's part of it;
- cancel.py: superseded batches cancelled through the outbox.

This package's own module is empty on purpose: importing `shared.kinds` (the registry,
light, at the ingress's cold start) must not load the ledger.
"""
