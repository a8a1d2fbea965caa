"""`# noqa` suppression, `# steplint: noqa` for a whole file, unused-noqa detection, --add-noqa
edits, and `# steplint: schedule=...` intent comments."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from steplint.fixes import Edit
from steplint.source import Source

_NOQA = re.compile(r"#\s*noqa(?P<colon>:\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?", re.I)
_FILE_NOQA = re.compile(r"^#\s*steplint\s*:\s*noqa\s*$", re.I)
_INTENT = re.compile(r"#\s*steplint:\s*schedule\s*=\s*(?P<basis>[a-z-]+)")
BASES = ("committed-updates", "tokens", "batches", "epochs")
DECLARED_UNITS = ("batches", "tokens", "samples", "updates", "epochs")  # what a counter may be declared to count
_OWN_CODE = re.compile(r"SL\d{3}")  # steplint's code shape; ruff's SLOT000 is not one
_ANY_NOQA = re.compile(r"noqa", re.I)  # every directive above holds it


@dataclass(frozen=True)
class Noqa:
    row: int
    start: int  # offsets of the `# noqa...` directive within the file
    end: int
    codes: Optional[Tuple[str, ...]]  # None: a bare `# noqa`
    comment_start: int  # offset of the comment's `#`
    comment_alone: bool  # the directive is the whole comment


@dataclass(frozen=True)
class Comments:
    noqa: Dict[int, Noqa]
    file_exempt: bool
    source: Optional[Source] = None  # tokenized for string_rows only when they are asked for

    @cached_property
    def string_rows(self) -> frozenset:
        """Rows whose line break lies inside a string."""
        tokens = _tokens(self.source.text) if self.source is not None else None
        return frozenset(
            row for t in tokens or () if t.type == tokenize.STRING and t.end[0] > t.start[0] for row in range(t.start[0], t.end[0])
        )


NO_COMMENTS = Comments({}, False)


def comments(source: Source) -> Comments:
    """The file's noqa directives. Tokenizing costs a fifth of the parse: a file without the word
    `noqa` has none, and is tokenized only if string_rows are asked for."""
    if not _ANY_NOQA.search(source.text):
        return Comments({}, False, source)
    tokens = _tokens(source.text)
    if tokens is None:
        return NO_COMMENTS
    noqa: Dict[int, Noqa] = {}
    exempt = False
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        row, column = token.start
        if _FILE_NOQA.match(token.string) and not source.line(row)[:column].strip():
            exempt = True
        match = _NOQA.search(token.string)
        if match:
            base = source.offset(row, column)
            codes = tuple(c.upper() for c in re.split(r"[\s,]+", match.group("codes"))) if match.group("codes") else None
            alone = match.start() == 0 and match.end() == len(token.string.rstrip())
            noqa[row] = Noqa(row, base + match.start(), base + match.end(), codes, base, alone)
    return Comments(noqa, exempt, source)


@lru_cache(maxsize=1)  # the directives and the string rows of one text share one tokenization
def _tokens(text: str) -> Optional[List[tokenize.TokenInfo]]:
    try:
        return list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None


def suppressing(found: Comments, code: str, rows: Sequence[int]) -> Optional[int]:
    """The row whose `# noqa` suppresses `code`, among the reported statement's first and last rows."""
    for row in rows:
        directive = found.noqa.get(row)
        if directive is not None and (directive.codes is None or code in directive.codes):
            return row
    return None


def unused_codes(found: Comments, used: Iterable[Tuple[int, str]], enabled: Iterable[str], known: Iterable[str]) -> List[Tuple[Noqa, Tuple[str, ...]]]:
    """steplint codes in `# noqa: ...` lists that suppressed nothing (other tools' codes are theirs)."""
    used, enabled, known = set(used), set(enabled), set(known)
    result = []
    for row, directive in sorted(found.noqa.items()):
        if directive.codes is None:
            continue
        unused = tuple(
            c for c in directive.codes if _OWN_CODE.fullmatch(c) and (c not in known or (c in enabled and (row, c) not in used))
        )
        if unused:
            result.append((directive, unused))
    return result


def removal_edit(source: Source, directive: Noqa, unused: Tuple[str, ...]) -> Edit:
    """Drop unused codes from a noqa list, or the whole directive when none stays."""
    kept = [c for c in directive.codes or () if c not in unused]
    if kept:
        return Edit(directive.start, directive.end, "# noqa: " + ", ".join(kept))
    if directive.comment_alone:
        start = directive.comment_start
        line_start = source.line_starts[directive.row - 1]
        while start > line_start and source.text[start - 1] in " \t":
            start -= 1
        return Edit(start, directive.end, "")
    return Edit(directive.start, directive.end, "")


def add_noqa_edits(source: Source, found: Comments, codes_by_row: Dict[int, List[str]], reason: str = "") -> List[Edit]:
    """`# noqa: CODE` at the end of each row, or the code appended to the row's noqa list, as ruff
    does; `reason` follows the codes (`# noqa: SL101 reviewed`), unless the directive has text after
    its codes already."""
    edits = []
    suffix = f" {reason.strip()}" if reason.strip() else ""
    for row, codes in sorted(codes_by_row.items()):
        directive = found.noqa.get(row)
        if directive is not None and directive.codes is None:
            continue
        missing = sorted(set(codes) - set(directive.codes if directive else ()))
        if not missing:
            continue
        if directive is not None:
            followed = bool(source.text[directive.end : source.line_end(row)].strip())
            edits.append(Edit(directive.start, directive.end, "# noqa: " + ", ".join(list(directive.codes or ()) + missing) + ("" if followed else suffix)))
        else:
            end = source.line_end(row)
            edits.append(Edit(end, end, "  # noqa: " + ", ".join(missing) + suffix))
    return edits


def intent_basis(source: Source, rows: Sequence[int]) -> Optional[str]:
    """The schedule basis declared on a scheduler call: `# steplint: schedule=tokens`."""
    for row in rows:
        line = source.line(row)
        index = line.find("#")
        match = _INTENT.search(line[index:]) if index >= 0 else None
        if match and match.group("basis") in BASES:
            return match.group("basis")
    return None
