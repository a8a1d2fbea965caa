"""lint_source and fix_source: pure functions from a file's text to diagnostics and fixed text."""

from __future__ import annotations

import ast
import gc
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from steplint import effects
from steplint.config import Settings
from steplint.diagnostic import Diagnostic
from steplint.fixes import SAFE, Fix, apply_edits, normalized, reparses, select_non_overlapping
from steplint.rule import Rule, all_rules
from steplint.source import RUNNING_PYTHON, Source, code_text, newer_grammar, parse_python, parser_text
from steplint.suppress import Comments, comments, removal_edit, suppressing, unused_codes

if TYPE_CHECKING:
    import libcst as cst

    from steplint.model import ModuleModel

# LibCST and the model recurse a few frames per nesting level; Python's parser accepts ~3,000 levels
# (deeper is SL001 from Python itself), which this limit covers without exhausting the C stack.
_NESTING_RECURSION_LIMIT = 20_000
# Larger files are generated code or embedded data; LibCST would take minutes over them, so they get
# Python's syntax check only (and the command line says so).
MAX_ANALYSED_CHARS = 2_000_000
# LibCST and the model take time superlinear in how deep expressions nest (a flat sum of 4,000 terms
# is a binary tree 4,000 deep: 17 s; 10,000 overflowed the C stack). Hand-written code stays far below.
MAX_ANALYSED_NESTING = 200
# A file without any of these has no update, scheduler, scaler, resume or steplint noqa to check
# (searched in the lowercased text: substring tests are many times faster than one regex with re.I).
_CANDIDATES = (".step(", "step_update", "scaler", "load_state_dict", "param_groups")
_NOQA_CODES = re.compile(r"noqa\s*:\s*sl")
# Without them, a checkpoint (`save`) can still be reported, by SL302 (a `torch.save(...)` call that
# omits an update counter) or SL402 (a counter that ends the run, advanced under a rank test); both
# need a counter increment (`n += 1`, `n = n + 1`).
_COUNTER = re.compile(r"\+=?[\s\\(]*1")
_SAVE_CALL = re.compile(r"\bsave\s*\(")
_RANK_WORDS = ("rank", "main_process", "is_master", "is_main", "is_global_zero")
_OWN_NOQA = re.compile(r"noqa\s*:[^\n]*\bsl\d{3}|steplint\s*:\s*noqa", re.I)  # lists a steplint code, or exempts the file
MAX_FIX_ROUNDS = 25
# (what a module without words of its own can be reported for: an update that may be skipped, a resume, a scaler built afresh)
_PROJECT_ACTIONS = frozenset((effects.UPDATE, effects.FRESH_SCALER))
INTERNAL_ERROR = "SL000"
SYNTAX_ERROR = "SL001"
UNUSED_NOQA = "SL002"


def collect_garbage_rarely() -> None:
    """A lint makes ~10^5 short-lived objects (LibCST nodes) and almost no reference cycles. What is
    loaded so far goes to the permanent generation, and collections run per 50,000 allocations, not
    per 700: else their cost grows with the heap, and with it the cost per line of a big file."""
    gc.freeze()
    gc.set_threshold(50_000, 10, 10)


def import_analysis() -> None:
    """Import what analysing a file needs (LibCST, the model, the project summaries, the rules): a
    worker started ahead of its first file does it while the run prepares that file."""
    import libcst  # noqa: F401

    from steplint.model import build_model  # noqa: F401
    from steplint.project import summarize  # noqa: F401

    all_rules()


def needs_analysis(text: str) -> bool:
    """The prefilter: whether the text can hold anything a rule reports (or a noqa to check). The words
    count in the code only, not in comments and docstrings (searched only when the whole text has them)."""
    lowered = text.lower()
    if "noqa" in lowered and _NOQA_CODES.search(lowered):
        return True
    if not _candidate(text, lowered):
        return False
    code = code_text(text)
    return _candidate(code, code.lower())


def acts_through_the_project(project) -> bool:
    """The module calls functions of the project that make an update that may be skipped, restore an optimizer
    (`load_checkpoint(...)`) or build a loss scaler (`Trainer(...)`): findings can rest on them, whatever its own words."""
    if project is None:
        return False
    return any(e.action in _PROJECT_ACTIONS or e.action == effects.LOAD and e.role == effects.OPTIMIZER for callee in project.calls.values() for e in callee.effects)


