"""Fuzz the engine: no internal error, every fix parses, a second fix changes nothing, and every
byte outside a fix's edits is kept.

    python benchmarks/fuzz.py N [--seed S] [--jobs J] [--timeout SECONDS] [--save DIR]
    python benchmarks/fuzz.py --tree PATH [--tree PATH ...]   # every .py file under the trees, as is

Programs, program i drawn from its own seeded random generator (runs are repeatable):
- `hypothesmith`: programs generated from Python's grammar by hypothesmith;
- `mutant`: a fixture (fixtures/, examples/, tests/loops/) mutated 1-4 times: identifiers renamed
  (also to the names fixes insert), statements reordered, duplicated, deleted or joined with `;`,
  runs of statements wrapped in if/for/while/with/try/def/class, a hypothesmith program spliced in,
  then tab indentation, comments and line continuations in odd places, trailing whitespace, no
  final newline, CRLF or CR line breaks, a BOM;
- `notebook`: a mutant split into notebook cells between top-level statements, with IPython escapes.

Each program goes through the file reading of `steplint check`, then `lint_source` and
`fix_source(..., unsafe_fixes=True)`, one round at a time. Checked:
- `internal-error`: an exception, or an SL000 diagnostic;
- `fix-unparsable`: a fix of a program that parses gives one that does not (Python's parser or
  LibCST's), or a fix of one that compiles gives one that does not; a program that does not
  parse is changed;
- `outside-edits`: a round's result is not its input with the edits of the fixes it reports
  applied (so some byte outside the edits changed), or two applied fixes' edits overlap;
- `second-fix-changes`: fixes still apply after the engine's round limit (a second `--fix` would
  change the file again);
- `comment-lost`: a comment is missing from a round's result, other than one on whole lines that a
  fix deletes or replaces (an expression rewritten within its line must keep its comments);
- `line-endings` / `encoding`: a CRLF file gets bare LF lines, or the written file loses its
  BOM or encoding;
- `notebook-*`: the fixed notebook is not valid JSON, changed more than cells' `source`, lost an
  escape, or changes on a second fix.
A program slower than --timeout is counted as `timeout` (not a failure). Failing programs are saved
under --save (default fuzz-failures/) as `<kind>-<i>.py` (or .ipynb) with the reason in `.txt`.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import multiprocessing
import os
import random
import re
import signal
import sys
import tempfile
import time
import tokenize
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import libcst as cst

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from steplint import engine, notebook  # noqa: E402
from steplint.config import Settings  # noqa: E402
from steplint.engine import MAX_FIX_ROUNDS, fix_source  # noqa: E402
from steplint.files import FileError, is_notebook, read_text, write_text  # noqa: E402
from steplint.fixes import apply_edits, normalized, reparses  # noqa: E402

BLOCK = 25  # programs per block; a block is all hypothesmith programs or all fixture-based ones
SETTINGS = Settings()
INTERNAL_ERROR = "SL000"
SEEDS = [ROOT / "fixtures", ROOT / "examples", ROOT / "tests" / "loops"]
NAMES = ["committed", "committed_step", "update_committed", "_", "scaler2", "σ", "opt", "step", "self", "loss", "x" * 40]
WRAPPERS = ["if flag:", "for _ in range(2):", "while running:", "with context():", "def wrapped():", "class Wrapped:"]
ESCAPES = ["%matplotlib inline", "!pip install torch", "%load_ext autoreload", "files = !ls", "torch.save?", "%env CUDA=0"]


class Timeout(BaseException):
    """Raised by the alarm in a worker; a BaseException so that no `except Exception` swallows it."""


@dataclass
class Outcome:
    index: int
    kind: str  # "held", "timeout", "skipped" (not decodable), or the failure's kind
    detail: str = ""
    program: bytes = b""
    suffix: str = ".py"
    fixed: bool = False  # fixes applied (the checks on fixes had something to check)


@dataclass
class Report:
    tried: int = 0
    held: int = 0
    fixed: int = 0
    timeouts: int = 0
    skipped: int = 0
    failures: Counter = field(default_factory=Counter)
    examples: Dict[str, str] = field(default_factory=dict)
    interrupted: bool = False

    def summary(self) -> str:
        return (f"tried {self.tried}, held {self.held} ({self.fixed} of them fixed), failed {sum(self.failures.values())}, "
                f"timeouts {self.timeouts}, not decodable {self.skipped}")


# -- programs -----------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def hypothesmith_programs(seed: int) -> Tuple[str, ...]:
    """BLOCK programs from hypothesmith's grammar strategy, repeatable for a seed."""
    import hypothesmith
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as with_seed

    found: List[str] = []

    @with_seed(seed)
    @settings(max_examples=BLOCK, database=None, phases=[Phase.generate], deadline=None, suppress_health_check=list(HealthCheck))
    @given(hypothesmith.from_grammar())
    def collect(source):
        found.append(source)

    collect()
    return tuple((found * BLOCK)[:BLOCK]) if found else ("",) * BLOCK


