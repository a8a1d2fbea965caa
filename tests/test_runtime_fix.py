"""The committed-step fix, proven by running it: real torch on CPU, a forced inf gradient in chosen
windows, the loop run as written and after `steplint check --fix --unsafe-fixes`."""

import importlib.util
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import List

import pytest
import torch

LOOPS = Path(__file__).parent / "loops"
BASE_LR = 0.1
WARMUP = 10


def warmup(step: int) -> float:
    return min(1.0, (step + 1) / WARMUP)


@dataclass
class Record:
    """What happened at each scaler.update(): the LR the update used and whether parameters moved."""

    lrs: List[float] = field(default_factory=list)
    changed: List[bool] = field(default_factory=list)

    def committed_lrs(self) -> List[float]:
        return [lr for lr, moved in zip(self.lrs, self.changed) if moved]


def poisoned_windows(skipped_windows, accum: int):
    """A gradient hook that makes the gradients of every backward in the skipped windows inf."""
    backward_calls = [0]

    def poison(grad):
        window = backward_calls[0] // accum
        backward_calls[0] += 1
        return torch.full_like(grad, float("inf")) if window in skipped_windows else grad

    return poison


def run(module, *, fused: bool, skipped_windows, windows: int, accum: int = 1, max_updates=None):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=BASE_LR, fused=fused)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup)
    scaler = torch.amp.GradScaler("cpu")
    record = Record()

    model.weight.register_hook(poisoned_windows(skipped_windows, accum))
    snapshot = [p.detach().clone() for p in model.parameters()]
    original_update = scaler.update

    def update(*args, **kwargs):
        record.lrs.append(optimizer.param_groups[0]["lr"])
        now = [p.detach().clone() for p in model.parameters()]
        record.changed.append(any(not torch.equal(a, b) for a, b in zip(snapshot, now)))
        snapshot[:] = now
        return original_update(*args, **kwargs)

    scaler.update = update
    batches = [torch.randn(8, 4) for _ in range(windows * accum)]
    args = (model, optimizer, scheduler, scaler, batches) + ((accum,) if accum > 1 else ())
    counter = module.train(*args, max_updates=max_updates)
    return record, counter


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fixed_copy(tmp_path: Path, name: str, unsafe: bool = True, complete: bool = True, runs: int = 1) -> Path:
    """A copy of a loop after `steplint check --fix` (and `--unsafe-fixes` unless `unsafe` is False),
    run `runs` times (a fix that the first report could not show comes with the next run); one more
    run must change nothing. `complete`: the fixes change the file and leave no diagnostic (else that
    is the test's to say)."""
    target = tmp_path / name
    shutil.copy(LOOPS / name, target)

    def check_fix():
        return subprocess.run(
            [sys.executable, "-m", "steplint", "check", "--fix", *(["--unsafe-fixes"] if unsafe else []), str(target)], capture_output=True, text=True
        )

    for _ in range(runs):
        done = check_fix()
    assert done.returncode in ((0,) if complete else (0, 1)), done.stdout + done.stderr
    if complete:
        assert target.read_text() != (LOOPS / name).read_text()
    fixed = target.read_text()
    check_fix()
    assert target.read_text() == fixed, "a second --fix changed the file"
    return target


SKIPPED = {0, 1, 2, 6}  # overflow while the scaler calibrates, and once more later
CASES = [
    pytest.param("amp_loop.py", 1, id="per-batch"),
    pytest.param("accumulation_loop.py", 4, id="accumulation"),
    pytest.param("count_window_loop.py", 4, id="count-window"),
    pytest.param("helper_loop.py", 1, id="step-helper"),
]


@pytest.mark.runtime
@pytest.mark.parametrize("fused", [False, True], ids=["foreach", "fused"])
@pytest.mark.parametrize("name,accum", CASES)
def test_unfixed_loop_drifts(name, accum, fused):
    record, counter = run(load(LOOPS / name), fused=fused, skipped_windows=SKIPPED, windows=16, accum=accum)
    committed = record.committed_lrs()
    assert record.changed == [w not in SKIPPED for w in range(16)]
    assert committed != [BASE_LR * warmup(k) for k in range(len(committed))]
    assert counter == 16  # the counter counted every attempt
    if accum == 1:
        assert committed[0] == pytest.approx(BASE_LR * warmup(3))  # three warmup steps spent on skips


@pytest.mark.runtime
@pytest.mark.parametrize("fused", [False, True], ids=["foreach", "fused"])
@pytest.mark.parametrize("name,accum", CASES)
def test_fixed_loop_follows_committed_updates(tmp_path, name, accum, fused):
    module = load(fixed_copy(tmp_path, name))
    record, counter = run(module, fused=fused, skipped_windows=SKIPPED, windows=16, accum=accum)
    committed = record.committed_lrs()
    assert record.changed == [w not in SKIPPED for w in range(16)]
    assert committed == pytest.approx([BASE_LR * warmup(k) for k in range(16 - len(SKIPPED))])
    assert counter == 16 - len(SKIPPED)


