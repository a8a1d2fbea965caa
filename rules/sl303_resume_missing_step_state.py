"""## What it does
Finds resume code that restores the optimizer but not the scheduler, the GradScaler or the update
counter: the module never loads them, or it saves them in a checkpoint and never reads them back.

## Why is this bad?
The resumed run keeps the optimizer's moments but starts the schedule, the loss scale or the counter
over: the LR jumps back to warmup (or, with a chained warmup built after the optimizer's state was
loaded, multiplies the restored LR again), early skipped updates repeat after every resume, and the
counter-driven cadence and end of the run restart.

## Example
```python
checkpoint = torch.load(path)
model.load_state_dict(checkpoint["model"])
optimizer.load_state_dict(checkpoint["optimizer"])
```

## Use instead
```python
checkpoint = torch.load(path)
model.load_state_dict(checkpoint["model"])
optimizer.load_state_dict(checkpoint["optimizer"])
scheduler.load_state_dict(checkpoint["scheduler"])
scaler.load_state_dict(checkpoint["scaler"])
global_step = checkpoint["global_step"]
```

The GradScaler of an Accelerator built with `mixed_precision="fp16"` is step state too, though the
script never names it: a resume by hand (not `accelerator.load_state`) restores it with
`accelerator.scaler.load_state_dict(...)`. It is reported without a fix, and only when the code shows
fp16 (`mixed_precision="fp16"`, or the module's parser defaulting `--mixed-precision` to "fp16"; not
for `Accelerator(**kwargs)`). A counter the code
sets back to 0 at each pass over the data (the index of a batch in its epoch) needs no restoring.
The optimizers one run of a function restores (a GAN's generator and discriminator, each in its own
`try`, or in two methods of its trainer class) are parts of one resume, reported once; so are the
files of one snapshot restored in turn through one helper, in one block (two generators sharing an
optimizer, each from its own file); the same optimizer restored again from another source, or in
another branch, is another resume.
An optimizer that keeps its schedule inside (a Noam wrapper's, or a torch optimizer subclass's `step()`
setting the learning rate from `self.step_num`), restored through a `load_state_dict()` that does not bring
that counter back, starts the schedule over: reported, without a fix, unless the code puts the counter back
by hand after the restore (`optimizer.step_num = checkpoint["step_num"]`).
A warm start is no resume: an optimizer state loaded from another run, after which the code puts
back the learning rates it read before the load, starts a new run with a fresh scaler.
A scheduler put back at the resumed position needs no state of its own: `scheduler.last_epoch = ...`,
a counter of its read back from the checkpoint (`scheduler.model_step = state["model_step"]`), or
built after the resume with that position (`last_epoch=start - 1`, `iteration=n_iter`, or a name a
restoring helper returned: `best, last_epoch = load_state(...)`, then `start_epoch=last_epoch`), or told it
by a helper once, outside any loop (`schedule.step(epoch)` after the restore), or replayed to it (also as
`[scheduler.step() for _ in range(n)]`, in a nested function of the helper). timm's
`NativeScaler` and apex amp (also reached as `apex.amp` after `import apex`) are loss scalers, like
the GradScaler; objects held in a dict under a literal key (`self.optimizers["G"]`) are tracked by
that entry.

Four more resumes are reported, away from what an optimizer restore of the function leaves out:
- The restore is followed by a call of a function of the project that builds its own loss scaler and
  never restores it (`do_train(...)` with `scaler = GradScaler()` inside, only ever used for its own
  methods or handed to functions of its module that restore nothing), or by the construction of a class
  whose `__init__` builds one it keeps to itself (`Trainer(...)` with `self.grad_scaler = GradScaler()`):
  the message names that function and where it is.
- A resume that puts the run back at a stored position but restores no optimizer: a name read back
  from a checkpoint (`update_step = state["update_step"]`, or `_, _, _, epoch = load_checkpoint(path,
  model, None)` through a helper that loads what it is handed, or a number parsed out of the checkpoint's
  name, `global_step = int(path.split("-")[-1])`, in a script's top level too) starts a loop of the
  function or is a counter it advances, and is not set again after the read (`epoch = 1` after loading pretrained
  weights is a fine-tune). The optimizers, schedulers and scalers the run steps from there start over.
  Evaluation code that reads an epoch for its report trains nothing and is silent.
- A counter read back from the checkpoint (`step = checkpoint["step"]`) beside the optimizer's or the
  scheduler's restore, which a `for` loop then binds anew before anything reads it (`for step in
  range(max_steps)`): the restore is lost, and the counter's cadences and the end of the run start over
  while the restored schedule goes on.
- `accelerator.load_state(...)` puts back every prepared object and no counter of the loop: an update
  counter of the function (one that sets the LR, the end of the run or the checkpoints' names) that
  nothing sets after the load (from the checkpoint's folder name, as accelerate's examples do, or a
  file), nor the statement that gives the loaded path (`path, step, epoch = latest_checkpoint(...)`),
  starts over. Silent where the module registers an object of its own for checkpointing, and where it
  writes its states only under tests no run passes (`if args.checkpointing_steps == "epoch":` with no launch
  giving it): no run of it leaves a state to resume from.

A function holds no module-level counter it does not declare `global` (its caller sets it back from what
it returns), and a counter every advance of which comes before the resume, in its function, is not
restarted by it (a script whose resume section follows its training loop).

## Fix safety
Safe, where the module saves the missing state under a key: the fix reads it back right after the
optimizer's state, from the same checkpoint, and only when the checkpoint holds it
(`if checkpoint.get("scheduler") is not None:`), so checkpoints written before the entry existed
still resume; an object that is `None` in some runs (a scaler built only with AMP) is restored only
where it exists. Where nothing saves it, there is no fix (SL302 adds it to the checkpoint first). None of the four
resumes above has a fix: what to restore lives in another function, or in no checkpoint at all.
Binding: the restored object exists where the restore runs (not built later in the function, nor
only in another method), and nothing builds it again after the restore (later in the function, in a
loop around it, or in another method than `__init__`); otherwise no fix, and the message says which.
Agreement: the fix appears once the checkpoint stores the state (SL302's unsafe fix, or your own):
the next `--fix` applies it, never the run whose report showed no fix.
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.
"""

