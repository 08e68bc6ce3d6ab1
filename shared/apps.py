"""Apps: who registered which handler, kind, deliverer, collection and setting.

An app is a Python package that builds one `App` at import and registers through it
(shared/api.py is the reference). `load(names)` imports the apps a deployment names
(`HOOKLEDGER_APPS`, comma-separated module names) once per process; an app that fails to
import, builds no `App`, or takes a kind, batch tag, deliverer, collection or setting
another app (or the core) has, raises `AppError` naming it, and the function does not
start.

An app's module must stay light at import (the ingress loads it to learn which events
are handled): it imports its heavy dependencies inside its handlers.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.config import PRODUCTION_ENV_NAMES
from shared.config_readers import APPS_VARIABLE as APPS_VARIABLE
from shared.config_readers import DEFAULT_APPS as DEFAULT_APPS
from shared.config_readers import names_from_env as names_from_env
from shared.errors import AppError as AppError
from shared.errors import ConfigError

_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")
_SETTING = re.compile(r"[A-Z][A-Z0-9_]{1,63}")
SETTING_TYPES = ("str", "int", "float", "bool", "list")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class Setting:
    """One setting an app reads from the environment, declared once.

    `type` is one of SETTING_TYPES ("list": comma-separated, stripped, empties dropped; its
    default a tuple or that text);
    `choices` limits the value; `check(value)` returns a problem (str) or None. `secret`
    settings are never printed (`hookledger config` shows `<set>`).
    """

    name: str
    type: str = "str"
    default: Any = ""
    help: str = ""
    choices: tuple[Any, ...] = ()
    check: Callable[[Any], str | None] | None = None
    secret: bool = False

    def __post_init__(self) -> None:
        if not _SETTING.fullmatch(self.name):
            raise ValueError(f"setting name must match {_SETTING.pattern}, got {self.name!r}")
        if self.type not in SETTING_TYPES:
            raise ValueError(f"setting {self.name}: type must be one of {SETTING_TYPES}")
        self.parse(None)  # the default itself must be valid

    def parse(self, raw: str | None) -> Any:
        """The value of `raw` (None: the default); `ConfigError` naming the setting. A list
        setting's string default reads as that text in the environment would."""
        if raw is None and self.type == "list" and isinstance(self.default, str):
            raw = self.default  # else tuple("a,b") would be its characters
        value = self.default if raw is None else self._typed(raw.strip())
        if self.type == "list":
            value = tuple(value)
        if self.choices and value not in self.choices:
            raise ConfigError(f"{self.name} must be one of {list(self.choices)}, got {value!r}")
        problem = self.check(value) if self.check is not None else None
        if problem:
            raise ConfigError(f"{self.name}: {problem}")
        return value

    def _typed(self, raw: str) -> Any:
        try:
            if self.type == "int":
                return int(raw)
            if self.type == "float":
                return float(raw)
        except ValueError:
            raise ConfigError(f"{self.name} must be an {self.type}, got {raw!r}") from None
        if self.type == "bool":
            if raw.lower() not in _TRUE | _FALSE:
                raise ConfigError(f"{self.name} must be true or false, got {raw!r}")
            return raw.lower() in _TRUE
        if self.type == "list":
            return tuple(part.strip() for part in raw.split(",") if part.strip())
        return raw


def owner_name_globs(patterns: tuple[str, ...]) -> str | None:
    """A `Setting.check` for a list of repository globs (`octo-org/*`): a pattern without
    exactly one '/' could never match `owner/name`, so it is refused rather than ignored."""
    bad = [p for p in patterns if p.count("/") != 1]
    if bad:
        return f"entries must look like owner/name (globs allowed), got {bad[0]!r}"
    return None


class Settings(Mapping[str, Any]):
    """An app's settings as read from the environment: `settings["ARTICLES_PATH"]`."""

    def __init__(self, app: str, values: Mapping[str, Any]) -> None:
        self.app = app
        self._values = dict(values)

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"app {self.app!r} declares no setting {name!r}") from None

    def __iter__(self) -> Any:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