@lru_cache(maxsize=None)
def seed_programs() -> Tuple[str, ...]:
    return tuple(p.read_text(encoding="utf-8") for folder in SEEDS for p in sorted(folder.rglob("*.py")))


def program(seed: int, index: int) -> Tuple[str, bytes]:
    """(kind, bytes) of program `index`."""
    block = index // BLOCK
    rng = random.Random(f"{seed}:{index}")
    if block % 4 == 1:
        generated = hypothesmith_programs(seed * 100_003 + block)[index % BLOCK]
        if index % 2:  # past the engine's text prefilter, so that the program is parsed and modelled
            generated += "\n# scaler.step(optimizer); torch.save(state)\n"
        return "hypothesmith", generated.encode("utf-8", "surrogatepass")
    text = mutate(rng.choice(seed_programs()), rng)
    if rng.random() < 0.15:
        return "notebook", as_notebook(text, rng).encode("utf-8")
    return "mutant", line_breaks_and_bom(text, rng)


def mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 4)):
        text = rng.choice([rename, reorder, duplicate, delete, join, wrap, wrap, splice])(text, rng)
    for change in (tabs, comments, continuations, trailing_whitespace):
        if rng.random() < 0.3:
            text = change(text, rng)
    if rng.random() < 0.1:
        text = text.rstrip("\n")
    return text


def line_breaks_and_bom(text: str, rng: random.Random) -> bytes:
    roll = rng.random()
    if roll < 0.2:
        text = text.replace("\n", "\r\n")
    elif roll < 0.23:
        text = text.replace("\n", "\r")
    data = text.encode("utf-8")
    return b"\xef\xbb\xbf" + data if rng.random() < 0.1 else data


def _tokens(text: str) -> Optional[List[tokenize.TokenInfo]]:
    try:
        return list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return None