from dataclasses import dataclass

import libcst as cst

from steplint.fixes import SAFE, Fix
from steplint.model import STATE_LOAD
from steplint.model.roles import OPTIMIZER
from steplint.rewrite import insert_after
from steplint.rule import Finding, rule


@rule("SL303", "resume-missing-step-state", "Resume restores the optimizer but not the scheduler, scaler or counter", fix="sometimes")
def check(model):
    loads = model.of_kind(STATE_LOAD)
    saved = model.state.saved_under
    restored = model.state.restored_from_checkpoint
    resumes = []
    # a function of this module that restores the optimizer itself is where its resume is reported, for
    # the state it holds, not again at each call that reaches it (`train()` -> `before_train()` ->
    # `resume_train()`); a caller that holds more (a scaler the helper never sees) is told of that at the call
    restoring_here = {load.site.scope.name: load.site.scope for load in loads if load.via is None and load.role.kind == OPTIMIZER}
    for load in loads:
        if load.role.kind != OPTIMIZER:
            continue
        if load.via is None and model.state.warm_start(load) or model.state.started_over(load):
            continue  # another run's optimizer state under this run's own learning rates, or from its start: no resume
        state = model.state.step_state(load.site.scope)
        restoring = model.roles.key(load.subject, load.site.scope) if load.subject is not None else None
        missing = [(k, key) for k in ("scheduler", "scaler") for key in state[k] if not model.state.loaded(key) and model.state.moves_with(key, [restoring])]
        missing += [("counter", key) for key in state["counter"] if key in saved and key not in restored and not model.counters.advanced_only_before(key, load.site)]
        # (the position of a schedule the restored optimizer keeps inside: its load_state_dict() does not bring it back)
        missing += [("position", key) for key in state["position"] if key not in restored and model.state.optimizer_of_position(key) == restoring]
        helper = restoring_here.get(load.via.via) if load.via is not None else None
        if helper is not None:
            held = model.state.step_state(helper)
            missing = [(kind, key) for kind, key in missing if key not in held[kind]]
        # the loss scaler of a function the resume then calls, which builds it afresh (`do_train()`)
        restarted = [call.via for call in model.state.restarted_by_callees(load)] if helper is None else []
        if not (missing or restarted):
            continue
        # (the optimizers one run of a function restores are parts of one resume, reported once; the same
        # one restored again, or in another branch, is another resume, unless the code is a copy of the
        # first, under the same tests)
        resume = next((r for r in resumes if model.state.same_snapshot(r.parts, load.site, [restoring]) or any(_repeated(model, site, load.site) for site, _ in r.parts)
                       or _another_network_of_the_class(r, load, restoring, missing) or _another_file_of_the_block(r, load, missing)), None)
        if resume is None:
            resumes.append(_Resume(load, missing, restarted, [(load.site, [restoring])]))
            continue
        resume.parts.append((load.site, [restoring]))
        resume.missing += [m for m in missing if m not in resume.missing]
        resume.restarted += [r for r in restarted if r not in resume.restarted]
    for resume in resumes:
        load, missing, restarted = resume.first, resume.missing, resume.restarted
        listed = ", ".join([model.state.describe_held(key) for _, key in missing] + list(map(_built_afresh, restarted)))
        through = f" (through `{load.via.via}` in {load.via.where})" if load.via is not None else ""
        them = len(missing) + len(restarted) > 1
        message = f"Resume restores the optimizer{through} but not {listed}: the resumed run starts {'them' if them else 'it'} over"
        fix = _restore(model, load, missing, saved) if load.via is None and not restarted and len(resume.parts) == 1 else None
        yield Finding(load.node, message, fix)
    yield from _position_without_the_optimizer(model)
    for node, _, loop in model.state.restores_lost_to_a_loop:
        name = loop.target.value
        yield Finding(node, (
            f"`{name}` is read back from the checkpoint, but `for {name} in {model.text.of(loop.iter)}` (line {model.text.rows(loop)[0]}) "
            f"binds it anew before anything reads it: the resumed run counts `{name}` from the loop's start again while the restored state goes on"
        ))
    for call, _, counters in model.state.framework_resumes:
        listed = ", ".join(f"`{key.split(':', 1)[1]}`" for key in counters)
        yield Finding(call, (
            f"Resume restores what `{model.text.of(call.func.value)}` prepared but not {listed}: accelerate saves no counter of the loop, "
            f"so the resumed run starts {'them' if len(counters) > 1 else 'it'} over; set {'them' if len(counters) > 1 else 'it'} back after the load "
            "(from the checkpoint's name, or an object registered with `register_for_checkpointing`)"
        ))


