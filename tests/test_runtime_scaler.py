"""Safe fixes of SL105, SL202, SL203 and SL204, proven by running them: real torch on CPU,
`torch.amp.GradScaler("cpu")`, inf gradients forced in chosen batches, each loop run as written and
after `steplint check --fix` (safe fixes only)."""

import pytest
import torch

from test_runtime_fix import BASE_LR, LOOPS, fixed_copy, load, poisoned_windows, warmup

BATCHES = 16
SKIPPED = {0, 1, 2, 6}  # overflow while the scaler calibrates, and once more later
COMMITTED = BATCHES - len(SKIPPED)
ACCUM = 4  # micro-batches per window in the accumulation loops


def _record_scales(scaler):
    """The loss scale after each scaler.update(), as the loop runs."""
    scales = []
    original_update = scaler.update

    def update(*args, **kwargs):
        original_update(*args, **kwargs)
        scales.append(scaler.get_scale())

    scaler.update = update
    return scales


def _batches(n):
    torch.manual_seed(1)
    return [torch.randn(8, 4) for _ in range(n)]


# -- SL105: the guess replaced by committed_step's result ------------------------------------------


def _guess_run(train):
    """The LR each committed update used, the loop's own count, the scheduler's count and the loss
    scale after each update. growth_interval=2: the scale also grows during the run."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup)
    scaler = torch.amp.GradScaler("cpu", growth_interval=2)
    model.weight.register_hook(poisoned_windows(SKIPPED, 1))
    used = []  # (a non-fused optimizer's step runs, and its post-hook fires, only when the update commits)
    optimizer.register_step_post_hook(lambda opt, *_: used.append(opt.param_groups[0]["lr"]))
    scales = _record_scales(scaler)
    completed = train(model, optimizer, scheduler, scaler, _batches(BATCHES))
    return used, completed, scheduler.last_epoch, scales


def _growths(scales):
    return sum(b > a for a, b in zip([65536.0] + scales, scales))


GUESSES = [
    # (function, what the unfixed loop counts: "commits" when the guess happens to be right here)
    pytest.param("train_flag", "commits", id="flag-before<=after"),
    pytest.param("train_skip_flag", "commits", id="flag-before>after-negated"),
    pytest.param("train_strict", "growths", id="strict-before<after"),
    pytest.param("train_helper", "growths", id="strict-around-a-step-helper"),
    pytest.param("train_read_before_update", "attempts", id="read-before-update"),
    pytest.param("train_loss_finite", "attempts", id="loss-isfinite"),
    pytest.param("train_nan_check", "attempts", id="not-loss-isnan"),
]


@pytest.mark.runtime
@pytest.mark.parametrize("function,unfixed_counts", GUESSES)
def test_guessed_signal_before_and_after_the_fix(tmp_path, function, unfixed_counts):
    used, completed, stepped, scales = _guess_run(getattr(load(LOOPS / "guessed_skip_loop.py"), function))
    assert len(used) == COMMITTED and _growths(scales) >= 2  # the scale backed off and grew back
    expected = {"commits": COMMITTED, "growths": _growths(scales), "attempts": BATCHES}[unfixed_counts]
    assert completed == stepped == expected
    if unfixed_counts != "commits":
        assert used != pytest.approx([BASE_LR * warmup(k) for k in range(COMMITTED)])

    fixed = fixed_copy(tmp_path, "guessed_skip_loop.py", unsafe=False)
    used, completed, stepped, _ = _guess_run(getattr(load(fixed), function))
    assert len(used) == COMMITTED
    assert completed == stepped == COMMITTED  # the schedule and the counter advanced on commits only
    assert used == pytest.approx([BASE_LR * warmup(k) for k in range(COMMITTED)])


@pytest.mark.runtime
def test_guess_fix_pairs_each_scheduler_with_its_own_optimizer(tmp_path):
    def run(module):
        torch.manual_seed(0)
        d, g = torch.nn.Linear(4, 1), torch.nn.Linear(4, 1)
        d.weight.register_hook(poisoned_windows({0, 3}, 1))  # only the discriminator overflows
        opt_d, opt_g = torch.optim.SGD(d.parameters(), lr=0.1), torch.optim.SGD(g.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu", growth_interval=2)
        return module.train_pair(opt_d, opt_g, scaler, _batches(8), lambda x: d(x).pow(2).mean(), lambda x: g(x).pow(2).mean())

    assert run(load(LOOPS / "guessed_skip_loop.py")) == (6, 8)
    fixed = fixed_copy(tmp_path, "guessed_skip_loop.py", unsafe=False)
    assert "if opt_d_committed:" in fixed.read_text() and "if opt_g_committed:" in fixed.read_text()
    assert run(load(fixed)) == (6, 8)


# -- SL202: scaler.update() inserted after the step ------------------------------------------------


def _sgd_reference(batches, skipped):
    """Plain fp32 SGD that leaves out the skipped batches."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for i, x in enumerate(batches):
        if i not in skipped:
            model(x).pow(2).mean().backward()
            optimizer.step()
        optimizer.zero_grad()
    return [p.detach().clone() for p in model.parameters()]


