"""Test a training loop the way the recipe says: force a non-finite gradient in chosen windows,
check that nothing moved that should not have, and compare a resumed run with an uninterrupted one.

Registered as a pytest plugin (fixture `steplint_probe`); usable without pytest too. torch is
imported only when a probe is used, so `import steplint.testing` works where torch is absent.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

BASES = ("committed-updates", "tokens", "batches")


class LoopCheckFailed(AssertionError):
    """A check of the loop failed; the message says which window, which counter, expected vs actual."""


@dataclass
class Window:
    """What one update attempt did, read at its `scaler.update()`."""

    number: int
    forced: bool  # a non-finite gradient was forced into it
    committed: bool  # per the scaler's found-inf record of the first optimizer
    params_changed: bool
    optimizer_state_changed: bool
    scheduler_steps: Optional[int]  # how far the scheduler advanced during the window
    counter_steps: Optional[int]  # how far the loop's own update counter advanced
    lr: float
    loss_scale: float


@dataclass
class LoopProbe:
    """Watches a loop's model, optimizer, scaler and scheduler, one record per window.

    `counter` reads the loop's own committed-update counter (`lambda: trainer.global_step`), if any.
    """

    model: Any
    optimizer: Any
    scaler: Any
    scheduler: Any = None
    accum: int = 1
    counter: Optional[Callable[[], int]] = None
    windows: List[Window] = field(default_factory=list)
    _forced: set = field(default_factory=set)
    _offset: int = 0  # window number of the first window this probe sees
    _marks: tuple = (None, None)  # scheduler and counter readings at the last window's update()

    def __post_init__(self) -> None:
        self._snapshot = self._state()
        original = self.scaler.update

        def update(*args, **kwargs):
            self._record()
            return original(*args, **kwargs)

        self.scaler.update = update

    @contextlib.contextmanager
    def force_nonfinite(self, windows: Iterable[int], params: Optional[Sequence[Any]] = None, value: str = "inf"):
        """Make the gradients of `params` (default: all) inf or nan in the given windows, counted
        from 0 by backward passes (`accum` per window), without touching the loop's code."""
        import torch

        if value not in ("inf", "nan"):
            raise ValueError("value must be 'inf' or 'nan'")
        self._forced = set(windows)
        poison = float(value)
        targets = list(params) if params is not None else [p for p in self.model.parameters() if p.requires_grad]
        handles = []
        for parameter in targets:
            calls = [0]

            def hook(grad, calls=calls):
                window = self._offset + calls[0] // self.accum
                calls[0] += 1
                return torch.full_like(grad, poison) if window in self._forced else grad

            handles.append(parameter.register_hook(hook))
        try:
            yield self
        finally:
            for handle in handles:
                handle.remove()

    # -- checks ----------------------------------------------------------------------------------

    def check_skips(self, basis: str = "committed-updates") -> None:
        """On forced windows: parameters and optimizer state unchanged, the scheduler and the counter
        still; on the others: they moved. `basis` says what the scheduler counts."""
        if basis not in BASES:
            raise ValueError(f"basis must be one of {', '.join(BASES)}")
        self.finish()
        if not self.windows:
            raise LoopCheckFailed("no window ended: the loop never called scaler.update()")
        for w in self.windows:
            if w.forced and w.committed:
                raise LoopCheckFailed(f"window {w.number}: a non-finite gradient was forced, but the scaler recorded no overflow")
            if w.params_changed != w.committed:
                raise LoopCheckFailed(f"window {w.number}: parameters {'changed' if w.params_changed else 'did not change'} although the update {'was skipped' if not w.committed else 'committed'}")
            if w.forced and w.optimizer_state_changed:
                raise LoopCheckFailed(f"window {w.number}: the optimizer state changed on a skipped update")
            if w.scheduler_steps is not None:
                expected = {"committed-updates": int(w.committed), "batches": self.accum, "tokens": None}[basis]
                if expected is None:
                    if w.scheduler_steps < 1:
                        raise LoopCheckFailed(f"window {w.number}: the scheduler did not advance; a token schedule advances on every window")
                elif w.scheduler_steps != expected:
                    raise LoopCheckFailed(
                        f"window {w.number} ({'skipped' if not w.committed else 'committed'}): the scheduler advanced "
                        f"{w.scheduler_steps} step(s), expected {expected} for a {basis} schedule"
                    )
            if w.counter_steps is not None and w.counter_steps != int(w.committed):
                raise LoopCheckFailed(
                    f"window {w.number} ({'skipped' if not w.committed else 'committed'}): the update counter advanced "
                    f"{w.counter_steps}, expected {int(w.committed)}"
                )

    # -- recording -------------------------------------------------------------------------------

    def _state(self) -> Dict[str, Any]:
        params = [p.detach().clone() for p in self.model.parameters()]
        moments = {
            (id(param), name): value.detach().clone()
            for param, state in self.optimizer.state.items()
            for name, value in state.items()
            if hasattr(value, "detach")
        }
        return {
            "params": params,
            "optimizer": moments,
            "scheduler": getattr(self.scheduler, "last_epoch", None),
            "counter": self.counter() if self.counter else None,
        }

    def _record(self) -> None:
        import torch

        from steplint.runtime import _found_no_inf

        def changed(a, b):
            return len(a) != len(b) or any(not torch.equal(x, y) for x, y in zip(a, b))

        def state_changed(a, b):
            # A fused optimizer creates its state (zeros, step 0) even on a skipped first update.
            return any(not torch.equal(a[k], v) if k in a else bool(v.count_nonzero()) for k, v in b.items())

        now = self._state()
        self._settle(now)
        before = self._snapshot
        number = self._offset + len(self.windows)
        self.windows.append(
            Window(
                number,
                number in self._forced,
                _found_no_inf(self.scaler, self.optimizer),
                changed(before["params"], now["params"]),
                state_changed(before["optimizer"], now["optimizer"]),
                None,
                None,
                float(self.optimizer.param_groups[0]["lr"]),
                self._scale(),
            )
        )
        self._marks = (now["scheduler"], now["counter"])
        self._snapshot = now

    def _settle(self, now: Dict[str, Any]) -> None:
        """The scheduler and the counter move after update(): what moved between the last window's
        update() and now belongs to that window."""
        if not self.windows:
            return
        last = self.windows[-1]
        scheduler_at, counter_at = self._marks
        if scheduler_at is not None:
            last.scheduler_steps = now["scheduler"] - scheduler_at
        if counter_at is not None:
            last.counter_steps = now["counter"] - counter_at

    def finish(self) -> "LoopProbe":
        """Call after the loop, before the checks: settles the last window's readings."""
        self._settle(self._state())
        return self

    def _scale(self) -> float:
        return float(self.scaler.get_scale()) if self.scaler.is_enabled() else 1.0


