"""## What it does
Finds a checkpoint whose name, tag or stored step comes from a batch index (the `enumerate(loader)`
index, a micro-step counter) while updates are windowed by gradient accumulation or may be skipped.

## Why is this bad?
The number in the checkpoint is not the number of updates the weights have seen. A run resumed
from `ckpt-8000.pt` with accumulation 8 thinks it did 8,000 updates after 1,000; its schedule,
evaluation cadence and end of the run are then off by the accumulation factor, and checkpoints of
two runs with different accumulation cannot be compared.

## Example
```python
for i, batch in enumerate(loader):
    ...
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
        global_step += 1
        torch.save(model.state_dict(), f"ckpt-{i}.pt")
```

## Use instead
```python
        torch.save(model.state_dict(), f"ckpt-{global_step}.pt")
```

Silent for values already in update units (`i // accum`) or in epochs (`epoch + i / len(loader)`), for a batch index or counter the code
shows to be the data position by design (see SL102, SL304; `(epoch - 1) * len(loader) + i + 1` names a
position among the run's batches), for counters advanced once per window
(SL102 checks whether they count skipped updates), in loops whose every batch commits an update, for
checkpoints no run resumes from (the number in their name is a label no schedule reads back; SL102
says the same of counters), for an accelerate or DeepSpeed step without accumulation, whose recipe counts attempts (plain
PyTorch code that follows that convention declares it with `recipe = "hf-trainer"`).
A save through a helper is keyed to what the helper names its file with or stores, not to an argument
it only logs. The files of one snapshot named alike (the EMA weights beside the model's, under the same
tests) are one naming scheme, reported once. A counter advanced in the window under a test of its own
(a tally of skipped loss spikes) counts no updates: it is not offered as the name.

## Fix safety
Unsafe, where one update counter advances in the window block: the fix names the checkpoint after
it, which changes the checkpoint's file name or stored step. No fix, and the message says what to
change, when no update counter advances in the window block, when several do, or when the save runs
outside the window block (proven at run time: the file comes out of `--fix` as it went in).
Consistency: every value feeding the save from the batch index changes with it (a `path` set from `i`
in the same window), or there is no fix and the message names it; `i + 1` (batches done) becomes the
counter itself once the counter counted this update, never `counter + 1` (proven at run time).
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.
"""

import libcst as cst

from steplint.fixes import UNSAFE, Edit, Fix
from steplint.model import CHECKPOINT_SAVE, COUNTER_INCREMENT, OPTIMIZER_STEP, SKIPPABLE_STEP
from steplint.model.syntax import reads, walk_expressions
from steplint.rule import Finding, rule


@rule("SL301", "checkpoint-keyed-to-batch", "Checkpoint name or stored step counts batches, not updates", fix=UNSAFE)
def check(model):
    reported = []  # (save site, key of the index) of each finding: one naming scheme is one problem
    for save in model.of_kind(CHECKPOINT_SAVE):
        updates = [u for u in model.passes.in_iteration(save, SKIPPABLE_STEP, OPTIMIZER_STEP) if model.windows.boundary(u.site) is not None or u.kind == SKIPPABLE_STEP]
        if not updates:
            continue
        update = updates[0]
        windowed = model.windows.boundary(update.site) is not None
        if not model.state.resumable or not windowed and model.counters.recipe_counts_attempts(update):
            continue  # (a name no run resumes from is a label: no recipe drifts from it, as for SL102)
        # Without accumulation, a counter of iterations counts attempted updates: SL102's finding.
        batches = model.counters.batch_indices(update.site.loop, counters=windowed)
        named = model.state.naming_arguments(save)
        mentions = [n for n in _plain_mentions(save.node) if model.roles.key(n, save.site.scope) in batches and (named is None or id(n) in named)]
        if not mentions or model.counters.stores_data_position(save.node):
            continue
        if all(model.units.unit_of_key(model.roles.key(n, save.site.scope)).by_design for n in mentions):
            continue  # a data position by design: the checkpoint records where the data stands, in batches
        index = model.roles.key(mentions[0], save.site.scope)
        if any(key == index and model.passes.same_iteration(site, save.site) and model.passes.runs_only_with(save.site, site) for site, key in reported):
            continue  # (another file of the same snapshot, named alike: the EMA weights beside the model's)
        reported.append((save.site, index))
        name = model.text.of(mentions[0])
        reason = "updates come once per window" if windowed else "updates may be skipped"
        message = f"Checkpoint keyed to `{name}`, which counts batches, while {reason}: its number is not the number of updates"
        fix, advice = _use_counter(model, save, update, mentions, batches)
        yield Finding(mentions[0], message + advice, fix)


