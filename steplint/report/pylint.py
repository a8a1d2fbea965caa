"""pylint's parseable format, `path:row: [CODE] message`, for tools that read pylint's output."""

from __future__ import annotations

from typing import Dict, List

from steplint.diagnostic import Diagnostic


def render(diagnostics: List[Diagnostic], sources: Dict[str, str]) -> str:
    return "".join(f"{d.path}:{d.row}: [{d.code}] {d.message}\n" for d in diagnostics)
