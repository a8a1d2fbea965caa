"""Loop shapes of first-look repositories (issue 20), in our own words, run with real torch on CPU
before and after `steplint check --fix` (`--unsafe-fixes` where the fix is unsafe). For each shape
with a fix: with AMP and forced inf gradients, the fixed loop follows its recipe (schedules and
counters advance on committed updates only); in fp32 (a disabled scaler, or none) it does exactly
what the original did; a second `--fix` changes nothing (`fixed_copy`). For each shape whose fix
cannot be proven safe: `--fix --unsafe-fixes` leaves the file byte-identical and the message names
what blocks the fix. Correct idioms come out byte-identical with no diagnostic."""

import json
import shutil
import subprocess
import sys

import pytest
import torch

from test_runtime_accelerate import cpu_fp16_accelerator
from test_runtime_fix import BASE_LR, LOOPS, SKIPPED, fixed_copy, load, poisoned_windows, warmup
from test_runtime_preconditions import RaisingOnOverflow

BATCHES = 12
COMMITTED = BATCHES - len({w for w in SKIPPED if w < BATCHES})
RECIPE = pytest.approx([BASE_LR * warmup(k) for k in range(COMMITTED)])


def _batches(n, seed=0):
    torch.manual_seed(seed)
    return [torch.randn(8, 4) for _ in range(n)]


