"""GitLab Code Quality: a JSON list of issues with description, check_name, fingerprint, severity
and location (path relative to the project, begin and end lines), as the merge request widget reads it."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from typing import Dict, List

from steplint.diagnostic import Diagnostic
from steplint.source import source_reader


def _project_path(path: str) -> str:
    """The path relative to the project's root: `CI_PROJECT_DIR` in a GitLab job, else the current folder."""
    root = os.environ.get("CI_PROJECT_DIR") or os.getcwd()
    return os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")


def _fingerprint(d: Diagnostic, path: str, line: str, repeat: int) -> str:
    """Stable across runs and unrelated edits (path, code, message and the reported line's text, not
    its number), distinct for each occurrence: GitLab compares issues between branches by it."""
    key = "\0".join((path, d.code, d.message, line.strip(), str(repeat)))
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def render(diagnostics: List[Diagnostic], sources: Dict[str, str]) -> str:
    issues = []
    seen: Counter = Counter()
    source_of = source_reader(sources)
    for d in diagnostics:
        path = _project_path(d.path)
        source = source_of(d.path)
        line = source.line(source.position(d.start)[0]) if source.text else ""
        seen[(path, d.code, d.message, line.strip())] += 1
        issues.append({
            "description": f"{d.code}: {d.message}",
            "check_name": d.code,
            "fingerprint": _fingerprint(d, path, line, seen[(path, d.code, d.message, line.strip())]),
            "severity": "major",
            "location": {"path": path, "lines": {"begin": d.row, "end": d.end_row}},
        })
    return json.dumps(issues, indent=2) + "\n"