def _repeated(model, earlier, site):
    """The same restore written twice in a row (`if "optimizer" in state: optimizer.load_state_dict(...)`,
    pasted again below), or one call of a helper that restores the optimizer on two paths: the same
    statement under the same tests, in the same function."""
    def written(site):  # (as written, but for spacing and quote marks)
        texts = [site.statement] + [g.test for g in site.guards if not g.early_exit]
        return ["".join(model.text.of(node).split()).replace('"', "'") for node in texts]
    return earlier.scope is site.scope and written(earlier) == written(site)


def _another_file_of_the_block(resume, load, missing):
    """CycleGAN's `load_resume_state_dict(g_A_model, ..., g_optimizer, ...)`, then the same for `g_B_model` with
    the same `g_optimizer`, one after the other in one block: the files of one snapshot restored in turn,
    leaving out the same state, are one resume (the same optimizer restored from another source, or in
    another branch, is another one)."""
    def tests(site):
        return [(id(g.test), g.negated) for g in site.guards if not g.early_exit]

    def same_block(site):
        return site.scope is load.site.scope and site.trail[-1][0] is load.site.trail[-1][0] and tests(site) == tests(load.site)
    return (load.via is not None and resume.first.via is not None and load.via.via == resume.first.via.via and sorted(missing) == sorted(resume.missing)
            and any(same_block(site) for site, _ in resume.parts))