def _model(amp):
    """A fresh model; under AMP its gradients overflow in the SKIPPED passes."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    if amp:
        model.weight.register_hook(poisoned_windows(SKIPPED, 1))
    return model


def _recorded(optimizer):
    """The LR of each update the optimizer made (a skipped update never calls its step)."""
    used = []
    optimizer.register_step_pre_hook(lambda opt, *_: used.append(opt.param_groups[0]["lr"]))
    return used


def _parameters(model):
    return [p.detach().clone() for p in model.parameters()]


def _same(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def unchanged_by_fix(tmp_path, name):
    """The loop after `steplint check --fix --unsafe-fixes` is byte-identical; returns what it reports."""
    target = tmp_path / name
    shutil.copy(LOOPS / name, target)
    done = subprocess.run(
        [sys.executable, "-m", "steplint", "check", "--fix", "--unsafe-fixes", "--output-format", "json", str(target)], capture_output=True, text=True
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert target.read_bytes() == (LOOPS / name).read_bytes()
    return json.loads(done.stdout)


# -- shapes with a fix ------------------------------------------------------------------------------


def _returned_counter(module, amp, out_dir):
    model = _model(amp)
    optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR)
    used = _recorded(optimizer)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup)
    batches = _batches(BATCHES)
    epochs = [batches[:6], batches[6:]]
    step = module.train(model, optimizer, scheduler, torch.amp.GradScaler("cpu", enabled=amp), epochs, 4, out_dir)
    return step, used, sorted(p.name for p in out_dir.iterdir()), _parameters(model)


@pytest.mark.runtime
def test_counter_passed_in_and_returned_names_checkpoints_in_committed_updates(tmp_path):
    """A counter handed to the epoch function and returned (SL101 safe, SL102 unsafe: the names change)."""
    dirs = {k: tmp_path / k for k in ("fp32", "fp32-fixed", "amp", "amp-fixed")}
    for d in dirs.values():
        d.mkdir()
    original, fixed = load(LOOPS / "returned_counter_loop.py"), load(fixed_copy(tmp_path, "returned_counter_loop.py"))
    before, after = _returned_counter(original, False, dirs["fp32"]), _returned_counter(fixed, False, dirs["fp32-fixed"])
    assert before[:3] == after[:3] and _same(before[3], after[3])

    step, used, names, _ = _returned_counter(original, True, dirs["amp"])
    assert step == BATCHES and used != RECIPE and "step-12.pt" in names  # named after attempts
    step, used, names, _ = _returned_counter(fixed, True, dirs["amp-fixed"])
    assert step == COMMITTED and used == RECIPE
    assert names == sorted(f"step-{n}.pt" for n in range(4, COMMITTED + 1, 4))


def _save_helper(module, amp, path, resume=None):
    """Eight batches, the checkpoint saved through the helper; then eight more, resumed from it."""
    batches = _batches(16)
    first = module.train(_model(amp), batches[:8], amp=amp, save=path)
    stored = torch.load(path)["step"]
    resumed_model = torch.nn.Linear(4, 1)
    second = module.train(resumed_model, batches[8:], amp=amp, resume=resume or path)
    return first, stored, second, _parameters(resumed_model)


@pytest.mark.runtime
def test_checkpoint_and_resume_through_save_helpers(tmp_path):
    """The step saved and restored by helpers of the module (SL101 safe, SL102 unsafe: the run is longer).
    The helpers' checkpoint without the scheduler and the scaler is reported at the call (SL302), with no fix,
    and so is the resume through the helper that leaves them out (SL303)."""
    fixed_path = fixed_copy(tmp_path, "save_helper_loop.py", complete=False)
    assert fixed_path.read_text() != (LOOPS / "save_helper_loop.py").read_text()
    remaining = subprocess.run([sys.executable, "-m", "steplint", "check", "--output-format", "concise", str(fixed_path)], capture_output=True, text=True).stdout
    assert [line.split(" ")[1] for line in remaining.splitlines() if ": SL" in line] == ["SL303", "SL302"]
    original, fixed = load(LOOPS / "save_helper_loop.py"), load(fixed_path)
    before, after = _save_helper(original, False, tmp_path / "a.pt"), _save_helper(fixed, False, tmp_path / "b.pt")
    assert before[:3] == after[:3] == ((8, 8), 8, (16, 8)) and _same(before[3], after[3])

    assert _save_helper(original, True, tmp_path / "c.pt")[:3] == ((8, 8), 8, (16, 8))  # skipped updates counted
    first_passes = len({w for w in SKIPPED if w < 8})
    assert _save_helper(fixed, True, tmp_path / "d.pt")[:3] == ((8 - first_passes,) * 2, 8 - first_passes, (16 - first_passes, 8))
    # a checkpoint the original wrote still resumes in the fixed loop, its step as stored
    assert _save_helper(fixed, True, tmp_path / "e.pt", resume=tmp_path / "c.pt")[2] == (16, 8)


def _optional_amp(module, amp):
    model = _model(amp)
    optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR)
    used = _recorded(optimizer)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup)
    module.train(model, optimizer, scheduler, _batches(BATCHES), scaler=torch.amp.GradScaler("cpu") if amp else None)
    return scheduler.last_epoch, used, _parameters(model)


@pytest.mark.runtime
def test_optional_amp_flag_exists_on_the_fp32_branch(tmp_path):
    """AMP optional, no scaler in fp32 (SL101 safe): the flag is set before the branch."""
    fixed_path = fixed_copy(tmp_path, "optional_amp_loop.py", unsafe=False)
    assert "committed = True" in fixed_path.read_text()
    original, fixed = load(LOOPS / "optional_amp_loop.py"), load(fixed_path)
    before, after = _optional_amp(original, False), _optional_amp(fixed, False)  # a NameError here if the flag were unbound
    assert before[:2] == after[:2] and _same(before[2], after[2])
    assert _optional_amp(original, True)[:2] != (COMMITTED, RECIPE)
    assert _optional_amp(fixed, True)[:2] == (COMMITTED, RECIPE)


def _late_scaler(module, amp):
    trainer = module.Trainer(_model(amp), amp)
    trainer.train(_batches(BATCHES))
    return trainer.scheduler.last_epoch, trainer.optimizer.param_groups[0]["lr"], _parameters(trainer.model)


@pytest.mark.runtime
def test_trainer_whose_scaler_is_built_in_a_later_method(tmp_path):
    """`self.scaler` built in `before_train_loop()`, stepped in another method (SL101 safe)."""
    original, fixed = load(LOOPS / "late_scaler_trainer_loop.py"), load(fixed_copy(tmp_path, "late_scaler_trainer_loop.py", unsafe=False))
    before, after = _late_scaler(original, False), _late_scaler(fixed, False)
    assert before[:2] == after[:2] and before[0] == BATCHES and _same(before[2], after[2])
    assert _late_scaler(original, True)[0] == BATCHES
    last_epoch, lr, _ = _late_scaler(fixed, True)
    assert last_epoch == COMMITTED and lr == pytest.approx(0.1 * min(1.0, (COMMITTED + 1) / 10))


def _overflow_counter(module, amp):
    model = _model(amp)
    inner = torch.optim.SGD(model.parameters(), lr=BASE_LR)
    used = _recorded(inner)
    updates = module.train(model, RaisingOnOverflow(inner), _batches(BATCHES))
    return updates, used, _parameters(model)


@pytest.mark.runtime
def test_overflow_error_handler_flags_the_counter(tmp_path):
    """fairseq-style `except OverflowError`: the counter that sets the LR advances under the
    handler's flag (SL102 safe)."""
    original, fixed = load(LOOPS / "overflow_counter_loop.py"), load(fixed_copy(tmp_path, "overflow_counter_loop.py", unsafe=False))
    before, after = _overflow_counter(original, False), _overflow_counter(fixed, False)
    assert before[:2] == after[:2] and _same(before[2], after[2])
    updates, used, _ = _overflow_counter(original, True)
    assert updates == BATCHES and used != RECIPE
    updates, used, _ = _overflow_counter(fixed, True)
    assert updates == COMMITTED and used == RECIPE


