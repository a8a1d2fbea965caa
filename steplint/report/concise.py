"""One `path:row:col: CODE [*] message` line per diagnostic; `[*]` marks a fix that `--fix` would
apply (a safe one, or any with `--unsafe-fixes`), as ruff marks it."""

from __future__ import annotations

from typing import Dict, List

from steplint.diagnostic import Diagnostic
from steplint.fixes import SAFE


def fixable_marker(d: Diagnostic, unsafe_fixes: bool = False) -> str:
    return "[*] " if d.fix is not None and (d.fix.applicability == SAFE or unsafe_fixes) else ""


def render(diagnostics: List[Diagnostic], sources: Dict[str, str], unsafe_fixes: bool = False) -> str:
    return "".join(f"{d.path}:{d.location}: {d.code} {fixable_marker(d, unsafe_fixes)}{d.message}\n" for d in diagnostics)
