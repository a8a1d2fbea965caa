"""Conditions and guards: what each test a statement runs under means for the training step.

A test is a commit gate when it holds exactly when the attempted update committed (`was_step_applied`,
a flag the code keeps for it, the scale not dropping across `scaler.step`); a guessed gate stands in for
one (the loss is finite); a window boundary holds on the last micro-batch of an accumulation window
(the update is attempted once per window); a cadence (`step % n == 0`) holds once per value of a
counter; a rank test holds on some ranks only. `condition_kinds` reads one test as written; the Guards
facet gives every test of a module its kinds once (flags the code assigns a condition to included),
and tells when two tests are one unchanged condition (`if amp:` ... `if not amp:`).
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, List, Optional, Set

import libcst as cst

from steplint.model.events import OPTIMIZER_STEP, SCALE_READ, SKIPPABLE_STEP, ZERO_GRAD, Event
from steplint.model.structure import Guard, Scope, Site
from steplint.model.syntax import assignment_targets, boolean_operands, conjuncts, disjuncts, dotted, last_name, literal, names_in, walk_expressions
from steplint.model.values import one_as_written

if TYPE_CHECKING:
    from steplint.model import ModuleModel
    from steplint.model.overflow import OverflowHandling

COMMIT_GATE = "commit-gate"  # true exactly when the update committed (or a flag the code keeps for it)
GUESSED_GATE = "guessed-gate"  # stands in for one: loss-scale comparison, loss finiteness
WINDOW_BOUNDARY = "window-boundary"  # last micro-batch of an accumulation window
MODULO = "modulo"  # `i % n == 0`: a cadence, or a window boundary when it guards the update
RANK = "rank"  # runs on some ranks only
FINITENESS = "finiteness"  # a rank's own isfinite/isnan check

_EXACT_FLAG = re.compile(r"overflow|skipped|committed|applied|was_run|found_inf", re.I)
# (not `accumulated`: `Accumulated_Dataset_Epoch` counts epochs of data, not micro-batches of a window)
_ACCUMULATION_NAME = re.compile(r"accum(?!ulated)|grad_acc|update_freq|iters_to_accumulate", re.I)
_BOUNDARY_FLAG = re.compile(r"boundary|should_step|do_step|is_accumulating|sync_gradients|optimizer_step_now", re.I)
_RANK_NAME = re.compile(r"(^|_)(rank|local_rank|global_rank|is_main_process|is_local_main_process|is_master|is_global_zero|is_main|main_process)$", re.I)
_FINITE_CALLS = {"isfinite", "isnan", "isinf", "isnan_", "isfinite_"}
_ACCEPTED_COMMIT_ATTRS = {"optimizer_step_was_skipped"}
# calls whose result is the same on every rank: gradient norms (torch's over all-reduced gradients;
# FSDP's, accelerate's and DeepSpeed's, `get_global_grad_norm()` too, reduce across ranks) and a sharded
# tensor gathered whole
_GLOBAL_VALUE_CALLS = {"clip_grad_norm_", "clip_grad_norm", "get_total_norm", "get_global_grad_norm", "full_tensor"}


def is_finiteness_check(expr: cst.CSTNode) -> bool:
    for sub in walk_expressions(expr):
        if isinstance(sub, cst.Call) and last_name(sub.func) in _FINITE_CALLS:
            return True
    return False


def _names_read(test: cst.BaseExpression) -> Set[str]:
    """Plain names a test reads (`torch` and `norm` in `torch.isfinite(norm.item())`), not attribute names."""
    found: Set[str] = set()
    stack: List[cst.CSTNode] = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            found.add(node.value)
        elif isinstance(node, cst.Attribute):
            stack.append(node.value)
        else:
            stack.extend(node.children)
    return found


def _is_literal_default(value: cst.BaseExpression) -> bool:
    """`True`, `False`, `None`, a number: a flag's value before the code decides it."""
    return isinstance(value, (cst.Integer, cst.Float)) or (isinstance(value, cst.Name) and value.value in ("True", "False", "None"))


def divides_by_window(modulo: cst.BinaryOperation) -> bool:
    """`x % accum`: the modulus is the accumulation length (`(step // accum) % 2` alternates, it is no window;
    `x % (len(loader) // accum)`, a count of windows, finds an epoch's end, not a window's)."""
    if isinstance(modulo.right, cst.BinaryOperation) and isinstance(modulo.right.operator, (cst.FloorDivide, cst.Divide)):
        return False
    text = " ".join(filter(None, (dotted(n) for n in walk_expressions(modulo.right) if isinstance(n, (cst.Name, cst.Attribute)))))
    return bool(_ACCUMULATION_NAME.search(text))


