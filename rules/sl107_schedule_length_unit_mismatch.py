"""## What it does
Finds a scheduler whose length (`num_training_steps`, `total_steps`, `T_max`, `total_iters`,
`steps_per_epoch`, `max_steps`) is computed from `len(loader)` of the loop it steps in, while it
steps once per accumulation window (`if (i + 1) % accum == 0:`). The scheduler is known by its
constructor and its length is read through the assignments that computed it; a length that reads
the window length or divides anything is taken to be in windows already. Also finds such a length
stepped once per epoch, after the batch loop it counts (`scheduler.step()` told nothing, and stepped
nowhere else): an epoch is a window of `len(loader)` batches.

## Why is this bad?
The schedule is laid out over `len(loader) * epochs` steps but receives `1/accum` of them: a linear
decay ends at `1 - 1/accum` of its way, a cosine never reaches its floor, a one-cycle policy stays in
its warmup or first half. The run ends with the learning rate the recipe meant for its middle.

Stepped once per epoch, it moves `epochs` of its `len(loader) * epochs` steps: a one-cycle policy
never leaves its warmup, a cosine barely leaves its peak.

The reverse (a length in windows, stepped every batch) is reported by SL103: there the stepping, not
the length, is what is wrong.

## Example
```python
scheduler = get_linear_schedule_with_warmup(optimizer, 100, len(loader) * epochs)
for epoch in range(epochs):
    for i, batch in enumerate(loader):
        (model(batch) / accum).backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
```

## Use instead
```python
scheduler = get_linear_schedule_with_warmup(optimizer, 100, (len(loader) // accum) * epochs)
```

## Fix safety
None for a schedule stepped per epoch: whether to step it per batch or count its length in epochs is
the recipe's choice. Otherwise unsafe: the fix divides `len(loader)` by the window length, which changes the run's schedule (that
is its point) and anything else computed from the same expression. It is offered only when the
window is `(i + 1) % accum` on the `enumerate` index of the loop, so that `len(loader) // accum` is
exactly the number of windows per epoch; a runtime test shows the fixed one-cycle schedule then
ends on its last step, with its final learning rate. Where a warmup length is in batches too, it is
left for you to change.
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.
"""

from steplint.fixes import UNSAFE, Edit, Fix
from steplint.model import SCHEDULER_STEP
from steplint.model.schedules import assignments, length_in_batches_stepped_per_epoch, schedule_length_in_batches, visible_before
from steplint.model.windows import counts_from_zero, indexes_its_loop, modulo_boundary
from steplint.rule import Finding, rule


@rule("SL107", "schedule-length-unit-mismatch", "Scheduler length counted in batches while it steps once per accumulation window", fix="unsafe")
def check(model):
    reported = set()
    windowed = [(e, model.windows.boundary(e.site)) for e in model.of_kind(SCHEDULER_STEP) if model.windows.boundary(e.site) is not None]
    candidates = [(e, modulo_boundary(model, w)) for e, w in windowed if model.counters.per_update_scheduler(e)]
    known = assignments(model) if candidates else None
    for event, boundary in candidates:
        length = schedule_length_in_batches(model, known, event, boundary) if boundary is not None else None
        if length is None or id(length.constructor) in reported:
            continue
        reported.add(id(length.constructor))
        accum = model.text.of(boundary.length)
        loader_length = model.text.of(length.loader_length)
        argument = model.text.of(length.argument)
        counted = "" if loader_length in argument else f" (from `{loader_length}`)"
        message = (
            f"`{model.text.of(event.subject)}`'s length `{argument}` counts batches{counted}, but it steps once per window "
            f"(`{model.text.of(boundary.guard.test)}`): the schedule runs `{accum}` times too slowly and stops short of its end"
        )
        yield Finding(length.argument, message, _rescale(model, known, length, boundary, loader_length, accum))
    yield from _stepped_per_epoch(model, reported)


def _stepped_per_epoch(model, reported):
    """A length in batches, stepped once per epoch after the batch loop (and nowhere else)."""
    steps = [e for e in model.of_kind(SCHEDULER_STEP) if e.role is not None and model.windows.boundary(e.site) is None]
    known = assignments(model) if steps else None
    for event in steps:
        length = length_in_batches_stepped_per_epoch(model, known, event)
        if length is None or id(length.constructor) in reported:
            continue
        if len(model.by_object(SCHEDULER_STEP).get(model.object_key(event), ())) > 1:
            continue  # (also stepped elsewhere: per batch, or told its position)
        reported.add(id(length.constructor))
        argument, loader_length = model.text.of(length.argument), model.text.of(length.loader_length)
        counted = "" if loader_length in argument else f" (from `{loader_length}`)"
        yield Finding(length.argument, (
            f"`{model.text.of(event.subject)}`'s length `{argument}` counts batches{counted}, but it steps once per epoch, "
            f"after the batch loop: the schedule runs `{loader_length}` times too slowly and never gets past its start"
        ), None)


def _rescale(model, known, length, boundary, loader_length, accum):
    """`len(loader)` -> `(len(loader) // accum)` when that is exactly the windows per epoch."""
    exact = boundary.shifted and not boundary.ends_at_the_data and indexes_its_loop(boundary) and counts_from_zero(model, boundary)
    order = model.order_of_expression(length.loader_length)
    if not exact or order is None or not visible_before(known, boundary.length, length.site.scope, order):
        return None
    start, end = model.text.span(length.loader_length)
    return Fix(f"Count windows: `({loader_length} // {accum})`", UNSAFE, (Edit(start, end, f"({loader_length} // {accum})"),))
