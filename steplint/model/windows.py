"""Facts about accumulation windows that the window rules read: where a modulo boundary counts from,
what it divides by, and what a scheduler's length was computed in.

A window boundary `X % A == 0` is read as: `X` counts micro-batches, `A` is the window length. Every
fact here is decided only when the code shows it plainly (an `enumerate` without `start`, a counter
set to 0 and incremented after the test); otherwise the answer is None and the rules stay silent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Tuple

import libcst as cst

from steplint.model.events import COUNTER_INCREMENT, OPTIMIZER_STEP, SKIPPABLE_STEP, ZERO_GRAD, Event
from steplint.model.guards import MODULO, WINDOW_BOUNDARY, divides_by_window
from steplint.model.roles import ACCELERATOR, CONSTRUCTOR, SCHEDULER
from steplint.model.structure import Guard, Scope, Site
from steplint.model.syntax import dotted, keyword, last_name, literal, positional, walk_expressions

if TYPE_CHECKING:
    from steplint.model import ModuleModel

# Scheduler arguments that say how many times it will be stepped.
LENGTH_KEYWORDS = ("num_training_steps", "total_steps", "T_max", "total_iters", "steps_per_epoch", "max_steps")
_LENGTH_POSITIONS = {"CosineAnnealingLR": 1, "OneCycleLR": 2}  # T_max, total_steps
_WRAPPERS = ("tqdm", "iter", "enumerate")


@dataclass(frozen=True)
class ModuloBoundary:
    """`X % A == 0` (or `(X + 1) % A == 0`, or their `!=` under a negated guard) as a window test."""

    guard: Guard
    site: Site  # of the `if` (or early-exit) test
    comparison: cst.Comparison
    index: cst.BaseExpression  # X, or X + 1
    length: cst.BaseExpression  # A

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
    found = [c for c in _operands(guard.test) if _window_comparison(c, guard.negated)]
    if len(found) != 1:
        return None
    comparison = found[0]
    modulo = comparison.left
    index = modulo.left  # type: ignore[attr-defined]
    counter = index.left if isinstance(index, cst.BinaryOperation) else index
    if not isinstance(counter, cst.Name):
        return None
    others = [o for o in _operands(guard.test) if o is not comparison]
    if any(reads_name(o, counter.value) for o in others):
        return None
    site = model.structure.site_of.get(id(guard.test))
    if site is None:
        return None
    return ModuloBoundary(guard, site, comparison, index, modulo.right)  # type: ignore[attr-defined]


def _operands(test: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    if isinstance(test, cst.BooleanOperation):
        yield from _operands(test.left)
        yield from _operands(test.right)
    else:
        yield test


def _window_comparison(expr: cst.BaseExpression, negated: bool) -> bool:
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
    """The boundary's index is 0 on the loop's first micro-batch: `enumerate(...)` without a start,
    `range(n)` / `range(0, n)`, or a local counter set to 0 before the loop and incremented once per
    micro-batch after the test."""
    counter = boundary.counter
    loop = boundary.site.loop
    scope = boundary.site.scope
    if counter is None or loop is None:
        return False
    name = counter.value
    if isinstance(loop, cst.For) and _loop_index_from_zero(loop, name):
        return not list(_rebindings(model, scope, name, loop))
    if scope.owner_of(name) is not scope or scope.name == "<module>":
        return False
    increments = [e for e in model.of_kind(COUNTER_INCREMENT) if e.site.scope is scope and dotted(e.subject) == name]
    if len(increments) != 1:
        return False
    increment = increments[0]
    assignments = [(node, s) for node, s in _rebindings(model, scope, name, None) if node is not increment.node]
    starts = [s for node, s in assignments if _assigns_zero(node) and not any(l is loop for l in s.loops) and s.order < boundary.site.order]
    return len(assignments) == len(starts) == 1 and increment.site.loop is loop and model.covers(increment.site, boundary.site)


def indexes_its_loop(boundary: ModuloBoundary) -> bool:
    """The boundary's index is its loop's own `enumerate`/`range` index from 0: it restarts with the loop."""
    loop = boundary.site.loop
    return isinstance(loop, cst.For) and boundary.counter is not None and _loop_index_from_zero(loop, boundary.counter.value)


def _loop_index_from_zero(loop: cst.For, name: str) -> bool:
    iterable = loop.iter
    while isinstance(iterable, cst.Call) and last_name(iterable.func) in ("tqdm",) and positional(iterable):
        iterable = positional(iterable)[0]  # tqdm(enumerate(loader)) counts as enumerate does
    if not isinstance(iterable, cst.Call) or not isinstance(iterable.func, cst.Name):
        return False
    args = positional(iterable)
    if iterable.func.value == "enumerate":
        start = keyword(iterable, "start") if len(args) == 1 else (args[1] if len(args) == 2 else None)
        first = loop.target.elements[0].value if isinstance(loop.target, cst.Tuple) and loop.target.elements else None
        return isinstance(first, cst.Name) and first.value == name and (start is None or literal(start) == 0) and len(args) in (1, 2)
    if iterable.func.value == "range":
        return isinstance(loop.target, cst.Name) and loop.target.value == name and (len(args) == 1 or (len(args) in (2, 3) and literal(args[0]) == 0 and (len(args) == 2 or literal(args[2]) == 1)))
    return False


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


def reads_name(node: cst.CSTNode, name: str) -> bool:
    """`node` holds the variable `name` (not an attribute or keyword spelled the same)."""
    attributes = {id(n.attr) for n in walk_expressions(node) if isinstance(n, cst.Attribute)}
    keywords = {id(n.keyword) for n in walk_expressions(node) if isinstance(n, cst.Arg) and n.keyword is not None}
    return any(isinstance(n, cst.Name) and n.value == name and id(n) not in attributes | keywords for n in walk_expressions(node))


def accumulates(model: "ModuleModel", boundary: ModuloBoundary) -> bool:
    """Gradients build up across the micro-batches of the loop: a backward before the boundary in
    the same pass, and no gradient clearing every micro-batch."""
    site = boundary.site
    backward = any(
        last_name(call.func) == "backward" and s.scope is site.scope and s.loop is site.loop and s.order < site.order
        for call, s in model.structure.calls
    )
    cleared_every_batch = any(
        z.site.scope is site.scope and z.site.loop is site.loop
        and not any(model.guards.kinds(g) & {MODULO, WINDOW_BOUNDARY} for g in z.site.guards)
        for z in model.of_kind(ZERO_GRAD)
    )
    return backward and not cleared_every_batch


def reads_in_window(model: "ModuleModel", boundary: ModuloBoundary) -> bool:
    """The window block reads the boundary's index (its meaning would move with the boundary)."""
    name = boundary.counter.value if boundary.counter is not None else None
    for node, site in model.structure.statements:
        if any(g is boundary.guard for g in site.guards) and name is not None and reads_name(node, name):
            return True
    return False


