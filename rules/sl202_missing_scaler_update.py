"""## What it does
Finds a `scaler.step(optimizer)` after which `scaler.update()` does not run on every path before the
next step: it is missing, or a `continue`, `return` or condition stands between them. Also finds a
`scaler.unscale_(optimizer)` followed by a check that skips both the step and the update (a
non-finite gradient norm, then `continue`).

## Why is this bad?
`update()` adjusts the loss scale and clears the per-optimizer inf checks. Without it the scale never
backs off after an overflow, so every following update is skipped too (the scale stays too large),
and the next `scaler.step` unscales with stale records. After an `unscale_` whose path skips the
update, the next iteration's `unscale_` raises `unscale_() has already been called on this optimizer
since the last update()`, and the scale that overflowed is never lowered. PyTorch's own examples call `update()` once
per iteration, after all `scaler.step` calls.

## Example
```python
scaler.scale(loss).backward()
scaler.step(optimizer)
optimizer.zero_grad()
```

## Use instead
```python
scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()
optimizer.zero_grad()
```

## Fix safety
Safe, when the module has no `update()` for that scaler at all: `scaler.update()` is inserted right
after the step, once per pass: after the last `scaler.step` of that scaler, where it runs whenever
the earlier ones do (two optimizers sharing a scaler get one update after both steps; an update
between them would unscale the second optimizer's gradients by a scale they were not scaled with).
Proven at run time on both shapes (tests/test_runtime_scaler.py). When an `update()` exists but some path skips it (an early `continue`), there is no
fix: where the update belongs depends on what that path means. The same holds after `unscale_`.
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.

## References
- [Typical mixed precision training](https://pytorch.org/docs/stable/notes/amp_examples.html#typical-mixed-precision-training)
"""

from steplint.fixes import SAFE, Fix
from steplint.model import SCALER_UPDATE, SKIPPABLE_STEP, UNSCALE
from steplint.model.guards import COMMIT_GATE, WINDOW_BOUNDARY
from steplint.model.roles import SCALER
from steplint.rewrite import insert_after
from steplint.rule import Finding, rule


@rule("SL202", "missing-scaler-update", "`scaler.update()` does not follow every `scaler.step()`", fix="sometimes")
def check(model):
    updates = model.by_object(SCALER_UPDATE)
    for step in model.of_kind(SKIPPABLE_STEP):
        if step.strategy != SCALER or step.role is None or model.passes.update_left_to_callers(step):
            continue
        of_this_scaler = updates.get(model.object_key(step), [])
        if model.passes.covered_by_some([u.site for u in of_this_scaler], step.site):
            continue
        scaler = model.text.of(step.subject)
        fix = None
        if not of_this_scaler:
            # (after the last step of the pass: not inside `for opt in optimizers:`, once per optimizer)
            edit = insert_after(model, step.site, f"{scaler}.update()") if _last_step_of_its_pass(model, step) else None
            fix = Fix(f"Insert `{scaler}.update()` after the step", SAFE, (edit,)) if edit else None
            message = f"`{scaler}.update()` is never called: the loss scale never backs off, and updates keep being skipped"
        elif any(model.passes.same_iteration(u.site, step.site) and u.order > step.order for u in of_this_scaler):
            message = f"`{scaler}.update()` does not run on every path after `{model.text.of(step.node)}`"
        else:
            continue  # the update is elsewhere (another method): we cannot tell the order
        yield Finding(step.node, message, fix)
    yield from _unscale_then_skip(model, updates)


def _last_step_of_its_pass(model, step):
    """The update goes once, after the pass's last step of this scaler, and only where that step runs
    whenever the others do. An update between two steps would change the scale under gradients
    scaled with the old one, and the second step would unscale them by the wrong factor. (Not
    inside `for opt in optimizers:`, once per optimizer, either.)"""
    if id(step.node) in model.in_group_loop:
        return False
    others = [s for s in model.passes.in_iteration(step, SKIPPABLE_STEP) if model.same_object(s, step)]
    return all(model.passes.covers(step.site, other.site) for other in others)


def _present(model, guard, unscale):
    """The guard holds where the unscaled scaler exists: `if scaler is not None:` (or `if scaler:`)."""
    text, flipped = model.guards.condition(guard.test)
    return text == model.text.of(unscale.subject) and guard.negated == flipped


def _unscale_then_skip(model, updates):
    """`unscale_` on a path that reaches neither a step nor an update of its scaler: skipped on purpose."""
    steps = model.of_kind(SKIPPABLE_STEP)
    for unscale in model.of_kind(UNSCALE):
        of_this_scaler = updates.get(model.object_key(unscale), [])
        if any(u.node is unscale.node for u in of_this_scaler):
            continue  # a helper that unscales and updates in one call: its own paths are checked where it is defined
        later = [u for u in of_this_scaler if model.passes.same_iteration(u.site, unscale.site) and u.order > unscale.order]
        stepped = [s for s in steps if model.same_object(s, unscale) and model.passes.covers(s.site, unscale.site)]
        if not later or stepped or any(model.passes.covers(u.site, unscale.site) for u in later):
            continue
        if any(model.passes.exclusive(a.site, b.site) for a in later for b in later if a is not b):
            continue  # each branch updates
        own = {id(g.test) for g in unscale.site.guards}
        # (a path where the scaler is None unscaled nothing either: `if scaler is not None:` skips nothing)
        skips = [g for g in later[0].site.guards if id(g.test) not in own and not _present(model, g, unscale) and not model.roles.command_line.lets_through(g, later[0].site.scope)]
        if not skips:
            continue  # the update is only in the other arm of the unscale's own test (an XLA branch beside the CUDA one): whether that arm runs with an enabled scaler is not known here
        if any(model.guards.kinds(g) & {WINDOW_BOUNDARY, COMMIT_GATE} for g in skips):
            continue  # a window (SL205) or a commit gate decides, not a skip of this path
        scaler = model.text.of(unscale.subject)
        yield Finding(unscale.node, f"A path after `{model.text.of(unscale.node)}` skips both `{scaler}.step` and `{scaler}.update()` (`{model.text.of(skips[0].test)}`): the next `unscale_` raises, and the scale is never lowered")
