"""What steplint's fixes call at run time. Importing this module does not import torch."""

from __future__ import annotations


def committed_step(scaler, optimizer):
    """Run `scaler.step(optimizer)` and return True when the optimizer update committed.

    GradScaler skips the update when the gradients hold inf/NaN and says nothing. Its own
    per-optimizer found-inf record, read between step() and update(), tells exactly, fused
    optimizers included; a step post-hook is the fallback where that record is absent.
    """
    if not scaler.is_enabled():
        scaler.step(optimizer)
        return True
    record = getattr(scaler, "_found_inf_per_device", None)
    if record is None:
        ran = []
        hook = optimizer.register_step_post_hook(lambda *_: ran.append(True))
        try:
            scaler.step(optimizer)
        finally:
            hook.remove()
        return bool(ran)
    scaler.step(optimizer)
    return not any(bool(found.item()) for found in record(optimizer).values())


def committed_hook(scaler, hook):
    """Wrap an optimizer step post-hook so that it runs only for updates that committed.

    GradScaler calls a fused optimizer's step() even when it skips the update, so its post-hooks
    run on skipped updates too. Inside scaler.step(), the scaler's found-inf record for the
    optimizer is already written: the wrapper reads it and stays quiet on a skip.
    """

    def on_committed_step(optimizer, args, kwargs):
        record = getattr(scaler, "_found_inf_per_device", None)
        if scaler.is_enabled() and record is not None:
            try:
                found = record(optimizer)
            except KeyError:  # optimizer.step() called directly, not through the scaler
                found = {}
            if any(bool(value.item()) for value in found.values()):
                return None
        return hook(optimizer, args, kwargs)

    return on_committed_step


