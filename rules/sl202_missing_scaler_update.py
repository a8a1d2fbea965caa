"""## What it does
Finds a `scaler.step(optimizer)` after which `scaler.update()` does not run on every path before the
next step: it is missing, or a `continue`, `return` or condition stands between them.

## Why is this bad?
`update()` adjusts the loss scale and clears the per-optimizer inf checks. Without it the scale never
backs off after an overflow, so every following update is skipped too (the scale stays too large),
and the next `scaler.step` unscales with stale records. PyTorch's own examples call `update()` once
per iteration, after all `scaler.step` calls.

## Example
```python
scaler.scale(loss).backward()
scaler.step(optimizer)
optimizer.zero_grad()
```

## Use instead
```python
scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()
optimizer.zero_grad()
```

## Fix safety
Safe, when the module has no `update()` for that scaler at all: `scaler.update()` is inserted right
after the step. When an `update()` exists but some path skips it (an early `continue`), there is no
fix: where the update belongs depends on what that path means.

## References
- [Typical mixed precision training](https://pytorch.org/docs/stable/notes/amp_examples.html#typical-mixed-precision-training)
"""

from steplint.fixes import SAFE, Fix
from steplint.model import SCALER_UPDATE, SKIPPABLE_STEP
from steplint.model.roles import SCALER
from steplint.rewrite import insert_after
from steplint.rule import Finding, rule


@rule("SL202", "missing-scaler-update", "`scaler.update()` does not follow every `scaler.step()`", fix="sometimes")
def check(model):
    updates = model.of_kind(SCALER_UPDATE)
    for step in model.of_kind(SKIPPABLE_STEP):
        if step.strategy != SCALER or step.role is None or model.update_left_to_callers(step):
            continue
        of_this_scaler = [u for u in updates if model.same_object(u, step)]
        if any(model.covers(u.site, step.site) for u in of_this_scaler):
            continue
        scaler = model.text(step.subject)
        fix = None
        if not of_this_scaler:
            edit = insert_after(model, step.site, f"{scaler}.update()")
            fix = Fix(f"Insert `{scaler}.update()` after the step", SAFE, (edit,)) if edit else None
            message = f"`{scaler}.update()` is never called: the loss scale never backs off, and updates keep being skipped"
        elif any(model.same_iteration(u.site, step.site) and u.order > step.order for u in of_this_scaler):
            message = f"`{scaler}.update()` does not run on every path after `{model.text(step.node)}`"
        else:
            continue  # the update is elsewhere (another method): we cannot tell the order
        yield Finding(step.node, message, fix)
