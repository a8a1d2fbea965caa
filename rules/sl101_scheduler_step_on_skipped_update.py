"""## What it does
Finds a learning-rate scheduler that advances after an update the framework may skip
(`scaler.step(optimizer)` under mixed precision, a prepared optimizer of an fp16 Accelerator, a
DeepSpeed engine's `step()` with a scheduler of your own) when nothing checks that the update
committed; also one of the project's own stepped just before that update in the same pass, which
advances on every attempt as well (a torch scheduler stepped first is SL104's).

## Why is this bad?
`GradScaler.step(optimizer)` skips `optimizer.step()` when the gradients hold inf or NaN, and
returns `None` either way. A `scheduler.step()` after it advances the schedule on updates that never
happened. Early in training, while the scaler calibrates, several updates in a row are skipped:
with a warmup of 10 and overflow on the first 3 iterations, the 10 committed updates run at LRs
0.37 … 1.0 instead of 0.1 … 0.91, so 30% of the warmup is gone before the first update, and
`OneCycleLR(total_steps=N)` raises `Tried to step N+1 times` at the end of the run.

## Example
```python
scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()
scheduler.step()
```

## Use instead
```python
scaler.scale(loss).backward()
committed = committed_step(scaler, optimizer)
scaler.update()
if committed:
    scheduler.step()
```
`committed_step` (added to the module by the fix, or imported from `steplint.runtime`) runs
`scaler.step(optimizer)` and reads the scaler's own found-inf record for that optimizer, which is
exact for fused optimizers too. With accelerate the gate is
`if not accelerator.optimizer_step_was_skipped:`; with DeepSpeed, `engine.was_step_applied()`.

A scheduler's step is `step()`, `step_update()`, or any method of a class of the project that writes
the learning rate of the optimizer's param groups itself (`def advance(self): for g, lr in
zip(self.optimizer.param_groups, self.base_lrs): g["lr"] = ...`), called on an object known to be a
scheduler: the same method name on another object (an EMA's `advance(model)`) is not one.

The same holds when the code skips the update itself (`if not torch.isfinite(grad_norm):
optimizer.zero_grad()`, `else: optimizer.step()`) and steps the scheduler outside that branch.

An `optimizer.step()` is skippable when apex scales its loss (`with amp.scale_loss(loss, optimizer)`),
when ColossalAI boosts the optimizer in fp16 (`booster.boost(...)` with a Gemini, LowLevelZero or
HybridParallel plugin, fp16 unless `precision=` says otherwise, or `Booster(mixed_precision="fp16")`
with a DDP plugin), when a `try` around it catches `OverflowError` and goes on (fairseq's fp16
optimizers raise it on overflow), or when `[tool.steplint.roles] skippable-optimizer = [...]` names it
(for frameworks steplint does not know). None of these but the last leaves a signal a fix could gate
on after the step, so there is no fix and the message says so. With `OverflowError` the exception
itself tells the code: what runs in the `try` after the step, in its `else:`, under a flag the handler sets
(`if not overflow:`) or after a handler that ends the pass (`continue`) sees committed updates only,
and is silent.

Silent for updates that are never skipped: bf16, fp8 and fp32 ColossalAI boosters, a DeepSpeed
engine whose module shows no fp16 (its config in bf16, `"fp16": {"enabled": False}`, or in a JSON file
steplint cannot see), a handler that re-raises the `OverflowError`. Silent for schedulers that count
something else: a scheduler prepared by accelerate (it skips by itself), one owned by a DeepSpeed
engine, `ReduceLROnPlateau(metric)`, a call told its position
(`scheduler.step(epoch + i / n)`, `step_update(num_updates)`: SL102 checks the counter), an epoch
scheduler after the batch loop, a call marked `# steplint: schedule=tokens` (or `batches`,
`epochs`), and a scheduler call under a flag off by default that no call in the project turns on
(`if self.step_every_batch:` with `step_every_batch=False` in the constructor, never passed).

## Fix safety
Safe: only the scheduler's advance changes, to the committed updates the schedule is written in.
Unsafe when the gate is a DeepSpeed engine's `was_step_applied()`: fp16 DeepSpeed needs a GPU, so no
test of ours has run that gate.
With an `except OverflowError` handler that drops the update and goes on, the fix sets
`committed = True` before the `try` and `committed = False` first in the handler, and gates the
scheduler after the `try` on it (proven at run time with an optimizer that raises on overflow); a
scheduler in the `finally:` or in a one-line handler gets no fix.
No fix for updates the code skips itself: moving the scheduler into the update's branch is left to you.
There is no fix for timm-style `loss_scaler(loss, optimizer)` calls, which step and update the scaler
in one call and leave nothing exact to read afterwards.
Preconditions: role (`committed_step` only on a torch GradScaler: built by its qualified
constructor, annotated so, or shown with `scale`, `step` and `update` and never built from another
call; a toolkit's wrapper with a `step` of its own gets no fix, and the message says so); binding
(the `committed` flag exists on the fp32 branch too: `committed = True` before the branch);
committed-path equivalence (checked on the fixed tree: with the gate true, the fixed module is the
original one, statement for statement).
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.

## References
- [Automatic Mixed Precision examples](https://pytorch.org/docs/stable/notes/amp_examples.html)
- [`torch.amp.GradScaler`](https://pytorch.org/docs/stable/amp.html#gradient-scaling)
- [ColossalAI Booster API](https://colossalai.org/docs/basics/booster_api/)
"""

