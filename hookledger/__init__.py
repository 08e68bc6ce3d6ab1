"""Operator tools that run beside the deployment, never inside it: the `hookledger` CLI
(`hookledger.cli`), the web console (`hookledger.console`) and the test kit for apps
(`hookledger.testing`, a pytest plugin).

They may import `shared` and `local`; nothing deployed (`shared/`, `functions/`, `apps/`)
may import them, and the functions' source archive never holds them (docs/architecture.md,
"Code map"; tests/terraform/test_deployed_imports.py checks both).
"""
