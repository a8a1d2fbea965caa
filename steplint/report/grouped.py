"""Diagnostics grouped by file, as ruff's `grouped` format: the path, then `row:col CODE [*] message`
lines with the positions aligned, and a blank line after each file."""

from __future__ import annotations

from itertools import groupby
from typing import Dict, List

import click

from steplint.diagnostic import Diagnostic
from steplint.report.concise import fixable_marker


def render(diagnostics: List[Diagnostic], sources: Dict[str, str], unsafe_fixes: bool = False) -> str:
    parts = []
    for path, group in groupby(diagnostics, key=lambda d: d.path):
        group = list(group)
        rows = max(len(str(d.row)) for d in group)
        columns = max(len(str(d.column)) for d in group)
        parts.append(f"{click.style(path, bold=True, underline=True)}:\n")
        for d in group:
            where = f"{'cell ' + str(d.cell) + ':' if d.cell is not None else ''}{d.row:>{rows}}:{d.column:<{columns}}"
            parts.append(f"  {where} {click.style(d.code, fg='red', bold=True)} {fixable_marker(d, unsafe_fixes)}{d.message}\n")
        parts.append("\n")
    return "".join(parts)
