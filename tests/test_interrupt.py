"""Ctrl-C: a real SIGINT to a real `steplint check`, at several moments of its run (importing,
discovering, indexing in the pool, linting, fixing). Every time: exit status 130, no worker process
left running, no traceback and never an internal error (SL000) reported for the file it interrupted."""

import ast
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import FIXTURES

# Seconds after the command started its own imports (0: while it still imports).
MOMENTS = (0.0, 0.4, 1.0, 2.0, 3.5)
STARTED_CPU_SECONDS = 0.07


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """Some hundreds of training scripts: long enough a run for each moment to land in a phase."""
    root = tmp_path_factory.mktemp("interrupted")
    (root / ".git").mkdir()
    for copy in range(4):
        for folder in ("SL101", "SL102", "SL103", "SL201", "SL301"):
            shutil.copytree(FIXTURES / folder, root / f"copy{copy}" / folder)
    return root


def _cpu_seconds(pid: int) -> float:
    """CPU time the process has used (unlike wall time, the same on a loaded machine)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _processes_marked(mark: str) -> list:
    """Processes whose environment holds `mark`: the command and every process it started."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as environ:
                    if mark.encode() in environ.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def interrupted_run(cwd, moment: float, *args) -> subprocess.CompletedProcess:
    mark = f"STEPLINT_INTERRUPT_TEST={uuid.uuid4()}"
    env = {**os.environ, mark.split("=")[0]: mark.split("=")[1]}
    process = subprocess.Popen([sys.executable, "-m", "steplint", "check", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    # Python's start (~0.03 s of CPU) is over and steplint's imports are under way: from here on
    # a Ctrl-C is the command's to handle.
    while _cpu_seconds(process.pid) < STARTED_CPU_SECONDS and process.poll() is None:
        time.sleep(0.002)
    time.sleep(moment)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    deadline = time.monotonic() + 10  # (the kernel reaps a killed worker soon, not at once)
    while _processes_marked(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _processes_marked(mark)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"worker processes left running after Ctrl-C at {moment} s: {left}"
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_exits_130_in_every_phase_and_leaves_no_worker(tree, jobs):
    finished = 0
    for moment in MOMENTS:
        done = interrupted_run(tree, moment, ".", "--no-cache", "-j", jobs, "--output-format", "concise")
        if done.returncode == 1 and "Found" in done.stdout:
            finished += 1  # the run ended before the signal: nothing to check at this moment
            continue
        assert done.returncode == 130, (moment, done.returncode, done.stderr[-2000:])
        assert "interrupted" in done.stderr and "Traceback" not in done.stderr and "Aborted" not in done.stderr
        assert "SL000" not in done.stdout + done.stderr
    assert finished < len(MOMENTS) - 1, "the runs ended before most signals: the tree is too small to test them"


def test_ctrl_c_while_fixing_leaves_each_file_fixed_or_unchanged(tmp_path, tree):
    copy = tmp_path / "tree"
    shutil.copytree(tree, copy)
    originals = {p: p.read_text() for p in copy.rglob("*.py")}
    done = interrupted_run(copy, 1.0, ".", "--fix", "--unsafe-fixes", "--no-cache", "-j", "2")
    assert done.returncode in (130, 0, 1) and "Traceback" not in done.stderr and "SL000" not in done.stdout + done.stderr
    for path, original in originals.items():
        text = path.read_text()
        if text != original:
            ast.parse(text)
    assert not [p for p in copy.rglob("*") if p.name.startswith(".steplint-")]  # no temporary file left


DEFERRED = """
import os, signal, sys
from steplint import interrupt
interrupt.install()
target = sys.argv[1]
try:
    with open(target, "r+b") as out, interrupt.deferred():
        out.write(b"short\\n")
        os.kill(os.getpid(), signal.SIGINT)  # lands between the new bytes and the truncation
        print("went on", flush=True)
        out.truncate()
except interrupt.Interrupted:
    print("interrupted after the block", flush=True)
with open(target, "rb") as check:
    print(check.read() == b"short\\n", flush=True)
"""


def test_a_ctrl_c_during_a_write_in_place_is_raised_once_the_file_is_whole(tmp_path):
    """A file with hard links is fixed in place: new bytes, then the old tail cut off. A real SIGINT
    landing between the two must wait, or the file keeps the old text's tail after the new one."""
    target = tmp_path / "linked.py"
    target.write_bytes(b"a much longer old text\n")
    done = subprocess.run([sys.executable, "-c", DEFERRED, str(target)], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == ["went on", "interrupted after the block", "True"], done.stdout + done.stderr
