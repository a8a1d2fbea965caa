"""Notebooks open in the editor (`notebookDocument/*` sync): the Python code cells are linted as
one module, as `steplint check nb.ipynb` lints the file (steplint/notebook.py joins them, IPython
escapes masked), and each diagnostic goes to its cell's document.

A fix is offered on a cell when every edit lands inside one cell's text and leaves its masked
escape lines (`%time ...`, `!pip ...`) as they are; its edits in other cells (the helper an SL101
fix adds after the imports) travel in the diagnostic's `data` with those cells' URIs and versions.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Dict, List, Optional, Sequence, Tuple

from lsprotocol import types

from steplint import notebook
from steplint.diagnostic import Diagnostic
from steplint.fixes import Edit
from steplint.server.convert import Units, lsp_diagnostic, text_edit, whole_text_edit
from steplint.source import Source
from steplint.suppress import comments


@dataclass(frozen=True)
class OpenCell:
    uri: str
    version: Optional[int]
    source: Source  # the cell document's text
    start: int  # where its text starts in the virtual module
    virtual_size: int  # the length of its text there (a line break added when the cell has none)
    masked_rows: frozenset  # rows (1-based) holding a masked IPython escape


@dataclass(frozen=True)
class OpenNotebook:
    book: notebook.Notebook
    virtual: Source  # the virtual module the engine lints
    cells: Tuple[OpenCell, ...]  # in the order of book.cells

    @cached_property
    def _starts(self) -> List[int]:
        return [c.start for c in self.cells]

    def cell_at(self, offset: int) -> OpenCell:
        return self.cells[max(0, bisect_right(self._starts, offset) - 1)]


def open_notebook(document: types.NotebookDocument, text_of) -> OpenNotebook:
    """The notebook's Python code cells (`text_of(uri)`: the cell document, None when unknown)."""
    numbered = {}
    for number, cell in enumerate(document.cells, start=1):
        opened = text_of(cell.document)
        if cell.kind == types.NotebookCellKind.Code and opened is not None and opened.language_id in (None, "python"):
            numbered[number] = opened
    book = notebook.of_cells([(number, opened.source) for number, opened in numbered.items()])
    cells = []
    for cell, start in zip(book.cells, notebook.cell_starts(book)):
        opened = numbered[cell.number]
        source = Source(opened.uri, cell.original)
        masked = Source("", cell.text)
        rows = frozenset(row for row in range(1, len(source.line_starts) + 1) if source.line(row) != masked.line(row))
        cells.append(OpenCell(opened.uri, opened.version, source, start, len(cell.text), rows))
    return OpenNotebook(book, Source("", book.source), tuple(cells))


def _local(cell: OpenCell, edit: Edit) -> Optional[Edit]:
    """The virtual module's edit in the cell's own text; None when it leaves the cell or alters a
    masked escape line (the cell holds the escape, not its mask)."""
    start, end = edit.start - cell.start, edit.end - cell.start
    size = len(cell.source.text)
    if start == end == cell.virtual_size > size:
        # Added after the line break the cell lacks (a helper after the imports): the cell's own
        # text ends without one, as the command line writes the cell back.
        return Edit(size, size, "\n" + edit.content.rstrip("\n"))
    if start < 0 or end > size:
        return None
    first = cell.source.position(start)[0]
    last = cell.source.position(max(start, end - 1))[0]
    inserted_above = start == end and cell.source.position(start)[1] == 0 and edit.content.endswith("\n")
    if not inserted_above and any(row in cell.masked_rows for row in range(first, last + 1)):
        return None
    return Edit(start, end, edit.content)


def _fix_edits(opened: OpenNotebook, diagnostic: Diagnostic) -> Optional[Dict[str, List[Edit]]]:
    """The fix's edits by cell URI; None when one of them cannot be made on a cell."""
    found: Dict[str, List[Edit]] = {}
    for edit in diagnostic.fix.edits if diagnostic.fix else ():
        cell = opened.cell_at(edit.start)
        local = _local(cell, edit)
        if local is None:
            return None
        found.setdefault(cell.uri, []).append(local)
    return found


def cell_diagnostics(opened: OpenNotebook, found: Sequence[Diagnostic], severity: str, units: Units) -> Dict[str, List[types.Diagnostic]]:
    """Cell URI -> its diagnostics in LSP terms (every Python code cell present, clean ones empty)."""
    by_cell: Dict[str, List[types.Diagnostic]] = {cell.uri: [] for cell in opened.cells}
    noqa_comments = {}
    for diagnostic in found:
        cell = opened.cell_at(diagnostic.start)
        size = len(cell.source.text)
        start = min(max(diagnostic.start - cell.start, 0), size)
        end = min(max(diagnostic.end - cell.start, start), size)
        edits = _fix_edits(opened, diagnostic) if diagnostic.fix is not None else None
        fix = replace(diagnostic.fix, edits=tuple(edits.get(cell.uri, ()))) if edits is not None else None
        local = replace(diagnostic, start=start, end=end, fix=fix, noqa_row=_cell_row(opened, cell, diagnostic.noqa_row))
        if cell.uri not in noqa_comments:
            noqa_comments[cell.uri] = comments(cell.source)
        converted = lsp_diagnostic(cell.source, local, noqa_comments[cell.uri], cell.version, severity, units)
        if edits and converted.data["fix"] is not None:
            converted.data["fix"]["cells"] = [
                {"uri": other.uri, "version": other.version, "edits": [text_edit(other.source, e, units) for e in edits[other.uri]]}
                for other in opened.cells
                if other.uri != cell.uri and other.uri in edits
            ]
        by_cell[cell.uri].append(converted)
    return by_cell


def _cell_row(opened: OpenNotebook, cell: OpenCell, row: Optional[int]) -> Optional[int]:
    """A row of the virtual module as a row of `cell`; None when it is not the cell's, or holds a
    masked escape (a noqa comment there would become part of the magic)."""
    if row is None:
        return None
    offset = opened.virtual.offset(row, 0)
    if offset < cell.start or opened.cell_at(offset) is not cell:
        return None
    local = cell.source.position(min(offset - cell.start, len(cell.source.text)))[0]
    return None if local in cell.masked_rows else local


def fix_all_changes(opened: OpenNotebook, fixed: str, units: Units) -> Optional[List[Tuple[str, Optional[int], List[Dict[str, object]]]]]:
    """(cell URI, version, edits) turning each changed cell into its fixed text; None when the
    fixed module cannot be split back into the cells (a fix touched a marker or an escape)."""
    changed = notebook.split(opened.book, fixed)
    if changed is None:
        return None
    return [
        (cell.uri, cell.version, [whole_text_edit(cell.source.text, changed[book_cell.number], units)])
        for cell, book_cell in zip(opened.cells, opened.book.cells)
        if book_cell.number in changed
    ]
