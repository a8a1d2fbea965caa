"""Output formats: one module each, every one a function of the diagnostics and their sources."""

from importlib import import_module
from typing import Callable

# Format -> the module (here) whose `render` prints it: imported when that format is asked for, so a run
# pays for one format's imports only.
FORMATS = {
    "full": "full",
    "concise": "concise",
    "json": "json_format",
    "json-lines": "json_lines",
    "sarif": "sarif",
    "github": "github",
    "gitlab": "gitlab",
    "junit": "junit",
    "grouped": "grouped",
    "pylint": "pylint",
    "rdjson": "rdjson",
    "azure": "azure",
}
# Formats that mark fixable diagnostics with `[*]`: they take `unsafe_fixes` too.
MARKS_FIXES = ("concise", "grouped")
SHOWS_EVIDENCE = ("full", "json")  # formats that print each diagnostic's premises with --show-evidence
# Formats a program reads: no summary after them (the summary goes nowhere for `-o FILE` either).
MACHINE_FORMATS = ("json", "json-lines", "sarif", "github", "gitlab", "junit", "pylint", "rdjson", "azure")


def renderer(output_format: str) -> Callable:
    """The `render` function of an output format."""
    return import_module(f"steplint.report.{FORMATS[output_format]}").render
