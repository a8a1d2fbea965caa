"""The `steplint` command. Argument handling and output only; the analysis is in the engine."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

import click

from steplint import __version__, interrupt
from steplint.config import ConfigError, Overrides, Resolver, Settings, parse_per_file_ignores
from steplint.cli_help import SectionedCommand
from steplint import cache
from steplint.diagnostic import Diagnostic
from steplint.engine import (
    INTERNAL_ERROR, MAX_ANALYSED_CHARS, SYNTAX_ERROR, UNUSED_NOQA, acts_through_the_project, collect_garbage_rarely, fix_source, import_analysis,
    internal_error, lint_source, needs_analysis, unanalysed_reason,
)
from steplint.files import FileError, NotRegularFile, decode_source, discover, is_notebook, read_text, write_text
from steplint.pool import Pool
from steplint.fixes import apply_edits, normalized, reparses
from steplint.report import FORMATS, MACHINE_FORMATS, MARKS_FIXES, SHOWS_EVIDENCE, renderer
from steplint.rule import all_rules, fix_word, rule_text
from steplint.source import Source
from steplint.suppress import add_noqa_edits, comments

# Worker processes cost ~0.1 s to start: worth it only for enough text that needs analysis (files
# that pass the prefilter and miss the cache), or when the workers hold the files' parses already.
_PARALLEL_FROM_BYTES = 400_000
_PROGRESS_FROM = 300  # files; fewer finish before a progress line would help


@dataclass(frozen=True)
class Mode:
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False
    add_noqa: bool = False
    noqa_reason: str = ""  # `--add-noqa=REASON`: written after the codes
    use_cache: bool = False  # read and write the cache (checks only: fixing always analyses)
    show_evidence: bool = False  # print each diagnostic's premises (full), add them to the JSON (json)


@dataclass
class FileReport:
    path: str
    text: str = ""  # the text the diagnostics refer to (after fixes, when fixing)
    diagnostics: List[Diagnostic] = field(default_factory=list)
    fixed: List[Diagnostic] = field(default_factory=list)
    diff: str = ""
    noqa_added: int = 0
    warning: str = ""  # why the file was skipped or not analysed: a message, not a diagnostic
    internal_traceback: str = ""  # of an internal error, printed with --verbose
    write_error: str = ""  # why the fixed text could not be written (the file is unchanged)


def _codes(values: Tuple[str, ...]) -> Tuple[str, ...]:
    return tuple(code.strip() for value in values for code in value.split(",") if code.strip())


def check_text(path: str, text: str, settings: Settings, mode: Mode, project=None) -> FileReport:
    """Lint, fix or add noqa to one file's text (`project`: its context in the project index);
    nothing is written here."""
    if mode.add_noqa:
        diagnostics = lint_source(path, text, settings, project)
        rows = {}
        for d in diagnostics:
            if d.code not in (SYNTAX_ERROR, UNUSED_NOQA) and d.noqa_row is not None:
                rows.setdefault(d.noqa_row, []).append(d.code)
        source = Source(path, text)
        edits = normalized(add_noqa_edits(source, comments(source), rows, mode.noqa_reason)) or []
        new = apply_edits(text, edits)
        if not reparses(new):
            return FileReport(path, text, diagnostics)
        return FileReport(path, new, [], noqa_added=len(edits))
    if not (mode.fix or mode.diff):
        return FileReport(path, text, lint_source(path, text, settings, project))
    result = fix_source(path, text, settings, mode.unsafe_fixes, project)
    report = FileReport(path, result.text, result.remaining, result.fixed)
    if mode.diff and result.text != text:
        import difflib  # (start-up: imported where a diff is asked for)

        report.diff = "".join(difflib.unified_diff(text.splitlines(True), result.text.splitlines(True), f"a/{path}", f"b/{path}"))
    return report


def checked_text(path: str, text: str, settings: Settings, mode: Mode, project=None) -> FileReport:
    """check_text, with an internal error turned into one SL000 diagnostic and the text unchanged."""
    try:
        return check_text(path, text, settings, mode, project)
    except Exception as error:  # a bug in steplint costs this file's results, never the run's
        if interrupt.received():  # not a bug: Ctrl-C, met in another form while it unwound
            raise interrupt.Interrupted() from error
        return _internal_error_report(path, text, error, _short_traceback(error))


def _internal_error_report(path: str, text: str, error: BaseException, traceback_text: str) -> FileReport:
    """SL000 for the file, its text unchanged."""
    return FileReport(path, text, [internal_error(path, error)], internal_traceback=traceback_text)


def _short_traceback(error: BaseException) -> str:
    """The innermost frames, without the exceptions it interrupted: LibCST's messages can print
    whole syntax trees."""
    import traceback  # (start-up: imported where an internal error needs it)

    lines = traceback.format_exception(type(error), error, error.__traceback__, limit=-25, chain=False)
    text = "".join(lines)
    return text if len(text) < 20_000 else text[:10_000] + "\n[...]\n" + text[-10_000:]


def _check_file(path: str, settings: Settings, mode: Mode, project=None) -> FileReport:
    try:
        file = read_text(path)
    except NotRegularFile as error:
        return FileReport(path, warning=f"skipped: {error}")
    except FileError as error:
        return FileReport(path, "", [_file_error(path, str(error))] if SYNTAX_ERROR in settings.enabled_rules(path) else [])
    if is_notebook(path):
        report, written = check_notebook(path, file.text, settings, mode)
    else:
        if mode.use_cache and not (mode.fix or mode.diff or mode.add_noqa):
            report = _cached_check(path, file.text, settings, mode, project)
        else:
            report = checked_text(path, file.text, settings, mode, project)
        report.warning = unanalysed_reason(path) or report.warning
        written = report.text if report.text != file.text else None
    if written is None or mode.diff:
        return report
    try:
        write_text(path, file, written)
    except FileError as error:
        # Nothing was written: report the file as it is on disk, with the reason on stderr.
        unfixed = check_notebook(path, file.text, settings, Mode())[0] if is_notebook(path) else checked_text(path, file.text, settings, Mode(), project)
        unfixed.write_error = str(error)
        return unfixed
    return report


def _cached_check(path: str, text: str, settings: Settings, mode: Mode, project=None) -> FileReport:
    """checked_text, answered from the cache when the file, settings and version are unchanged.
    Internal errors are never cached: the next run tries again."""
    directory = cache.cache_dir(settings)
    key = _cache_key(path, text, settings, project)
    found = cache.load(directory, key)
    if found is not None:
        return FileReport(path, text, found)
    report = checked_text(path, text, settings, mode, project)
    report.warning = unanalysed_reason(path) or ""
    if not (report.internal_traceback or report.warning):  # (a file left unanalysed is checked, and named, again)
        cache.store(directory, key, report.diagnostics)
    return report


def _cache_key(path: str, text: str, settings: Settings, project, analysed: Optional[bool] = None) -> str:
    """A file the prefilter skips gets Python's syntax check only, whatever the rest of the project
    says: its entry does not depend on the project. (A warm run then answers every unchanged file
    with a lookup, which over a tree costs a fraction of the syntax checks and needs no pool.)
    `analysed`: whether the file passes the prefilter, when the caller knows already."""
    analysed = needs_analysis(text) if analysed is None else analysed
    return cache.cache_key(path, text, settings, _dependencies(project) if analysed or acts_through_the_project(project) else ())


def _dependencies(project) -> tuple:
    """What the file's lint reads from the rest of the project, for its cache key."""
    return (project.fingerprint(),) if project is not None else ()


