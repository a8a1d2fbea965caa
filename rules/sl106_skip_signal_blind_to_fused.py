"""## What it does
Finds a commit check that cannot see the skipped updates of a fused optimizer: a step post-hook
(`optimizer.register_step_post_hook`), a wrapper put over `optimizer.step`, or accelerate's
`accelerator.optimizer_step_was_skipped`, on an optimizer built with `fused=True`.

## Why is this bad?
For a fused optimizer, `GradScaler.step` calls `optimizer.step()` anyway and lets the fused kernel
skip the update internally when it finds inf/NaN. Post-hooks then run, wrappers see a call, and
accelerate (which detects skips this way) reports `optimizer_step_was_skipped == False` for an update
that never happened. A schedule or counter gated on such a signal advances on skipped updates, as if
it were not gated at all.

## Example
```python
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
updates = 0

def count(opt, args, kwargs):
    global updates
    updates += 1

optimizer.register_step_post_hook(count)
```

## Use instead
Read the scaler's own per-optimizer record, which is exact for fused optimizers:
```python
committed = committed_step(scaler, optimizer)  # from steplint.runtime, or added by steplint's fixes
scaler.update()
if committed:
    updates += 1
```

## Fix safety
No fix: the hook or wrapper can do anything, and accelerate runs the scaler itself. The message says
what to read instead.

## References
- [`torch.optim.Optimizer.register_step_post_hook`](https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.register_step_post_hook.html)
"""

from steplint.model import SKIP_FLAG_READ, SKIPPABLE_STEP, STEP_HOOK, STEP_WRAPPER
from steplint.rule import Finding, rule

_MESSAGES = {
    STEP_HOOK: "Step post-hooks of the fused optimizer `{name}` run even when GradScaler skips its update; read the scaler's found-inf record (`committed_step`) instead",
    STEP_WRAPPER: "A wrapper of `{name}.step` is called even when GradScaler skips the fused optimizer's update; read the scaler's found-inf record (`committed_step`) instead",
    SKIP_FLAG_READ: "`{name}.optimizer_step_was_skipped` is False for skipped updates of a fused optimizer; use a non-fused optimizer or read the scaler's found-inf record",
}


@rule("SL106", "skip-signal-blind-to-fused", "Skip detection that cannot see a fused optimizer's skipped updates")
def check(model):
    skippable = model.of_kind(SKIPPABLE_STEP)
    if not skippable:
        return
    for event in model.of_kind(STEP_HOOK, STEP_WRAPPER):
        key = model.roles.key(event.subject, event.site.scope)
        stepped = any(u.optimizer is not None and model.roles.key(u.optimizer, u.site.scope) == key for u in skippable)
        if event.role is not None and event.role.fused and stepped:
            yield Finding(event.node, _MESSAGES[event.kind].format(name=model.text(event.subject)))
    for event in model.of_kind(SKIP_FLAG_READ):
        accelerator = model.text(event.subject)
        fused = [u for u in skippable if u.strategy == "accelerate" and u.role.fused and u.role.accelerator == accelerator]
        if fused:
            yield Finding(event.node, _MESSAGES[SKIP_FLAG_READ].format(name=accelerator))
