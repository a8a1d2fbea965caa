"""Apply every fix the corpus produces and check its preconditions mechanically (issue 20).

    python benchmarks/fix_preconditions.py [--trees DIR ...] [--repos a/b,c/d] [--dump FILE ...] [--all-files]

Reads the trees `benchmarks/corpus/run.py` extracted (folders `<owner>+<name>@<commit>` holding a
`.corpus-extracted` marker; default: /work/corpus/trees-base and /work/corpus-trees). No
third-party code is kept here. Only the files some corpus run reported on are linted (a fix comes
with a diagnostic): those listed in `--dump` files (run.py's `--dump`; default: the baseline dump
in /work/corpus) and in each trees folder's `results/`; `--all-files` lints every file instead. Each
file is linted with its repository's project index, as `steplint check` does; then, for every fix
offered (safe and unsafe):

- binding and committed-path equivalence on the text it writes (steplint.preconditions);
- role: every `committed_step(x, ...)` the fixed module calls takes an object the model of the
  fixed module establishes as a torch GradScaler;
- consistency of windows: after the fix, no test of the same `index % length` as a shifted window
  test `(index + 1) % length` is left unshifted in its function;

and, for each file, report/fix agreement: the statements the first report showed without a fix are
still in the text `--fix --unsafe-fixes` writes. Prints the fixes checked and each violation; the
last line is the number of violations (0 is the goal).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import Counter
from pathlib import Path

import libcst as cst

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from steplint.config import Settings  # noqa: E402
from steplint.engine import fix_source, lint_source, needs_analysis  # noqa: E402
from steplint.fixes import apply_edits, normalized  # noqa: E402
from steplint.model import build_model  # noqa: E402
from steplint.preconditions import COMMITTED_STEP, violations  # noqa: E402
from steplint.project.build import build_index  # noqa: E402
from steplint.rewrite import is_grad_scaler  # noqa: E402
from steplint.source import Source, parse_python  # noqa: E402

DEFAULT_TREES = [Path("/work/corpus/trees-base"), Path("/work/corpus-trees")]
DEFAULT_DUMP = Path("/work/corpus/baseline-72b1856.json")


def trees(roots, repos):
    for root in roots:
        for tree in sorted(root.glob("*@*")):
            if (tree / ".corpus-extracted").exists() and (not repos or tree.name.split("@")[0].replace("+", "/") in repos):
                yield tree


def role_violations(path, text):
    """`committed_step(x, ...)` calls whose `x` the fixed module's model does not establish as a GradScaler."""
    if COMMITTED_STEP not in text:
        return []
    model = build_model(Source(path, text, parse_python(text, path)), cst.parse_module(text), Settings(), None)
    found = []
    for call, site in model.structure.calls:
        if isinstance(call.func, cst.Name) and call.func.value == COMMITTED_STEP and call.args and site.scope.name != COMMITTED_STEP:
            if not is_grad_scaler(model, call.args[0].value, site.scope):
                found.append(f"committed_step on `{model.text.of(call.args[0].value)}`, not shown to be a GradScaler")
    return found


def window_violations(before, after):
    """Window tests the fix shifted, whose index is still read unshifted, `index % length`, in the
    fixed code (its docstrings and comments, which may quote the old test, are not read)."""
    shifted_before, _ = _window_tests(before)
    shifted_after, unshifted_after = _window_tests(after)
    return [
        f"`{index} % {length}` left unshifted beside `({index} + 1) % {length}`"
        for index, length in sorted((shifted_after - shifted_before) & unshifted_after)
    ]


def _window_tests(text):
    """(index, length) of each `(index + 1) % length` and of each `index % length` in the code."""
    shifted, unshifted = set(), set()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return shifted, unshifted
    for node in ast.walk(tree):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod)):
            continue
        left, length = node.left, ast.unparse(node.right)
        if isinstance(left, ast.Name):
            unshifted.add((left.id, length))
        elif (
            isinstance(left, ast.BinOp) and isinstance(left.op, ast.Add) and isinstance(left.left, ast.Name)
            and isinstance(left.right, ast.Constant) and left.right.value == 1
        ):
            shifted.add((left.left.id, length))
    return shifted, unshifted


