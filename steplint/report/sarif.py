"""SARIF 2.1.0, for GitHub code scanning and other SARIF consumers: rules, results, fixes."""

from __future__ import annotations

import json
import os
from typing import Dict, List

from steplint import __version__
from steplint.diagnostic import Diagnostic
from steplint.rule import all_rules
from steplint.source import Source, source_reader

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _uri(path: str) -> str:
    return path.replace(os.sep, "/")


def _region(source: Source, start: int, end: int) -> dict:
    row, column = source.position(start)
    end_row, end_column = source.position(end)
    return {"startLine": row, "startColumn": column + 1, "endLine": end_row, "endColumn": end_column + 1}


def render(diagnostics: List[Diagnostic], sources: Dict[str, str]) -> str:
    rules = list(all_rules().values())
    index = {r.code: i for i, r in enumerate(rules)}
    results = []
    source_of = source_reader(sources)
    for d in diagnostics:
        source = source_of(d.path)
        result = {
            "ruleId": d.code,
            "ruleIndex": index[d.code],
            "level": "error",
            "message": {"text": d.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": _uri(d.path)},
                        "region": {"startLine": d.row, "startColumn": d.column, "endLine": d.end_row, "endColumn": d.end_column},
                    }
                }
            ],
        }
        if d.fix is not None:
            result["fixes"] = [
                {
                    "description": {"text": d.fix.title},
                    "artifactChanges": [
                        {
                            "artifactLocation": {"uri": _uri(d.path)},
                            "replacements": [
                                {"deletedRegion": _region(source, e.start, e.end), "insertedContent": {"text": e.content}}
                                for e in sorted(set(d.fix.edits))
                            ],
                        }
                    ],
                }
            ]
        results.append(result)
    log = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "steplint",
                        "version": __version__,
                        "rules": [
                            {
                                "id": r.code,
                                "name": r.name,
                                "shortDescription": {"text": r.summary},
                                "fullDescription": {"text": r.doc},
                                "properties": {"fix": r.fix or "none"},
                            }
                            for r in rules
                        ],
                    }
                },
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"
