"""Where the model's facts sit in the file: the spans, rows and text of nodes.

Diagnostics point at rows, fixes rewrite spans, messages quote the code as written. Positions are
computed on demand (steplint.model.positions): a module summarised for the project index asks for none.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from steplint.model.positions import Positions
from steplint.model.structure import Structure
from steplint.source import Source


@dataclass(eq=False)
class Text:
    source: Source
    positions: Positions
    structure: Structure

    def span(self, node: cst.CSTNode) -> tuple:
        """(start offset, end offset) of a node."""
        where = self.positions[node]
        return self.source.parsed_offset(where.start.line, where.start.column), self.source.parsed_offset(where.end.line, where.end.column)

    def rows(self, node: cst.CSTNode) -> tuple:
        """First and last rows (1-based lines) of a node."""
        where = self.positions[node]
        return where.start.line, where.end.line

    def statement_rows(self, node: cst.CSTNode) -> tuple:
        """First and last rows of the statement (or condition) that holds a node."""
        holder = self.structure.holder.get(id(node))
        if holder is not None:
            return self.rows(holder)
        start, end = self.span(node)
        best = None
        for small, _ in self.structure.statements:
            s, e = self.span(small)
            if s <= start and end <= e and (best is None or e - s < best[1] - best[0]):
                best = (s, e, small)
        return self.rows(best[2]) if best else self.rows(node)

    def of(self, node: cst.CSTNode) -> str:
        """The source text of a node, as written; for a node that is in no source (the project index
        composes `self._scaler` for a callee's `self._scaler` reached through `self.helper()`), its code."""
        if self.positions.get(node) is None:
            return cst.Module(body=[]).code_for_node(node)
        start, end = self.span(node)
        return self.source.text[start:end]
