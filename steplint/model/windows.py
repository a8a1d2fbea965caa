"""Windows: accumulation windows, the unit an attempted update is made in.

Under gradient accumulation the update is attempted once per window, on the window's last
micro-batch, under a window-boundary guard (`if (i + 1) % accum == 0:`, `if accelerator.sync_gradients:`,
a prepared step inside `accelerator.accumulate`). The Windows facet tells which statements run once per
window, with the update (`same_window`), and which run every micro-batch while the update runs once
per window (`update_outside`). The functions below read the modulo boundaries the window rules check:
where the index counts from, what it divides by, and what the window block reads.

A window boundary `X % A == 0` is read as: `X` counts micro-batches, `A` is the window length. Every
fact here is decided only when the code shows it plainly (an `enumerate` without `start`, a counter
set to 0 and incremented after the test); otherwise the answer is None and the rules stay silent.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Set, Tuple

import libcst as cst

from steplint.model.events import COUNTER_INCREMENT, OPTIMIZER_STEP, SCALED_BACKWARD, SKIPPABLE_STEP, ZERO_GRAD, Event
from steplint.model.guards import MODULO, WINDOW_BOUNDARY, divides_by_window
from steplint.model.roles import ACCELERATOR
from steplint.model.structure import Guard, Scope, Site
from steplint.model.syntax import boolean_operands, conjuncts, disjuncts, dotted, is_cadence, keyword, last_name, literal, positional, reads_name, unwrap_progress, walk_expressions
from steplint.model.values import one_as_written

if TYPE_CHECKING:
    from steplint.model import ModuleModel


@dataclass(frozen=True)
class ModuloBoundary:
    """`X % A == 0` (or `(X + 1) % A == 0`, or their `!=` under a negated guard) as a window test."""

    guard: Guard
    site: Site  # of the `if` (or early-exit) test
    comparison: cst.Comparison
    index: cst.BaseExpression  # X, or X + 1
    length: cst.BaseExpression  # A
    ends_at_the_data: bool = False  # `... or i + 1 == len(loader)`: also a boundary on the data's last micro-batch

    @property
    def shifted(self) -> bool:
        """The index is `X + 1`: the boundary falls on the last micro-batch of a window."""
        return isinstance(self.index, cst.BinaryOperation)

    @property
    def counter(self) -> Optional[cst.Name]:
        index = self.index.left if isinstance(self.index, cst.BinaryOperation) else self.index
        return index if isinstance(index, cst.Name) else None


def modulo_boundary(model: "ModuleModel", guard: Guard) -> Optional[ModuloBoundary]:
    """The modulo comparison a window guard tests, when its test is that comparison, alone or
    joined by `and`/`or` with tests that do not read the index."""
    if WINDOW_BOUNDARY not in model.guards.kinds(guard):
        return None
    found = [c for c in boolean_operands(guard.test) if window_comparison(c, guard.negated)]
    if len(found) != 1:
        return None
    comparison = found[0]
    modulo = comparison.left
    index = modulo.left  # type: ignore[attr-defined]
    counter = index.left if isinstance(index, cst.BinaryOperation) else index
    if not isinstance(counter, cst.Name):
        return None
    others = [o for o in boolean_operands(guard.test) if o is not comparison]
    readers = [o for o in others if reads_name(o, counter.value)]
    # (`... or i + 1 == len(loader)` also steps at the end of the data: the windows before it are the modulo's)
    only_or = len(disjuncts(guard.test)) == len(others) + 1
    if readers and not (not guard.negated and only_or and all(_end_of_data_test(o) for o in readers)):
        return None
    site = model.structure.site_of.get(id(guard.test))
    if site is None:
        return None
    return ModuloBoundary(guard, site, comparison, index, modulo.right, bool(readers))  # type: ignore[attr-defined]


def _end_of_data_test(test: cst.BaseExpression) -> bool:
    """`i + 1 == len(loader)`, `i == len(loader) - 1`: a test of an index against the length of the data."""
    return isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(
        test.comparisons[0].operator, (cst.Equal, cst.GreaterThanEqual)) and any(
        isinstance(n, cst.Call) and dotted(n.func) == "len" for side in (test.left, test.comparisons[0].comparator) for n in walk_expressions(side))


def window_comparison(expr: cst.BaseExpression, negated: bool) -> bool:
    """`i % A == 0` under a true guard, `i % A != 0` under a negated one (`continue`, `else`)."""
    if not isinstance(expr, cst.Comparison) or len(expr.comparisons) != 1:
        return False
    target = expr.comparisons[0]
    wanted = cst.NotEqual if negated else cst.Equal
    left = expr.left
    if not (isinstance(target.operator, wanted) and literal(target.comparator) == 0):
        return False
    if not (isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Modulo)):
        return False
    index = left.left
    if isinstance(index, cst.BinaryOperation):
        return isinstance(index.operator, cst.Add) and literal(index.right) == 1 and isinstance(index.left, cst.Name)
    return isinstance(index, cst.Name)


def argument_boundary(update: Event) -> Optional[cst.Comparison]:
    """The window boundary a timm-style loss scaler is told as an argument, on the update's call:
    `loss_scaler(loss, optimizer, update_grad=(i + 1) % accum == 0)` steps on the window's last
    micro-batch only."""
    if update.strategy != "loss-scaler" or not isinstance(update.node, cst.Call):
        return None
    for arg in update.node.args:
        if arg.keyword is not None and arg.keyword.value == "update_grad" and window_comparison(arg.value, False):
            return arg.value  # type: ignore[return-value]
    return None


def update_boundaries(model: "ModuleModel") -> List[Tuple[ModuloBoundary, Event]]:
    """Each modulo window boundary that guards an update, with the first update it guards."""
    found: Dict[int, Tuple[ModuloBoundary, Event]] = {}
    for update in model.of_kind(SKIPPABLE_STEP, OPTIMIZER_STEP):
        for guard in update.site.guards:
            if id(guard.test) in found:
                continue
            boundary = modulo_boundary(model, guard)
            if boundary is not None and boundary.site.loop is update.site.loop and boundary.site.scope is update.site.scope:
                found[id(guard.test)] = (boundary, update)
    return list(found.values())


def micro_batch_counters(model: "ModuleModel") -> set:
    """Keys of the counters that find the window's end (`should_step = self.step % accum == 0`,
    wherever it is read): they count micro-batches by design, and must advance on every one."""

    def compute() -> set:
        found = set()
        for remainder, site in model.structure.remainders:
            if divides_by_window(remainder):
                index = remainder.left.left if isinstance(remainder.left, cst.BinaryOperation) else remainder.left
                if isinstance(index, (cst.Name, cst.Attribute)):
                    found.add(model.roles.key(index, site.scope))
        found.discard(None)
        return found

    return model.remember(("micro_batch_counters",), compute)


# -- SL108: where the index counts from ----------------------------------------------------------


def counts_from_zero(model: "ModuleModel", boundary: ModuloBoundary) -> bool:
    """The boundary's index is 0 on the loop's first micro-batch (see first_index)."""
    return first_index(model, boundary) == 0


def first_index(model: "ModuleModel", boundary: ModuloBoundary) -> Optional[int]:
    """The boundary's index on the loop's first micro-batch, where the code shows it: 0 for `enumerate(...)`
    without a start, `range(n)` / `range(0, n)`, or a local counter set to 0 before the loop and incremented
    once per micro-batch after the test; 1 for `enumerate(..., 1)`, `range(1, n)`, or that counter incremented
    before the test, on every pass that reaches it. None otherwise."""
    counter = boundary.counter
    loop = boundary.site.loop
    scope = boundary.site.scope
    if counter is None or loop is None:
        return None
    name = counter.value
    start = _loop_index_start(loop, name) if isinstance(loop, cst.For) else None
    if start is not None:
        # (`for index, batch in enumerate(loader): index += 1` counts from 1 at the test)
        moved = [e for e in model.of_kind(COUNTER_INCREMENT) if e.site.scope is scope and dotted(e.subject) == name and any(l is loop for l in e.site.loops)]
        return start if not list(_rebindings(model, scope, name, loop)) and not moved else None
    if scope.name == "<module>":
        # (a script's own counter, unless a function of the module moves it too)
        if any(name in s.global_names for s in model.structure.scopes):
            return None
    elif scope.owner_of(name) is not scope:
        return None
    if isinstance(loop, cst.For) and _position_from_the_index(model, scope, name, loop, boundary.site):
        return 0
    increments = [e for e in model.of_kind(COUNTER_INCREMENT) if e.site.scope is scope and dotted(e.subject) == name]
    if len(increments) != 1:
        return None
    increment = increments[0]
    assignments = [(node, s) for node, s in _rebindings(model, scope, name, None) if node is not increment.node]
    starts = [s for node, s in assignments if _assigns_zero(node) and not any(l is loop for l in s.loops) and s.order < boundary.site.order]
    if len(starts) == 1:
        # (an earlier use of the name that no loop brings back after the start: `for i in range(n)` above it)
        assignments = [(node, s) for node, s in assignments if not _done_before(s, starts[0])]
    if not (len(assignments) == len(starts) == 1 and increment.site.loop is loop):
        return None
    if model.passes.covers(increment.site, boundary.site):
        return 0
    before = model.passes.same_iteration(increment.site, boundary.site) and increment.site.order < boundary.site.order
    return 1 if before and model.passes.runs_only_with(boundary.site, increment.site) else None


def _done_before(earlier: Site, later: Site) -> bool:
    return earlier.order < later.order and not any(l is m for l in earlier.loops for m in later.loops)


def _position_from_the_index(model: "ModuleModel", scope: Scope, name: str, loop: cst.For, boundary: Site) -> bool:
    """`ni = i + epoch * len(loader)` (or `* epoch_size`, a name set to `len(loader)`), set once in the
    loop before the test, from the loop's `enumerate` index from 0 and the index from 0 of a loop around
    it (`for epoch in range(epochs)`): the position of the micro-batch in the run, 0 on the run's first
    micro-batch. (An epoch handed in as a parameter may never be 0 there: a warmup epoch run by another
    function, then windows that go on across epochs.)"""
    bindings = list(_rebindings(model, scope, name, None))
    if len(bindings) != 1:
        return False
    node, site = bindings[0]
    value = node.value if isinstance(node, cst.Assign) and len(node.targets) == 1 else None
    if not (site.loop is loop and site.order < boundary.order and isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add)):
        return False
    for index, offset in ((value.left, value.right), (value.right, value.left)):
        if isinstance(index, cst.Name) and _loop_index_start(loop, index.value) == 0 and not list(_rebindings(model, scope, index.value, loop)):
            factors = (offset.left, offset.right) if isinstance(offset, cst.BinaryOperation) and isinstance(offset.operator, cst.Multiply) else ()
            for length, outer in (factors, factors[::-1]) if factors else ():
                if _length_of(model, scope, length, loop) and isinstance(outer, cst.Name) and any(
                    isinstance(around, cst.For) and around is not loop and _loop_index_start(around, outer.value) == 0 for around in site.loops
                ):
                    return True
    return False


def _length_of(model: "ModuleModel", scope: Scope, expr: cst.BaseExpression, loop: cst.For) -> bool:
    """`len(loader)` of the loader the loop's `enumerate` runs over, or a name set once to it in `scope`."""
    iterable = unwrap_progress(loop.iter)
    loader = positional(iterable)[0] if isinstance(iterable, cst.Call) and positional(iterable) else None
    if isinstance(expr, cst.Name):
        once = model.roles.command_line.set_once(scope, expr.value)
        expr = once[0] if once is not None else expr
    return (isinstance(expr, cst.Call) and dotted(expr.func) == "len" and loader is not None and len(expr.args) == 1
            and dotted(expr.args[0].value) is not None and dotted(expr.args[0].value) == dotted(loader))


