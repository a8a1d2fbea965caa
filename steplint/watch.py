"""`steplint check --watch`: check, then check again whenever a checked file or a configuration
file changes. Polling modification times costs nothing to install and works on every platform and
file system (network and container mounts included), which file-event libraries do not."""

from __future__ import annotations

import os
import time
from typing import Callable, Dict, Iterable, Tuple

POLL_SECONDS = 0.5
_CONFIG_NAMES = ("pyproject.toml", "steplint.toml", ".steplint.toml")


def snapshot(files: Iterable[str]) -> Dict[str, Tuple[int, int]]:
    """(modification time, size) of each file, and of the configuration files beside and above them."""
    seen: Dict[str, Tuple[int, int]] = {}
    folders = set()
    for path in files:
        _record(seen, path)
        folder = os.path.dirname(os.path.abspath(path))
        while folder not in folders:
            folders.add(folder)
            for name in _CONFIG_NAMES:
                _record(seen, os.path.join(folder, name))
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return seen


def _record(seen: Dict[str, Tuple[int, int]], path: str) -> None:
    try:
        status = os.stat(path)
    except OSError:
        return
    seen[path] = (status.st_mtime_ns, status.st_size)


def watch(check_once: Callable[[], None], files_now: Callable[[], Iterable[str]], say: Callable[[str], None]) -> None:
    """Run `check_once`, then again after each change to the files `files_now` lists (asked anew each
    poll, so new files count) or to their configuration; until interrupted."""
    while True:
        before = snapshot(files_now())  # taken first: a change made while the check runs starts another
        check_once()
        say("Watching for file changes (Ctrl-C stops).")
        while snapshot(files_now()) == before:
            time.sleep(POLL_SECONDS)
        say("File change detected; checking again.")