def _window_reference(batches, skipped_windows):
    """fp32 accumulation: each window's gradient summed over its micro-batches, then the update."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    applied = []
    for w in range(len(batches) // ACCUM):
        if w not in skipped_windows:
            sum(model(x).pow(2).mean() / ACCUM for x in batches[w * ACCUM : (w + 1) * ACCUM]).backward()
            applied.append([p.grad.clone() for p in model.parameters()])
            optimizer.step()
        optimizer.zero_grad()
    return applied, [p.detach().clone() for p in model.parameters()]


def _close(params, reference):
    return all(torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(params, reference))


@pytest.mark.runtime
def test_inserted_update_backs_off_the_scale(tmp_path):
    batches = _batches(10)

    def run(module):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model.weight.register_hook(poisoned_windows({0, 1, 5}, 1))
        moved = []
        optimizer.register_step_post_hook(lambda *_: moved.append(True))
        scaler = module.train(model, optimizer, batches)
        return scaler, moved, [p.detach().clone() for p in model.parameters()]

    with pytest.raises(RuntimeError, match="step\\(\\) has already been called since the last update"):
        run(load(LOOPS / "missing_update_loop.py"))
    scaler, moved, params = run(load(fixed_copy(tmp_path, "missing_update_loop.py", unsafe=False)))
    assert scaler.get_scale() == 65536.0 * 0.5**3  # backed off once per overflow
    assert len(moved) == 7 and _close(params, _sgd_reference(batches, {0, 1, 5}))


@pytest.mark.runtime
def test_inserted_update_follows_both_steps_of_a_shared_scaler(tmp_path):
    batches = _batches(10)

    def run(module):
        torch.manual_seed(0)
        a = torch.nn.Linear(4, 1)
        torch.manual_seed(0)
        b = torch.nn.Linear(4, 1)
        a.weight.register_hook(poisoned_windows({0, 4}, 1))  # only `a` overflows
        opt_a, opt_b = torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.SGD(b.parameters(), lr=0.1)
        scaler = module.train_pair(a, b, opt_a, opt_b, batches)
        return scaler, [p.detach().clone() for p in a.parameters()], [p.detach().clone() for p in b.parameters()]

    with pytest.raises(RuntimeError, match="step\\(\\) has already been called since the last update"):
        run(load(LOOPS / "missing_update_loop.py"))
    fixed = fixed_copy(tmp_path, "missing_update_loop.py", unsafe=False)
    text = fixed.read_text()
    assert "scaler.step(opt_a)\n        scaler.step(opt_b)\n        scaler.update()\n" in text  # one update, after both steps
    scaler, a_params, b_params = run(load(fixed))
    assert scaler.get_scale() == 65536.0 * 0.5**2
    assert _close(a_params, _sgd_reference(batches, {0, 4}))
    assert _close(b_params, _sgd_reference(batches, set()))  # b's gradients unscaled by the scale they had

    # what an update after each step (the fix before) does: b's gradients, scaled before a's
    # overflow lowered the scale, are unscaled by the lowered one
    between = tmp_path / "between.py"
    between.write_text(text.replace("scaler.step(opt_a)\n", "scaler.step(opt_a)\n        scaler.update()\n"))
    _, _, b_params = run(load(between))
    assert not _close(b_params, _sgd_reference(batches, set()))


@pytest.mark.runtime
def test_inserted_update_in_the_window_block(tmp_path):
    batches = _batches(4 * ACCUM)

    def run(module):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model.weight.register_hook(poisoned_windows({1}, ACCUM))  # window 1 overflows
        scaler = module.train_window(model, optimizer, batches, ACCUM)
        return scaler, [p.detach().clone() for p in model.parameters()]

    with pytest.raises(RuntimeError, match="step\\(\\) has already been called since the last update"):
        run(load(LOOPS / "missing_update_loop.py"))
    scaler, params = run(load(fixed_copy(tmp_path, "missing_update_loop.py", unsafe=False)))
    assert scaler.get_scale() == 32768.0  # one update per window: backed off once
    assert _close(params, _window_reference(batches, {1})[1])


# -- SL203: optimizer.step() becomes scaler.step(optimizer) ---------------------------------------


def _bypass_run(train, batches, skipped, *extra):
    """Parameters after each optimizer update, at the end, and the error that stopped the loop."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.weight.register_hook(poisoned_windows(skipped, 1))
    after_each = []
    optimizer.register_step_post_hook(lambda *_: after_each.append([p.detach().clone() for p in model.parameters()]))
    error = None
    try:
        train(model, optimizer, torch.amp.GradScaler("cpu"), batches, *extra)
    except AssertionError as raised:
        error = raised
    return after_each, [p.detach().clone() for p in model.parameters()], error


