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

For a post-hook, the fix wraps it so that it runs only on committed updates:
```python
optimizer.register_step_post_hook(committed_hook(scaler, count))
```
`committed_hook` (added to the module, or imported from `steplint.runtime`) reads the scaler's
found-inf record, which is written before the fused optimizer's step runs.

## Fix safety
Safe for a post-hook on an optimizer stepped through one scaler: the hook then runs exactly for
committed updates. No fix for wrappers of `optimizer.step` (they can do anything) or for accelerate,
which runs the scaler itself.
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.

## References
- [`torch.optim.Optimizer.register_step_post_hook`](https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.register_step_post_hook.html)
"""

import libcst as cst

from steplint.fixes import SAFE, Edit, Fix
from steplint.model import SKIP_FLAG_READ, SKIPPABLE_STEP, STEP_HOOK, STEP_WRAPPER
from steplint.model.roles import SCALER
from steplint.rewrite import helper_edit
from steplint.rule import Finding, rule

HOOK_HELPER = "committed_hook"

_MESSAGES = {
    STEP_HOOK: "Step post-hooks of the fused optimizer `{name}` run even when GradScaler skips its update; read the scaler's found-inf record (`committed_step`) instead",
    STEP_WRAPPER: "A wrapper of `{name}.step` is called even when GradScaler skips the fused optimizer's update; read the scaler's found-inf record (`committed_step`) instead",
    SKIP_FLAG_READ: "`{name}.optimizer_step_was_skipped` is False for skipped updates of a fused optimizer; use a non-fused optimizer or read the scaler's found-inf record",
}


@rule("SL106", "skip-signal-blind-to-fused", "Skip detection that cannot see a fused optimizer's skipped updates", fix="sometimes")
def check(model):
    skippable = model.of_kind(SKIPPABLE_STEP)
    if not skippable:
        return
    for event in model.of_kind(STEP_HOOK, STEP_WRAPPER):
        key = model.roles.key(event.subject, event.site.scope)
        stepped = [u for u in skippable if u.optimizer is not None and model.roles.key(u.optimizer, u.site.scope) == key]
        if event.role is None or not event.role.fused or not stepped or _already_wrapped(event):
            continue
        fix = _wrap_hook(model, event, stepped) if event.kind == STEP_HOOK else None
        yield Finding(event.node, _MESSAGES[event.kind].format(name=model.text.of(event.subject)), fix)
    for event in model.of_kind(SKIP_FLAG_READ):
        accelerator = model.text.of(event.subject)
        fused = [u for u in skippable if u.strategy == "accelerate" and u.role.fused and u.role.accelerator == accelerator]
        if fused:
            yield Finding(event.node, _MESSAGES[SKIP_FLAG_READ].format(name=accelerator))


def _already_wrapped(event):
    hook = event.node.args[0].value if isinstance(event.node, cst.Call) and event.node.args else None
    return isinstance(hook, cst.Call) and isinstance(hook.func, cst.Name) and hook.func.value == HOOK_HELPER


def _wrap_hook(model, event, updates):
    """`register_step_post_hook(fn)` -> `register_step_post_hook(committed_hook(scaler, fn))`."""
    scalers = {model.roles.key(u.subject, u.site.scope) for u in updates if u.strategy == SCALER}
    if len(scalers) != 1 or not event.node.args:
        return None
    scaler_text = model.text.of(next(u.subject for u in updates if u.strategy == SCALER))
    if model.roles.key(cst.parse_expression(scaler_text), event.site.scope) not in scalers:
        return None  # the scaler has another name where the hook is registered
    hook = event.node.args[0].value
    start, end = model.text.span(hook)
    edits = [Edit(start, end, f"{HOOK_HELPER}({scaler_text}, {model.text.of(hook)})")]
    helper = helper_edit(model, model.settings.fix_gate, HOOK_HELPER)
    if helper is not None:
        edits.append(helper)
    return Fix(f"Run the hook only on committed updates (`{HOOK_HELPER}`)", SAFE, tuple(edits))
