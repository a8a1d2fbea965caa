"""Updates the code skips itself: `if not torch.isfinite(grad_norm): optimizer.zero_grad()` with the
`optimizer.step()` in the other branch. What follows outside that branch advances on skipped updates.

And loss scalers that skip nothing: a GradScaler the module only ever asks to `scale()` (never
stepped, updated or unscaled, never handed to a call) is a fixed loss multiplier."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

import libcst as cst

from steplint.model.events import COUNTER_INCREMENT, OPTIMIZER_STEP, SCALED_BACKWARD, SCALER_UPDATE, SKIPPABLE_STEP, UNSCALE, Event
from steplint.model.guards import FINITENESS
from steplint.model.roles import OPTIMIZER, SCALER, SCALER_CLASSES
from steplint.model.syntax import keyword, positional
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


def skips_tallied(model: "ModuleModel", skipped: Tuple[Event, Guard]) -> bool:
    """The branch that skips the update counts the skips itself (`skipped_steps += 1`): a counter the
    pass advances beside it counts attempts on purpose."""
    step, guard = skipped
    return any(
        any(g.test is guard.test and g.negated != guard.negated for g in e.site.guards)
        for e in model.events_in(step.site.scope, COUNTER_INCREMENT)
    )


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


# Optimizers whose update does not change when every gradient is multiplied by one constant (up to
# their `eps`): Adam's family divides by a running norm of the gradients.
_SCALE_INVARIANT = {"Adam", "AdamW", "Adamax", "NAdam", "RAdam", "SparseAdam", "Adagrad", "RMSprop", "FusedAdam"}
_SCALE_INVARIANT_FROM = ("torch.optim.", "apex.optimizers.")


def fixed_loss_multiplier(model: "ModuleModel", backward: Event, step: Event) -> bool:
    """`backward`'s scaler only multiplies the loss by the scale it was built with (see the module's
    docstring; a scale chosen by hand, `GradScaler(2**10)`, not the default that `update()` is meant to
    tune), and `step`'s optimizer cancels that constant: nothing is meant to skip (nerfacc's fp16
    backward of a tiny-cuda-nn field into Adam)."""
    def multipliers() -> frozenset:
        used = {model.object_key(e) for e in model.of_kind(SKIPPABLE_STEP, OPTIMIZER_STEP, SCALER_UPDATE, UNSCALE) if e.strategy is not None or e.kind != OPTIMIZER_STEP}
        scaling = {model.object_key(e) for e in model.of_kind(SCALED_BACKWARD)} - used
        handed = {k for call, site in model.structure.calls for arg in call.args for k in scaling if model.mentions(arg.value, site.scope, k)}
        chosen = {key for key, calls in _constructions(model, SCALER).items() if all(_scale_chosen(q, call) for q, call in calls)}
        return frozenset((scaling - handed) & chosen)

    def scale_invariant() -> frozenset:
        return frozenset(key for key, calls in _constructions(model, OPTIMIZER).items() if all(
            q.startswith(_SCALE_INVARIANT_FROM) and q.rsplit(".", 1)[-1] in _SCALE_INVARIANT for q, _ in calls))

    return (model.object_key(backward) in model.remember(("fixed_loss_multipliers",), multipliers)
            and model.object_key(step) in model.remember(("scale_invariant_optimizers",), scale_invariant))


def _constructions(model: "ModuleModel", kind: str) -> Dict[str, List[Tuple[str, cst.Call]]]:
    """Each name of role `kind` that the module assigns, with the import-resolved callee of each value
    it assigns ("" for a value that is no call of a name we resolve)."""
    found: Dict[str, List[Tuple[str, cst.Call]]] = {}
    for node, site in model.structure.statements:
        if type(node) is cst.Assign and len(node.targets) == 1 and model.roles.is_(node.targets[0].target, site.scope, kind):
            key = model.roles.key(node.targets[0].target, site.scope)
            value = node.value
            qualified = model.roles.qualified(value.func, site.scope) if isinstance(value, cst.Call) else None
            if key is not None:
                found.setdefault(key, []).append((qualified or "", value))
    return found


def _scale_chosen(qualified: str, call: cst.CSTNode) -> bool:
    """`GradScaler(2**10)`, `GradScaler("cuda", 1024.0)`, `GradScaler(init_scale=...)`."""
    if qualified not in SCALER_CLASSES or not isinstance(call, cst.Call):
        return False
    # (torch.amp's takes the device first, unless it is given by keyword)
    scale_at = 1 if qualified.startswith("torch.amp.") or qualified == "torch.GradScaler" else 0
    args = positional(call)
    return keyword(call, "init_scale") is not None or len(args) > (0 if keyword(call, "device") is not None else scale_at)
