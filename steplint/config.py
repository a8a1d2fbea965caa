"""Settings: which rules run where, the default schedule basis, how fixes add the commit gate.

They come from `[tool.steplint]` in the nearest pyproject.toml, or from steplint.toml /
.steplint.toml (which win over pyproject.toml in the same folder), found upward from each checked
path, or from `--config FILE`. Each configuration file is read and checked once per run.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Dict, FrozenSet, Iterable, Mapping, Optional, Tuple

from steplint.files import SKIPPED_DIRS
from steplint.globs import matches
from steplint.rule import Rule, all_rules
from steplint.suppress import BASES, DECLARED_UNITS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11
    import tomli as tomllib

DEFAULT_BASIS = "committed-updates"
FIX_GATES = ("inline", "import")
ROLE_KINDS = {"optimizer": "optimizer", "scaler": "scaler", "scheduler": "scheduler", "loss-scaler": "loss-scaler", "accelerator": "accelerator", "ema": "ema",
              "skippable-optimizer": "skippable-optimizer"}
# "hf-trainer": the HF Trainer's and DeepSpeed's convention: the LR moves on committed updates, while
# `global_step` counts attempted ones (checkpoints, evaluation and the end of the run follow attempts).
RECIPES = ("hf-trainer",)
CONFIG_NAMES = ("steplint.toml", ".steplint.toml")
DEFAULT_INCLUDE = ("*.py", "*.pyi", "*.ipynb")  # as ruff >= 0.6: notebooks are checked by default


class ConfigError(Exception):
    """A setting that cannot be honoured; the message names the file and the key."""


@dataclass(frozen=True)
class Settings:
    select: Tuple[str, ...] = ("ALL",)
    ignore: Tuple[str, ...] = ()
    extend_select: Tuple[str, ...] = ()
    schedule_basis: str = DEFAULT_BASIS
    fix_gate: str = "inline"  # "inline": add committed_step to the module; "import": from steplint.runtime
    exclude: Tuple[str, ...] = tuple(sorted(SKIPPED_DIRS))
    extend_exclude: Tuple[str, ...] = ()
    include: Tuple[str, ...] = DEFAULT_INCLUDE  # which files a folder walk picks up
    extend_include: Tuple[str, ...] = ()
    per_file_ignores: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
    roles: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()  # (role kind, extra names that hold it)
    recipe: Optional[str] = None  # a framework's counting convention the code follows (RECIPES)
    units: Tuple[Tuple[str, str], ...] = ()  # `[tool.steplint.units]`: (counter name, declared unit)
    cache_dir: Optional[str] = None  # `cache-dir`, absolute; None: STEPLINT_CACHE_DIR, else .steplint_cache in root
    root: str = "."  # the folder that exclude and per-file-ignores globs are relative to
    origin: str = "defaults"  # the file the settings came from, for messages

    def enabled_rules(self, path: Optional[str] = None) -> Dict[str, Rule]:
        codes = _enabled(self.select + self.extend_select, self.ignore, self.origin)
        if path is not None:
            relative = self.relative(path)
            for pattern, ignored in self.per_file_ignores:
                if matches((pattern,), relative):
                    codes = codes - expand(ignored, "per-file-ignores", self.origin)
        rules = all_rules()
        return {code: rules[code] for code in sorted(codes)}

    def relative(self, path: str) -> str:
        return os.path.relpath(os.path.abspath(path), self.root).replace(os.sep, "/")

    def excluded(self, path: str) -> bool:
        return matches(self.exclude + self.extend_exclude, self.relative(path), os.path.isdir(path))

    def included(self, path: str) -> bool:
        """Whether a file is one to check (`include`, `extend-include`: `*.py`, `*.pyi`, `*.ipynb`)."""
        return matches(self.include + self.extend_include, self.relative(path))

    def role_names(self) -> Dict[str, FrozenSet[str]]:
        return {kind: frozenset(names) for kind, names in self.roles}


@lru_cache(maxsize=None)
def _enabled(selected: Tuple[str, ...], ignored: Tuple[str, ...], origin: str) -> FrozenSet[str]:
    return expand(selected, "select", origin) - expand(ignored, "ignore", origin)


def expand(selectors: Iterable[str], key: str, origin: str = "command line") -> FrozenSet[str]:
    """Codes matched by selectors: full codes, prefixes like `SL1`, or `ALL`."""
    codes = set(all_rules())
    found = set()
    for selector in selectors:
        selector = selector.strip().upper()
        matched = codes if selector == "ALL" else {c for c in codes if c.startswith(selector)} if selector.startswith("SL") else set()
        if not matched:
            raise ConfigError(f"{origin}: {key}: unknown rule code or prefix {selector!r}")
        found |= matched
    return frozenset(found)


# -- reading configuration files ------------------------------------------------------------------


def _strings(value: object, key: str, origin: str) -> Tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{origin}: {key}: expected a list of strings, got {value!r}")
    return tuple(value)


def _choice(value: object, key: str, origin: str, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if value not in choices:
        raise ConfigError(f"{origin}: {key}: expected one of {', '.join(choices)}, got {value!r}")
    return value  # type: ignore[return-value]


def settings_from_table(table: Mapping[str, object], root: str, origin: str) -> Settings:
    """Settings from a `[tool.steplint]` table; every key and code is checked."""
    settings = Settings(root=root, origin=origin)
    changes: Dict[str, object] = {}
    for key, value in table.items():
        if key in ("select", "ignore", "extend-select"):
            codes = _strings(value, key, origin)
            expand(codes, key, origin)
            changes[key.replace("-", "_")] = codes
        elif key in ("exclude", "extend-exclude", "include", "extend-include"):
            changes[key.replace("-", "_")] = _strings(value, key, origin)
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{origin}: per-file-ignores: expected a table of glob = [codes], got {value!r}")
            pairs = []
            for pattern, codes in value.items():
                codes = _strings(codes, f"per-file-ignores.{pattern!r}", origin)
                expand(codes, f"per-file-ignores.{pattern!r}", origin)
                pairs.append((pattern, codes))
            changes["per_file_ignores"] = tuple(pairs)
        elif key == "schedule-basis":
            changes["schedule_basis"] = _choice(value, key, origin, BASES)
        elif key == "recipe":
            changes["recipe"] = _choice(value, key, origin, RECIPES)
        elif key == "cache-dir":
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{origin}: cache-dir: expected a folder name, got {value!r}")
            changes["cache_dir"] = os.path.join(root, os.path.expanduser(value))
        elif key == "fix-gate":
            changes["fix_gate"] = _choice(value, key, origin, FIX_GATES)
        elif key == "units":
            if not isinstance(value, dict):
                raise ConfigError(f"{origin}: units: expected a table such as `batch_idx_train = \"batches\"`, got {value!r}")
            for name, unit in value.items():
                _choice(unit, f"units.{name}", origin, tuple(DECLARED_UNITS))
            changes["units"] = tuple(value.items())
        elif key == "roles":
            if not isinstance(value, dict):
                raise ConfigError(f"{origin}: roles: expected a table such as `scheduler = [\"warmup_policy\"]`, got {value!r}")
            roles = []
            for kind, names in value.items():
                if kind not in ROLE_KINDS:
                    raise ConfigError(f"{origin}: roles.{kind}: unknown role; expected one of {', '.join(ROLE_KINDS)}")
                roles.append((ROLE_KINDS[kind], _strings(names, f"roles.{kind}", origin)))
            changes["roles"] = tuple(roles)
        else:
            raise ConfigError(f"{origin}: unknown key {key!r}")
    return replace(settings, **changes)  # type: ignore[arg-type]


@lru_cache(maxsize=None)
def load_config(path: str) -> Settings:
    """The settings of one configuration file (read once per run)."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None
    if os.path.basename(path) == "pyproject.toml":
        data = data.get("tool", {}).get("steplint", {})
        origin = f"{path} [tool.steplint]"
    else:
        origin = path
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: expected a table")
    return settings_from_table(data, os.path.dirname(os.path.abspath(path)), origin)