def check_notebook(path: str, text: str, settings: Settings, mode: Mode) -> Tuple[FileReport, Optional[str]]:
    """Check a notebook's code cells as one module: the report (on that module's text, diagnostics
    located in their cells) and the notebook's new JSON, with only the changed cells' source, when
    anything changed."""
    from steplint import notebook  # (on the first notebook only: a run over .py files starts faster)

    try:
        book = notebook.parse(text)
    except notebook.NotebookError as error:
        return FileReport(path, "", [_file_error(path, str(error))] if SYNTAX_ERROR in settings.enabled_rules(path) else []), None
    report = checked_text(path, book.source, settings, mode)
    written = notebook.rewrite(book, report.text) if report.text != book.source else None
    if report.text != book.source and written is None:  # the fixes touched a cell marker or a masked escape
        report = checked_text(path, book.source, settings, Mode())
        report.diagnostics.append(_file_error(path, "fixes not applied: they cannot be mapped back to the notebook's cells"))
    elif written is not None and mode.diff:
        report.diff = notebook.cell_diff(path, book, report.text)
    report.diagnostics = notebook.located(report.text, report.diagnostics)
    return report, written


def _project_index(files, excluded, resolver: Resolver, mode: Mode, texts: Dict[str, str], pool: Optional[Pool] = None, analysed=None, store=None):
    """The run's project index, when some file can need it (none passes the prefilter: no index).
    `texts`: of the files that read; `analysed`: those that pass the prefilter, if known; `store`:
    the text facts the run read them with. Its summaries share the run's cache folder, `--no-cache` and `--jobs`."""
    analysed = [p for p in files if p in texts and needs_analysis(texts[p])] if analysed is None else analysed
    if not analysed:
        return None
    from steplint.project.build import index_for_run  # (LibCST only where summaries are computed)

    return index_for_run(files, excluded, texts, cache=mode.use_cache, cache_dir=cache.cache_dir(resolver.settings_for(files[0])), analysed=analysed,
                         pool=pool, text_store=store)


def _text_facts_store(files: Sequence[str], resolver: Resolver, mode: Mode):
    """The cache of what the run reads off each text by pattern (the prefilter among it), for a run over
    enough files to gain by it (a few files are read faster than the cache is); None otherwise."""
    if not mode.use_cache or len(files) < _TEXT_FACTS_FROM:
        return None
    from steplint.project.build import text_facts_store

    return text_facts_store(cache.cache_dir(resolver.settings_for(files[0])))