@dataclass
class AppRecord:
    """What one app registered (filled in by `shared.api.App`)."""

    name: str
    module: str
    settings: tuple[Setting, ...] = ()
    collections: frozenset[str] = frozenset()
    description: str = ""
    requires: tuple[str, ...] = ()

    def read_settings(self, environ: Mapping[str, str] | None = None) -> Settings:
        """The app's settings from `environ` (default: the process's); `ConfigError` naming
        the first bad one. Read each time: a handful of lookups, and tests may change them."""
        env = os.environ if environ is None else environ
        return Settings(self.name, {s.name: s.parse(env.get(s.name)) for s in self.settings})


_LOCK = threading.Lock()
_APPS: dict[str, AppRecord] = {}  # app name -> record
_LOADED: dict[str, str] = {}  # module name -> app name
_COLLECTIONS: dict[str, str] = {}  # collection -> app name


def declare(record: AppRecord) -> AppRecord:
    """Add an app (called by `shared.api.App`); a second app of the same name is an error."""
    if not _NAME.fullmatch(record.name):
        raise AppError(f"app name must match {_NAME.pattern}, got {record.name!r}")
    with _LOCK:
        existing = _APPS.get(record.name)
        if existing is not None and existing.module != record.module:
            raise AppError(
                f"app {record.name!r} ({record.module}) clashes with the app of that name "
                f"in {existing.module}"
            )
        taken = _taken_settings(record)
        if taken:
            raise AppError(f"app {record.name!r}: {taken}")
        for collection in record.collections:
            owner = _COLLECTIONS.get(collection)
            if owner is not None and owner != record.name:
                raise AppError(
                    f"app {record.name!r}: collection {collection!r} belongs to app {owner!r}"
                )
        for collection in record.collections:
            _COLLECTIONS[collection] = record.name
        _APPS[record.name] = record
    return record


def _taken_settings(record: AppRecord) -> str | None:
    core = {name for names in PRODUCTION_ENV_NAMES.values() for name in names}
    for setting in record.settings:
        if setting.name in core or setting.name == APPS_VARIABLE:
            return f"setting {setting.name} is the core's"
        for other in _APPS.values():
            if other.name != record.name and any(s.name == setting.name for s in other.settings):
                return f"setting {setting.name} belongs to app {other.name!r}"
    return None


def load(modules: Iterable[str] | None = None) -> list[AppRecord]:
    """Import each app module once (default: `HOOKLEDGER_APPS`) and return their records.

    Raises `AppError` naming the module when it cannot be imported, raises at import, or
    builds no `App`. Loading a module again is free.
    """
    loaded: list[AppRecord] = []
    for module in names_from_env() if modules is None else tuple(modules):
        name = _LOADED.get(module)
        if name is None:
            name = _import(module)
        loaded.append(_APPS[name])
    return loaded


def _import(module: str) -> str:
    before = set(_APPS)
    try:
        imported = importlib.import_module(module)
    except AppError as exc:
        raise AppError(f"app {module}: {exc}") from exc
    except Exception as exc:  # its own bug: named, with the cause, and the function stops
        raise AppError(f"app {module} failed to import: {type(exc).__name__}: {exc}") from exc
    app = getattr(imported, "app", None)
    record = getattr(app, "record", None)
    if not isinstance(record, AppRecord):
        new = set(_APPS) - before
        if len(new) != 1:
            raise AppError(f"app {module} defines no `app = App(...)` at its top level")
        record = _APPS[new.pop()]
    _LOADED[module] = record.name
    return record.name


def get(name: str) -> AppRecord | None:
    return _APPS.get(name)


def all_apps() -> list[AppRecord]:
    return [_APPS[name] for name in sorted(_APPS)]


def owner_of(collection: str) -> str | None:
    """The app that declared `collection`; None when no app did."""
    return _COLLECTIONS.get(collection)


def check_settings(records: Sequence[AppRecord], environ: Mapping[str, str] | None = None) -> None:
    """Read every loaded app's settings now: a bad value stops the function at start."""
    for record in records:
        try:
            record.read_settings(environ)
        except ConfigError as exc:
            raise AppError(f"app {record.name!r}: {exc}") from exc
