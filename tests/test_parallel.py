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
