"""## What it does
Under gradient accumulation, finds `scaler.unscale_(optimizer)` (and the clipping after it) that
runs every micro-batch while `scaler.step(optimizer)` runs once per window; and, with apex, a clip
every micro-batch after `with amp.scale_loss(loss, optimizer)`, which unscales as it exits.

## Why is this bad?
`unscale_` may be called once per optimizer between `update()`s: the second micro-batch raises
`unscale_() has already been called on this optimizer since the last update()`. Where it does not
raise (an `update()` every batch), the gradients accumulated so far are divided by the scale again
on each micro-batch, and the clip cuts partial sums instead of the window's gradient.

## Example
```python
scaler.scale(loss / accum).backward()
scaler.unscale_(optimizer)
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
if (i + 1) % accum == 0:
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
```

## Use instead
```python
scaler.scale(loss / accum).backward()
if (i + 1) % accum == 0:
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
```

## Fix safety
The fix moves `unscale_` and the clipping statements right after it into the window block, before
its first clip or `scaler.step`. Safe: a runtime test shows the loop then runs, and clips and updates exactly as
plain fp32 accumulation does. No fix when other clipping follows elsewhere in the micro-batch, or a
clip's result is read outside the window. No fix for the apex clip: no runtime test of ours runs apex.
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.

## References
- [Gradient accumulation](https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-accumulation)
"""

import libcst as cst

from steplint.fixes import SAFE, Fix
from steplint.model import CLIP, SKIPPABLE_STEP, UNSCALE
from steplint.model.roles import APEX_SCALE_LOSS, SCALER
from steplint.model.syntax import reads_name, walk_expressions
from steplint.rewrite import lone_statement, move_before
from steplint.rule import Finding, rule


@rule("SL205", "unscale-per-micro-batch", "`scaler.unscale_` (and its clipping) every micro-batch under gradient accumulation", fix="safe")
def check(model):
    for unscale in model.of_kind(UNSCALE):
        if model.windows.boundary(unscale.site) is not None:
            continue
        steps = [
            s for s in model.passes.in_iteration(unscale, SKIPPABLE_STEP)
            if s.strategy == SCALER and model.same_object(s, unscale) and model.windows.boundary(s.site) is not None
            and not model.windows.same_window(s.site, unscale.site)
        ]
        if not steps:
            continue
        step = steps[0]
        boundary = model.windows.boundary(step.site)
        scaler = model.text.of(unscale.subject)
        message = f"`{model.text.of(unscale.node)}` runs every micro-batch, but `{scaler}.step` once per window (`{model.text.of(boundary.test)}`): the second call raises, or unscales the gradients again"
        yield Finding(unscale.node, message, _move_fix(model, unscale, step))
    yield from _apex_clips(model)


def _apex_clips(model):
    """apex unscales as `with amp.scale_loss(loss, optimizer)` exits: a clip after it, every
    micro-batch, cuts the partial sums of a window whose update comes once."""
    scaled = [site for call, site in model.structure.calls if model.roles.qualified(call.func, site.scope) == APEX_SCALE_LOSS]
    for clip in model.of_kind(CLIP):
        if model.windows.boundary(clip.site) is not None:
            continue
        if not any(model.passes.same_iteration(s, clip.site) and s.order < clip.order and not model.passes.exclusive(s, clip.site) for s in scaled):
            continue  # (the fp32 branch's clip: apex scaled nothing there)
        steps = [
            s for s in model.passes.in_iteration(clip, SKIPPABLE_STEP)
            if s.strategy == "apex" and model.windows.boundary(s.site) is not None and not model.windows.same_window(s.site, clip.site)
        ]
        if steps:
            boundary = model.windows.boundary(steps[0].site)
            yield Finding(clip.node, (
                f"`{model.text.of(clip.node)}` clips every micro-batch the gradients apex has unscaled (`amp.scale_loss`), but "
                f"`{model.text.of(steps[0].node)}` runs once per window (`{model.text.of(boundary.test)}`): it cuts partial sums, not the "
                "window's gradient (no fix: move the clip into the window block, before the step)"
            ))


def _move_fix(model, unscale, step):
    """Move `unscale_` and the clipping statements just after it before the window's first clip or
    its `scaler.step`."""
    statement = lone_statement(model, unscale.site)
    if statement is None or step.order < unscale.order:
        return None
    clips = [c for c in model.passes.in_iteration(unscale, CLIP) if unscale.order < c.order < step.order]
    windowed = [c for c in clips if model.windows.boundary(c.site) is not None]
    anchor = lone_statement(model, windowed[0].site if windowed else step.site)  # unscale before any clip
    clips = [c for c in clips if c not in windowed]
    if anchor is None:
        return None
    block, _ = unscale.site.trail[-1]
    moved = [statement]
    following = block.statements[block.index(statement) + 1 :]
    for candidate in following:
        if not any(lone_statement(model, c.site) is candidate for c in clips):
            break
        moved.append(candidate)
    if len(moved) - 1 != len(clips) or any(_result_read_outside(model, s, step) for s in moved):
        return None
    title = f"Move `{model.text.of(unscale.node)}`" + (" and the clipping" if clips else "") + " into the window block"
    return Fix(title, SAFE, tuple(move_before(model, moved, anchor)))


def _result_read_outside(model, statement, step) -> bool:
    """A name the statement assigns is read by code that does not run with the window's update."""
    small = statement.body[0]
    names = [n.value for t in getattr(small, "targets", ()) for n in walk_expressions(t.target) if isinstance(n, cst.Name)]
    windowed = {id(g.test) for g in step.site.guards}
    for node, site in model.structure.statements:
        if node is small or site.scope is not step.site.scope:
            continue
        if not {id(g.test) for g in site.guards} >= windowed and any(reads_name(node, name) for name in names):
            return True
    return False
