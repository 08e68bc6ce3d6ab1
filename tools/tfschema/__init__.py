"""Check terraform/ against the Google provider's schema, offline (README in terraform/).

The schema comes from the jsii assembly in the pinned cdktn-provider-google wheel
(`jsii_schema`), the HCL from the `hcl2` parser checkov installs (`hcl_tree`), and `check`
compares the two. `python -m tools.tfschema` extracts the schema cache ahead of the tests.
"""

from tools.tfschema.check import Finding, blocks_checked, check_files, check_text
from tools.tfschema.hcl_tree import HclSyntaxError
from tools.tfschema.jsii_schema import ProviderSchema, SchemaError
from tools.tfschema.pinned import CACHE_DIR, load_pinned, pinned_wheel

__all__ = [
    "CACHE_DIR",
    "Finding",
    "HclSyntaxError",
    "ProviderSchema",
    "SchemaError",
    "blocks_checked",
    "check_files",
    "check_text",
    "load_pinned",
    "pinned_wheel",
]
