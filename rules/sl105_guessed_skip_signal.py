"""## What it does
Finds a commit check that guesses whether the update committed: a comparison of loss scales
(`scale_before <= scale_after`, `scaler.get_scale() >= scale`), or the loss's finiteness standing in
for the gradients', used to decide whether the scheduler or the update counter advances.

## Why is this bad?
The loss scale is not a record of what happened to one optimizer.
- When two optimizers share a scaler and one skips, the scale drops for both: both look skipped.
- Read before `scaler.update()`, the scale has not changed yet: every update looks committed.
- After the scale underflows to 0, or after `scaler.update(new_scale=...)`, the comparison says
  whatever the arithmetic says.
- A strict `scale_before < scale_after` is true only on growth steps (every 2,000 updates by
  default), so the schedule almost never moves.

A finite loss does not mean finite gradients: the backward pass can overflow in fp16 while the
loss is finite, and the scaler then skips an update that the check calls committed.

## Example
```python
scale_before = scaler.get_scale()
scaler.step(optimizer)
scaler.update()
if scale_before <= scaler.get_scale():
    scheduler.step()
```

## Use instead
```python
committed = committed_step(scaler, optimizer)
scaler.update()
if committed:
    scheduler.step()
```

Silent for exact signals and for flags the code keeps itself (`if not overflow:` in fairseq style,
`was_step_applied()`, `not accelerator.optimizer_step_was_skipped`).

## Fix safety
Safe, where the update is a plain `scaler.step(optimizer)` statement: the guess is replaced by the
result of `committed_step`, the exact record. Without an exact signal to read (a check before the
update, a timm-style loss scaler) there is no fix.
"""

import libcst as cst

from steplint.fixes import SAFE, Edit, Fix
from steplint.model import COUNTER_INCREMENT, GUESSED_GATE, SCALER_UPDATE, SCHEDULER_STEP
from steplint.model.guards import is_finiteness_check
from steplint.model.syntax import walk_expressions
from steplint.rewrite import committed_update_edits, gate_condition, holds_comment
from steplint.rule import Finding, rule


@rule("SL105", "guessed-skip-signal", "Commit inferred from the loss scale or the loss's finiteness", fix="sometimes")
def check(model):
    reported = set()
    for event in model.of_kind(SCHEDULER_STEP, COUNTER_INCREMENT):
        update = model.attempt_for(event)
        if update is None:
            continue
        for guard in model.commit_guards(event.site, update, (GUESSED_GATE,)):
            for guess in _guesses(model, guard.test, event.site.scope):
                if id(guess) in reported:
                    continue
                reported.add(id(guess))
                yield Finding(guess, _message(model, guess, update, guard), _fix(model, guess, update, guard))


def _guesses(model, test, scope):
    """The guessing sub-expressions of a condition, following a flag to its assignment."""
    for sub in walk_expressions(test):
        if isinstance(sub, cst.Comparison) and any(model.is_scale_read(o, scope) for o in [sub.left] + [c.comparator for c in sub.comparisons]):
            yield sub
        elif isinstance(sub, cst.Call) and is_finiteness_check(sub) and not any(isinstance(a.value, cst.Call) and is_finiteness_check(a.value) for a in sub.args):
            yield sub
        elif isinstance(sub, cst.Name) and GUESSED_GATE in model.flag_kinds(sub, scope):
            assignment = model.flag_assignment(sub, scope)
            if assignment is not None:
                yield from _guesses(model, assignment.value, scope)


def _ends_a_pass(guard):
    """A fix never changes the condition of a branch that raises, returns, breaks or continues:
    which passes end there is the code's own decision."""
    return guard.early_exit or any(isinstance(node, _EXITS) for node in walk_expressions(guard.statement))


_EXITS = (cst.Raise, cst.Return, cst.Break, cst.Continue)


def _message(model, guess, update, guard):
    if isinstance(guess, cst.Call):
        return "Loss finiteness is not the commit signal: gradients can overflow while the loss is finite, and the skipped update still counts"
    operators = {type(c.operator) for c in guess.comparisons}
    if operators & {cst.LessThan, cst.GreaterThan} and not guard.negated:  # (the strict test runs the schedule)
        return f"`{model.text(guess)}` guesses the commit from the loss scale, and a strict comparison is true only when the scale grew: the schedule almost never moves"
    if _read_before_update(model, guess, update):
        return f"`{model.text(guess)}` reads the loss scale before `scaler.update()`, when it has not changed yet: every update looks committed"
    return f"`{model.text(guess)}` guesses the commit from the loss scale: wrong when optimizers share the scaler, after underflow and after `update(new_scale=...)`"


def _read_before_update(model, guess, update):
    order = model.order_of_expression(guess)
    after = [u.order for u in model.in_iteration(update, SCALER_UPDATE) if u.order > update.order]
    return order is not None and (not after or order < min(after))


def _fix(model, guess, update, guard):
    order = model.order_of_expression(guess)
    condition = gate_condition(model, update)
    if condition is None or order is None or order < update.order or _ends_a_pass(guard) or holds_comment(guess):
        return None
    edits = committed_update_edits(model, update, condition, model.settings.fix_gate)
    if edits is None:
        return None
    start, end = model.span(guess)
    return Fix(f"Use the exact commit signal `{condition}`", SAFE, tuple(edits) + (Edit(start, end, condition),), group=f"gate@{model.span(update.node)[0]}")