class StepCounters:
    """Counts what a training loop did, in the units a recipe is written in.

    Attach it with one line; it counts batches, update attempts (windows), committed updates per
    optimizer (from the scaler's own found-inf record, exact for fused optimizers too), skipped
    overflows and reported tokens, and reads the current loss scale and learning rate::

        counters = StepCounters.attach(optimizer, scaler=scaler, scheduler=scheduler, model=model)
        ...
        print(counters)                     # batches=64 attempts=16 committed=13 skipped=3 ...
        logger.log(counters.as_dict())

    Batches are counted from the model's training forward passes (`model=`), or from `scaler.scale`
    calls, or from `counters.batch(tokens=n)` when the loop reports them. With no scaler, or with a
    disabled one, every attempt commits.
    """

    def __init__(self, optimizers, scaler=None, scheduler=None, model=None):
        self.optimizers = list(optimizers)
        self.scaler = scaler
        self.scheduler = scheduler
        self.batches = 0
        self.attempts = 0
        self.committed_by_optimizer = [0] * len(self.optimizers)
        self.skipped_by_optimizer = [0] * len(self.optimizers)
        self.tokens = 0
        self.tokens_per_update = 0
        self._window_tokens = 0
        self._counted_batch = False
        self._unpaired = 0  # batches the hooks saw and the loop did not report yet (negative: the reverse)
        self._undo = []

    @classmethod
    def attach(cls, optimizer, scaler=None, scheduler=None, model=None):
        """Start counting; `optimizer` may be one optimizer or a list of them."""
        optimizers = list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer]
        counters = cls(optimizers, scaler, scheduler, model)
        counters._hook(model)
        return counters

    # -- what the loop may report ----------------------------------------------------------------

    def batch(self, tokens=0):
        """Report a batch (and its tokens). A batch that the counters see too (a forward pass of
        `model=`, a `scaler.scale` call) is counted once, whichever comes first."""
        self._count_batch(reported=True)
        self._counted_batch = True
        self.tokens += tokens
        self._window_tokens += tokens

    # -- readings --------------------------------------------------------------------------------

    @property
    def committed_updates(self):
        return self.committed_by_optimizer[0] if self.optimizers else 0

    @property
    def skipped_overflows(self):
        return self.skipped_by_optimizer[0] if self.optimizers else 0

    @property
    def loss_scale(self):
        if self.scaler is None or not self.scaler.is_enabled():
            return 1.0
        return float(self.scaler.get_scale())

    @property
    def lr(self):
        if self.scheduler is not None and hasattr(self.scheduler, "get_last_lr"):
            return float(self.scheduler.get_last_lr()[0])
        return float(self.optimizers[0].param_groups[0]["lr"]) if self.optimizers else 0.0

    def as_dict(self):
        values = {
            "batches": self.batches,
            "attempts": self.attempts,
            "committed_updates": self.committed_updates,
            "skipped_overflows": self.skipped_overflows,
            "tokens": self.tokens,
            "tokens_per_update": self.tokens_per_update,
            "loss_scale": self.loss_scale,
            "lr": self.lr,
        }
        if len(self.optimizers) > 1:
            values["committed_by_optimizer"] = list(self.committed_by_optimizer)
            values["skipped_by_optimizer"] = list(self.skipped_by_optimizer)
        return values

    def __str__(self):
        return (
            f"batches={self.batches} attempts={self.attempts} committed={self.committed_updates} "
            f"skipped={self.skipped_overflows} scale={self.loss_scale:g} lr={self.lr:.3g}"
        )

    def state_dict(self):
        return {
            "batches": self.batches,
            "attempts": self.attempts,
            "committed_by_optimizer": list(self.committed_by_optimizer),
            "skipped_by_optimizer": list(self.skipped_by_optimizer),
            "tokens": self.tokens,
            "tokens_per_update": self.tokens_per_update,
        }

    def load_state_dict(self, state):
        self.batches = state["batches"]
        self.attempts = state["attempts"]
        self.committed_by_optimizer = list(state["committed_by_optimizer"])
        self.skipped_by_optimizer = list(state["skipped_by_optimizer"])
        self.tokens = state["tokens"]
        self.tokens_per_update = state["tokens_per_update"]

    def detach(self):
        """Stop counting: remove the hooks and restore the wrapped methods."""
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    # -- wiring ----------------------------------------------------------------------------------

    def _hook(self, model):
        if model is not None:
            import torch

            def forward(module, args):
                if module.training and torch.is_grad_enabled():
                    self._see_batch()

            handle = model.register_forward_pre_hook(forward)
            self._undo.append(handle.remove)
        scaler = self.scaler
        if scaler is None:
            for index, optimizer in enumerate(self.optimizers):
                handle = optimizer.register_step_post_hook(lambda *_, index=index: self._commit(index, True, window_end=index == 0))
                self._undo.append(handle.remove)
            return
        self._wrap(scaler, "scale", self._scaled)
        self._wrap(scaler, "step", self._stepped)
        self._wrap(scaler, "update", self._updated)

    def _wrap(self, obj, name, around):
        original = getattr(obj, name)

        def wrapper(*args, **kwargs):
            return around(original, *args, **kwargs)

        setattr(obj, name, wrapper)
        self._undo.append(lambda: delattr(obj, name) if name in vars(obj) else None)

    def _see_batch(self):
        self._count_batch(reported=False)
        self._counted_batch = True

    def _scaled(self, original, *args, **kwargs):
        if not self._counted_batch:
            self._count_batch(reported=False)
        self._counted_batch = False
        return original(*args, **kwargs)

    def _stepped(self, original, optimizer, *args, **kwargs):
        result = original(optimizer, *args, **kwargs)
        if any(optimizer is o for o in self.optimizers):
            index = next(i for i, o in enumerate(self.optimizers) if o is optimizer)
            self._commit(index, _found_no_inf(self.scaler, optimizer), window_end=False)
        return result

    def _updated(self, original, *args, **kwargs):
        self.attempts += 1
        self.tokens_per_update = self._window_tokens
        self._window_tokens = 0
        return original(*args, **kwargs)

    def _count_batch(self, reported):
        """A batch the loop reports (`reported`) or the hooks see. The loop that does both, as the
        README shows, reports each batch that the hooks see: the two pair up, one batch each."""
        sign = -1 if reported else 1
        if self._unpaired * sign < 0:
            self._unpaired += sign  # the other side counted this batch already
        else:
            self.batches += 1
            self._unpaired += sign

    def _commit(self, index, committed, window_end):
        if committed:
            self.committed_by_optimizer[index] += 1
        else:
            self.skipped_by_optimizer[index] += 1
        if window_end:
            self.attempts += 1
            self.tokens_per_update = self._window_tokens
            self._window_tokens = 0
        self._counted_batch = False


def _found_no_inf(scaler, optimizer):
    """After scaler.step(optimizer), before update(): whether that optimizer's update committed.
    (committed_step keeps this reading in its own body: its source is copied into users' modules.)"""
    if not scaler.is_enabled():
        return True
    record = getattr(scaler, "_found_inf_per_device", None)
    if record is None:
        return True
    return not any(bool(found.item()) for found in record(optimizer).values())
