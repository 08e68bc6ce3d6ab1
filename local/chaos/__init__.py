"""Chaos suite (dev-only, never deployed): faults against the whole local stack, then the
invariants over the whole database. See docs/reliability.md.

    python -m local.chaos [--size full|reduced] [--scenario NAME ...] [--json]

Parts: `stack` (every child killable, freezable, restartable on its port), `slow_ack`
(the proxy GitHub's webhooks reach the ingress through), `load` (signed pushes, or pushes
the simulator's GitHub sends once), `sharing` (the shared batches every scenario runs
with, and the completer of their batches at the simulator), `drivers`
(reconcile and the GitHub delivery sweep every ~2 s, simulator fault model), `invariants`
(the checks), `runner` (one scenario's frame and its row), `scenarios` (the faults),
`github_scenarios` (those only the GitHub delivery sweep recovers from) and
`shared_scenarios` (those in the sharing itself: a refused request, a refused deployment,
a group cut, a batch Gemini forgot), `report` (the table).
"""

from local.chaos.runner import Chaos, Row
from local.chaos.scenarios import FULL_SIZES, REDUCED_SIZES, SCENARIOS
from local.chaos.stack import ChaosStack

__all__ = ["FULL_SIZES", "REDUCED_SIZES", "SCENARIOS", "Chaos", "ChaosStack", "Row"]
