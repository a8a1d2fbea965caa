"""## What it does
Finds a scheduler step, or an update counter that feeds the schedule or the end of the run, that
advances only on some ranks: under `if rank == 0:`, `if accelerator.is_main_process:`,
`if local_rank == 0:` and the like; and a scheduler's state restored only on some ranks
(`if rank == 0: lr_scheduler.load_state_dict(...)`, with no broadcast after it in its function).

## Why is this bad?
Every rank holds its own scheduler and its own counter. Advancing them on rank 0 alone leaves the
other ranks at their first learning rate: the ranks train with different LRs, their updates disagree
after the all-reduce, and a run that stops on the counter hangs when rank 0 leaves the loop and the
others wait in the next collective.

## Example
```python
optimizer.step()
if rank == 0:
    scheduler.step()
    print(f"lr {scheduler.get_last_lr()[0]:.2e}")
```

## Use instead
```python
optimizer.step()
scheduler.step()
if rank == 0:
    print(f"lr {scheduler.get_last_lr()[0]:.2e}")
```

A resume that reads the checkpoint on rank 0 alone gives the other ranks the model's weights when DDP
wraps it, but not the schedule's state: they start their schedule over (reported without a fix; every
rank must read the state, or rank 0 must broadcast it). Restores through a scheduler whose role rests
on its name alone are not reported.

Logging, checkpointing and evaluation may stay on one rank; only the schedule state must advance
everywhere. A counter that feeds only a save cadence may stay on one rank too, unless that cadence
waits for every rank (`accelerator.wait_for_everyone()`, `dist.barrier()`): the other ranks never
reach the wait, and the run hangs. The counter of a retry loop around a save (advanced only in its
`except`, inside the `while` its own test bounds) counts failed writes, not steps: silent. So is the index of
a loop where no training step runs (a search on the main process), and a scheduler that also steps, in the same
function, under the opposite rank test (rank 0 anneals after its evaluation, the other ranks mirror it after a
barrier): every rank steps it.

## Fix safety
Safe: the statement moves out of the rank condition, to just before it when it comes first in the
block, or just after it when it comes last; otherwise there is no fix. No fix either when the
statement reads a name the rank block binds (`val = evaluate(); scheduler.step(val)`: the other
ranks do not have it), nor for a metric scheduler (`ReduceLROnPlateau`): each rank would step on its
own metric, and the ranks agree only if that metric is the same everywhere. Proven at run time on two
gloo ranks in DDP, for each of these shapes: the ranks then use the same LR and keep the same weights
(tests/test_runtime_ranks.py). Unsafe for a counter that
feeds a waiting save: every rank then enters the save's cadence, and whatever in it is not itself
limited to one rank runs on all of them.
Like every fix, it is checked on the text it would write (steplint/preconditions.py): it is dropped, and the
diagnostic says why, when the fixed module would not parse, when a name it inserts a read of may be unbound there, or
when an object whose state it restores is built again after the restore; and a later round of
`--fix` never applies it to a diagnostic the first report showed without a fix.
"""

import libcst as cst

from steplint.fixes import SAFE, UNSAFE, Edit, Fix
from steplint.model import COLLECTIVE, COUNTER_INCREMENT, SCHEDULER_STEP, STATE_LOAD
from steplint.model.roles import NAME, SCHEDULER
from steplint.model.guards import RANK
from steplint.model.syntax import bound_names, last_name, walk_expressions
from steplint.rewrite import after_statement, lone_statement, move_to
from steplint.rule import Finding, rule

_WAITS = {"wait_for_everyone", "barrier"}



