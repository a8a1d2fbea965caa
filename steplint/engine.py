"""lint_source and fix_source: pure functions from a file's text to diagnostics and fixed text."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List

import libcst as cst

from steplint.config import Settings
from steplint.diagnostic import Diagnostic
from steplint.fixes import SAFE, Fix, apply_edits, normalized, reparses, select_non_overlapping
from steplint.model import build_model
from steplint.rule import all_rules
from steplint.source import Source
from steplint.suppress import comments, removal_edit, suppressing, unused_codes

# A file without any of these has no update, scheduler, scaler, checkpoint or steplint noqa to check.
_PREFILTER = re.compile(r"\.step\(|step_update|scaler|save|load_state_dict|param_groups|noqa\s*:\s*SL", re.I)
MAX_FIX_ROUNDS = 25
SYNTAX_ERROR = "SL001"
UNUSED_NOQA = "SL002"


def lint_source(path: str, text: str, settings: Settings, project=None) -> List[Diagnostic]:
    """Diagnostics for one file's text, sorted by position, without the suppressed ones. `project`
    (a steplint.project ModuleContext) is what the rest of the project tells about this module."""
    rules = settings.enabled_rules(path)
    if not _PREFILTER.search(text):
        return []
    source = Source(path, text)
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        return [_unparsable(source, error.raw_line, error.raw_column, error.message)] if SYNTAX_ERROR in rules else []
    except RecursionError:
        return [_unparsable(source, 1, 0, "too deeply nested to parse")] if SYNTAX_ERROR in rules else []
    model = build_model(source, module, settings, project)
    found_comments = comments(source)
    if found_comments.file_exempt:
        return []
    found: List[Diagnostic] = []
    used = set()
    for code, rule in rules.items():
        if rule.check is None:
            continue
        reported_rows = set()
        for finding in rule.check(model):
            first, last = model.statement_rows(finding.node)
            if first in reported_rows:
                continue  # one problem per rule and statement, however many sub-expressions show it
            reported_rows.add(first)
            noqa = suppressing(found_comments, code, sorted({first, last}))
            if noqa is not None:
                used.add((noqa, code))
                continue
            start, end = model.span(finding.node)
            noqa_row = last if first in found_comments.string_rows else first
            found.append(_diagnostic(source, rule, finding.message, start, end, finding.fix, noqa_row))
    if UNUSED_NOQA in rules:
        for directive, unused in unused_codes(found_comments, used, rules, all_rules()):
            listed = ", ".join(f"`{c}`" for c in unused)
            fix = Fix("Remove the unused suppression", SAFE, (removal_edit(source, directive, unused),))
            found.append(_diagnostic(source, rules[UNUSED_NOQA], f"Unused `noqa` directive (suppresses nothing: {listed})", directive.start, directive.end, fix, directive.row))
    return sorted(found, key=lambda d: (d.start, d.code))


def _diagnostic(source: Source, rule, message: str, start: int, end: int, fix, noqa_row) -> Diagnostic:
    row, column = source.position(start)
    end_row, end_column = source.position(end)
    return Diagnostic(rule.code, rule.name, message, source.path, start, end, row, column + 1, end_row, end_column + 1, fix, rule.url, noqa_row)


def _unparsable(source: Source, row: int, column: int, message: str) -> Diagnostic:
    row = min(max(row, 1), len(source.line_starts))
    start = source.offset(row, min(column, len(source.line(row))))
    message = message[len("parser error: "):] if message.startswith("parser error: ") else message
    return _diagnostic(source, all_rules()[SYNTAX_ERROR], f"Cannot parse: {message}", start, start, None, row)


@dataclass
class FixResult:
    text: str
    fixed: List[Diagnostic] = field(default_factory=list)  # what the applied fixes resolved
    remaining: List[Diagnostic] = field(default_factory=list)  # diagnostics of the fixed text


def fix_source(path: str, text: str, settings: Settings, unsafe_fixes: bool = False, project=None) -> FixResult:
    """Apply fixes until nothing changes (bounded), as ruff does: non-overlapping fixes per round,
    then lint again. A round whose result does not parse is retried fix by fix; a fix that breaks
    the module is dropped and its diagnostic stays."""
    fixed: List[Diagnostic] = []
    for _ in range(MAX_FIX_ROUNDS):
        diagnostics = lint_source(path, text, settings, project)
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
    return FixResult(text, fixed, lint_source(path, text, settings, project))


def _first_that_parses(text: str, fixes):
    for fix in fixes:
        candidate = apply_edits(text, normalized(fix.edits) or [])
        if reparses(candidate):
            return candidate, [fix]
    return text, []
