"""The Google provider's schema, read from the jsii assembly inside a cdktn-provider-google wheel.

The wheel is only read (zipfile, tarfile, json), never installed or imported. Inside it,
`_jsii/provider-google@<version>.jsii.tgz` holds `package/.jsii`, a JSON assembly whose
`types` describe the provider: one class per resource / data source whose docs summary names
the Terraform type (`Represents a {@link …/docs/resources/cloud_tasks_queue
google_cloud_tasks_queue}`), its initializer's `config` struct, and per property `optional`,
a type, and docs ending in `Docs at Terraform Registry: {@link …#max_attempts
CloudTasksQueue#max_attempts}`: the exact HCL name, which this module takes instead of
un-camelCasing the property name (`buildAttribute` is HCL `build`, `a2AConfig` is
`a2a_config`). A property whose type is a struct is a nested block: a bare struct holds at
most one block (max_items 1), an array of structs any number.

`extract(wheel)` turns the ~130 MB assembly into a compact `ProviderSchema` (a few MB of
JSON); `load(wheel, cache_dir)` does that once and reads the cached JSON afterwards.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT_VERSION = 1  # bump when the compact JSON's layout changes: old caches are then ignored

_REGISTRY_LINK = re.compile(
    r"\{@link https://registry\.terraform\.io/providers/hashicorp/google/(?P<version>[0-9][^/]*)"
    r"/docs(?:/(?P<kind>resources|data-sources)/\w+)? (?P<type>google\w*)\}"
)
# The last `{@link <url>#name Class#name}` in a property's docs carries its HCL name.
_HCL_NAME = re.compile(r"Docs at Terraform Registry: \{@link \S+ \w+#(\w+)\}")
_STRUCT_BASES = {
    "cdktn.TerraformResource": "resources",
    "cdktn.TerraformDataSource": "data_sources",
    "cdktn.TerraformProvider": "provider",
}


class SchemaError(Exception):
    """The wheel does not hold an assembly this module understands (names the wheel)."""


@dataclass(frozen=True)
class Attribute:
    required: bool
    # "string", "number", "bool", "list" or "map": enough to spot a literal of the wrong shape.
    kind: str


@dataclass(frozen=True)
class BlockSchema:
    """Arguments and nested blocks one HCL block accepts."""

    attributes: dict[str, Attribute] = field(default_factory=dict)
    blocks: dict[str, NestedBlock] = field(default_factory=dict)


@dataclass(frozen=True)
class NestedBlock:
    required: bool  # at least one such block (min_items >= 1)
    single: bool  # at most one such block (max_items 1)
    schema: BlockSchema


@dataclass(frozen=True, repr=False)
class ProviderSchema:
    """Every resource and data source of one provider version, by Terraform type name."""

    provider_version: str
    package: str
    provider: BlockSchema
    resources: dict[str, BlockSchema]
    data_sources: dict[str, BlockSchema]

    def __repr__(self) -> str:  # the full schema would drown any failure message
        return f"ProviderSchema(google {self.provider_version} from {self.package})"

    def major(self) -> int:
        return int(self.provider_version.split(".")[0])


# --- reading the assembly ---------------------------------------------------------------------


def _read_assembly(wheel: Path) -> dict[str, Any]:
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [n for n in archive.namelist() if re.search(r"/_jsii/[^/]+\.jsii\.tgz$", n)]
            if len(members) != 1:
                raise SchemaError(f"{wheel}: expected one _jsii/*.jsii.tgz, found {members}")
            with archive.open(members[0]) as tgz, tarfile.open(fileobj=tgz, mode="r|gz") as tar:
                for member in tar:
                    if member.name == "package/.jsii":
                        extracted = tar.extractfile(member)
                        if extracted is None:
                            break
                        return dict(json.loads(extracted.read()))
    except (OSError, zipfile.BadZipFile, tarfile.TarError, json.JSONDecodeError) as exc:
        raise SchemaError(f"{wheel}: cannot read the jsii assembly: {exc}") from exc
    raise SchemaError(f"{wheel}: no package/.jsii in {members[0]}")


def _hcl_name(prop: dict[str, Any], owner: str) -> str:
    found = _HCL_NAME.findall(json.dumps(prop.get("docs", {})))
    # A few docs lose their link to an embedded `*/`; a one-word lowercase name needs no guess.
    if not found and re.fullmatch(r"[a-z][a-z0-9]*", prop["name"]):
        return str(prop["name"])
    if not found:
        raise SchemaError(f"{owner}.{prop['name']}: no Terraform Registry link names its HCL name")
    return str(found[-1])


def _struct_of(type_ref: dict[str, Any], types: dict[str, Any]) -> tuple[str, bool] | None:
    """(struct fqn, single) when the property is a nested block, else None."""
    fqn = type_ref.get("fqn")
    if fqn in types and types[fqn].get("datatype"):
        return fqn, True
    for option in type_ref.get("union", {}).get("types", []):
        element = option.get("collection", {}).get("elementtype", {})
        if element.get("fqn") in types and types[element["fqn"]].get("datatype"):
            return element["fqn"], False
    return None


def _kind(type_ref: dict[str, Any]) -> str:
    if "primitive" in type_ref:
        return "bool" if type_ref["primitive"] == "boolean" else str(type_ref["primitive"])
    if "collection" in type_ref:
        return "map" if type_ref["collection"]["kind"] == "map" else "list"
    # IResolvable | boolean (the only union that is not a block list) and anything new.
    kinds = [_kind(t) for t in type_ref.get("union", {}).get("types", []) if "fqn" not in t]
    return kinds[0] if len(kinds) == 1 else "any"


class _Structs:
    """Each jsii struct turned into one BlockSchema, shared by every reference (some recurse)."""

    def __init__(self, types: dict[str, Any]) -> None:
        self._types = types
        self.blocks: dict[str, BlockSchema] = {}

    def block(self, fqn: str) -> BlockSchema:
        if fqn in self.blocks:
            return self.blocks[fqn]
        # Registered before its properties are read, so a struct that contains itself ends.
        block = self.blocks[fqn] = BlockSchema()
        for prop in self._types[fqn].get("properties", []):
            name = _hcl_name(prop, fqn)
            required = not prop.get("optional", False)
            struct = _struct_of(prop["type"], self._types)
            if struct is None:
                block.attributes[name] = Attribute(required=required, kind=_kind(prop["type"]))
            else:
                nested = self.block(struct[0])
                block.blocks[name] = NestedBlock(required=required, single=struct[1], schema=nested)
        return block


def _config_fqn(cls: dict[str, Any]) -> str:
    for param in cls.get("initializer", {}).get("parameters", []):
        if param["name"] == "config":
            return str(param["type"]["fqn"])
    raise SchemaError(f"{cls['fqn']}: its initializer takes no config struct")


def extract(wheel: Path) -> ProviderSchema:
    """Read every resource, data source and the provider block from the wheel's assembly."""
    assembly = _read_assembly(wheel)
    types: dict[str, Any] = assembly["types"]
    structs = _Structs(types)
    found: dict[str, dict[str, BlockSchema]] = {"resources": {}, "data_sources": {}, "provider": {}}
    versions: set[str] = set()
    for cls in types.values():
        section = _STRUCT_BASES.get(cls.get("base", ""))
        if cls.get("kind") != "class" or section is None:
            continue
        link = _REGISTRY_LINK.search(cls.get("docs", {}).get("summary", ""))
        if link is None:
            raise SchemaError(f"{wheel}: {cls['fqn']} names no Terraform type in its docs")
        versions.add(link["version"])
        found[section][link["type"]] = structs.block(_config_fqn(cls))
    if len(versions) != 1 or "google" not in found["provider"]:
        raise SchemaError(f"{wheel}: expected one google provider version, found {versions}")
    return ProviderSchema(
        provider_version=versions.pop(),
        package=f"{assembly['name']}@{assembly['version']}",
        provider=found["provider"]["google"],
        resources=found["resources"],
        data_sources=found["data_sources"],
    )


