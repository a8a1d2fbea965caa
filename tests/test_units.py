"""Declared units: `# steplint: counter=...` and `[tool.steplint.units]` (the fixtures cover what
units the model infers)."""

import json
import subprocess
import sys
from pathlib import Path

from conftest import FIXTURES

CADENCE = (FIXTURES / "SL102" / "trainer_eval_cadence.py").read_text().replace("  # expect: SL102", "")


def steplint(*args, cwd):
    return subprocess.run([sys.executable, "-m", "steplint", *args], capture_output=True, text=True, cwd=cwd)


def codes(done):
    return sorted((Path(d["filename"]).name, d["code"]) for d in json.loads(done.stdout))


def test_a_unit_declared_in_the_configuration_explains_the_counter(tmp_path):
    (tmp_path / "train.py").write_text(CADENCE)
    assert codes(steplint("check", "--output-format", "json", ".", cwd=tmp_path)) == [("train.py", "SL102")]
    (tmp_path / "steplint.toml").write_text('[units]\nglobal_step = "batches"\n')
    assert codes(steplint("check", "--output-format", "json", ".", cwd=tmp_path)) == []
    (tmp_path / "steplint.toml").write_text('[units]\n"self.global_step" = "updates"\n')
    assert codes(steplint("check", "--output-format", "json", ".", cwd=tmp_path)) == [("train.py", "SL102")]


def test_an_unknown_unit_is_a_configuration_error_naming_the_key_and_the_file(tmp_path):
    (tmp_path / "train.py").write_text(CADENCE)
    (tmp_path / "pyproject.toml").write_text('[tool.steplint.units]\nglobal_step = "iterations"\n')
    done = steplint("check", ".", cwd=tmp_path)
    assert done.returncode == 2
    assert "units.global_step" in done.stderr and "pyproject.toml" in done.stderr and "iterations" in done.stderr


ATTEMPT_NAMES = '''import torch


def train(model, loader, optimizer, scaler, accum, save_every):
    for i, batch in enumerate(loader):
        scaler.scale(model(batch).mean() / accum).backward()
        if (i + 1) % accum == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
            if (i + 1) % save_every == 0:
                torch.save({"model": model.state_dict(), "step": i}, f"ckpt-{i}.pt")


def train_plain(model, loader, optimizer, scaler, save_every):
    for i, batch in enumerate(loader):
        scaler.scale(model(batch).mean()).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        if (i + 1) % save_every == 0:
            torch.save({"model": model.state_dict(), "step": i}, f"ckpt-{i}.pt")


def resume(model, optimizer, path):  # (a run resumes from these checkpoints: their names matter)
    state = torch.load(path)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
'''


def test_the_hf_trainer_recipe_explains_checkpoints_named_in_attempts_not_in_micro_batches(tmp_path):
    """Declared, the attempt-counting convention explains a checkpoint named after the attempts of a loop
    without accumulation; under accumulation the name counts micro-batches, which no recipe explains."""
    (tmp_path / "train.py").write_text(ATTEMPT_NAMES)
    rows = lambda: sorted(d["location"]["row"] for d in json.loads(steplint("check", "--select", "SL301", "--output-format", "json", ".", cwd=tmp_path).stdout))
    assert rows() == [12, 22]
    (tmp_path / "steplint.toml").write_text('recipe = "hf-trainer"\n')
    assert rows() == [12]



def test_every_unit_has_words_in_messages_and_in_the_trace_report():
    from steplint.model import units
    from steplint.report import trace

    known = {units.BATCHES, units.WINDOWS, units.UPDATES, units.DATA, units.EPOCHS, units.RUNS, units.STREAK, units.UNKNOWN}
    assert set(units.UNIT_WORDS) == known
    assert set(trace.UNIT_WORDS) == known
