"""Azure Pipelines logging commands: each diagnostic an error issue on the build."""

from __future__ import annotations

from typing import Dict, List

from steplint.diagnostic import Diagnostic
from steplint.report.json_format import absolute


def _escaped(text: str) -> str:
    """Azure's escaping for a logging command: the characters that would end a property or the line."""
    return text.replace("%", "%AZP25").replace(";", "%3B").replace("]", "%5D").replace("\r", "%0D").replace("\n", "%0A")


def render(diagnostics: List[Diagnostic], sources: Dict[str, str]) -> str:
    return "".join(
        f"##vso[task.logissue type=error;sourcepath={_escaped(absolute(d.path))};linenumber={d.row};columnnumber={d.column};code={d.code};]"
        f"{_escaped(d.message)}\n"
        for d in diagnostics
    )
