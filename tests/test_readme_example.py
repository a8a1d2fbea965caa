"""The README's "Testing your training loop" example runs, passes, and fails as the README says."""

import re
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.runtime


def example() -> str:
    text = (ROOT / "README.md").read_text()
    return next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if b.startswith("# test_training_loop.py"))


def run(tmp_path, source):
    (tmp_path / "test_training_loop.py").write_text(source)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_training_loop.py"],
                          capture_output=True, text=True, cwd=tmp_path)


def test_example_passes(tmp_path):
    done = run(tmp_path, example())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_example_fails_as_described(tmp_path):
    assert 'drop `"scaler"` from the keys that `save` writes and `load` reads' in (ROOT / "README.md").read_text()  # what is done below
    ungated = example().replace("        if committed:\n            run[\"scheduler\"].step()\n            run[\"step\"] += 1\n",
                                "        run[\"scheduler\"].step()\n        run[\"step\"] += 1\n")
    assert ungated != example()
    no_scaler = ungated.replace('("model", "optimizer", "scheduler", "scaler")} | {"step"', '("model", "optimizer", "scheduler")} | {"step"')
    no_scaler = no_scaler.replace('    for k in ("model", "optimizer", "scheduler", "scaler"):\n        run[k].load', '    for k in ("model", "optimizer", "scheduler"):\n        run[k].load')
    done = run(tmp_path, no_scaler)
    assert "window 0 (skipped): the scheduler advanced 1 step(s), expected 0 for a committed-updates schedule" in done.stdout
    assert "window 4: the loss scale was 65536.0 after resume, 32768.0 in the uninterrupted run" in done.stdout, done.stdout
