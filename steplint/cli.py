"""The `steplint` command. Argument handling and output only; the analysis is in the engine."""

from __future__ import annotations

import difflib
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import click

from steplint import __version__
from steplint.config import ConfigError, Settings
from steplint.diagnostic import Diagnostic
from steplint.engine import SYNTAX_ERROR, fix_source, lint_source
from steplint.files import FileError, discover, read_text, write_text
from steplint.report import FORMATS
from steplint.rule import all_rules

_PARALLEL_FROM = 16  # files; below this a process pool costs more than it saves


@dataclass
class FileReport:
    path: str
    text: str = ""  # the text the diagnostics refer to (after fixes, when fixing)
    diagnostics: List[Diagnostic] = field(default_factory=list)
    fixed: int = 0
    diff: str = ""


def _codes(values: Tuple[str, ...]) -> Tuple[str, ...]:
    return tuple(code.strip() for value in values for code in value.split(",") if code.strip())


def _check_file(path: str, settings: Settings, fix: bool, unsafe_fixes: bool, diff: bool) -> FileReport:
    try:
        file = read_text(path)
    except FileError as error:
        return FileReport(path, "", [_file_error(path, str(error))] if SYNTAX_ERROR in settings.enabled_rules() else [])
    if not (fix or diff):
        return FileReport(path, file.text, lint_source(path, file.text, settings))
    result = fix_source(path, file.text, settings, unsafe_fixes)
    report = FileReport(path, result.text, result.remaining, len(result.fixed))
    if result.text != file.text:
        if diff:
            report.diff = "".join(
                difflib.unified_diff(file.text.splitlines(True), result.text.splitlines(True), f"a/{path}", f"b/{path}")
            )
        else:
            write_text(path, file, result.text)
    return report


def _file_error(path: str, message: str) -> Diagnostic:
    rule = all_rules()[SYNTAX_ERROR]
    return Diagnostic(SYNTAX_ERROR, rule.name, message[:1].upper() + message[1:], path, 0, 0, 1, 1, 1, 1, None, rule.url, None)


def _run(files: Sequence[str], settings: Settings, fix: bool, unsafe_fixes: bool, diff: bool) -> List[FileReport]:
    jobs = (os.cpu_count() or 1)
    if len(files) < _PARALLEL_FROM or jobs < 2:
        return [_check_file(f, settings, fix, unsafe_fixes, diff) for f in files]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(_check_file, files, [settings] * len(files), [fix] * len(files), [unsafe_fixes] * len(files), [diff] * len(files), chunksize=4))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="steplint")
def main() -> None:
    """steplint: find training loops whose schedules, counters and checkpoints count skipped updates."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--fix", is_flag=True, help="Apply safe fixes.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply unsafe fixes (with --fix or --diff), and show them as available.")
@click.option("--diff", is_flag=True, help="Print the fixes as a diff instead of writing them; exit 1 if there are any.")
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (comma-separated; default ALL).")
@click.option("--extend-select", multiple=True, help="Codes or prefixes to enable on top of --select.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option("--output-format", type=click.Choice(sorted(FORMATS)), default="full", show_default=True)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when diagnostics remain.")
@click.option("--show-fixes", is_flag=True, help="List the fixes that were applied.")
@click.option("-q", "--quiet", is_flag=True, help="Print diagnostics only, no summary.")
def check(paths, fix, unsafe_fixes, diff, select, extend_select, ignore, output_format, exit_zero, show_fixes, quiet) -> None:
    """Check PATHS (files or folders; default: the current folder)."""
    try:
        settings = Settings(
            select=_codes(select) or ("ALL",), ignore=_codes(ignore), extend_select=_codes(extend_select)
        )
        settings.enabled_rules()
    except ConfigError as error:
        raise click.UsageError(str(error))
    files, missing = discover(paths or (".",))
    for path in missing:
        click.echo(f"error: {path}: no such file or directory", err=True)
    if missing:
        sys.exit(2)
    reports = _run(files, settings, fix, unsafe_fixes, diff)
    diagnostics = [d for r in reports for d in r.diagnostics]
    sources = {r.path: r.text for r in reports}
    if diff:
        click.echo("".join(r.diff for r in reports), nl=False)
    else:
        click.echo(FORMATS[output_format](diagnostics, sources), nl=False)
    if output_format in ("full", "concise") and not quiet:
        _summary(reports, diagnostics, fix, unsafe_fixes, diff, show_fixes)
    if diff:
        sys.exit(1 if any(r.diff for r in reports) and not exit_zero else 0)
    sys.exit(1 if diagnostics and not exit_zero else 0)


def _summary(reports, diagnostics, fix, unsafe_fixes, diff, show_fixes) -> None:
    out = (lambda text: click.echo(text, err=True)) if diff else click.echo
    fixed = sum(r.fixed for r in reports)
    if show_fixes and fixed:
        for r in reports:
            if r.fixed:
                out(f"Fixed {r.fixed} in {r.path}")
    if fix or diff:
        verb = "Would fix" if diff else "Fixed"
        if fixed or diagnostics:
            out(f"{verb} {fixed} {_plural(fixed, 'error')} ({len(diagnostics)} remaining).")
        else:
            out("All checks passed!")
    elif diagnostics:
        out(f"Found {len(diagnostics)} {_plural(len(diagnostics), 'error')}.")
        safe = sum(1 for d in diagnostics if d.fix and d.fix.applicability == "safe")
        unsafe = sum(1 for d in diagnostics if d.fix and d.fix.applicability != "safe")
        if safe or (unsafe and unsafe_fixes):
            out(f"[*] {safe + (unsafe if unsafe_fixes else 0)} fixable with `steplint check --fix{' --unsafe-fixes' if unsafe_fixes else ''}`.")
        if unsafe and not unsafe_fixes:
            out(f"({unsafe} hidden {_plural(unsafe, 'fix', 'fixes')} can be enabled with the `--unsafe-fixes` option.)")
    else:
        out("All checks passed!")


def _plural(count: int, word: str, plural: Optional[str] = None) -> str:
    return word if count == 1 else (plural or word + "s")


@main.command("rule")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every rule.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rule_command(code, show_all, output_format) -> None:
    """Print a rule's documentation, or list the catalogue with --all."""
    rules = all_rules()
    if show_all or not code:
        if output_format == "json":
            click.echo(json.dumps([_rule_dict(r) for r in rules.values()], indent=2))
        else:
            for r in rules.values():
                click.echo(f"{r.code:<7}{r.name:<38}{_fix_word(r.fix):<18}{r.summary}")
        return
    found = rules.get(code.upper())
    if found is None:
        raise click.UsageError(f"unknown rule code {code!r}; `steplint rule --all` lists them")
    if output_format == "json":
        click.echo(json.dumps(_rule_dict(found), indent=2))
    else:
        click.echo(f"# {found.name} ({found.code})\n\n{_fix_word(found.fix).capitalize()}.\n\n{found.doc}")


def _fix_word(fix: Optional[str]) -> str:
    return {"safe": "safe fix", "unsafe": "unsafe fix", "sometimes": "fix sometimes"}.get(fix or "", "no fix")


def _rule_dict(r) -> dict:
    return {"code": r.code, "name": r.name, "summary": r.summary, "fix": r.fix, "explanation": r.doc, "url": r.url}
