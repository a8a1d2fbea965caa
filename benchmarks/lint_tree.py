"""Time `steplint check` over a tree: files, lines, seconds, lines per second.

    python benchmarks/lint_tree.py PATH [PATH...]

A benchmark, not a test: numbers depend on the machine. Run it before and after a speed change on
the same tree (the closing notes record the trees used: fetched training repositories).
"""

import subprocess
import sys
import time
from pathlib import Path


def main(paths):
    files = [p for root in paths for p in Path(root).rglob("*.py")]
    lines = sum(len(p.read_bytes().splitlines()) for p in files)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "steplint", "check", "--exit-zero", "-q", "--output-format", "concise", *paths],
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    found = len(done.stdout.splitlines())
    print(f"{len(files)} files, {lines} lines, {seconds:.1f} s, {lines / seconds:,.0f} lines/s, {found} diagnostics")


if __name__ == "__main__":
    main(sys.argv[1:] or ["."])
