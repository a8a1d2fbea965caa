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

Reported only for schedulers that set the first LR when they are built: `torch.optim.lr_scheduler`
classes and the `transformers` / `diffusers` schedule factories. A scheduler class of the project's
own (a Noam or warmup policy whose `step()` sets the LR from its own count) may be stepped before
the update on purpose: moving it would run the first update at the optimizer's raw LR, so steplint
stays silent there. Also silent when an update comes before the scheduler in the iteration (two
optimizers, each followed by its scheduler), for schedulers told their position
(`scheduler.step(epoch)`), and for Lightning's `self.lr_schedulers()`, whose classes are not visible
where they are stepped.

An epoch scheduler stepped at the top of the epoch loop, before the batch loop that makes its updates
(the order PyTorch before 1.1 asked for), skips its first value the same way: every decay comes one
epoch early. It is reported without a fix: the step belongs after the epoch's batches, wherever the
author ends the epoch (after its evaluation, its checkpoint). Silent where the code sets the scheduler's
`last_epoch` itself (`scheduler.last_epoch = start_epoch - 1`, as ultralytics does): stepping it first is
then the order it was positioned for.

## Fix safety
Safe, in the batch loop: the fix moves the scheduler call just after the statement that holds the update, at its own
indentation, so it still runs as often as before; with the scheduler's first LR set at
construction, update k then uses the schedule's value k (proven by a runtime test).
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.
"""

from steplint.fixes import SAFE, Fix
from steplint.model import OPTIMIZER_STEP, SCHEDULER_STEP, SKIPPABLE_STEP
from steplint.model.schedules import positioned_by_hand, sets_its_first_lr
from steplint.model.guards import past_the_first_pass
from steplint.rewrite import after_statement, lone_statement, move_to
from steplint.rule import Finding, rule


@rule("SL104", "scheduler-before-optimizer", "Scheduler advances before the optimizer update", fix=SAFE)
def check(model):
    for step in model.of_kind(SCHEDULER_STEP):
        if not model.counters.per_update_scheduler(step) or model.guards.gated(step.site) or not sets_its_first_lr(step.role):
            continue
        updates = [u for u in model.passes.in_iteration(step, SKIPPABLE_STEP, OPTIMIZER_STEP) if model.windows.boundary(u.site) is model.windows.boundary(step.site)]
        if not updates or any(u.order < step.order for u in updates):
            continue
        update = updates[0]
        name = model.text.of(step.subject)
        message = f"`{name}` advances before `{model.text.of(update.node)}`: the schedule's first value is skipped and every LR comes one update early"
        yield Finding(step.node, message, _after_update(model, step, update, name))
    yield from _epoch_step_before_its_batches(model)


def _epoch_step_before_its_batches(model):
    """An epoch scheduler stepped at the top of the epoch loop, before the batch loop that updates
    (PyTorch before 1.1 asked for this order; since then it skips the first value): no fix, where the
    epoch's step belongs is after its batches, which the author places."""
    updates = model.of_kind(SKIPPABLE_STEP, OPTIMIZER_STEP)
    for step in model.of_kind(SCHEDULER_STEP):
        loop = step.site.loop
        role = step.role
        if loop is None or step.explicit_position or role is None or role.metric or role.prepared or role.engine_owned or model.guards.gated(step.site) or not sets_its_first_lr(role):
            continue
        if positioned_by_hand(model, step):
            continue  # (`scheduler.last_epoch = start_epoch - 1` first: the step at the top of each epoch is the order meant)
        if past_the_first_pass(step.site, loop):
            continue  # (`if epoch > 0: scheduler.step()` at the top: the step that ends the previous epoch)
        in_epoch = [u for u in updates if u.site.scope is step.site.scope and any(l is loop for l in u.site.loops)
                    and not model.passes.exclusive(u.site, step.site)]
        if not in_epoch or any(u.order < step.order or u.site.loop is loop for u in in_epoch):
            continue
        name = model.text.of(step.subject)
        yield Finding(step.node, f"`{name}` advances at the start of each epoch, before the updates of its batches: the schedule's "
                                 "first value is skipped and every LR change comes one epoch early (step it after the epoch's batches)")


def _after_update(model, step, update, name):
    statement = lone_statement(model, step.site)
    block, _ = step.site.trail[-1]
    holder = next((s for b, s in update.site.trail if b is block), None)
    offset = after_statement(model, holder) if holder is not None and statement is not None else None
    if offset is None:
        return None
    indent = model.source.indentation(model.text.rows(statement)[0])
    return Fix(f"Move `{name}` after the update", SAFE, tuple(move_to(model, statement, offset, indent)))
