"""GitHub Actions workflow commands: annotations on the pull request's diff."""

from __future__ import annotations

from typing import Dict, List

from steplint.diagnostic import Diagnostic


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(diagnostics: List[Diagnostic], sources: Dict[str, str]) -> str:
    lines = []
    for d in diagnostics:
        where = f"file={_property(d.path)},line={d.row},col={d.column},endLine={d.end_row},endColumn={d.end_column}"
        lines.append(f"::error title={d.code},{where}::{_data(f'{d.path}:{d.location}: {d.code} {d.message}')}\n")
    return "".join(lines)