@pytest.mark.runtime
def test_fixed_loop_stops_after_committed_updates(tmp_path):
    module = load(fixed_copy(tmp_path, "amp_loop.py"))
    torch.manual_seed(0)
    record, counter = run(module, fused=False, skipped_windows={0, 1}, windows=12, max_updates=8)
    assert counter == 8 and sum(record.changed) == 8  # as written, it would stop after 6 updates
    assert len(record.changed) == 10


@pytest.mark.runtime
def test_committed_step_without_skips_and_disabled_scaler():
    from steplint.runtime import committed_step

    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for scaler in (torch.amp.GradScaler("cpu"), torch.amp.GradScaler("cpu", enabled=False)):
        scaler.scale(model(torch.ones(1, 2)).sum()).backward()
        assert committed_step(scaler, optimizer) is True
        scaler.update()
        optimizer.zero_grad()


def _clip_run(module, max_norm):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    reference = torch.nn.Linear(4, 1)
    reference.load_state_dict(model.state_dict())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [torch.randn(8, 4) * 10 for _ in range(3)]
    # the unscaled gradient norm of the first batch, computed in fp32 without a scaler
    reference(batches[0]).pow(2).mean().backward()
    expected = float(torch.nn.utils.clip_grad_norm_(reference.parameters(), float("inf")))
    norms = module.train(model, optimizer, torch.amp.GradScaler("cpu"), batches, max_norm)
    return norms[0], expected, model


@pytest.mark.runtime
@pytest.mark.parametrize(
    "name", ["clip_loop.py", "late_unscale_loop.py", "clip_method_loop.py", "clip_sibling_loop.py"],
    ids=["insert-unscale", "move-unscale", "insert-unscale-backward-elsewhere", "insert-unscale-backward-in-an-earlier-loop"],
)
def test_clip_fix_clips_the_unscaled_gradients(tmp_path, name):
    before, expected, _ = _clip_run(load(LOOPS / name), max_norm=1.0)
    assert before == pytest.approx(expected * 65536.0, rel=1e-4)  # clipped the scaled norm
    fixed = fixed_copy(tmp_path, name)
    assert fixed.read_text().count("unscale_(") == 1  # moved, never doubled (a second call raises)
    after, expected, _ = _clip_run(load(fixed), max_norm=1.0)
    assert after == pytest.approx(expected, rel=1e-5)


def _resume_run(module, path, *, interrupt: bool):
    """12 batches, an overflow in batch 2; with `interrupt`, checkpoint after batch 6 and resume in
    fresh objects. Returns the LR, loss scale and counter seen after each later batch."""
    torch.manual_seed(0)
    batches = [torch.randn(8, 4) for _ in range(12)]
    seen = [0]

    def build():
        torch.manual_seed(1)
        trainer = module.Trainer(torch.nn.Linear(4, 1))

        def poison(grad):
            seen[0] += 1
            return torch.full_like(grad, float("inf")) if seen[0] == 3 else grad

        trainer.model.weight.register_hook(poison)
        return trainer

    trainer = build()
    trainer.train(batches[:6], max_updates=100)
    if interrupt:
        trainer.save(path)
        trainer = build()
        trainer.load(path)
    after = []
    for x in batches[6:]:
        trainer.train([x], max_updates=100)
        after.append((trainer.optimizer.param_groups[0]["lr"], trainer.scaler.get_scale(), trainer.global_step))
    return after, [p.detach().clone() for p in trainer.model.parameters()]


@pytest.mark.runtime
def test_resume_fix_restores_schedule_scale_and_counter(tmp_path):
    unfixed = load(LOOPS / "checkpoint_loop.py")
    reference, reference_params = _resume_run(unfixed, tmp_path / "a.pt", interrupt=False)
    resumed, _ = _resume_run(unfixed, tmp_path / "b.pt", interrupt=True)
    assert [r[0] for r in resumed] != [r[0] for r in reference]  # the schedule restarted
    assert [r[1] for r in resumed] != [r[1] for r in reference]  # so did the loss scale

    fixed = load(fixed_copy(tmp_path, "checkpoint_loop.py"))
    source = (tmp_path / "checkpoint_loop.py").read_text()
    assert '"scheduler": self.scheduler.state_dict()' in source and 'self.scaler.load_state_dict(checkpoint["scaler"])' in source
    reference, reference_params = _resume_run(fixed, tmp_path / "c.pt", interrupt=False)
    resumed, resumed_params = _resume_run(fixed, tmp_path / "d.pt", interrupt=True)
    assert resumed == reference
    assert all(torch.equal(a, b) for a, b in zip(resumed_params, reference_params))


def _hook_run(module, skipped):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    model.weight.register_hook(poisoned_windows(skipped, 1))
    return module.train(model, [torch.randn(8, 4) for _ in range(10)])


