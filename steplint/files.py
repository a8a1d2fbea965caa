"""Finding the files to check, and reading and writing them without losing a byte."""

from __future__ import annotations

import codecs
import errno
import os
import stat
import tokenize
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Callable, Iterator, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

from steplint import interrupt

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
    return decode_source(raw)


def decode_source(raw: bytes) -> TextFile:
    """Python source bytes as Python reads them: UTF-8 (a BOM kept as the encoding "utf-8-sig") or
    the declared encoding, line breaks as they are; FileError says why not."""
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise FileError("cannot decode file: it is UTF-16 or UTF-32 (byte order mark); Python source is UTF-8 or declares an 8-bit encoding")
    try:
        # (lines as Python's tokenizer breaks them: on CR too, not only on LF as BytesIO.readline)
        first_lines = iter(raw.splitlines(keepends=True)[:2])
        encoding, _ = tokenize.detect_encoding(lambda: next(first_lines, b""))
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
    """Write the fixed text, keeping the file's identity: mode, owner and group, hard links,
    encoding and BOM. A file the user may not write is not replaced, even though a rename could.

    Atomically where that keeps the identity: a temporary file in the same folder, given the
    original's mode, owner and group, renamed over it (an interrupted or concurrent run leaves the
    old or the new file, never a part of one). A rename gives the path a new inode, though: a file
    with other hard links would lose them (they keep the old text), and one whose owner cannot be
    given to the temporary file (a user fixing another user's file in a shared folder) would change
    owner. Those are written in place, as ruff writes every file: the text is complete in memory and
    verified (it parses) before the first byte is written, so only a crash mid-write can cut it."""
    try:
        data = text.encode(file.encoding)
    except UnicodeEncodeError:
        raise FileError(f"cannot write the fixed file: the fix does not fit the file's encoding ({file.encoding})") from None
    target = os.path.realpath(path)
    if not os.access(target, os.W_OK):
        raise FileError("cannot write the fixed file: it is read-only; the file was left unmodified")
    temporary = None
    where = "the file"
    # (one file's write and its cleanup are not cut in two: a Ctrl-C waits for them, then ends the run)
    with interrupt.deferred():
        try:
            original = os.stat(target)
            if original.st_nlink == 1:
                where = "its folder"
                import tempfile  # (start-up: imported where a fix writes a file)

                handle, temporary = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".steplint-", suffix=".tmp")
                where = "the file"
                with os.fdopen(handle, "wb") as out:
                    out.write(data)
                    out.flush()
                    os.fsync(out.fileno())
                if _same_owner(temporary, original):
                    os.chmod(temporary, stat.S_IMODE(original.st_mode))
                    os.replace(temporary, target)
                    return
            _write_in_place(target, data)
        except OSError as error:
            raise FileError(f"cannot write the fixed file ({where}: {error.strerror or error}); the file was left unmodified") from None
        finally:
            if temporary is not None and os.path.exists(temporary):
                os.unlink(temporary)


def _same_owner(temporary: str, original: os.stat_result) -> bool:
    """Give the temporary file the original's owner and group; whether it has them now."""
    made = os.stat(temporary)
    if (made.st_uid, made.st_gid) != (original.st_uid, original.st_gid):
        try:
            os.chown(temporary, original.st_uid, original.st_gid)
        except OSError:
            return False
    return True


def _write_in_place(target: str, data: bytes) -> None:
    with open(target, "r+b") as out, interrupt.deferred():
        out.write(data)
        out.truncate()
        out.flush()
        os.fsync(out.fileno())


@dataclass(frozen=True)
class _GitIgnore:
    """What git ignores, as pathspec's GitIgnoreSpec reads it: the global excludes file and
    .git/info/exclude (relative to the repository's root), then each .gitignore met on the way down
    (relative to its folder). The last pattern that matches decides, so deeper files win."""

    specs: Tuple[Tuple[str, "GitIgnoreSpec"], ...] = ()  # (the folder patterns are relative to, spec)

    def extended(self, folder: str, file: Optional[str] = None) -> "_GitIgnore":
        from pathspec import GitIgnoreSpec  # (at the first ignore file: a check of one file starts faster)

        try:
            with open(file or os.path.join(folder, ".gitignore"), encoding="utf-8", errors="replace") as handle:
                spec = GitIgnoreSpec.from_lines(handle.read().splitlines())
        except OSError:
            return self
        return _GitIgnore(self.specs + ((folder, spec),)) if spec.patterns else self

    def ignored(self, path: str, is_dir: bool) -> bool:
        result = False
        for folder, spec in self.specs:
            relative = os.path.relpath(path, folder).replace(os.sep, "/")
            if relative.startswith("../"):
                continue
            decided = spec.check_file(relative + ("/" if is_dir else "")).include
            if decided is not None:
                result = decided
        return result


