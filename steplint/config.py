"""Settings: which rules run where, the default schedule basis, how fixes add the commit gate.

They come from `[tool.steplint]` in the nearest pyproject.toml, or from steplint.toml /
.steplint.toml (which win over pyproject.toml in the same folder), found upward from each checked
path, or from `--config FILE`. Each configuration file is read and checked once per run.
"""

from __future__ import annotations

import os
import re
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
    respect_gitignore: bool = True  # folder walks skip what git ignores
    force_exclude: bool = False  # exclude and include apply to paths named on the command line too
    ignore_noqa: bool = False  # `--ignore-noqa`: report what `# noqa` comments suppress
    fixable: Tuple[str, ...] = ("ALL",)  # the rules whose fixes are offered and applied
    unfixable: Tuple[str, ...] = ()
    extend_fixable: Tuple[str, ...] = ()
    roles: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()  # (role kind, extra names that hold it)
    recipe: Optional[str] = None  # a framework's counting convention the code follows (RECIPES)
    target_version: Optional[str] = None  # "3.12": the Python the project targets (`target-version`, else the requires-python of the file's own project)
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

    def fixable_codes(self) -> FrozenSet[str]:
        """The codes whose fixes are offered (`fixable`, `extend-fixable`, less `unfixable`): a team can
        keep a rule's fix out of `--fix` and review those places by hand."""
        return _enabled(self.fixable + self.extend_fixable, self.unfixable, self.origin)

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
        if key in ("select", "ignore", "extend-select", "fixable", "unfixable", "extend-fixable"):
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
        elif key in ("respect-gitignore", "force-exclude"):
            if not isinstance(value, bool):
                raise ConfigError(f"{origin}: {key}: expected true or false, got {value!r}")
            changes[key.replace("-", "_")] = value
        elif key == "schedule-basis":
            changes["schedule_basis"] = _choice(value, key, origin, BASES)
        elif key == "recipe":
            changes["recipe"] = _choice(value, key, origin, RECIPES)
        elif key == "cache-dir":
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{origin}: cache-dir: expected a folder name, got {value!r}")
            changes["cache_dir"] = os.path.join(root, os.path.expanduser(value))
        elif key == "target-version":
            match = re.fullmatch(r"py3(\d+)", value) if isinstance(value, str) else None
            if match is None:
                raise ConfigError(f"{origin}: target-version: expected a version such as \"py312\", got {value!r}")
            changes["target_version"] = f"3.{match.group(1)}"
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
    table, origin = _steplint_table(path, data)
    root = os.path.dirname(os.path.abspath(path))
    return settings_from_table(_extended(table, path, origin, (os.path.realpath(path),)), root, origin)


def _steplint_table(path: str, data: dict) -> Tuple[dict, str]:
    """The file's steplint table and its name for messages."""
    if os.path.basename(path) == "pyproject.toml":
        data = data.get("tool", {}).get("steplint", {})
        origin = f"{path} [tool.steplint]"
    else:
        origin = path
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: expected a table")
    return data, origin