# -- SL107: what a scheduler's length counts -----------------------------------------------------


@dataclass(frozen=True)
class ScheduleLength:
    """A scheduler's length argument and the `len(loader)` of the batch loop it was computed from."""

    constructor: cst.Call
    argument: cst.BaseExpression  # the length argument as written
    loader_length: cst.Call  # `len(loader)`, maybe inside an assignment the argument reads
    site: Site  # of the constructor


@dataclass(frozen=True)
class Assignments:
    """The module's single-target assignments by (scope, target text), in program order, and the
    schedulers they construct by role key: read once per check, looked up per event."""

    by_target: Dict[Tuple[int, str], List[Tuple[cst.CSTNode, Site]]]
    schedulers: Dict[str, List[Tuple[cst.Call, Site]]]

    def before(self, scope: Scope, name: str, order: int) -> List[cst.CSTNode]:
        return [node for node, site in self.by_target.get((id(scope), name), ()) if site.order < order]


def assignments(model: "ModuleModel") -> Assignments:
    by_target: Dict[Tuple[int, str], List[Tuple[cst.CSTNode, Site]]] = {}
    schedulers: Dict[str, List[Tuple[cst.Call, Site]]] = {}
    for node, site in model.structure.statements:
        if not isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            continue
        target = _single_target(node)
        if target is not None:
            by_target.setdefault((id(site.scope), target), []).append((node, site))
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.value, cst.Call):
            key = model.roles.key(node.targets[0].target, site.scope)
            if key is not None:
                schedulers.setdefault(key, []).append((node.value, site))
    return Assignments(by_target, schedulers)


def constructor_of(model: "ModuleModel", known: Assignments, event: Event) -> Optional[Tuple[cst.Call, Site]]:
    """The one call that built the scheduler an event steps, by its constructor."""
    key = model.roles.key(event.subject, event.site.scope)
    role = event.role
    if key is None or role is None or role.evidence < CONSTRUCTOR or len(known.schedulers.get(key, ())) != 1:
        return None
    call, site = known.schedulers[key][0]
    built = model.roles.constructed(call, site.scope)
    return (call, site) if built is not None and built.kind == SCHEDULER else None


