"""The training-step model of one module, built once and read by every rule (DESIGN.md §4)."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

import libcst as cst

from steplint.model.events import (
    CHECKPOINT_SAVE,
    CLIP,
    SCALED_BACKWARD,
    SKIP_FLAG_READ,
    STATE_LOAD,
    LOG,
    COLLECTIVE,
    STEP_HOOK,
    STEP_WRAPPER,
    UNSCALE,
    ZERO_GRAD,
    COMMITTED_STEP,
    COUNTER_INCREMENT,
    EARLY_EXIT,
    EVALUATION,
    OPTIMIZER_STEP,
    SCALE_READ,
    SCALER_UPDATE,
    SCHEDULER_STEP,
    SKIPPABLE_STEP,
    Event,
    collect_events,
)
from steplint.model.guards import COMMIT_GATE, FINITENESS, GUESSED_GATE, MODULO, WINDOW_BOUNDARY, condition_kinds
from steplint.model.checkpoints import state_loaded_keys
from steplint.model.checkpoints import Checkpoint, checkpoint_contents, counter_keys, restored_from_checkpoint, saved_under, step_state
from steplint.model.positions import Positions
from steplint.model.roles import ENGINE, SCALER, RoleTable
from steplint.model.structure import EXITS, Guard, Scope, Site, Structure, walk_module
from steplint.model.syntax import ImportMap, current_children, dotted, forget_children, last_name, literal, names_in, restore_children, walk_expressions
from steplint.model.groups import resite_group_events
from steplint.model.overflow import OverflowHandling, overflow_handling
from steplint.model.precision import deepspeed_fp16_shown
from steplint.model.windows import AccelerateWindows, accelerate_windows, one_as_written
from steplint.source import Source
from steplint.suppress import intent_basis

COMMITTED_UPDATES = "committed-updates"

__all__ = [
    "ModuleModel", "build_model", "Event", "Guard", "Site", "Scope",
    "SKIPPABLE_STEP", "OPTIMIZER_STEP", "SCHEDULER_STEP", "SCALER_UPDATE", "SCALE_READ", "COUNTER_INCREMENT",
    "CHECKPOINT_SAVE", "EVALUATION", "COMMIT_GATE", "GUESSED_GATE", "WINDOW_BOUNDARY", "COMMITTED_STEP",
    "SCALED_BACKWARD", "UNSCALE", "CLIP", "ZERO_GRAD", "STEP_HOOK", "STEP_WRAPPER", "SKIP_FLAG_READ", "STATE_LOAD", "Checkpoint", "LOG", "COLLECTIVE",
]

STEPS = (SKIPPABLE_STEP, OPTIMIZER_STEP)


@dataclass(eq=False)
class ModuleModel:
    source: Source
    module: cst.Module
    positions: Positions
    imports: ImportMap
    structure: Structure
    roles: RoleTable
    helpers: FrozenSet[str]  # steplint.runtime functions defined in or imported into the module
    settings: object  # steplint.config.Settings: the default schedule basis, the fix-gate style
    events: List[Event] = field(default_factory=list)
    _kinds: Dict[int, FrozenSet[str]] = field(default_factory=dict)
    _flags: Dict[str, FrozenSet[str]] = field(default_factory=dict)  # scoped name -> kinds of the condition it holds
    _scale_vars: Set[str] = field(default_factory=set)
    _shared_windows: Set[int] = field(default_factory=set)  # ids of window tests that are one window (accelerate's)
    in_group_loop: Set[int] = field(default_factory=set)  # ids of event nodes inside `for opt in optimizers:`
    _conditions: Dict[int, tuple] = field(default_factory=dict)
    _assigned: Dict[int, Dict[str, List[int]]] = field(default_factory=dict)
    # Facts computed once per module and read many times (DESIGN.md: no fact recomputed per event).
    _memo: Dict[tuple, object] = field(default_factory=dict)

    def remember(self, key: tuple, compute):
        """The memoized value of a fact, computed on first use."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    # -- events ----------------------------------------------------------------------------------

    def of_kind(self, *kinds: str) -> List[Event]:
        """Events of `kinds` in program order (a shared list: read it, do not change it)."""
        return self.remember(("of_kind",) + kinds, lambda: [e for e in self.events if e.kind in kinds])

    @cached_property
    def _iterations(self) -> Dict[tuple, List[Event]]:
        """Events by (scope, innermost loop), in program order."""
        found: Dict[tuple, List[Event]] = defaultdict(list)
        for event in self.events:
            found[(id(event.site.scope), id(event.site.loop))].append(event)
        return found

    def _same_iteration_events(self, site: Site, kinds: Tuple[str, ...]) -> List[Event]:
        return [e for e in self._iterations.get((id(site.scope), id(site.loop)), ()) if e.kind in kinds]

    def shares_its_pass(self, update: Event) -> bool:
        """Another skippable scaler step runs in the same pass (two optimizers, one scaler)."""
        return any(other is not update and other.strategy == SCALER for other in self._same_iteration_events(update.site, (SKIPPABLE_STEP,)))

    def statements_of(self, scope: Scope) -> List[tuple]:
        """(node, site) of the statements of one scope, in program order."""
        def compute():
            found: Dict[int, list] = defaultdict(list)
            for node, site in self.structure.statements:
                found[id(site.scope)].append((node, site))
            return found
        return self.remember(("statements_of",), compute).get(id(scope), [])

    def events_in(self, scope: Scope, *kinds: str) -> List[Event]:
        """Events of `kinds` in one scope, in program order."""
        def compute():
            found: Dict[int, List[Event]] = defaultdict(list)
            for event in self.of_kind(*kinds):
                found[id(event.site.scope)].append(event)
            return found
        return self.remember(("events_in",) + kinds, compute).get(id(scope), [])

    # -- guards ----------------------------------------------------------------------------------

    def guard_kinds(self, guard: Guard) -> FrozenSet[str]:
        return self._kinds.get(id(guard.test), frozenset())

    def guards_of_kind(self, site: Site, *kinds: str) -> List[Guard]:
        return [g for g in site.guards if self.guard_kinds(g) & set(kinds)]

    def commit_guards(self, site: Site, update: Optional["Event"] = None, kinds: tuple = (COMMIT_GATE, GUESSED_GATE)) -> List[Guard]:
        """Guards of `site` that tell a committed update from a skipped one. A guard the update runs
        under too (`if not torch.isfinite(loss): continue` before `scaler.step`) decides whether the
        update is attempted, not whether it committed."""
        shared = {(id(g.test), g.negated) for g in update.site.guards} if update is not None else set()
        return [g for g in self.guards_of_kind(site, *kinds) if (id(g.test), g.negated) not in shared]

    def gated(self, site: Site, update: Optional["Event"] = None) -> bool:
        """Runs under a commit gate, exact or guessed (SL105 reports the guessed ones)."""
        return bool(self.commit_guards(site, update))

    def window(self, site: Site) -> Optional[Guard]:
        """The innermost window-boundary guard of a statement."""
        found = self.guards_of_kind(site, WINDOW_BOUNDARY)
        return found[-1] if found else None

    # -- relations between events ----------------------------------------------------------------

    @staticmethod
    def same_iteration(a: Site, b: Site) -> bool:
        """In one scope and one iteration of the same innermost loop (or both in no loop)."""
        return a.scope is b.scope and a.loop is b.loop

    def exclusive(self, a: Site, b: Site) -> bool:
        """Never both in one pass: different branches of one `if`, opposite branches of two tests of
        the same unchanged condition (`if args.amp: ...` then later `if not args.amp: ...`), or one
        ends its pass first (`if resuming: counter += 1; continue` before the update)."""
        polarity = {id(g.test): g.negated for g in a.guards if not g.early_exit}
        if any(id(g.test) in polarity and polarity[id(g.test)] != g.negated for g in b.guards if not g.early_exit):
            return True
        if a.scope is b.scope and self._correlated_opposites(a, b):
            return True
        first, second = (a, b) if a.order < b.order else (b, a)
        return _exits_before(first, second)

    def _correlated_opposites(self, a: Site, b: Site) -> bool:
        held = {}
        for guard in a.guards:
            text, flipped = self.condition(guard.test)
            held[text] = (guard, guard.negated != flipped)
        for guard in b.guards:
            text, flipped = self.condition(guard.test)
            if text in held and held[text][1] != (guard.negated != flipped) and self._unchanged(held[text][0], guard, a.scope):
                return True
        return False

    def condition(self, test: cst.BaseExpression) -> tuple:
        """A condition's identity and whether it is negated: `not use_amp` is `use_amp` negated,
        `scaler is None` is `scaler is not None` negated, the same text twice is one condition."""
        found = self._conditions.get(id(test))
        if found is None:
            found = self._conditions[id(test)] = _condition(self.module, test)
        return found

    def _unchanged(self, first: Guard, second: Guard, scope: Scope) -> bool:
        """No name the condition reads is assigned between its two tests."""
        orders = sorted(self.structure.site_of[id(g.test)].order for g in (first, second) if id(g.test) in self.structure.site_of)
        if len(orders) < 2:
            return False
        assigned = self._assignments_in(scope)
        for name in names_in(first.test):
            for prefix in _prefixes(name):
                if any(orders[0] <= order <= orders[1] for order in assigned.get(prefix, ())):
                    return False
        return True

    def _assignments_in(self, scope: Scope) -> Dict[str, List[int]]:
        """Dotted assignment targets of a scope -> orders of the assignments (computed once per scope)."""
        found = self._assigned.get(id(scope))
        if found is None:
            found = self._assigned[id(scope)] = {}
            for node, site in self.statements_of(scope):
                for target in _targets(node):
                    text = dotted(target)
                    if text:
                        found.setdefault(text, []).append(site.order)
        return found

    def runs_only_with(self, later: Site, earlier: Site) -> bool:
        """`later` runs only in passes where `earlier`'s conditions held: it is under each of them
        (the same test, or a test of the same unchanged condition with the same polarity)."""
        held = {(id(g.test), g.negated) for g in later.guards}
        texts = {}
        for guard in later.guards:
            text, flipped = self.condition(guard.test)
            texts[text] = (guard, guard.negated != flipped)
        for guard in earlier.guards:
            if (id(guard.test), guard.negated) in held:
                continue
            text, flipped = self.condition(guard.test)
            match = texts.get(text)
            if match is None or match[1] != (guard.negated != flipped) or not self._unchanged(guard, match[0], later.scope):
                return False
        return True

    def same_window(self, update: Site, other: Site) -> bool:
        """`other` runs once per update attempt: under the update's window boundary, if it has one."""
        boundary = self.window(update)
        if boundary is None:
            return True
        text, flipped = self.condition(boundary.test)
        return any(
            g is boundary or g.test is boundary.test and g.negated == boundary.negated
            or self.condition(g.test) == (text, flipped) and g.negated == boundary.negated and self._unchanged(boundary, g, update.scope)
            or id(boundary.test) in self._shared_windows and id(g.test) in self._shared_windows and not g.negated
            for g in other.guards
        )

    def attempt_for(self, event: Event, before_only: bool = True) -> Optional[Event]:
        """The skippable update that `event` follows in the same iteration and window, if any."""
        candidates = [
            u for u in self._same_iteration_events(event.site, (SKIPPABLE_STEP,))
            if not self.exclusive(u.site, event.site) and self.same_window(u.site, event.site)
        ]
        paired = self._own_updates(event, candidates)
        if paired is not None:
            candidates = paired
        before = [u for u in candidates if u.order < event.order]
        if before:
            return before[-1]
        return None if before_only or not candidates else candidates[0]

    def _own_updates(self, event: Event, candidates: List[Event]) -> Optional[List[Event]]:
        """A scheduler follows the update of the optimizer it was built on (two optimizers sharing
        one scaler, GAN-style): None when the code does not say which optimizer that is."""
        optimizer = event.role.optimizer if event.kind == SCHEDULER_STEP and event.role is not None else None
        if optimizer is None or optimizer.split(":", 1)[0] not in (event.site.scope.name, "<module>", f"class {event.site.scope.class_name}"):
            return None
        # (a call of a helper that steps, `self.optimizer_step()`, may step it: kept)
        return [u for u in candidates if u.optimizer is None or optimizer in (self.roles.key(u.optimizer, u.site.scope), _engine_optimizer(u))]

    def built_on(self, scheduler: Event, update: Event) -> bool:
        """Whether the code says the scheduler was built on the optimizer that `update` steps."""
        paired = self._own_updates(scheduler, [update])
        return bool(paired) and update.optimizer is not None

    def basis(self, event: Event) -> str:
        """What a scheduler call counts: its `# steplint: schedule=` comment, else the setting."""
        if not self.remember(("intent comments",), lambda: "steplint:" in self.source.text):  # none: no need to place the call
            return self.settings.schedule_basis
        first, last = self.rows(event.site.statement)
        return intent_basis(self.source, range(first, last + 1)) or self.settings.schedule_basis

    def per_update_scheduler(self, event: Event) -> bool:
        """A scheduler call that advances one step per call and that the user, not a framework, drives."""
        role = event.role
        return (
            event.kind == SCHEDULER_STEP
            and not event.explicit_position
            and role is not None
            and not (role.prepared or role.engine_owned or role.metric)
            and self.basis(event) == COMMITTED_UPDATES
        )

    def in_iteration(self, event: Event, *kinds: str) -> List[Event]:
        """Events of `kinds` that run in the same pass of the same loop as `event`."""
        return [
            e for e in self._same_iteration_events(event.site, kinds)
            if e is not event and not self.exclusive(e.site, event.site) and not self._scaler_absent(e, event) and not self._scaler_absent(event, e)
        ]

    def _scaler_absent(self, scaler_event: Event, other: Event) -> bool:
        """`other` runs only where the scaler of `scaler_event` is None (`else:` of `if scaler is not
        None:`, unchanged in between): a scaler that does not exist scaled and stepped nothing in that pass,
        though a helper called with it (`backward(loss, scaler)`) makes the call look like a scaled backward."""
        role = scaler_event.role
        if scaler_event.subject is None or role is None or role.kind != SCALER:
            return False
        name = dotted(scaler_event.subject)
        for guard in other.site.guards:
            text, flipped = self.condition(guard.test)
            if text != name or guard.negated == flipped or guard.early_exit:
                continue
            tested = self.structure.site_of.get(id(guard.test))
            if tested is None:
                continue
            low, high = sorted((tested.order, scaler_event.order))
            assigned = self._assignments_in(other.site.scope)
            if not any(low <= order <= high for prefix in _prefixes(name) for order in assigned.get(prefix, ())):
                return True
        return False

    def update_outside_window(self, event: Event) -> Optional[Event]:
        """An update of this iteration that runs once per window while `event` runs every batch."""
        for update in self.in_iteration(event, *STEPS):
            if self.window(update.site) is not None and not self.same_window(update.site, event.site):
                return update
        return None

    def covers(self, later: Site, earlier: Site) -> bool:
        """`later` runs on every path through `earlier` (after it): no condition or early exit of its
        own, other than a second test of a condition `earlier` runs under, unchanged in between and
        taken the same way (`if scaler is not None: unscale_` ... `if scaler is None: ... else: step`)."""
        if not (self.same_iteration(later, earlier) and later.order > earlier.order):
            return False
        own = {(id(g.test), g.negated) for g in earlier.guards}
        rest = [g for g in later.guards if (id(g.test), g.negated) not in own]
        if not rest:
            return True
        held = {}
        for guard in earlier.guards:
            text, flipped = self.condition(guard.test)
            held[text] = (guard, guard.negated != flipped)
        for guard in rest:
            if guard.early_exit:
                return False
            text, flipped = self.condition(guard.test)
            match = held.get(text)
            if match is None or match[1] != (guard.negated != flipped) or not self._unchanged(match[0], guard, later.scope):
                return False
        return True

    def same_object(self, a: Event, b: Event) -> bool:
        """Two events on one object (the same scaler or optimizer), by its key in their scopes."""
        return a.subject is not None and b.subject is not None and self.roles.key(a.subject, a.site.scope) == self.roles.key(b.subject, b.site.scope)

    def object_key(self, event: Event) -> object:
        """What `same_object` compares: the subject's key in its scope (a fresh marker without a subject)."""
        return self.roles.key(event.subject, event.site.scope) if event.subject is not None else object()

    def by_object(self, kind: str) -> Dict[object, List[Event]]:
        """Events of a kind grouped by `object_key`: the events on each object, in program order."""
        def compute():
            found: Dict[object, List[Event]] = defaultdict(list)
            for event in self.of_kind(kind):
                if event.subject is not None:
                    found[self.object_key(event)].append(event)
            return found
        return self.remember(("by_object", kind), compute)

    def batch_indices(self, loop, counters: bool = True) -> Set[str]:
        """Keys that count the batches of a loop: `i` of `for i, batch in enumerate(loader)`, and
        (with `counters`) counters advanced every batch, under no window boundary, in it."""
        return self.remember(("batch_indices", id(loop), counters), lambda: self._batch_indices(loop, counters))

    def _batch_indices(self, loop, counters: bool) -> Set[str]:
        keys: Set[str] = set()
        for node, site in self._for_loops.get(id(loop), ()):
            if isinstance(node.iter, cst.Call) and getattr(node.iter.func, "value", None) == "enumerate":
                if isinstance(node.target, cst.Tuple) and node.target.elements and isinstance(node.target.elements[0].value, cst.Name):
                    keys.add(self.roles.key(node.target.elements[0].value, site.scope))  # type: ignore[arg-type]
        for increment in self._increments_by_loop.get(id(loop), ()) if counters else ():
            if self.window(increment.site) is None and not self.gated(increment.site, self.attempt_for(increment)):
                keys.add(self.roles.key(increment.subject, increment.site.scope))  # type: ignore[arg-type]
        return keys

    @cached_property
    def _for_loops(self) -> Dict[int, list]:
        found: Dict[int, list] = defaultdict(list)
        for node, site in self.structure.for_loops:
            found[id(node)].append((node, site))
        return found

    @cached_property
    def _increments_by_loop(self) -> Dict[int, List[Event]]:
        found: Dict[int, List[Event]] = defaultdict(list)
        for increment in self.of_kind(COUNTER_INCREMENT):
            found[id(increment.site.loop)].append(increment)
        return found

    def windowed_counters(self, update: Event) -> Set[str]:
        """Counters advanced under the update's window boundary: they count windows (update attempts)."""
        if self.window(update.site) is None:
            return set()
        return {
            self.roles.key(i.subject, i.site.scope)  # type: ignore[misc]
            for i in self._same_iteration_events(update.site, (COUNTER_INCREMENT,))
            if self.same_window(update.site, i.site)
        }

    def checkpoint(self, save: Event) -> Optional[Checkpoint]:
        """What a `torch.save(...)` visibly stores, or None when its contents cannot be seen."""
        return self.remember(("checkpoint", id(save)), lambda: checkpoint_contents(self, save))

    def saved_under(self) -> Dict[str, str]:
        """Role key -> checkpoint key, for what the module's visible checkpoints store."""
        return self.remember(("saved_under",), lambda: saved_under(self))

    def restored_from_checkpoint(self) -> set:
        """Keys of names the module assigns from a checkpoint read."""
        return self.remember(("restored_from_checkpoint",), lambda: restored_from_checkpoint(self))

    def state_loaded(self, key: str) -> bool:
        """Whether the module restores the object `key` holds: its own `load_state_dict`, or one of an
        object it wraps (`self.sched.inner.load_state_dict(...)` restores `self.sched`)."""
        loaded = self.remember(("state_loaded",), lambda: state_loaded_keys(self))
        wrapping = self.remember(("state_loaded_wrappers",), lambda: {k[:i] for k in loaded for i, c in enumerate(k) if c == "."})
        return key in loaded or key in wrapping

    def update_left_to_callers(self, step: Event) -> bool:
        """A helper steps a scaler it is given, and updating it is its callers' business: a caller in
        the project updates it after the call, or no caller is in the project to tell."""
        project, scope = self.roles.project, step.site.scope
        if project is None or not isinstance(step.subject, cst.Name) or scope.parent is not None:
            return False
        name = step.subject.value
        if name not in {p.name.value for p in scope.params} or scope.owner_of(name) is not scope:
            return False
        return name in project.caller_updates.get(scope.name, ()) or scope.name not in project.called

    def step_state(self, scope: Scope) -> dict:
        """The run's step state visible from a scope: {"scheduler": [keys], "scaler": [...], "counter": [...]}."""
        return self.remember(("step_state", id(scope)), lambda: step_state(self, scope))

    def counter_keys(self) -> Set[str]:
        """Keys of the update counters that feed a schedule, an LR, a checkpoint or the end of the run."""
        return self.remember(("counter_keys",), lambda: counter_keys(self))

    def visible(self, key: str, scope: Scope) -> bool:
        """A role key that code in `scope` can name: its own, its class's, or a global."""
        prefix = key.split(":", 1)[0]
        return prefix == "<module>" or (prefix == f"class {scope.class_name}" and scope.class_name is not None) or prefix == scope.name

    def order_of_expression(self, expr: cst.CSTNode) -> Optional[int]:
        """Program order of the statement or condition that holds an expression."""
        site = self.site_of_expression(expr)
        return site.order if site is not None else None

    def site_of_expression(self, expr: cst.CSTNode) -> Optional[Site]:
        """Site of the statement or condition that holds an expression."""
        holder = self.structure.holder.get(id(expr))
        return self.structure.site_of[id(holder)] if holder is not None else None

    # -- facts about names -----------------------------------------------------------------------

    def keys_in(self, expr: cst.CSTNode, scope: Scope) -> FrozenSet[str]:
        """Keys of the names and attributes an expression reads, in a scope (computed once per pair)."""
        def compute():
            return frozenset(
                k for k in (self.roles.key(sub, scope) for sub in walk_expressions(expr) if isinstance(sub, (cst.Name, cst.Attribute))) if k
            )
        return self.remember(("keys_in", id(expr), id(scope)), compute)

    def mentions(self, expr: cst.CSTNode, scope: Scope, key: str) -> bool:
        return key in self.keys_in(expr, scope)

    @cached_property
    def _scale_reads(self) -> Set[int]:
        return {id(e.node) for e in self.of_kind(SCALE_READ)}

    def is_scale_read(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        if isinstance(expr, cst.Call):
            return id(expr) in self._scale_reads
        return isinstance(expr, cst.Name) and self.roles.key(expr, scope) in self._scale_vars

    def flag_kinds(self, name: cst.Name, scope: Scope) -> FrozenSet[str]:
        return self._flags.get(self.roles.key(name, scope) or "", frozenset())

    def flag_assignment(self, name: cst.Name, scope: Scope) -> Optional[cst.Assign]:
        """The assignment that gave a condition flag its value (`was_run = before <= after`)."""
        key = self.roles.key(name, scope)
        return self._flag_assignments.get((id(scope), key))

    @cached_property
    def _flag_assignments(self) -> Dict[tuple, cst.Assign]:
        """(scope, key of the target) -> the first single-target assignment to it."""
        found: Dict[tuple, cst.Assign] = {}
        for node, site in self.structure.statements:
            if isinstance(node, cst.Assign) and len(node.targets) == 1:
                found.setdefault((id(site.scope), self.roles.key(node.targets[0].target, site.scope)), node)
        return found

    def statements_in(self, scope: Scope, key: str) -> Iterable[tuple]:
        """(node, site) of the scopes where `key` can be read: its function, its class's methods, or all."""
        prefix = key.split(":", 1)[0]
        if prefix.startswith("class "):
            return self._statements_by_class.get(prefix[len("class "):], ())
        if prefix == "<module>":
            return self.structure.statements
        return self._statements_by_scope_name.get(prefix, ())

    @cached_property
    def _statements_by_class(self) -> Dict[str, list]:
        found: Dict[str, list] = defaultdict(list)
        for node, site in self.structure.statements:
            found[site.scope.class_name].append((node, site))
        return found

    @cached_property
    def _statements_by_scope_name(self) -> Dict[str, list]:
        found: Dict[str, list] = defaultdict(list)
        for node, site in self.structure.statements:
            found[site.scope.name].append((node, site))
        return found

    def derived_keys(self, increment: Event) -> Set[str]:
        """The counter's key and the keys of names computed from it (`epoch = step // per_epoch`)."""
        scope = increment.site.scope
        key = self.roles.key(increment.subject, scope)
        if key is None:
            return set()
        return self.remember(("derived_keys", key), lambda: self._derived_keys(scope, key))

    def _derived_keys(self, scope: Scope, key: str) -> Set[str]:
        derived = {key}
        for node, site in self.statements_in(scope, key):
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and not derived.isdisjoint(self.keys_in(node.value, site.scope)):
                target_key = self.roles.key(node.targets[0].target, site.scope)
                if target_key and target_key != key:
                    derived.add(target_key)
        return derived

    def repeating_readers(self, increment: Event) -> List[Site]:
        """Cadence tests in the counter's loop that read it (`if step % eval_every == 0:`): held
        back on a skipped update, the counter would make them fire again on the next pass."""
        loop = increment.site.loop
        derived = self.derived_keys(increment)
        found = []
        for node, site in self.statements_of(increment.site.scope):
            if loop is None or loop not in site.loops or node is increment.node or not _is_cadence(node):
                continue
            if any(self.mentions(node, site.scope, k) for k in derived):
                found.append(site)
        return found

    def readers_right_after(self, increment: Event) -> Optional[int]:
        """How many statements right after the increment must move under a commit gate with it: the
        cadence checks that read the counter. None when one of them sits elsewhere in the loop."""
        readers = self.repeating_readers(increment)
        if not readers:
            return 0
        block, statement = increment.site.trail[-1]
        following = block.statements[block.index(statement) + 1 :]

        def holds(statement, reader: Site) -> bool:
            return any(s is statement for _, s in reader.trail)

        count = 0
        while count < len(following) and any(holds(following[count], r) for r in readers):
            count += 1
        return count if all(any(holds(h, r) for h in following[:count]) for r in readers) else None

    @staticmethod
    def recipe_counts_attempts(update: Event) -> bool:
        """accelerate and DeepSpeed skip the prepared scheduler with the update and count their steps
        in attempts by convention (as HF Trainer does): checkpoint names, cadences and the end of the
        run in attempts are that recipe, not a bug; only a schedule computed from the counter is."""
        return update.strategy in ("accelerate", "deepspeed")

    def counter_feeds(self, increment: Event) -> Set[str]:
        """What an update counter feeds: schedule, lr, checkpoint, eval, stop. A counter that is
        also the data position (`sample_start = step * batch_size`) is saved to resume the data
        where it was, in batches, skipped updates included: that checkpoint entry is not a feed."""
        derived = self.derived_keys(increment)
        feeds: Set[str] = set()
        for k in derived:
            feeds |= self._fed_by_key.get(k, set())
        if not derived.isdisjoint(self._data_positions):
            feeds.discard("checkpoint")
        if not derived.isdisjoint(self._epoch_data_counters):
            feeds.discard("stop")
        return frozenset(feeds)

    @cached_property
    def _epoch_data_counters(self) -> Set[str]:
        """Counters of one epoch's data: set to a literal in an outer loop, outside the loop over the
        data, and ending that loop when they reach its length (`epoch_iter = 1` per epoch, then
        `if epoch_iter == len(loader) // accum: break`). That stop is where the data runs out,
        skipped updates included, not an update budget; a counter never reset (`global_step >=
        max_steps`) stays one."""
        found: Set[str] = set()
        for event in self.of_kind(EARLY_EXIT):
            loop, scope = event.site.loop, event.site.scope
            if not isinstance(event.node, cst.Break) or not isinstance(loop, cst.For):
                continue
            data = {dotted(sub) for sub in walk_expressions(loop.iter) if isinstance(sub, (cst.Name, cst.Attribute))} - {None}
            lengths = self._lengths_of(data, scope)
            for guard in event.site.guards:
                test = guard.test
                if guard.negated or not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
                    continue
                if not isinstance(test.comparisons[0].operator, (cst.Equal, cst.GreaterThanEqual, cst.GreaterThan)):
                    continue
                bound = test.comparisons[0].comparator
                if not (_reads_length_of(bound, data) or dotted(bound) in lengths):
                    continue
                key = self.roles.key(test.left, scope) if isinstance(test.left, (cst.Name, cst.Attribute)) else None
                if key and self._reset_outside(key, loop, scope):
                    found.add(key)
        return found

    def _lengths_of(self, data: Set[str], scope: Scope) -> Set[str]:
        """Names a scope sets from the length of the data (`num_iters = len(loader) // accum`)."""
        return {
            dotted(target) or ""
            for node, site in self.statements_of(scope)
            if isinstance(node, cst.Assign) and _reads_length_of(node.value, data)
            for target in _targets(node)
        }

    def _reset_outside(self, key: str, loop: cst.For, scope: Scope) -> bool:
        """The counter is set to a literal in a loop that encloses `loop` (once per epoch), not in `loop`."""
        where = self.structure.site_of.get(id(loop.iter))  # the header's site: the loops around `loop`
        if where is None:
            return False
        for node, site in self.statements_of(scope):
            if not (isinstance(node, cst.Assign) and isinstance(node.value, cst.Integer)):
                continue
            if site.loop is None or loop in site.loops or site.loop not in where.loops:
                continue
            if any(self.roles.key(t, scope) == key for t in _targets(node) if isinstance(t, (cst.Name, cst.Attribute))):
                return True
        return False

    def ends_early_before(self, site: Site) -> bool:
        """A `continue` earlier in the same pass of the same loop, inside a nested branch
        (`else: ...; if (i + 1) % accum: continue`): what follows may run once per window only."""
        return any(order < site.order for order in self._continues.get((id(site.scope), id(site.loop)), ()))

    @cached_property
    def _continues(self) -> Dict[tuple, List[int]]:
        found: Dict[tuple, List[int]] = defaultdict(list)
        for node, site in self.structure.statements:
            if isinstance(node, cst.Continue):
                found[(id(site.scope), id(site.loop))].append(site.order)
        return found

    @cached_property
    def positioned_on_resume(self) -> Set[str]:
        """Schedulers put back at the resumed position by hand (`scheduler.last_epoch = start - 1`),
        built by a helper told that position (`self._setup_lr_scheduler(..., last_epoch=step - 1)`), or
        replayed to it (`for _ in range(start * per_epoch): scheduler.step()`, a loop that trains nothing)."""
        found: Set[str] = {key for key in map(self._replayed_scheduler, self.of_kind(SCHEDULER_STEP)) if key}
        for node, site in self.structure.statements:
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    if isinstance(target.target, cst.Attribute) and target.target.attr.value == "last_epoch":
                        found.add(self.roles.key(target.target.value, site.scope) or "")
                    elif isinstance(node.value, cst.Call) and any(
                        a.keyword is not None and a.keyword.value == "last_epoch" and literal(a.value) != -1 for a in node.value.args
                    ):
                        found.add(self.roles.key(target.target, site.scope) or "")
        return found

    def _replayed_scheduler(self, event: Event) -> Optional[str]:
        """The scheduler's key when `event` sits in a replay loop: `for _ in range(n):` whose body only
        advances schedules (`x.step()`, `next(x)`), so it fast-forwards them and trains nothing."""
        loop = event.site.loop
        if event.subject is None or not isinstance(loop, cst.For) or not (isinstance(loop.iter, cst.Call) and dotted(loop.iter.func) == "range"):
            return None
        body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ()
        return self.roles.key(event.subject, event.site.scope) if body and all(map(_advances_a_schedule, body)) else None

    @staticmethod
    def stores_data_position(call: cst.Call) -> bool:
        """A saver handed the batch size with the index (`save_checkpoint(..., step=i + 1,
        batch_size=bs)`) stores where the data stands, in batches: the right unit for that."""
        return any(_DATA_SIZE.search(a.keyword.value if a.keyword else dotted(a.value) or "") for a in call.args)

    @cached_property
    def _data_positions(self) -> Set[str]:
        """Keys that locate the data: multiplied by a batch or sequence size, or handed to a
        sampler or loader to skip what was consumed (`skip_first_batches(loader, step)`)."""
        found: Set[str] = set()
        for node, site in self.structure.statements:
            for sub in walk_expressions(node):
                if isinstance(sub, cst.BinaryOperation) and isinstance(sub.operator, cst.Multiply):
                    for side, other in ((sub.left, sub.right), (sub.right, sub.left)):
                        if isinstance(side, (cst.Name, cst.Attribute)) and _DATA_SIZE.search(" ".join(names_in(other))):
                            found.add(self.roles.key(side, site.scope) or "")
                elif isinstance(sub, cst.Call) and _DATA_SKIP.search(last_name(sub.func) or ""):
                    found.update(self.keys_in(sub, site.scope))
        return found

    @cached_property
    def _fed_by_key(self) -> Dict[str, Set[str]]:
        """Key -> what reading it feeds: "schedule" (scheduler arguments), "lr" (a manual LR value),
        "checkpoint" (a save or its condition), "eval" and "stop" (their conditions, a while test)."""
        fed: Dict[str, Set[str]] = defaultdict(set)

        def feeds(label: str, keys: Iterable[str]) -> None:
            for k in keys:
                fed[k].add(label)

        for event in self.events:
            s = event.site.scope
            if event.kind == SCHEDULER_STEP:
                if isinstance(event.node, cst.Assign):
                    feeds("lr", self.keys_in(event.node.value, s))
                elif _step_update_does_nothing(event):
                    continue
                else:
                    for argument in event.node.args:
                        feeds("schedule", self.keys_in(argument.value, s))
            label = {CHECKPOINT_SAVE: "checkpoint", EVALUATION: "eval", EARLY_EXIT: "stop"}.get(event.kind)
            if label is None:
                continue
            for guard in event.site.guards:
                if label == "stop" and guard.early_exit:
                    continue  # `if ...: continue` before `if done: break` decides whether this pass reaches the stop test, not the stop
                feeds(label, self.keys_in(guard.test, s))
            if event.kind == CHECKPOINT_SAVE:
                feeds(label, self.keys_in(event.node, s))
        for loop, site in self.structure.while_loops:
            feeds("stop", self.keys_in(loop.test, site.scope))
        return fed

    # -- positions -------------------------------------------------------------------------------

    def span(self, node: cst.CSTNode) -> tuple:
        """(start offset, end offset) of a node."""
        where = self.positions[node]
        return self.source.parsed_offset(where.start.line, where.start.column), self.source.parsed_offset(where.end.line, where.end.column)

    def rows(self, node: cst.CSTNode) -> tuple:
        where = self.positions[node]
        return where.start.line, where.end.line

    def statement_rows(self, node: cst.CSTNode) -> tuple:
        """First and last rows of the statement (or condition) that holds a node."""
        holder = self.structure.holder.get(id(node))
        if holder is not None:
            return self.rows(holder)
        start, end = self.span(node)
        best = None
        for small, _ in self.structure.statements:
            s, e = self.span(small)
            if s <= start and end <= e and (best is None or e - s < best[1] - best[0]):
                best = (s, e, small)
        return self.rows(best[2]) if best else self.rows(node)

    def text(self, node: cst.CSTNode) -> str:
        """The node's source text; for a node that is in no source (the project index composes
        `self._scaler` for a callee's `self._scaler` reached through `self.helper()`), its code."""
        if self.positions.get(node) is None:
            return cst.Module(body=[]).code_for_node(node)
        start, end = self.span(node)
        return self.source.text[start:end]

    # -- building --------------------------------------------------------------------------------

    def _classify_guards(self) -> None:
        for node, site in self.structure.statements:
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                key = self.roles.key(node.targets[0].target, site.scope)
                value = node.value
                if isinstance(value, cst.Call) and id(value) in self._scale_reads:
                    self._scale_vars.add(key)  # type: ignore[arg-type]
        for node, site in self.structure.statements:
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                kinds = self._kinds_of(node.value, site.scope)
                if kinds & {COMMIT_GATE, GUESSED_GATE, MODULO, WINDOW_BOUNDARY}:  # a gate or a cadence kept in a flag
                    self._flags[self.roles.key(node.targets[0].target, site.scope)] = kinds  # type: ignore[index]
        for event in self.of_kind(SKIPPABLE_STEP):
            if event.gate_var:
                self._flags[self.roles.key(cst.Name(event.gate_var), event.site.scope)] = frozenset({COMMIT_GATE})  # type: ignore[index]
        seen = set()
        for _, site in self.structure.statements:
            for guard in site.guards:
                if id(guard.test) not in seen:
                    seen.add(id(guard.test))
                    kinds = self._kinds_of(guard.test, site.scope)
                    # `if torch.isnan(loss): raise`: the run stops, no update is skipped or counted
                    self._kinds[id(guard.test)] = kinds - {COMMIT_GATE, GUESSED_GATE, FINITENESS} if guard.raises else kinds
        # A cadence test that guards the update is the window boundary, and so is a second test of
        # the same condition in the same function (`if n % accum == accum - 1:` again, to log and save).
        windows = set()
        for step in self.of_kind(*STEPS):
            for guard in step.site.guards:
                kinds = self._kinds[id(guard.test)]
                if MODULO in kinds:
                    self._kinds[id(guard.test)] = kinds | {WINDOW_BOUNDARY}
                    windows.add((id(step.site.scope), self.condition(guard.test)[0]))
        if windows:
            for _, site in self.structure.statements:
                for guard in site.guards:
                    if (id(site.scope), self.condition(guard.test)[0]) in windows:
                        self._kinds[id(guard.test)] = self._kinds[id(guard.test)] | {WINDOW_BOUNDARY}
        # `step % accum == 0` with `accum` 1 as written holds on every batch: no window, no cadence
        for _, site in self.structure.statements:
            for guard in site.guards:
                kinds = self._kinds[id(guard.test)]
                if WINDOW_BOUNDARY in kinds and self._divides_by_one_only(guard.test, site.scope):
                    self._kinds[id(guard.test)] = kinds - {WINDOW_BOUNDARY, MODULO}

    def _divides_by_one_only(self, test: cst.BaseExpression, scope: Scope) -> bool:
        """The test is one comparison of `step % accum` (or `(step + 1) % accum`) with `accum` 1 as written."""
        modulo = test.left if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 else None
        return isinstance(modulo, cst.BinaryOperation) and isinstance(modulo.operator, cst.Modulo) and one_as_written(self, modulo.right, scope)

    def _overflow(self, found: OverflowHandling) -> None:
        """Events that run only after a committed update of a step an `except OverflowError` may drop
        (or only after a dropped one) get that `try`'s guard, a commit gate."""
        for event in self.events:
            guard = found.guards.get(id(event.node))
            if guard is not None:
                event.site = replace(event.site, guards=event.site.guards + (guard,))
                self._kinds[id(guard.test)] = frozenset({COMMIT_GATE})

    def _accelerate(self, found: AccelerateWindows) -> None:
        """A prepared step inside `accumulate` runs once per window: it gets that window's guard, one
        window with `if accelerator.sync_gradients:`. Without accumulation `sync_gradients` is always true."""
        for event in self.events:
            guard = found.guards.get(id(event.node))
            if guard is not None:
                event.site = replace(event.site, guards=event.site.guards + (guard,))
                self._kinds[id(guard.test)] = frozenset({WINDOW_BOUNDARY})
                self._shared_windows.add(id(guard.test))
        for test, accumulating in found.sync_tests.items():
            if accumulating:
                self._shared_windows.add(test)
            else:
                self._kinds[test] = self._kinds.get(test, frozenset()) - {WINDOW_BOUNDARY}

    def _kinds_of(self, test: cst.BaseExpression, scope: Scope) -> FrozenSet[str]:
        return condition_kinds(test, lambda name: self.flag_kinds(name, scope), lambda expr: self.is_scale_read(expr, scope))


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


_DATA_SIZE = re.compile(r"batch|sample|seq_len|block_size|context|tokens", re.I)
_DATA_SKIP = re.compile(r"^(skip_first_batches|islice|set_start_index|set_start_iter|set_skip|skip|seek)$|sampler", re.I)


def _engine_optimizer(update: Event) -> Optional[str]:
    """The key of the optimizer a DeepSpeed engine's step() steps, when the code names it."""
    return update.role.optimizer if update.role is not None and update.role.kind == ENGINE else None


def _step_update_does_nothing(event: Event) -> bool:
    """timm's `step_update(n)` moves the LR only for a scheduler built with `t_in_epochs=False`;
    unless the code shows that, the counter it reads feeds nothing."""
    func = event.node.func if isinstance(event.node, cst.Call) else None
    return isinstance(func, cst.Attribute) and func.attr.value == "step_update" and (event.role is None or event.role.per_update is not True)


def _advances_a_schedule(statement: cst.BaseStatement) -> bool:
    """`x.step()` or `next(x)` alone on its line."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        call = small.value if isinstance(small, cst.Expr) else None
        if not isinstance(call, cst.Call):
            return False
        if not (last_name(call.func) == "step" and isinstance(call.func, cst.Attribute) and not call.args or dotted(call.func) == "next" and len(call.args) == 1):
            return False
    return True


def _is_cadence(test: cst.CSTNode) -> bool:
    """`n % k == 0`, `n == k`: true once per value of `n`."""
    return isinstance(test, cst.BaseExpression) and any(
        isinstance(sub, cst.BinaryOperation) and isinstance(sub.operator, cst.Modulo)
        or isinstance(sub, cst.Comparison) and any(isinstance(c.operator, cst.Equal) for c in sub.comparisons)
        for sub in walk_expressions(test)
    )


def _reads_length_of(expr: cst.BaseExpression, data: Set[str]) -> bool:
    """`len(loader)` (or `len(loader) // accum`) for one of the data names."""
    return any(
        isinstance(sub, cst.Call) and dotted(sub.func) == "len" and len(sub.args) == 1 and dotted(sub.args[0].value) in data
        for sub in walk_expressions(expr)
    )


def _prefixes(name: str) -> List[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _targets(node: cst.CSTNode) -> List[cst.BaseExpression]:
    if isinstance(node, cst.Assign):
        found: List[cst.BaseExpression] = []
        for target in node.targets:
            stack = [target.target]
            while stack:
                current = stack.pop()
                if isinstance(current, (cst.Tuple, cst.List)):
                    stack.extend(e.value for e in current.elements)
                else:
                    found.append(current)
        return found
    if isinstance(node, (cst.AnnAssign, cst.AugAssign)):
        return [node.target]
    return []


def _exits_before(first: Site, second: Site) -> bool:
    """`first` sits in a block that ends the pass (continue, break, return, raise) after it and
    that does not hold `second`."""
    shared = {id(block) for block, _ in second.trail}
    for block, statement in first.trail:
        if id(block) in shared:
            continue
        rest = block.statements[block.index(statement) + 1 :]
        if any(isinstance(s, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and any(isinstance(x, EXITS) for x in s.body) for s in rest):
            return True
    return False


RUNTIME_HELPERS = (COMMITTED_STEP, "committed_hook")


def _helpers(imports: ImportMap, module: cst.Module) -> Dict[str, str]:
    """Local name -> steplint.runtime function, for the helpers the module defines or imports."""
    found = {local: q.rsplit(".", 1)[1] for local, q in imports.names.items() if q.rsplit(".", 1)[0] == "steplint.runtime" and q.rsplit(".", 1)[1] in RUNTIME_HELPERS}
    found.update({s.name.value: s.name.value for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value in RUNTIME_HELPERS})
    return found


# Module -> (module, imports, structure, children cache) of a module built once and kept for a second
# build: a file the run lints is summarised for the project index first, then linted with what the
# index tells; its imports and statements are the same both times.
_WALKED: Dict[int, tuple] = {}


def build_model(source: Source, module: cst.Module, settings, project=None, keep_walk: bool = False) -> ModuleModel:
    """The model of a module; `project` (a steplint.project ModuleContext) adds what the rest of the
    project tells about its calls and parameters. `keep_walk`: keep what does not depend on the
    project (imports, statements) for the module's next build."""
    walked = _WALKED.pop(id(module), None)
    if walked is not None and walked[0] is module:
        _, imports, structure, cached = walked
        restore_children(cached)
    else:
        forget_children()
        imports = ImportMap(module)
        structure = walk_module(module)
    positions = Positions(source, module, structure)  # computed on demand: summaries ask for none
    roles = RoleTable(imports, structure, settings.role_names(), project)
    helpers = _helpers(imports, module)
    model = ModuleModel(source, module, positions, imports, structure, roles, frozenset(helpers.values()), settings)
    model.events = collect_events(structure, roles, frozenset(helpers), "optimizer_step_was_skipped" in source.text)
    if project is not None:
        from steplint.project.events import call_events  # the project package builds on the model

        model.events = sorted(model.events + call_events(model, project), key=lambda e: e.order)
    engines = [e for e in model.events if e.strategy == "deepspeed"]
    if engines and not deepspeed_fp16_shown(module, source.text, structure.statements):
        # A DeepSpeed engine skips (to calibrate its loss scale) only with fp16 on, often set in a
        # JSON config we cannot see; with no sign of fp16 in the module, or a bf16 config, its step
        # is taken as a plain one (silence over a guess).
        for event in engines:
            event.kind = OPTIMIZER_STEP
    overflow = overflow_handling(model)  # before anything reads the events by kind: it makes steps skippable
    model._flags.update(dict.fromkeys(overflow.flags, frozenset({COMMIT_GATE})))
    model._classify_guards()
    model._overflow(overflow)
    model._accelerate(accelerate_windows(model))
    model.in_group_loop = resite_group_events(model)
    if keep_walk:
        _WALKED[id(module)] = (module, imports, structure, current_children())
    return model
