"""Finding the files to check, and reading and writing them without losing a byte."""

from __future__ import annotations

import codecs
import errno
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
    """A file that cannot be read, decoded or written; the message says why."""


class NotRegularFile(FileError):
    """A FIFO, socket or device named like a Python file: never read (a FIFO would wait forever)."""


@dataclass(frozen=True)
class TextFile:
    text: str
    encoding: str  # as declared or detected; "utf-8-sig" keeps a BOM on write


def read_text(path: str) -> TextFile:
    try:
        # Non-blocking, so that opening a FIFO returns at once; regular files read as usual.
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        raise FileError(_cannot_read(path, error)) from None
    with os.fdopen(descriptor, "rb") as handle:
        kind = stat.S_IFMT(os.fstat(descriptor).st_mode)
        if kind != stat.S_IFREG:
            raise NotRegularFile(f"not a regular file ({_KINDS.get(kind, 'special file')})")
        try:
            raw = handle.read()
        except OSError as error:
            raise FileError(_cannot_read(path, error)) from None
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise FileError("cannot decode file: it is UTF-16 or UTF-32 (byte order mark); Python source is UTF-8 or declares an 8-bit encoding")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        return TextFile(raw.decode(encoding), encoding)
    except (SyntaxError, LookupError) as error:
        raise FileError(f"cannot decode file: {error}") from None
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        byte = raw[error.start : error.start + 1].hex()
        raise FileError(f"cannot decode file as {error.encoding}: invalid byte 0x{byte} on line {line} (declare the encoding with a `# -*- coding: ... -*-` comment)") from None


_KINDS = {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}


def _cannot_read(path: str, error: OSError) -> str:
    if error.errno == errno.ENOENT and os.path.islink(path):
        return f"cannot read file: broken symbolic link (to {os.readlink(path)})"
    if error.errno == errno.ELOOP:
        return "cannot read file: symbolic link loop"
    return f"cannot read file: {error.strerror or error}"


def write_text(path: str, file: TextFile, text: str) -> None:
    """Write atomically (a temporary file in the same folder, renamed over the original), keeping
    mode, encoding and BOM: an interrupted or concurrent run leaves the old or the new file, never a
    part of one. A file the user may not write is not replaced, even though a rename could."""
    try:
        data = text.encode(file.encoding)
    except UnicodeEncodeError:
        raise FileError(f"cannot write the fixed file: the fix does not fit the file's encoding ({file.encoding})") from None
    target = os.path.realpath(path)
    if not os.access(target, os.W_OK):
        raise FileError("cannot write the fixed file: it is read-only; the file was left unmodified")
    temporary = None
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
        handle, temporary = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".steplint-", suffix=".tmp")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError as error:
        where = "its folder" if temporary is None else "the file"
        raise FileError(f"cannot write the fixed file ({where}: {error.strerror or error}); the file was left unmodified") from None
    finally:
        if temporary is not None and os.path.exists(temporary):
            os.unlink(temporary)


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


def discover(paths: Sequence[str], excluded: Callable[[str], bool], force_exclude: bool = False) -> Tuple[List[str], List[str]]:
    """Python files under the paths, and the paths that do not exist.

    Folders are walked, skipping virtualenvs, what `excluded` says (the configured exclude globs)
    and what .gitignore ignores. A file named explicitly is checked unless `force_exclude`.
    """
    found: List[str] = []
    missing: List[str] = []
    seen = set()
    for path in paths:
        if not os.path.lexists(path):
            missing.append(path)
            continue
        if force_exclude and excluded(path):
            continue
        if not os.path.isdir(path):
            candidates: Iterator[str] = iter([path])
        else:
            candidates = _walk(path, _ancestors_gitignore(path), excluded)
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


def _walk(folder: str, ignore: _GitIgnore, excluded: Callable[[str], bool]) -> Iterator[str]:
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
            yield from _walk(entry.path, ignore, excluded)
        elif entry.name.endswith((".py", ".pyi")) and not ignore.ignored(absolute, False) and not excluded(entry.path):
            yield entry.path