def indexes_its_loop(boundary: ModuloBoundary) -> bool:
    """The boundary's index is its loop's own `enumerate`/`range` index from 0: it restarts with the loop."""
    loop = boundary.site.loop
    return isinstance(loop, cst.For) and boundary.counter is not None and _loop_index_from_zero(loop, boundary.counter.value)


def _loop_index_from_zero(loop: cst.For, name: str) -> bool:
    return _loop_index_start(loop, name) == 0


def _loop_index_start(loop: cst.For, name: str) -> Optional[int]:
    """Where the loop's own index `name` starts, when it is `enumerate(...)`'s or `range(...)`'s and starts at 0 or 1."""
    iterable = unwrap_progress(loop.iter)  # tqdm(enumerate(loader)) counts as enumerate does
    if not isinstance(iterable, cst.Call) or not isinstance(iterable.func, cst.Name):
        return None
    args = positional(iterable)
    if iterable.func.value == "enumerate":
        start = keyword(iterable, "start") if len(args) == 1 else (args[1] if len(args) == 2 else None)
        first = loop.target.elements[0].value if isinstance(loop.target, cst.Tuple) and loop.target.elements else None
        value = 0 if start is None else literal(start)
        return value if isinstance(first, cst.Name) and first.value == name and value in (0, 1) and len(args) in (1, 2) else None
    if iterable.func.value == "range" and isinstance(loop.target, cst.Name) and loop.target.value == name:
        if len(args) == 1:
            return 0
        value = literal(args[0]) if len(args) in (2, 3) else None
        return value if value in (0, 1) and (len(args) == 2 or literal(args[2]) == 1) else None
    return None