def _extended(table: dict, path: str, origin: str, chain: Tuple[str, ...]) -> dict:
    """The table merged over the one its `extend` names (a path relative to this file), recursively:
    this file's keys win. A cycle is an error naming the files."""
    if "extend" not in table:
        return table
    own = {k: v for k, v in table.items() if k != "extend"}
    base_name = table["extend"]
    if not isinstance(base_name, str) or not base_name:
        raise ConfigError(f"{origin}: extend: expected the path of a configuration file, got {base_name!r}")
    base = os.path.join(os.path.dirname(os.path.abspath(path)), os.path.expanduser(base_name))
    if os.path.realpath(base) in chain:
        cycle = " -> ".join(list(chain) + [os.path.realpath(base)])
        raise ConfigError(f"{origin}: extend: configuration files extend each other in a cycle: {cycle}")
    try:
        with open(base, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as error:
        raise ConfigError(f"{origin}: extend: cannot read {base}: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{base}: invalid TOML: {error}") from None
    base_table, base_origin = _steplint_table(base, data)
    merged = _extended(base_table, base, base_origin, chain + (os.path.realpath(base),))
    settings_from_table(merged, os.path.dirname(os.path.abspath(base)), base_origin)  # its errors name its file
    return {**merged, **own}


_LOWER_BOUND = re.compile(r"(?:>=|~=|==)\s*(\d+)\.(\d+)")


@lru_cache(maxsize=None)
def requires_python(folder: str) -> Optional[str]:
    """The lowest Python ("3.12") that the nearest pyproject.toml at or above `folder` requires
    (`[project] requires-python`), or None."""
    while True:
        pyproject = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(pyproject):
            try:
                with open(pyproject, "rb") as handle:
                    required = tomllib.load(handle).get("project", {}).get("requires-python")
            except (OSError, tomllib.TOMLDecodeError):
                return None  # (a pyproject.toml that is not TOML is reported where it configures steplint)
            bounds = _LOWER_BOUND.findall(required) if isinstance(required, str) else []
            return ".".join(min(bounds, key=lambda b: (int(b[0]), int(b[1])))) if bounds else None
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


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
    """Whether a pyproject.toml configures steplint. One that is not TOML may well (and ruff and pip
    refuse it too): an error, never a silent fallback to the defaults."""
    try:
        with open(pyproject, "rb") as handle:
            return "steplint" in tomllib.load(handle).get("tool", {})
    except OSError:
        return False
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{pyproject}: invalid TOML: {error}") from None


@dataclass(frozen=True)
class Overrides:
    """Command-line options that change the settings of every configuration file."""

    select: Tuple[str, ...] = ()
    ignore: Tuple[str, ...] = ()
    extend_select: Tuple[str, ...] = ()
    fixable: Tuple[str, ...] = ()
    unfixable: Tuple[str, ...] = ()
    extend_fixable: Tuple[str, ...] = ()
    exclude: Tuple[str, ...] = ()
    extend_exclude: Tuple[str, ...] = ()
    per_file_ignores: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
    ignore_noqa: bool = False

    def apply(self, settings: Settings) -> Settings:
        changed = _file_overrides(self, _fix_overrides(self, settings))
        if self.select:
            changed = replace(changed, select=self.select, extend_select=())
        if self.ignore:
            changed = replace(changed, ignore=changed.ignore + self.ignore)
        if self.extend_select:
            changed = replace(changed, extend_select=changed.extend_select + self.extend_select)
        expand(changed.select + changed.extend_select, "select", "command line")
        expand(changed.ignore, "ignore", "command line")
        return changed


def _fix_overrides(overrides: Overrides, settings: Settings) -> Settings:
    """`--fixable` replaces the configured list, `--unfixable` and `--extend-fixable` add to theirs, as ruff's do."""
    changed = settings
    if overrides.fixable:
        changed = replace(changed, fixable=overrides.fixable, extend_fixable=())
    if overrides.unfixable:
        changed = replace(changed, unfixable=changed.unfixable + overrides.unfixable)
    if overrides.extend_fixable:
        changed = replace(changed, extend_fixable=changed.extend_fixable + overrides.extend_fixable)
    expand(changed.fixable + changed.extend_fixable, "fixable", "command line")
    expand(changed.unfixable, "unfixable", "command line")
    return changed


def _file_overrides(overrides: Overrides, settings: Settings) -> Settings:
    """`--exclude` and `--per-file-ignores` replace the configured lists, `--extend-exclude` adds to it
    (globs relative to the configuration's folder, as in the file); `--ignore-noqa`."""
    changed = settings
    if overrides.exclude:
        changed = replace(changed, exclude=overrides.exclude)
    if overrides.extend_exclude:
        changed = replace(changed, extend_exclude=changed.extend_exclude + overrides.extend_exclude)
    if overrides.per_file_ignores:
        for pattern, codes in overrides.per_file_ignores:
            expand(codes, f"per-file-ignores {pattern!r}", "command line")
        changed = replace(changed, per_file_ignores=overrides.per_file_ignores)
    if overrides.ignore_noqa:
        changed = replace(changed, ignore_noqa=True)
    return changed


def parse_per_file_ignores(values: Iterable[str]) -> Tuple[Tuple[str, Tuple[str, ...]], ...]:
    """`--per-file-ignores 'GLOB:CODE,CODE'` (repeatable) as the setting's pairs."""
    pairs = []
    for value in values:
        pattern, colon, codes = value.rpartition(":")
        if not colon or not pattern or not codes.strip():
            raise ConfigError(f"command line: per-file-ignores: expected GLOB:CODES, got {value!r}")
        pairs.append((pattern, tuple(c.strip() for c in codes.split(",") if c.strip())))
    return tuple(pairs)


class Resolver:
    """Settings for each checked path: from `--config FILE`, or the nearest configuration file."""

    def __init__(self, overrides: Overrides, config_file: Optional[str] = None, isolated: bool = False) -> None:
        self.overrides = overrides
        self.fixed = overrides.apply(load_config(config_file)) if config_file else None
        self.isolated = isolated
        if isolated:  # `--isolated`: no configuration file at all, the defaults rooted here
            self.fixed = overrides.apply(Settings(root=os.getcwd()))
        self._by_file: Dict[Tuple[Optional[str], Optional[str]], Settings] = {}

    def settings_for(self, path: str) -> Settings:
        """The settings of the nearest configuration file (or `--config`'s, or the defaults), with the
        Python of the path's own project where they name no `target-version`: sub-projects under one
        configuration may require different Pythons. `--isolated` reads no pyproject.toml at all."""
        folder = os.path.dirname(os.path.abspath(path)) if not os.path.isdir(path) else os.path.abspath(path)
        python = None if self.isolated else requires_python(folder)
        config = None if self.fixed is not None else find_config(folder)
        key = (config, python)
        if key not in self._by_file:
            if self.fixed is not None:
                settings = self.fixed
            else:
                settings = self.overrides.apply(load_config(config) if config else Settings(root=os.getcwd()))
            self._by_file[key] = settings if settings.target_version or not python else replace(settings, target_version=python)
        return self._by_file[key]
