"""A run parses each file it lints with LibCST once, and models it once when the rest of the project
tells its model nothing: the project index's parse and model are the lint's. (Counted by wrapping
LibCST's parser and the model's builder around a real `steplint check` over a small project.)"""

import collections
import textwrap

import libcst
import pytest
from click.testing import CliRunner

import steplint.model
from steplint.cli import main

TRAIN = '''
import torch

from data import make_loader


def train(model, steps):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 100))
    scaler = torch.amp.GradScaler("cuda")
    for x, y in make_loader(steps):
        scaler.scale(torch.nn.functional.mse_loss(model(x), y)).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        scheduler.step()
'''

RESUME = '''
import torch


def resume(path, model, loader):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, total_iters=10)
    state = torch.load(path)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    for x in loader:
        model(x).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
'''

DATA = '''
import torch


def make_loader(steps):
    return [(torch.randn(4, 8), torch.randn(4, 1)) for _ in range(steps)]
'''

# A helper in another module that steps the scaler it is given: the trainer's model reads its summary.
HELPER = '''
def amp_step(scaler, optimizer):
    scaler.step(optimizer)
    scaler.update()
'''

TRAIN_THROUGH_HELPER = '''
import torch

from helper import amp_step


def train(model, loader):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 10))
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        scaler.scale(model(x).mean()).backward()
        amp_step(scaler, optimizer)
        scheduler.step()
'''


@pytest.fixture
def counted(monkeypatch):
    """Counts of LibCST parses and model builds, by the text parsed or modelled."""
    parses, builds = collections.Counter(), collections.Counter()
    parse_module, build_model = libcst.parse_module, steplint.model.build_model

    def counting_parse(text, *args, **kwargs):
        parses[text] += 1
        return parse_module(text, *args, **kwargs)

    def counting_build(source, *args, **kwargs):
        builds[source.text] += 1
        return build_model(source, *args, **kwargs)

    monkeypatch.setattr(libcst, "parse_module", counting_parse)
    monkeypatch.setattr(steplint.model, "build_model", counting_build)
    return parses, builds


def check(folder, monkeypatch):
    monkeypatch.chdir(folder)
    return CliRunner().invoke(main, ["check", "--no-cache", "--jobs", "1", "--output-format", "concise", "."])


def write(folder, files):
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))


def test_each_linted_file_is_parsed_once_and_modelled_once(tmp_path, monkeypatch, counted):
    write(tmp_path, {"train.py": TRAIN, "resume.py": RESUME, "data.py": DATA})
    done = check(tmp_path, monkeypatch)
    assert "SL101" in done.output and "SL303" in done.output, done.output  # both files were linted, with the project
    parses, builds = counted
    for name in ("train.py", "resume.py"):
        text = (tmp_path / name).read_text()
        assert parses[text] == 1, name
        assert builds[text] == 1, name


def test_a_project_helper_that_acts_changes_the_model_but_not_the_parse(tmp_path, monkeypatch, counted):
    write(tmp_path, {"train.py": TRAIN_THROUGH_HELPER, "helper.py": HELPER})
    done = check(tmp_path, monkeypatch)
    assert "SL101" in done.output, done.output  # the scheduler follows the helper's skippable step
    parses, builds = counted
    text = (tmp_path / "train.py").read_text()
    assert parses[text] == 1
    # Its index model knows nothing of the helper; the lint's model reads the helper's summary.
    assert builds[text] == 2
