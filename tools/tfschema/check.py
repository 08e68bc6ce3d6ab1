"""Check Terraform blocks against the Google provider's schema, offline.

For every `resource`, `data` and `provider "google"` block of the `google` (or `google-beta`)
provider: the type exists; every argument and nested block exists at its depth; every
required argument and required nested block is present; a block the provider allows once is
not repeated; a literal of the wrong shape (a list for a string, a string for a map) is
caught. `dynamic "x"` blocks are checked as `x` through their `content`. Terraform's own
meta-arguments are understood (`count`, `for_each`, `depends_on`, `provider`, `lifecycle`
with its own arguments, `provisioner`, `connection`); `timeouts` is the provider's, so the
schema decides which resources take it and which operations it names.

Not checked (only `terraform validate` / `plan` with the provider binary can): values
(enums, formats, ranges), conflicts and "exactly one of" rules between arguments, computed
types of expressions, and anything the API decides.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tools.tfschema import hcl_tree
from tools.tfschema.hcl_tree import Block
from tools.tfschema.jsii_schema import BlockSchema, ProviderSchema

GOOGLE_PROVIDERS = ("google", "google-beta")
_RESOURCE_META_ATTRIBUTES = frozenset({"count", "for_each", "depends_on", "provider"})
_RESOURCE_META_BLOCKS = frozenset({"lifecycle", "provisioner", "connection"})
_DATA_META_BLOCKS = frozenset({"lifecycle"})
_LIFECYCLE_ATTRIBUTES = {
    "resource": frozenset(
        {"create_before_destroy", "prevent_destroy", "ignore_changes", "replace_triggered_by"}
    ),
    "data": frozenset(),
}
_CONDITION_ATTRIBUTES = frozenset({"condition", "error_message"})
# Literal shapes an attribute of each schema kind can never accept.
_WRONG_LITERALS = {
    "string": {"tuple", "object"},
    "number": {"tuple", "object", "bool"},
    "bool": {"tuple", "object", "number"},
    "list": {"object", "string", "number", "bool"},
    "map": {"tuple", "string", "number", "bool"},
}


@dataclass(frozen=True, order=True)
class Finding:
    """One schema violation: where (file:line, block address, argument path) and what."""

    file: str
    line: int
    address: str
    argument: str
    message: str

    def __str__(self) -> str:
        where = f"{self.address}: {self.argument}" if self.argument else self.address
        return f"{self.file}:{self.line}: {where}: {self.message}"


class _Checker:
    def __init__(self, schema: ProviderSchema, filename: str) -> None:
        self.schema = schema
        self.filename = filename
        self.findings: list[Finding] = []
        self._address = ""
        self._beta = False

    def report(self, line: int, path: str, message: str) -> None:
        if self._beta and message.startswith("unsupported"):
            message += " [google-beta block checked against the GA schema: add the beta schema]"
        self.findings.append(Finding(self.filename, line, self._address, path, message))

    def top_level(self, block: Block) -> None:
        if block.type == "provider" and block.labels == ("google",):
            self._address = 'provider "google"'
            self._body(block, self.schema.provider, "", meta=frozenset({"alias"}))
            return
        if block.type not in ("resource", "data") or len(block.labels) != 2:
            return
        rtype, name = block.labels
        provider = block.attributes.get("provider")
        if not rtype.startswith("google_") or not _is_google(block, provider):
            return
        kind = "resources" if block.type == "resource" else "data_sources"
        self._beta = provider is not None and provider.source.startswith("google-beta")
        self._address = f"{rtype}.{name}" if block.type == "resource" else f"data.{rtype}.{name}"
        types = self.schema.resources if block.type == "resource" else self.schema.data_sources
        if rtype not in types:
            noun = "a resource" if block.type == "resource" else "a data source"
            self.report(
                block.line, "", f"{rtype} is not {noun} of the google provider {self._version}"
            )
            return
        if "count" in block.attributes and "for_each" in block.attributes:
            self.report(block.line, "count", "count and for_each cannot be used together")
        self._lifecycle(block)
        meta_blocks = _RESOURCE_META_BLOCKS if kind == "resources" else _DATA_META_BLOCKS
        self._body(block, types[rtype], "", meta=_RESOURCE_META_ATTRIBUTES | meta_blocks)

    @property
    def _version(self) -> str:
        return self.schema.provider_version

    def _lifecycle(self, block: Block) -> None:
        allowed = _LIFECYCLE_ATTRIBUTES[block.type]
        for lifecycle in block.nested("lifecycle"):
            for attr in lifecycle.attributes.values():
                if attr.name not in allowed:
                    self.report(attr.line, f"lifecycle.{attr.name}", "not a lifecycle argument")
            for nested in lifecycle.blocks:
                path = f"lifecycle.{nested.type}"
                if nested.type not in ("precondition", "postcondition"):
                    self.report(nested.line, path, "not a lifecycle block")
                    continue
                for attr in nested.attributes.values():
                    if attr.name not in _CONDITION_ATTRIBUTES:
                        self.report(attr.line, f"{path}.{attr.name}", "unsupported argument")
                for missing in sorted(_CONDITION_ATTRIBUTES - set(nested.attributes)):
                    self.report(nested.line, f"{path}.{missing}", "required argument is missing")

    def _body(self, block: Block, schema: BlockSchema, path: str, meta: frozenset[str]) -> None:
        """Check one block's attributes and nested blocks (and `dynamic` ones) recursively."""
        prefix = f"{path}." if path else ""
        for attr in block.attributes.values():
            if attr.name in meta:
                continue
            if attr.name in schema.blocks:
                self.report(
                    attr.line,
                    prefix + attr.name,
                    f"is a block: write `{attr.name} {{ … }}`, not `{attr.name} = …`",
                )
            elif attr.name not in schema.attributes:
                self.report(attr.line, prefix + attr.name, _unknown(attr.name, schema, "argument"))
            elif attr.literal in _WRONG_LITERALS.get(schema.attributes[attr.name].kind, ()):
                expected = schema.attributes[attr.name].kind
                self.report(
                    attr.line, prefix + attr.name, f"expects a {expected}, not a {attr.literal}"
                )
        nested = self._nested_blocks(block, prefix, meta)
        counts = Counter(b.type for b in nested)
        for child in nested:
            child_path = prefix + child.type
            if child.type not in schema.blocks:
                if child.type in schema.attributes:
                    message = f"is an argument: write `{child.type} = …`, not a block"
                else:
                    message = _unknown(child.type, schema, "block")
                self.report(child.line, child_path, message)
                continue
            spec = schema.blocks[child.type]
            if spec.single and counts[child.type] > 1:
                self.report(child.line, child_path, "the provider allows at most one such block")
                counts[child.type] = 0  # one report per block type
            self._body(child, spec.schema, child_path, meta=frozenset())
        present = set(block.attributes) | set(counts)
        for name, attr_spec in sorted(schema.attributes.items()):
            if attr_spec.required and name not in present:
                self.report(block.line, prefix + name, "required argument is missing")
        for name, block_spec in sorted(schema.blocks.items()):
            if block_spec.required and name not in present:
                self.report(block.line, prefix + name, "required block is missing")

    def _nested_blocks(self, block: Block, prefix: str, meta: frozenset[str]) -> list[Block]:
        """Every nested block but meta ones; a `dynamic "x"` block as an `x` with its content."""
        found: list[Block] = []
        for child in block.blocks:
            if child.type == "dynamic":
                content = self._dynamic_content(child, prefix)
                if content is not None:
                    found.append(content)
            elif child.type not in meta:
                found.append(child)
        return found

    def _dynamic_content(self, dynamic: Block, prefix: str) -> Block | None:
        if len(dynamic.labels) != 1:
            self.report(dynamic.line, f"{prefix}dynamic", "needs exactly one label")
            return None
        name = dynamic.labels[0]
        path = f'{prefix}dynamic "{name}"'
        for attr in dynamic.attributes.values():
            if attr.name not in ("for_each", "iterator", "labels"):
                self.report(attr.line, f"{path}.{attr.name}", "not a dynamic block argument")
        if "for_each" not in dynamic.attributes:
            self.report(dynamic.line, f"{path}.for_each", "required argument is missing")
        contents = dynamic.nested("content")
        if len(contents) != 1 or len(dynamic.blocks) != 1:
            self.report(dynamic.line, path, "needs exactly one `content` block and no other")
            return None
        content = contents[0]
        return Block(name, (), dynamic.line, content.attributes, content.blocks)