def _candidate(text: str, lowered: str) -> bool:
    if any(word in lowered for word in _CANDIDATES):
        return True
    return (
        "save" in lowered
        and _COUNTER.search(text) is not None
        and (_SAVE_CALL.search(lowered) is not None or any(word in lowered for word in _RANK_WORDS))
    )


def lint_source(path: str, text: str, settings: Settings, project=None) -> List[Diagnostic]:
    """Diagnostics for one file's text, sorted by position, without the suppressed ones. `project`
    (a steplint.project ModuleContext) is what the rest of the project tells about this module."""
    return analyse_source(path, text, settings, project)[1]


def analyse_source(path: str, text: str, settings: Settings, project=None) -> Tuple[Optional["ModuleModel"], List[Diagnostic]]:
    """lint_source's diagnostics with the model they were found on (None when the file was not
    analysed): `steplint trace` draws its map from the same parse and model as the check."""
    rules = settings.enabled_rules(path)
    # Every file gets Python's syntax check, also those the prefilter skips: Python's parser is fast,
    # and its tree tells the positions of reported statements later.
    python_tree = parse_python(text, path)
    python_error = python_tree if isinstance(python_tree, Exception) else None
    if python_error is not None and not _targets_older_grammar(settings) and newer_grammar(text, python_error):
        python_tree = None  # (analysed on LibCST's parse alone; the fixes, which Python must check, are not offered)
    elif python_error is not None:
        newer = _newer_target(settings)
        if newer and isinstance(python_tree, SyntaxError) and python_tree.lineno is not None:
            # Not broken, perhaps: this interpreter's grammar is older than the project's.
            _UNANALYSED[path] = (f"not analysed: Python {RUNNING_PYTHON}, which runs steplint, cannot parse it ({python_tree.msg}, line"
                                 f" {python_tree.lineno}), and the project targets Python {newer}, whose grammar is newer; run steplint"
                                 f" with Python {newer} or later to check it")
            return None, []
        if sys.version_info < (3, 12) and isinstance(python_tree, SyntaxError) and (python_tree.msg or "").startswith("f-string"):
            # (what older Pythons reject in f-strings, quotes and line breaks inside `{}`, Python 3.12 accepts (PEP 701))
            _UNANALYSED[path] = (f"not analysed: Python {RUNNING_PYTHON}, which runs steplint, cannot parse an f-string in it ({python_tree.msg},"
                                 f" line {python_tree.lineno}), which Python 3.12's grammar may accept; run steplint with Python 3.12 or later"
                                 " to check it")
            return None, []
        return None, [_python_syntax_error(Source(path, text), python_tree)] if SYNTAX_ERROR in rules else []
    if not needs_analysis(text) and not acts_through_the_project(project):
        return None, []
    # (a parse the project index kept: it checked the bound before parsing)
    skipped = analysis_bound(text, python_tree or python_error) if not _is_kept(path, text) else None
    if skipped is not None:
        _UNANALYSED[path] = skipped
        return None, []
    import libcst as cst  # only files that pass the prefilter pay for importing the parser

    source = Source(path, text, python_tree)
    if sys.getrecursionlimit() < _NESTING_RECURSION_LIMIT:
        sys.setrecursionlimit(_NESTING_RECURSION_LIMIT)
    try:
        module, kept_model = _taken(path, text)
    except cst.ParserSyntaxError as error:
        # Python parses it but LibCST does not: syntax newer than LibCST's grammar.
        message = f"{_without_prefix(error.message)} (steplint's parser, LibCST, does not support this syntax yet)"
        return None, [_unparsable(source, error.raw_line, error.raw_column, message)] if SYNTAX_ERROR in rules else []
    except cst.CSTValidationError as error:
        return None, [_unparsable(source, 1, 0, f"{error} (LibCST rejects what Python accepts)")] if SYNTAX_ERROR in rules else []
    except RecursionError:
        return None, [_unparsable(source, 1, 0, "too deeply nested for steplint's parser")] if SYNTAX_ERROR in rules else []
    try:
        return _analyse(source, module, rules, settings, project, kept_model)
    except Exception as error:
        if not _from_recursion(error):
            raise
        return None, [_unparsable(source, 1, 0, "too deeply nested for steplint's analysis")] if SYNTAX_ERROR in rules else []