def _assigns_zero(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Assign) and len(node.targets) == 1 and literal(node.value) == 0


def _rebindings(model: "ModuleModel", scope: Scope, name: str, loop) -> Iterator[Tuple[cst.CSTNode, Site]]:
    """Statements of `scope` (inside `loop`, if given) that assign `name` other than by `+= 1`."""
    for node, site in model.structure.statements:
        if site.scope is not scope or (loop is not None and not any(l is loop for l in site.loops)):
            continue
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign) and literal(node.value) == 1:
                continue
            targets = [node.target]
        else:
            continue
        if any(reads_name(t, name) for t in targets):
            yield node, site
    for loop_node, site in model.structure.for_loops:
        inside = any(l is loop for l in site.loops)
        if site.scope is scope and (loop is None or inside) and loop_node is not loop:
            if reads_name(loop_node.target, name):
                yield loop_node.target, site


def accumulates(model: "ModuleModel", boundary: ModuloBoundary) -> bool:
    """Gradients build up across the micro-batches of the loop: a backward before the boundary in
    the same pass (also a scaled one in a helper of the project that makes no update: `train_step(model,
    batch, scaler)`), and no gradient clearing every micro-batch."""
    site = boundary.site
    backward = any(
        last_name(call.func) == "backward" and s.scope is site.scope and s.loop is site.loop and s.order < site.order
        for call, s in model.structure.calls
    ) or any(
        e.via is not None and e.site.scope is site.scope and e.site.loop is site.loop and e.order < site.order and not _updates_too(model, e)
        for e in model.of_kind(SCALED_BACKWARD)
    )
    cleared_every_batch = any(
        z.site.scope is site.scope and z.site.loop is site.loop
        and not any(model.guards.kinds(g) & {MODULO, WINDOW_BOUNDARY} for g in z.site.guards)
        for z in model.of_kind(ZERO_GRAD)
    )
    return backward and not cleared_every_batch


