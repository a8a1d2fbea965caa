"""Finding the files to check, and reading and writing them without losing a byte."""

from __future__ import annotations

import io
import os
import re
import stat
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, List, Sequence, Tuple

from steplint.globs import compile_glob

# Folders that hold no code of the project's own: the default `exclude`.
SKIPPED_DIRS = {
    ".git", ".hg", ".svn", ".venv", "venv", "__pycache__", "build", "dist", ".tox", ".nox", ".eggs",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".steplint_cache", "node_modules", "site-packages",
}


class FileError(Exception):
    """A file that cannot be read or decoded; the message says why."""


@dataclass(frozen=True)
class TextFile:
    text: str
    encoding: str  # as declared or detected; "utf-8-sig" keeps a BOM on write


def read_text(path: str) -> TextFile:
    try:
        raw = Path(path).read_bytes()
    except OSError as error:
        raise FileError(f"cannot read file: {error.strerror or error}") from None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        return TextFile(raw.decode(encoding), encoding)
    except (SyntaxError, LookupError) as error:
        raise FileError(f"cannot decode file: {error}") from None
    except UnicodeDecodeError as error:
        raise FileError(f"cannot decode file as {error.encoding}: invalid byte at offset {error.start}") from None


def write_text(path: str, file: TextFile, text: str) -> None:
    """Write atomically (a temporary file renamed over the original), keeping mode and encoding."""
    data = text.encode(file.encoding)
    target = os.path.realpath(path)
    mode = stat.S_IMODE(os.stat(target).st_mode)
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".steplint-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


class _GitIgnore:
    """The patterns of the .gitignore files met on the way down, with their folders."""

    def __init__(self, rules: Tuple[Tuple[str, "re.Pattern[str]", bool, bool], ...] = ()) -> None:
        self.rules = rules

    def extended(self, folder: str) -> "_GitIgnore":
        path = os.path.join(folder, ".gitignore")
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                lines = handle.read().splitlines()
        except OSError:
            return self
        added = []
        for line in lines:
            line = line.rstrip()
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            line = line[1:] if negated else line
            added.append((folder, compile_glob(line), negated, line.endswith("/")))
        return _GitIgnore(self.rules + tuple(added))

    def ignored(self, path: str, is_dir: bool) -> bool:
        result = False
        for folder, pattern, negated, dir_only in self.rules:
            if dir_only and not is_dir:
                continue
            relative = os.path.relpath(path, folder).replace(os.sep, "/")
            if relative.startswith("../"):
                continue
            if pattern.fullmatch(relative):
                result = not negated
        return result


def _is_virtualenv(folder: str) -> bool:
    return os.path.exists(os.path.join(folder, "pyvenv.cfg"))


def _python_file(path: str) -> bool:
    return path.endswith((".py", ".pyi"))


def discover(
    paths: Sequence[str], excluded: Callable[[str], bool], force_exclude: bool = False, included: Callable[[str], bool] = _python_file
) -> Tuple[List[str], List[str]]:
    """Files to check under the paths, and the paths that do not exist.

    Folders are walked for the files that `included` accepts (the `include` globs), skipping
    virtualenvs, what `excluded` says (the configured exclude globs) and what .gitignore ignores.
    A file named explicitly is checked unless `force_exclude` (then both settings apply to it).
    """
    found: List[str] = []
    missing: List[str] = []
    seen = set()
    for path in paths:
        if not os.path.lexists(path):
            missing.append(path)
            continue
        if force_exclude and (excluded(path) or (not os.path.isdir(path) and not included(path))):
            continue
        if not os.path.isdir(path):
            candidates: Iterator[str] = iter([path])
        else:
            candidates = _walk(path, _ancestors_gitignore(path), excluded, included)
        for candidate in candidates:
            key = os.path.normpath(candidate)
            if key not in seen:
                seen.add(key)
                found.append(key)
    return found, missing


def _ancestors_gitignore(path: str) -> _GitIgnore:
    folders = []
    current = os.path.abspath(path)
    while True:
        parent = os.path.dirname(current)
        if os.path.isdir(os.path.join(current, ".git")) or parent == current:
            folders.append(current)
            break
        folders.append(current)
        current = parent
    ignore = _GitIgnore()
    for folder in reversed(folders[1:]):
        ignore = ignore.extended(folder)
    return ignore


def _walk(folder: str, ignore: _GitIgnore, excluded: Callable[[str], bool], included: Callable[[str], bool]) -> Iterator[str]:
    ignore = ignore.extended(os.path.abspath(folder))
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        absolute = os.path.abspath(entry.path)
        try:
            is_dir = entry.is_dir()
        except OSError:
            continue
        if is_dir:
            if entry.is_symlink() or _is_virtualenv(entry.path) or ignore.ignored(absolute, True) or excluded(entry.path):
                continue
            yield from _walk(entry.path, ignore, excluded, included)
        elif included(entry.path) and not ignore.ignored(absolute, False) and not excluded(entry.path):
            yield entry.path