def analysis_bound(text: str, python_tree: Optional[ast.AST] = None) -> Optional[str]:
    """Why a file is not analysed, only syntax-checked: more text, or deeper nesting, than steplint
    analyses in bounded time and memory; None when it is analysed. (`python_tree`: Python's parse of
    the text, when made.) The command line warns with it; the language server can publish it."""
    if len(text) > MAX_ANALYSED_CHARS:
        return (f"not analysed: {len(text) / 1e6:.1f} million characters, more than the {MAX_ANALYSED_CHARS / 1e6:.0f} million"
                " steplint analyses (generated code or data?); only Python's syntax check ran")
    tree = parse_python(text) if python_tree is None else python_tree
    if not isinstance(tree, Exception) and _nests_deeper(tree, MAX_ANALYSED_NESTING):
        return (f"not analysed: code nested more than {MAX_ANALYSED_NESTING} levels deep (a generated sum or table?),"
                " which steplint cannot analyse in bounded time; only Python's syntax check ran")
    return None


def _nests_deeper(tree: ast.AST, limit: int) -> bool:
    """Whether Python's syntax tree is more than `limit` nodes deep (level by level: no recursion;
    reading `_fields` directly, not through ast.iter_child_nodes, is three times faster)."""
    level = [tree]
    depth = 1
    while level:
        if depth > limit:
            return True
        below: List[ast.AST] = []
        for node in level:
            for name in node._fields:
                value = getattr(node, name, None)
                if type(value) is list:
                    below.extend(value)
                elif isinstance(value, ast.AST):
                    below.append(value)
        level = [node for node in below if isinstance(node, ast.AST)]
        depth += 1
    return False


# Files of this process that lint_source left unanalysed (path -> analysis_bound's reason): the command
# line that linted them takes the reason, for its warning (unanalysed_reason).
_UNANALYSED: Dict[str, str] = {}


def unanalysed_reason(path: str) -> Optional[str]:
    """Why the last lint of `path` in this process did not analyse it (taken once), or None."""
    return _UNANALYSED.pop(path, None)


# Modules the project index parsed and modelled for files this run lints next (in this process, or in a
# pool forked from it): each such file is parsed once per run, and modelled once when the project tells
# its model nothing new. path -> (text, module, model or None); the lint takes its entry.
_KEPT: Dict[str, tuple] = {}


def parse_and_keep(path: str, text: str) -> cst.Module:
    """The module of `text`, parsed once and kept for the lint of `path` later in the run."""
    import libcst as cst

    kept = _KEPT.get(path)
    if kept is not None and kept[0] == text:
        return kept[1]
    module = cst.parse_module(parser_text(text))
    _KEPT[path] = (text, module, None)
    return module


def _is_kept(path: str, text: str) -> bool:
    kept = _KEPT.get(path)
    return kept is not None and kept[0] == text


def keep_model(path: str, model: "ModuleModel") -> None:
    """Keep the model the index built of `path`'s kept module (built with keep_walk) for its lint."""
    kept = _KEPT.get(path)
    if kept is not None and kept[1] is model.module:
        _KEPT[path] = (kept[0], kept[1], model)


def _taken(path: str, text: str) -> tuple:
    """(module, model or None) kept for the lint of `path`, else (a new parse, None)."""
    import libcst as cst

    kept = _KEPT.pop(path, None)
    return kept[1:] if kept is not None and kept[0] == text else (cst.parse_module(parser_text(text)), None)


