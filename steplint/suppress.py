"""`# noqa` suppression and `# steplint: schedule=...` intent comments."""

from __future__ import annotations

import re
from typing import Optional, Sequence

from steplint.source import Source

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)
_INTENT = re.compile(r"#\s*steplint:\s*schedule\s*=\s*(?P<basis>[a-z-]+)")
BASES = ("committed-updates", "tokens", "batches", "epochs")


def _comment(line: str) -> Optional[str]:
    """The comment part of a line (a `#` not in a string is good enough for a trailing comment)."""
    index = line.find("#")
    return line[index:] if index >= 0 else None


def suppressed(source: Source, code: str, rows: Sequence[int]) -> Optional[int]:
    """The row whose `# noqa` suppresses `code`, among the rows of the reported statement."""
    for row in rows:
        comment = _comment(source.line(row))
        match = _NOQA.search(comment) if comment else None
        if match is None:
            continue
        codes = match.group("codes")
        if codes is None or code.upper() in {c.upper() for c in re.split(r"[\s,]+", codes)}:
            return row
    return None


def intent_basis(source: Source, rows: Sequence[int]) -> Optional[str]:
    """The schedule basis declared on a scheduler call: `# steplint: schedule=tokens`."""
    for row in rows:
        comment = _comment(source.line(row))
        match = _INTENT.search(comment) if comment else None
        if match and match.group("basis") in BASES:
            return match.group("basis")
    return None
