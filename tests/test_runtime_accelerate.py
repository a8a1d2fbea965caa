"""The fix that gates on `not accelerator.optimizer_step_was_skipped`, proven with real accelerate:
its prepared optimizer skips the step on fp16 overflow, and after the fix the unprepared scheduler
advances on committed updates only.

accelerate builds no gradient scaler on a CPU-only machine (fp16 needs a GPU there), so the test
hands its Accelerator torch's CPU `GradScaler`, the same class it builds for CUDA; everything else
(prepare, backward, the optimizer's skip detection, the flag) is accelerate's own code."""

import accelerate
import pytest
import torch

from test_runtime_fix import BASE_LR, LOOPS, fixed_copy, load, poisoned_windows, warmup

SKIPPED = {0, 1, 4}  # overflow while the scaler calibrates, and once more later
WINDOWS = 10


def cpu_fp16_accelerator(**options):
    accelerator = accelerate.Accelerator(cpu=True, **options)
    accelerator.scaler = torch.amp.GradScaler("cpu")
    return accelerator


def run(module, accum):
    """The loop over WINDOWS windows of `accum` batches, an inf gradient in the SKIPPED windows.
    Returns the LR each window's update used, whether it moved the weights, and the scheduler's count."""
    torch.manual_seed(0)
    module.Accelerator = cpu_fp16_accelerator
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR)
    model.weight.register_hook(poisoned_windows(SKIPPED, accum))
    lrs, moved = [], []

    def make_scheduler(prepared):
        snapshot = [model.weight.detach().clone()]

        def on_update(*args, **kwargs):
            lrs.append(prepared.param_groups[0]["lr"])
            now = model.weight.detach().clone()
            moved.append(not torch.equal(now, snapshot[0]))
            snapshot[0] = now

        prepared.scaler.update = _after(prepared.scaler.update, on_update)
        return torch.optim.lr_scheduler.LambdaLR(prepared, warmup)

    batches = [torch.randn(8, 4) for _ in range(WINDOWS * accum)]
    args = (model, optimizer, make_scheduler, batches) + ((accum,) if accum > 1 else ())
    scheduled = module.train(*args)
    return lrs, moved, scheduled


def _after(function, then):
    def wrapped(*args, **kwargs):
        result = function(*args, **kwargs)
        then()
        return result

    return wrapped


CASES = [pytest.param("accelerate_loop.py", 1, id="per-batch"), pytest.param("accelerate_window_loop.py", 4, id="windows")]


@pytest.mark.runtime
@pytest.mark.parametrize("name,accum", CASES)
def test_unfixed_scheduler_spends_warmup_on_skipped_updates(name, accum):
    lrs, moved, scheduled = run(load(LOOPS / name), accum)
    assert moved == [w not in SKIPPED for w in range(WINDOWS)]
    assert scheduled == WINDOWS
    committed = [lr for lr, m in zip(lrs, moved) if m]
    assert committed[0] == pytest.approx(BASE_LR * warmup(2))  # two warmup steps went to skips


@pytest.mark.runtime
@pytest.mark.parametrize("name,accum", CASES)
def test_fixed_scheduler_follows_committed_updates(tmp_path, name, accum):
    fixed = fixed_copy(tmp_path, name, unsafe=False)
    assert "optimizer_step_was_skipped" in fixed.read_text()
    lrs, moved, scheduled = run(load(fixed), accum)
    assert moved == [w not in SKIPPED for w in range(WINDOWS)]
    assert scheduled == WINDOWS - len(SKIPPED)
    committed = [lr for lr, m in zip(lrs, moved) if m]
    assert committed == pytest.approx([BASE_LR * warmup(k) for k in range(WINDOWS - len(SKIPPED))])