def _finite(params):
    return all(bool(torch.isfinite(p).all()) for p in params)


@pytest.mark.runtime
def test_step_through_the_scaler_applies_unscaled_gradients(tmp_path):
    batches = _batches(6)
    torch.manual_seed(0)
    start = [p.detach().clone() for p in torch.nn.Linear(4, 1).parameters()]
    first = _sgd_reference(batches[:1], set())

    after_each, _, error = _bypass_run(load(LOOPS / "bypass_loop.py").train, batches, set())
    assert len(after_each) == 1 and "No inf checks were recorded" in str(error)  # update() then raises
    step = [a - s for a, s in zip(after_each[0], start)]
    intended = [f - s for f, s in zip(first, start)]
    assert all(torch.allclose(a, 65536.0 * b, rtol=1e-4) for a, b in zip(step, intended))  # the scaled gradient applied

    fixed = load(fixed_copy(tmp_path, "bypass_loop.py", unsafe=False))
    after_each, params, error = _bypass_run(fixed.train, batches, {2})
    assert error is None and len(after_each) == 5  # the inf batch skipped
    assert _finite(params) and _close(params, _sgd_reference(batches, {2}))


@pytest.mark.runtime
def test_step_through_the_scaler_skips_inf_after_unscale(tmp_path):
    batches = _batches(6)
    after_each, params, error = _bypass_run(load(LOOPS / "bypass_loop.py").train_clipped, batches, {2}, 1e6)
    assert error is None and len(after_each) == 6
    assert _close(after_each[1], _sgd_reference(batches[:2], set()))  # right until the inf batch
    assert not _finite(after_each[2]) and not _finite(params)  # then inf/NaN in the weights for good

    fixed = load(fixed_copy(tmp_path, "bypass_loop.py", unsafe=False))
    after_each, params, error = _bypass_run(fixed.train_clipped, batches, {2}, 1e6)
    assert error is None and len(after_each) == 5
    assert _finite(params) and _close(params, _sgd_reference(batches, {2}))


