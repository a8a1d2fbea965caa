"""## What it does
Finds a scheduler that advances before the optimizer update of the same iteration.

## Why is this bad?
Since PyTorch 1.1 the order is `optimizer.step()` then `scheduler.step()`. Stepping the scheduler
first skips the schedule's first value (a warmup starts one step in) and shifts every later LR by
one update; PyTorch warns about it once and then stays silent.

## Example
```python
for batch in loader:
    scheduler.step()
    loss = model(batch)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
```

## Use instead
```python
for batch in loader:
    loss = model(batch)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    scheduler.step()
```

Silent when an update comes before the scheduler in the iteration (two optimizers, each followed by
its scheduler), for epoch schedulers stepped outside the batch loop, and for schedulers told their
position (`scheduler.step(epoch)`).

## Fix safety
Safe: the fix moves the scheduler call just after the statement that holds the update, at its own
indentation, so it still runs as often as before.
"""

from steplint.fixes import SAFE, Fix
from steplint.model import OPTIMIZER_STEP, SCHEDULER_STEP, SKIPPABLE_STEP
from steplint.rewrite import after_statement, lone_statement, move_to
from steplint.rule import Finding, rule


@rule("SL104", "scheduler-before-optimizer", "Scheduler advances before the optimizer update", fix=SAFE)
def check(model):
    for step in model.of_kind(SCHEDULER_STEP):
        if not model.per_update_scheduler(step) or model.gated(step.site):
            continue
        updates = [u for u in model.in_iteration(step, SKIPPABLE_STEP, OPTIMIZER_STEP) if model.window(u.site) is model.window(step.site)]
        if not updates or any(u.order < step.order for u in updates):
            continue
        update = updates[0]
        name = model.text(step.subject)
        message = f"`{name}` advances before `{model.text(update.node)}`: the schedule's first value is skipped and every LR comes one update early"
        yield Finding(step.node, message, _after_update(model, step, update, name))


def _after_update(model, step, update, name):
    statement = lone_statement(model, step.site)
    block, _ = step.site.trail[-1]
    holder = next((s for b, s in update.site.trail if b is block), None)
    offset = after_statement(model, holder) if holder is not None and statement is not None else None
    if offset is None:
        return None
    indent = model.source.indentation(model.rows(statement)[0])
    return Fix(f"Move `{name}` after the update", SAFE, tuple(move_to(model, statement, offset, indent)))
