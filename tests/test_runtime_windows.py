"""Fixes of the window rules (SL107, SL108, SL109, SL205), proven by running them: real torch on
CPU, each loop run as written and after `steplint check --fix` (with `--unsafe-fixes` for SL107)."""

import sys
import types

import pytest
import torch

from test_runtime_fix import LOOPS, fixed_copy, load

ACCUM = 4


def _window_sizes(train, batches):
    """Micro-batches behind each optimizer update, and the final parameters."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    seen, sizes = [0], []
    model.weight.register_hook(lambda grad: seen.__setitem__(0, seen[0] + 1))

    def count(*_):
        sizes.append(seen[0])
        seen[0] = 0

    optimizer.register_step_post_hook(count)
    train(model, optimizer, batches, ACCUM)
    return sizes, [p.detach().clone() for p in model.parameters()]


def _reference(batches):
    """Plain windows of ACCUM micro-batches each: the loss averaged over the window."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for w in range(len(batches) // ACCUM):
        window = batches[w * ACCUM : (w + 1) * ACCUM]
        sum(model(x).pow(2).mean() / ACCUM for x in window).backward()
        optimizer.step()
        optimizer.zero_grad()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.runtime
@pytest.mark.parametrize(
    "function, first_window",
    [("train", 1), ("train_counted", 1), ("train_through_helpers", 1), ("train_counted_first", ACCUM - 1), ("train_from_one", ACCUM - 1),
     ("train_by_position", 1)],
)
def test_off_by_one_fix_makes_full_windows(tmp_path, function, first_window):
    torch.manual_seed(1)
    batches = [torch.randn(8, 4) for _ in range(3 * ACCUM)]
    before, _ = _window_sizes(getattr(load(LOOPS / "window_loop.py"), function), batches)
    assert before == [first_window, ACCUM, ACCUM]  # the first update saw too few micro-batches
    after, params = _window_sizes(getattr(load(fixed_copy(tmp_path, "window_loop.py", unsafe=False)), function), batches)
    assert after == [ACCUM, ACCUM, ACCUM]
    assert all(torch.allclose(a, b) for a, b in zip(params, _reference(batches)))


@pytest.mark.runtime
def test_off_by_one_fix_makes_full_windows_in_a_script(tmp_path, monkeypatch):
    """The loop at the top level of a script: the same fix, the same full windows."""
    torch.manual_seed(1)
    batches = [torch.randn(8, 4) for _ in range(3 * ACCUM)]

    def run(path):
        def train(model, optimizer, batches, accum):  # (the script reads its inputs at import)
            inputs = types.ModuleType("script_inputs")
            vars(inputs).update(model=model, optimizer=optimizer, batches=batches, accum=accum)
            monkeypatch.setitem(sys.modules, "script_inputs", inputs)
            load(path)

        return _window_sizes(train, batches)

    before, _ = run(LOOPS / "window_script.py")
    assert before == [ACCUM - 1, ACCUM, ACCUM]
    after, params = run(fixed_copy(tmp_path, "window_script.py", unsafe=False))
    assert after == [ACCUM, ACCUM, ACCUM]
    assert all(torch.allclose(a, b) for a, b in zip(params, _reference(batches)))


DECAY = 0.9


def _ema_run(train, batches):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ema = train(model, optimizer, batches, ACCUM, DECAY)
    return int(ema.n_averaged), [p.detach().clone() for p in ema.module.parameters()]


def _reference_ema(batches):
    """The EMA of the weights after each update: the first update's weights, then decayed."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    average = None
    for w in range(len(batches) // ACCUM):
        sum(model(x).pow(2).mean() / ACCUM for x in batches[w * ACCUM : (w + 1) * ACCUM]).backward()
        optimizer.step()
        optimizer.zero_grad()
        now = [p.detach().clone() for p in model.parameters()]
        average = now if average is None else [DECAY * a + (1 - DECAY) * p for a, p in zip(average, now)]
    return average


@pytest.mark.runtime
def test_ema_fix_counts_updates(tmp_path):
    torch.manual_seed(1)
    batches = [torch.randn(8, 4) for _ in range(5 * ACCUM)]
    reference = _reference_ema(batches)
    count, before = _ema_run(load(LOOPS / "ema_loop.py").train, batches)
    assert count == 5 * ACCUM
    assert not all(torch.allclose(a, b) for a, b in zip(before, reference))
    count, after = _ema_run(load(fixed_copy(tmp_path, "ema_loop.py", unsafe=False)).train, batches)
    assert count == 5
    assert all(torch.allclose(a, b) for a, b in zip(after, reference))


def _unscale_run(train, batches, max_norm):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train(model, optimizer, torch.amp.GradScaler("cpu"), batches, ACCUM, max_norm)
    return [p.detach().clone() for p in model.parameters()]


def _reference_clipped(batches, max_norm):
    """fp32 accumulation, the window's gradient clipped once, then the update."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for w in range(len(batches) // ACCUM):
        sum(model(x).pow(2).mean() / ACCUM for x in batches[w * ACCUM : (w + 1) * ACCUM]).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        optimizer.zero_grad()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.runtime
def test_unscale_fix_unscales_once_per_window(tmp_path):
    torch.manual_seed(1)
    batches = [torch.randn(8, 4) * 10 for _ in range(3 * ACCUM)]
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        _unscale_run(load(LOOPS / "unscale_loop.py").train, batches, 1.0)
    after = _unscale_run(load(fixed_copy(tmp_path, "unscale_loop.py", unsafe=False)).train, batches, 1.0)
    reference = _reference_clipped(batches, 1.0)
    assert all(torch.allclose(a, b, rtol=1e-5) for a, b in zip(after, reference))
    assert not all(torch.allclose(a, b) for a, b in zip(reference, _reference_clipped(batches, float("inf"))))  # the clip mattered


MAX_LR = 0.1


def _schedule_run(train, batches, epochs):
    """The LR each update used, and the scheduler at the end."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=MAX_LR)
    used = []
    optimizer.register_step_pre_hook(lambda opt, *_: used.append(opt.param_groups[0]["lr"]))
    scheduler = train(model, optimizer, batches, ACCUM, epochs, MAX_LR)
    return used, scheduler


@pytest.mark.runtime
def test_schedule_length_fix_ends_the_schedule_on_the_last_update(tmp_path):
    epochs, per_epoch = 3, 2 * ACCUM + 1  # a partial window at the end of each epoch
    batches = [torch.randn(8, 4) for _ in range(per_epoch)]
    updates = epochs * (per_epoch // ACCUM)
    final_lr = MAX_LR / 25.0 / 1e4  # OneCycleLR's default div_factor and final_div_factor

    used, scheduler = _schedule_run(load(LOOPS / "schedule_length_loop.py").train, batches, epochs)
    assert len(used) == updates and used[-1] > 100 * final_lr  # stopped in the middle of the cycle
    scheduler.step()  # and had most of it left

    used, scheduler = _schedule_run(load(fixed_copy(tmp_path, "schedule_length_loop.py")).train, batches, epochs)
    planned = torch.optim.lr_scheduler.OneCycleLR(torch.optim.SGD([torch.zeros(1)], lr=MAX_LR), max_lr=MAX_LR, total_steps=updates)
    recipe = []
    for _ in range(updates):
        recipe.append(planned.get_last_lr()[0])
        planned.step()
    assert used == pytest.approx(recipe)  # one schedule step per update, over the whole cycle
    assert used[-1] == pytest.approx(final_lr)
    with pytest.raises(ValueError, match="Tried to step"):
        scheduler.step()  # the schedule ended with the last update
