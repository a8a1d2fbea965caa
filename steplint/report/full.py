"""The terminal format: location, code and message, the source line with a caret, the fix title."""

from __future__ import annotations

from typing import Dict, List

import click

from steplint.diagnostic import Diagnostic
from steplint.source import source_reader


def render(diagnostics: List[Diagnostic], sources: Dict[str, str], show_evidence: bool = False) -> str:
    parts = []
    source_of = source_reader(sources)
    for d in diagnostics:
        head = f"{click.style(d.path, bold=True)}:{d.location}: {click.style(d.code, fg='red', bold=True)} {d.message}"
        parts.append(head)
        text = sources.get(d.path)
        if text is not None:
            source = source_of(d.path)
            line = source.line(source.position(d.start)[0])  # (d.row counts within a notebook's cell)
            gutter = str(d.row)
            pad = " " * len(gutter)
            width = (d.end_column - d.column) if d.end_row == d.row else len(line) - d.column + 1
            caret = " " * (d.column - 1) + "^" * max(1, width)
            parts.append(f"{pad} |")
            parts.append(f"{gutter} | {line.expandtabs(1)}")
            parts.append(f"{pad} | {click.style(caret, fg='red')}")
        if show_evidence:
            parts.extend(f"  = {click.style('evidence', fg='cyan')}: {claim} ({d.path}:{row}:{column})" for claim, row, column in d.evidence)
        if d.fix is not None:
            marker = "fix" if d.fix.applicability == "safe" else "unsafe fix"
            parts.append(f"  = {click.style(marker, fg='cyan')}: {d.fix.title}")
        parts.append("")
    return "\n".join(parts) + ("\n" if parts else "")