def _plain_mentions(node):
    """Names read in a call's arguments, except inside `i // accum` (already in update units) and
    `i / len(loader)` (a fraction of an epoch: `epoch + i / len(loader)` is in epochs)."""
    skip = set()
    for sub in walk_expressions(node):
        if isinstance(sub, cst.BinaryOperation) and (isinstance(sub.operator, cst.FloorDivide) or _fraction_of_the_data(sub)):
            skip.update(id(s) for s in walk_expressions(sub))
    for arg in node.args:
        for sub in reads(arg):
            if isinstance(sub, cst.Name) and id(sub) not in skip:
                yield sub


def _fraction_of_the_data(operation: cst.BinaryOperation) -> bool:
    right = operation.right
    return isinstance(operation.operator, cst.Divide) and isinstance(right, cst.Call) and isinstance(right.func, cst.Name) and right.func.value == "len"


def _use_counter(model, save, update, mentions, batches):
    """Name the checkpoint after the update counter, with every value that feeds it agreeing: `i + 1`
    (batches done) becomes the counter once it counted this update, and a local the save reads
    (`path = f"ckpt-{i}.pt"`) set in the same window from the batch index changes with it.
    Returns (fix, advice): the advice says what blocks the fix when there is none."""
    counters = sorted(k for k in model.counters.windowed(update) if k)
    if not counters:
        return None, " (no fix: no update counter advances in the window block to key it to; count the updates there and key it to that count)"
    if len(counters) > 1:
        names = ", ".join(f"`{k.split(':', 1)[1]}`" for k in counters)
        return None, f" (no fix: {names} all advance in the window block; which one names it is the author's call)"
    if not model.windows.same_window(update.site, save.site):
        return None, f" (no fix: the save runs outside the window block, where `{counters[0].split(':', 1)[1]}` may not have counted this update yet)"
    key = counters[0]
    text = key.split(":", 1)[1]
    increments = [e for e in model.of_kind(COUNTER_INCREMENT) if model.roles.key(e.subject, e.site.scope) == key]
    counted = len(increments) == 1 and increments[0].order < save.order  # the counter already counts this update
    edits = _replacements(model, save.node, mentions, text, counted)
    for name in {n.value for n in _plain_mentions(save.node)} - {n.value for n in mentions}:
        for node, site in model.statements_of(save.site.scope):
            if not (isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets)):
                continue
            read = [n for n in walk_expressions(node.value) if isinstance(n, cst.Name) and model.roles.key(n, site.scope) in batches]
            if not read:
                continue
            if site.loop is not save.site.loop or site.order > save.order or not model.windows.same_window(update.site, site):
                return None, f" (no fix: `{name}`, set on line {model.text.rows(node)[0]} from `{read[0].value}`, names it too, outside the window)"
            edits += _replacements(model, node.value, read, text, counted)
    return Fix(f"Key the checkpoint to `{text}`", UNSAFE, tuple(edits)), ""


def _replacements(model, node, mentions, counter, counted):
    """Edits that put the counter in place of each batch index mention; `i + 1` (batches done,
    this one included) is the counter itself once the counter counted this update."""
    plus_one = {
        id(sub.left): sub for sub in walk_expressions(node)
        if isinstance(sub, cst.BinaryOperation) and isinstance(sub.operator, cst.Add) and isinstance(sub.right, cst.Integer) and sub.right.value == "1"
    }
    edits = []
    for mention in mentions:
        whole = plus_one.get(id(mention)) if counted else None
        edits.append(Edit(*model.text.span(whole if whole is not None else mention), counter))
    return edits
