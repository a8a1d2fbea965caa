"""steplint beside its peers on one tree: torch's own torch/{distributed,nn,optim,utils}.

    python benchmarks/peers.py [--rounds 3] [--slow-rounds 1] [--jobs N]

Copies the tree from the installed torch wheel, installs Fixit, TorchFix and ruff into a throwaway
virtualenv, then runs, interleaved round by round: steplint cold (empty cache), steplint warm (its
cache from the cold run), Fixit, TorchFix, ruff cold (--no-cache) and ruff warm. Fixit and TorchFix
take minutes each, so they run in the first --slow-rounds rounds only. Prints the median seconds of
each tool, the ratios that matter and each tool's peak memory (the largest resident set of its
processes). A benchmark, not a test: the figures depend on the machine and on what else runs on it.
"""

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUBTREES = ("distributed", "nn", "optim", "utils")
PEERS = ("fixit", "torchfix", "ruff")


def torch_tree(destination: Path) -> Path:
    # found, not imported: a child forked from a process holding torch would start with its memory
    source = Path(importlib.util.find_spec("torch").origin).parent
    for name in SUBTREES:
        shutil.copytree(source / name, destination / "torch" / name, ignore=shutil.ignore_patterns("__pycache__"))
    return destination / "torch"


def install_peers(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    subprocess.run([str(folder / "bin" / "pip"), "install", "-q", *PEERS], check=True)
    return folder / "bin"


def timed(command, cwd) -> tuple:
    """Seconds and peak resident memory (MB) of a command and the processes it waited for."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    return seconds, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slow-rounds", type=int, default=1)
    parser.add_argument("--jobs", type=int, help="steplint --jobs (default: the available cores)")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="steplint-peers-"))
    try:
        tree = torch_tree(work / "tree")
        files = list(tree.rglob("*.py"))
        lines = sum(len(p.read_bytes().splitlines()) for p in files)
        print(f"tree: {len(files)} files, {lines} lines (torch/{{{','.join(SUBTREES)}}}); cores: {len(os.sched_getaffinity(0))}")
        bin_ = install_peers(work / "venv")
        steplint = [sys.executable, "-m", "steplint", "check", "--exit-zero", "-q", "--output-format", "concise"]
        if options.jobs:
            steplint += ["--jobs", str(options.jobs)]
        cache = tree.parent / ".steplint_cache"
        ruff_cache = work / "ruff-cache"
        tools = {
            "steplint cold": (lambda: shutil.rmtree(cache, ignore_errors=True), steplint + ["torch"], False),
            "steplint warm": (None, steplint + ["torch"], False),
            "fixit": (None, [str(bin_ / "fixit"), "lint", "torch"], True),
            "torchfix": (None, [str(bin_ / "torchfix"), "torch"], True),
            "ruff cold": (None, [str(bin_ / "ruff"), "check", "--exit-zero", "--no-cache", "torch"], False),
            "ruff warm": (None, [str(bin_ / "ruff"), "check", "--exit-zero", "--cache-dir", str(ruff_cache), "torch"], False),
        }
        subprocess.run(tools["ruff warm"][1], cwd=tree.parent, capture_output=True)  # fill ruff's cache
        seconds = {name: [] for name in tools}
        memory = {name: 0.0 for name in tools}
        for round_ in range(options.rounds):
            for name, (prepare, command, slow) in tools.items():
                if slow and round_ >= options.slow_rounds:
                    continue
                if prepare:
                    prepare()
                took, peak = timed(command, tree.parent)
                seconds[name].append(took)
                memory[name] = max(memory[name], peak)
                print(f"  round {round_ + 1}: {name:<14} {took:8.2f} s {peak:7.0f} MB", flush=True)
        median = {name: statistics.median(values) for name, values in seconds.items() if values}
        print(f"\n{'tool':<14} {'median s':>9} {'runs':>5} {'peak MB':>8}")
        for name, value in median.items():
            print(f"{name:<14} {value:9.2f} {len(seconds[name]):5} {memory[name]:8.0f}")
        print()
        for peer in ("fixit", "torchfix"):
            if peer in median:  # (not run with --slow-rounds 0)
                print(f"{peer} / steplint cold: {median[peer] / median['steplint cold']:.1f}x")
        print(f"steplint cold / ruff cold: {median['steplint cold'] / median['ruff cold']:.1f}x")
        print(f"steplint warm / ruff warm: {median['steplint warm'] / median['ruff warm']:.1f}x")
        print(f"steplint cold / steplint warm: {median['steplint cold'] / median['steplint warm']:.1f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
