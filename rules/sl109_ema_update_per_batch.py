"""## What it does
Under gradient accumulation, finds an EMA or averaged-model update (`ema.update(model)`,
`averaged.update_parameters(model)`, diffusers' `ema_model.step(...)`) that runs every batch while
the optimizer updates once per window. The EMA is known by its constructor: timm's `ModelEma*`,
`torch.optim.swa_utils.AveragedModel`, diffusers' `EMAModel`, `ema_pytorch.EMA`,
`torch_ema.ExponentialMovingAverage` (or a name declared in `[tool.steplint.roles] ema = [...]`).

## Why is this bad?
The decay is tuned per update: `decay=0.999` averages over the last ~1,000 updates. Called on every
micro-batch it averages the same weights `accum` times between updates, so the average covers `accum`
times fewer updates than intended, and EMAs that warm their decay up by a counted step (timm,
diffusers) warm up `accum` times too fast.

## Example
```python
for i, batch in enumerate(loader):
    (model(batch) / accum).backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
    ema.update(model)
```

## Use instead
```python
for i, batch in enumerate(loader):
    (model(batch) / accum).backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
        ema.update(model)
```

Silent for EMAs updated in the window block, after the loop over micro-batches, or once per epoch,
and for objects whose constructor the model does not know.

## Fix safety
The fix moves the EMA update to the end of the window block. Safe: a runtime test shows the average
then counts updates (`n_averaged` equals the number of windows) and equals the EMA of the weights
after each update.
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.
"""

from steplint.fixes import SAFE
from steplint.model.events import EMA_UPDATE
from steplint.rewrite import move_into_window
from steplint.rule import Finding, rule


@rule("SL109", "ema-update-per-batch", "EMA or averaged-model update every batch under gradient accumulation", fix="safe")
def check(model):
    for event in model.of_kind(EMA_UPDATE):
        update = model.windows.update_outside(event)
        if update is None or model.guards.gated(event.site) or model.windows.boundary(event.site) is not None:
            continue
        boundary = model.windows.boundary(update.site)
        name = model.text.of(event.node.func)
        message = f"`{name}` runs every batch, but the optimizer updates once per window (`{model.text.of(boundary.test)}`): the average counts micro-batches"
        yield Finding(event.node, message, move_into_window(model, event, boundary, f"Move `{name}(...)` into the window block", SAFE))