def _part(objects: Any, name: str) -> Any:
    return objects[name] if isinstance(objects, dict) else getattr(objects, name, None)


def _probe(objects: Any, accum: int, offset: int) -> LoopProbe:
    probe = LoopProbe(_part(objects, "model"), _part(objects, "optimizer"), _part(objects, "scaler"), _part(objects, "scheduler"), accum)
    probe._offset = offset
    return probe


def check_resume(
    build: Callable[[], Any],
    train: Callable[[Any, int, int], None],
    save: Callable[[Any, str], None],
    load: Callable[[Any, str], None],
    path: str,
    windows_before: int,
    windows_after: int,
    skipped_windows: Iterable[int] = (),
    accum: int = 1,
) -> None:
    """Run `windows_before` windows, checkpoint with the loop's own `save`, resume in fresh objects
    from `build()` with its own `load`, run `windows_after` more, and compare the learning rates, loss
    scales, commits and parameters with an uninterrupted run. `build()` returns the loop's objects
    (a dict or an object with `model`, `optimizer`, `scaler`, `scheduler`); `train(objects, first,
    n)` runs windows `first` to `first + n - 1`. Raises LoopCheckFailed at the first divergence."""
    import torch

    skipped = list(skipped_windows)
    whole = build()
    reference = _probe(whole, accum, 0)
    with reference.force_nonfinite(skipped):
        train(whole, 0, windows_before + windows_after)
    first = build()
    before = _probe(first, accum, 0)
    with before.force_nonfinite(skipped):
        train(first, 0, windows_before)
    save(first, path)
    resumed = build()
    load(resumed, path)
    after = _probe(resumed, accum, windows_before)
    with after.force_nonfinite(skipped):
        train(resumed, windows_before, windows_after)
    expected = reference.finish().windows[windows_before:]
    for want, got in zip(expected, after.finish().windows):
        for what, attribute in (("the learning rate", "lr"), ("the loss scale", "loss_scale"), ("committed", "committed")):
            if getattr(want, attribute) != getattr(got, attribute):
                raise LoopCheckFailed(
                    f"window {got.number}: {what} was {getattr(got, attribute)} after resume, "
                    f"{getattr(want, attribute)} in the uninterrupted run"
                )
    if len(expected) != len(after.windows):
        raise LoopCheckFailed(f"the resumed run ended {len(after.windows)} windows after the checkpoint, the uninterrupted run {len(expected)}")
    for a, b in zip(_part(resumed, "model").parameters(), _part(whole, "model").parameters()):
        if not torch.allclose(a, b):
            raise LoopCheckFailed(f"after window {windows_before + windows_after - 1}: the parameters differ from the uninterrupted run's")


try:  # the pytest plugin: only when pytest is there
    import pytest

    @pytest.fixture
    def steplint_probe():
        """`steplint_probe(model=..., optimizer=..., scaler=..., scheduler=..., accum=..., counter=...)`."""
        return LoopProbe
except ImportError:  # pragma: no cover
    pass
