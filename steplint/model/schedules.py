"""Schedules: what a scheduler's length counts (SL107).

A scheduler built with a length (`num_training_steps=len(loader) * epochs`) is meant to be stepped
that many times. Stepped once per window (once per attempted update) with a length counted in the
batches of the loop it steps in, it ends early by the accumulation factor. The length is read only
when the code shows it plainly: one constructor, its length argument, and the one earlier assignment
of each name it reads; a division, a rounding or the window length anywhere in it means the code
already converted units, and nothing is said.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Set, Tuple

import libcst as cst

from steplint.model.events import EARLY_EXIT, Event
from steplint.model.roles import CONSTRUCTOR, SCHEDULER
from steplint.model.structure import Scope, Site
from steplint.model.syntax import dotted, keyword, last_name, literal, positional, walk_expressions

if TYPE_CHECKING:
    from steplint.model import ModuleModel
    from steplint.model.windows import ModuloBoundary

# Scheduler arguments that say how many times it will be stepped.
LENGTH_KEYWORDS = ("num_training_steps", "total_steps", "T_max", "total_iters", "steps_per_epoch", "max_steps", "t_total")  # (t_total: pytorch-transformers' schedules)
_LENGTH_POSITIONS = {"CosineAnnealingLR": 1, "OneCycleLR": 2}  # T_max, total_steps
_WRAPPERS = ("tqdm", "iter", "enumerate")


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
    """The module's Assignments, built once per module."""
    return model.remember(("schedule assignments",), lambda: _assignments(model))


def _assignments(model: "ModuleModel") -> Assignments:
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


def sets_its_first_lr(role) -> bool:
    """A scheduler from torch or a transformers/diffusers factory sets the first LR when it is built,
    so stepping it before the update skips a value. A class of the project's own (a Noam or warmup
    policy) may be stepped first on purpose, to set the LR the first update uses: which one it is
    cannot be told."""
    return role is not None and role.constructor is not None and role.constructor.startswith(
        ("torch.optim.lr_scheduler.", "transformers.", "pytorch_transformers.", "diffusers.optimization.")
    )


def positioned_by_hand(model: "ModuleModel", event: Event) -> bool:
    """The code sets the scheduler's `last_epoch` itself (`self.scheduler.last_epoch = self.start_epoch - 1`, as
    ultralytics does before stepping at the top of each epoch): where it stands at each step is the author's."""
    def compute():
        found = set()
        for node, site in model.structure.statements:
            for target in node.targets if type(node) is cst.Assign else ():
                if isinstance(target.target, cst.Attribute) and target.target.attr.value == "last_epoch":
                    found.add(model.roles.key(target.target.value, site.scope))
        return found - {None}
    return event.subject is not None and model.roles.key(event.subject, event.site.scope) in model.remember(("last_epoch set by hand",), compute)


def never_moves(model: "ModuleModel", event: Event) -> bool:
    """The scheduler holds the learning rate where it is: transformers' or diffusers'
    `get_constant_schedule(opt)` (or the old `ConstantLRSchedule`), their `get_scheduler("constant", ...)`
    with the name as written or a parameter's default that no call passes another value for,
    `ConstantLR(opt, factor=1.0)`, `LambdaLR(opt, lambda _: 1.0)`. Built in several branches
    (`if args.lr_schedule == "fixed": ...`), each branch that may run as launched builds one of those.
    Stepping it after a skipped update changes nothing."""
    key = model.roles.key(event.subject, event.site.scope)
    role = event.role
    if key is None or role is None or role.evidence < CONSTRUCTOR:
        return False

    def compute() -> bool:  # (once per scheduler: every step of it asks, from several rules)
        running = [(call, site) for call, site in assignments(model).schedulers.get(key, ()) if model.roles.command_line.may_run(site)]
        return bool(running) and all(_holds_the_rate(model, call, site) for call, site in running)
    return model.remember(("never moves", key), compute)


def _holds_the_rate(model: "ModuleModel", call: cst.Call, site: Site) -> bool:
    built = model.roles.constructed(call, site.scope)
    if built is None or built.kind != SCHEDULER:
        return False
    qualified = built.constructor or ""
    tail = qualified.rsplit(".", 1)[-1]
    if tail in ("get_constant_schedule", "ConstantLRSchedule") and qualified.startswith(("transformers.", "diffusers.", "pytorch_transformers.")):
        return True
    if tail == "get_scheduler" and qualified.startswith(("transformers.", "diffusers.")):
        name = keyword(call, "name")
        name = positional(call)[0] if name is None and positional(call) else name
        return name is not None and _string_value(model, name, site) == "constant"
    if tail == "ConstantLR":
        return _is_one(keyword(call, "factor"))
    if tail == "LambdaLR":
        given = keyword(call, "lr_lambda") or (positional(call)[1] if len(positional(call)) > 1 else None)
        return isinstance(given, cst.Lambda) and _is_one(given.body)
    return False