def _nested_counter(module, amp):
    model = _model(amp)
    optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR)
    used = _recorded(optimizer)
    step = module.train(model, optimizer, torch.amp.GradScaler("cpu", enabled=amp), _batches(BATCHES))
    return step, used, _parameters(model)


@pytest.mark.runtime
def test_counter_advanced_by_a_nested_helper(tmp_path):
    """`nonlocal global_step; global_step += 1` in a helper nested in the training function, which
    sets the LR too (SL102 safe): the call of the helper goes under the gate."""
    fixed_path = fixed_copy(tmp_path, "nested_counter_loop.py", unsafe=False)
    assert "        if committed:\n            advance()\n" in fixed_path.read_text()
    original, fixed = load(LOOPS / "nested_counter_loop.py"), load(fixed_path)
    before, after = _nested_counter(original, False), _nested_counter(fixed, False)
    assert before[:2] == after[:2] and _same(before[2], after[2])
    step, used, _ = _nested_counter(original, True)
    assert step == BATCHES and used != pytest.approx([BASE_LR] + [BASE_LR * warmup(k + 1) for k in range(COMMITTED - 1)])
    step, used, _ = _nested_counter(fixed, True)
    # the first update runs at the optimizer's LR; each later one at the warmup value of the updates before it
    assert step == COMMITTED and used == pytest.approx([BASE_LR] + [BASE_LR * warmup(k + 1) for k in range(COMMITTED - 1)])


# -- shapes whose fix cannot be proven safe: none offered, the message says why ----------------------


def _eval_first(module, out_dir):
    model = _model(True)
    optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR)
    batches = iter(_batches(32))
    return module.train(model, optimizer, torch.amp.GradScaler("cpu"), lambda: next(batches), 8, 4, out_dir)