def _updates_too(model: "ModuleModel", backward: Event) -> bool:
    """The call that scales the backward also makes an update (a whole step in one helper)."""
    return any(e.node is backward.node for e in model.of_kind(SKIPPABLE_STEP))


def reads_in_window(model: "ModuleModel", boundary: ModuloBoundary) -> bool:
    """The window block reads the boundary's index (its meaning would move with the boundary)."""
    name = boundary.counter.value if boundary.counter is not None else None
    for node, site in model.structure.statements:
        if any(g is boundary.guard for g in site.guards) and name is not None and reads_name(node, name):
            return True
    return False


# -- accelerate: `accumulate` and `sync_gradients` as windows -------------------------------------


@dataclass(frozen=True)
class AccelerateWindows:
    """What accelerate makes of a module's windows (see `accelerate_windows`)."""

    guards: Dict[int, Guard]  # id(event node) -> the window guard of a prepared step or zero_grad
    sync_tests: Dict[int, bool]  # id of each `accelerator.sync_gradients` test -> whether that accelerator accumulates


def accelerate_windows(model: "ModuleModel") -> AccelerateWindows:
    """Accumulation windows that accelerate keeps: a prepared optimizer's `step()` and `zero_grad()`
    inside `with accelerator.accumulate(model):` act once per window, so they get a window guard of
    their own (the `accumulate` call), in the same window as `if accelerator.sync_gradients:`.

    Both are windows only for an accelerator built here with `gradient_accumulation_steps=` (not 1, nor an
    option that is 1 in every run the project shows):
    otherwise `accumulate` accumulates nothing and `sync_gradients` is always true, unless `accelerate
    config` says more, which we cannot see (silent rather than wrong)."""
    guards: Dict[int, Guard] = {}
    accumulating = set()  # keys of accelerators built with `gradient_accumulation_steps=` (not 1)
    for node, site in model.structure.statements:
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.value, cst.Call):
            built = model.roles.constructed(node.value, site.scope)
            steps = keyword(node.value, "gradient_accumulation_steps")
            if built is not None and built.kind == ACCELERATOR and steps is not None and literal(steps) != 1 and not one_as_written(model, steps, site.scope):
                accumulating.add(model.roles.key(node.targets[0].target, site.scope))
    for event in model.of_kind(OPTIMIZER_STEP, SKIPPABLE_STEP, ZERO_GRAD):
        if event.role is None or not event.role.prepared or event.optimizer is not event.subject:
            continue
        for _, statement in event.site.trail:
            for item in statement.items if isinstance(statement, cst.With) else ():
                if _accumulate_call(model, item.item, event.site.scope) and model.roles.key(item.item.func.value, event.site.scope) in accumulating:
                    guards[id(event.node)] = Guard(item.item, False, statement)
    sync = {id(test): model.roles.key(accelerator, scope) in accumulating for test, accelerator, scope in _sync_tests(model)}
    return AccelerateWindows(guards, sync)


