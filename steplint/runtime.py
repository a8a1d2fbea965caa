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
