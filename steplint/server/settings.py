"""The editor's settings for the server, and the steplint Settings of each open document.

Editors send settings in `initializationOptions` and `workspace/didChangeConfiguration`, either
flat or under a `steplint` (or `settings`) key. The project's own configuration (pyproject.toml
`[tool.steplint]`, steplint.toml) is found and read exactly as `steplint check` finds and reads it;
the editor's `select`/`ignore`/`extendSelect` then override it as the command-line options do.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

from steplint.config import ConfigError, Overrides, Resolver, Settings, expand, find_config, load_config, requires_python
from steplint.server.convert import SEVERITIES

LOG_LEVELS = {"error": logging.ERROR, "warn": logging.WARNING, "warning": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}


@dataclass(frozen=True)
class EditorSettings:
    enable: bool = True  # false: no diagnostics (those published are cleared), no actions
    configuration: Optional[str] = None  # a configuration file used for every document
    select: Tuple[str, ...] = ()
    ignore: Tuple[str, ...] = ()
    extend_select: Tuple[str, ...] = ()
    fix_all: bool = True  # offer source.fixAll.steplint
    unsafe_fixes: bool = False  # fix-all applies unsafe fixes too
    show_syntax_errors: bool = True
    severity: str = "warning"
    log_level: str = "info"


def _codes(value: Any, key: str) -> Tuple[str, ...]:
    """Rule codes or prefixes: a list, or one comma-separated string; each must name a rule."""
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ConfigError(f"setting {key}: expected a list of rule codes, got {value!r}")
    codes = tuple(c.strip() for v in values for c in v.split(",") if c.strip())
    expand(codes, key, "editor settings")
    return codes


def _flag(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"setting {key}: expected true or false, got {value!r}")
    return value


def _path(value: Any, key: str) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"setting {key}: expected a file path, got {value!r}")
    return value or None


def _one_of(choices):
    def check(value: Any, key: str) -> str:
        if value not in choices:
            raise ConfigError(f"setting {key}: expected one of {', '.join(choices)}, got {value!r}")
        return value

    return check


# The editor's names (camelCase, as editors spell settings): the field each sets and its check.
_SETTINGS = {
    "enable": ("enable", _flag),
    "configuration": ("configuration", _path),
    "select": ("select", _codes),
    "ignore": ("ignore", _codes),
    "extendSelect": ("extend_select", _codes),
    "fixAll": ("fix_all", _flag),
    "unsafeFixes": ("unsafe_fixes", _flag),
    "showSyntaxErrors": ("show_syntax_errors", _flag),
    "severity": ("severity", _one_of(tuple(SEVERITIES))),
    "logLevel": ("log_level", _one_of(tuple(LOG_LEVELS))),
}


def editor_settings(options: Any) -> Tuple[EditorSettings, List[str]]:
    """The settings the editor sent (what it leaves out has its default: new settings replace the
    old ones), and a message per value that cannot be used (it keeps its default). Unknown keys
    are other tools' business."""
    if not isinstance(options, Mapping):
        return EditorSettings(), []
    for wrapper in ("steplint", "settings"):
        if isinstance(options.get(wrapper), Mapping):
            options = options[wrapper]
    problems: List[str] = []
    changes = {}
    for key, value in options.items():
        if key in _SETTINGS:
            name, check = _SETTINGS[key]
            try:
                changes[name] = check(value, key)
            except ConfigError as error:
                problems.append(str(error))
    return EditorSettings(**changes), problems


class DocumentSettings:
    """steplint Settings per document path, for one generation of editor settings and configuration
    files; rebuilt (and the configuration files read again) when either changes."""

    def __init__(self, editor: EditorSettings, workspace_root: Optional[str]) -> None:
        self.errors: List[str] = []
        load_config.cache_clear()  # the files may have changed since the last generation
        find_config.cache_clear()
        requires_python.cache_clear()
        self.root = workspace_root or os.getcwd()
        self.overrides = Overrides(editor.select, editor.ignore, editor.extend_select)  # checked by editor_settings
        self.resolver: Optional[Resolver] = None
        self._by_path: Dict[str, Settings] = {}
        config = editor.configuration
        if config:
            config = os.path.join(self.root, os.path.expanduser(config))
        try:
            self.resolver = Resolver(self.overrides, config)
        except ConfigError as error:
            self.errors.append(str(error))

    def settings_for(self, path: str) -> Settings:
        """The path's settings; the defaults (with the editor's overrides) when its configuration
        file is broken, whose error is then in `errors`."""
        if path not in self._by_path:
            self._by_path[path] = self._resolve(path)
        return self._by_path[path]

    def _resolve(self, path: str) -> Settings:
        if self.resolver is not None:
            try:
                return self.resolver.settings_for(path)
            except ConfigError as error:
                self.errors.append(str(error))
        return self.overrides.apply(Settings(root=self.root))
