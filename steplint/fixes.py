"""Text edits, applying them, and the checks that keep a fix from corrupting a file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple


from steplint.source import newer_grammar, parser_text, python_parse_error

SAFE = "safe"
UNSAFE = "unsafe"


@dataclass(frozen=True, order=True)
class Edit:
    """Replace text[start:end] with content. Offsets index the text the diagnostics were made on."""

    start: int
    end: int
    content: str


@dataclass(frozen=True)
class Fix:
    title: str
    applicability: str  # SAFE or UNSAFE
    edits: Tuple[Edit, ...]
    group: Optional[str] = None  # fixes of one group go in one at a time, so each sees the last
    gate: Optional[str] = None  # of a gating fix: the commit gate it puts statements under (`committed`)

    def applies(self, unsafe_fixes: bool) -> bool:
        return self.applicability == SAFE or unsafe_fixes


def normalized(edits: Iterable[Edit]) -> Optional[List[Edit]]:
    """Sorted, de-duplicated edits; None when two different edits overlap."""
    result: List[Edit] = []
    for edit in sorted(set(edits)):
        if result and _overlap(result[-1], edit):
            return None
        result.append(edit)
    return result


def _overlap(a: Edit, b: Edit) -> bool:
    if a.start == a.end == b.start == b.end:
        return True  # two insertions at one point: their order would be a guess
    return a.start < b.end and b.start < a.end


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """Apply sorted, non-overlapping edits; every byte outside them is kept."""
    out, cursor = [], 0
    for edit in edits:
        out.append(text[cursor : edit.start])
        out.append(edit.content)
        cursor = edit.end
    out.append(text[cursor:])
    return "".join(out)


def select_non_overlapping(fixes: Sequence[Fix]) -> List[Fix]:
    """Greedy choice of fixes, in order, whose edits neither overlap each other nor themselves.

    Identical edits shared by two fixes (the same helper inserted twice) count once.
    """
    chosen: List[Fix] = []
    taken: List[Edit] = []
    groups = set()
    for fix in fixes:
        merged = normalized(list(taken) + list(fix.edits))
        if merged is None or (fix.group is not None and fix.group in groups):
            continue
        chosen.append(fix)
        taken = merged
        groups.add(fix.group)
    return chosen


def reparses(text: str) -> bool:
    """Whether both LibCST and Python itself parse the text (Python 3.12's grammar, where an older Python
    runs steplint: see newer_grammar)."""
    import libcst as cst  # (not at import time: reports and cached checks need no parser)

    try:
        cst.parse_module(parser_text(text))
    except (cst.ParserSyntaxError, cst.CSTValidationError, RecursionError, MemoryError, ValueError):
        return False
    error = python_parse_error(text)
    return error is None or newer_grammar(text, error)