@pytest.mark.runtime
def test_step_through_the_scaler_at_the_window_end(tmp_path):
    batches = _batches(4 * ACCUM)
    torch.manual_seed(0)
    start = [p.detach().clone() for p in torch.nn.Linear(4, 1).parameters()]
    _, first = _window_reference(batches[:ACCUM], set())

    after_each, _, error = _bypass_run(load(LOOPS / "bypass_loop.py").train_window, batches, set(), ACCUM)
    assert len(after_each) == 1 and "No inf checks were recorded" in str(error)
    step = [a - s for a, s in zip(after_each[0], start)]
    intended = [f - s for f, s in zip(first, start)]
    assert all(torch.allclose(a, 65536.0 * b, rtol=1e-4) for a, b in zip(step, intended))

    fixed = load(fixed_copy(tmp_path, "bypass_loop.py", unsafe=False))
    after_each, params, error = _bypass_run(fixed.train_window, batches, {2 * ACCUM + 1}, ACCUM)  # an inf in window 2
    assert error is None and len(after_each) == 3
    assert _finite(params) and _close(params, _window_reference(batches, {2})[1])


@pytest.mark.runtime
def test_step_and_update_both_inserted_where_neither_was(tmp_path):
    """SL203 and then SL202 on the same loop: one `--fix` gives the documented pair."""
    batches = _batches(6)
    torch.manual_seed(0)
    start = [p.detach().clone() for p in torch.nn.Linear(4, 1).parameters()]
    first = _sgd_reference(batches[:1], set())

    def run(train):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model.weight.register_hook(poisoned_windows({3}, 1))
        after_each = []
        optimizer.register_step_post_hook(lambda *_: after_each.append([p.detach().clone() for p in model.parameters()]))
        scaler = train(model, optimizer, batches)
        return scaler, after_each, [p.detach().clone() for p in model.parameters()]

    scaler, after_each, params = run(load(LOOPS / "bypass_loop.py").train_unscaled_never)
    step = [a - s for a, s in zip(after_each[0], start)]
    assert all(torch.allclose(a, 65536.0 * (f - s), rtol=1e-4) for a, f, s in zip(step, first, start))
    assert len(after_each) == 6 and not _finite(params)  # the inf batch went in too

    fixed = fixed_copy(tmp_path, "bypass_loop.py", unsafe=False)
    scaler, after_each, params = run(load(fixed).train_unscaled_never)
    assert len(after_each) == 5 and scaler.get_scale() == 32768.0
    assert _finite(params) and _close(params, _sgd_reference(batches, {3}))


# -- SL204: a per-batch scaler.update() moved into the window block --------------------------------


def _window_run(train, batches, skipped_windows):
    """Gradients each committed update applied, the loss scale after each update(), the final
    parameters, and the error that stopped the loop."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    model.weight.register_hook(poisoned_windows(skipped_windows, ACCUM))
    applied = []
    optimizer.register_step_pre_hook(lambda *_: applied.append([p.grad.clone() for p in model.parameters()]))
    scales = _record_scales(scaler)
    error = None
    try:
        train(model, optimizer, scaler, batches, ACCUM)
    except AssertionError as raised:
        error = raised
    return applied, scales, [p.detach().clone() for p in model.parameters()], error


@pytest.mark.runtime
@pytest.mark.parametrize("function", ["train", "train_logged"], ids=["update-after-window", "update-after-logging"])
def test_update_moved_into_the_window(tmp_path, function):
    windows, skipped = 5, {1}
    batches = _batches(windows * ACCUM)
    applied, scales, _, error = _window_run(getattr(load(LOOPS / "window_update_loop.py"), function), batches, skipped)
    assert "No inf checks were recorded" in str(error) and applied == [] and scales == []  # update() on the first micro-batch

    fixed = load(fixed_copy(tmp_path, "window_update_loop.py", unsafe=False))
    applied, scales, params, error = _window_run(getattr(fixed, function), batches, skipped)
    assert error is None
    assert scales == [65536.0, 32768.0, 32768.0, 32768.0, 32768.0]  # one update per window, backed off once
    reference_applied, reference_params = _window_reference(batches, skipped)
    assert len(applied) == windows - len(skipped)
    assert all(_close(a, b) for a, b in zip(applied, reference_applied))  # the window's fp32 gradient sum
    assert _close(params, reference_params)
