"""One `path:row:col: CODE [*] message` line per diagnostic; `[*]` marks a safe fix, as ruff marks
what `--fix` would apply."""

from __future__ import annotations

from typing import Dict, List

from steplint.diagnostic import Diagnostic
from steplint.fixes import SAFE


def fixable_marker(d: Diagnostic) -> str:
    return "[*] " if d.fix is not None and d.fix.applicability == SAFE else ""


def render(diagnostics: List[Diagnostic], sources: Dict[str, str]) -> str:
    return "".join(f"{d.path}:{d.location}: {d.code} {fixable_marker(d)}{d.message}\n" for d in diagnostics)