@pytest.mark.runtime
def test_hook_fix_counts_only_committed_updates_of_a_fused_optimizer(tmp_path):
    assert _hook_run(load(LOOPS / "hook_loop.py"), {0, 4}) == 10  # blind: skipped updates counted
    assert _hook_run(load(fixed_copy(tmp_path, "hook_loop.py")), {0, 4}) == 8


@pytest.mark.runtime
def test_fixed_counter_gates_the_cadence_that_reads_it(tmp_path):
    unfixed = load(LOOPS / "eval_cadence_loop.py")
    run(unfixed, fused=False, skipped_windows=SKIPPED, windows=16)
    assert unfixed.EVALUATED == [4, 8, 12, 16]  # evaluations keyed to attempts
    fixed = load(fixed_copy(tmp_path, "eval_cadence_loop.py"))
    record, counter = run(fixed, fused=False, skipped_windows=SKIPPED, windows=16)
    assert counter == 16 - len(SKIPPED)
    assert fixed.EVALUATED == [4, 8, 12]  # once per committed multiple: a skip does not repeat one
    assert record.committed_lrs() == pytest.approx([BASE_LR * warmup(k) for k in range(16 - len(SKIPPED))])


@pytest.mark.runtime
@pytest.mark.parametrize("factory", ["lambda", "transformers-shape"])
def test_scheduler_moved_after_the_update_starts_at_the_first_value(tmp_path, factory):
    # "transformers-shape": what get_linear_schedule_with_warmup builds, a LambdaLR from 0
    schedule = warmup if factory == "lambda" else (lambda s: min(1.0, s / WARMUP))

    def used_lrs(module):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.AdamW(model.parameters(), lr=BASE_LR)
        return module.train(model, optimizer, schedule, [torch.randn(8, 4) for _ in range(12)])

    assert used_lrs(load(LOOPS / "scheduler_first_loop.py")) == pytest.approx([BASE_LR * schedule(k + 1) for k in range(12)])
    fixed = fixed_copy(tmp_path, "scheduler_first_loop.py")
    assert used_lrs(load(fixed)) == pytest.approx([BASE_LR * schedule(k) for k in range(12)])


def _optional_trainer(module, amp, seed=0):
    torch.manual_seed(seed)
    return module.Trainer(torch.nn.Linear(4, 1), amp)


@pytest.mark.runtime
@pytest.mark.parametrize("amp", [False, True], ids=["fp32-no-scaler", "amp"])
def test_checkpoint_fix_handles_an_absent_scaler_and_old_checkpoints(tmp_path, amp):
    unfixed = load(LOOPS / "optional_checkpoint_loop.py")
    # the restore's fix appears once the checkpoint stores the state: with the second run
    fixed = load(fixed_copy(tmp_path, "optional_checkpoint_loop.py", runs=2))
    batches = [torch.randn(8, 4) for _ in range(6)]

    # a checkpoint written before the fix still resumes after it: the new entries are optional
    old = _optional_trainer(unfixed, amp)
    old.train(batches)
    old.save(tmp_path / "old.pt")
    _optional_trainer(fixed, amp).load(tmp_path / "old.pt")

    # the fixed checkpoint restores the schedule (and the loss scale, where there is a scaler)
    trainer = _optional_trainer(fixed, amp)
    trainer.train(batches)
    trainer.save(tmp_path / "new.pt")
    resumed = _optional_trainer(fixed, amp, seed=1)
    resumed.load(tmp_path / "new.pt")
    assert resumed.scheduler.last_epoch == trainer.scheduler.last_epoch == 6
    assert resumed.optimizer.param_groups[0]["lr"] == trainer.optimizer.param_groups[0]["lr"]
    if amp:
        assert resumed.scaler.get_scale() == trainer.scaler.get_scale()
    else:
        assert resumed.scaler is None


@pytest.mark.runtime
def test_each_scheduler_follows_its_own_optimizer_when_they_share_a_scaler(tmp_path):
    def steps(module):
        torch.manual_seed(0)
        a, b = torch.nn.Linear(4, 1), torch.nn.Linear(4, 1)
        a.weight.register_hook(poisoned_windows({0, 3}, 1))  # only `a` overflows, in its 1st and 4th pass
        opt_a, opt_b = torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.SGD(b.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu")
        batches = [torch.randn(8, 4) for _ in range(8)]
        return module.train(opt_a, opt_b, scaler, batches, lambda x: a(x).pow(2).mean(), lambda x: b(x).pow(2).mean())

    assert steps(load(LOOPS / "gan_loop.py")) == (8, 8)  # both count a's skipped updates
    fixed = fixed_copy(tmp_path, "gan_loop.py")
    assert "if opt_a_committed:" in fixed.read_text() and "if opt_b_committed:" in fixed.read_text()
    assert steps(load(fixed)) == (6, 8)  # a's schedule skips a's two skipped updates, b's does not
