"""Ctrl-C for the command line: one exception, raised wherever SIGINT lands, that no handler of
errors mistakes for an error of the file being checked.

click turns a KeyboardInterrupt into `Aborted!` and exit status 1, and an `except Exception` around
one file's analysis can meet the interrupt in another form (an exception raised while the
KeyboardInterrupt unwound a library's frames) and report an internal error for the file. The
handler raises `Interrupted` (a BaseException that click lets through) once, and remembers that it
did: code that catches errors asks `received()` before blaming the file.
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import contextmanager
from typing import Iterator

EXIT_STATUS = 130  # 128 + SIGINT, as shells report a run ended by Ctrl-C


class Interrupted(BaseException):
    """The user pressed Ctrl-C (SIGINT)."""


_received = False
_holding = False


def install() -> None:
    """Handle SIGINT from now on in this process (the command's, never a library user's)."""
    signal.signal(signal.SIGINT, _handle)


def install_in_worker() -> None:
    """A worker of the command's pool, which its parent ends with SIGTERM after Ctrl-C: it ends at once,
    quietly, unless it is writing a file (a deferred block), which it finishes first."""
    signal.signal(signal.SIGTERM, _end_worker)


def _end_worker(signum, frame) -> None:
    global _received
    if _holding:
        _received = True  # (the deferred block raises Interrupted once the file is written)
        return
    os._exit(EXIT_STATUS)


def received() -> bool:
    return _received


def hold() -> None:
    """From now on a Ctrl-C is only recorded, not raised: the command's work is done, and what is
    left (printing, flushing, exiting) must finish; `received()` then makes the status 130."""
    global _holding
    _holding = True


@contextmanager
def deferred() -> Iterator[None]:
    """A block that Ctrl-C must not cut in two (a file written in place: its new bytes, then the
    truncation of the old ones): a SIGINT that lands in it is recorded, and raised once it ends."""
    global _holding
    if _holding:  # (within hold(), or an outer deferred block: that one decides)
        yield
        return
    before = _received
    _holding = True
    try:
        yield
    finally:
        _holding = False
    if _received and not before:
        raise Interrupted()


def _handle(signum, frame) -> None:
    global _received
    if _received or _holding:
        _received = True
        return  # a second Ctrl-C while the first one's cleanup runs (it is bounded), or the run's end
    _received = True
    raise Interrupted()


def exit_interrupted() -> None:
    """End the process after Ctrl-C, once the command's cleanup ran (os._exit, as the command ends)."""
    try:
        print("\nsteplint: interrupted; each file is either fixed or unchanged (writes are atomic)", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
    os._exit(EXIT_STATUS)
