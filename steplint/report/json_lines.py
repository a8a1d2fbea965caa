"""One JSON object per line, in the shape of the json format's items."""

from __future__ import annotations

import json
from typing import Dict, List

from steplint.diagnostic import Diagnostic
from steplint.report.json_format import as_dict
from steplint.source import source_reader


def render(diagnostics: List[Diagnostic], sources: Dict[str, str]) -> str:
    source_of = source_reader(sources)
    return "".join(json.dumps(as_dict(d, source_of(d.path))) + "\n" for d in diagnostics)
