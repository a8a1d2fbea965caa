"""Count internal errors (SL000) over large real trees: every rule runs over every file.

    python benchmarks/sl000.py [PATH...]

Without paths: the installed packages of torch, transformers, lightning (and pytorch_lightning)
and deepspeed found next to torch (`pip install --no-deps transformers lightning deepspeed` is
enough: steplint reads them, it does not import them), and each tree under /work/corpus-trees.
Prints, per tree, the files checked and the SL000 found (with their files and messages), then the
total. The target is 0. Outside CI: it takes minutes (CPython's tests and torch are large).
"""

import json
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

PACKAGES = ("torch", "transformers", "lightning", "pytorch_lightning", "deepspeed")
CORPUS = Path("/work/corpus-trees")


def default_trees():
    site = Path(sysconfig.get_paths()["purelib"])
    trees = [site / name for name in PACKAGES if (site / name).is_dir()]
    if CORPUS.is_dir():
        trees += sorted(p for p in CORPUS.iterdir() if p.is_dir())
    return trees


def internal_errors(tree: Path):
    """(files checked, [SL000 diagnostics]) of one tree, checked with every rule and no cache."""
    done = subprocess.run(
        # (-P: a tree's own modules, such as torch/random.py, must not shadow the standard library's)
        [sys.executable, "-P", "-m", "steplint", "check", "--no-cache", "--exit-zero", "--output-format", "json", "--select", "ALL", str(tree)],
        capture_output=True, text=True, cwd=tree,
    )
    if done.returncode != 0:
        raise SystemExit(f"steplint failed on {tree} (exit {done.returncode}):\n{done.stderr[-3000:]}")
    files = sum(1 for _ in tree.rglob("*.py"))
    return files, [d for d in json.loads(done.stdout) if d["code"] == "SL000"]


def main(paths):
    trees = [Path(p).resolve() for p in paths] or default_trees()
    total = 0
    for tree in trees:
        start = time.perf_counter()
        files, errors = internal_errors(tree)
        total += len(errors)
        print(f"{tree}: {files} files, {len(errors)} SL000 ({time.perf_counter() - start:.0f} s)", flush=True)
        for error in errors:
            print(f"    {error['filename']}: {error['message']}", flush=True)
    print(f"SL000 total: {total} over {len(trees)} trees")


if __name__ == "__main__":
    main(sys.argv[1:])
