"""ruff's JSON shape: a list of diagnostics with 1-based rows and columns."""

from __future__ import annotations

import json
import os
from typing import Dict, Iterator, List, Optional

from steplint.diagnostic import Diagnostic
from steplint.notebook import CellIndex
from steplint.source import Source


def absolute(path: str) -> str:
    """The path as ruff writes it in machine formats: absolute, except stdin's `-`."""
    return path if path == "-" else os.path.abspath(path)


def as_dict(d: Diagnostic, source: Source, cells: Optional[CellIndex] = None) -> dict:

    def location(offset: int) -> dict:
        row, column = source.position(offset)
        if cells is not None:  # a notebook's edits, like its diagnostics, count rows within the cell
            row = cells.cell_row(row)[1]
        return {"row": row, "column": column + 1}

    fix = None
    if d.fix is not None:
        fix = {
            "applicability": d.fix.applicability,
            "message": d.fix.title,
            "edits": [{"content": e.content, "location": location(e.start), "end_location": location(e.end)} for e in sorted(set(d.fix.edits))],
        }
    return {
        "code": d.code,
        "message": d.message,
        "filename": absolute(d.path),
        "location": {"row": d.row, "column": d.column},
        "end_location": {"row": d.end_row, "column": d.end_column},
        "fix": fix,
        "cell": d.cell,
        "url": d.url,
        "noqa_row": d.noqa_row,
    }


def dicts(diagnostics: List[Diagnostic], sources: Dict[str, str]) -> Iterator[dict]:
    """as_dict of each diagnostic, reading each file's positions (and a notebook's cells) once."""
    seen: Dict[str, tuple] = {}
    for d in diagnostics:
        if d.path not in seen:
            source = Source(d.path, sources.get(d.path, ""))
            seen[d.path] = (source, CellIndex.of(source) if d.cell is not None else None)
        yield as_dict(d, *seen[d.path])


def render(diagnostics: List[Diagnostic], sources: Dict[str, str], show_evidence: bool = False) -> str:
    found = list(dicts(diagnostics, sources))
    if show_evidence:  # (only when asked: the default shape is ruff's)
        for d, entry in zip(diagnostics, found):
            entry["evidence"] = [{"claim": claim, "location": {"row": row, "column": column}} for claim, row, column in d.evidence]
    return json.dumps(found, indent=2) + "\n"