def _holds_a_cadence(value: cst.BaseExpression) -> bool:
    """Whether a value assigned to a name is a cadence or a window boundary by itself: a modulo, a flag
    or a boundary call at the top of its condition (`(i + 1) % accum == 0 and not last`, `i % k`,
    `engine.is_gradient_accumulation_boundary()`), not one inside arithmetic or a call's arguments
    (a padded length `(n + r - n % r) // r`, or a loss computed from it, is a number, not a cadence)."""
    pending = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, cst.Comparison):
            pending += [node.left] + [c.comparator for c in node.comparisons]
        elif isinstance(node, cst.BooleanOperation):
            pending += [node.left, node.right]
        elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            pending.append(node.expression)
        elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo) or isinstance(node, (cst.Name, cst.Attribute)):
            return True
        elif isinstance(node, cst.Call) and last_name(node.func) == "is_gradient_accumulation_boundary":
            return True
    return False


@lru_cache(maxsize=4096)  # the same few names are read in most conditions of a module
def _name_kind(name: str) -> Optional[str]:
    """What a name read in a condition says by itself: a commit flag, a window boundary or a rank."""
    if name in _ACCEPTED_COMMIT_ATTRS or _EXACT_FLAG.search(name):
        return COMMIT_GATE
    if _BOUNDARY_FLAG.search(name):
        return WINDOW_BOUNDARY
    if _RANK_NAME.search(name):
        return RANK
    return None


def condition_kinds(
    test: cst.BaseExpression,
    flag_kind: Callable[[cst.BaseExpression], FrozenSet[str]],
    is_scale_read: Callable[[cst.BaseExpression], bool],
    set_to_literals: Callable[[cst.Name], bool] = lambda name: False,
) -> FrozenSet[str]:
    """Kinds of a condition. `flag_kind` gives the kinds of a name the code assigned a condition to;
    `is_scale_read` tells a loss-scale read (`scaler.get_scale()` or a variable holding one);
    `set_to_literals`, a flag the code sets to True and False only, whose kinds are those of the tests
    it is set under (flag_kind), not its name's (`do_step = True` under `if not epoch_done:` is no window)."""
    kinds = set()
    for sub in walk_expressions(test):
        node = type(sub)  # (type tests: see steplint.model.syntax.dotted)
        if node is cst.Call:
            name = last_name(sub.func)
            if name == "was_step_applied" or name == "_found_inf_per_device":
                kinds.add(COMMIT_GATE)
            elif name == "is_gradient_accumulation_boundary":
                kinds.add(WINDOW_BOUNDARY)
            elif name == "get_rank":
                kinds.add(RANK)
            elif name in _FINITE_CALLS:
                kinds.update((GUESSED_GATE, FINITENESS))
        elif node is cst.Comparison:
            operands = [sub.left] + [c.comparator for c in sub.comparisons]
            if any(is_scale_read(o) for o in operands):
                kinds.add(GUESSED_GATE)
        elif node is cst.BinaryOperation and type(sub.operator) is cst.Modulo:
            kinds.add(WINDOW_BOUNDARY if divides_by_window(sub) else MODULO)
        elif node is cst.Name or node is cst.Attribute:
            kind = _name_kind(last_name(sub) or "")
            if kind is not None and not (kind == WINDOW_BOUNDARY and node is cst.Name and set_to_literals(sub)):
                kinds.add(kind)
            if node is cst.Name:
                kinds.update(flag_kind(sub))
    return frozenset(kinds)


# Libraries whose use makes a module run on several ranks.
DISTRIBUTED_LIBRARIES = ("torch.distributed", "torch.nn.parallel", "accelerate", "deepspeed")


