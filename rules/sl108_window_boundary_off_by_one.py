"""## What it does
Finds an accumulation window tested as `step % accum == 0` after the backward, where `step` counts
micro-batches from 0: `enumerate(loader)` without a start, `range(n)`, a counter set to 0 and
incremented after the test, or the micro-batch's position in the run, `i + epoch * len(loader)`, with
both loop indices from 0 (an epoch handed in as a parameter may never be 0 there: silent). And its mirror: `(step + 1) % accum == 0` where `step` counts from 1
(`enumerate(loader, 1)`, or a counter set to 0 and incremented at the top of every pass, before the
test), whose first window has `accum - 1` micro-batches. The loop may be a script's, at the top level of a
module (unless a function of the module moves the counter too), and the test may also step at the end
of the data (`... or i + 1 == len(loader)`): the windows before that are the modulo's.

## Why is this bad?
On the first micro-batch `0 % accum == 0` holds, so the first update is made from one micro-batch
instead of `accum`, and every later window ends one micro-batch early relative to the data: with a
per-epoch `enumerate` the last window of each epoch is cut short and the first of the next one is a
single batch. The loss was divided by `accum`, so that first update is also `accum` times too small.

## Example
```python
for step, batch in enumerate(loader):
    (model(batch) / accum).backward()
    if step % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
```

## Use instead
```python
for step, batch in enumerate(loader):
    (model(batch) / accum).backward()
    if (step + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
```

Silent for indices that count from 1 tested unshifted (`enumerate(loader, 1)`, a counter incremented
before the test), for `(step + 1) % accum` with an index from 0, for a counter advanced on some passes
only, for a test that also reads the index (`step > 0 and ...`), for a test
before the backward (which steps the previous window), and when gradients are cleared every batch.
The backward may sit in a helper of the project (`train_step(model, batch, scaler)` scaling it), as long
as that helper makes no update of its own.

## Fix safety
The fix tests `(step + 1) % accum == 0` (the mirror: `step % accum == 0`). Safe: a runtime test shows
every window, the first included, then holds `accum` micro-batches (also with the backward and the
update in helpers, for both mirror forms, and for a script's top-level loop). Unsafe when the window block itself reads `step`
(a checkpoint name, a logged step): those values move with the boundary; and when the test also steps
at the end of the data, whose test of the same index the fix leaves as it is.
Consistency: every other test of the same `step % accum` in the function (the `no_sync()` test that
picks the micro-batch whose backward all-reduces) is shifted with the window test, so the
gradients are reduced on the micro-batch the optimizer steps on (proven on two gloo ranks); when
one already reads `step + 1`, there is no fix.
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.

## References
- [Gradient accumulation](https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-accumulation)
"""

from steplint.fixes import SAFE, UNSAFE, Edit, Fix
from steplint.model.windows import accumulates, first_index, reads_in_window, update_boundaries
from steplint.rewrite import window_index_readers
from steplint.rule import Finding, rule


@rule("SL108", "window-boundary-off-by-one", "Accumulation window tested as `step % accum == 0` with `step` counting from 0", fix="sometimes")
def check(model):
    for boundary, update in update_boundaries(model):
        # (`step % accum` with `step` from 0, or its mirror `(step + 1) % accum` with `step` from 1: the first window is short)
        if first_index(model, boundary) != (1 if boundary.shifted else 0) or not accumulates(model, boundary):
            continue
        counter = boundary.counter
        test = model.text.of(boundary.comparison)
        applicability = UNSAFE if reads_in_window(model, boundary) or boundary.ends_at_the_data else SAFE
        length = model.text.of(boundary.length)
        unshifted, shifted = window_index_readers(model, counter, boundary.length, boundary.site.scope, boundary.comparison.left)
        if boundary.shifted:
            index, replaced = counter.value, boundary.index
            title = f"Test `{index}{test[_parenthesised(model, replaced)[1] - model.text.span(boundary.comparison)[0]:]}`"
            message = f"`{test}` first holds on micro-batch {length} - 1 (`{counter.value}` counts from 1): the first window has one micro-batch less than `{length}`"
            others, disagreeing = shifted, unshifted
        else:
            index, replaced = f"({counter.value} + 1)", counter
            title = f"Test `{index}{test[model.text.span(counter)[1] - model.text.span(boundary.comparison)[0]:]}`"
            message = f"`{test}` holds on the first micro-batch (`{counter.value}` counts from 0): the first window has one micro-batch, not `{length}`"
            others, disagreeing = unshifted, shifted
        # every other read of the same `index % accum` (a `no_sync()` test) moves with the window
        if disagreeing:
            rows = ", ".join(str(model.text.rows(r)[0]) for r in disagreeing)
            yield Finding(boundary.comparison, f"{message} (no fix: line {rows} already reads `{index}`, and one of the two must change with the other)")
            continue
        edits = [Edit(*_parenthesised(model, replaced), index)] + [Edit(*_parenthesised(model, r.left), index) for r in others]
        if others:
            title += " and every other test of the same index"
        yield Finding(boundary.comparison, message, Fix(title, applicability, tuple(edits)))


def _parenthesised(model, node):
    """The span of the node with the one pair of parentheses it is written in (`(step + 1)`), if any."""
    start, end = model.text.span(node)
    text = model.source.text
    if len(getattr(node, "lpar", ())) == 1 and text[start - 1 : start] == "(" and text[end : end + 1] == ")":
        return start - 1, end + 1
    return start, end
