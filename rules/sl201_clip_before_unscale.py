"""## What it does
Finds gradient clipping (`clip_grad_norm_`, `clip_grad_value_`, in any import form) of gradients
that `scaler.scale(loss).backward()` produced, before `scaler.unscale_(optimizer)` in the same step.

## Why is this bad?
The gradients are still multiplied by the loss scale (65,536 at the start). Clipping them to a norm
of 1.0 clips a norm of 1.4e5 instead of 2.1: the update shrinks by four orders of magnitude, and
`clip_grad_norm_` returns, and your logs show, the scaled norm. Nothing fails.

## Example
```python
scaler.scale(loss).backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
scaler.step(optimizer)
scaler.update()
```

## Use instead
```python
scaler.scale(loss).backward()
scaler.unscale_(optimizer)
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
scaler.step(optimizer)
scaler.update()
```

The scaled backward may come in a loop of its own before the clip (`for scaler, loss in zip(scalers,
losses): scaler.scale(loss).backward()`, then a loop that clips and steps each model).

Silent for `accelerator.clip_grad_norm_` (it unscales), apex's `amp.master_params`, and timm-style
`loss_scaler(loss, optimizer, clip_grad=...)`, which unscale before they clip. Silent for a clip given
the loss scale (`max_norm * scaler.get_scale()`, or a helper handed `scale=scaler.get_scale()`): it
cuts the scaled gradients at a scaled threshold on purpose, and an inserted `unscale_` would switch
it off.

## Fix safety
Safe: `scaler.unscale_(optimizer)` is inserted before the clip; `scaler.step` then does not unscale
again. Where the code already calls `unscale_` after the clip, that call is moved up instead (a
second call raises `unscale_() has already been called`); both shapes are proven by a runtime test, and so
is a backward scaled in an earlier loop of the pass. No fix when the backward is scaled only under a test the
clip does not run under (`if use_amp: scaler.scale(loss).backward() else: loss.backward()`): an inserted
`unscale_` would run where nothing was scaled, and raise (or divide unscaled gradients by the scale).
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.

## References
- [Working with unscaled gradients](https://pytorch.org/docs/stable/notes/amp_examples.html#working-with-unscaled-gradients)
"""

import libcst as cst

from steplint.fixes import SAFE, Fix
from steplint.model import CLIP, SCALED_BACKWARD, SKIPPABLE_STEP, UNSCALE
from steplint.model.roles import SCALER
from steplint.model.structure import shared_loops
from steplint.model.syntax import walk_expressions
from steplint.rewrite import insert_before, is_grad_scaler, lone_statement, move_to
from steplint.rule import Finding, rule


@rule("SL201", "clip-before-unscale", "Gradients clipped while still scaled by the GradScaler", fix=SAFE)
def check(model):
    for clip in model.of_kind(CLIP):
        scaled = sorted((b for b in model.passes.in_iteration(clip, SCALED_BACKWARD) + _micro_batch_backwards(model, clip) if b.order < clip.order), key=lambda b: b.order)
        steps = [s for s in model.passes.in_iteration(clip, SKIPPABLE_STEP) if s.order > clip.order and s.strategy == SCALER]
        if not steps:
            continue
        update = steps[0]
        if not scaled and not _scaled_elsewhere_never_unscaled(model, clip, update):
            continue
        unscaled = [u for u in model.passes.in_iteration(clip, UNSCALE) if scaled and scaled[-1].order < u.order < clip.order]
        if unscaled or _in_scaled_units(model, clip):
            continue
        line = f"{model.text.of(update.subject)}.unscale_({model.text.of(update.optimizer)})"
        later = [u for u in model.passes.in_iteration(clip, UNSCALE) if clip.order < u.order < update.order]
        if not is_grad_scaler(model, update.subject, update.site.scope):
            fix = None  # (on some path the object is no GradScaler: `unscale_` would fail there)
        elif later:
            # a second unscale_ would raise "unscale_() has already been called": move the one there is
            fix = _move_before(model, later[0], clip, model.text.of(later[0].node))
        elif (conditional := _scaled_on_some_paths_only(model, scaled, clip)) is not None:
            # (where the backward did not go through the scaler, `unscale_` raises, or divides unscaled gradients)
            yield Finding(clip.node, f"Clipping gradients that are still multiplied by the loss scale; call `{line}` first, where the backward "
                                     f"was scaled (no fix: it is scaled only under `{conditional}`, and the clip runs on every path)")
            continue
        else:
            edit = insert_before(model, clip.site, line)
            fix = Fix(f"Insert `{line}` before clipping", SAFE, (edit,)) if edit else None
        yield Finding(clip.node, f"Clipping gradients that are still multiplied by the loss scale; call `{line}` first", fix)


def _scaled_on_some_paths_only(model, scaled, clip):
    """The test (as written) under which a scaled backward before the clip runs and the clip does not (`if
    use_amp: scaler.scale(loss).backward() else: loss.backward()`, then a clip on both paths): an inserted
    `unscale_` would run where nothing was scaled. None when every such backward runs wherever the clip does."""
    around = {(id(g.test), g.negated) for g in clip.site.guards}
    for backward in scaled:
        for guard in backward.site.guards:
            if not guard.early_exit and (id(guard.test), guard.negated) not in around:
                return ("not " if guard.negated else "") + model.text.of(guard.test)
    return None


def _in_scaled_units(model, clip):
    """The clip is given the loss scale (`max_norm * scaler.get_scale()`, or `scale=` a helper that
    multiplies its threshold): it clips scaled gradients at a scaled threshold, on purpose."""
    scope = clip.site.scope
    return isinstance(clip.node, cst.Call) and any(
        model.guards.is_scale_read(sub, scope) for arg in clip.node.args for sub in walk_expressions(arg.value)
    )


def _scaled_elsewhere_never_unscaled(model, clip, update):
    """The backward is in another function (a trainer's `backward()` beside its `update()`): the
    scaler the step goes through scales a backward somewhere in the module, and nothing in the module
    ever unscales that scaler, so the gradients the clip reads are still scaled."""
    backwards = [b for b in model.of_kind(SCALED_BACKWARD) if b.site.scope is not clip.site.scope and model.same_object(b, update)]
    return bool(backwards) and not any(model.same_object(u, update) for u in model.of_kind(UNSCALE))


def _micro_batch_backwards(model, clip):
    """Scaled backwards in loops of the clip's pass that end before it: the micro-batches of nanoGPT's
    `for micro_step in range(accum):`, or one backward per model in `for scaler, loss in zip(scalers, losses):`
    before the loop that clips and steps each model."""
    return [
        b for b in model.of_kind(SCALED_BACKWARD)
        if b.site.scope is clip.site.scope and b.order < clip.order and len(b.site.loops) > shared_loops(b.site, clip.site)
        and not model.passes.exclusive(b.site, clip.site)
    ]


def _move_before(model, unscale, clip, text):
    statement, target = lone_statement(model, unscale.site), lone_statement(model, clip.site)
    if statement is None or target is None or unscale.site.trail[-1][0] is not clip.site.trail[-1][0]:
        return None
    row_start = model.source.line_starts[model.text.rows(target)[0] - 1]
    indent = model.source.indentation(model.text.rows(target)[0])
    return Fix(f"Move `{text}` before clipping", SAFE, tuple(move_to(model, statement, row_start, indent)))
