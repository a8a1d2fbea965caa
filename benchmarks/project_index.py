"""Time the project index: `steplint check` on a whole tree and on one file of it, with the index
cache cold (no .steplint_cache/project) and warm, against that file checked alone (copied into an
empty folder, so that its project is itself), and the index build alone.

    python benchmarks/project_index.py TREE FILE

A benchmark, not a test: numbers depend on the machine. TREE is a project root (a fetched training
repository); FILE one of its training scripts.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from steplint.files import discover
from steplint.project.build import CACHE_FOLDER, index_for_run, project_root


def check(*paths) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "steplint", "check", "--exit-zero", "-q", "--output-format", "concise", *paths],
                   capture_output=True, text=True, check=True)
    return time.perf_counter() - start


def forget(root: str) -> None:
    shutil.rmtree(os.path.join(root, CACHE_FOLDER), ignore_errors=True)


def index_build(files) -> float:
    start = time.perf_counter()
    index_for_run(files, lambda p: False)
    return time.perf_counter() - start


def main(tree: str, file: str) -> None:
    root = project_root(file)
    files = [p for p in discover([tree], lambda p: False)[0] if p.endswith(".py")]
    lines = sum(len(Path(p).read_bytes().splitlines()) for p in files)
    print(f"tree {tree}: {len(files)} Python files, {lines} lines; one file {file} (project root {root})")
    for label, run in (("index build alone, whole tree", lambda: index_build(files)), ("index build alone, one file", lambda: index_build([file])),
                       ("steplint check, whole tree", lambda: check(tree)), ("steplint check, one file", lambda: check(file))):
        forget(root)
        cold = run()
        print(f"{label + ':':<34}cold {cold:6.2f} s   warm {run():6.2f} s")
    with tempfile.TemporaryDirectory() as alone:
        copy = os.path.join(alone, os.path.basename(file))
        shutil.copy(file, copy)
        print(f"{'steplint check, the file alone:':<34}     {check(copy):6.2f} s")


if __name__ == "__main__":
    main(*sys.argv[1:3])
