"""reviewdog's Diagnostic Format (rdjson): one object with the source, and each diagnostic with its
range, code and the fix's edits as suggestions, for `reviewdog -f=rdjson`."""

from __future__ import annotations

import json
from typing import Dict, List

from steplint.diagnostic import Diagnostic
from steplint.report.json_format import absolute
from steplint.source import Source, source_reader


def _position(source: Source, offset: int) -> dict:
    """reviewdog's position: 1-based line, and 1-based column counted in UTF-8 bytes."""
    row, column = source.position(offset)
    return {"line": row, "column": len(source.line(row)[:column].encode("utf-8", "surrogatepass")) + 1}


def render(diagnostics: List[Diagnostic], sources: Dict[str, str]) -> str:
    source_of = source_reader(sources)
    items = []
    for d in diagnostics:
        source = source_of(d.path)
        in_file = d.cell is None and bool(source.text)  # (a notebook's offsets are in its joined cells, not the file)
        where = {"start": _position(source, d.start), "end": _position(source, d.end)} if in_file else {
            "start": {"line": d.row, "column": d.column}, "end": {"line": d.end_row, "column": d.end_column}}
        item = {
            "message": d.message,
            "location": {"path": absolute(d.path), "range": where},
            "severity": "ERROR",
            "code": {"value": d.code, **({"url": d.url} if d.url else {})},  # (a rule without a hosted page has none)
        }
        if d.fix is not None and in_file:
            item["suggestions"] = [{"range": {"start": _position(source, e.start), "end": _position(source, e.end)}, "text": e.content}
                                   for e in sorted(set(d.fix.edits))]
        items.append(item)
    report = {"source": {"name": "steplint"}, "severity": "ERROR", "diagnostics": items}
    return json.dumps(report, indent=2) + "\n"
