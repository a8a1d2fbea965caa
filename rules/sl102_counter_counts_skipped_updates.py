"""## What it does
Finds an update counter (`global_step`, `num_updates`, `iter_num`, ...) that advances after an update
the framework may skip, with nothing checking that the update committed, when the counter feeds a
schedule, a learning-rate computation, a checkpoint a run resumes from, or the end of the run.

## Why is this bad?
The counter then counts attempted updates, not committed ones. A schedule read from it
(`lr = get_lr(iter_num)`, `scheduler.step_update(num_updates=n)`) runs ahead of the parameters
exactly as in SL101; checkpoints named after it describe updates that were never made (and a
resumed run reads that count back), and a run that stops at `max_steps` stops short of the updates it promised.

## Example
```python
scaler.step(optimizer)
scaler.update()
num_updates += 1
lr_scheduler.step_update(num_updates=num_updates)
```

## Use instead
```python
committed = committed_step(scaler, optimizer)
scaler.update()
if committed:
    num_updates += 1
lr_scheduler.step_update(num_updates=num_updates)
```

A helper nested in the training function that advances the counter once per call (`nonlocal
global_step`, then `global_step += 1` outside any loop or condition) is that counter's increment
where it is called: the report points at the call, and the fix gates the call.

It reports a unit conflict, not a shape. A counter the code shows to count the data (batches or
samples) by design (set to `(epoch - 1) * len(loader)` on resume, advanced by the batches a resumed
run skips, multiplied by a batch size, advanced at the start of each batch before the update is
attempted, stepping a batch-keyed schedule with `step_batch(n)`, or declared with
`# steplint: counter=batches` or in `[tool.steplint.units]`) is the recipe for the consumers that
follow it (checkpoint names, cadences, a stop on a cadence): it is reported only where it feeds a
consumer that counts committed updates (`step_update(n)` of a scheduler built with
`t_in_epochs=False`, a budget computed as `ceil(len(loader) / accum) * epochs`), and the message
names that consumer and the evidence for both units. A name alone (`batch_idx_train`) only confirms.
The same holds for a counter whose remainder starts the loop over the data on resume
(`start = it % per_epoch`, then `for k in range(start, per_epoch)`), and for one set back to 0
before each pass over the data (the index of a batch in its epoch). A consumer sized in the data's
batches (an evaluation every `n_train // (4 * batch_size)` steps, a stop at `epochs * len(loader)`)
counts batches too: a counter of attempts is right for it, a counter of windows is not. A counter
that advances only where its own test lets it, against a value the loop measures anew
(`if elapsed // interval >= saves: save(...); saves += 1`, also `pbar.n // 25e6 >= milestone + 1`
with `pbar.update(k)` in the loop), or only in the `except` of a retry loop it
bounds, counts the runs of that block, not steps: it is never reported.

Silent for counters that feed none of these (a log line's index), or only evaluation cadences (an
evaluation every N attempts sees the model a few skipped updates later, no recipe drifts),
checkpoints of a module that nothing resumes from, checkpoints that only store the counter (read
back, it goes on counting attempts; it feeds one where it names the file or paces the saves), consumers that count the data
(`# steplint: schedule=tokens`, `step_batch(n)`, an LR or a stop computed from `n * batch_size`), counters advanced under a commit
gate (`if not overflow:`, `if committed:`, in the `try` after a step whose `except OverflowError`
drops the update), loops whose updates are never skipped, a timm
`step_update(n)` on a scheduler that counts epochs, a counter that is also the data position
(`samples_seen = step * batch_size`), a counter that finds the window's end (`step % accum == 0`,
counting micro-batches by design), a counter beside a tally of the skips the code makes itself
(`skipped_steps += 1` in the branch that skips: it counts iterations on purpose), and the accelerate / DeepSpeed recipe: there the prepared
scheduler skips with the update and `global_step` counts attempts by convention (as HF Trainer
does), so only a schedule computed from the counter is reported, and a run budget the code sizes in
updates (`if step >= max_train_steps: break` with `max_train_steps = ceil(len(loader) / accum) *
epochs`), which ends the run before that many updates: that message names the convention, and no fix
is offered. Code that follows the convention on purpose says so with `recipe = "hf-trainer"` in the
configuration, which silences both.

## Fix safety
Safe when the counter feeds only schedules, LR computations and evaluation cadences. Unsafe when it
also feeds the end of the run or a checkpoint: gating it makes the run longer by the number of
skipped updates, and changes checkpoint names. The cadence checks that read the counter right after
it move under the gate with it (else a skipped update would repeat them); when such a check sits
elsewhere in the loop, no fix is offered. Unsafe whenever the gate is a DeepSpeed engine's
`was_step_applied()`: fp16 DeepSpeed needs a GPU, so no test of ours has run that gate.
Preconditions: role (`committed_step` only on a torch GradScaler: built by its qualified
constructor, annotated so, or shown with `scale`, `step` and `update` and never built from another
call; a toolkit's wrapper with a `step` of its own gets no fix, and the message says so); binding
(the `committed` flag exists on the fp32 branch too: `committed = True` before the branch);
committed-path equivalence (checked on the fixed tree: with the gate true, the fixed module is the
original one, statement for statement).
A nested helper's call is gated whole, everything else it does included (proven at run time: the
LR it sets then follows the committed updates, and fp32 runs are unchanged).
Consistency: every cadence check (`n % k == 0`, `n == k`) that reads the counter, in any function
of the module (the caller's `trainer.num_updates`, a callback's), moves under the gate with it, or
there is no fix and the message names their lines (else each would fire again after a skipped
update, at 0 too).
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.

## References
- [Automatic Mixed Precision examples](https://pytorch.org/docs/stable/notes/amp_examples.html)
"""

