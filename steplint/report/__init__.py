"""Output formats: one module each, every one a function of the diagnostics and their sources."""

from steplint.report import concise, full, github, json_format, json_lines, sarif

FORMATS = {
    "full": full.render,
    "concise": concise.render,
    "json": json_format.render,
    "json-lines": json_lines.render,
    "sarif": sarif.render,
    "github": github.render,
}
MACHINE_FORMATS = ("json", "json-lines", "sarif", "github")
