""".ipynb cells in and out, as ruff reads notebooks.

The code cells are joined into one virtual module that the engine lints like any file. Each cell
starts with a marker comment that names its number, so positions map back to `cell N:row:column`
and the fixed module splits back into its cells. IPython escapes (`%matplotlib`, `%%time`, `!pip`,
`x = !ls`, `?obj`, `obj?`) are masked in place, keeping every offset: at module level the escape
character becomes `#` (a comment), inside a block `0#` (an expression statement, so the block keeps
a body). Cells under a non-Python cell magic (`%%bash`, `%%writefile`) are left out, as ruff does.

Writing back touches only the `source` values of the cells that changed, spliced into the original
JSON text: outputs, metadata, key order and indentation stay byte for byte. Plain `json` does all
of this; nbformat would re-serialise the whole document (sorted keys, its own layout) and refuse
notebooks that Jupyter itself opens, so it is not used here.
"""

from __future__ import annotations

import difflib
import json
import re
from bisect import bisect_right
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

from steplint.diagnostic import Diagnostic
from steplint.source import Source

_MARKER = "# %% steplint-cell {}\n"
_MARKER_LINE = re.compile(r"^# %% steplint-cell (\d+)\n", re.M)
# Cell magics whose body is Python (ruff's list); any other `%%magic` cell is not Python.
PYTHON_CELL_MAGICS = frozenset({"capture", "debug", "prun", "pypy", "python", "python3", "time", "timeit"})
_ASSIGNED_ESCAPE = re.compile(r"^\s*[\w.]+(?:\s*,\s*[\w.]+)*\s*=\s*(?=[!%])")
_HELP_SUFFIX = re.compile(r"^\s*[\w.*]+\?{1,2}\s*$")
_WHITESPACE = re.compile(r"[ \t\n\r]*")


class NotebookError(Exception):
    """A file that is not a readable Jupyter notebook; the message says why."""


@dataclass(frozen=True)
class Cell:
    number: int  # 1-based among all cells, markdown included: what Jupyter and ruff show
    text: str  # the masked Python text, ending with a line break
    original: str  # the cell's source as stored
    span: Tuple[int, int]  # offsets of the `source` value in the notebook's JSON text
    as_lines: bool  # stored as a list of lines (nbformat's way) rather than one string


@dataclass(frozen=True)
class Notebook:
    text: str  # the notebook's JSON
    cells: Tuple[Cell, ...]  # the code cells that are Python
    source: str  # the virtual module: each cell after its marker line