# --- compact JSON cache -----------------------------------------------------------------------
# Blocks are stored once in a table and referred to by index: structs are shared and a few
# recurse, so a nested copy would never end.


class _Table:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self._index: dict[int, int] = {}

    def ref(self, block: BlockSchema) -> int:
        if id(block) in self._index:
            return self._index[id(block)]
        index = self._index[id(block)] = len(self.rows)
        row: dict[str, Any] = {}
        self.rows.append(row)
        row["a"] = {n: [int(a.required), a.kind] for n, a in sorted(block.attributes.items())}
        row["b"] = {
            n: [int(b.required), int(b.single), self.ref(b.schema)]
            for n, b in sorted(block.blocks.items())
        }
        return index


def dump(schema: ProviderSchema) -> str:
    table = _Table()
    document = {
        "format": FORMAT_VERSION,
        "provider_version": schema.provider_version,
        "package": schema.package,
        "provider": table.ref(schema.provider),
        "resources": {t: table.ref(b) for t, b in sorted(schema.resources.items())},
        "data_sources": {t: table.ref(b) for t, b in sorted(schema.data_sources.items())},
    }
    document["blocks"] = table.rows
    return json.dumps(document, separators=(",", ":"))


def parse(text: str) -> ProviderSchema:
    data = json.loads(text)
    if data.get("format") != FORMAT_VERSION:
        raise SchemaError(f"cached schema has format {data.get('format')}, not {FORMAT_VERSION}")
    blocks = [BlockSchema() for _ in data["blocks"]]
    for block, row in zip(blocks, data["blocks"], strict=True):
        block.attributes.update({n: Attribute(bool(r), k) for n, (r, k) in row["a"].items()})
        block.blocks.update(
            {n: NestedBlock(bool(r), bool(s), blocks[i]) for n, (r, s, i) in row["b"].items()}
        )
    return ProviderSchema(
        provider_version=data["provider_version"],
        package=data["package"],
        provider=blocks[data["provider"]],
        resources={t: blocks[i] for t, i in data["resources"].items()},
        data_sources={t: blocks[i] for t, i in data["data_sources"].items()},
    )


def load(wheel: Path, cache_dir: Path) -> ProviderSchema:
    """The schema of `wheel`, extracted once into `cache_dir` and read from there afterwards."""
    cached = cache_dir / f"{wheel.stem}.schema-v{FORMAT_VERSION}.json"
    if cached.exists():
        try:
            return parse(cached.read_text())
        except (SchemaError, ValueError, KeyError, TypeError):
            pass  # a stale or truncated cache: extract again
    schema = extract(wheel)
    cache_dir.mkdir(parents=True, exist_ok=True)
    # Write then rename: a concurrent reader never sees half a file.
    partial = cached.with_suffix(f".{os.getpid()}.partial")
    partial.write_text(dump(schema))
    partial.replace(cached)
    return schema