def length_argument(call: cst.Call) -> Optional[cst.BaseExpression]:
    for name in LENGTH_KEYWORDS:
        value = keyword(call, name)
        if value is not None:
            return value
    tail = last_name(call.func) or ""
    args = positional(call)
    position = _LENGTH_POSITIONS.get(tail, 2 if tail.startswith("get_") and tail.endswith("_with_warmup") else None)
    return args[position] if position is not None and position < len(args) else None


def loop_iterable(loop) -> Optional[cst.BaseExpression]:
    """`loader` of `for ... in enumerate(tqdm(loader))`."""
    if not isinstance(loop, cst.For):
        return None
    iterable = loop.iter
    while isinstance(iterable, cst.Call) and last_name(iterable.func) in _WRAPPERS and positional(iterable):
        iterable = positional(iterable)[0]
    return iterable if dotted(iterable) is not None else None


def schedule_length_in_batches(model: "ModuleModel", known: Assignments, event: Event, boundary: ModuloBoundary) -> Optional[ScheduleLength]:
    """The scheduler's length counts the batches of the loop it steps in, once per window: it reads
    `len(loader)` of that loop and nothing about the window length or any division."""
    built = constructor_of(model, known, event)
    loader = loop_iterable(event.site.loop)
    if built is None or loader is None:
        return None
    call, site = built
    argument = length_argument(call)
    if argument is None or site.scope is not event.site.scope:
        return None
    expanded = list(_expanded(known, argument, site, depth=3))
    if any(node is None for node in expanded):
        return None
    window = dotted(boundary.length)
    lengths = []
    for node in expanded:
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Divide, cst.FloorDivide)):
            return None
        if isinstance(node, (cst.Name, cst.Attribute)) and window is not None and dotted(node) == window:
            return None
        if isinstance(node, cst.Call) and last_name(node.func) in ("ceil", "floor", "round", "int"):
            return None
        if isinstance(node, cst.Call) and dotted(node.func) == "len" and len(node.args) == 1 and dotted(node.args[0].value) == dotted(loader):
            lengths.append(node)
    if len(lengths) != 1:
        return None
    return ScheduleLength(call, argument, lengths[0], site)


def _expanded(known: Assignments, expr: cst.CSTNode, site: Site, depth: int) -> Iterator[Optional[cst.CSTNode]]:
    """Every node of `expr`, and of the one earlier assignment in the same scope of each name it
    reads (a few levels deep). None stands for a name assigned more than once: not one value."""
    yield expr
    name = dotted(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
    if name is None:
        for child in expr.children:
            yield from _expanded(known, child, site, depth)
        return
    if not depth:
        return
    earlier = known.before(site.scope, name, site.order)
    if len(earlier) > 1 or any(isinstance(n, cst.AugAssign) for n in earlier):
        yield None
    elif earlier and earlier[0].value is not None:  # type: ignore[attr-defined]
        yield from _expanded(known, earlier[0].value, site, depth - 1)  # type: ignore[attr-defined]


def _single_target(node: cst.CSTNode) -> Optional[str]:
    if isinstance(node, cst.Assign):
        return dotted(node.targets[0].target) if len(node.targets) == 1 else None
    return dotted(node.target)  # type: ignore[attr-defined]


def visible_before(known: Assignments, expr: cst.BaseExpression, scope: Scope, order: int) -> bool:
    """Every name `expr` reads is a parameter of `scope`, a global, or bound in it before `order`."""
    for node in walk_expressions(expr):
        if not isinstance(node, cst.Name):
            continue
        owner = scope.owner_of(node.value)
        if owner is None or any(p.name.value == node.value for p in owner.params):
            continue
        if not known.before(owner, node.value, order):
            return False
    return True


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

    Both are windows only for an accelerator built here with `gradient_accumulation_steps=` (not 1):
    otherwise `accumulate` accumulates nothing and `sync_gradients` is always true, unless `accelerate
    config` says more, which we cannot see (silent rather than wrong)."""
    guards: Dict[int, Guard] = {}
    accumulating = set()  # keys of accelerators built with `gradient_accumulation_steps=` (not 1)
    for node, site in model.structure.statements:
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.value, cst.Call):
            built = model.roles.constructed(node.value, site.scope)
            steps = keyword(node.value, "gradient_accumulation_steps")
            if built is not None and built.kind == ACCELERATOR and steps is not None and literal(steps) != 1:
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
            for operand in _conjuncts(guard.test):
                if isinstance(operand, cst.Attribute) and operand.attr.value == "sync_gradients" and model.roles.is_(operand.value, site.scope, ACCELERATOR):
                    yield guard.test, operand.value, site.scope


def _conjuncts(test: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        yield from _conjuncts(test.left)
        yield from _conjuncts(test.right)
    else:
        yield test


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
    guard = model.window(update.site)
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