def parse(text: str) -> Notebook:
    try:
        data = json.loads(text)
    except ValueError as error:
        raise NotebookError(f"Invalid notebook JSON: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise NotebookError("Not a Jupyter notebook (nbformat 4): no `cells` list")
    spans = _source_spans(text)
    cells = []
    for index, cell in enumerate(data["cells"]):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        value = cell.get("source", "")
        if isinstance(value, list) and all(isinstance(line, str) for line in value):
            original = "".join(value)
        elif isinstance(value, str):
            original = value
        else:
            raise NotebookError(f"Invalid notebook: cell {index + 1} has a `source` that is neither text nor a list of lines")
        found = _python_cell(index + 1, original, spans.get(index), isinstance(value, list))
        if found is not None:
            cells.append(found)
    return _notebook(text, cells)


def of_cells(cells: Sequence[Tuple[int, str]]) -> Notebook:
    """The notebook an editor holds open, from its Python code cells' (number, source): the same
    virtual module as `parse` makes of the file (there is no JSON to write back into)."""
    return _notebook("", [c for c in (_python_cell(number, original, (0, 0), False) for number, original in cells) if c is not None])


def _python_cell(number: int, original: str, span: Optional[Tuple[int, int]], as_lines: bool) -> Optional[Cell]:
    """The cell with its escapes masked; None for a non-Python cell magic (or no known span)."""
    masked = mask(original)
    if masked is None or span is None:
        return None
    body = masked if not masked or masked.endswith("\n") else masked + "\n"
    return Cell(number, body, original, span, as_lines)


def _notebook(text: str, cells: List[Cell]) -> Notebook:
    return Notebook(text, tuple(cells), "".join(_MARKER.format(c.number) + c.text for c in cells))


def cell_starts(book: Notebook) -> List[int]:
    """The offset of each cell's text in the virtual module, in the order of `book.cells`."""
    starts, at = [], 0
    for cell in book.cells:
        at += len(_MARKER.format(cell.number))
        starts.append(at)
        at += len(cell.text)
    return starts


# -- masking IPython escapes --------------------------------------------------------------------


def mask(cell: str) -> Optional[str]:
    """The cell with its IPython escapes masked (same length), or None for a non-Python cell magic."""
    lines = cell.splitlines(keepends=True)
    first = next((line.strip() for line in lines if line.strip()), "")
    magic = first[2:].split()[:1] if first.startswith("%%") else []
    if magic and magic[0] not in PYTHON_CELL_MAGICS:
        return None
    out = []
    state = _Scan()
    escaped_continues = False
    for line in lines:
        body = line.rstrip("\r\n")
        if escaped_continues:
            out.append(_masked(line, as_comment=True) if body.strip() else line)
            escaped_continues = body.endswith("\\")
            continue
        if state.at_logical_start():
            masked = _masked_escape(line)
            if masked is not None:
                out.append(masked)
                escaped_continues = body.endswith("\\")
                continue
        state.feed(body)
        out.append(line)
    return "".join(out)


def _masked_escape(line: str) -> Optional[str]:
    stripped = line.lstrip(" \t")
    body = stripped.rstrip("\r\n")
    if stripped[:1] in ("%", "!", "?") or _HELP_SUFFIX.match(body):
        return _masked(line, as_comment=len(stripped) == len(line))
    assigned = _ASSIGNED_ESCAPE.match(line)
    if assigned:
        at = assigned.end()
        filler = "0#" if at + 1 < len(line.rstrip("\r\n")) else "0"
        return line[:at] + filler + line[at + len(filler):]
    return None


def _masked(line: str, as_comment: bool) -> str:
    """A comment at module level (and on continuation lines); `0#` where a block needs a statement."""
    at = len(line) - len(line.lstrip(" \t"))
    filler = "#" if as_comment else ("0#" if at + 1 < len(line.rstrip("\r\n")) else "0")
    return line[:at] + filler + line[at + len(filler):]


class _Scan:
    """Just enough of Python's tokenizer to tell where a logical line starts: bracket depth, open
    strings, backslash continuations."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote: Optional[str] = None
        self.continued = False

    def at_logical_start(self) -> bool:
        return self.depth == 0 and self.quote is None and not self.continued

    def feed(self, line: str) -> None:
        self.continued = False
        i = 0
        while i < len(line):
            char = line[i]
            if self.quote is not None:
                if char == "\\":
                    i += 2
                    continue
                if line.startswith(self.quote, i):
                    i += len(self.quote)
                    self.quote = None
                    continue
                i += 1
                continue
            if char == "#":
                break
            if char in "'\"":
                self.quote = line[i : i + 3] if line[i : i + 3] in ("'''", '"""') else char
                i += len(self.quote)
                continue
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(0, self.depth - 1)
            elif char == "\\" and i == len(line) - 1:
                self.continued = True
            i += 1
        if self.quote in ("'", '"') and not line.endswith("\\"):
            self.quote = None  # an unterminated one-line string ends at the line's end


# -- positions ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellIndex:
    """Rows of the virtual module to (cell number, row in the cell)."""

    first_rows: Tuple[int, ...]  # the virtual row of each cell's first line
    numbers: Tuple[int, ...]

    @classmethod
    def of(cls, source: Source) -> "CellIndex":
        rows, numbers = [], []
        for match in _MARKER_LINE.finditer(source.text):
            rows.append(source.position(match.end())[0])
            numbers.append(int(match.group(1)))
        return cls(tuple(rows), tuple(numbers))

    def cell_row(self, row: int) -> Tuple[int, int]:
        at = max(0, bisect_right(self.first_rows, row) - 1)
        if not self.first_rows:
            return 1, row
        return self.numbers[at], row - self.first_rows[at] + 1


def located(text: str, diagnostics: Sequence[Diagnostic]) -> List[Diagnostic]:
    """The diagnostics of a virtual module, with their cell and rows counted within it."""
    index = CellIndex.of(Source("", text))
    out = []
    for d in diagnostics:
        cell, row = index.cell_row(d.row)
        _, end_row = index.cell_row(d.end_row)
        noqa_row = index.cell_row(d.noqa_row)[1] if d.noqa_row is not None else None
        out.append(replace(d, cell=cell, row=row, end_row=end_row, noqa_row=noqa_row))
    return out


def starts_cell(statement) -> bool:
    """Whether a statement (a LibCST node) is the first of a notebook cell: a marker line leads it."""
    return any(
        line.comment is not None and _MARKER_LINE.match(line.comment.value + "\n") for line in getattr(statement, "leading_lines", ())
    )


# -- writing back -------------------------------------------------------------------------------


def split(book: Notebook, source: str) -> Optional[Dict[int, str]]:
    """The new text of each cell whose masked text changed, with its escapes restored; None when
    the fixed module cannot be mapped back (a marker or an escape line was touched)."""
    parts = _MARKER_LINE.split(source)
    numbers = [int(n) for n in parts[1::2]]
    if parts[0] or numbers != [c.number for c in book.cells]:
        return None
    changed = {}
    for cell, new in zip(book.cells, parts[2::2]):
        if new == cell.text:
            continue
        restored = _unmasked(cell, new)
        if restored is None:
            return None
        changed[cell.number] = restored
    return changed


def _unmasked(cell: Cell, new: str) -> Optional[str]:
    old_lines = cell.text.splitlines(keepends=True)
    original_lines = (cell.original if cell.original.endswith("\n") or not cell.original else cell.original + "\n").splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    masked_rows = {i for i, (a, b) in enumerate(zip(old_lines, original_lines)) if a != b}
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    restored_rows = set()
    for tag, i1, i2, j1, _ in matcher.get_opcodes():
        if tag != "equal":
            continue
        for k in range(i2 - i1):
            if i1 + k in masked_rows:
                new_lines[j1 + k] = original_lines[i1 + k]
                restored_rows.add(i1 + k)
    if restored_rows != masked_rows:
        return None
    text = "".join(new_lines).rstrip("\n")
    trailing = len(cell.original) - len(cell.original.rstrip("\n"))
    return text + "\n" * trailing if text else text


def rewrite(book: Notebook, source: str) -> Optional[str]:
    """The notebook's JSON with the fixed module's cells in it, or None when it cannot be mapped back."""
    changed = split(book, source)
    if changed is None:
        return None
    ascii_only = book.text.isascii() and "\\u" in book.text
    out, cursor = [], 0
    for cell in book.cells:
        if cell.number not in changed:
            continue
        start, end = cell.span
        out += [book.text[cursor:start], _source_json(book.text, cell, changed[cell.number], ascii_only)]
        cursor = end
    out.append(book.text[cursor:])
    result = "".join(out)
    expected = json.loads(book.text)
    for cell in book.cells:
        if cell.number in changed:
            new = changed[cell.number]
            expected["cells"][cell.number - 1]["source"] = new.splitlines(keepends=True) if cell.as_lines else new
    return result if json.loads(result) == expected else None


def _source_json(text: str, cell: Cell, new: str, ascii_only: bool) -> str:
    """The `source` value for new text, laid out like the one it replaces."""
    if not cell.as_lines:
        return json.dumps(new, ensure_ascii=ascii_only)
    lines = [json.dumps(line, ensure_ascii=ascii_only) for line in new.splitlines(keepends=True)]
    start, end = cell.span
    old = text[start:end]
    if not lines:
        return "[]"
    if "\n" not in old:
        return "[" + ", ".join(lines) + "]"
    owner_line = text[text.rfind("\n", 0, start) + 1 : start]
    owner_indent = owner_line[: len(owner_line) - len(owner_line.lstrip(" \t"))]
    first = _WHITESPACE.match(old, 1).end()
    item_indent = old[old.rfind("\n", 0, first) + 1 : first] if old[first] != "]" else owner_indent + " "
    closing = old[old.rfind("\n") + 1 : -1] if old.rstrip().endswith("]") and "\n" in old else owner_indent
    newline = "\r\n" if "\r\n" in old else "\n"
    return "[" + newline + ("," + newline).join(item_indent + line for line in lines) + newline + closing + "]"


def cell_diff(path: str, book: Notebook, source: str) -> str:
    """A unified diff per changed cell, named `path:cell N` as ruff names them."""
    changed = split(book, source) or {}
    out = []
    for cell in book.cells:
        if cell.number in changed:
            name = f"{path}:cell {cell.number}"
            out += difflib.unified_diff(cell.original.splitlines(True), changed[cell.number].splitlines(True), f"a/{name}", f"b/{name}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)


# -- where each cell's source is in the JSON text ------------------------------------------------


def _source_spans(text: str) -> Dict[int, Tuple[int, int]]:
    """Offsets of each cell's `source` value (by cell index); the text is known to be valid JSON."""
    decoder = json.JSONDecoder()
    spans: Dict[int, Tuple[int, int]] = {}
    for key, start, end in _members(text, _skip(text, 0), decoder):
        if key != "cells" or text[start] != "[":
            continue
        for index, (cell_start, _) in enumerate(_items(text, start, decoder)):
            if text[cell_start] != "{":
                continue
            for cell_key, value_start, value_end in _members(text, cell_start, decoder):
                if cell_key == "source":
                    spans[index] = (value_start, value_end)
    return spans


def _skip(text: str, at: int) -> int:
    return _WHITESPACE.match(text, at).end()  # type: ignore[union-attr]


def _members(text: str, at: int, decoder: json.JSONDecoder):
    """(key, value start, value end) of the object starting at `at`."""
    at = _skip(text, at + 1)
    while text[at] != "}":
        key, at = json.decoder.scanstring(text, at + 1)  # type: ignore[attr-defined]
        at = _skip(text, _skip(text, at) + 1)  # past the colon
        _, end = decoder.raw_decode(text, at)
        yield key, at, end
        at = _skip(text, end)
        if text[at] == ",":
            at = _skip(text, at + 1)


def _items(text: str, at: int, decoder: json.JSONDecoder):
    """(start, end) of each value of the array starting at `at`."""
    at = _skip(text, at + 1)
    while text[at] != "]":
        _, end = decoder.raw_decode(text, at)
        yield at, end
        at = _skip(text, end)
        if text[at] == ",":
            at = _skip(text, at + 1)
