from __future__ import annotations

from typing import Dict, List

from steplint.diagnostic import Diagnostic


def render(diagnostics: List[Diagnostic], sources: Dict[str, str]) -> str:
    return "".join(f"{d.path}:{d.location}: {d.code} {d.message}\n" for d in diagnostics)