def _another_network_of_the_class(resume, load, restoring, missing):
    """A GAN trainer's `resume_g_model()` and `resume_d_model()`: methods of one class that restore other
    optimizers and leave out the same state are parts of one resume."""
    scope, first = load.site.scope, resume.first.site.scope
    return (scope.class_name is not None and scope.class_name == first.class_name and scope is not first and restoring is not None
            and sorted(missing) == sorted(resume.missing) and all(keys and restoring not in keys for _, keys in resume.parts))


@dataclass
class _Resume:
    first: object  # the first optimizer restore, where the resume is reported
    missing: list
    restarted: list
    parts: list  # (site, [optimizer key]) of each restore of it


def _position_without_the_optimizer(model):
    """A resume that puts the run back at a stored position but restores no optimizer (weights and an
    epoch read back): what the run steps from there, schedulers, scalers and optimizers, starts over."""
    for resume in model.state.position_resumes:
        scope = resume.site.scope
        state = model.state.step_state(scope)
        missing = [key for kind in ("scheduler", "scaler") for key in state[kind] if not model.state.loaded(key) and key not in resume.set_with]
        restarted = [call.via for call in model.state.restarted_by_callees(resume)]
        if not (missing or restarted):
            continue
        named = [f"`{key.split(':', 1)[1]}`" for key in model.state.optimizers_built_in(scope) if key not in resume.set_with]
        listed = named + [model.state.describe_held(key) for key in missing] + list(map(_built_afresh, restarted))
        position = resume.position.split(":", 1)[1]
        them = "them" if len(listed) > 1 else "it"
        message = f"Resume puts the run back at its stored position (`{position}`) but does not restore {', '.join(listed)}: the resumed run starts {them} over"
        yield Finding(resume.node, message)


def _built_afresh(fresh) -> str:
    """A scaler a callee builds and never restores (a FRESH_SCALER effect), for a message."""
    return f"the loss scaler `{fresh.other}` that `{fresh.via}` ({fresh.where}) then builds afresh"


def _restore(model, load, missing, saved):
    """Read the missing state back right after the optimizer's, tolerating checkpoints written before
    the entry existed (and an object that is `None` in this run)."""
    argument = load.node.args[0].value
    if any(key in model.state.held_scalers for _, key in missing):
        return None  # (an Accelerator's scaler may be None where it runs: no fix of ours has run against one)
    if not (isinstance(argument, cst.Subscript) and isinstance(argument.value, (cst.Name, cst.Attribute))):
        return None
    source = model.text.of(argument.value)
    indent = model.source.indentation(model.text.rows(load.site.statement)[0])
    unit = model.module.default_indent
    lines = []
    for kind, key in missing:
        if key not in saved or kind == "position":
            return None  # (a position put back by hand is a loop shape no runtime proof covers yet)
        text, entry = key.split(":", 1)[1], saved[key]
        if kind == "counter":
            lines.append(f'{text} = {source}.get("{entry}", {text})')
            continue
        present = f'{source}.get("{entry}") is not None'
        lines.append(f"if {text} is not None and {present}:" if key in model.roles.maybe_none else f"if {present}:")
        lines.append(f'{unit}{text}.load_state_dict({source}["{entry}"])')
    newline = model.source.newline
    edit = insert_after(model, load.site, newline.join([lines[0]] + [indent + line for line in lines[1:]]))
    return Fix("Restore " + ", ".join(f"`{key.split(':', 1)[1]}`" for _, key in missing), SAFE, (edit,)) if edit else None