class Guards:
    """The kinds of every test of one module (computed at build time, read by every rule), and the
    identity of conditions (computed once per test)."""

    @cached_property
    def distributed(self) -> bool:
        """The module runs on several ranks: it imports a distributed library, or reaches one through
        attributes (`torch.distributed.all_reduce(...)`, `torch.nn.parallel.DistributedDataParallel(...)`)."""
        if any(q.startswith(DISTRIBUTED_LIBRARIES) for q in self.model.imports.names.values()):
            return True
        qualified = self.model.roles.qualified
        return any((qualified(call.func, site.scope) or "").startswith(DISTRIBUTED_LIBRARIES) for call, site in self.model.structure.calls)

    def __init__(self, model: "ModuleModel"):
        self.model = model
        self._kinds: Dict[int, FrozenSet[str]] = {}  # id(test) -> its kinds
        self._flags: Dict[str, FrozenSet[str]] = {}  # scoped name -> kinds of the condition it holds
        self._scale_vars: Set[str] = set()  # scoped names holding a loss-scale read
        self._conditions: Dict[int, tuple] = {}
        self._assigned: Dict[int, Dict[str, List[int]]] = {}
        self._rank_global: Dict[int, Dict[str, List[int]]] = {}

    def mark(self, test: int, kinds: FrozenSet[str]) -> None:
        """Give the test `id(test)` the kinds a later step of the build learned (accelerate's windows)."""
        self._kinds[test] = kinds

    def drop(self, test: int, kind: str) -> None:
        """Take a kind from the test `id(test)` (`sync_gradients` of an accelerator that does not accumulate)."""
        self._kinds[test] = self._kinds.get(test, frozenset()) - {kind}

    def kinds(self, guard: Guard) -> FrozenSet[str]:
        """What a guard's test means for the step: commit gate, window boundary, cadence, rank test, ..."""
        return self.test_kinds(guard.test)

    def test_kinds(self, test: cst.BaseExpression) -> FrozenSet[str]:
        """What the test of an `if` (or of a guard) means for the step."""
        return self._kinds.get(id(test), frozenset())

    def of_kind(self, site: Site, *kinds: str) -> List[Guard]:
        """The guards of a statement with one of `kinds`, outermost first."""
        return [g for g in site.guards if self.kinds(g) & set(kinds)]

    def gates(self, site: Site, update: Optional["Event"] = None, kinds: tuple = (COMMIT_GATE, GUESSED_GATE)) -> List[Guard]:
        """Guards of `site` that tell a committed update from a skipped one. A guard the update runs
        under too (`if not torch.isfinite(loss): continue` before `scaler.step`) decides whether the
        update is attempted, not whether it committed."""
        shared = {(id(g.test), g.negated) for g in update.site.guards} if update is not None else set()
        return [g for g in self.of_kind(site, *kinds) if (id(g.test), g.negated) not in shared]

    def gated(self, site: Site, update: Optional["Event"] = None) -> bool:
        """Runs under a commit gate, exact or guessed (SL105 reports the guessed ones)."""
        return bool(self.gates(site, update))

    def condition(self, test: cst.BaseExpression) -> tuple:
        """A condition's identity and whether it is negated: `not use_amp` is `use_amp` negated,
        `scaler is None` is `scaler is not None` negated, the same text twice is one condition."""
        found = self._conditions.get(id(test))
        if found is None:
            found = self._conditions[id(test)] = self._presence_tied(test) or _condition(self.model.module, test)
        return found

    def _presence_tied(self, test: cst.BaseExpression) -> Optional[tuple]:
        """`amp and scaler is not None`, where the scaler exists only when `amp` holds (`GradScaler() if
        amp else None`), is the condition `amp`: two scalers built on one flag make such tests one
        condition. None when no conjunct is a scaler's presence."""
        if not (isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And)):
            return None
        site = self.model.structure.site_of.get(id(test))
        if site is None:
            return None
        parts, tied = set(), False
        for conjunct in conjuncts(test):
            text, flipped = _condition(self.model.module, conjunct)
            role = self.model.roles.of(conjunct.left, site.scope) if _is_not_none(conjunct) else None
            if role is not None and role.present_if is not None:
                scope_name, flag = role.present_if.split(":", 1)
                parts.add(flag if scope_name == site.scope.name or "." in flag else role.present_if)
                tied = True
            else:
                parts.add(("not " if flipped else "") + text)
        return (" and ".join(sorted(parts)), False) if tied else None

    def on_complementary_ranks(self, first: Guard, second: Guard) -> bool:
        """Two rank guards that hold on complementary ranks: one condition taken both ways (`if is_main:` and its
        `else`, or `if not is_main:`), or a conjunct of each that is one equality written with `==` and with `!=`
        (`rank == 0` / `... and rank != 0`)."""
        (text, flipped), (other, other_flipped) = self.condition(first.test), self.condition(second.test)
        if text == other:
            return flipped ^ first.negated != other_flipped ^ second.negated
        return bool(_equalities(self.model.module, first) & {(test, not holds) for test, holds in _equalities(self.model.module, second)})

    def unchanged(self, first: Guard, second: Guard, scope: Scope) -> bool:
        """No name the condition reads is assigned between its two tests."""
        orders = sorted(self.model.structure.site_of[id(g.test)].order for g in (first, second) if id(g.test) in self.model.structure.site_of)
        if len(orders) < 2:
            return False
        return not any(self.assigned_between(name, scope, orders[0], orders[1]) for name in names_in(first.test))

    def assigned_between(self, name: str, scope: Scope, low: int, high: int) -> bool:
        """`name`, or an object it is an attribute of, is assigned in `scope` between two program orders."""
        assigned = self._assignments_in(scope)
        return any(low <= order <= high for prefix in _prefixes(name) for order in assigned.get(prefix, ()))

    def _assignments_in(self, scope: Scope) -> Dict[str, List[int]]:
        """Dotted assignment targets of a scope -> orders of the assignments (computed once per scope)."""
        found = self._assigned.get(id(scope))
        if found is None:
            found = self._assigned[id(scope)] = {}
            for node, site in self.model.statements_of(scope):
                for target in assignment_targets(node):
                    text = dotted(target)
                    if text:
                        found.setdefault(text, []).append(site.order)
        return found

    def same_on_every_rank(self, test: cst.BaseExpression, scope: Scope, before: int) -> bool:
        """The test reads only values every rank holds alike: gradients after backward (DDP has
        all-reduced them), a norm of them (`clip_grad_norm_`, also FSDP's, accelerate's and
        DeepSpeed's, which reduce across ranks themselves), or a sharded tensor gathered whole
        (`DTensor.full_tensor()`), read directly or through a local assigned once from one of these.
        Joined by `and`/`or` with a setting the run was given (`cfg.skip_nan_inf and grad_norm.isnan()`),
        the test is as alike as the rest of it."""
        parts = [p for p in boolean_operands(test) if not self._setting(p, scope)] if isinstance(test, cst.BooleanOperation) else [test]
        if len(parts) > 1 or parts and parts[0] is not test:
            return bool(parts) and all(self.same_on_every_rank(p, scope, before) for p in parts)
        if any(isinstance(sub, cst.Attribute) and sub.attr.value == "grad" for sub in walk_expressions(test)):
            return True
        reads = [sub for sub in walk_expressions(test) if isinstance(sub, cst.Call) and last_name(sub.func) in _GLOBAL_VALUE_CALLS]
        if reads:
            return True
        local = self._assignments_in(scope).keys() | {p.name.value for p in scope.params}
        values = _names_read(test) & local  # (modules and builtins, `torch` and `math`, are no values)
        sources = self._global_locals(scope)
        # (every value a local is ever given is alike, so whichever reaches the test is; a parameter's
        # own value is not, so a parameter counts only when reassigned before the test on every path)
        params = {p.name.value for p in scope.params}
        return bool(values) and all(name in sources and (name not in params or all(order < before for order in sources[name])) for name in values)

    def _setting(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """A name or attribute chain (`not args.fp16`) no loop of the scope assigns and no rank's own:
        a value of the run's configuration, alike on every rank."""
        expr = expr.expression if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not) else expr
        written = dotted(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
        if written is None or any(_RANK_NAME.search(part) for part in written.split(".")):
            return False
        return written.split(".", 1)[0] not in self._assigned_in_loops(scope)

    def _assigned_in_loops(self, scope: Scope) -> FrozenSet[str]:
        """The names (and dotted targets) the scope assigns inside a loop: what may change as the run goes."""
        return self.model.remember(("assigned_in_loops", id(scope)), lambda: frozenset(
            dotted(t) for node, site in self.model.statements_of(scope) if site.loops for t in assignment_targets(node)))

    def _global_locals(self, scope: Scope) -> Dict[str, List[int]]:
        """Locals of a scope every assignment of which gives a value alike on all ranks -> orders of
        those assignments: a call of `_GLOBAL_VALUE_CALLS`, a literal (a default, `grad_norm = 0.0`,
        before one) or a conversion of the value itself (`grad_norm = torch.tensor(grad_norm)`), as long as one
        assignment is such a call."""
        found = self._rank_global.get(id(scope))
        if found is None:
            written: Dict[str, List[tuple]] = {}
            local_names = set(scope.local_names) | {p.name.value for p in scope.params}
            for node, site in self.model.statements_of(scope):
                for target in assignment_targets(node):
                    if isinstance(target, cst.Name):
                        value = node.value if isinstance(node, cst.Assign) and len(node.targets) == 1 and node.targets[0].target is target else None
                        alike = isinstance(value, cst.Call) and last_name(value.func) in _GLOBAL_VALUE_CALLS
                        # (a constant, or the same value converted: `grad_norm = torch.tensor(grad_norm)`)
                        kept = value is not None and (literal(value) is not ... or isinstance(value, cst.Float)
                                                      or _names_read(value) & local_names == {target.value})
                        written.setdefault(target.value, []).append((alike, kept, site.order))
            found = self._rank_global[id(scope)] = {
                name: [order for _, _, order in writes] for name, writes in written.items()
                if all(alike or kept for alike, kept, _ in writes) and any(alike for alike, _, _ in writes)
            }
        return found

    def flag_kinds(self, name: cst.Name, scope: Scope) -> FrozenSet[str]:
        return self._flags.get(self.model.roles.key(name, scope) or "", frozenset())

    def flag_assignment(self, name: cst.Name, scope: Scope) -> Optional[cst.Assign]:
        """The assignment that gave a condition flag its value (`was_run = before <= after`)."""
        key = self.model.roles.key(name, scope)
        return self._flag_assignments.get((id(scope), key))

    @cached_property
    def _flag_assignments(self) -> Dict[tuple, cst.Assign]:
        """(scope, key of the target) -> the first single-target assignment to it that is no literal
        default (`ran = True` ... `ran = before <= after`: the flag keeps the comparison)."""
        found: Dict[tuple, cst.Assign] = {}
        for node, site in self.model.structure.statements:
            if isinstance(node, cst.Assign) and len(node.targets) == 1:
                place = (id(site.scope), self.model.roles.key(node.targets[0].target, site.scope))
                if place not in found or (_is_literal_default(found[place].value) and not _is_literal_default(node.value)):
                    found[place] = node
        return found

    @cached_property
    def _scale_reads(self) -> Set[int]:
        return {id(e.node) for e in self.model.of_kind(SCALE_READ)}

    def is_scale_read(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        if isinstance(expr, cst.Call):
            return id(expr) in self._scale_reads
        return isinstance(expr, cst.Name) and self.model.roles.key(expr, scope) in self._scale_vars

    @cached_property
    def _computed_flags(self) -> Set[object]:
        """Keys of names some assignment gives a value that is no literal."""
        return {
            self.model.roles.key(target, site.scope)
            for node, site in self.model.structure.statements
            if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and not (isinstance(node, cst.Assign) and _is_literal_default(node.value))
            for target in assignment_targets(node)
        }

    @cached_property
    def _literal_flags(self) -> Set[object]:
        """Keys of names the code assigns, and only ever to literals (`do_step = False`, `do_step = True`)."""
        assigned = {
            self.model.roles.key(node.targets[0].target, site.scope)
            for node, site in self.model.structure.statements
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
        }
        return assigned - self._computed_flags - {None}

    def classify(self, overflow_flags) -> None:
        """Give every test of the module its kinds (build time). Flags a `try` over an update keeps
        (`overflow = True` in its `except OverflowError`) hold a commit gate."""
        self._flags.update(dict.fromkeys(overflow_flags, frozenset({COMMIT_GATE})))
        for node, site in self.model.structure.statements:
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                key = self.model.roles.key(node.targets[0].target, site.scope)
                value = node.value
                if isinstance(value, cst.Call) and id(value) in self._scale_reads:
                    self._scale_vars.add(key)  # type: ignore[arg-type]
        never_runs = self.model.roles.command_line.never_runs
        for node, site in self.model.structure.statements:
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                if never_runs(site):
                    continue  # (`if args.accum > 1: update = (i + 1) % args.accum == 0` with no run giving --accum)
                kinds = self._kinds_of(node.value, site.scope)
                if kinds & {MODULO, WINDOW_BOUNDARY} and not _holds_a_cadence(node.value):
                    kinds = kinds - {MODULO, WINDOW_BOUNDARY}  # (a number: `n = (len + r - len % r) // r`, `loss = f(n)`)
                if kinds & {COMMIT_GATE, GUESSED_GATE, MODULO, WINDOW_BOUNDARY}:  # a gate or a cadence kept in a flag
                    self._flags[self.model.roles.key(node.targets[0].target, site.scope)] = kinds  # type: ignore[index]
                elif literal(node.value) is True and (key := self.model.roles.key(node.targets[0].target, site.scope)) in self._literal_flags and (
                        boundary := frozenset().union(*(self._kinds_of(g.test, site.scope) for g in site.guards if not g.negated)) & {MODULO, WINDOW_BOUNDARY}):
                    self._flags[key] = self._flags.get(key, frozenset()) | boundary  # (`if (i + 1) % accum == 0: do_step = True`)
                elif _is_literal_default(node.value) and any(not g.raises and FINITENESS in self._kinds_of(g.test, site.scope) for g in site.guards):
                    # `if torch.isnan(loss): skip = True`: the flag carries the rank's own finiteness check,
                    # unless the code also gives it a computed value (`skip = bool(reduced.item())`)
                    key = self.model.roles.key(node.targets[0].target, site.scope)
                    if key not in self._computed_flags:
                        self._flags[key] = self._flags.get(key, frozenset()) | {FINITENESS}  # type: ignore[index]
        for event in self.model.of_kind(SKIPPABLE_STEP):
            if event.gate_var:
                self._flags[self.model.roles.key(cst.Name(event.gate_var), event.site.scope)] = frozenset({COMMIT_GATE})  # type: ignore[index]
        raising, stopping = set(), set()
        for _, site in self.model.structure.statements:
            for guard in site.guards:
                if guard.raises:
                    raising.add(id(guard.test))
                elif guard.stops and site.loops:
                    stopping.add(id(guard.test))
        seen = set()
        for _, site in self.model.structure.statements:
            for guard in site.guards:
                if id(guard.test) not in seen:
                    seen.add(id(guard.test))
                    kinds = self._kinds_of(guard.test, site.scope)
                    # `if torch.isnan(loss): raise`: the run stops, no update is skipped or counted
                    if id(guard.test) in raising:
                        kinds = kinds - {COMMIT_GATE, GUESSED_GATE, FINITENESS}
                    # `if torch.isnan(loss): break` in the loop: a stop on divergence, not a stand-in for the commit
                    # check (an update skipped with a finite loss goes on like a committed one)
                    elif id(guard.test) in stopping and FINITENESS in kinds:
                        kinds = kinds - {GUESSED_GATE}
                    self._kinds[id(guard.test)] = kinds
        # A cadence test that guards the update is the window boundary, and so is a second test of
        # the same condition in the same function (`if n % accum == accum - 1:` again, to log and save).
        windows = set()
        by_loop: Dict[int, List[Event]] = {}
        for step in self.model.of_kind(SKIPPABLE_STEP, OPTIMIZER_STEP):
            by_loop.setdefault(id(step.site.loop), []).append(step)
        for step in self.model.of_kind(SKIPPABLE_STEP, OPTIMIZER_STEP):
            for guard in step.site.guards:
                kinds = self._kinds[id(guard.test)]
                if MODULO in kinds and not _also_every_pass(step, guard, by_loop[id(step.site.loop)]) and not self._gradients_of_its_own_pass(step, guard):
                    self._kinds[id(guard.test)] = kinds | {WINDOW_BOUNDARY}
                    windows.add((id(step.site.scope), self.condition(guard.test)[0]))
        if windows:
            for _, site in self.model.structure.statements:
                for guard in site.guards:
                    if (id(site.scope), self.condition(guard.test)[0]) in windows:
                        self._kinds[id(guard.test)] = self._kinds[id(guard.test)] | {WINDOW_BOUNDARY}
        # `step % accum == 0` with `accum` 1 as written holds on every batch: no window, no cadence
        for _, site in self.model.structure.statements:
            for guard in site.guards:
                kinds = self._kinds[id(guard.test)]
                if WINDOW_BOUNDARY in kinds and self._divides_by_one_only(guard.test, site.scope):
                    self._kinds[id(guard.test)] = kinds - {WINDOW_BOUNDARY, MODULO}

    def _gradients_of_its_own_pass(self, step: Event, guard: Guard) -> bool:
        """Under `guard`, before the update, the gradients are zeroed and then computed again (TD3's policy
        update every `policy_delay` steps, a discriminator trained every k batches): the update applies the
        gradients of its own pass only, nothing accumulates across passes, so the cadence is no window."""
        def under(site: Site) -> bool:
            return site.scope is step.site.scope and site.order < step.site.order and any(g.test is guard.test and g.negated == guard.negated for g in site.guards)
        zeroed = [e.site.order for e in self.model.of_kind(ZERO_GRAD) if under(e.site)]
        return bool(zeroed) and any(under(site) and site.order > min(zeroed) for site in self.backward_sites)

    @cached_property
    def backward_sites(self) -> List[Site]:
        """Where the module computes gradients: each `.backward()` call."""
        return [site for call, site in self.model.structure.calls if isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward"]

    @cached_property
    def switched_on_calls(self) -> Set[str]:
        """"callee|keyword" for the keywords this module's calls pass a value that may be true (anything
        but False, None, 0, ""): `Trainer(..., step_every_batch=args.fine)` gives `Trainer|step_every_batch`."""
        found = set()
        value_as_run = self.model.roles.command_line.value_as_run
        for call, site in self.model.structure.calls:
            callee = dotted(call.func)
            for arg in call.args:
                value = literal(arg.value) if arg.keyword is not None and callee else None
                if value is ...:  # (an option no run gives, `do_amp=args.do_amp` without --do_amp, passes its default)
                    value = value_as_run(arg.value, site.scope)[0]
                if value is ... or value:
                    found.add(f"{callee}|{arg.keyword.value}")
        return found

    def off_by_default(self, site: Site) -> Optional[Guard]:
        """A guard of `site` that tests a flag off by default that nothing turns on: a parameter
        defaulting to False (or None, 0), read directly or kept in `self.x = flag`, that no call of the
        module (to any callee), nor any call of the project that may reach this module, passes by keyword
        with a value that may be true, nor this module by position (`step_every_batch=False`, never
        given). What it guards does not run."""
        for guard in site.guards:
            if guard.negated or guard.early_exit or not isinstance(guard.test, (cst.Name, cst.Attribute)):
                continue
            parameters = self._flag_parameters(guard.test, site.scope)
            if parameters and all(self.holds_its_default(scope, name) for scope, name in parameters):
                return guard
        return None

    def holds_its_default(self, scope: Scope, name: str) -> bool:
        """No call of the module, nor of the project that may reach it, passes parameter `name` a value
        that may be true by keyword (to any callee), nor this module by position: it holds its default."""
        return name not in self._switched_on_keywords and not self._passed_by_position(scope, name)

    @cached_property
    def _switched_on_keywords(self) -> Set[str]:
        project = self.model.roles.project
        return {pair.rsplit("|", 1)[1] for pair in self.switched_on_calls} | set(project.switched_on if project is not None else ())

    def _flag_parameters(self, test: cst.BaseExpression, scope: Scope) -> List[tuple]:
        """(scope, parameter) pairs whose falsy default is all the flag ever holds; [] when it holds anything else."""
        key = self.model.roles.key(test, scope)
        if key is None:
            return []
        found = []
        for node, site in self.model.statements_in(scope, key):
            if key not in {self.model.roles.key(t, site.scope) for t in assignment_targets(node) if isinstance(t, (cst.Name, cst.Attribute))}:
                continue
            value = getattr(node, "value", None)
            if not (isinstance(node, cst.Assign) and isinstance(value, cst.Name) and _falsy_default(site.scope, value.value)):
                return []
            found.append((site.scope, value.value))
        if isinstance(test, cst.Name) and _falsy_default(scope, test.value):
            found.append((scope, test.value))
        return found

    def _passed_by_position(self, scope: Scope, name: str) -> bool:
        """A call of the function (its class, for `__init__`) in this module passes the parameter by position."""
        params = [p.name.value for p in scope.params]
        method = scope.class_name is not None
        index = params.index(name) - (1 if method else 0)
        callee = scope.class_name if method and scope.name.endswith(".__init__") else scope.name.rsplit(".", 1)[-1]
        for call, _ in self.model.structure.calls:
            positional = [a for a in call.args if a.keyword is None]
            if last_name(call.func) == callee and (len(positional) > index or any(a.star == "*" for a in positional)):
                return True
        return False

    def _divides_by_one_only(self, test: cst.BaseExpression, scope: Scope) -> bool:
        """The test is one comparison of `step % accum` (or `(step + 1) % accum`) with `accum` 1 as written, alone
        or as one alternative of an `or` (`(i + 1) % accum == 0 or i + 1 == len(loader)`): true on every batch."""
        for alternative in disjuncts(test):
            modulo = alternative.left if isinstance(alternative, cst.Comparison) and len(alternative.comparisons) == 1 else None
            if isinstance(modulo, cst.BinaryOperation) and isinstance(modulo.operator, cst.Modulo) and one_as_written(self.model, modulo.right, scope):
                return True
        return False

    def add_overflow_guards(self, found: OverflowHandling) -> None:
        """Events that run only after a committed update of a step an `except OverflowError` may drop
        (or only after a dropped one) get that `try`'s guard, a commit gate."""
        for event in self.model.events:
            guard = found.guards.get(id(event.node))
            if guard is not None:
                event.site = replace(event.site, guards=event.site.guards + (guard,))
                self._kinds[id(guard.test)] = frozenset({COMMIT_GATE})

    def _kinds_of(self, test: cst.BaseExpression, scope: Scope) -> FrozenSet[str]:
        return condition_kinds(test, lambda name: self.flag_kinds(name, scope), lambda expr: self.is_scale_read(expr, scope),
                               lambda name: self.model.roles.key(name, scope) in self._literal_flags)


def _condition(module: cst.Module, test: cst.BaseExpression) -> tuple:
    flipped = False
    while True:
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, flipped = test.expression, not flipped
        elif (
            isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, (cst.Is, cst.IsNot))
            and isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None"
        ):
            flipped ^= isinstance(test.comparisons[0].operator, cst.Is)
            test = test.left
        else:
            break
    text = module.code_for_node(test.with_changes(lpar=(), rpar=())) if hasattr(test, "lpar") else module.code_for_node(test)
    return " ".join(text.split()), flipped


def _equalities(module: cst.Module, guard: Guard) -> Set[tuple]:
    """(`a == b` as written once for both operators, whether it holds where the guard lets its statement run) for
    each `==` or `!=` conjunct of a guard that is not negated (a negated conjunction says nothing of each part)."""
    found = set()
    for conjunct in () if guard.negated else conjuncts(guard.test):
        if isinstance(conjunct, cst.Comparison) and len(conjunct.comparisons) == 1 and isinstance(conjunct.comparisons[0].operator, (cst.Equal, cst.NotEqual)):
            equal = conjunct.with_changes(comparisons=[conjunct.comparisons[0].with_changes(operator=cst.Equal())])
            found.add((_condition(module, equal)[0], isinstance(conjunct.comparisons[0].operator, cst.Equal)))
    return found


def past_the_first_pass(site: Site, loop) -> bool:
    """The site runs under a test that the loop's first pass fails: `epoch > 0`, `epoch != start`, `epoch >= 1`,
    or `if epoch:`, on a name the loop counts with (its target, or a name its `while` test reads)."""
    counted = set(names_in(loop.target if isinstance(loop, cst.For) else loop.test))
    for guard in site.guards:
        for test in conjuncts(guard.test) if not guard.negated else ():
            if isinstance(test, cst.Name) and test.value in counted:
                return True
            if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name) and test.left.value in counted):
                continue
            operator, bound = test.comparisons[0].operator, literal(test.comparisons[0].comparator)
            if isinstance(operator, (cst.GreaterThan, cst.NotEqual)) or isinstance(operator, cst.GreaterThanEqual) and type(bound) is int and bound >= 1:
                return True
    return False


