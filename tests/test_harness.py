"""steplint.runtime.StepCounters and steplint.testing, with real torch on CPU."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from steplint.runtime import StepCounters
from steplint.testing import LoopCheckFailed, LoopProbe, check_resume

from test_runtime_fix import LOOPS, fixed_copy, load, warmup

pytestmark = pytest.mark.runtime


def setup(fused=False, scaler_enabled=True):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, fused=fused)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup)
    scaler = torch.amp.GradScaler("cpu", enabled=scaler_enabled)
    return model, optimizer, scheduler, scaler


CASES = [pytest.param("amp_loop.py", 1, id="per-batch"), pytest.param("accumulation_loop.py", 4, id="accumulation")]


def run_probe(module, fused, accum):
    model, optimizer, scheduler, scaler = setup(fused)
    probe = LoopProbe(model, optimizer, scaler, scheduler, accum=accum)
    batches = [torch.randn(8, 4) for _ in range(8 * accum)]
    with probe.force_nonfinite(windows=[0, 3], value="nan"):
        module.train(model, optimizer, scheduler, scaler, batches, *((accum,) if accum > 1 else ()))
    return probe


@pytest.mark.parametrize("fused", [False, True], ids=["foreach", "fused"])
@pytest.mark.parametrize("name,accum", CASES)
def test_probe_fails_on_unconditional_scheduler_and_passes_after_fix(tmp_path, name, accum, fused):
    probe = run_probe(load(LOOPS / name), fused, accum)
    with pytest.raises(LoopCheckFailed, match=r"window 0 \(skipped\): the scheduler advanced \d+ step\(s\), expected 0"):
        probe.check_skips("committed-updates")
    fixed = run_probe(load(fixed_copy(tmp_path, name)), fused, accum)
    fixed.check_skips("committed-updates")
    assert [w.committed for w in fixed.windows] == [w not in (0, 3) for w in range(8)]


def test_probe_checks_the_loops_counter_and_batch_basis():
    model, optimizer, scheduler, scaler = setup()
    state = {"step": 0}
    probe = LoopProbe(model, optimizer, scaler, scheduler, counter=lambda: state["step"])
    with probe.force_nonfinite(windows=[1]):
        for _ in range(3):
            scaler.scale(model(torch.randn(2, 4)).sum()).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
            scheduler.step()
            state["step"] += 1
    with pytest.raises(LoopCheckFailed, match=r"window 1 \(skipped\): the scheduler advanced 1 step\(s\), expected 0"):
        probe.check_skips("committed-updates")
    # a token schedule may advance on a skipped window; the update counter still may not
    with pytest.raises(LoopCheckFailed, match=r"window 1 \(skipped\): the update counter advanced 1, expected 0"):
        probe.check_skips("tokens")
    with pytest.raises(LoopCheckFailed, match=r"window 0 \(committed\): the scheduler advanced 1 step\(s\), expected 4"):
        LoopProbe(model, optimizer, scaler, scheduler, accum=4, windows=probe.windows).check_skips("batches")


class _Loop:
    """Adapts tests/loops/checkpoint_loop.py's Trainer to check_resume."""

    def __init__(self, module):
        self.module = module
        torch.manual_seed(0)
        self.batches = [torch.randn(8, 4) for _ in range(12)]

    def build(self):
        torch.manual_seed(1)
        return self.module.Trainer(torch.nn.Linear(4, 1))

    def train(self, trainer, first, count):
        trainer.train(self.batches[first : first + count], max_updates=100)

    @staticmethod
    def save(trainer, path):
        trainer.save(path)

    @staticmethod
    def load(trainer, path):
        trainer.load(path)


def _variant(tmp_path, name, keep):
    """checkpoint_loop.py with the scheduler's or the scaler's state already saved and restored."""
    text = (LOOPS / "checkpoint_loop.py").read_text()
    text = text.replace('"optimizer": self.optimizer.state_dict()}', f'"optimizer": self.optimizer.state_dict(), "{keep}": self.{keep}.state_dict()}}')
    text = text.replace('        self.optimizer.load_state_dict(checkpoint["optimizer"])\n', f'        self.optimizer.load_state_dict(checkpoint["optimizer"])\n        self.{keep}.load_state_dict(checkpoint["{keep}"])\n')
    target = tmp_path / name
    target.write_text(text)
    return target