@rule("SL402", "rank-conditional-schedule", "Schedule state advances on some ranks only", fix="sometimes")
def check(model):
    for load, rank in _restored_on_some_ranks(model):
        name = model.text.of(load.subject)
        yield Finding(load.node, (
            f"`{name}` is restored only on the ranks where `{model.text.of(rank.test)}`: the other ranks start their schedule over, "
            "and the ranks train with different learning rates; restore it on every rank (no fix)"
        ))
    for event in model.of_kind(SCHEDULER_STEP, COUNTER_INCREMENT):
        if event.kind == SCHEDULER_STEP and (event.role is None or event.role.engine_owned):
            continue
        if event.kind == COUNTER_INCREMENT and not model.counters.in_a_training_pass(event):
            continue  # (a loop index of a helper, or of a search loop beside the training, with no training step of its own is not a schedule)
        if event.kind == COUNTER_INCREMENT and model.counters.shared_by_a_collective(event):
            continue  # (`stop_mark += 1` on the main process, then `accelerator.reduce(stop_mark)`: every rank reads the sum)
        # (a rank that raises ends the run, for every rank: no rank goes on with another count)
        # (a rank test that holds on every rank as run, `if args.eval_first and is_main_process(): return` with no run
        # giving --eval_first, divides no ranks)
        ranks = [guard for guard in model.guards.of_kind(event.site, RANK) if not guard.raises and not model.roles.command_line.lets_through(guard, event.site.scope)]
        if not ranks or event.kind == SCHEDULER_STEP and _stepped_on_the_other_ranks(model, event, ranks[-1]):
            continue
        name = model.text.of(event.subject)
        if event.kind == COUNTER_INCREMENT and not model.counters.feeds(event) & {"schedule", "lr", "stop"}:
            wait = _waits_on_all_ranks(model, event)
            if wait is not None:
                message = (
                    f"`{name}` advances only on the ranks where `{model.text.of(ranks[-1].test)}`, but `{model.text.of(wait)}` under its "
                    f"cadence waits for every rank: the other ranks never reach it, and the run hangs"
                )
                yield Finding(event.node, message, _out_of_rank_block(model, event, ranks[-1], name, UNSAFE))
            continue
        message = f"`{name}` advances only on the ranks where `{model.text.of(ranks[-1].test)}`; every rank must step its own schedule"
        if event.kind == SCHEDULER_STEP and event.role.metric:
            # each rank would step on its own metric: the ranks agree only if the metric is the same everywhere
            yield Finding(event.node, message + " (on a metric every rank has, e.g. all-reduced first)", None)
            continue
        yield Finding(event.node, message, _out_of_rank_block(model, event, ranks[-1], name, SAFE))


def _stepped_on_the_other_ranks(model, step, rank):
    """The same scheduler also steps, in the same function, under the opposite rank test: `if rank == 0:` anneals
    it after an evaluation, and `if rank != 0:` mirrors that on the other ranks (told through a file, a
    broadcast): every rank steps its own schedule."""
    key = model.roles.key(step.subject, step.site.scope)
    for other in model.of_kind(SCHEDULER_STEP):
        if other is step or other.site.scope is not step.site.scope or key is None or model.roles.key(other.subject, other.site.scope) != key:
            continue
        if any(model.guards.on_complementary_ranks(rank, guard) for guard in model.guards.of_kind(other.site, RANK)):
            return True
    return False


def _restored_on_some_ranks(model):
    """Scheduler restores (`scheduler.load_state_dict(...)`) under a rank test, with no collective after them in
    their function to hand the state on: the other ranks start their schedule over."""
    for load in model.of_kind(STATE_LOAD):
        if load.role is None or load.role.kind != SCHEDULER or load.role.evidence <= NAME:
            continue
        ranks = [guard for guard in model.guards.of_kind(load.site, RANK) if not guard.raises]
        if ranks and not any(c.order > load.order for c in model.events_in(load.site.scope, COLLECTIVE)):
            yield load, ranks[-1]


def _waits_on_all_ranks(model, increment):
    """A `wait_for_everyone()` / `barrier()`, on every rank's path, under a cadence on the counter."""
    scope = increment.site.scope
    key = model.roles.key(increment.subject, scope)
    for call, site in model.structure.calls:
        if last_name(call.func) not in _WAITS or site.scope is not scope or model.guards.of_kind(site, RANK):
            continue
        if any(model.mentions(g.test, scope, key) for g in site.guards):
            return call
    return None


def _out_of_rank_block(model, event, guard, name, applicability):
    statement = lone_statement(model, event.site)
    condition = guard.statement
    if statement is None or guard.early_exit or guard.negated or not isinstance(condition, cst.If) or condition.orelse is not None:
        return None
    if not isinstance(condition.body, cst.IndentedBlock) or statement not in condition.body.body:
        return None
    body = list(condition.body.body)
    title = f"Move `{name}` out of the rank condition"
    indent = model.source.indentation(model.text.rows(condition)[0])
    if len(body) == 1:
        start, _ = model.text.span(condition)
        line_start = model.source.line_starts[model.text.rows(condition)[0] - 1]
        end = after_statement(model, condition)
        header = model.source.text[model.text.span(condition.test)[1] : model.text.span(statement.body[0])[0]]
        if end is None or model.source.text[line_start:start].strip() or "#" in header:
            return None  # keep what is on the `if` line
        first, last = model.text.rows(statement.body[0])
        text = model.source.text[model.source.line_starts[first - 1] : end]
        return Fix(title, applicability, (Edit(line_start, end, indent + text.lstrip(" \t")),))
    bound = {name for earlier in body[: body.index(statement)] for node in walk_expressions(earlier) for name in bound_names(node)}
    if bound & {n.value for n in walk_expressions(statement) if isinstance(n, cst.Name)}:
        return None  # it reads what the rank block computed (`val = evaluate(); scheduler.step(val)`): other ranks lack it
    if statement is body[0]:
        offset = model.source.line_starts[model.text.rows(condition)[0] - 1]
    elif statement is body[-1]:
        offset = after_statement(model, condition)
    else:
        return None
    return Fix(title, applicability, tuple(move_to(model, statement, offset, indent))) if offset is not None else None