def _from_recursion(error: BaseException) -> bool:
    """A RecursionError, or an error raised while one unwound (LibCST's position bookkeeping
    raises KeyError then)."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, RecursionError):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    return False


def _analyse(
    source: Source, module: cst.Module, rules: Dict[str, Rule], settings: Settings, project=None, kept_model: Optional["ModuleModel"] = None,
) -> Tuple["ModuleModel", List[Diagnostic]]:
    from steplint.model import build_model, model_for

    model = model_for(kept_model, source, project, settings) if kept_model is not None else None
    if model is None:
        model = build_model(source, module, settings, project)
    return model, _findings(source, model, rules, settings)


def _findings(source: Source, model: "ModuleModel", rules: Dict[str, Rule], settings: Settings) -> List[Diagnostic]:
    from steplint.evidence import premises
    from steplint.rewrite import vetted

    # Tokenizing for comments costs a fifth of the parse: before the rules only for a file exemption or
    # a `noqa` that lists a steplint code (it may be unused: SL002), else at the first finding.
    found_comments = comments(source) if _OWN_NOQA.search(source.text) else None
    if settings.ignore_noqa:  # `--ignore-noqa`: every finding is reported, and no directive is unused
        found_comments = Comments({}, False, source)
    if found_comments is not None and found_comments.file_exempt:
        return []
    found: List[Diagnostic] = []
    used = set()
    fixable = settings.fixable_codes()
    for code, rule in rules.items():
        if rule.check is None:
            continue
        reported_rows = set()
        for finding in rule.check(model):
            if found_comments is None:
                found_comments = comments(source)
                if found_comments.file_exempt:
                    return []
            first, last = model.text.statement_rows(finding.node)
            if first in reported_rows:
                continue  # one problem per rule and statement, however many sub-expressions show it
            reported_rows.add(first)
            noqa = suppressing(found_comments, code, sorted({first, last}))
            if noqa is not None:
                used.add((noqa, code))
                continue
            finding = vetted(model, finding)  # (after suppression: a suppressed finding's fix is never written)
            start, end = model.text.span(finding.node)
            noqa_row = last if last != first and first in found_comments.string_rows else first  # (tokenizes only then)
            evidence = finding.evidence or premises(model, finding.node)
            found.append(_diagnostic(source, rule, finding.message, start, end, finding.fix if code in fixable else None, noqa_row, evidence))
    if UNUSED_NOQA in rules and found_comments is not None and not settings.ignore_noqa:
        for directive, unused in unused_codes(found_comments, used, rules, all_rules()):
            listed = ", ".join(f"`{c}`" for c in unused)
            fix = Fix("Remove the unused suppression", SAFE, (removal_edit(source, directive, unused),)) if UNUSED_NOQA in fixable else None
            found.append(_diagnostic(source, rules[UNUSED_NOQA], f"Unused `noqa` directive (suppresses nothing: {listed})", directive.start, directive.end, fix, directive.row))
    return sorted(found, key=lambda d: (d.start, d.code))


def _diagnostic(source: Source, rule, message: str, start: int, end: int, fix, noqa_row, evidence=()) -> Diagnostic:
    row, column = source.position(start)
    end_row, end_column = source.position(end)
    return Diagnostic(rule.code, rule.name, message, source.path, start, end, row, column + 1, end_row, end_column + 1, fix, rule.url, noqa_row,
                      evidence=evidence)


def _targets_older_grammar(settings: Settings) -> bool:
    """The project declares a Python older than 3.12, for which newer syntax is an error."""
    target = settings.target_version
    return target is not None and tuple(int(p) for p in target.split(".")) < (3, 12)


def _newer_target(settings: Settings) -> Optional[str]:
    """The project's target Python version when it is newer than the one running steplint."""
    target = settings.target_version
    if target is None or tuple(int(p) for p in target.split(".")) <= sys.version_info[:2]:
        return None
    return target


def _python_syntax_error(source: Source, error: Exception) -> Diagnostic:
    """SL001 at Python's own position, with its message and the version of the Python that checked."""
    checked = f" (checked with Python {RUNNING_PYTHON})"
    if "\0" in source.text and (isinstance(error, ValueError) or error.lineno is None):  # type: ignore[union-attr]
        row, column = source.position(source.text.index("\0"))  # a ValueError before Python 3.12, a SyntaxError without position since
        return _unparsable(source, row, column, "source code cannot contain null bytes" + checked)
    if isinstance(error, SyntaxError):  # IndentationError and TabError too
        return _unparsable(source, error.lineno or 1, (error.offset or 1) - 1, error.msg + checked)
    return _unparsable(source, 1, 0, "too deeply nested for Python's parser" + checked)


