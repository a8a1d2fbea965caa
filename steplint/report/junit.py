"""JUnit XML, as CI systems read test reports: one test suite per file, one failing test case per
diagnostic (an empty run is one passing case, so the report is never empty)."""

from __future__ import annotations

import os
import socket
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from itertools import groupby
from typing import Dict, List

from steplint.diagnostic import Diagnostic
from steplint.report.json_format import absolute


def _suite(parent: ET.Element, name: str, failures: int, tests: int, timestamp: str) -> ET.Element:
    """A test suite with the attributes the JUnit XSD requires of one."""
    return ET.SubElement(parent, "testsuite", {
        "name": name, "tests": str(tests), "failures": str(failures), "errors": "0", "skipped": "0", "time": "0",
        "timestamp": timestamp, "hostname": socket.gethostname() or "localhost", "package": "steplint",
    })


def render(diagnostics: List[Diagnostic], sources: Dict[str, str]) -> str:
    timestamp = datetime.now(timezone.utc).replace(microsecond=0, tzinfo=None).isoformat()
    root = ET.Element("testsuites", {"name": "steplint", "tests": str(max(1, len(diagnostics))), "failures": str(len(diagnostics)), "errors": "0", "time": "0"})
    if not diagnostics:
        suite = _suite(root, "steplint", 0, 1, timestamp)
        ET.SubElement(suite, "testcase", {"name": "No errors found", "classname": "steplint", "time": "0"})
    for path, group in groupby(diagnostics, key=lambda d: absolute(d.path)):
        group = list(group)
        suite = _suite(root, path, len(group), len(group), timestamp)
        classname = os.path.splitext(path)[0].replace(os.sep, "/")
        for d in group:
            case = ET.SubElement(suite, "testcase", {"name": f"steplint.{d.code}", "classname": classname, "time": "0",
                                                     "file": path, "line": str(d.row), "column": str(d.column)})
            failure = ET.SubElement(case, "failure", {"message": d.message, "type": d.code})
            failure.text = f"line {d.row}, col {d.column}, {d.message}"
    ET.indent(root, "    ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
