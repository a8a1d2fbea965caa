"""The editor's settings for the server, and the steplint Settings of each open document.

Editors send settings in `initializationOptions` and `workspace/didChangeConfiguration`, either
flat or under a `steplint` (or `settings`) key. The project's own configuration (pyproject.toml
`[tool.steplint]`, steplint.toml) is found and read exactly as `steplint check` finds and reads it;
the editor's `select`/`ignore`/`extendSelect` then override it as the command-line options do.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, fields, replace
from typing import Any, List, Mapping, Optional, Tuple

from steplint.config import ConfigError, Overrides, Resolver, Settings, find_config, load_config
from steplint.server.convert import SEVERITIES

LOG_LEVELS = {"error": logging.ERROR, "warn": logging.WARNING, "warning": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}
# The editor's names (camelCase, as editors spell settings) for the fields below.
_KEYS = {
    "configuration": "configuration",
    "select": "select",
    "ignore": "ignore",
    "extendSelect": "extend_select",
    "fixAll": "fix_all",
    "unsafeFixes": "unsafe_fixes",
    "showSyntaxErrors": "show_syntax_errors",
    "severity": "severity",
    "logLevel": "log_level",
}


@dataclass(frozen=True)
class EditorSettings:
    configuration: Optional[str] = None  # a configuration file used for every document
    select: Tuple[str, ...] = ()
    ignore: Tuple[str, ...] = ()
    extend_select: Tuple[str, ...] = ()
    fix_all: bool = True  # offer source.fixAll.steplint
    unsafe_fixes: bool = False  # fix-all applies unsafe fixes too
    show_syntax_errors: bool = True
    severity: str = "warning"
    log_level: str = "info"


def editor_settings(options: Any, current: EditorSettings = EditorSettings()) -> Tuple[EditorSettings, List[str]]:
    """Settings updated from what the editor sent, and a message per value that was not understood
    (a wrong value keeps the current one)."""
    if not isinstance(options, Mapping):
        return current, []
    for wrapper in ("steplint", "settings"):
        if isinstance(options.get(wrapper), Mapping):
            options = options[wrapper]
    problems: List[str] = []
    changes = {}
    types_of = {f.name: f.type for f in fields(EditorSettings)}
    for key, value in options.items():
        name = _KEYS.get(key)
        if name is None:
            continue
        kind = types_of[name]
        if "Tuple" in kind:
            value = [value] if isinstance(value, str) else value
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                changes[name] = tuple(c.strip() for v in value for c in v.split(",") if c.strip())
                continue
        elif kind == "bool" and isinstance(value, bool):
            changes[name] = value
            continue
        elif name == "configuration" and (value is None or isinstance(value, str)):
            changes[name] = value or None
            continue
        elif name == "severity" and value in SEVERITIES:
            changes[name] = value
            continue
        elif name == "log_level" and value in LOG_LEVELS:
            changes[name] = value
            continue
        problems.append(f"setting {key}: cannot use {value!r}")
    return replace(current, **changes), problems


class DocumentSettings:
    """steplint Settings per document path, for one generation of editor settings and configuration
    files; rebuilt (and the configuration files read again) when either changes."""

    def __init__(self, editor: EditorSettings, workspace_root: Optional[str]) -> None:
        self.errors: List[str] = []
        load_config.cache_clear()  # the files may have changed since the last generation
        find_config.cache_clear()
        self.root = workspace_root or os.getcwd()
        overrides = Overrides(editor.select, editor.ignore, editor.extend_select)
        try:
            overrides.apply(Settings())
        except ConfigError as error:
            self.errors.append(str(error))
            overrides = Overrides()
        self.overrides = overrides
        self.resolver: Optional[Resolver] = None
        config = editor.configuration
        if config:
            config = os.path.join(self.root, os.path.expanduser(config))
        try:
            self.resolver = Resolver(overrides, config)
        except ConfigError as error:
            self.errors.append(str(error))

    def settings_for(self, path: str) -> Settings:
        """The path's settings; the defaults (with the editor's overrides) when its configuration
        file is broken, whose error is then in `errors`."""
        if self.resolver is not None:
            try:
                return self.resolver.settings_for(path)
            except ConfigError as error:
                if str(error) not in self.errors:
                    self.errors.append(str(error))
        return self.overrides.apply(Settings(root=self.root))
