"""Output formats: one module each, every one a function of the diagnostics and their sources."""

from steplint.report import azure, concise, full, github, gitlab, grouped, json_format, json_lines, junit, pylint, rdjson, sarif

FORMATS = {
    "full": full.render,
    "concise": concise.render,
    "json": json_format.render,
    "json-lines": json_lines.render,
    "sarif": sarif.render,
    "github": github.render,
    "gitlab": gitlab.render,
    "junit": junit.render,
    "grouped": grouped.render,
    "pylint": pylint.render,
    "rdjson": rdjson.render,
    "azure": azure.render,
}
# Formats that mark fixable diagnostics with `[*]`: they take `unsafe_fixes` too.
MARKS_FIXES = ("concise", "grouped")
SHOWS_EVIDENCE = ("full", "json")  # formats that print each diagnostic's premises with --show-evidence
# Formats a program reads: no summary after them (the summary goes nowhere for `-o FILE` either).
MACHINE_FORMATS = ("json", "json-lines", "sarif", "github", "gitlab", "junit", "pylint", "rdjson", "azure")