def _is_google(block: Block, provider: hcl_tree.Attribute | None) -> bool:
    if provider is None:
        return True
    return provider.source.split(".")[0] in GOOGLE_PROVIDERS


def _unknown(name: str, schema: BlockSchema, what: str) -> str:
    known = sorted(set(schema.attributes) | set(schema.blocks))
    return f"unsupported {what} {name!r} (the schema has: {', '.join(known) or 'nothing'})"


def check_block(block: Block, schema: ProviderSchema, filename: str) -> list[Finding]:
    checker = _Checker(schema, filename)
    checker.top_level(block)
    return checker.findings


def check_text(text: str, filename: str, schema: ProviderSchema) -> list[Finding]:
    """Every finding in one file's text; `filename` only labels the findings."""
    root = hcl_tree.parse(text, filename)
    findings: list[Finding] = []
    for block in root.blocks:
        findings.extend(check_block(block, schema, filename))
    return findings


def check_files(paths: Iterable[Path], schema: ProviderSchema, root: Path) -> list[Finding]:
    """Every finding in the files, named relative to `root`, sorted by file and line."""
    findings: list[Finding] = []
    for path in paths:
        findings.extend(check_text(path.read_text(), str(path.relative_to(root)), schema))
    return sorted(findings)


def blocks_checked(paths: Iterable[Path]) -> list[str]:
    """Addresses of the google resource and data blocks `check_files` looks at."""
    addresses = []
    for path in paths:
        for block in hcl_tree.parse(path.read_text(), str(path)).blocks:
            if block.type not in ("resource", "data") or len(block.labels) != 2:
                continue
            provider = block.attributes.get("provider")
            if block.labels[0].startswith("google_") and _is_google(block, provider):
                prefix = "" if block.type == "resource" else "data."
                addresses.append(f"{prefix}{block.labels[0]}.{block.labels[1]}")
    return addresses