def _passing_the_prefilter(texts: Dict[str, str], store) -> Set[str]:
    """The files whose text passes the lint's prefilter, through the text facts `store` when there is one."""
    if store is None:
        return {p for p, text in texts.items() if needs_analysis(text)}
    from steplint.project.build import text_facts

    return {p for p, found in text_facts(texts, store).items() if found.analysed}


_TEXT_FACTS_FROM = 64  # files in a run from which the prefilter's answers are read from the cache


def _first_large_run(files: Sequence[str], resolver: Resolver, mode: Mode) -> bool:
    """No cache to answer from (a first run, or --no-cache) and enough text for the pool: its workers
    then start at once, and import the analysis while this process reads and indexes the files."""
    if not files or (mode.use_cache and os.path.isdir(cache.cache_dir(resolver.settings_for(files[0])))):
        return False
    size = 0
    for path in files:
        try:
            size += os.path.getsize(path)
        except OSError:
            pass
        if size >= _PARALLEL_FROM_BYTES:
            return True
    return False


def _readable_texts(files: Sequence[str]) -> Dict[str, str]:
    """The text of each file that reads, read once for the run (the others are reported by their check)."""
    texts = {}
    for path in files:
        try:
            texts[path] = read_text(path).text
        except FileError:
            pass
    return texts


def _file_error(path: str, message: str) -> Diagnostic:
    rule = all_rules()[SYNTAX_ERROR]
    return Diagnostic(SYNTAX_ERROR, rule.name, message[:1].upper() + message[1:], path, 0, 0, 1, 1, 1, 1, None, rule.url, None)


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _run(jobs: Sequence[Tuple[str, Settings, object]], mode: Mode, pool: Pool, texts: Dict[str, str], analysed: Set[str]) -> Iterator[FileReport]:
    """Reports in the order of `jobs` ((path, settings, project context)), streamed; `texts`: the
    files' texts as read, `analysed`: those that pass the prefilter. What the cache answers is
    answered here; the rest goes to the pool's workers (a file whose parse a worker keeps from the
    project index to that worker) when there is enough of it, biggest files first."""
    answered = {}
    if mode.use_cache and not (mode.fix or mode.diff or mode.add_noqa):
        for index, (path, settings, project) in enumerate(jobs):
            report = _answered_without_analysis(path, settings, project, texts.get(path), path in analysed)
            if report is not None:
                answered[index] = report
    pending = [i for i in range(len(jobs)) if i not in answered]
    sizes = {i: len(texts.get(jobs[i][0], "")) for i in pending}
    if pool.size < 2 or not (pool.owners or sum(sizes.values()) >= _PARALLEL_FROM_BYTES):
        for index, (path, settings, project) in enumerate(jobs):
            yield answered.pop(index) if index in answered else _check_file(path, settings, mode, project)
        return
    pending.sort(key=lambda i: -sizes[i])
    owners = [pool.owners.get(jobs[i][0]) for i in pending]
    following = 0
    calls = [(jobs[i][0], jobs[i][1], mode, jobs[i][2]) for i in pending]
    # A file whose analysis ends its worker twice: SL000, and the rest of the run goes on.
    lost = lambda call, why: _internal_error_report(call[0], texts.get(call[0], ""), RuntimeError(why), why)  # noqa: E731
    for index, report in zip(pending, pool.map(_check_file, calls, owners, lost)):
        answered[index] = report
        while following in answered:
            yield answered.pop(following)
            following += 1
    while following in answered:  # the cache answered the rest (or everything: nothing went to the pool)
        yield answered.pop(following)
        following += 1


def _answered_without_analysis(path: str, settings: Settings, project, text: Optional[str], analysed: bool) -> Optional[FileReport]:
    """The report of a file the cache holds (`text`: as the run read it, None if it did not read);
    None: it needs checking."""
    if text is None or len(text) > MAX_ANALYSED_CHARS:
        return None  # _check_file tells why it was not read or not analysed
    found = cache.load(cache.cache_dir(settings), _cache_key(path, text, settings, project, analysed))
    return FileReport(path, text, found) if found is not None else None


def _with_progress(reports: Iterator[FileReport], total: int) -> List[FileReport]:
    show = total >= _PROGRESS_FROM and sys.stderr.isatty()
    done = []
    for report in reports:
        done.append(report)
        if show and (len(done) % 25 == 0 or len(done) == total):
            click.echo(f"\rchecked {len(done)}/{total} files", err=True, nl=False)
    if show:
        click.echo("\r" + " " * 40 + "\r", err=True, nl=False)
    return done


