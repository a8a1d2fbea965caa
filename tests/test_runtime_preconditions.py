"""Fixes never break a run that worked (issue 20): each loop run after `steplint check --fix
--unsafe-fixes`, with real torch on CPU. Where a fix's preconditions do not hold, the loop must come
out as it went in and keep running; where they hold, it must follow its recipe."""

import shutil

import pytest
import torch

from test_runtime_fix import BASE_LR, LOOPS, SKIPPED, fixed_copy, load, poisoned_windows, warmup


def _batches(n):
    torch.manual_seed(0)
    return [torch.randn(8, 4) for _ in range(n)]


@pytest.mark.runtime
@pytest.mark.parametrize("amp", [False, True], ids=["fp32", "amp"])
def test_no_committed_step_on_a_wrapper_with_a_step_of_its_own(tmp_path, monkeypatch, amp):
    shutil.copy(LOOPS / "speech_toolkit.py", tmp_path)  # the toolkit is part of the project the fix sees
    fixed = fixed_copy(tmp_path, "wrapper_step_loop.py", unsafe=False, complete=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    trainer = load(fixed).Trainer(torch.nn.Linear(4, 1), amp)
    trainer.train(_batches(4))  # an AttributeError on every step when `accel` went to committed_step
    assert trainer.scheduler.last_epoch == 4
    assert fixed.read_text() == (LOOPS / "wrapper_step_loop.py").read_text()


def _without_scaler(path):
    checkpoint = torch.load(path)
    del checkpoint["scaler"]
    torch.save(checkpoint, path)


@pytest.mark.runtime
@pytest.mark.parametrize("with_scaler", [True, False], ids=["checkpoint-with-scaler", "checkpoint-before-the-scaler-entry"])
def test_no_restore_of_a_scaler_before_it_exists(tmp_path, with_scaler):
    fixed = load(fixed_copy(tmp_path, "late_scaler_resume_loop.py", unsafe=False, complete=False))
    batches = _batches(4)
    fixed.main(torch.nn.Linear(4, 1), batches, save=tmp_path / "main.pt")
    trainer = fixed.Trainer(torch.nn.Linear(4, 1))
    trainer.train(batches)
    trainer.save(tmp_path / "trainer.pt")
    if not with_scaler:
        _without_scaler(tmp_path / "main.pt")
        _without_scaler(tmp_path / "trainer.pt")

    fixed.main(torch.nn.Linear(4, 1), batches, resume=tmp_path / "main.pt")  # UnboundLocalError if restored before it is built
    resumed = fixed.Trainer(torch.nn.Linear(4, 1), resume=tmp_path / "trainer.pt")  # AttributeError likewise
    resumed.train(batches)
    assert resumed.scaler.get_scale() > 0


def _cadences(module, out_dir):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    model.weight.register_hook(poisoned_windows(SKIPPED, 1))
    trainer = module.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.amp.GradScaler("cpu"))
    return module.train(trainer, _batches(16), 4, 8, out_dir)


@pytest.mark.runtime
def test_counter_is_not_gated_while_the_callers_cadences_read_it(tmp_path):
    validated, saved = _cadences(load(LOOPS / "caller_cadence_loop.py"), tmp_path)
    assert (validated, saved) == ([4, 8, 12, 16], [8, 16])  # in attempts, each once
    validated, saved = _cadences(load(fixed_copy(tmp_path, "caller_cadence_loop.py", complete=False)), tmp_path)
    # gated alone, the counter would stay on 0 while the first updates are skipped: validation and
    # checkpoints at 0, 0, 0 and again at each multiple after a skip
    assert 0 not in validated and len(set(validated)) == len(validated)
    assert 0 not in saved and len(set(saved)) == len(saved)


def _saves(module, out_dir):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    return module.train(model, torch.optim.SGD(model.parameters(), lr=0.1), _batches(16), 4, 2, out_dir)


@pytest.mark.runtime
def test_checkpoint_named_and_stored_in_committed_updates(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir(), after.mkdir()
    assert _saves(load(LOOPS / "batch_named_checkpoint_loop.py"), before) == [2, 4]
    assert sorted(p.name for p in before.iterdir()) == ["ckpt-15.pt", "ckpt-7.pt"]
    assert [torch.load(before / f"ckpt-{i}.pt")["step"] for i in (7, 15)] == [8, 16]  # batches, not updates

    fixed = load(fixed_copy(tmp_path, "batch_named_checkpoint_loop.py"))
    assert _saves(fixed, after) == [2, 4]
    assert sorted(p.name for p in after.iterdir()) == ["ckpt-2.pt", "ckpt-4.pt"]
    assert [torch.load(after / f"ckpt-{n}.pt")["step"] for n in (2, 4)] == [2, 4]


class RaisingOnOverflow:
    """An fp16-style optimizer wrapper, as fairseq's: `step()` raises OverflowError on non-finite gradients."""

    def __init__(self, optimizer):
        self.optimizer = optimizer

    def backward(self, loss):
        loss.backward()

    def step(self):
        if any(p.grad is not None and not torch.isfinite(p.grad).all() for g in self.optimizer.param_groups for p in g["params"]):
            raise OverflowError("gradient overflow")
        self.optimizer.step()

    def zero_grad(self):
        self.optimizer.zero_grad()


def _overflow_lrs(module):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    model.weight.register_hook(poisoned_windows(SKIPPED, 1))
    inner = torch.optim.SGD(model.parameters(), lr=BASE_LR)
    used = []
    inner.register_step_pre_hook(lambda opt, *_: used.append(opt.param_groups[0]["lr"]))
    module.train(model, RaisingOnOverflow(inner), torch.optim.lr_scheduler.LambdaLR(inner, warmup), _batches(12))
    return used


@pytest.mark.runtime
def test_overflow_error_handler_sets_the_commit_flag(tmp_path):
    committed = 12 - len(SKIPPED)
    assert _overflow_lrs(load(LOOPS / "overflow_error_loop.py")) != pytest.approx([BASE_LR * warmup(k) for k in range(committed)])
    fixed = fixed_copy(tmp_path, "overflow_error_loop.py", unsafe=False)
    assert _overflow_lrs(load(fixed)) == pytest.approx([BASE_LR * warmup(k) for k in range(committed)])