def _is_not_none(test: cst.BaseExpression) -> bool:
    """`x is not None` for a name or attribute `x`."""
    return (
        isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.IsNot)
        and isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None"
        and isinstance(test.left, (cst.Name, cst.Attribute))
    )


def _prefixes(name: str) -> List[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _also_every_pass(step: "Event", guard: Guard, steps: List["Event"]) -> bool:
    """The same update (same call, same optimizer) also runs in the same loop outside `guard`, or on
    its other side (`if n % k != k - 1: update else: update and more`): every pass attempts an update,
    so the cadence runs something extra (an evaluation pass through the training helper, a second kind
    of update), it does not close a window. `steps`: the updates of the step's loop."""
    def same(other: "Event") -> bool:
        return all(
            (a is None and b is None) or (a is not None and b is not None and dotted(a) is not None and dotted(a) == dotted(b))
            for a, b in ((step.subject, other.subject), (step.optimizer, other.optimizer))
        )
    return any(
        other is not step and other.site.loop is step.site.loop and step.site.loop is not None and same(other)
        and all(g.test is not guard.test or g.negated != guard.negated for g in other.site.guards)
        for other in steps
    )


def _falsy_default(scope: Scope, name: str) -> bool:
    """`name` is a parameter of `scope` whose default is False, None or 0."""
    for param in scope.params:
        if param.name.value == name:
            return param.default is not None and literal(param.default) in (False, None, 0)
    return False
