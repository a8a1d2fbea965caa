"""Output formats: one module each, every one a function of the diagnostics."""

from steplint.report import concise, full, json_format

FORMATS = {"full": full.render, "concise": concise.render, "json": json_format.render}