from steplint.fixes import SAFE
from steplint.model import SCHEDULER_STEP
from steplint.model.schedules import sets_its_first_lr
from steplint.model.skips import no_signal_note, skipped_by_the_code
from steplint.rewrite import gate_advice, gate_fix
from steplint.rule import Finding, rule


@rule("SL101", "scheduler-step-on-skipped-update", "Scheduler advances after an update that may have been skipped", fix=SAFE)
def check(model):
    for step in model.of_kind(SCHEDULER_STEP):
        update = model.passes.attempt_for(step)
        if update is None and model.counters.per_update_scheduler(step):
            skipped = skipped_by_the_code(model, step)
            if skipped is not None:
                name, check = model.text.of(step.subject), model.text.of(skipped[1].test)
                yield Finding(step.node, f"`{name}` advances even when the code skips `{model.text.of(skipped[0].node)}` (`{check}`); advance it with the update")
            else:
                yield from _before_the_update(model, step)
            continue
        if update is None or not model.counters.per_update_scheduler(step) or model.guards.gated(step.site, update):
            continue
        if model.guards.off_by_default(step.site) is not None:
            continue  # (a per-batch branch under a flag off by default that nothing turns on does not run)
        name = model.text.of(step.subject)
        inside = f" (it steps in `{update.via.via}`, {update.via.where})" if update.via is not None else ""
        message = f"`{name}` advances even when `{model.text.of(update.node)}`{inside} skipped the update; gate it on the committed update{no_signal_note(update)}"
        fix = gate_fix(model, update, step, f"Advance `{name}` only when the update committed", SAFE, model.settings.fix_gate)
        yield Finding(step.node, message + (gate_advice(model, update) if fix is None else ""), fix)


def _before_the_update(model, step):
    """A scheduler stepped before a skippable update of its pass advances on every attempt, skipped
    ones included. Where SL104 reports the order (a scheduler that sets its first LR when built), the
    fix it offers puts the step after the update, and this rule then checks it there."""
    update = model.passes.attempt_for(step, before_only=False)
    if update is None or update.order < step.order or model.guards.gated(step.site, update) or sets_its_first_lr(step.role):
        return
    if model.guards.off_by_default(step.site) is not None:
        return
    name = model.text.of(step.subject)
    yield Finding(step.node, (
        f"`{name}` advances before `{model.text.of(update.node)}` on every pass, also when that update is skipped; "
        f"advance it after the update, only when it committed (no fix: where the update commits is after this call){no_signal_note(update)}"
    ))
