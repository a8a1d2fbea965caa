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
- `==` and `!=` take an update that grew the scale for a skipped one.
- A strict `scale_before < scale_after` is true only on growth steps (every 2,000 updates by
  default), so the schedule almost never moves.

A finite loss does not mean finite gradients: the backward pass can overflow in fp16 while the
loss is finite, and the scaler then skips an update that the check calls committed.

## Example
```python
scale_before = scaler.get_scale()
scaler.step(optimizer)
if scale_before <= scaler.get_scale():  # read before update(): always true
    scheduler.step()
scaler.update()
```

## Use instead
```python
committed = committed_step(scaler, optimizer)
scaler.update()
if committed:
    scheduler.step()
```

Silent for exact signals and for flags the code keeps itself (`if not overflow:` in fairseq style,
`was_step_applied()`, `not accelerator.optimizer_step_was_skipped`). Silent, too, for a comparison
none of whose failure cases applies where it is read: `before <= after` (or `before > after`) after
`update()`, with one optimizer on the scaler and no `update(new_scale=...)`, is exact in practice
(it goes wrong only once the scale has underflowed to 0). The message names the case that applies.

## Fix safety
Safe, where the update is a plain `scaler.step(optimizer)` statement, or a call of a helper in the
module that runs one: the guess is replaced by the result of `committed_step`, the exact record, in
the guess's own sense. A test meant as "committed" (`before <= after`, `isfinite(loss)`) becomes
`committed`; one meant as "skipped" (`before > after`, `isnan(loss)`) becomes `not committed` (and
`not isnan(loss)` becomes `committed`). There is no fix where the sense is unclear (`before >= after`
is true on a skip and on an unchanged scale alike; a scale compared with a constant); where the guess
stands for more than one optimizer's update (two optimizers sharing a scaler: only a guess that
gates, alone, schedulers built on one of them becomes that optimizer's flag); where the guess also
runs on a path without the update (`if use_amp: scaler.step(opt) else: opt.step()` before it: the
flag would be unbound on the fp32 path); where its branch raises or exits; and without an exact
signal to read (a check before the update, a timm-style loss scaler). Proven at run time on each
shape the fix produces (tests/test_runtime_scaler.py).
Preconditions: role (`committed_step` only on a torch GradScaler: built by its qualified
constructor, annotated so, or shown with `scale`, `step` and `update` and never built from another
call; a toolkit's wrapper with a `step` of its own gets no fix, and the message says so).
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.
"""

from typing import Optional

import libcst as cst

from steplint.fixes import SAFE, Edit, Fix
from steplint.model import COUNTER_INCREMENT, GUESSED_GATE, SCALER_UPDATE, SCHEDULER_STEP
from steplint.model.guesses import COMMITTED, guess_sense, guesses, scale_comparison
from steplint.model.roles import SCALER
from steplint.model.structure import EXITS
from steplint.model.syntax import walk_expressions
from steplint.rewrite import committed_update_edits, gate_condition, holds_comment
from steplint.rule import Finding, rule


@rule("SL105", "guessed-skip-signal", "Commit inferred from the loss scale or the loss's finiteness", fix="sometimes")
def check(model):
    uses = {}  # id(guess) -> (guess, negation, container, [(event, update, guard), ...]), in order
    for event in model.of_kind(SCHEDULER_STEP, COUNTER_INCREMENT):
        update = model.passes.attempt_for(event)
        if update is None:
            continue
        for guard in model.guards.gates(event.site, update, (GUESSED_GATE,)):
            for guess, negation, container in guesses(model, guard.test, event.site.scope):
                uses.setdefault(id(guess), (guess, negation, container, []))[3].append((event, update, guard))
    for guess, negation, container, gated in uses.values():
        _, update, guard = gated[0]
        message = _message(model, guess, update, guard, gated[0][0].site.scope)
        if message is not None:
            yield Finding(guess, message, _fix(model, guess, negation, container, gated))


def _ends_a_pass(guard):
    """A fix never changes the condition of a branch that raises, returns, breaks or continues:
    which passes end there is the code's own decision."""
    return guard.early_exit or any(isinstance(node, EXITS) for node in walk_expressions(guard.statement))


def _message(model, guess, update, guard, scope) -> Optional[str]:
    """What is wrong with the guess where it is read, or None when none of its failure cases applies."""
    if isinstance(guess, cst.Call):
        return "Loss finiteness is not the commit signal: gradients can overflow while the loss is finite, and the skipped update still counts"
    if scale_comparison(model, guess, scope) is cst.LessThan and not guard.negated:  # (the strict test runs the schedule)
        return f"`{model.text.of(guess)}` guesses the commit from the loss scale, and a strict comparison is true only when the scale grew: the schedule almost never moves"
    if _read_before_update(model, guess, update):
        return f"`{model.text.of(guess)}` reads the loss scale before `scaler.update()`, when it has not changed yet: every update looks committed"
    operator = scale_comparison(model, guess, scope)
    text = f"`{model.text.of(guess)}` guesses the commit from the loss scale"
    if operator in (cst.Equal, cst.NotEqual, cst.GreaterThanEqual):
        return f"{text}: an update that grows the scale (every 2,000 committed updates by default) looks skipped"
    if model.passes.shares_its_pass(update):
        return f"{text}: optimizers share the scaler, and when one skips, the scale drops for all of them: every one looks skipped"
    if update.strategy == SCALER and any(model.same_object(u, update) and (u.node.args) for u in model.of_kind(SCALER_UPDATE)):
        return f"{text}: after `update(new_scale=...)` the comparison says what the scale set by hand says"
    # `before <= after` (or `before > after`), read after `update()`, one optimizer on the scaler,
    # no scale set by hand: exact in practice (wrong only once the scale has underflowed to 0).
    return None


def _read_before_update(model, guess, update):
    if update.strategy != SCALER:
        return False  # (a helper that steps may update the scale too)
    order = model.order_of_expression(guess)
    after = [u.order for u in model.passes.in_iteration(update, SCALER_UPDATE) if u.order > update.order]
    return order is not None and (not after or order < min(after))


def _fix(model, guess, negation, container, gated):
    """Replace the guess by the exact signal, in the guess's own sense (`committed` or `not
    committed`), when one update is what every use of it stands for."""
    event, update, guard = gated[0]
    scope = event.site.scope
    order = model.order_of_expression(guess)
    condition = gate_condition(model, update)
    sense = guess_sense(model, guess, scope)
    if condition is None or order is None or order < update.order or sense is None or holds_comment(guess):
        return None
    if any(u is not update or _ends_a_pass(g) for _, u, g in gated):
        return None  # (one guess gating the schedules of two optimizers cannot become one flag)
    if not model.passes.runs_only_with(model.site_of_expression(guess), update.site):
        return None  # `if use_amp: scaler.step(opt) else: opt.step()`, the guess after both: no flag on the other path
    if model.passes.shares_its_pass(update) and not _only_paired_schedulers(model, guess, container, gated):
        return None
    edits = committed_update_edits(model, update, condition, model.settings.fix_gate)
    if edits is None:
        return None
    if sense == COMMITTED:
        replaced, text = guess, condition
    elif negation is not None:
        replaced, text = negation, condition  # `not isnan(loss)` reads `committed`
    else:
        replaced, text = guess, f"not {condition}" if guess is container else f"(not {condition})"
    start, end = model.text.span(replaced)
    return Fix(f"Use the exact commit signal `{condition}`", SAFE, tuple(edits) + (Edit(start, end, text),), group=f"gate@{model.text.span(update.node)[0]}")


def _only_paired_schedulers(model, guess, container, gated):
    """Two optimizers share the scaler: the guess is the whole test of an `if` whose body steps only
    schedulers built on the update's own optimizer (anything else under it meant "no optimizer
    skipped", which one optimizer's commit does not say)."""
    _, update, guard = gated[0]
    body = getattr(guard.statement, "body", None)
    if guess is not container or container is not guard.test or guard.negated or not isinstance(body, cst.IndentedBlock):
        return False
    paired = {id(e.site.statement) for e, _, _ in gated if e.kind == SCHEDULER_STEP and model.passes.built_on(e, update)}
    return all(id(statement) in paired for statement in body.body)