def _is_one(expr: Optional[cst.BaseExpression]) -> bool:
    """`1` or `1.0` as written."""
    return isinstance(expr, (cst.Integer, cst.Float)) and float(expr.value.replace("_", "")) == 1


def _string_value(model: "ModuleModel", expr: cst.BaseExpression, site: Site) -> Optional[str]:
    """A string as written, or the default of a parameter of the function that holds nothing else."""
    value = literal(expr)
    if isinstance(value, str):
        return value
    if not isinstance(expr, cst.Name) or assignments(model).before(site.scope, expr.value, site.order):
        return None
    param = next((p for p in site.scope.params if p.name.value == expr.value), None)
    if param is None or param.default is None or not model.guards.holds_its_default(site.scope, expr.value):
        return None
    value = literal(param.default)
    return value if isinstance(value, str) else None


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
    return unwrapped(loop.iter) if isinstance(loop, cst.For) else None


def unwrapped(iterable: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`loader` of `enumerate(tqdm(loader))`: what the wrappers iterate, when it is a name."""
    while isinstance(iterable, cst.Call) and last_name(iterable.func) in _WRAPPERS and positional(iterable):
        iterable = positional(iterable)[0]
    return iterable if dotted(iterable) is not None else None


def built_from_its_loops_batches(model: "ModuleModel", event: Event) -> Optional[cst.Call]:
    """The `len(loader)` the scheduler stepped in a loop over `loader` was built from, with no division anywhere in
    what it is handed (`LinearLR(args, params, num_steps)`, `num_steps = len(loader)`, the loop drawing from `loader`
    itself or through `p_bar = tqdm(loader)`): whatever class it is, its table is laid out over batches."""
    loop = event.site.loop
    if not isinstance(loop, cst.For):
        return None
    known = assignments(model)
    built = constructor_of(model, known, event)
    if built is None or built[1].scope is not event.site.scope:
        return None
    call, site = built
    nodes = [n for argument in call.args for n in _expanded(known, argument.value, site, depth=3, leaves=("len",))]
    if any(n is None or isinstance(n, cst.BinaryOperation) and isinstance(n.operator, (cst.Divide, cst.FloorDivide)) for n in nodes):
        return None
    data = _drawn_from(known, loop_iterable(loop), event.site)
    return next((n for n in nodes if isinstance(n, cst.Call) and dotted(n.func) == "len" and n.args and dotted(n.args[0].value) in data), None)


def _drawn_from(known: Assignments, iterable: Optional[cst.BaseExpression], site: Site, depth: int = 2) -> Set[str]:
    """The names the loop's iterable holds the data of: itself, and what each earlier assignment to it wraps
    (`p_bar = loader`, `p_bar = tqdm(p_bar, total=n)`)."""
    name = dotted(iterable) if iterable is not None else None
    if name is None:
        return set()
    found = {name}
    for node in known.before(site.scope, name, site.order) if depth else ():
        value = unwrapped(node.value) if isinstance(node, cst.Assign) else None
        if value is not None and dotted(value) != name:
            found |= _drawn_from(known, value, site, depth - 1)
    return found


def schedule_length_in_batches(model: "ModuleModel", known: Assignments, event: Event, boundary: ModuloBoundary) -> Optional[ScheduleLength]:
    """The scheduler's length counts the batches of the loop it steps in, once per window: it reads
    `len(loader)` of that loop and nothing about the window length or any division."""
    loader = loop_iterable(event.site.loop)
    return _counting_batches(model, known, event, [loader] if loader is not None else [], dotted(boundary.length))


def length_in_batches_stepped_per_epoch(model: "ModuleModel", known: Assignments, event: Event) -> Optional[ScheduleLength]:
    """A scheduler told nothing (`scheduler.step()`) that steps in the epoch loop after the batch loop it
    holds, whose length reads `len(loader)` of that batch loop (`OneCycleLR(total_steps=len(loader) *
    epochs)`): laid out over batches, it receives one step per epoch."""
    loop = event.site.loop
    if loop is None or not isinstance(event.node, cst.Call) or event.node.args:
        return None
    loaders = []
    for node, site in model.structure.for_loops:
        loader = loop_iterable(node) if site.scope is event.site.scope and site.loop is loop and site.order < event.order else None
        if loader is None:
            continue
        loaders.append(loader)
        earlier = known.before(site.scope, dotted(loader), site.order)  # (`tbar = tqdm(loader)`, then `enumerate(tbar)`)
        if len(earlier) == 1 and isinstance(earlier[0], cst.Assign) and (wrapped := unwrapped(earlier[0].value)) is not None:
            loaders.append(wrapped)
    return _counting_batches(model, known, event, loaders, None)


def _counting_batches(model: "ModuleModel", known: Assignments, event: Event, loaders: list, window: Optional[str]) -> Optional[ScheduleLength]:
    """The length of the scheduler `event` steps, built in its function, when it reads `len()` of one
    of `loaders` once and nothing about the window length (`window`) or any division or rounding."""
    built = constructor_of(model, known, event)
    if built is None or not loaders:
        return None
    call, site = built
    argument = length_argument(call)
    if argument is None or site.scope is not event.site.scope:
        return None
    expanded = list(_expanded(known, argument, site, depth=3))
    if any(node is None for node in expanded):
        return None
    names = {dotted(loader) for loader in loaders}
    lengths = []
    for node in expanded:
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Divide, cst.FloorDivide)):
            return None
        if isinstance(node, (cst.Name, cst.Attribute)) and window is not None and dotted(node) == window:
            return None
        if isinstance(node, cst.Call) and last_name(node.func) in ("ceil", "floor", "round", "int"):
            return None
        if isinstance(node, cst.Call) and dotted(node.func) == "len" and len(node.args) == 1 and dotted(node.args[0].value) in names:
            lengths.append(node)
    if len(lengths) != 1:
        return None
    return ScheduleLength(call, argument, lengths[0], site)


def sized_by_its_loops_batches(model: "ModuleModel", event: Event) -> Optional[cst.BaseExpression]:
    """The bound a scheduler is built from when it is also the number of batches its loop runs: the
    loop over `enumerate(loader)` stops when the index reaches `n` (`if i + 1 == n: break`), or, under
    accumulation, a counter advanced every batch does (`n_step += 1`, then `if n_step >= n_training_steps:
    break`), and the
    constructor, or what it reads in the same function, reads `n` (`gamma = (hi / lo) ** (1 / (n - 1))`,
    an LR range test; `num_training_steps=n_training_steps`). Such a schedule is laid out over batches:
    stepped per batch, it is the recipe."""
    loop = event.site.loop
    if not isinstance(loop, cst.For):
        return None
    known = assignments(model)
    # (the one call that built it, whatever it is: a factory of the project's own reads its length too)
    key = model.roles.key(event.subject, event.site.scope)
    built = known.schedulers[key][0] if key is not None and len(known.schedulers.get(key, ())) == 1 else None
    if built is None or built[1].scope is not event.site.scope:
        return None
    read = {dotted(n) for n in _expanded(known, built[0], built[1], depth=3) if isinstance(n, (cst.Name, cst.Attribute))}
    # (a counter advanced every batch says batches only under accumulation, where batches and updates
    # differ: without a window it counts attempted updates as much as batches)
    indices = model.counters.batch_indices(loop, counters=model.windows.update_outside(event) is not None)
    for exit_ in model.events_in(event.site.scope, EARLY_EXIT):
        if exit_.site.loop is not loop or not isinstance(exit_.node, cst.Break):
            continue
        for guard in exit_.site.guards:
            test = guard.test
            if guard.negated or not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
                continue
            if not isinstance(test.comparisons[0].operator, (cst.Equal, cst.GreaterThanEqual, cst.GreaterThan)):
                continue
            bound = test.comparisons[0].comparator
            if indices & model.keys_in(test.left, event.site.scope) and isinstance(bound, (cst.Name, cst.Attribute)) and dotted(bound) in read:
                return bound
    return None


def sized_in_the_batches_it_steps_per(model: "ModuleModel", event: Event) -> bool:
    """A scheduler stepped every batch while the optimizer updates once per window, whose length
    counts the batches of that loop (`epochs * len(loader)`, no division by the window): the schedule
    is laid out in batches and per-batch stepping is its recipe. (Stepped once per window instead, the
    same length is SL107's mismatch.)"""
    from steplint.model.windows import modulo_boundary  # windows imports counters, which imports this module

    update = model.windows.update_outside(event)
    guard = model.windows.boundary(update.site) if update is not None else None
    boundary = modulo_boundary(model, guard) if guard is not None else None
    return boundary is not None and schedule_length_in_batches(model, assignments(model), event, boundary) is not None


def _expanded(known: Assignments, expr: cst.CSTNode, site: Site, depth: int, leaves: Tuple[str, ...] = ()) -> Iterator[Optional[cst.CSTNode]]:
    """Every node of `expr`, and of the one earlier assignment in the same scope of each name it
    reads (a few levels deep). None stands for a name assigned more than once: not one value.
    `leaves`: calls not looked into (`len`: `len(loader)` is a length whatever builds `loader`)."""
    yield expr
    if leaves and isinstance(expr, cst.Call) and dotted(expr.func) in leaves:
        return
    name = dotted(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
    if name is None:
        for child in expr.children:
            yield from _expanded(known, child, site, depth, leaves)
        return
    if not depth:
        return
    earlier = known.before(site.scope, name, site.order)
    if len(earlier) > 1 or any(isinstance(n, cst.AugAssign) for n in earlier):
        yield None
    elif earlier and earlier[0].value is not None:  # type: ignore[attr-defined]
        yield from _expanded(known, earlier[0].value, site, depth - 1, leaves)  # type: ignore[attr-defined]


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
