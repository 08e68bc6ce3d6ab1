"""`python -m tools.tfschema`: extract the pinned schema into its cache (run by make test)."""

from __future__ import annotations

import sys

from tools.tfschema.jsii_schema import SchemaError
from tools.tfschema.pinned import CACHE_DIR, load_pinned, pinned_wheel


def main() -> int:
    try:
        schema = load_pinned()
    except SchemaError as exc:
        print(f"provider schema: {exc}", file=sys.stderr)
        return 1
    print(
        f"provider schema: hashicorp/google {schema.provider_version} from {pinned_wheel().name}: "
        f"{len(schema.resources)} resources, {len(schema.data_sources)} data sources, "
        f"cached in {CACHE_DIR}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
