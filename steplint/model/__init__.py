"""The training-step model of one module, built once and read by every rule (DESIGN.md §4)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterable, List, Optional, Set

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

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
from steplint.model.guards import COMMIT_GATE, GUESSED_GATE, MODULO, WINDOW_BOUNDARY, condition_kinds
from steplint.model.checkpoints import Checkpoint, checkpoint_contents, restored_from_checkpoint, saved_under, step_state
from steplint.model.roles import RoleTable
from steplint.model.structure import Guard, Scope, Site, Structure, walk_module
from steplint.model.syntax import ImportMap, forget_children, walk_expressions
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
    positions: Dict[cst.CSTNode, CodeRange]
    imports: ImportMap
    structure: Structure
    roles: RoleTable
    helpers: FrozenSet[str]  # steplint.runtime functions defined in or imported into the module
    settings: object  # steplint.config.Settings: the default schedule basis, the fix-gate style
    events: List[Event] = field(default_factory=list)
    _kinds: Dict[int, FrozenSet[str]] = field(default_factory=dict)
    _flags: Dict[str, FrozenSet[str]] = field(default_factory=dict)  # scoped name -> kinds of the condition it holds
    _scale_vars: Set[str] = field(default_factory=set)

    # -- events ----------------------------------------------------------------------------------

    def of_kind(self, *kinds: str) -> List[Event]:
        return [e for e in self.events if e.kind in kinds]

    # -- guards ----------------------------------------------------------------------------------

    def guard_kinds(self, guard: Guard) -> FrozenSet[str]:
        return self._kinds.get(id(guard.test), frozenset())

    def guards_of_kind(self, site: Site, *kinds: str) -> List[Guard]:
        return [g for g in site.guards if self.guard_kinds(g) & set(kinds)]

    def gated(self, site: Site) -> bool:
        """Runs under a commit gate, exact or guessed (SL105 reports the guessed ones)."""
        return bool(self.guards_of_kind(site, COMMIT_GATE, GUESSED_GATE))

    def window(self, site: Site) -> Optional[Guard]:
        """The innermost window-boundary guard of a statement."""
        found = self.guards_of_kind(site, WINDOW_BOUNDARY)
        return found[-1] if found else None

    # -- relations between events ----------------------------------------------------------------

    @staticmethod
    def same_iteration(a: Site, b: Site) -> bool:
        """In one scope and one iteration of the same innermost loop (or both in no loop)."""
        return a.scope is b.scope and a.loop is b.loop

    @staticmethod
    def exclusive(a: Site, b: Site) -> bool:
        """Never both in one pass: different branches of one `if`, or one ends its pass first
        (`if resuming: counter += 1; continue` before the update)."""
        polarity = {id(g.test): g.negated for g in a.guards if not g.early_exit}
        if any(id(g.test) in polarity and polarity[id(g.test)] != g.negated for g in b.guards if not g.early_exit):
            return True
        first, second = (a, b) if a.order < b.order else (b, a)
        return _exits_before(first, second)

    def same_window(self, update: Site, other: Site) -> bool:
        """`other` runs once per update attempt: under the update's window boundary, if it has one."""
        boundary = self.window(update)
        return boundary is None or any(g is boundary or g.test is boundary.test and g.negated == boundary.negated for g in other.guards)

    def attempt_for(self, event: Event, before_only: bool = True) -> Optional[Event]:
        """The skippable update that `event` follows in the same iteration and window, if any."""
        candidates = [
            u for u in self.of_kind(SKIPPABLE_STEP)
            if self.same_iteration(u.site, event.site) and not self.exclusive(u.site, event.site) and self.same_window(u.site, event.site)
        ]
        before = [u for u in candidates if u.order < event.order]
        if before:
            return before[-1]
        return None if before_only or not candidates else candidates[0]

    def basis(self, event: Event) -> str:
        """What a scheduler call counts: its `# steplint: schedule=` comment, else the setting."""
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
            e for e in self.of_kind(*kinds)
            if e is not event and self.same_iteration(e.site, event.site) and not self.exclusive(e.site, event.site)
        ]

    def update_outside_window(self, event: Event) -> Optional[Event]:
        """An update of this iteration that runs once per window while `event` runs every batch."""
        for update in self.in_iteration(event, *STEPS):
            if self.window(update.site) is not None and not self.same_window(update.site, event.site):
                return update
        return None

    def covers(self, later: Site, earlier: Site) -> bool:
        """`later` runs on every path through `earlier` (after it): no condition or early exit of its own."""
        own = {(id(g.test), g.negated) for g in earlier.guards}
        return self.same_iteration(later, earlier) and later.order > earlier.order and all(
            (id(g.test), g.negated) in own for g in later.guards
        )

    def same_object(self, a: Event, b: Event) -> bool:
        """Two events on one object (the same scaler or optimizer), by its key in their scopes."""
        return a.subject is not None and b.subject is not None and self.roles.key(a.subject, a.site.scope) == self.roles.key(b.subject, b.site.scope)

    def batch_indices(self, loop, counters: bool = True) -> Set[str]:
        """Keys that count the batches of a loop: `i` of `for i, batch in enumerate(loader)`, and
        (with `counters`) counters advanced every batch, under no window boundary, in it."""
        keys: Set[str] = set()
        for node, site in self.structure.for_loops:
            if node is loop and isinstance(node.iter, cst.Call) and getattr(node.iter.func, "value", None) == "enumerate":
                if isinstance(node.target, cst.Tuple) and node.target.elements and isinstance(node.target.elements[0].value, cst.Name):
                    keys.add(self.roles.key(node.target.elements[0].value, site.scope))  # type: ignore[arg-type]
        for increment in self.of_kind(COUNTER_INCREMENT) if counters else ():
            if increment.site.loop is loop and self.window(increment.site) is None and not self.gated(increment.site):
                keys.add(self.roles.key(increment.subject, increment.site.scope))  # type: ignore[arg-type]
        return keys

    def windowed_counters(self, update: Event) -> Set[str]:
        """Counters advanced under the update's window boundary: they count windows (update attempts)."""
        boundary = self.window(update.site)
        return {
            self.roles.key(i.subject, i.site.scope)  # type: ignore[misc]
            for i in self.of_kind(COUNTER_INCREMENT)
            if boundary is not None and self.same_iteration(i.site, update.site) and self.same_window(update.site, i.site)
        }

    def checkpoint(self, save: Event) -> Optional[Checkpoint]:
        """What a `torch.save(...)` visibly stores, or None when its contents cannot be seen."""
        return checkpoint_contents(self, save)

    def saved_under(self) -> Dict[str, str]:
        """Role key -> checkpoint key, for what the module's visible checkpoints store."""
        return saved_under(self)

    def restored_from_checkpoint(self) -> set:
        """Keys of names the module assigns from a checkpoint read."""
        return restored_from_checkpoint(self)

    def step_state(self, scope: Scope) -> dict:
        """The run's step state visible from a scope: {"scheduler": [keys], "scaler": [...], "counter": [...]}."""
        return step_state(self, scope)

    def visible(self, key: str, scope: Scope) -> bool:
        """A role key that code in `scope` can name: its own, its class's, or a global."""
        prefix = key.split(":", 1)[0]
        return prefix == "<module>" or (prefix == f"class {scope.class_name}" and scope.class_name is not None) or prefix == scope.name

    def order_of_expression(self, expr: cst.CSTNode) -> Optional[int]:
        """Program order of the statement or condition that holds an expression."""
        for node, site in self.structure.statements:
            if any(sub is expr for sub in walk_expressions(node)):
                return site.order
        return None

    # -- facts about names -----------------------------------------------------------------------

    def mentions(self, expr: cst.CSTNode, scope: Scope, key: str) -> bool:
        return any(
            isinstance(sub, (cst.Name, cst.Attribute)) and self.roles.key(sub, scope) == key for sub in walk_expressions(expr)
        )

    def is_scale_read(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        if isinstance(expr, cst.Call):
            return any(e.node is expr for e in self.of_kind(SCALE_READ))
        return isinstance(expr, cst.Name) and self.roles.key(expr, scope) in self._scale_vars

    def flag_kinds(self, name: cst.Name, scope: Scope) -> FrozenSet[str]:
        return self._flags.get(self.roles.key(name, scope) or "", frozenset())

    def flag_assignment(self, name: cst.Name, scope: Scope) -> Optional[cst.Assign]:
        """The assignment that gave a condition flag its value (`was_run = before <= after`)."""
        key = self.roles.key(name, scope)
        for node, site in self.structure.statements:
            if isinstance(node, cst.Assign) and site.scope is scope and len(node.targets) == 1:
                if self.roles.key(node.targets[0].target, scope) == key:
                    return node
        return None

    def statements_in(self, scope: Scope, key: str) -> Iterable[tuple]:
        """(node, site) of the scopes where `key` can be read: its function, its class's methods, or all."""
        prefix = key.split(":", 1)[0]
        for node, site in self.structure.statements:
            owner = site.scope
            if prefix.startswith("class "):
                if owner.class_name == prefix[len("class "):]:
                    yield node, site
            elif prefix == "<module>" or owner.name == prefix:
                yield node, site

    def counter_feeds(self, increment: Event) -> Set[str]:
        """What an update counter feeds: schedule, lr, checkpoint, eval, stop."""
        scope = increment.site.scope
        key = self.roles.key(increment.subject, scope)
        if key is None:
            return set()
        feeds: Set[str] = set()
        derived = {key}
        for node, site in self.statements_in(scope, key):
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and any(self.mentions(node.value, site.scope, k) for k in derived):
                target_key = self.roles.key(node.targets[0].target, site.scope)
                if target_key and target_key != key:
                    derived.add(target_key)

        def reads(expr: cst.CSTNode, s: Scope) -> bool:
            return any(self.mentions(expr, s, k) for k in derived)

        for event in self.events:
            s = event.site.scope
            if event.node is increment.node:
                continue
            if event.kind == SCHEDULER_STEP:
                value = event.node.value if isinstance(event.node, cst.Assign) else event.node
                arguments = value if isinstance(event.node, cst.Assign) else cst.Tuple([cst.Element(a.value) for a in event.node.args])
                if reads(arguments, s):
                    feeds.add("lr" if isinstance(event.node, cst.Assign) else "schedule")
            guard_reads = any(reads(g.test, s) for g in event.site.guards)
            if event.kind == CHECKPOINT_SAVE and (guard_reads or reads(event.node, s)):
                feeds.add("checkpoint")
            elif event.kind == EVALUATION and guard_reads:
                feeds.add("eval")
            elif event.kind == EARLY_EXIT and guard_reads:
                feeds.add("stop")
        for loop, site in self.structure.while_loops:
            if reads(loop.test, site.scope):
                feeds.add("stop")
        return feeds

    # -- positions -------------------------------------------------------------------------------

    def span(self, node: cst.CSTNode) -> tuple:
        """(start offset, end offset) of a node."""
        where = self.positions[node]
        return self.source.offset(where.start.line, where.start.column), self.source.offset(where.end.line, where.end.column)

    def rows(self, node: cst.CSTNode) -> tuple:
        where = self.positions[node]
        return where.start.line, where.end.line

    def statement_rows(self, node: cst.CSTNode) -> tuple:
        """First and last rows of the statement (or condition) that holds a node."""
        start, end = self.span(node)
        best = None
        for small, _ in self.structure.statements:
            s, e = self.span(small)
            if s <= start and end <= e and (best is None or e - s < best[1] - best[0]):
                best = (s, e, small)
        return self.rows(best[2]) if best else self.rows(node)

    def text(self, node: cst.CSTNode) -> str:
        start, end = self.span(node)
        return self.source.text[start:end]

    # -- building --------------------------------------------------------------------------------

    def _classify_guards(self) -> None:
        for node, site in self.structure.statements:
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                key = self.roles.key(node.targets[0].target, site.scope)
                value = node.value
                if isinstance(value, cst.Call) and any(e.node is value for e in self.of_kind(SCALE_READ)):
                    self._scale_vars.add(key)  # type: ignore[arg-type]
        for node, site in self.structure.statements:
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                kinds = self._kinds_of(node.value, site.scope)
                if kinds & {COMMIT_GATE, GUESSED_GATE}:
                    self._flags[self.roles.key(node.targets[0].target, site.scope)] = kinds  # type: ignore[index]
        for event in self.of_kind(SKIPPABLE_STEP):
            if event.gate_var:
                self._flags[self.roles.key(cst.Name(event.gate_var), event.site.scope)] = frozenset({COMMIT_GATE})  # type: ignore[index]
        seen = set()
        for _, site in self.structure.statements:
            for guard in site.guards:
                if id(guard.test) not in seen:
                    seen.add(id(guard.test))
                    self._kinds[id(guard.test)] = self._kinds_of(guard.test, site.scope)
        # A cadence test that guards the update is the window boundary.
        for step in self.of_kind(*STEPS):
            for guard in step.site.guards:
                kinds = self._kinds[id(guard.test)]
                if MODULO in kinds:
                    self._kinds[id(guard.test)] = kinds | {WINDOW_BOUNDARY}

    def _kinds_of(self, test: cst.BaseExpression, scope: Scope) -> FrozenSet[str]:
        return condition_kinds(test, lambda name: self.flag_kinds(name, scope), lambda expr: self.is_scale_read(expr, scope))


_EXITS = (cst.Continue, cst.Break, cst.Return, cst.Raise)


def _exits_before(first: Site, second: Site) -> bool:
    """`first` sits in a block that ends the pass (continue, break, return, raise) after it and
    that does not hold `second`."""
    shared = {id(block) for block, _ in second.trail}
    for block, statement in first.trail:
        if id(block) in shared:
            continue
        rest = block.statements[block.index(statement) + 1 :]
        if any(isinstance(s, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and any(isinstance(x, _EXITS) for x in s.body) for s in rest):
            return True
    return False


RUNTIME_HELPERS = (COMMITTED_STEP, "committed_hook")


def _helpers(imports: ImportMap, module: cst.Module) -> Dict[str, str]:
    """Local name -> steplint.runtime function, for the helpers the module defines or imports."""
    found = {local: q.rsplit(".", 1)[1] for local, q in imports.names.items() if q.rsplit(".", 1)[0] == "steplint.runtime" and q.rsplit(".", 1)[1] in RUNTIME_HELPERS}
    found.update({s.name.value: s.name.value for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value in RUNTIME_HELPERS})
    return found


def build_model(source: Source, module: cst.Module, settings, project=None, positions: bool = True) -> ModuleModel:
    """The model of a module; `project` (a steplint.project ModuleContext) adds what the rest of the
    project tells about its calls and parameters. Without `positions` (project summaries need none)
    spans and rows are unavailable."""
    forget_children()
    imports = ImportMap(module)
    structure = walk_module(module)
    roles = RoleTable(imports, structure, settings.role_names(), project)
    helpers = _helpers(imports, module)
    where = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider) if positions else {}
    model = ModuleModel(source, module, where, imports, structure, roles, frozenset(helpers.values()), settings)
    model.events = collect_events(structure, roles, frozenset(helpers))
    if project is not None:
        from steplint.project.events import call_events  # the project package builds on the model

        model.events = sorted(model.events + call_events(model, project), key=lambda e: e.order)
    model._classify_guards()
    return model
