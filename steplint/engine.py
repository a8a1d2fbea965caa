"""lint_source and fix_source: pure functions from a file's text to diagnostics and fixed text."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List

import libcst as cst

from steplint.config import Settings
from steplint.diagnostic import Diagnostic
from steplint.fixes import apply_edits, normalized, reparses, select_non_overlapping
from steplint.model import build_model
from steplint.rule import all_rules
from steplint.source import Source
from steplint.suppress import suppressed

# A file without these words has no update, scheduler, counter feed or checkpoint to check.
_PREFILTER = re.compile(r"step|save|scaler")
MAX_FIX_ROUNDS = 25
SYNTAX_ERROR = "SL001"


def lint_source(path: str, text: str, settings: Settings) -> List[Diagnostic]:
    """Diagnostics for one file's text, sorted by position, without the suppressed ones."""
    rules = settings.enabled_rules()
    if not _PREFILTER.search(text):
        return []
    source = Source(path, text)
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        return [_unparsable(source, error.raw_line, error.raw_column, error.message)] if SYNTAX_ERROR in rules else []
    except RecursionError:
        return [_unparsable(source, 1, 0, "too deeply nested to parse")] if SYNTAX_ERROR in rules else []
    model = build_model(source, module, settings)
    found: List[Diagnostic] = []
    for code, rule in rules.items():
        if rule.check is None:
            continue
        for finding in rule.check(model):
            start, end = model.span(finding.node)
            row, column = source.position(start)
            end_row, end_column = source.position(end)
            first, last = model.rows(finding.node)
            noqa = suppressed(source, code, sorted({first, last}))
            if noqa is not None:
                continue
            found.append(Diagnostic(code, rule.name, finding.message, path, start, end, row, column + 1, end_row, end_column + 1, finding.fix, rule.url, row))
    return sorted(found, key=lambda d: (d.start, d.code))


def _unparsable(source: Source, row: int, column: int, message: str) -> Diagnostic:
    rule = all_rules()[SYNTAX_ERROR]
    row = min(max(row, 1), len(source.line_starts))
    column = min(column, len(source.line(row)))
    start = source.offset(row, column)
    message = message[len("parser error: "):] if message.startswith("parser error: ") else message
    return Diagnostic(SYNTAX_ERROR, rule.name, f"Cannot parse: {message}", source.path, start, start, row, column + 1, row, column + 1, None, rule.url, row)


@dataclass
class FixResult:
    text: str
    fixed: List[Diagnostic] = field(default_factory=list)  # what the applied fixes resolved
    remaining: List[Diagnostic] = field(default_factory=list)  # diagnostics of the fixed text


def fix_source(path: str, text: str, settings: Settings, unsafe_fixes: bool = False) -> FixResult:
    """Apply fixes until nothing changes (bounded), as ruff does: non-overlapping fixes per round,
    then lint again. A round whose result does not parse is retried fix by fix; a fix that breaks
    the module is dropped and its diagnostic stays."""
    fixed: List[Diagnostic] = []
    for _ in range(MAX_FIX_ROUNDS):
        diagnostics = lint_source(path, text, settings)
        fixable = [d for d in diagnostics if d.fix is not None and d.fix.applies(unsafe_fixes)]
        chosen = select_non_overlapping([d.fix for d in fixable])  # type: ignore[misc]
        if not chosen:
            break
        candidate = apply_edits(text, normalized(e for f in chosen for e in f.edits) or [])
        if not reparses(candidate):
            candidate, chosen = _first_that_parses(text, chosen)
            if not chosen:
                break
        fixed.extend(d for d in fixable if d.fix in chosen)
        if candidate == text:
            break
        text = candidate
    return FixResult(text, fixed, lint_source(path, text, settings))


def _first_that_parses(text: str, fixes):
    for fix in fixes:
        candidate = apply_edits(text, normalized(fix.edits) or [])
        if reparses(candidate):
            return candidate, [fix]
    return text, []