def _accumulate_call(model: "ModuleModel", node: cst.CSTNode, scope: Scope) -> bool:
    return (
        isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "accumulate"
        and model.roles.is_(node.func.value, scope, ACCELERATOR)
    )


def _sync_tests(model: "ModuleModel") -> Iterator[Tuple[cst.BaseExpression, cst.BaseExpression, Scope]]:
    """(test, accelerator, scope) of `if accelerator.sync_gradients:` (alone or joined by `and`)."""
    seen = set()
    for _, site in model.structure.statements:
        for guard in site.guards:
            if id(guard.test) in seen or guard.negated:
                continue
            seen.add(id(guard.test))
            for operand in conjuncts(guard.test):
                if isinstance(operand, cst.Attribute) and operand.attr.value == "sync_gradients" and model.roles.is_(operand.value, site.scope, ACCELERATOR):
                    yield guard.test, operand.value, site.scope


# -- cadences: what a cadence test reads, and counts derived from a batch index -------------------


def cadence_reads(model: "ModuleModel", test: cst.BaseExpression, scope: Scope) -> List[cst.BaseExpression]:
    """A condition and the values of the cadence flags it reads (`should_eval = step % n == 0`)."""
    found = [test]
    for sub in walk_expressions(test):
        if isinstance(sub, cst.Name) and model.guards.flag_kinds(sub, scope) & {MODULO, WINDOW_BOUNDARY}:
            assignment = model.guards.flag_assignment(sub, scope)
            if assignment is not None:
                found.append(assignment.value)
    return found


def window_indices(model: "ModuleModel", update: Event, batches: set) -> set:
    """Keys of names set every batch to `batch_index // accum`, `accum` the update's window length:
    they count windows, but change only on a window's first micro-batch."""
    guard = model.windows.boundary(update.site)
    boundary = modulo_boundary(model, guard) if guard is not None else None
    if boundary is None:
        return set()
    length = dotted(boundary.length)
    found = set()
    for node, site in model.statements_of(update.site.scope):
        if site.loop is not update.site.loop or not isinstance(node, cst.Assign) or len(node.targets) != 1:
            continue
        value = node.value
        if (
            isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.FloorDivide) and length is not None
            and dotted(value.right) == length and any(model.mentions(value.left, site.scope, k) for k in batches)
        ):
            key = model.roles.key(node.targets[0].target, site.scope)
            if key is not None:
                found.add(key)
    return found