def agreement_violations(text, diagnostics, fixed_text):
    """Statements shown without a fix that `--fix --unsafe-fixes` changed anyway."""
    lines = text.splitlines()
    remaining = Counter(line.strip() for line in fixed_text.splitlines())
    found = []
    for d in diagnostics:
        if d.fix is None:
            statement = lines[d.row - 1].strip()
            if remaining[statement] == 0:
                found.append(f"{d.code} on line {d.row} was shown without a fix, and --fix changed `{statement[:60]}`")
    return found


def diagnosed_files(dumps, roots):
    """(repo, path) of every file a corpus run reported on."""
    found = set()
    entries = []
    for dump in dumps:
        entries += json.loads(Path(dump).read_text())
    for root in roots:
        for result in (root / "results").glob("*.json"):
            entries += json.loads(result.read_text()).get("diagnostics", [])
    for entry in entries:
        found.add((entry["repo"], entry["path"]))
    return found


def check_tree(tree, limit, out, only=None):
    files = sorted(str(p) for p in tree.rglob("*.py") if p.is_file())
    texts = {}
    for path in files:
        try:
            texts[path] = Path(path).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
    candidates = [p for p, t in texts.items() if needs_analysis(t) and (only is None or Path(p).relative_to(tree).as_posix() in only)][:limit]
    if not candidates:
        return 0, 0
    index = build_index(list(texts), str(tree), texts=texts, cache=False)
    fixes = violations_found = 0
    for path in candidates:
        text = texts[path]
        project = index.context_for(path)
        try:
            diagnostics = lint_source(path, text, Settings(), project)
        except Exception as error:  # noqa: BLE001 (a crash is the corpus run's finding, not this one's)
            print(f"  {path}: lint raised {type(error).__name__}", file=out)
            continue
        found = []
        withheld = sum(1 for d in diagnostics if "(no fix:" in d.message)
        if withheld:
            print(f"  {Path(path).relative_to(tree)}: {withheld} finding(s) without a fix, the message saying why", file=out)
        for d in diagnostics:
            if d.fix is None:
                continue
            fixes += 1
            edits = normalized(d.fix.edits) or []
            after = apply_edits(text, edits)
            problems = violations(text, d.fix) + role_violations(path, after) + window_violations(text, after)
            found += [f"{d.code} line {d.row} ({d.fix.applicability}): {p}" for p in problems]
        if any(d.fix is not None for d in diagnostics):
            fixed = fix_source(path, text, Settings(), unsafe_fixes=True, project=project, diagnostics=diagnostics).text
            found += agreement_violations(text, diagnostics, fixed)
        for problem in found:
            print(f"  {Path(path).relative_to(tree)}: {problem}", file=out)
        violations_found += len(found)
    return fixes, violations_found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=Path, action="append", help="a folder of extracted trees (repeatable)")
    parser.add_argument("--repos", default="", help="comma-separated owner/name filter")
    parser.add_argument("--limit", type=int, default=10_000, help="candidate files per repository")
    parser.add_argument("--dump", action="append", help="a corpus dump (JSON) whose files to lint (repeatable)")
    parser.add_argument("--all-files", action="store_true", help="lint every file, not only the reported ones")
    args = parser.parse_args(argv)
    repos = {r for r in args.repos.split(",") if r}
    roots = args.trees or DEFAULT_TREES
    diagnosed = None if args.all_files else diagnosed_files(args.dump or [DEFAULT_DUMP], roots)
    total_fixes = total = 0
    for tree in trees(roots, repos):
        repo = tree.name.split("@")[0].replace("+", "/")
        only = None if diagnosed is None else {path for r, path in diagnosed if r == repo}
        fixes, found = check_tree(tree, args.limit, sys.stdout, only)
        print(f"{tree.name}: {fixes} fixes, {found} violations", flush=True)
        total_fixes += fixes
        total += found
    print(f"fixes checked: {total_fixes}")
    print(f"violations: {total}")
    return 0 if total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