def run() -> None:
    """The `steplint` command: `main`, then an exit without the interpreter's teardown once the
    output is flushed. A run over a tree leaves ~10^6 small objects (parse trees kept for the lint,
    summaries); freeing them one by one at shutdown took seconds and changes nothing."""
    interrupt.install()
    code = 0
    try:
        try:
            main()
        finally:
            interrupt.hold()
    except SystemExit as exit_:
        code = exit_.code or 0
        if not isinstance(code, int):  # sys.exit("message"), as Python would
            print(code, file=sys.stderr)
            code = 1
    except interrupt.Interrupted:  # in any phase; the command's own cleanup has run
        code = interrupt.EXIT_STATUS
    except Exception:
        if not interrupt.received():
            raise
        # Ctrl-C met in another form while it unwound (LibCST's position bookkeeping raises KeyError
        # when interrupted inside it), in a phase that no per-file handler covers (the project index)
        code = interrupt.EXIT_STATUS
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`steplint check | head`): nothing more to say
            pass
    if interrupt.received():  # whenever Ctrl-C landed before the exit
        interrupt.exit_interrupted()
    os._exit(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="steplint")
def main() -> None:
    """steplint: find training loops whose schedules, counters and checkpoints count skipped updates."""


# The headings of `steplint check --help`, as ruff's.
CHECK_SECTIONS = (
    ("Options", ("fix", "unsafe_fixes", "show_fixes", "show_evidence", "diff", "watch", "fix_only", "ignore_noqa", "output_format", "output_file", "statistics",
                 "add_noqa", "show_files", "show_settings")),
    ("Rule selection", ("select", "ignore", "extend_select", "per_file_ignores", "fixable", "unfixable", "extend_fixable")),
    ("File selection", ("exclude", "extend_exclude", "force_exclude")),
    ("Miscellaneous", ("no_cache", "jobs", "stdin_filename", "exit_zero", "exit_non_zero_on_fix")),
    ("Log levels", ("verbose", "quiet")),
    ("Global options", ("config_file", "isolated", "color", "help")),
)


class _CheckCommand(SectionedCommand):
    """`--add-noqa[=REASON]` as ruff takes it: the reason only after `=`, so that `--add-noqa train.py`
    still names a path (click's optional values would take it as the reason)."""

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        spelled = []
        for index, arg in enumerate(args):
            if arg == "--":
                spelled.extend(args[index:])
                break
            spelled.extend(["--add-noqa", "--noqa-reason", arg.partition("=")[2]] if arg.startswith("--add-noqa=") else [arg])
        return super().parse_args(ctx, spelled)


@main.command(cls=_CheckCommand, sections=CHECK_SECTIONS)
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--fix", is_flag=True, help="Apply safe fixes.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply unsafe fixes (with --fix or --diff), and count them as available.")
@click.option("--diff", is_flag=True, help="Print the fixes as a diff instead of writing them; exit 1 if there are any.")
@click.option("--show-fixes", is_flag=True, help="List the fixes that were applied.")
@click.option("--show-evidence", is_flag=True, help="List the premises of each diagnostic and where each was established (full and json output).")
@click.option("--add-noqa", is_flag=True, help="(`--add-noqa[=REASON]`) Add `# noqa: CODE` comments for the current diagnostics; `--add-noqa=REASON` writes the reason after the codes.")
@click.option("--noqa-reason", default="", hidden=True)  # (`--add-noqa=REASON`)
@click.option("--select", multiple=True, metavar="CODES", help="Rule codes or prefixes to enable, replacing the configured ones (comma-separated).")
@click.option("--extend-select", multiple=True, metavar="CODES", help="Codes or prefixes to enable on top of the selection.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Rule codes or prefixes to disable.")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False), help="Use this configuration file for every path.")
@click.option("--output-format", type=click.Choice(list(FORMATS)), default="full", metavar="FORMAT",
              help=f"How to print the diagnostics: {', '.join(FORMATS)}.  [default: full]")