from steplint.fixes import SAFE, UNSAFE
from steplint.model import CHECKPOINT_SAVE, COUNTER_INCREMENT
from steplint.model.skips import no_signal_note, skipped_by_the_code, skips_tallied
from steplint.model.windows import micro_batch_counters
from steplint.rewrite import gate_advice, gate_fix, ungated_cadences
from steplint.rule import Finding, rule


@rule("SL102", "counter-counts-skipped-updates", "Update counter advances on updates that may have been skipped", fix="sometimes")
def check(model):
    micro_batches = micro_batch_counters(model)
    for increment in model.of_kind(COUNTER_INCREMENT):
        if model.roles.key(increment.subject, increment.site.scope) in micro_batches:
            continue  # it finds the window's end: gated on commits, it would stop the windows
        if model.counters.offsets_its_loop_index(increment):
            continue  # a batch index moved to count from 1: no count of anything carries across iterations
        update = model.passes.attempt_for(increment, before_only=False)
        unit = model.units.counter_unit(increment)
        if update is None and not model.guards.gated(increment.site):
            skipped = skipped_by_the_code(model, increment)
            # (beside a tally of the skips, the counter counts attempts on purpose)
            feeds = _feeds_in_updates(model, increment, unit) if skipped is not None and not skips_tallied(model, skipped) else set()
            if feeds:
                name, check = model.text.of(increment.subject), model.text.of(skipped[1].test)
                yield Finding(increment.node, f"`{name}` counts the updates the code skips (`{check}`) and feeds {_listed(feeds)}; advance it with the update")
            continue
        if update is None or model.guards.gated(increment.site, update):
            continue
        if unit.by_design:
            finding = _conflict(model, increment, unit, update)
            if finding is not None:
                yield finding
            continue
        feeds = _feeds_in_updates(model, increment, unit)
        if model.counters.recipe_counts_attempts(update):
            feeds = feeds & {"schedule", "lr"}  # attempts counted on purpose; a counter that moves the LR must count commits
            if not feeds:
                finding = _budget_against_the_convention(model, increment, unit, update)
                if finding is not None:
                    yield finding
                continue
        if not feeds:
            continue
        name = model.text.of(increment.subject)
        message = f"`{name}` counts attempted updates, skipped ones included, and feeds {_listed(feeds)}; advance it only when the update committed{no_signal_note(update)}"
        yield _with_fix(model, increment, update, feeds, name, message)


