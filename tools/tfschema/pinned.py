"""The pinned schema wheel (tools/tfschema/requirements.txt) and where the Makefile puts it."""

from __future__ import annotations

import re
from pathlib import Path

from tools.tfschema.jsii_schema import ProviderSchema, SchemaError, load

REPO = Path(__file__).resolve().parents[2]
PIN_FILE = REPO / "tools" / "tfschema" / "requirements.txt"
CACHE_DIR = REPO / ".cache" / "provider-schema"  # git-ignored; the wheel and its compact JSON


def pinned_version(pin_file: Path = PIN_FILE) -> tuple[str, str]:
    """(distribution, version) of the one `name==version` line of the pin file."""
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", pin_file.read_text(), re.MULTILINE)
    if len(pins) != 1:
        raise SchemaError(f"{pin_file}: expected one `name==version` line, found {pins}")
    return pins[0][0], pins[0][1]


def pinned_wheel(cache_dir: Path = CACHE_DIR, pin_file: Path = PIN_FILE) -> Path:
    """The downloaded wheel of the pinned version; SchemaError says how to fetch it if absent."""
    name, version = pinned_version(pin_file)
    wheels = sorted(cache_dir.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
    if not wheels:
        raise SchemaError(
            f"{name}=={version} is not in {cache_dir}: run `make provider-schema` (it runs "
            f"`pip download --no-deps --require-hashes -r {pin_file.relative_to(REPO)}`)"
        )
    return wheels[-1]


def load_pinned(cache_dir: Path = CACHE_DIR) -> ProviderSchema:
    """The pinned provider schema; the first call extracts it (~20 s), later ones read JSON."""
    return load(pinned_wheel(cache_dir), cache_dir)