@pytest.mark.runtime
def test_eval_at_the_top_of_a_while_true_loop_gets_no_fix(tmp_path):
    """nanoGPT-style: the cadence check at the top of the loop reads the counter away from its
    increment. Gated alone, the counter would repeat that evaluation after every skipped update (at
    0 too), so SL102 offers no fix and names the check's line."""
    reported = unchanged_by_fix(tmp_path, "eval_first_loop.py")
    (finding,) = [d for d in reported if d["code"] == "SL102"]
    assert finding["fix"] is None and "no fix: the cadence checks on line 17 read it" in finding["message"]

    assert _eval_first(load(LOOPS / "eval_first_loop.py"), tmp_path)[1] == [0, 4, 8]
    # the gate alone, as the fix would have written it: evaluation repeats while updates are skipped
    source = (LOOPS / "eval_first_loop.py").read_text()
    gated = source.replace("        scaler.step(optimizer)\n", "        committed = committed_step(scaler, optimizer)\n")
    gated = gated.replace("        iter_num += 1\n", "        if committed:\n            iter_num += 1\n")
    (tmp_path / "gated_alone.py").write_text("from steplint.runtime import committed_step\n" + gated)
    assert _eval_first(load(tmp_path / "gated_alone.py"), tmp_path)[1] == [0, 0, 0, 0, 4, 8]


@pytest.mark.runtime
def test_checkpoint_every_n_batches_under_accumulation_gets_no_fix(tmp_path):
    """A save cadence and file name on the batch index under accumulation, and no update counter to
    key them to: SL301 offers no fix and says what to change. (The cadence itself counts batches with
    nothing to say its period means updates: SL304 is silent.)"""
    reported = {d["code"]: d for d in unchanged_by_fix(tmp_path, "batch_cadence_checkpoint_loop.py")}
    assert reported.keys() == {"SL301"} and all(d["fix"] is None for d in reported.values())
    assert "no fix: no update counter advances in the window block" in reported["SL301"]["message"]
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    load(tmp_path / "batch_cadence_checkpoint_loop.py").train(model, torch.optim.SGD(model.parameters(), lr=0.1), _batches(12), 4, 6, tmp_path)
    assert sorted(p.name for p in tmp_path.glob("ckpt-*.pt")) == ["ckpt-12.pt", "ckpt-6.pt"]  # ckpt-6: mid-window, as written


# -- correct idioms: byte-identical, no diagnostic --------------------------------------------------


@pytest.mark.runtime
def test_update_gap_under_accumulation_with_an_epoch_scheduler_is_left_alone(tmp_path):
    """yolov5-style: an update once `accumulate` batches passed since the last, an epoch scheduler."""
    assert unchanged_by_fix(tmp_path, "last_step_gap_loop.py") == []
    model = _model(True)
    optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR)
    used = _recorded(optimizer)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5)
    batches = _batches(BATCHES)
    load(tmp_path / "last_step_gap_loop.py").train(model, optimizer, scheduler, torch.amp.GradScaler("cpu"), [batches[:6], batches[6:]], 2)
    assert scheduler.last_epoch == 2 and set(used) <= {BASE_LR, BASE_LR * 0.5}  # per epoch, skips or not


@pytest.mark.runtime
def test_accelerate_prepared_scheduler_and_completed_steps_are_left_alone(tmp_path):
    """HF no_trainer-style: the prepared scheduler skips with the update by itself; `completed_steps`
    counts windows, attempts included, by that recipe's convention."""
    assert unchanged_by_fix(tmp_path, "accelerate_counter_loop.py") == []
    module = load(tmp_path / "accelerate_counter_loop.py")
    module.Accelerator = cpu_fp16_accelerator
    accum, windows = 2, 6
    model = torch.nn.Linear(4, 1)
    model.weight.register_hook(poisoned_windows(SKIPPED, accum))
    schedulers = []

    def make_scheduler(optimizer):
        schedulers.append(torch.optim.lr_scheduler.LambdaLR(optimizer, warmup))
        return schedulers[0]

    completed = module.train(model, torch.optim.SGD(model.parameters(), lr=BASE_LR), make_scheduler, _batches(accum * windows), accum, windows)
    assert completed == windows
    assert schedulers[0].last_epoch == windows - len({w for w in SKIPPED if w < windows})