@click.option("-o", "--output-file", type=click.Path(dir_okay=False, writable=True), help="Write the report to this file.")
@click.option("--statistics", is_flag=True, help="Count the diagnostics per rule instead of listing them.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when diagnostics remain.")
@click.option("--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when fixes were applied, even if nothing remains.")
@click.option("--force-exclude", is_flag=True, help="Apply exclude settings to paths given on the command line too.")
@click.option("--stdin-filename", metavar="PATH", help="Read the source from stdin (path `-`) and report it under this name.")
@click.option("-q", "--quiet", is_flag=True, help="Print diagnostics only, no summary.")
@click.option("-v", "--verbose", is_flag=True, help="Print the traceback of internal errors.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
              help="Colour the output; auto: on a terminal, unless NO_COLOR is set (FORCE_COLOR forces it).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the cache (.steplint_cache).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), metavar="N", help="Processes to use (default: the available cores; 1: no pool).")
@click.option("--fix-only", is_flag=True, help="Apply fixes and report nothing else; exit 0 unless --exit-non-zero-on-fix (implies --fix).")
@click.option("--fixable", multiple=True, metavar="CODES", help="Rule codes or prefixes whose fixes may be applied, replacing the configured list.")
@click.option("--unfixable", multiple=True, metavar="CODES", help="Rule codes or prefixes whose fixes are never offered.")
@click.option("--extend-fixable", multiple=True, metavar="CODES", help="Codes or prefixes to add to the fixable ones.")
@click.option("--exclude", multiple=True, metavar="GLOBS", help="Globs to exclude, replacing the configured list (comma-separated).")
@click.option("--extend-exclude", multiple=True, metavar="GLOBS", help="Globs to exclude on top of the configured ones.")
@click.option("--per-file-ignores", multiple=True, metavar="GLOB:CODES", help="Ignore CODES in files matching GLOB, replacing the configured table.")
@click.option("--isolated", is_flag=True, help="Ignore every configuration file: the defaults and the command line only.")
@click.option("--ignore-noqa", is_flag=True, help="Report what `# noqa` comments suppress.")
@click.option("--show-settings", is_flag=True, help="Print the settings resolved for the first file, and exit.")
@click.option("--show-files", is_flag=True, help="Print the files that would be checked, and exit.")
@click.option("-w", "--watch", is_flag=True, help="Check again whenever a checked file or its configuration changes.")
def check(paths, fix, unsafe_fixes, diff, show_fixes, show_evidence, add_noqa, noqa_reason, select, extend_select, ignore, config_file, output_format,
          output_file, statistics, exit_zero, exit_non_zero_on_fix, force_exclude, stdin_filename, quiet, verbose, color,
          no_cache, jobs, fix_only, fixable, unfixable, extend_fixable, exclude, extend_exclude, per_file_ignores, isolated, ignore_noqa,
          show_settings, show_files, watch) -> None:
    """Check PATHS (files or folders; default: the current folder; `-` for stdin)."""
    if watch:
        _watch(click.get_current_context(), paths)
        return
    if isolated and config_file:
        raise click.UsageError("--isolated and --config exclude each other")
    mode = Mode(fix=fix or fix_only, unsafe_fixes=unsafe_fixes, diff=diff, add_noqa=add_noqa, noqa_reason=noqa_reason,
                use_cache=not no_cache, show_evidence=show_evidence)
    pool = Pool(jobs or available_cores())  # (its workers start only if the work pays for them)
    click.get_current_context().call_on_close(pool.close)  # however the command ends (Ctrl-C in any phase)
    try:
        overrides = Overrides(_codes(select), _codes(ignore), _codes(extend_select), _codes(fixable), _codes(unfixable), _codes(extend_fixable),
                              _codes(exclude), _codes(extend_exclude), parse_per_file_ignores(per_file_ignores), ignore_noqa)
        resolver = Resolver(overrides, config_file, isolated)
        if paths == ("-",) or (stdin_filename and not paths):
            _check_stdin(resolver, stdin_filename, mode, output_format, force_exclude, exit_zero, exit_non_zero_on_fix, verbose, color)
            return
        files, unreachable = _discovered(paths, resolver, force_exclude)
        excluded = lambda p: resolver.settings_for(p).excluded(p)  # noqa: E731
        if show_files or show_settings:
            pool.close()
            _show(files, unreachable, paths, resolver, show_settings)
        collect_garbage_rarely()
        if _first_large_run(files, resolver, mode):
            pool.start(import_analysis)
        texts = _readable_texts(files)
        store = _text_facts_store(files, resolver, mode)
        analysed = _passing_the_prefilter(texts, store)
        project = None
        if analysed:  # (else no index: nothing to import for it)
            from steplint.project.build import MAX_FILE_BYTES

            # (Texts that may be over the index's byte limit are left for it to read, and skip, itself.)
            small = {p: text for p, text in texts.items() if len(text) * 4 <= MAX_FILE_BYTES}
            project = _project_index(files, excluded, resolver, mode, small, pool, [p for p in files if p in analysed], store)
        elif store is not None:
            store.flush()
        work = [(path, resolver.settings_for(path), project.context_for(path) if project else None) for path in files]
    except ConfigError as error:
        pool.close()
        click.echo(f"steplint: error: {error}", err=True)
        sys.exit(2)
    for note in project.notes if project else ():
        click.echo(f"steplint: note: {note}", err=True)
    for problem in unreachable:  # the rest is checked, and the exit status is theirs
        click.echo(f"steplint: warning: {problem}", err=True)
    if not files:
        click.echo("steplint: warning: No Python files found under the given path(s)", err=True)
    try:  # on Ctrl-C: files not started stay as they are; started ones finish their atomic write
        reports = _with_progress(_run(work, mode, pool, texts, analysed), len(work))
    finally:
        pool.close()
    _file_messages(reports, verbose)
    diagnostics = [d for r in reports for d in r.diagnostics]
    sources = {r.path: r.text for r in reports}
    if fix_only:
        _fix_only_summary(reports, diff, quiet)
        fixed_any = any(r.fixed for r in reports)
        sys.exit(_exit_status(diagnostics, diff and any(r.diff for r in reports), exit_zero, exit_non_zero_on_fix and fixed_any and not diff))
    if add_noqa:
        added = sum(r.noqa_added for r in reports)
        click.echo(f"Added {added} noqa {'directive' if added == 1 else 'directives'}.", err=quiet)
        sys.exit(2 if _internal_errors(diagnostics) else 0)
    if diff:
        click.echo("".join(r.diff for r in reports), nl=False)
    else:
        rendered = _statistics(diagnostics, output_format) if statistics else _render(output_format, diagnostics, sources, mode)
        if output_file:
            with open(output_file, "w", encoding="utf-8") as handle:
                handle.write(rendered if color == "always" else click.unstyle(rendered))
        else:
            click.echo(rendered, nl=False, color=use_color(color, sys.stdout))
    if output_format not in MACHINE_FORMATS and not quiet:
        _summary(reports, diagnostics, mode, show_fixes, to_stderr=diff or bool(output_file))
    found = any(r.diff for r in reports) if diff else bool(diagnostics)
    fixed_any = any(r.fixed for r in reports)
    sys.exit(_exit_status(diagnostics, found, exit_zero, exit_non_zero_on_fix and fixed_any and not diff))


def _discovered(paths, resolver: Resolver, force_exclude: bool) -> Tuple[List[str], List[str]]:
    """discover() with the settings of the first path: `force-exclude` and `respect-gitignore` from
    the configuration as well as the command line."""
    first = resolver.settings_for((paths or (".",))[0])
    return discover(paths or (".",), lambda p: resolver.settings_for(p).excluded(p), force_exclude or first.force_exclude,
                    lambda p: resolver.settings_for(p).included(p), first.respect_gitignore)


def _show(files: List[str], unreachable: List[str], paths, resolver: Resolver, settings: bool) -> None:
    """--show-files: the files a check would read, absolute and sorted, as ruff prints them;
    --show-settings: the settings resolved for the first of them (or the first path), and exit 0."""
    for problem in unreachable:  # as a check warns of them
        click.echo(f"steplint: warning: {problem}", err=True)
    if not settings:
        for path in sorted(os.path.abspath(f) for f in files):
            click.echo(path)
        sys.exit(0)
    target = files[0] if files else (paths or (".",))[0]
    resolved = resolver.settings_for(target)
    click.echo(f"Resolved settings for: {os.path.abspath(target)}")
    click.echo(f"Settings path: {resolved.origin}\n")
    for name, value in vars(resolved).items():
        click.echo(f"{name.replace('_', '-')} = {_setting_text(value)}")
    click.echo(f"enabled-rules = {_setting_text(tuple(resolved.enabled_rules(target)))}")
    click.echo(f"fixable-rules = {_setting_text(tuple(sorted(resolved.fixable_codes())))}")
    sys.exit(0)


def _setting_text(value) -> str:
    """A setting as TOML would write it."""
    if isinstance(value, tuple):
        return "[" + ", ".join(_setting_text(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "(none)"
    return json.dumps(value)


def _fix_only_summary(reports: List[FileReport], diff: bool, quiet: bool) -> None:
    """--fix-only reports no diagnostics: the diff (with --diff), and how many fixes, as ruff's does."""
    fixed = sum(len(r.fixed) for r in reports)
    if diff:
        click.echo("".join(r.diff for r in reports), nl=False)
    if not quiet:
        verb = "Would fix" if diff else "Fixed"
        click.echo(f"{verb} {fixed} {_plural(fixed, 'error')}." if fixed else "No errors fixed.", err=diff)


def _watch(ctx: click.Context, paths) -> None:
    """--watch: the same check, run again on each change (configuration files are read afresh)."""
    from steplint import config, watch

    def check_once() -> None:
        config.load_config.cache_clear()
        config.find_config.cache_clear()
        config.requires_python.cache_clear()
        try:
            ctx.invoke(check, **{**ctx.params, "watch": False})
        except SystemExit:
            pass
        sys.stdout.flush()

    def files_now() -> List[str]:
        try:
            resolver = Resolver(Overrides(), ctx.params["config_file"], ctx.params["isolated"])
            return _discovered(paths, resolver, ctx.params["force_exclude"])[0]
        except ConfigError:  # a configuration being edited: watch the paths named until it reads again
            return list(paths or (".",))

    try:
        watch.watch(check_once, files_now, lambda message: click.echo(f"steplint: {message}", err=True))
    except KeyboardInterrupt:
        sys.exit(0)


def _render(output_format: str, diagnostics: List[Diagnostic], sources: Dict[str, str], mode: Mode) -> str:
    """The report in the format; `[*]` marks what `--fix` would apply under this run's --unsafe-fixes."""
    if output_format in MARKS_FIXES:
        return renderer(output_format)(diagnostics, sources, unsafe_fixes=mode.unsafe_fixes)
    if output_format in SHOWS_EVIDENCE:
        return renderer(output_format)(diagnostics, sources, show_evidence=mode.show_evidence)
    return renderer(output_format)(diagnostics, sources)


def _exit_status(diagnostics: List[Diagnostic], found: bool, exit_zero: bool, fixed_and_asked: bool) -> int:
    """2: an internal error left a file unchecked; 1: diagnostics (or the diff) remain, or fixes were
    applied under --exit-non-zero-on-fix; 0 otherwise. --exit-zero makes 2 and 1 into 0, but not
    the --exit-non-zero-on-fix 1, which the user asked for."""
    if exit_zero:
        return 1 if fixed_and_asked else 0
    if _internal_errors(diagnostics):
        return 2
    return 1 if found or fixed_and_asked else 0


def _internal_errors(diagnostics: List[Diagnostic]) -> bool:
    return any(d.code == INTERNAL_ERROR for d in diagnostics)


def _file_messages(reports: List[FileReport], verbose: bool) -> None:
    """Per-file problems that are not diagnostics of the code, on stderr."""
    for r in reports:
        if r.warning:
            click.echo(f"steplint: warning: {r.path}: {r.warning}", err=True)
        if r.write_error:
            click.echo(f"steplint: error: {r.path}: {r.write_error}", err=True)
        if r.internal_traceback:
            hint = "\n" + r.internal_traceback.rstrip() if verbose else " (`steplint check -v` prints the traceback)"
            click.echo(f"steplint: error: {r.path}: internal error, reported as SL000{hint}", err=True)


def use_color(choice: str, stream) -> bool:
    """`--color always|never` decides; with `auto`, FORCE_COLOR or CLICOLOR_FORCE (set, not 0) turn
    colour on, then NO_COLOR (set, not empty) turns it off, else colour only on a terminal."""
    if choice != "auto":
        return choice == "always"
    if any(os.environ.get(name, "") not in ("", "0") for name in ("FORCE_COLOR", "CLICOLOR_FORCE")):
        return True
    if os.environ.get("NO_COLOR", ""):
        return False
    return stream.isatty()


def _check_stdin(resolver: Resolver, name: Optional[str], mode: Mode, output_format, force_exclude, exit_zero, exit_non_zero_on_fix, verbose, color) -> None:
    """Editors pipe a buffer in: diagnostics to stdout, or with --fix the fixed source to stdout and
    the remaining diagnostics to stderr."""
    path = name or "-"
    raw = click.get_binary_stream("stdin").read()
    settings = resolver.settings_for(path)
    if force_exclude and name and settings.excluded(path):
        if mode.fix:
            _write_stdout(raw)
        sys.exit(0)
    try:  # as a file is read: its BOM, declared encoding and line breaks kept
        source = decode_source(raw)
    except FileError as error:
        if mode.fix or mode.add_noqa:
            _write_stdout(raw)
        undecodable = [_file_error(path, str(error))] if SYNTAX_ERROR in settings.enabled_rules(path) else []
        click.echo(renderer(output_format)(undecodable, {path: ""}), nl=False, err=mode.fix or mode.add_noqa)
        sys.exit(_exit_status(undecodable, bool(undecodable), exit_zero, False))
    text = source.text
    if is_notebook(path):
        report, written = check_notebook(path, text, settings, mode)
    else:
        project = _project_index([path], lambda p: resolver.settings_for(p).excluded(p), resolver, mode, {path: text}) if name else None
        report, written = checked_text(path, text, settings, mode, project.context_for(path) if project else None), None
        report.warning = unanalysed_reason(path) or report.warning
    _file_messages([report], verbose)
    rendered = _render(output_format, report.diagnostics, {path: report.text}, mode)
    if mode.fix or mode.add_noqa:
        _write_stdout((written or (text if is_notebook(path) else report.text)).encode(source.encoding))
        click.echo(rendered, nl=False, err=True, color=use_color(color, sys.stderr))
    elif mode.diff:
        click.echo(report.diff, nl=False)
    else:
        click.echo(rendered, nl=False, color=use_color(color, sys.stdout))
    found = bool(report.diff) if mode.diff else bool(report.diagnostics)
    sys.exit(_exit_status(report.diagnostics, found, exit_zero, bool(exit_non_zero_on_fix and report.fixed and not mode.diff)))


def _write_stdout(data: bytes) -> None:
    """Source text to stdout, as bytes: no newline translation, in the source's own encoding."""
    sys.stdout.flush()
    stream = click.get_binary_stream("stdout")
    stream.write(data)
    stream.flush()


def _statistics(diagnostics: List[Diagnostic], output_format: str) -> str:
    counts = Counter(d.code for d in diagnostics)
    names = {d.code: d.name for d in diagnostics}
    fixable = {d.code for d in diagnostics if d.fix is not None}
    if output_format in ("json", "json-lines", "sarif"):
        rows = [{"code": c, "name": names[c], "count": n, "fixable": c in fixable} for c, n in sorted(counts.items())]
        return json.dumps(rows, indent=2) + "\n"
    width = max((len(str(n)) for n in counts.values()), default=1)
    return "".join(f"{n:>{width}}\t{c}\t{'[*] ' if c in fixable else ''}{names[c]}\n" for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _summary(reports, diagnostics, mode: Mode, show_fixes: bool, to_stderr: bool) -> None:
    def out(text: str) -> None:
        click.echo(text, err=to_stderr)

    fixed = sum(len(r.fixed) for r in reports)
    unsafe = sum(1 for d in diagnostics if d.fix and d.fix.applicability != "safe")
    if show_fixes and fixed:
        out(f"Fixed {fixed} {_plural(fixed, 'error')}:")
        for r in reports:
            if r.fixed:
                out(f"- {r.path}:")
                for (code, name), count in sorted(Counter((d.code, d.name) for d in r.fixed).items()):
                    out(f"    {count} × {code} ({name})")
    if mode.fix or mode.diff:
        verb = "Would fix" if mode.diff else "Fixed"
        if fixed or diagnostics:
            out(f"{verb} {fixed} {_plural(fixed, 'error')} ({len(diagnostics)} remaining).")
        else:
            out("All checks passed!")
    elif diagnostics:
        out(f"Found {len(diagnostics)} {_plural(len(diagnostics), 'error')}.")
        safe = sum(1 for d in diagnostics if d.fix and d.fix.applicability == "safe")
        if safe or (unsafe and mode.unsafe_fixes):
            out(f"[*] {safe + (unsafe if mode.unsafe_fixes else 0)} fixable with `steplint check --fix{' --unsafe-fixes' if mode.unsafe_fixes else ''}`.")
    else:
        out("All checks passed!")
    if unsafe and not mode.unsafe_fixes:
        out(f"{unsafe} hidden {_plural(unsafe, 'fix', 'fixes')} can be enabled with the `--unsafe-fixes` option.")


def _plural(count: int, word: str, plural: Optional[str] = None) -> str:
    return word if count == 1 else (plural or word + "s")


@main.command("rule")
@click.argument("code", metavar="CODE_OR_NAME", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every rule.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rule_command(code, show_all, output_format) -> None:
    """Print a rule's documentation (by code, SL101, or name, scheduler-step-on-skipped-update), or list the catalogue with --all."""
    rules = all_rules()
    if show_all or not code:
        if output_format == "json":
            click.echo(json.dumps([_rule_dict(r) for r in rules.values()], indent=2))
        else:
            rows = [(r.code, r.name, fix_word(r.fix), r.summary) for r in rules.values()]
            widths = [max(len(row[i]) for row in rows) for i in range(3)]
            for row in rows:
                click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3])
        return
    found = _rule_named(rules, code)
    if found is None:
        raise click.UsageError(f"unknown rule {code!r}; `steplint rule --all` lists the codes and names")
    if output_format == "json":
        click.echo(json.dumps(_rule_dict(found), indent=2))
    else:
        click.echo(rule_text(found))


def _rule_named(rules, code_or_name: str):
    """A rule by its code (`SL101`) or its kebab-case name (`scheduler-step-on-skipped-update`), as ruff takes either."""
    by_name = {r.name: r for r in rules.values()}
    return rules.get(code_or_name.upper()) or by_name.get(code_or_name.lower())


def _rule_dict(r) -> dict:
    return {"code": r.code, "name": r.name, "summary": r.summary, "fix": r.fix, "explanation": r.doc, "url": r.url}


@main.command("trace")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--output-format", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False), help="Use this configuration file for every path.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
              help="Colour the text tree: on a terminal (auto), always or never.")
def trace_command(paths, output_format, config_file, color) -> None:
    """Print the step-unit map of each training loop in PATHS: the update, the window, the counters
    with their units and what they feed, the schedulers, checkpoints, resume, and the diagnostics."""
    from steplint.report.trace import FORMATS as TRACE_FORMATS
    from steplint.trace import trace_text, without_covered_step_functions

    try:
        resolver = Resolver(Overrides((), (), ()), config_file)
        excluded = lambda p: resolver.settings_for(p).excluded(p)  # noqa: E731
        files, missing = discover(paths or (".",), excluded, False, lambda p: resolver.settings_for(p).included(p))
    except ConfigError as error:
        click.echo(f"steplint: error: {error}", err=True)
        sys.exit(2)
    for path in missing:
        click.echo(f"steplint: error: {path}: no such file or directory", err=True)
    if missing:
        sys.exit(2)
    collect_garbage_rarely()
    texts = _readable_texts(files)
    project = _project_index(files, excluded, resolver, Mode(use_cache=True), texts)
    loops = []
    for path in files:
        if path in texts:
            loops.extend(trace_text(path, texts[path], resolver.settings_for(path), project.context_for(path) if project else None))
    loops = without_covered_step_functions(loops)
    click.echo(TRACE_FORMATS[output_format](loops), nl=False, color=use_color(color, sys.stdout) and output_format == "text")


@main.command("server")
def server_command() -> None:
    """Run the language server over stdio, for editors (alias: lsp)."""
    import signal

    from steplint.server import serve  # pygls loads only for the server

    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C is the server's own to handle
    serve()


main.add_command(click.Command("lsp", callback=server_command.callback, help=server_command.help, hidden=True))
