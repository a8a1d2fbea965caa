"""## What it does
Under gradient accumulation, finds an evaluation, logging or checkpoint cadence (`if i % N == 0:`)
tested every batch: on an update counter that only advances once per window, or on a batch index
while the code shows the period is meant in updates (`every = total_updates // 10`, with
`total_updates = len(loader) // accum * epochs`).

## Why is this bad?
On a batch index, an evaluation or checkpoint cadence fires on micro-batches: mid-window, with half-accumulated gradients,
and at a rate that depends on the accumulation factor rather than on updates. On a counter that
advances once per window but is tested every batch, the test stays true for the whole window: the
evaluation or the checkpoint runs `accum` times in a row with the same step number.

## Example
```python
for i, batch in enumerate(loader):
    (model(batch) / accum).backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
        global_step += 1
    if global_step % eval_every == 0:
        evaluate(model)
```

## Use instead
```python
for i, batch in enumerate(loader):
    (model(batch) / accum).backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
        global_step += 1
        if global_step % eval_every == 0:
            evaluate(model)
```

The cadence may be kept in a flag (`should_eval = step % n == 0`, then `if should_eval:`), and a
window count may be derived from the batch index (`step = i // accum`, tested every batch: repeats).

A cadence on a batch index is silent when nothing says its period counts updates: evaluating or saving
every N batches is a recipe, whose checkpoint names SL301 checks.
Silent for cadences inside the window block on an update counter, in loops without accumulation
(a cadence over a call of the training step that also runs on every pass closes no window), and
on a batch index the code shows to be the data position by design (the loop resumes at a stored batch,
`enumerate(loader, start=resumed + 1)`, the learning rate is computed from it, or it is made a
position among the run's batches, `(epoch - 1) * len(loader) + i + 1`): counter and consumers then
agree on batches.

## Fix safety
No fix: which counter the cadence meant, and where in the window it belongs, is the author's call;
the message says so, and what to test instead (an update counter, in the window block; a window
counter, in the window block after the update).
"""

from steplint.model import CHECKPOINT_SAVE, EVALUATION, LOG
from steplint.model.guards import MODULO, WINDOW_BOUNDARY
from steplint.model.units import UPDATES
from steplint.model.windows import cadence_reads, window_indices
from steplint.rule import Finding, rule

_WHAT = {EVALUATION: "evaluation", CHECKPOINT_SAVE: "the checkpoint", LOG: "logging"}
_NO_FIX_BATCHES = " (no fix: which update count the cadence meant is the author's call; test an update counter in the window block)"
_NO_FIX_REPEATS = " (no fix: where in the window the cadence belongs is the author's call; test it in the window block, after the update)"


@rule("SL304", "cadence-keyed-to-batch", "Evaluation, logging or checkpoint cadence counts batches under accumulation")
def check(model):
    reported = set()
    for event in model.of_kind(EVALUATION, CHECKPOINT_SAVE, LOG):
        update = model.windows.update_outside(event)
        if update is None:
            continue
        batches = model.counters.batch_indices(update.site.loop)
        windows = model.counters.windowed(update) | window_indices(model, update, batches)
        for guard in event.site.guards:
            kinds = model.guards.kinds(guard)
            if MODULO not in kinds or WINDOW_BOUNDARY in kinds or id(guard.test) in reported:
                continue
            scope = event.site.scope
            reads = cadence_reads(model, guard.test, scope)  # through `should_eval = step % n == 0`
            test = f"`{model.text.of(guard.test)}`" + "".join(f" (`{model.text.of(r)}`)" for r in reads[1:])
            read_batches = [k for k in batches if any(model.mentions(r, scope, k) for r in reads)]
            if read_batches and all(model.units.unit_of_key(k).by_design for k in read_batches):
                continue  # a data position by design: the cadence follows it, in batches, as its consumers do
            expected = model.units.consumer_at(guard.test)
            if event.kind != LOG and read_batches:
                # A batch-keyed cadence is the recipe unless its period is a share of an update count
                # (logging every N micro-batches is a choice of granularity, never a wrong unit).
                why = _read_as_updates(model, expected, read_batches)
                if why is None:
                    continue
                message = (
                    f"{test} counts batches, but {why}: "
                    f"{_WHAT[event.kind]} runs on micro-batches, mid-window, and more often than meant{_NO_FIX_BATCHES}"
                )
            elif any(model.mentions(r, scope, k) for r in reads for k in windows):
                message = f"{test} is tested every batch, but its counter advances once per window: {_WHAT[event.kind]} repeats for every micro-batch of the window{_NO_FIX_REPEATS}"
            else:
                continue
            reported.add(id(guard.test))
            yield Finding(guard.test, message)


def _read_as_updates(model, expected, counters):
    """Why the cadence is meant in updates, when the code shows it: its period is a share of a number
    of updates, or the code reads its batch counter as a count of updates elsewhere (on resume)."""
    if expected is not None and expected.unit == UPDATES:
        return f"its period is in updates ({expected.evidence.why})"
    for key in counters:
        shown = model.units.unit_of_key(key)
        if shown.unit == UPDATES and shown.shown_by is not None and not shown.shown_by.name_only:
            return f"the code reads `{key.split(':', 1)[-1]}` as updates ({shown.shown_by.why})"
    return None
