"""## What it does
Finds a checkpoint that stores the model and optimizer but not the scheduler, the GradScaler or the
update counter that the training code has, when its contents are visible: a dict literal given to
`torch.save`, a dict built up key by key in the same function, or the literal that a `state_dict()`
method of this module returns. And `accelerator.save_state(...)`, which writes what `prepare` was given
and what is registered for checkpointing, in a function that steps a scheduler it never prepared (reported
without a fix: prepare it, or register it).

## Why is this bad?
A run resumed from it restarts what was left out. Without the scheduler's state, the schedule starts
over, and a warmup chained onto the restored LR multiplied it again (4.6x the base LR, measured).
Without the scaler's state the loss scale restarts at 65,536 and the first updates after every resume
are skipped again. Without the counter, checkpoint names, evaluation cadence and the end of the run
restart from zero.

## Example
```python
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
```

## Use instead
```python
torch.save(
    {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "scaler": scaler.state_dict(),
        "global_step": global_step,
    },
    path,
)
```

One snapshot written as several files, one per optimizer (a GAN's `G.pth` and `D.pth`), is read back
together: state any part holds is not lost, and what all of them leave out is one problem, reported at
the first. Two copies of the same optimizer's checkpoint (`last.pt`, `best.pt`) are alternatives to
resume from: each must hold everything. Copies one function writes with the same contents, directly or
through two helpers, leave out the same state: one problem, reported at the first.

An optimizer that keeps its schedule inside (a Noam wrapper, or a torch optimizer subclass, whose `step()`
advances a counter of its own and sets the learning rate from it: `self.step_num += 1`) holds the
schedule's position in that counter. Stored by a `state_dict()` that leaves the counter out (the
wrapper's own, handing back only the inner optimizer's state, or torch's inherited one, which holds no
attributes), the checkpoint loses it: reported as `optimizer.step_num`, with the class and where it is, also
for a class of another module of the project. Silent where the class's `state_dict()` reads the counter.

A checkpoint that holds no optimizer is reported too when it stores the position a resume of the
module reads back (`{"net": ..., "epoch": epoch}` beside `start_epoch = checkpoint["epoch"]`): it is the
one the run resumes from, and a scheduler or scaler it leaves out restarts there.

Silent when the contents cannot be seen (a helper builds them), for `accelerator.save_state` (it
saves every registered object), and when the LR is computed from a counter that is saved.

An Accelerator built with `mixed_precision="fp16"` holds a GradScaler the script never names: a
checkpoint written by hand with `torch.save` (not `accelerator.save_state`) must store
`accelerator.scaler.state_dict()` as well. That is reported without a fix (the scaler is `None` where
the Accelerator runs without CUDA), and only when the code shows fp16: `mixed_precision="fp16"`, or
`mixed_precision=args.mixed_precision` with the module's parser defaulting `--mixed-precision` to
"fp16" and no launch of the script giving another (a README's `--mixed-precision="bf16"`), or every
launch giving "fp16". An `Accelerator(**kwargs)`, or a precision from a config the code cannot see, is not assumed
to hold one. A counter the
code sets back to 0 at each pass over the data (the index of a batch in its epoch) is no step state.
Silent, too, where no run resumes from the module's checkpoints: neither it nor a module that calls
it loads optimizer state back (itself or through a helper), nor puts the run back at a stored position
(weights and an epoch read back), nor calls `load_state`, `load_checkpoint` or `resume_from_checkpoint=`. Such a checkpoint is an export, and what it leaves out is lost to no run.
So is one that lacks the entry the run's only resumes read the position from (a final
`{"epoch": ..., "optimizer": ...}` beside `step = ckpt["global_step"]`, with no optimizer restored):
read back, it would fail. A checkpoint handed to a function of the module (a nested one too) that
writes what it is handed with `torch.save` is seen in the caller's words. apex amp's loss scaler (`amp.state_dict()`) is step state like a
GradScaler's where the steps go through `amp.scale_loss` with a dynamic scale.

## Fix safety
Unsafe: the fix adds the missing entries, which changes the checkpoint's format; code that reads
these files elsewhere may expect the old keys only. An object that is `None` in some runs (a scaler
built only with AMP, an optional scheduler) is stored as
`scaler.state_dict() if scaler is not None else None`.
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.
"""

import os

from dataclasses import dataclass

import libcst as cst

from steplint import effects
from steplint.fixes import UNSAFE, Edit, Fix
from steplint.model import CHECKPOINT_SAVE
from steplint.rule import Finding, rule