def _literals_assigned(node: cst.CSTNode, name: str) -> Iterator[object]:
    """The values a statement assigns `name` (`...` for one that is no literal): `flag = True`,
    `a, flag = False, True`; `flag += 1` and other kinds of binding give `...`."""
    if isinstance(node, cst.Assign):
        for target in node.targets:
            if isinstance(target.target, cst.Name) and target.target.value == name:
                yield literal(node.value)
            elif isinstance(target.target, (cst.Tuple, cst.List)):
                values = node.value.elements if isinstance(node.value, (cst.Tuple, cst.List)) else None
                for index, element in enumerate(target.target.elements):
                    if isinstance(element.value, cst.Name) and element.value.value == name:
                        yield literal(values[index].value) if values is not None and index < len(values) else ...
    elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and isinstance(node.target, cst.Name) and node.target.value == name:
        yield ... if isinstance(node, cst.AugAssign) or node.value is None else literal(node.value)


def count_window_tests(model: "ModuleModel") -> List[Tuple[Guard, str]]:
    """(guard, the key of its count) of each `if count == length:` (or `>=`) of an update, where the update's loop
    advances `count` by one at every batch before the test, and the guarded block sets it back to 0."""
    increments: Dict[Tuple[int, str], List[Event]] = {}
    for increment in model.of_kind(COUNTER_INCREMENT):
        key = model.roles.key(increment.subject, increment.site.scope)
        if key:
            increments.setdefault((id(increment.site.scope), key), []).append(increment)
    resets: Dict[Tuple[int, str], List[Site]] = {}  # (scope, key) -> the sites that set it to 0
    for node, site in model.structure.statements:
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and literal(node.value) == 0:
            key = model.roles.key(node.targets[0].target, site.scope)
            if key:
                resets.setdefault((id(site.scope), key), []).append(site)
    found: List[Tuple[Guard, str]] = []
    for update in model.of_kind(SKIPPABLE_STEP, OPTIMIZER_STEP):
        scope = update.site.scope
        for guard in reversed(update.site.guards):
            test = guard.test
            if guard.negated or any(g is guard for g, _ in found) or not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
                continue
            if not isinstance(test.comparisons[0].operator, (cst.Equal, cst.GreaterThanEqual)) or not isinstance(test.left, (cst.Name, cst.Attribute)):
                continue
            key = model.roles.key(test.left, scope)
            header = model.structure.site_of.get(id(test))  # (where the `if` reads its test)
            if not key or header is None or header.loop is None:
                continue
            length = test.comparisons[0].comparator
            advanced = any(i.site.loop is header.loop and i.order < header.order and not i.site.guards[len(header.guards):]
                           for i in increments.get((id(scope), key), ()))
            reset = any(guard in site.guards for site in resets.get((id(scope), key), ()))
            if advanced and reset and literal(length) != 1 and not one_as_written(model, length, scope):
                found.append((guard, key))
            break  # (the innermost comparison around the update is its window's test, or none is)
    return found


