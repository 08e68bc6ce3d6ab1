"""GitHub's published example payloads, shipped with the test kit (payloads/README.md)."""

from __future__ import annotations

from pathlib import Path

PAYLOADS = Path(__file__).resolve().parent / "payloads"


def github_example_path(name: str) -> Path:
    """The file of GitHub's example `name` (`push`, `push-with-new-branch`, `ping`, …)."""
    path = PAYLOADS / "github" / f"{name}.json"
    if not path.is_file():
        known = sorted(p.stem for p in (PAYLOADS / "github").glob("*.json"))
        raise FileNotFoundError(f"no GitHub example named {name!r}; one of: {', '.join(known)}")
    return path


def github_example(name: str) -> bytes:
    """GitHub's example body `name`, byte for byte (sign it as it is, never re-serialize)."""
    return github_example_path(name).read_bytes()