@rule("SL302", "checkpoint-missing-step-state", "Checkpoint omits the scheduler, scaler or update counter", fix=UNSAFE)
def check(model):
    if not model.state.resumable:
        return  # nothing resumes from these checkpoints: what they leave out is lost to no run
    yield from _schedulers_save_state_leaves_out(model)
    # (a checkpoint without the optimizer is a resume's when it stores the position a resume reads back:
    # `{"net": ..., "epoch": epoch}` beside `start_epoch = checkpoint["epoch"]`)
    saves = [(save, checkpoint) for save in model.of_kind(CHECKPOINT_SAVE) if (checkpoint := model.state.checkpoint(save)) is not None
             and (OPTIMIZER in checkpoint.holds or not model.state.position_entries.isdisjoint(checkpoint.entries))
             and model.state.read_back(checkpoint)]
    snapshots = []
    for save, checkpoint in saves:
        # (one snapshot written as a file per optimizer, `G.pth` and `D.pth`, is one; so is one dict saved
        # twice, `last.pt` and `best.pt` alike)
        parts = (save.site, checkpoint.holds.get(OPTIMIZER, []))
        snapshot = next((s for s in snapshots if model.state.same_snapshot(s.parts, *parts)), None)
        if snapshot is None:
            snapshots.append(_Snapshot(save, checkpoint, [parts], [checkpoint]))
        else:
            snapshot.parts.append(parts)
            snapshot.checkpoints.append(checkpoint)
    problems = []  # [identities, (save, checkpoint, missing) of where it is reported]
    for snapshot in snapshots:
        save, checkpoint = snapshot.first, snapshot.checkpoint
        state = model.state.step_state(save.site.scope)
        held = {key for c in snapshot.checkpoints for keys in c.holds.values() for key in keys}
        optimizers = [o for _, keys in snapshot.parts for o in keys]
        missing = [(kind, key) for kind in ("scheduler", "scaler", "counter") for key in state[kind]
                   if key not in held and (kind == "counter" or model.state.moves_with(key, optimizers))]
        # (the position of a schedule a stored optimizer keeps inside, which its state_dict() leaves out)
        missing += [("position", key) for key in state["position"] if key not in held and model.state.optimizer_of_position(key) in optimizers]
        if not missing or _reported_at_the_helper(model, save, missing):
            continue
        # one dict saved twice, or two written out alike in one function (`last.pth` and `best.pth`, also
        # through two helpers, storing the same state), is one problem, reported at its first save, or at the one that writes the
        # optimizer itself where its files are saved one by one (a helper that builds its own checkpoint:
        # one problem per helper, however often it is called)
        stored = tuple(sorted((kind, tuple(sorted(keys))) for kind, keys in checkpoint.holds.items()))
        identities = {(id(save.site.scope), tuple(missing), stored)}  # (what it stores too: a copy, not another checkpoint)
        if save.via is not None and checkpoint.dict_node is None and checkpoint.name is None:
            identities.add((f"{save.via.via} in {save.via.where}", tuple(missing)))  # whichever function calls it
        problem = next((p for p in problems if p[0] & identities), None)
        if problem is None:
            problems.append([identities, (save, checkpoint, missing)])
            continue
        problem[0] |= identities
        if _saves_an_optimizer_itself(model, save, checkpoint) and not _saves_an_optimizer_itself(model, *problem[1][:2]):
            problem[1] = (save, checkpoint, missing)
    for _, (save, checkpoint, missing) in problems:
        names = [key.split(":", 1)[1] for _, key in missing]
        listed = ", ".join(model.state.describe_held(key) for _, key in missing)
        through = f" (saved by `{save.via.via}` in {save.via.where})" if save.via is not None else ""
        if OPTIMIZER in checkpoint.holds:
            what = "the optimizer"
        else:
            what = "the run's position ({}) that the resume reads back".format(", ".join(f"`{e}`" for e in sorted(model.state.position_entries & set(checkpoint.entries))))
        message = f"Checkpoint{through} stores {what} but not {listed}: a resumed run restarts {'them' if len(names) > 1 else 'it'}"
        yield Finding(save.node, message, _add_entries(model, checkpoint, missing))


OPTIMIZER = "optimizer"


def _schedulers_save_state_leaves_out(model):
    """`accelerator.save_state(...)` in a function that steps a scheduler the state leaves out
    (State.left_out_of_saved_state): reported at the first such save of the function that may run, with no fix."""
    reported = set()
    for call, site in model.state.accelerate_states["save_state"]:
        if id(site.scope) in reported or model.roles.command_line.never_runs(site) is not None:
            continue
        left_out = model.state.left_out_of_saved_state(site)
        if left_out:
            reported.add(id(site.scope))
            listed = ", ".join(f"`{key.split(':', 1)[1]}`" for key in left_out)
            yield Finding(call, (
                f"`{model.text.of(call.func)}` stores what `prepare` was given, and {listed} was never prepared: the state it writes "
                f"leaves {'them' if len(left_out) > 1 else 'it'} out, and a resumed run restarts the schedule (prepare it, or register it "
                "with `register_for_checkpointing`; no fix)"
            ))