@pytest.mark.parametrize("missing,keep,symptom", [("scheduler", "scaler", "the learning rate"), ("scaler", "scheduler", "the loss scale")])
def test_resume_check_fails_without_state_and_passes_after_fix(tmp_path, missing, keep, symptom):
    path = _variant(tmp_path, f"omits_{missing}.py", keep)
    loop = _Loop(load(path))
    with pytest.raises(LoopCheckFailed, match=rf"window \d+: {symptom} was .* after resume, .* in the uninterrupted run"):
        check_resume(loop.build, loop.train, loop.save, loop.load, str(tmp_path / "a.pt"), 6, 6, skipped_windows=[2])
    done = subprocess.run([sys.executable, "-m", "steplint", "check", "--fix", "--unsafe-fixes", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
    loop = _Loop(load(path))
    check_resume(loop.build, loop.train, loop.save, loop.load, str(tmp_path / "b.pt"), 6, 6, skipped_windows=[2])


# -- StepCounters -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fused", [False, True], ids=["foreach", "fused"])
def test_step_counters_match_ground_truth(fused):
    model, optimizer, scheduler, scaler = setup(fused)
    counters = StepCounters.attach(optimizer, scaler=scaler, scheduler=scheduler, model=model)
    probe = LoopProbe(model, optimizer, scaler, scheduler, accum=2)
    with probe.force_nonfinite(windows=[1, 2, 5]):
        for i in range(16):
            scaler.scale(model(torch.randn(8, 4)).pow(2).mean() / 2).backward()
            if (i + 1) % 2 == 0:
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
    truth = [w.params_changed for w in probe.finish().windows]
    assert counters.batches == 16 and counters.attempts == 8
    assert counters.committed_updates == sum(truth) == 5
    assert counters.skipped_overflows == 3
    assert counters.loss_scale == scaler.get_scale()
    assert str(counters).startswith("batches=16 attempts=8 committed=5 skipped=3")
    restored = StepCounters.attach(optimizer, scaler=scaler)
    restored.load_state_dict(counters.state_dict())
    assert restored.as_dict()["committed_updates"] == 5
    counters.detach()
    restored.detach()


@pytest.mark.parametrize("attached", ["model", "scaler only"])
@pytest.mark.parametrize("report", ["before the forward pass", "after the update"])
def test_step_counters_count_a_reported_batch_once(attached, report):
    """The README's use: attached with `model=`, and the loop reports each batch's tokens."""
    model, optimizer, scheduler, scaler = setup()
    counters = StepCounters.attach(optimizer, scaler=scaler, scheduler=scheduler, model=model if attached == "model" else None)
    for i in range(12):
        batch = torch.randn(8, 4)
        if report == "before the forward pass":
            counters.batch(tokens=8)
        scaler.scale(model(batch).pow(2).mean()).backward()
        if (i + 1) % 3 == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
        if report == "after the update":
            counters.batch(tokens=8)
    assert (counters.batches, counters.attempts, counters.tokens) == (12, 4, 96)
    counters.detach()


def test_step_counters_with_two_optimizers_sharing_a_scaler():
    torch.manual_seed(0)
    a, b = torch.nn.Linear(4, 1), torch.nn.Linear(4, 1)
    opt_a, opt_b = torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.SGD(b.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    counters = StepCounters.attach([opt_a, opt_b], scaler=scaler)
    changed_a, changed_b = [], []
    for window in range(6):
        before_a, before_b = a.weight.detach().clone(), b.weight.detach().clone()
        loss = a(torch.randn(2, 4)).sum() + b(torch.randn(2, 4)).sum()
        scaler.scale(loss).backward()
        if window in (1, 4):
            b.weight.grad.fill_(float("inf"))  # only b overflows
        scaler.step(opt_a)
        scaler.step(opt_b)
        scaler.update()
        opt_a.zero_grad()
        opt_b.zero_grad()
        changed_a.append(not torch.equal(before_a, a.weight))
        changed_b.append(not torch.equal(before_b, b.weight))
    assert counters.committed_by_optimizer == [sum(changed_a), sum(changed_b)] == [6, 4]
    assert counters.as_dict()["skipped_by_optimizer"] == [0, 2]
    assert counters.attempts == 6


def test_step_counters_with_a_disabled_scaler_and_without_one():
    model, optimizer, scheduler, scaler = setup(scaler_enabled=False)
    counters = StepCounters.attach(optimizer, scaler=scaler, scheduler=scheduler)
    for _ in range(3):
        scaler.scale(model(torch.randn(2, 4)).sum()).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
    assert (counters.attempts, counters.committed_updates, counters.loss_scale) == (3, 3, 1.0)
    assert counters.lr == pytest.approx(0.1 * warmup(3))
    model, optimizer, scheduler, _ = setup()
    plain = StepCounters.attach(optimizer)
    for _ in range(4):
        plain.batch(tokens=32)
        model(torch.randn(2, 4)).sum().backward()
        optimizer.step()
    assert plain.as_dict() == {**plain.as_dict(), "batches": 4, "attempts": 4, "committed_updates": 4, "tokens": 128, "tokens_per_update": 32}


def test_static_side_works_without_torch(tmp_path):
    """`import steplint` and `steplint check` where `import torch` fails."""
    (tmp_path / "train.py").write_text((Path(__file__).parent.parent / "fixtures" / "SL101" / "plain_amp_script.py").read_text())
    script = (
        "import sys; sys.modules['torch'] = None\n"
        "import steplint, steplint.runtime, steplint.testing\n"
        "from steplint.cli import main\n"
        "sys.argv = ['steplint', 'check', '--fix', 'train.py']\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "committed_step" in (tmp_path / "train.py").read_text()
