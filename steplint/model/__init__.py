"""The training-step model of one module, built once and read by every rule (DESIGN.md §4)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Dict, FrozenSet, Iterable, List, Optional, Set

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
    EVALUATION,
    OPTIMIZER_STEP,
    SCALE_READ,
    SCALER_UPDATE,
    SCHEDULER_STEP,
    SKIPPABLE_STEP,
    Event,
    collect_events,
)
from steplint.model.counters import Counters
from steplint.model.guards import COMMIT_GATE, GUESSED_GATE, WINDOW_BOUNDARY, Guards
from steplint.model.positions import Positions
from steplint.model.state import Checkpoint, State
from steplint.model.roles import ENGINE, SCALER, RoleTable
from steplint.model.structure import EXITS, Guard, Scope, Site, Structure, walk_module
from steplint.model.text import Text
from steplint.model.syntax import ImportMap, current_children, dotted, forget_children, last_name, literal, restore_children, walk_expressions
from steplint.model.calls import call_events
from steplint.model.groups import resite_group_events
from steplint.model.overflow import overflow_handling
from steplint.model.precision import deepspeed_fp16_shown
from steplint.model.windows import AccelerateWindows, accelerate_windows
from steplint.source import Source


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
    _shared_windows: Set[int] = field(default_factory=set)  # ids of window tests that are one window (accelerate's)
    in_group_loop: Set[int] = field(default_factory=set)  # ids of event nodes inside `for opt in optimizers:`
    # Facts computed once per module and read many times (DESIGN.md: no fact recomputed per event).
    _memo: Dict[tuple, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.text = Text(self.source, self.positions, self.structure)
        self.guards = Guards(self)
        self.counters = Counters(self)
        self.state = State(self)

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

    def pass_events(self, site: Site, *kinds: str) -> List[Event]:
        """Events of `kinds` in the same scope and innermost loop as `site` (one pass), in program order."""
        return [e for e in self._iterations.get((id(site.scope), id(site.loop)), ()) if e.kind in kinds]

    def shares_its_pass(self, update: Event) -> bool:
        """Another skippable scaler step runs in the same pass (two optimizers, one scaler)."""
        return any(other is not update and other.strategy == SCALER for other in self.pass_events(update.site, SKIPPABLE_STEP))

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

    def window(self, site: Site) -> Optional[Guard]:
        """The innermost window-boundary guard of a statement."""
        found = self.guards.of_kind(site, WINDOW_BOUNDARY)
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
            text, flipped = self.guards.condition(guard.test)
            held[text] = (guard, guard.negated != flipped)
        for guard in b.guards:
            text, flipped = self.guards.condition(guard.test)
            if text in held and held[text][1] != (guard.negated != flipped) and self.guards.unchanged(held[text][0], guard, a.scope):
                return True
        return False

    def runs_only_with(self, later: Site, earlier: Site) -> bool:
        """`later` runs only in passes where `earlier`'s conditions held: it is under each of them
        (the same test, or a test of the same unchanged condition with the same polarity)."""
        held = {(id(g.test), g.negated) for g in later.guards}
        texts = {}
        for guard in later.guards:
            text, flipped = self.guards.condition(guard.test)
            texts[text] = (guard, guard.negated != flipped)
        for guard in earlier.guards:
            if (id(guard.test), guard.negated) in held:
                continue
            text, flipped = self.guards.condition(guard.test)
            match = texts.get(text)
            if match is None or match[1] != (guard.negated != flipped) or not self.guards.unchanged(guard, match[0], later.scope):
                return False
        return True

    def same_window(self, update: Site, other: Site) -> bool:
        """`other` runs once per update attempt: under the update's window boundary, if it has one."""
        boundary = self.window(update)
        if boundary is None:
            return True
        text, flipped = self.guards.condition(boundary.test)
        return any(
            g is boundary or g.test is boundary.test and g.negated == boundary.negated
            or self.guards.condition(g.test) == (text, flipped) and g.negated == boundary.negated and self.guards.unchanged(boundary, g, update.scope)
            or id(boundary.test) in self._shared_windows and id(g.test) in self._shared_windows and not g.negated
            for g in other.guards
        )

    def attempt_for(self, event: Event, before_only: bool = True) -> Optional[Event]:
        """The skippable update that `event` follows in the same iteration and window, if any."""
        candidates = [
            u for u in self.pass_events(event.site, SKIPPABLE_STEP)
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

    def in_iteration(self, event: Event, *kinds: str) -> List[Event]:
        """Events of `kinds` that run in the same pass of the same loop as `event`."""
        return [
            e for e in self.pass_events(event.site, *kinds)
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
            text, flipped = self.guards.condition(guard.test)
            if text != name or guard.negated == flipped or guard.early_exit:
                continue
            tested = self.structure.site_of.get(id(guard.test))
            if tested is None:
                continue
            low, high = sorted((tested.order, scaler_event.order))
            if not self.guards.assigned_between(name, other.site.scope, low, high):
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
            text, flipped = self.guards.condition(guard.test)
            held[text] = (guard, guard.negated != flipped)
        for guard in rest:
            if guard.early_exit:
                return False
            text, flipped = self.guards.condition(guard.test)
            match = held.get(text)
            if match is None or match[1] != (guard.negated != flipped) or not self.guards.unchanged(match[0], guard, later.scope):
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

    # -- building --------------------------------------------------------------------------------

    def _accelerate(self, found: AccelerateWindows) -> None:
        """A prepared step inside `accumulate` runs once per window: it gets that window's guard, one
        window with `if accelerator.sync_gradients:`. Without accumulation `sync_gradients` is always true."""
        for event in self.events:
            guard = found.guards.get(id(event.node))
            if guard is not None:
                event.site = replace(event.site, guards=event.site.guards + (guard,))
                self.guards.mark(id(guard.test), frozenset({WINDOW_BOUNDARY}))
                self._shared_windows.add(id(guard.test))
        for test, accumulating in found.sync_tests.items():
            if accumulating:
                self._shared_windows.add(test)
            else:
                self.guards.drop(test, WINDOW_BOUNDARY)




def _engine_optimizer(update: Event) -> Optional[str]:
    """The key of the optimizer a DeepSpeed engine's step() steps, when the code names it."""
    return update.role.optimizer if update.role is not None and update.role.kind == ENGINE else None


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
        model.events = sorted(model.events + call_events(model, project), key=lambda e: e.order)
    engines = [e for e in model.events if e.strategy == "deepspeed"]
    if engines and not deepspeed_fp16_shown(module, source.text, structure.statements):
        # A DeepSpeed engine skips (to calibrate its loss scale) only with fp16 on, often set in a
        # JSON config we cannot see; with no sign of fp16 in the module, or a bf16 config, its step
        # is taken as a plain one (silence over a guess).
        for event in engines:
            event.kind = OPTIMIZER_STEP
    overflow = overflow_handling(model)  # before anything reads the events by kind: it makes steps skippable
    model.guards.classify(overflow.flags)
    model.guards.add_overflow_guards(overflow)
    model._accelerate(accelerate_windows(model))
    model.in_group_loop = resite_group_events(model)
    if keep_walk:
        _WALKED[id(module)] = (module, imports, structure, current_children())
    return model
