"""Updates the code skips itself: `if not torch.isfinite(grad_norm): optimizer.zero_grad()` with the
`optimizer.step()` in the other branch. What follows outside that branch advances on skipped updates."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

from steplint.model.events import OPTIMIZER_STEP, Event
from steplint.model.guards import FINITENESS
from steplint.model.structure import Guard

if TYPE_CHECKING:
    from steplint.model import ModuleModel


def skipped_by_the_code(model: "ModuleModel", event: Event) -> Optional[Tuple[Event, Guard]]:
    """A plain optimizer step of `event`'s pass that runs under a finiteness check `event` does not
    run under, with the check: the update is skipped on non-finite values while `event` goes on."""
    own = {(id(g.test), g.negated) for g in event.site.guards}
    for step in model.passes.in_iteration(event, OPTIMIZER_STEP):
        if not model.windows.same_window(step.site, event.site):
            continue
        for guard in step.site.guards:
            if (id(guard.test), guard.negated) not in own and FINITENESS in model.guards.kinds(guard):
                return step, guard
    return None


# What to say when a framework skips updates and gives no exact signal steplint can gate on.
_NO_SIGNAL = {
    "apex": "apex skips it on overflow and has no public signal of the skip; consider `torch.amp.GradScaler`, whose record `committed_step` reads",
    "apex-fp16-optimizer": "apex's FP16_Optimizer skips it on overflow with a dynamic loss scale; its `overflow` attribute, read after `step()`, says so",
    "apex-fused-fp16-optimizer": "apex's fused FP16_Optimizer skips it whenever the gradients' norm is inf/NaN, with a static loss scale too, and keeps no flag of the skip",
    "declared": "the configuration declares this optimizer skippable; gate on its framework's own commit signal",
    "colossalai": "a ColossalAI optimizer boosted in fp16 skips it on overflow and has no signal of the skip; in bf16 it never skips",
    "lightning-mixed-precision": "Lightning's 16-bit mixed precision skips it on overflow and returns nothing that says so; a step post-hook on the wrapped optimizer (`opt.optimizer.register_step_post_hook`) runs only for the updates that committed",
    "overflow-error": "the `except OverflowError` drops it and goes on: advance this in the `try` after the step, or under a flag the handler sets",
}


def no_signal_note(update: Event) -> str:
    """`; <advice>` for an update whose framework leaves nothing exact to gate on, else ''."""
    note = _NO_SIGNAL.get(update.strategy or "")
    return f" ({note})" if note else ""
