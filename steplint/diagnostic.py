"""A reported problem, positioned in its file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from steplint.fixes import Fix


@dataclass(frozen=True)
class Diagnostic:
    code: str
    name: str
    message: str
    path: str
    start: int  # offsets into the text that was linted
    end: int
    row: int  # 1-based
    column: int  # 1-based
    end_row: int
    end_column: int
    fix: Optional[Fix] = None
    url: Optional[str] = None  # (no hosted docs: null in the JSON output, as steplint rule CODE prints the docs)
    noqa_row: Optional[int] = None  # the row where `# noqa` suppresses it
    cell: Optional[int] = None  # in a notebook: the cell (1-based, as Jupyter counts), rows count within it
    evidence: Tuple[Tuple[str, int, int], ...] = ()  # the premises it rests on: (claim, row, column) where each was established

    @property
    def location(self) -> str:
        """`row:column`, or `cell N:row:column` in a notebook, as ruff prints them."""
        return f"cell {self.cell}:{self.row}:{self.column}" if self.cell is not None else f"{self.row}:{self.column}"