def _is_virtualenv(folder: str) -> bool:
    return os.path.exists(os.path.join(folder, "pyvenv.cfg"))


def is_notebook(path: str) -> bool:
    """A Jupyter notebook, checked as the module its code cells make (steplint.notebook)."""
    return path.endswith(".ipynb")


def _python_file(path: str) -> bool:
    return path.endswith((".py", ".pyi"))


def discover(
    paths: Sequence[str], excluded: Callable[[str], bool], force_exclude: bool = False, included: Callable[[str], bool] = _python_file,
    respect_gitignore: bool = True,
) -> Tuple[List[str], List[str]]:
    """Files to check under the paths, and what could not be looked at ("path: why"): a path that
    does not exist (editors and pre-commit hand over deleted or renamed files), a folder that cannot
    be listed. The caller warns of those and checks the rest, as ruff does.

    Folders are walked for the files that `included` accepts (the `include` globs), skipping
    virtualenvs, what `excluded` says (the configured exclude globs) and what .gitignore ignores.
    A file named explicitly is checked unless `force_exclude` (then both settings apply to it).
    """
    found: List[str] = []
    unreachable: List[str] = []
    seen = set()
    for path in paths:
        if not os.path.lexists(path):
            unreachable.append(f"{path}: no such file or directory")
            continue
        if force_exclude and (excluded(path) or (not os.path.isdir(path) and not included(path))):
            continue
        if not os.path.isdir(path):
            candidates: Iterator[str] = iter([path])
        else:
            candidates = _walk(path, _ancestors_gitignore(path) if respect_gitignore else None, excluded, included, unreachable)
        for candidate in candidates:
            key = os.path.normpath(candidate)
            if key not in seen:
                seen.add(key)
                found.append(key)
    return found, unreachable


def _ancestors_gitignore(path: str) -> _GitIgnore:
    """The ignore files that apply above `path`: those of its repository, from the root down."""
    folders = []
    current = os.path.abspath(path)
    while True:
        folders.append(current)
        parent = os.path.dirname(current)
        if os.path.exists(os.path.join(current, ".git")) or parent == current:
            break
        current = parent
    root = folders[-1]
    ignore = _GitIgnore()
    if os.path.exists(os.path.join(root, ".git")):
        for excludes in (_global_excludes_file(), _info_exclude(root)):
            if excludes:
                ignore = ignore.extended(root, excludes)
    for folder in reversed(folders[1:]):
        ignore = ignore.extended(folder)
    return ignore


def _info_exclude(root: str) -> Optional[str]:
    """.git/info/exclude; in a linked worktree (.git is a file) that of the main repository."""
    git = os.path.join(root, ".git")
    if os.path.isfile(git):
        try:
            with open(git, encoding="utf-8") as handle:
                gitdir = os.path.join(root, handle.read().strip().partition("gitdir:")[2].strip())
            with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as handle:
                git = os.path.join(gitdir, handle.read().strip())
        except OSError:
            return None
    return os.path.join(git, "info", "exclude")


@lru_cache(maxsize=None)
def _global_excludes_file() -> Optional[str]:
    """git's core.excludesFile, by default $XDG_CONFIG_HOME/git/ignore (~/.config/git/ignore)."""
    import subprocess

    try:
        done = subprocess.run(["git", "config", "--path", "--get", "core.excludesFile"], capture_output=True, text=True, timeout=10)
        if done.stdout.strip():
            return done.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(config_home, "git", "ignore")


def _walk(folder: str, ignore: Optional[_GitIgnore], excluded: Callable[[str], bool], included: Callable[[str], bool], unreachable: List[str]) -> Iterator[str]:
    """`ignore` None: git's ignore files are not read (`respect-gitignore = false`)."""
    respect = ignore is not None
    ignore = ignore.extended(os.path.abspath(folder)) if ignore is not None else _GitIgnore()
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as error:
        unreachable.append(f"{folder}: cannot read folder: {error.strerror or error}; its files were not checked")
        return
    for entry in entries:
        absolute = os.path.abspath(entry.path)
        try:
            is_dir = entry.is_dir()
        except OSError:  # a symbolic link loop: reading it reports the loop
            is_dir = False
        if is_dir:
            if entry.is_symlink() or _is_virtualenv(entry.path) or ignore.ignored(absolute, True) or excluded(entry.path):
                continue
            yield from _walk(entry.path, ignore if respect else None, excluded, included, unreachable)
        elif included(entry.path) and not ignore.ignored(absolute, False) and not excluded(entry.path):
            yield entry.path
