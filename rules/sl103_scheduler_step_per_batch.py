"""## What it does
Under gradient accumulation, finds a scheduler, or an update counter that feeds a schedule, that
advances every batch while the optimizer updates once per window (`if (i + 1) % accum == 0:`).
One that runs under a cadence test of its own (`if step % accum == 0:` beside accelerate's
`accumulate` window) does not run every batch and is left alone.

## Why is this bad?
The schedule is written in updates; stepping it per micro-batch runs it `accum` times too fast. A
warmup of 1,000 updates with 8 micro-batches per window is over after 125 updates, and the decay
reaches its floor an eighth of the way through the run.

## Example
```python
for i, batch in enumerate(loader):
    loss = model(batch) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
    scheduler.step()
```

## Use instead
```python
for i, batch in enumerate(loader):
    loss = model(batch) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
```

Silent for schedules already in other units: a scheduler told its position
(`scheduler.step(epoch + i / len(loader))`), `# steplint: schedule=batches`, schedulers prepared by
accelerate (they step once per window inside `accelerator.accumulate`), and DeepSpeed's.

## Fix safety
The fix moves the statement to the end of the window block. Safe for a scheduler. For a counter it
is unsafe when the counter also ends the run or names checkpoints: those then count windows.
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.
"""

from steplint.fixes import SAFE, UNSAFE
from steplint.model import COUNTER_INCREMENT, SCHEDULER_STEP
from steplint.rewrite import move_into_window
from steplint.rule import Finding, rule


@rule("SL103", "scheduler-step-per-batch", "Scheduler or update counter advances every batch under gradient accumulation", fix="sometimes")
def check(model):
    for event in model.of_kind(SCHEDULER_STEP, COUNTER_INCREMENT):
        update = model.windows.update_outside(event)
        if update is None or model.guards.gated(event.site, update):
            continue
        if model.windows.cadence(event.site, boundaries=True) is not None:
            continue  # under a test of its own (`if step % accum == 0:` beside accelerate's window): not every batch
        name = model.text.of(event.subject)
        if event.kind == SCHEDULER_STEP:
            if not model.counters.per_update_scheduler(event):
                continue
            applicability = SAFE
        else:
            feeds = model.counters.feeds(event)
            if not feeds & {"schedule", "lr"}:
                continue
            moving = [c for c in model.units.consumers_of(event) if c.label in ("schedule", "lr")]
            if model.units.all_in_other_units(event, model.units.counter_unit(event), moving):
                continue  # (`lr_table.step(step, optimizer)`, its table laid out over the loop's batches: per batch is its recipe)
            applicability = UNSAFE if feeds & {"stop", "checkpoint"} else SAFE
        boundary = model.windows.boundary(update.site)
        message = f"`{name}` advances every batch, but the optimizer updates once per window (`{model.text.of(boundary.test)}`)"
        yield Finding(event.node, message, move_into_window(model, event, boundary, f"Move `{name}` into the window block", applicability))