def _saves_an_optimizer_itself(model, save, checkpoint):
    """`torch.save(optimizer.state_dict(), path)`, or a helper's save of the object it is handed as its own
    file (`save_part(optim, "optim", step, dir)`): the file of a checkpoint that holds its optimizer."""
    if save.via is not None:
        owner = model.state.saved_object(save)
    else:
        stored = save.node.args[0].value if isinstance(save.node, cst.Call) and save.node.args else None
        owner = stored.func.value if isinstance(stored, cst.Call) and isinstance(stored.func, cst.Attribute) and stored.func.attr.value == "state_dict" else None
    return owner is not None and model.roles.key(owner, save.site.scope) in checkpoint.holds.get(OPTIMIZER, ())


@dataclass
class _Snapshot:
    first: object  # the first save, where a problem is reported
    checkpoint: object  # its contents
    parts: list  # (site, optimizer keys) of each file of it
    checkpoints: list


def _reported_at_the_helper(model, save, missing):
    """A save through a helper of this very module is one problem, reported at the helper's own save.
    So is one through a function that trains (steps, scales or updates what it is handed), builds the
    checkpoint itself and is handed every object it leaves out (`train(model, optimizer, scaler)`
    saving `{model, optimizer}`): that function has them as step state, and the report is made where
    its checkpoint is built. (A saver that only writes what it is handed does not know the run has a
    scaler: the report stays at its call.)"""
    if save.via is None or not save.via.where:
        return False
    if os.path.basename(save.via.where.rsplit(":", 1)[0]) != os.path.basename(model.source.path):
        if save.via.stored or not save.via.contents:
            return False  # it writes what this module built: the report is here
        callee = model.roles.project.callee(save.node, save.site.scope) if model.roles.project is not None else None
        if callee is None or not any(e.action in _TRAINING for e in callee.effects):
            return False
        handed = {k for a in save.node.args for k in model.keys_in(a.value, save.site.scope)}
        return all(key in handed for _, key in missing)
    # (the helper's own save reports only what its function holds: a scaler local to the caller is the caller's report)
    helpers = [e.site.scope for e in model.of_kind(CHECKPOINT_SAVE) if e.via is None and e.site.scope.name == save.via.via]
    return bool(helpers) and all(key in model.state.step_state(helpers[0])[kind] for kind, key in missing)


_TRAINING = (effects.UPDATE, effects.SCALER_UPDATE, effects.SCALED_BACKWARD, effects.SCHEDULER_STEP)


def _entry(model, kind, key):
    text = key.split(":", 1)[1]
    value = text if kind in ("counter", "position") else f"{text}.state_dict()"
    if kind != "counter" and key in model.roles.maybe_none:  # `None` in fp32 runs or without a schedule
        value = f"{value} if {text} is not None else None"
    return text.split(".")[-1], value


def _add_entries(model, checkpoint, missing):
    entries = [_entry(model, kind, key) for kind, key in missing]
    if any(name in checkpoint.entries for name, _ in entries) or any(key in model.state.held_scalers for _, key in missing):
        return None  # (an Accelerator's scaler may be None where it runs: no fix of ours has run against one)
    title = "Add " + ", ".join(f'"{n}"' for n, _ in entries) + " to the checkpoint"
    newline = model.source.newline
    if checkpoint.name is not None:
        start, _ = model.text.span(checkpoint.save.node)
        first = model.text.rows(checkpoint.save.site.statement)[0]
        indent = model.source.indentation(first)
        if model.text.span(checkpoint.save.site.statement.body[0])[0] != start:
            return None
        text = "".join(f'{checkpoint.name}["{n}"] = {v}{newline}{indent}' for n, v in entries)
        return Fix(title, UNSAFE, (Edit(start, start, text),))
    node = checkpoint.dict_node
    if node is None or not node.elements:
        return None
    last = node.elements[-1]
    _, value_end = model.text.span(last.value)
    has_comma = isinstance(last.comma, cst.Comma)
    after = model.source.text.index(",", value_end) + 1 if has_comma else value_end
    if model.text.rows(node)[0] == model.text.rows(last.value)[1]:
        text = "".join(f' "{n}": {v},' for n, v in entries) if has_comma else "".join(f', "{n}": {v}' for n, v in entries)
    else:
        indent = model.source.indentation(model.text.rows(last.value)[0])
        lines = [f'{indent}"{n}": {v}' for n, v in entries]
        text = ("" if has_comma else ",") + "".join(newline + line + ("," if has_comma or i < len(lines) - 1 else "") for i, line in enumerate(lines))
    return Fix(title, UNSAFE, (Edit(after, after, text),))
