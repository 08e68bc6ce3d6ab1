"""A local stand-in for the Gemini API and GitHub's REST API (dev and tests only).

Run it with `python -m local.simulator --host 127.0.0.1 --port 8090`; it prints a line
containing `listening` when ready and exits cleanly on SIGTERM/SIGINT. Point the real
google-genai client at it with `HttpOptions(base_url="http://127.0.0.1:8090")`.

Modules: `state` (batches, operations, registered webhooks), `faults` (the fault model
`/_sim/faults` sets), `injector` (its seeded draws and counts), `gemini` (the Gemini
JSON shapes), `webhooks` (signed completion webhooks), `github` (Contents API files),
`comments` (commit comments), `issues` / `issue_records` / `pull_reviews` (issues and
pull requests, their labels, comments, reactions and reviews), `commit_statuses`,
`github_stubs` (a test's answers for a GitHub route), `github_webhooks` /
`hook_deliveries` (the App webhook GitHub sends, and its recorded deliveries), `apps`
(GitHub Apps: the App JWT, installations, installation tokens, permissions),
`github_objects` (GitHub's shared objects, whole: accounts, the App, repositories),
`api_versions` (the REST API version a request is answered as, and what each changed),
`ratelimits` (GitHub's rate limits and their headers), `traffic` (the request log),
`engine` (what creating and completing an operation does), `processing` (how batches
run: slots, `batch.priority`), `completion` (batches succeeding on their own), `app` /
`github_routes` / `issue_routes` / `pull_routes` / `repo_routes` / `github_fallback` (the
501 of a route not simulated) / `control` / `github_control` (HTTP routes; `control`
documents the control API and the fault model).
"""

from local.simulator.app import create_app
from local.simulator.engine import Settings, Simulator

__all__ = ["Settings", "Simulator", "create_app"]