class Windows:
    """Which statements run once per window (once per attempted update) and which every micro-batch."""

    def __init__(self, model: "ModuleModel"):
        self.model = model
        self._shared_windows: Set[int] = set()  # ids of window tests that are one window (accelerate's)
        self._counts: Dict[int, str] = {}  # id of a count window's test -> the key of its count (add_count_windows)

    def boundary(self, site: Site) -> Optional[Guard]:
        """The innermost window-boundary guard of a statement."""
        found = self.model.guards.of_kind(site, WINDOW_BOUNDARY)
        return found[-1] if found else None

    def same_window(self, update: Site, other: Site) -> bool:
        """`other` runs once per update attempt: under the update's window boundary, if it has one."""
        boundary = self.boundary(update)
        if boundary is None:
            return True
        text, flipped = self.model.guards.condition(boundary.test)
        return any(
            g is boundary or g.test is boundary.test and g.negated == boundary.negated
            or self.model.guards.condition(g.test) == (text, flipped) and g.negated == boundary.negated and self.model.guards.unchanged(boundary, g, update.scope)
            or id(boundary.test) in self._shared_windows and id(g.test) in self._shared_windows and not g.negated
            # (`if evaluate_during_epochs and is_update_step:` holds only where the window's own test holds)
            or not g.negated and not boundary.negated and isinstance(g.test, cst.BooleanOperation)
            and any(self.model.guards.condition(c) == (text, flipped) for c in conjuncts(g.test)) and self.model.guards.unchanged(boundary, g, update.scope)
            # (`if step % print_every == 0 and print_valid:` with `print_valid = True` only in the window's block: a latch)
            or not g.negated and any(isinstance(c, cst.Name) and self._latched_by(boundary, c.value, update.scope) for c in conjuncts(g.test))
            # (`if micro == 0 and step % 1000 == 0:` after a count window's block: its count is back at 0 only there)
            or not g.negated and id(boundary.test) in self._counts and any(self._at_reset(c, self._counts[id(boundary.test)], update.scope) for c in conjuncts(g.test))
            for g in other.guards
        )

    def _at_reset(self, test: cst.BaseExpression, count: str, scope: Scope) -> bool:
        """`micro == 0` for the count of a count window: true once per window, right after its block set it back."""
        return (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Equal)
                and literal(test.comparisons[0].comparator) == 0 and self.model.roles.key(test.left, scope) == count)

    def _latched_by(self, boundary: Guard, name: str, scope: Scope) -> bool:
        """`name` is a latch of the window: the function sets it to a true literal only under the window's
        boundary (`print_valid = True` beside the step), and otherwise only to false ones (`print_valid =
        False` once it has been read): what runs only while it holds runs once per window at most."""
        def compute() -> bool:
            set_true = False
            for node, site in self.model.statements_of(scope):
                for value in _literals_assigned(node, name):
                    if value is ...:
                        return False
                    if value:
                        if not any(g.test is boundary.test and g.negated == boundary.negated for g in site.guards):
                            return False
                        set_true = True
            return set_true
        return self.model.remember(("latched_by", id(boundary.test), boundary.negated, id(scope), name), compute)

    def cadence(self, site: Site, loop=None, boundaries: bool = False) -> Optional[Guard]:
        """The innermost cadence test (`n % k == 0`, `n == k`) a statement runs under inside `loop` (its
        innermost loop by default; its function's body for a statement in no loop), other than a window
        boundary unless `boundaries`: an evaluation's cadence, a scheduler stepped every k batches."""
        region = loop if loop is not None else site.loop if site.loop is not None else site.scope.node
        first, last = self.model.text.rows(region)
        windows = self.model.guards.of_kind(site, WINDOW_BOUNDARY)
        for guard in reversed(site.guards):
            if not first < self.model.text.rows(guard.statement)[0] <= last:
                break
            if is_cadence(guard.test) and (boundaries or guard not in windows):
                return guard
        return None

    def update_outside(self, event: Event) -> Optional[Event]:
        """An update of this iteration that runs once per window while `event` runs every batch."""
        for update in self.model.passes.in_iteration(event, SKIPPABLE_STEP, OPTIMIZER_STEP):
            if self.boundary(update.site) is not None and not self.same_window(update.site, event.site) and self.model.passes.may_follow(event, update):
                return update
        return None

    def add_count_windows(self) -> None:
        """`accum_count += 1` every batch, then `if accum_count == accum: optimizer.step(); ...; accum_count = 0`: a
        count that reaches the window's length and starts over. Its test is a window boundary, as `i % accum == 0` is
        (unless the length is 1 as written: then every batch is a window)."""
        for guard, count in count_window_tests(self.model):
            self.model.guards.mark(id(guard.test), self.model.guards.kinds(guard) | {WINDOW_BOUNDARY})
            self._counts[id(guard.test)] = count

    def add_accelerate_windows(self, found: AccelerateWindows) -> None:
        """A prepared step inside `accumulate` runs once per window: it gets that window's guard, one
        window with `if accelerator.sync_gradients:`. Without accumulation `sync_gradients` is always true."""
        for event in self.model.events:
            guard = found.guards.get(id(event.node))
            if guard is not None:
                event.site = replace(event.site, guards=event.site.guards + (guard,))
                self.model.guards.mark(id(guard.test), frozenset({WINDOW_BOUNDARY}))
                self._shared_windows.add(id(guard.test))
        for test, accumulating in found.sync_tests.items():
            if accumulating:
                self._shared_windows.add(test)
            else:
                self.model.guards.drop(test, WINDOW_BOUNDARY)
