"""A content-hash cache of each file's diagnostics (with their fixes), like ruff's.

An entry is keyed by what decides the diagnostics: the file's path and text, the effective settings,
steplint's version and files, the running Python's version (its parser decides SL001) and the
summaries of the modules the file depends on (the project index passes them in; without it, none). It lives in `.steplint_cache/` at the project root (the folder of the
configuration file, else the working folder), or in the `cache-dir` setting or `STEPLINT_CACHE_DIR`.

Entries are JSON, never trusted: one that does not read back as the diagnostics of its own key is a
miss, and the next run overwrites it. Writes go to a temporary file renamed into place, so runs in
parallel cannot leave a torn entry. Only checks use it; fixing always analyses afresh.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
import sys
from typing import Iterable, List, Optional

from steplint import __version__
from steplint.diagnostic import Diagnostic
from steplint.fixes import Edit, Fix

CACHE_DIR_NAME = ".steplint_cache"
ENVIRONMENT = "STEPLINT_CACHE_DIR"
_FORMAT = 1


def cache_key(path: str, text: str, settings: object, dependencies: Iterable[str] = ()) -> str:
    """The key of one file's entry. `dependencies`: the summaries (any stable text) of the modules
    it depends on, so that editing one of them misses the entries of its dependents."""
    digest = hashlib.sha256()
    # (the running Python too: its parser decides SL001)
    header = f"steplint {__version__} format {_FORMAT} code {code_signature()} python {sys.version_info[:3]}"
    for part in (header, os.path.abspath(path), repr(settings), *dependencies):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def code_signature() -> str:
    """The installed analyzer's own files (name, size, modification time): an editable install that
    changes a rule between two runs of one version must not be answered by the old rule's entries."""
    digest = hashlib.sha256()
    root = os.path.dirname(os.path.abspath(__file__))
    rules = os.path.dirname(os.path.abspath(importlib.import_module("steplint.rules").__file__ or root))
    for folder in sorted({root, rules}):
        for directory, _, names in sorted(os.walk(folder)):
            for name in sorted(n for n in names if n.endswith(".py")):
                stat = os.stat(os.path.join(directory, name))
                digest.update(f"{os.path.join(directory, name)}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def cache_dir(settings) -> str:
    """Where a file checked with `settings` keeps its entries."""
    return settings.cache_dir or os.environ.get(ENVIRONMENT) or os.path.join(settings.root, CACHE_DIR_NAME)


def load(directory: str, key: str) -> Optional[List[Diagnostic]]:
    """The cached diagnostics of a key, or None for a miss (absent, corrupted or foreign)."""
    try:
        with open(_entry(directory, key), encoding="utf-8") as handle:
            data = json.load(handle)
        if data["key"] != key or data["format"] != _FORMAT:
            return None
        return [_diagnostic(d) for d in data["diagnostics"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def store(directory: str, key: str, diagnostics: List[Diagnostic]) -> None:
    """Write an entry atomically; a cache that cannot be written is no cache, not an error."""
    data = {"format": _FORMAT, "key": key, "diagnostics": [_plain(d) for d in diagnostics]}
    path = _entry(directory, key)
    folder = os.path.dirname(path)
    try:
        # One temporary name per entry and process, opened exclusively (tempfile's random names cost
        # more than the write): another process writing the same entry has its own; a second writer
        # in this process fails to open it, and that write is skipped.
        temporary = os.path.join(folder, f".tmp-{os.getpid()}-{key}")
        try:
            if folder not in _MADE:  # (made once per process: a run stores thousands of entries)
                _make(directory, folder)
            handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileNotFoundError:  # the cache was deleted since (a long-running server)
            _make(directory, folder)
            handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(json.dumps(data))  # (dumps: json's C encoder; dump writes through the Python one)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:
        pass


_MADE: set = set()  # entry folders this process made or found


def _make(directory: str, folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    _mark(directory)
    _MADE.add(folder)


def _entry(directory: str, key: str) -> str:
    return os.path.join(directory, key[:2], key)


def _mark(directory: str) -> None:
    """Keep the cache out of version control and backups, as ruff does."""
    ignore = os.path.join(directory, ".gitignore")
    if not os.path.exists(ignore):
        with open(ignore, "w", encoding="utf-8") as out:
            out.write("# Automatically created by steplint.\n*\n")
        with open(os.path.join(directory, "CACHEDIR.TAG"), "w", encoding="utf-8") as out:
            out.write("Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by steplint.\n")


def _plain(d: Diagnostic) -> dict:
    fields = dict(vars(d))
    if d.fix is not None:
        fields["fix"] = {**vars(d.fix), "edits": [list(vars(e).values()) for e in d.fix.edits]}
    return fields


def _diagnostic(fields: dict) -> Diagnostic:
    fix = fields.get("fix")
    if fix is not None:
        fix = Fix(fix["title"], fix["applicability"], tuple(Edit(*e) for e in fix["edits"]), fix["group"], fix.get("gate"))
    evidence = tuple(tuple(premise) for premise in fields.get("evidence", ()))  # (JSON keeps them as lists)
    diagnostic = Diagnostic(**{**fields, "fix": fix, "evidence": evidence})
    if not all(isinstance(getattr(diagnostic, name), int) for name in ("start", "end", "row", "column", "end_row", "end_column")):
        raise TypeError("not an entry of this cache")
    return diagnostic