@lru_cache(maxsize=None)
def find_config(folder: str) -> Optional[str]:
    """The configuration file for a folder: the nearest one found upward."""
    for name in CONFIG_NAMES:
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    pyproject = os.path.join(folder, "pyproject.toml")
    if os.path.isfile(pyproject) and _has_steplint_table(pyproject):
        return pyproject
    parent = os.path.dirname(folder)
    return None if parent == folder else find_config(parent)


def _has_steplint_table(pyproject: str) -> bool:
    try:
        with open(pyproject, "rb") as handle:
            return "steplint" in tomllib.load(handle).get("tool", {})
    except (OSError, tomllib.TOMLDecodeError):
        return False


@dataclass(frozen=True)
class Overrides:
    """Command-line options that change the settings of every configuration file."""

    select: Tuple[str, ...] = ()
    ignore: Tuple[str, ...] = ()
    extend_select: Tuple[str, ...] = ()

    def apply(self, settings: Settings) -> Settings:
        changed = settings
        if self.select:
            changed = replace(changed, select=self.select, extend_select=())
        if self.ignore:
            changed = replace(changed, ignore=changed.ignore + self.ignore)
        if self.extend_select:
            changed = replace(changed, extend_select=changed.extend_select + self.extend_select)
        expand(changed.select + changed.extend_select, "select", "command line")
        expand(changed.ignore, "ignore", "command line")
        return changed


class Resolver:
    """Settings for each checked path: from `--config FILE`, or the nearest configuration file."""

    def __init__(self, overrides: Overrides, config_file: Optional[str] = None) -> None:
        self.overrides = overrides
        self.fixed = overrides.apply(load_config(config_file)) if config_file else None
        self._by_file: Dict[Optional[str], Settings] = {}

    def settings_for(self, path: str) -> Settings:
        if self.fixed is not None:
            return self.fixed
        folder = os.path.dirname(os.path.abspath(path)) if not os.path.isdir(path) else os.path.abspath(path)
        config = find_config(folder)
        if config not in self._by_file:
            base = load_config(config) if config else Settings(root=os.getcwd())
            self._by_file[config] = self.overrides.apply(base)
        return self._by_file[config]
