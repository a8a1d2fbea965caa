"""ruff's JSON shape: a list of diagnostics with 1-based rows and columns."""

from __future__ import annotations

import json
from typing import Dict, List

from steplint.diagnostic import Diagnostic
from steplint.source import Source, source_reader


def as_dict(d: Diagnostic, source: Source) -> dict:
    def location(offset: int) -> dict:
        row, column = source.position(offset)
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
        "filename": d.path,
        "location": {"row": d.row, "column": d.column},
        "end_location": {"row": d.end_row, "column": d.end_column},
        "fix": fix,
        "url": d.url,
        "noqa_row": d.noqa_row,
    }


def render(diagnostics: List[Diagnostic], sources: Dict[str, str]) -> str:
    source_of = source_reader(sources)
    items = [as_dict(d, source_of(d.path)) for d in diagnostics]
    return json.dumps(items, indent=2) + "\n"
