"""Worker processes change nothing about a report: a tree large enough for the pool in both phases
(summaries, then each file's lint in the worker that keeps its parse) reports what one process reports."""

import json
import subprocess
import sys
import textwrap

HELPER = '''
def amp_step(scaler, optimizer, loss):
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
'''

TRAIN = '''
import torch
from steps import amp_step


def train_{i}(model, loader):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
    scaler = torch.amp.GradScaler("cuda")
    for batch in loader:
        amp_step(scaler, optimizer, model(batch).mean())
        scheduler.step()
'''


def _report(tree, jobs):
    done = subprocess.run([sys.executable, "-m", "steplint", "check", "--no-cache", "--output-format", "json", "--jobs", str(jobs), "."],
                          cwd=tree, capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    return json.loads(done.stdout)


def test_two_workers_report_what_one_process_reports(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "steps.py").write_text(textwrap.dedent(HELPER))
    for i in range(40):  # more modules to summarise than the pool starts for
        (tmp_path / f"train_{i}.py").write_text(TRAIN.format(i=i))
    (tmp_path / "broken.py").write_text("def broken(:\n    scaler.step(optimizer)\n")
    alone, pooled = _report(tmp_path, 1), _report(tmp_path, 2)
    assert pooled == alone
    codes = sorted({(d["filename"].rsplit("/", 1)[-1], d["code"]) for d in pooled})
    assert ("train_7.py", "SL101") in codes and ("broken.py", "SL001") in codes
    assert len([d for d in pooled if d["code"] == "SL101"]) == 40


# -- a worker that dies ---------------------------------------------------------------------------


def _square_or_die(number, marker):
    """Ends its process (as a crash in native code or the out-of-memory killer would) for odd
    numbers; for 3 only the first time (`marker` tells it was tried)."""
    import os
    from pathlib import Path

    if number % 2 and not (number == 3 and Path(marker).exists()):
        if number == 3:
            Path(marker).touch()
        os._exit(1)
    return number * number


def test_a_dead_worker_is_replaced_and_its_task_tried_once_more(tmp_path):
    from steplint.pool import Pool

    marker = str(tmp_path / "tried")
    with Pool(2) as pool:
        calls = [(n, marker) for n in range(8)]
        results = list(pool.map(_square_or_die, calls, [None] * len(calls), lambda call, why: f"lost {call[0]}: {why}"))
        assert results[:4] == [0, "lost 1: the process analysing it ended (exit status 1)", 4, 9]
        assert results[4:] == [16, "lost 5: the process analysing it ended (exit status 1)", 36, "lost 7: the process analysing it ended (exit status 1)"]
        # still two working processes for what follows
        assert list(pool.map(_square_or_die, [(2, marker), (4, marker)], [0, 1], lambda call, why: None)) == [4, 16]
