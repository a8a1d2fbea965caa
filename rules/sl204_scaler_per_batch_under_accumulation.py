"""## What it does
Under gradient accumulation, finds `scaler.update()` that runs every batch while `scaler.step()` runs
once per window, and `scaler.step()` that runs every batch while the gradients are cleared once per
window.

## Why is this bad?
`update()` between steps raises `No inf checks were recorded` on the next batch without a step, or,
when it does not, adjusts the scale on micro-batches no step looked at. `scaler.step` per
micro-batch unscales the accumulated gradients again and again: each window's gradients are divided
by the scale several times over, and the update is silently wrong.

## Example
```python
scaler.scale(loss / accum).backward()
if (i + 1) % accum == 0:
    scaler.step(optimizer)
    optimizer.zero_grad()
scaler.update()
```

## Use instead
```python
scaler.scale(loss / accum).backward()
if (i + 1) % accum == 0:
    scaler.step(optimizer)
    optimizer.zero_grad()
    scaler.update()
```

Silent for `scaler.update(new_scale)`, a scale set by hand (a bump on a cadence when the scale is
small): it reads no inf check and ends no step.

## Fix safety
Safe for a per-batch `update()`: it moves to the end of the window block (proven at run time, the
update right after the block and after other statements: one update per window, the window's
gradient equal to the fp32 sum, tests/test_runtime_scaler.py). No fix for a per-batch
`scaler.step`, whose place depends on how the window was meant.
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.

## References
- [Gradient accumulation](https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-accumulation)
"""

from steplint.fixes import SAFE
from steplint.model import SCALER_UPDATE, SKIPPABLE_STEP, ZERO_GRAD
from steplint.model.events import sets_scale
from steplint.model.roles import SCALER
from steplint.rewrite import move_into_window
from steplint.rule import Finding, rule


@rule("SL204", "scaler-per-batch-under-accumulation", "GradScaler stepped or updated every batch under gradient accumulation", fix="sometimes")
def check(model):
    steps = [s for s in model.of_kind(SKIPPABLE_STEP) if s.strategy == SCALER and s.role is not None]
    for update in model.of_kind(SCALER_UPDATE):
        if sets_scale(update):
            continue  # a scale set by hand reads no inf check: it may run on any batch
        windowed = [
            s for s in model.passes.in_iteration(update, SKIPPABLE_STEP)
            if s.strategy == SCALER and s.role is not None and model.same_object(s, update) and model.windows.boundary(s.site)
        ]
        if not windowed or model.windows.same_window(windowed[0].site, update.site):
            continue
        boundary = model.windows.boundary(windowed[0].site)
        scaler = model.text.of(update.subject)
        fix = move_into_window(model, update, boundary, f"Move `{scaler}.update()` into the window block", SAFE)
        yield Finding(update.node, f"`{scaler}.update()` runs every batch, but `{scaler}.step` once per window (`{model.text.of(boundary.test)}`)", fix)
    for step in steps:
        if model.windows.boundary(step.site) is not None or model.passes.ends_early_before(step.site):
            continue
        cleared = [z for z in model.passes.in_iteration(step, ZERO_GRAD) if model.windows.boundary(z.site) is not None]
        if cleared:
            boundary = model.windows.boundary(cleared[0].site)
            yield Finding(step.node, f"`{model.text.of(step.node)}` runs every batch while gradients accumulate until `{model.text.of(boundary.test)}`: it unscales the accumulated gradients again each time")
