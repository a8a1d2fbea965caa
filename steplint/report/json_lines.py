"""One JSON object per line, in the shape of the json format's items."""

from __future__ import annotations

import json
from typing import Dict, List

from steplint.diagnostic import Diagnostic
from steplint.report.json_format import dicts


def render(diagnostics: List[Diagnostic], sources: Dict[str, str]) -> str:
    return "".join(json.dumps(item) + "\n" for item in dicts(diagnostics, sources))
