"""Operator tools that run beside the deployment, never inside it: the `hookledger` CLI
(`hookledger.cli`) and, later, the web console.

They may import `shared` and `local`; nothing deployed (`shared/`, `functions/`) may import
them, and the functions' source archive holds only `functions/` and `shared/`
(docs/architecture.md, "Layout"; tests/terraform/test_deployed_imports.py checks both).
"""