def _offsets(text: str) -> List[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def rename(text: str, rng: random.Random) -> str:
    tokens = _tokens(text)
    if not tokens:
        return text
    import keyword

    names = sorted({t.string for t in tokens if t.type == tokenize.NAME and not keyword.iskeyword(t.string)})
    if not names:
        return text
    old, new = rng.choice(names), rng.choice(NAMES + [f"renamed_{rng.randint(0, 99)}"])
    starts = _offsets(text)
    out, cursor = [], 0
    for t in tokens:
        if t.type == tokenize.NAME and t.string == old:
            at = starts[t.start[0] - 1] + t.start[1]
            out += [text[cursor:at], new]
            cursor = at + len(old)
    return "".join(out) + text[cursor:]


class _Blocks(cst.CSTTransformer):
    """Rewrites the k-th statement sequence (module or indented block) with `change`."""

    def __init__(self, target: int, change) -> None:
        super().__init__()
        self.count, self.target, self.change = 0, target, change

    def _visit(self, original, updated):
        self.count += 1
        if self.count - 1 == self.target and updated.body:
            return updated.with_changes(body=self.change(list(updated.body)))
        return updated

    def leave_Module(self, original, updated):
        return self._visit(original, updated)

    def leave_IndentedBlock(self, original, updated):
        return self._visit(original, updated)


def _on_block(text: str, rng: random.Random, change) -> str:
    try:
        module = cst.parse_module(text)
    except Exception:
        return text
    counter = _Blocks(-1, change)
    module.visit(counter)
    if not counter.count:
        return text
    try:
        return module.visit(_Blocks(rng.randrange(counter.count), change)).code
    except Exception:  # a change LibCST will not render (e.g. an empty body): keep the program
        return text


def reorder(text, rng):
    def change(body):
        if len(body) > 1:
            i = rng.randrange(len(body) - 1)
            body[i], body[i + 1] = body[i + 1], body[i]
        return body

    return _on_block(text, rng, change)


def duplicate(text, rng):
    return _on_block(text, rng, lambda body: (lambda i: body[: i + 1] + [body[i]] + body[i + 1 :])(rng.randrange(len(body))))


def delete(text, rng):
    def change(body):
        del body[rng.randrange(len(body))]
        return body or [cst.SimpleStatementLine([cst.Pass()])]

    return _on_block(text, rng, change)


def join(text, rng):
    def change(body):
        simple = [i for i in range(len(body) - 1) if isinstance(body[i], cst.SimpleStatementLine) and isinstance(body[i + 1], cst.SimpleStatementLine)]
        if simple:
            i = rng.choice(simple)
            body[i : i + 2] = [body[i].with_changes(body=list(body[i].body) + list(body[i + 1].body))]
        return body

    return _on_block(text, rng, change)


def wrap(text, rng):
    def change(body):
        start = rng.randrange(len(body))
        end = min(len(body), start + rng.randint(1, 3))
        header = rng.choice(WRAPPERS + ["try:"])
        inner = "".join(cst.Module(body=[s]).code for s in body[start:end])
        code = f"{header}\n" + "".join(f"    {line}\n" if line.strip() else "\n" for line in inner.splitlines())
        code += "except Exception:\n    pass\n" if header == "try:" else ""
        return body[:start] + list(cst.parse_module(code).body) + body[end:]

    return _on_block(text, rng, change)


def splice(text, rng):
    snippet = rng.choice(hypothesmith_programs(0))
    try:
        inserted = list(cst.parse_module(snippet).body)
    except Exception:
        return text
    return _on_block(text, rng, lambda body: (lambda i: body[:i] + inserted + body[i:])(rng.randrange(len(body) + 1))) if inserted else text


def tabs(text, rng):
    try:
        return cst.parse_module(text).with_changes(default_indent="\t").code
    except Exception:
        return text


def _insert_at_tokens(text: str, rng: random.Random, choose, most: int) -> str:
    """Insert up to `most` pieces where `choose(token, start, end, depth)` offers one (an offset and
    the text to insert there); offsets index `text`, depth is the bracket depth before the token."""
    tokens = _tokens(text)
    if not tokens:
        return text
    starts = _offsets(text)
    depth, spots = 0, []
    for t in tokens:
        start = starts[t.start[0] - 1] + t.start[1] if t.start[0] - 1 < len(starts) else len(text)
        end = start + len(t.string) if t.start[0] == t.end[0] else None
        spot = choose(t, start, end, depth)
        if spot is not None:
            spots.append(spot)
        if t.type == tokenize.OP and t.string in "([{":
            depth += 1
        elif t.type == tokenize.OP and t.string in ")]}":
            depth -= 1
    for at, piece in sorted(rng.sample(spots, min(len(spots), rng.randint(1, most))), reverse=True):
        text = text[:at] + piece + text[at:]
    return text


def comments(text, rng):
    """Comments where tokens allow them: ends of lines, inside brackets, own lines at odd indentation."""

    def choose(t, start, end, depth):
        if t.type in (tokenize.NEWLINE, tokenize.NL) and t.string:
            return start, "  # odd: comment"
        if t.type == tokenize.OP and t.string in "([{,":
            return start + 1, "  # in brackets\n"
        return None

    text = _insert_at_tokens(text, rng, choose, 4)
    if rng.random() < 0.5:
        lines = text.splitlines(keepends=True)
        row = rng.randrange(len(lines) + 1) if lines else 0
        if row == 0 or _tokens("".join(lines[:row])) is not None:
            lines.insert(row, " " * rng.randint(0, 9) + "# a comment at an odd indentation\n")
            text = "".join(lines)
    return text


def continuations(text, rng):
    """A backslash continuation after an operator at bracket depth 0, or a line break inside brackets."""

    def choose(t, start, end, depth):
        if end is None or not (t.type == tokenize.OP and t.string in ("=", "+", "-", "*", ",", "(", "[", ".")):
            return None
        inside = depth + (t.string in "([")
        return end, " \\\n        " if inside == 0 else "\n    "

    return _insert_at_tokens(text, rng, choose, 1)


def trailing_whitespace(text, rng):
    tokens = _tokens(text)
    if not tokens:
        return text
    starts = _offsets(text)
    ends = [starts[t.start[0] - 1] + t.start[1] for t in tokens if t.type in (tokenize.NEWLINE, tokenize.NL) and t.string]
    for at in sorted(rng.sample(ends, min(len(ends), 5)), reverse=True) if ends else []:
        text = text[:at] + rng.choice([" ", "\t", "  \t "]) + text[at:]
    return text


def as_notebook(text: str, rng: random.Random) -> str:
    """The program split into code cells between top-level statements, escapes and markdown added."""
    try:
        module = cst.parse_module(text)
    except Exception:
        pieces = [text]
    else:
        pieces, current = [], []
        for statement in module.body:
            current.append(cst.Module(body=[statement]).code)
            if rng.random() < 0.3:
                pieces.append("".join(current))
                current = []
        pieces.append("".join(current))
    cells = []
    for piece in pieces:
        lines = piece.splitlines(keepends=True)
        if rng.random() < 0.3:
            lines.insert(0, rng.choice(ESCAPES) + "\n")
        if rng.random() < 0.1:
            lines.insert(0, "%%time\n")
        if rng.random() < 0.2:
            cells.append({"cell_type": "markdown", "metadata": {}, "source": ["Some *notes*."]})
        source = "".join(lines).rstrip("\n")
        cells.append({"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                      "source": source.splitlines(keepends=True) if rng.random() < 0.8 else source})
    data = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(data, indent=rng.choice([1, 2, 4]), ensure_ascii=rng.random() < 0.5) + "\n"


# -- checks -------------------------------------------------------------------------------------


class Failure(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


def _compiles(text: str, flags: int = 0) -> bool:
    """Whether Python compiles the text (with `ast.PyCF_ONLY_AST`: whether it parses; `break`
    outside a loop parses, and LibCST takes it, but does not compile)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings of the checked code are not ours to print
            compile(text, "<fuzz>", "exec", flags=flags, dont_inherit=True)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


def _comments(text: str) -> Counter:
    tokens = _tokens(text.replace("\r\n", "\n").replace("\r", "\n"))  # (tokenize reads lines at \n only)
    return Counter(t.string for t in tokens if t.type == tokenize.COMMENT) if tokens else Counter()


def _no_internal_error(diagnostics) -> None:
    for d in diagnostics:
        if d.code == INTERNAL_ERROR:
            raise Failure("internal-error", d.message)


def _fixable(diagnostics) -> bool:
    return any(d.fix is not None and d.fix.applies(True) for d in diagnostics)


def check_text(path: str, text: str) -> str:
    """All the checks on one module's text, fixing one round at a time; returns the fixed text.

    A round's `remaining` diagnostics are the next round's input, so the loop ends exactly where a
    second `--fix` would find nothing more to do."""
    diagnostics = engine.lint_source(path, text, SETTINGS)
    _no_internal_error(diagnostics)
    parsed, compiled = _compiles(text, ast.PyCF_ONLY_AST), _compiles(text)
    current, rounds = text, 0
    while _fixable(diagnostics):
        if rounds == MAX_FIX_ROUNDS:
            raise Failure("second-fix-changes", f"fixes still apply after {rounds} rounds: {sorted({d.code for d in diagnostics if d.fix})}")
        one = fix_source(path, current, SETTINGS, unsafe_fixes=True, max_rounds=1)
        _no_internal_error(one.remaining)
        if one.text == current:
            break
        codes = sorted({d.code for d in one.fixed})
        edits = normalized(e for d in one.fixed for e in d.fix.edits)
        if edits is None:
            raise Failure("outside-edits", f"applied fixes of {codes} have overlapping edits")
        if apply_edits(current, edits) != one.text:
            raise Failure("outside-edits", f"a round changed text outside the edits of {codes}")
        if not parsed:
            raise Failure("fix-unparsable", "a module that does not parse was changed")
        if not (_compiles(one.text, ast.PyCF_ONLY_AST) and reparses(one.text)) or (compiled and not _compiles(one.text)):
            raise Failure("fix-unparsable", f"fixes of {codes} made the module unparsable (or no longer compile)")
        # Whole lines a fix deletes or replaces (a statement moved, an `if` removed) take their
        # comments along; an expression rewritten within its line must keep them.
        deleted = [current[e.start : e.end] for e in edits if not e.content or current[e.start - 1 : e.start] in ("", "\n", "\r")]
        lost = [c for c in _comments(current) - _comments(one.text) if not any(c in d for d in deleted)]
        if lost:
            raise Failure("comment-lost", f"fixes of {codes} dropped comments: {lost[:3]}")
        current, diagnostics, rounds = one.text, one.remaining, rounds + 1
    if "\r\n" in text and "\n" not in text.replace("\r\n", "") and "\n" in current.replace("\r\n", ""):
        raise Failure("line-endings", "a CRLF file got bare LF line breaks")
    return current


def check_file(path: str, data: bytes) -> bool:
    """The checks on a file as `steplint check --fix` reads and writes it; whether fixes applied."""
    with open(path, "wb") as handle:
        handle.write(data)
    try:
        file = read_text(path)
    except FileError as error:
        raise Failure("skipped", str(error)) from None
    if is_notebook(path):
        return check_notebook(path, file.text)
    fixed = check_text(path, file.text)
    if fixed != file.text:
        write_text(path, file, fixed)
        written = Path(path).read_bytes()
        if data.startswith(b"\xef\xbb\xbf") != written.startswith(b"\xef\xbb\xbf") or written.decode(file.encoding) != fixed:
            raise Failure("encoding", f"the written file lost its BOM or its {file.encoding} encoding")
    return fixed != file.text


def check_notebook(path: str, text: str) -> bool:
    try:
        book = notebook.parse(text)
    except notebook.NotebookError as error:
        raise Failure("notebook-unreadable", str(error)) from None
    fixed = check_text(path, book.source)
    if fixed == book.source:
        return False
    written = notebook.rewrite(book, fixed)
    if written is None:
        raise Failure("notebook-unmappable", "the fixed module could not be written back into the cells")
    before, after = json.loads(text), json.loads(written)
    if len(before["cells"]) != len(after["cells"]) or any(
        {k: v for k, v in a.items() if k != "source"} != {k: v for k, v in b.items() if k != "source"} for a, b in zip(before["cells"], after["cells"])
    ):
        raise Failure("notebook-changed", "more than cells' source changed")
    for cell_before, cell_after in zip(before["cells"], after["cells"]):
        escapes = [line for line in "".join(cell_before["source"]).splitlines() if line.lstrip().startswith(("%", "!")) or "= !" in line]
        if any(line not in "".join(cell_after["source"]).splitlines() for line in escapes):
            raise Failure("notebook-escape-lost", "an IPython escape line changed")
    rebook = notebook.parse(written)
    if fix_source(path, rebook.source, SETTINGS, unsafe_fixes=True, max_rounds=1).text != rebook.source:
        raise Failure("second-fix-changes", "a second fix of the written notebook changed it")
    return True


_ALARMED = []  # set when the alarm fired: a library's cleanup may turn the Timeout into another error


def _alarm(signum, frame):
    _ALARMED.append(True)
    raise Timeout()


def run_one(task) -> Outcome:
    """One program in a worker: build it, then check it under the time limit (generating is not timed)."""
    seed, index, tree_file, timeout, folder = task
    kind_name, data, suffix = "tree", b"", ".py"
    if tree_file:
        data = Path(tree_file).read_bytes()
    else:
        try:
            kind_name, data = program(seed, index)
        except Exception:
            return Outcome(index, "harness-error", traceback.format_exc(limit=-3))
        suffix = ".ipynb" if kind_name == "notebook" else ".py"
    signal.signal(signal.SIGALRM, _alarm)
    _ALARMED.clear()
    signal.alarm(timeout)
    try:
        changed = check_file(os.path.join(folder, f"p{index}{suffix}"), data)
        return Outcome(index, "held", fixed=changed)
    except Timeout:
        return Outcome(index, "timeout", tree_file or kind_name, data, suffix)
    except Failure as failure:
        if failure.kind == "skipped":
            return Outcome(index, "skipped", str(failure))
        return Outcome(index, failure.kind, f"{tree_file or kind_name}: {failure}", data, suffix)
    except Exception:
        if _ALARMED:
            return Outcome(index, "timeout", tree_file or kind_name, data, suffix)
        return Outcome(index, "internal-error", f"{tree_file or kind_name}: {traceback.format_exc(limit=-3)}", data, suffix)
    finally:
        signal.alarm(0)


def run(count: int = 0, seed: int = 0, jobs: int = 1, timeout: int = 60, save: Optional[str] = None, trees=(), progress=None) -> Report:
    """Check the programs; Ctrl-C stops early and returns the counts so far (`interrupted`)."""
    files = [
        str(p) for tree in trees for p in sorted(Path(tree).rglob("*.py"))
        if p.is_file() and "site-packages" not in p.relative_to(tree).parts  # a tree's own files, not installed packages
    ]
    report = Report()
    # lint_source is a pure function of (path, text, settings): remembering the last few results
    # spares the second lint of each text (fix_source lints a round's input, the checks lint it
    # too) and changes no result. Workers fork after this, so they inherit it.
    unremembered = engine.lint_source
    engine.lint_source = lru_cache(maxsize=4)(unremembered)
    with tempfile.TemporaryDirectory(prefix="steplint-fuzz-") as folder:
        tasks = [(seed, i, files[i] if files else None, timeout, folder) for i in range(len(files) or count)]
        pool = multiprocessing.Pool(jobs) if jobs > 1 else None
        outcomes = pool.imap_unordered(run_one, tasks, chunksize=1 if files else BLOCK) if pool else map(run_one, tasks)
        try:
            for outcome in outcomes:
                _record(report, outcome, save)
                if progress and report.tried % progress == 0:
                    print(f"... {report.tried}/{len(tasks)}: {report.summary()}", file=sys.stderr, flush=True)
        except KeyboardInterrupt:
            report.interrupted = True
        finally:
            if pool:
                pool.terminate()
                pool.join()
            engine.lint_source = unremembered
    return report


def _record(report: Report, outcome: Outcome, save: Optional[str]) -> None:
    report.tried += 1
    report.fixed += outcome.fixed
    if outcome.kind == "held":
        report.held += 1
    elif outcome.kind == "timeout":
        report.timeouts += 1
    elif outcome.kind == "skipped":
        report.skipped += 1
    else:
        report.failures[outcome.kind] += 1
        report.examples.setdefault(outcome.kind, outcome.detail)
    if save and outcome.kind not in ("held", "skipped"):
        os.makedirs(save, exist_ok=True)
        name = os.path.join(save, f"{outcome.kind}-{outcome.index}")
        Path(name + outcome.suffix).write_bytes(outcome.program)
        Path(name + ".txt").write_text(outcome.detail + "\n", encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("count", type=int, nargs="?", default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--timeout", type=int, default=60, help="seconds per program")
    parser.add_argument("--save", default="fuzz-failures")
    parser.add_argument("--progress", type=int, default=0, help="print the counts to stderr every N programs")
    parser.add_argument("--tree", action="append", default=[], help="check every .py file under this folder (not its site-packages), unmutated")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    report = run(args.count, args.seed, args.jobs, args.timeout, args.save, args.tree, progress=args.progress)
    failed = sum(report.failures.values())
    stopped = " (interrupted)" if report.interrupted else ""
    print(f"{report.summary()} (timeout {args.timeout} s), {time.perf_counter() - started:.0f} s{stopped}")
    for kind, n in report.failures.most_common():
        print(f"  {n:6} {kind}: e.g. {report.examples[kind].strip().splitlines()[-1][:160]}")
    if failed or report.timeouts:
        print(f"inputs saved under {args.save}/")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