def _without_prefix(message: str) -> str:
    return message[len("parser error: "):] if message.startswith("parser error: ") else message


def _unparsable(source: Source, row: int, column: int, message: str) -> Diagnostic:
    row = min(max(row, 1), len(source.line_starts))
    start = source.offset(row, max(0, min(column, len(source.line(row)))))
    return _diagnostic(source, all_rules()[SYNTAX_ERROR], f"Cannot parse: {message}", start, start, None, row)


def internal_error(path: str, error: BaseException) -> Diagnostic:
    """SL000 for a file whose analysis or fixing raised: one line, at the top of the file."""
    import traceback  # (start-up: imported where an internal error needs it)

    summary = traceback.format_exception_only(type(error), error)[-1].strip().splitlines()[0][:200]
    rule = all_rules()[INTERNAL_ERROR]
    message = f"Internal error, this file was not checked: {summary} (please report it, with the traceback `steplint check -v` prints)"
    return Diagnostic(INTERNAL_ERROR, rule.name, message, path, 0, 0, 1, 1, 1, 1, None, rule.url, None)


@dataclass
class FixResult:
    text: str
    fixed: List[Diagnostic] = field(default_factory=list)  # what the applied fixes resolved
    remaining: List[Diagnostic] = field(default_factory=list)  # diagnostics of the fixed text


def fix_source(
    path: str, text: str, settings: Settings, unsafe_fixes: bool = False, project=None, max_rounds: int = MAX_FIX_ROUNDS,
    diagnostics: Optional[List[Diagnostic]] = None,
) -> FixResult:
    """Apply fixes until nothing changes (bounded), as ruff does: non-overlapping fixes per round,
    then lint again. A round whose result does not parse is retried fix by fix; a fix that breaks
    the module is dropped and its diagnostic stays. (`max_rounds=1`: one round, whose `fixed`
    diagnostics hold exactly the edits applied to `text`; benchmarks/fuzz.py checks them.)
    `diagnostics`: lint_source's answer for `text` with `project`, when the caller has it."""
    fixed: List[Diagnostic] = []
    shown_without_fix: Optional[Counter] = None
    for _ in range(max_rounds):
        if diagnostics is None:
            diagnostics = lint_source(path, text, settings, project)
        if shown_without_fix is None:
            shown_without_fix = Counter(_identity(d, text) for d in diagnostics if d.fix is None or not d.fix.applies(unsafe_fixes))
        fixable = [d for d in _agreeing(diagnostics, text, shown_without_fix) if d.fix is not None and d.fix.applies(unsafe_fixes)]
        chosen = select_non_overlapping([d.fix for d in fixable])  # type: ignore[misc]
        if not chosen:
            return FixResult(text, fixed, diagnostics)  # the last round linted the final text
        candidate = apply_edits(text, normalized(e for f in chosen for e in f.edits) or [])
        if not reparses(candidate):
            candidate, chosen = _first_that_parses(text, chosen)
            if not chosen:
                return FixResult(text, fixed, diagnostics)
        fixed.extend(d for d in fixable if d.fix in chosen)
        if candidate == text:
            return FixResult(text, fixed, diagnostics)
        text, diagnostics = candidate, None
    return FixResult(text, fixed, lint_source(path, text, settings, project))


def _identity(d: Diagnostic, text: str) -> tuple:
    """What tells a diagnostic apart across fix rounds: its code, message and the flagged code."""
    return d.code, d.message, " ".join(text[d.start : d.end].split())


def _agreeing(diagnostics: List[Diagnostic], text: str, shown_without_fix: Counter) -> List[Diagnostic]:
    """The diagnostics of a later round, but those the first report showed without a fix: a fix
    that appears only after other fixes went in (SL303's restore, once SL302 added the entry to the
    checkpoint) is applied by the next run, whose report shows it."""
    left = Counter(shown_without_fix)
    kept = []
    for d in diagnostics:
        identity = _identity(d, text)
        if left[identity] > 0:
            left[identity] -= 1
        else:
            kept.append(d)
    return kept


def _first_that_parses(text: str, fixes):
    for fix in fixes:
        candidate = apply_edits(text, normalized(fix.edits) or [])
        if reparses(candidate):
            return candidate, [fix]
    return text, []
