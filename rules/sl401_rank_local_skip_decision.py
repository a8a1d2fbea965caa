"""## What it does
In distributed code (torch.distributed, DDP, FSDP, accelerate, DeepSpeed), finds a decision whether
to step that each rank takes from its own loss or gradients (`if not torch.isfinite(loss):
continue`) without a collective on the decision or its inputs; also such a test after the step
whose branch leaves the training loop (`if torch.isnan(loss): break`), and one around the backward
alone (`if not torch.isnan(loss): loss.backward()`) with the step after it running either way.

## Why is this bad?
Each rank sees its own micro-batch. When one rank's loss is NaN and the others' are not, that rank
skips the backward or the step while the others go on: DDP's all-reduce waits for it and the job
hangs, or, when no collective follows, the ranks' schedules and counters drift apart. GradScaler's
own skip is safe because DDP has already all-reduced the gradients, so every rank sees the same
`found_inf`; for the same reason a check of `p.grad` after backward is silent here, and so is a
test of a norm of the gradients (`clip_grad_norm_`'s, FSDP's, DeepSpeed's), also joined with a setting
of the run (`cfg.skip_nan_inf and grad_norm.isnan()`: a name or attribute no loop assigns, alike on
every rank).

## Example
```python
loss = model(batch)
if not torch.isfinite(loss):
    continue
loss.backward()
optimizer.step()
```

## Use instead
```python
loss = model(batch)
finite = torch.isfinite(loss).to(torch.int32)
dist.all_reduce(finite, op=dist.ReduceOp.MIN)  # every rank skips, or none does
if not finite.item():
    continue
loss.backward()
optimizer.step()
```

## Fix safety
No fix: the collective to use depends on the backend and on what the code checks. The message says
what to reduce.
"""

import libcst as cst

from steplint.model import COLLECTIVE, OPTIMIZER_STEP, SKIPPABLE_STEP
from steplint.model.guards import FINITENESS
from steplint.model.structure import ends_in
from steplint.model.syntax import dotted, literal, walk_expressions
from steplint.rule import Finding, rule

@rule("SL401", "rank-local-skip-decision", "A rank decides alone, from its own loss, whether the step runs")
def check(model):
    if not model.guards.distributed:
        return
    reported = set()
    for step in model.of_kind(SKIPPABLE_STEP, OPTIMIZER_STEP):
        for guard in model.guards.of_kind(step.site, FINITENESS):
            if id(guard.test) in reported or _reduced(model, guard.test, step.site.scope):
                continue
            reported.add(id(guard.test))
            message = f"`{model.text.of(guard.test)}` is decided by each rank from its own values: ranks that disagree skip different steps (or hang in the all-reduce); all-reduce the flag with MIN first"
            yield Finding(guard.test, message)
        for test in _loop_exits_after(model, step):
            if id(test) in reported or _reduced(model, test, step.site.scope):
                continue
            reported.add(id(test))
            message = (f"`{model.text.of(test)}` is decided by each rank from its own values, and ends the training loop: a rank that stops"
                       " alone leaves the others waiting in the next all-reduce; all-reduce the flag with MIN first")
            yield Finding(test, message)
    for test in _backward_only_guards(model):
        if id(test) not in reported:
            reported.add(id(test))
            message = (f"`{model.text.of(test)}` is decided by each rank from its own values, and skips only this rank's backward: DDP"
                       " all-reduces gradients inside the backward, so the other ranks wait for it, and the step after it runs on"
                       " whatever gradients are left; all-reduce the flag with MIN first")
            yield Finding(test, message)


def _backward_only_guards(model):
    """Rank-local finiteness tests around a backward (`if not torch.isnan(loss): loss.backward()`)
    that the update after it, in the same function, does not run under: the rank skips its share of
    the gradient all-reduce, and then steps anyway."""
    steps = model.of_kind(SKIPPABLE_STEP, OPTIMIZER_STEP)
    for site in model.guards.backward_sites:
        later = [s for s in steps if s.site.scope is site.scope and s.order > site.order]
        for guard in model.guards.of_kind(site, FINITENESS) if later else ():
            shared = all(any(g.test is guard.test for g in step.site.guards) for step in later)
            if not shared and not _reduced(model, guard.test, site.scope):
                yield guard.test


def _loop_exits_after(model, step):
    """Rank-local finiteness tests after the step, in its loop, whose branch leaves the loop
    (`if torch.isnan(loss): break`): no later step of that loop runs on that rank."""
    seen = set()
    for _, site in model.structure.statements:
        if site.scope is not step.site.scope or site.loop is not step.site.loop or step.site.loop is None or site.order < step.site.order:
            continue
        for guard in site.guards:
            exit_ = guard.statement
            if (isinstance(exit_, cst.If) and guard.test is exit_.test and id(exit_) not in seen and ends_in(exit_.body, (cst.Break, cst.Return))
                    and FINITENESS in model.guards.test_kinds(exit_.test)):
                seen.add(id(exit_))
                yield exit_.test


def _reduced(model, test, scope):
    """The checked values went through a collective: gradients or their norm (the model's
    `same_on_every_rank`), or a value passed to `all_reduce`/`gather` earlier in the same function, or the value a reducing
    helper returned (`loss_value = reduce_mean(loss)`)."""
    return _global(model, test, scope, model.order_of_expression(test) or 0) or _flag_set_globally(model, test, scope)


def _global(model, test, scope, order):
    if model.guards.same_on_every_rank(test, scope, order):
        return True
    # (what the test reads, and what a local it reads was set from once before it: `global_invalid =
    # invalid_flag.item() > 0` after `dist.all_reduce(invalid_flag)`)
    read = set(model.keys_in(test, scope))
    for name in {sub.value for sub in walk_expressions(test) if isinstance(sub, cst.Name)}:
        once = model.roles.command_line.set_once(scope, name)
        if once is not None and once[1].order < order:
            read |= model.keys_in(once[0], scope)
    for collective in model.events_in(scope, COLLECTIVE):
        if collective.order <= order:
            holder = model.structure.holder.get(id(collective.node))
            results = [t.target for t in holder.targets] if isinstance(holder, cst.Assign) and holder.value is collective.node else []
            for value in [arg.value for arg in collective.node.args] + results:
                key = model.roles.key(value, scope)
                if key and key in read:
                    return True
    return False


def _flag_set_globally(model, test, scope):
    """`if skip:` where `skip = True` is only ever set under a test of values every rank shares (a
    tensor all-reduced in place before it): the flag carries its condition's reach, and is global too."""
    flag = test.expression if isinstance(test, cst.UnaryOperation) else test
    if not isinstance(flag, cst.Name):
        return False
    raised = [
        site for node, site in model.statements_of(scope)
        if isinstance(node, cst.Assign) and literal(node.value) is True and any(dotted(t.target) == flag.value for t in node.targets)
    ]
    return bool(raised) and all(
        any(not g.early_exit and _global(model, g.test, scope, site.order) for g in site.guards) for site in raised
    )
