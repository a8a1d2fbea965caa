"""## What it does
Finds `optimizer.step()` called directly on an optimizer whose loss went through
`scaler.scale(loss).backward()`.

## Why is this bad?
The gradients are multiplied by the loss scale and may hold inf/NaN. `optimizer.step()` applies them
as they are: a learning rate effectively 65,536 times too large, or parameters turned to NaN on the
first overflow. Only `scaler.step(optimizer)` unscales the gradients and skips non-finite updates.

## Example
```python
scaler.scale(loss).backward()
optimizer.step()
scaler.update()
```

## Use instead
```python
scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()
```

Silent when the plain step is on another branch than the scaled backward
(`if use_amp: ... else: loss.backward(); optimizer.step()`), for optimizers that accelerate or
DeepSpeed wrap, and for optimizers handed through a library we do not know
(`model, optimizer = msamp.initialize(model, optimizer)`), which may unscale by themselves. A `step`
handed the scaler (`optimizer.step("gen", scaler=scaler)`) is a project wrapper's, which steps through
it: no torch optimizer takes a scaler. Silent, too, for a scaler the module only ever asks to
`scale()`, built with a scale chosen by hand (never stepped, updated or unscaled, never handed to a
call: a fixed loss multiplier, `GradScaler(2**10)` for an fp16 backward) in front of an optimizer of Adam's family (Adam, AdamW,
Adamax, NAdam, RAdam, SparseAdam, Adagrad, RMSprop), whose update that constant does not change; in
front of SGD it multiplies every update, and is reported; so is a default `GradScaler()` left without
its `step()` and `update()`, whose scale of 65,536 was meant to be tuned.

## Fix safety
Safe: the call becomes `scaler.step(optimizer)`, the step the rest of the code already assumes;
only where the step runs only with the scaled backward (a scaler that may be disabled or absent on
the step's path gets no fix, nor one where `scaler.update()` runs between the scaled backward and
the step, as the scale may have changed). Proven at run time, after a plain scaled backward and after
`unscale_` and a clip (tests/test_runtime_scaler.py).
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.

## References
- [Typical mixed precision training](https://pytorch.org/docs/stable/notes/amp_examples.html#typical-mixed-precision-training)
"""

from steplint.fixes import SAFE, Edit, Fix
from steplint.model import OPTIMIZER_STEP, SCALED_BACKWARD, SCALER_UPDATE
from steplint.model.skips import fixed_loss_multiplier
from steplint.rewrite import holds_comment
from steplint.rule import Finding, rule


@rule("SL203", "optimizer-step-bypasses-scaler", "`optimizer.step()` on gradients scaled by a GradScaler", fix=SAFE)
def check(model):
    for step in model.of_kind(OPTIMIZER_STEP):
        if step.role is None or step.role.prepared or step.role.engine_owned or step.strategy is not None:
            continue
        if model.roles.key(step.subject, step.site.scope) in model.roles.wrapped:
            continue  # `model, optimizer = amp_library.initialize(model, optimizer)` may scale by itself
        scaled = [
            b for b in model.passes.in_iteration(step, SCALED_BACKWARD)
            if b.order < step.order and b.role.enabled is not False and not model.passes.cleared_between(b, step)
        ]
        if not scaled or fixed_loss_multiplier(model, scaled[-1], step):
            continue
        scaler = model.text.of(scaled[-1].subject)
        optimizer = model.text.of(step.subject)
        message = f"`{optimizer}.step()` applies gradients that `{scaler}` scaled, inf/NaN included; use `{scaler}.step({optimizer})`"
        if not model.passes.runs_only_with(step.site, scaled[-1].site):
            # `if use_amp: scaler.scale(loss).backward()` and an unconditional step: on the fp32 path
            # the scaler may be disabled or absent, so the call cannot simply be swapped.
            yield Finding(step.node, message + f" where the loss was scaled (the step also runs where it was not)", None)
            continue
        rescaled = any(
            scaled[-1].order < u.order < step.order and model.same_object(u, scaled[-1]) for u in model.passes.in_iteration(step, SCALER_UPDATE)
        )
        if rescaled:
            # `update()` may have changed the scale since the backward: the scaler would unscale the
            # gradients by a factor they were not scaled by.
            yield Finding(step.node, message + f" (no fix: `{scaler}.update()` runs between the scaled backward and this step)", None)
            continue
        start, end = model.text.span(step.node)
        fix = None if holds_comment(step.node) else Fix(f"Use `{scaler}.step({optimizer})`", SAFE, (Edit(start, end, f"{scaler}.step({optimizer})"),))
        yield Finding(step.node, message, fix)
