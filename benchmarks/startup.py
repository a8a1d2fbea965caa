"""Start-up: `steplint --version` and a check of a small file that needs no analysis, against the
interpreter's own start-up (`python -c pass`). Median of interleaved runs.

    python benchmarks/startup.py [--runs 20]

A benchmark, not a test: the figures depend on the machine.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SMALL_FILE = "import math\n\n\ndef area(radius):\n    return math.pi * radius * radius\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    runs = parser.parse_args().runs
    folder = Path(tempfile.mkdtemp(prefix="steplint-startup-"))
    (folder / "small.py").write_text(SMALL_FILE)
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "steplint --version": [sys.executable, "-m", "steplint", "--version"],
        "steplint rule SL101": [sys.executable, "-m", "steplint", "rule", "SL101"],
        "steplint check small.py": [sys.executable, "-m", "steplint", "check", "small.py"],
    }
    seconds = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            start = time.perf_counter()
            subprocess.run(command, cwd=folder, capture_output=True, check=False)
            seconds[name].append(time.perf_counter() - start)
    base = statistics.median(seconds["python -c pass"])
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"{name:<26} {median * 1000:7.1f} ms  {median / base:5.1f}x python -c pass")


if __name__ == "__main__":
    main()
