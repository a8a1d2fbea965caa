"""Where the time goes: steplint's stages over a tree, from cProfile, in one process.

    python benchmarks/stages.py PATH [PATH...]

Does what `steplint check --no-cache -j 1` does over every .py file under the paths (the project
index, then each file's lint with its project context) and prints the cumulative seconds of each
stage (project summaries, Python's syntax check, LibCST's parse, positions, structure walk, roles,
events, guards, each rule, suppression comments, reporting), and the files that cost most. A
benchmark, not a test: the figures depend on the machine.
"""

import cProfile
import pstats
import sys
import time
from pathlib import Path

# (stage, file suffix, function name): cumulative time of that function over the run.
STAGES = [
    ("project index", "steplint/project/build.py", "build_index"),
    ("  summaries (parse, model, summary)", "steplint/project/build.py", "summarize_text"),
    ("lint", "steplint/engine.py", "lint_source"),
    ("  Python's syntax check", "steplint/source.py", "python_parse_error"),
    ("  analysis (model, rules)", "steplint/engine.py", "_analyse"),
    ("parse (index and lint)", "libcst/_parser/entrypoints.py", "parse_module"),
    ("model (index and lint)", "steplint/model/__init__.py", "build_model"),
    ("positions", "steplint/model/positions.py", "_place"),
    ("positions (LibCST metadata)", "libcst/metadata/wrapper.py", "resolve"),
    ("structure walk", "steplint/model/structure.py", "walk_module"),
    ("imports", "steplint/model/syntax.py", "__init__"),
    ("roles", "steplint/model/roles.py", "__init__"),
    ("events", "steplint/model/events.py", "collect_events"),
    ("guards", "steplint/model/__init__.py", "_classify_guards"),
    ("suppression comments", "steplint/suppress.py", "comments"),
    ("reporting", "steplint/report/full.py", "render"),
]


def main(paths):
    from steplint.config import Settings
    from steplint.engine import lint_source, needs_analysis
    from steplint.project.build import index_for_run
    from steplint.report import renderer

    files = sorted(p for root in map(Path, paths) for p in (root.rglob("*.py") if root.is_dir() else [root]))
    texts = {str(p): p.read_text(encoding="utf-8", errors="replace") for p in files}
    settings = Settings()
    costs = []
    found = []
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    analysed = [path for path, text in texts.items() if needs_analysis(text)]
    project = index_for_run(list(texts), lambda p: False, texts, cache=False, analysed=analysed) if analysed else None
    for path, text in texts.items():
        began = time.perf_counter()
        found.extend(lint_source(path, text, settings, project.context_for(path) if project else None))
        costs.append((time.perf_counter() - began, path, text.count("\n")))
    renderer("full")(found, texts)
    profiler.disable()
    total = time.perf_counter() - start
    lines = sum(text.count("\n") for text in texts.values())
    print(f"{len(files)} files, {lines} lines, {len(found)} diagnostics, {total:.1f} s under the profiler")
    stats = pstats.Stats(profiler).stats
    cumulative = {}
    for (filename, _, name), (_, _, _, ct, _) in stats.items():
        for stage, suffix, function in STAGES:
            if filename.endswith(suffix) and name == function:
                cumulative[stage] = cumulative.get(stage, 0.0) + ct
        if "/rules/sl" in filename and name == "check":
            rule = Path(filename).stem.split("_")[0].upper()
            cumulative[f"rule {rule}"] = cumulative.get(f"rule {rule}", 0.0) + ct
    for stage, seconds in sorted(cumulative.items(), key=lambda item: -item[1]):
        print(f"  {stage:<30} {seconds:8.2f} s {100 * seconds / total:5.1f}%")
    print("slowest files:")
    for seconds, path, count in sorted(costs, reverse=True)[:5]:
        print(f"  {seconds:6.2f} s {count:6} lines  {path}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["."])