def _feeds_in_updates(model, increment, unit):
    """What the counter feeds, less the consumers the code shows to count the data (batches,
    samples, epochs) or to read the counter as a data position: counting attempts is right for them."""
    feeds = set(model.counters.feeds(increment))
    # An evaluation every N attempts instead of N updates sees the same model a few skips later: no
    # recipe drifts. A checkpoint named after the counter drifts only for a run that resumes from it.
    feeds.discard("eval")
    others = [c for c in model.units.consumers_of(increment) if c.label in feeds]
    # Stored as a value and read back, an attempt counter goes on counting attempts: no unit changes.
    # It drifts where it names the checkpoint or paces the saves, and only for a run that resumes.
    saves = {id(e.node): e for e in model.of_kind(CHECKPOINT_SAVE)}
    if not model.state.resumable or not any(_names_or_paces(model, saves, c, increment) for c in others if c.label == "checkpoint"):
        feeds.discard("checkpoint")
    for label in list(feeds):
        if model.units.all_in_other_units(increment, unit, [c for c in others if c.label == label]):
            feeds.discard(label)
    return feeds


def _names_or_paces(model, saves, consumer, increment):
    """The checkpoint consumer reads the counter in a save's condition, or in the path it writes to."""
    save = saves.get(id(consumer.node))
    if save is None:
        return True  # a save's condition (`if step % every == 0`)
    return not model.counters.derived_keys(increment).isdisjoint(model.state.named_after(save))


def _budget_against_the_convention(model, increment, unit, update):
    """accelerate and DeepSpeed count their steps in attempts by convention, but a run budget the code
    sizes in updates (`step >= total`, `total = ceil(len(loader) / accum) * epochs`, the length the
    prepared schedule is given too) ends the run early by the skipped updates. Reported naming the
    convention, which a project that means it declares (`recipe = "hf-trainer"`)."""
    if model.settings.recipe == "hf-trainer" or update.strategy not in ("accelerate", "deepspeed"):
        return None
    budgets = [c for c in model.units.conflicting_consumers(increment, unit) if c.label == "stop" and c.evidence is not None]
    if not budgets:
        return None
    name, budget = model.text.of(increment.subject), budgets[0]
    return Finding(increment.node, (
        f"`{name}` counts attempted updates ({update.strategy}'s convention, as HF Trainer's), skipped ones included, but ends the run at "
        f"`{_short(model.text.of(budget.node))}`, a number of updates ({budget.evidence.why}): under fp16 the run stops before that many "
        f"updates; count committed updates, or declare the convention with `recipe = \"hf-trainer\"` (no fix)"
    ))


def _conflict(model, increment, unit, update):
    """A counter of the data (batches, samples) by design is the recipe for the consumers that follow
    it (checkpoint names, cadences); it is a finding only where it feeds a consumer in committed updates."""
    feeds = model.counters.feeds(increment)
    conflicts = [c for c in model.units.conflicting_consumers(increment, unit) if c.label in feeds]
    if not conflicts:
        return None
    consumer = conflicts[0]
    name = model.text.of(increment.subject)
    message = (
        f"`{name}` {model.units.describe(unit)}, skipped updates included, but feeds `{_short(model.text.of(consumer.node))}`, "
        f"which counts committed updates ({consumer.evidence.why}); advance it only when the update committed, or feed that consumer an update counter{no_signal_note(update)}"
    )
    return _with_fix(model, increment, update, set(feeds), name, message)


def _with_fix(model, increment, update, feeds, name, message):
    fix = None
    through = model.counters.readers_right_after(increment)
    elsewhere = ungated_cadences(model, increment, through) if through is not None else []
    if update.order < increment.order and through is not None and not elsewhere:
        applicability = UNSAFE if feeds & {"stop", "checkpoint"} else SAFE
        fix = gate_fix(model, update, increment, f"Advance `{name}` only when the update committed", applicability, model.settings.fix_gate, through)
        message += gate_advice(model, update) if fix is None else ""
    elif through is None or elsewhere:
        readers = elsewhere or ungated_cadences(model, increment, 0)
        where = f"on {'lines' if len(readers) > 1 else 'line'} {', '.join(map(str, readers))} " if readers else ""
        message += f" (no fix: the cadence checks {where}read it away from the increment, and would fire again after each skipped update; gate them with it)"
    return Finding(increment.node, message, fix)


def _short(text):
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


_WORDS = {"schedule": "the schedule", "lr": "the learning rate", "checkpoint": "checkpoints", "eval": "evaluation", "stop": "the end of the run"}


def _listed(feeds):
    words = [_WORDS[f] for f in ("schedule", "lr", "checkpoint", "eval", "stop") if f in feeds]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
