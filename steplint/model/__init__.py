"""The training-step model of one module, built once and read by every rule (DESIGN.md §4).

`ModuleModel` holds the parse, the roles and the step's events, and one facet per concern (see
README.md here): `text` (spans, rows), `guards` (what each test means), `passes` (same-pass
relations), `windows` (once per window or per micro-batch), `counters` (what counters count and
feed), `state` (checkpoints and resume). Each facet computes its facts once and memoises them."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Dict, FrozenSet, Iterable, List, Optional, Set

import libcst as cst

from steplint.effects import PROJECT_LR_SCHEDULE
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
    lr_schedule_classes,
    lr_setting_methods,
    param_group_vars,
)
from steplint.model.counters import Counters
from steplint.model.guards import COMMIT_GATE, GUESSED_GATE, WINDOW_BOUNDARY, Guards
from steplint.model.positions import Positions
from steplint.model.state import Checkpoint, State
from steplint.model.roles import RoleTable, torch_subclasses
from steplint.model.structure import Guard, Scope, Site, Structure, walk_module
from steplint.model.text import Text
from steplint.model.units import Units
from steplint.model.syntax import ImportMap, current_children, forget_children, reads, restore_children, walk_expressions
from steplint.model.calls import call_events
from steplint.model.groups import resite_group_events
from steplint.model.overflow import overflow_handling
from steplint.model.precision import deepspeed_fp16_shown
from steplint.model.passes import Passes
from steplint.model.windows import Windows, accelerate_windows
from steplint.source import Source


__all__ = [
    "ModuleModel", "build_model", "Event", "Guard", "Site", "Scope",
    "SKIPPABLE_STEP", "OPTIMIZER_STEP", "SCHEDULER_STEP", "SCALER_UPDATE", "SCALE_READ", "COUNTER_INCREMENT",
    "CHECKPOINT_SAVE", "EVALUATION", "COMMIT_GATE", "GUESSED_GATE", "WINDOW_BOUNDARY", "COMMITTED_STEP",
    "SCALED_BACKWARD", "UNSCALE", "CLIP", "ZERO_GRAD", "STEP_HOOK", "STEP_WRAPPER", "SKIP_FLAG_READ", "STATE_LOAD", "Checkpoint", "LOG", "COLLECTIVE",
]


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
    in_group_loop: Set[int] = field(default_factory=set)  # ids of event nodes inside `for opt in optimizers:`
    # Functions whose callers' arguments a fact read, taking the project's word that no other module
    # calls them (steplint.model.values): a model for another project must agree on those functions.
    callers_read: Set[str] = field(default_factory=set)
    # Facts computed once per module and read many times (DESIGN.md: no fact recomputed per event).
    _memo: Dict[tuple, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.text = Text(self.source, self.positions, self.structure)
        self.guards = Guards(self)
        self.counters = Counters(self)
        self.state = State(self)
        self.passes = Passes(self)
        self.windows = Windows(self)
        self.units = Units(self)

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

    def statements_of(self, scope: Scope) -> List[tuple]:
        """(node, site) of the statements of one scope, in program order."""
        return self.roles.statements_of(scope)

    def events_in(self, scope: Scope, *kinds: str) -> List[Event]:
        """Events of `kinds` in one scope, in program order."""
        def compute():
            found: Dict[int, List[Event]] = defaultdict(list)
            for event in self.of_kind(*kinds):
                found[id(event.site.scope)].append(event)
            return found
        return self.remember(("events_in",) + kinds, compute).get(id(scope), [])

    # -- objects and places ----------------------------------------------------------------------

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
            return frozenset(k for k in (self.roles.key(sub, scope) for sub in reads(expr)) if k)
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
    param_groups = param_group_vars(structure)
    own_schedules = dict.fromkeys(lr_schedule_classes(structure, param_groups), PROJECT_LR_SCHEDULE)
    roles = RoleTable(imports, structure, settings.role_names(), project, {**own_schedules, **torch_subclasses(module, imports, project)}, source.text,
                      lr_setting_methods(structure, param_groups), frozenset(own_schedules))
    helpers = _helpers(imports, module)
    model = ModuleModel(source, module, positions, imports, structure, roles, frozenset(helpers.values()), settings)
    model.callers_read = roles.callers_read  # (one set: a fact read later adds to it)
    model.events = collect_events(structure, roles, frozenset(helpers), "optimizer_step_was_skipped" in source.text, param_groups)
    # What runs only under a flag no run of the project gives (`if args.load_optimizer_scheduler:`) does not run.
    # A restore under an option that takes a value (`--resume PATH` with default None, `--load_epoch N` with
    # default -1) is the resume a user runs after a crash, with the path or epoch of that run: no launch file
    # can show it, and it runs all the same.
    # What runs beside such a restore, under the same switch, runs on the resumed runs with it (the
    # scheduler replayed to the resumed epoch, `for _ in range(start): scheduler.step()`).
    never_runs = {id(e): roles.command_line.never_runs(e.site) for e in model.events}
    def runs(event: Event) -> bool:
        option = never_runs[id(event)]
        return option is None or event.kind == STATE_LOAD and roles.command_line.value_option(option)
    kept: List[Event] = []
    dropped: List[Event] = []
    for event in model.events:
        (kept if runs(event) else dropped).append(event)
    model.events = kept
    calls = call_events(model, project) if project is not None else []
    resume_switches = {never_runs[id(e)] for e in kept if e.kind == STATE_LOAD} - {None}
    resume_switches |= {option for e in calls if e.kind == STATE_LOAD and (option := roles.command_line.never_runs(e.site)) is not None}
    resumed = {id(e.node) for e in calls}
    beside = [e for e in dropped if never_runs[id(e)] in resume_switches and id(e.node) not in resumed]
    if project is not None or beside:
        model.events = sorted(kept + calls + beside, key=lambda e: e.order)
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
    model.windows.add_accelerate_windows(accelerate_windows(model))
    model.windows.add_count_windows()
    model.in_group_loop = resite_group_events(model)
    if keep_walk:
        _WALKED[id(module)] = (module, imports, structure, current_children())
    return model


# The settings a model reads (at its build, or in a fact it memoises): a model is reused only for equal ones.
_MODEL_SETTINGS = ("roles", "schedule_basis", "units", "recipe", "fix_gate")


def model_for(model: ModuleModel, source: Source, project, settings) -> Optional[ModuleModel]:
    """`model` (built with keep_walk) as build_model would build it again from `source` with
    `project` and `settings`, or None when it would differ: the project index models a module the run
    lints, and its lint takes that model when the project tells it nothing its build read."""
    if model.source.text != source.text or not _builds_alike(model, project, settings):
        return None
    model.source.python_tree = source.python_tree  # (the index does not keep its own: the lint made one)
    walked = _WALKED.pop(id(model.module), None)
    if walked is not None and walked[0] is model.module:
        restore_children(walked[3])
    model.roles.project = project  # (read afresh by the facts not computed yet: the same as a new build's)
    model.settings = settings
    return model


def _builds_alike(model: ModuleModel, project, settings) -> bool:
    """Whether build_model(project, settings) gives `model`, built with `model.roles.project`: the
    same settings, the same roles for parameters, no call into a project function that acts or
    returns a role or command-line options (no call events, no role flowing), the same classes of the project known as schedulers,
    the events already in program order (a build
    with a project sorts them), and the same answer for every function whose callers a fact asked."""
    if any(getattr(model.settings, name) != getattr(settings, name) for name in _MODEL_SETTINGS):
        return False
    built_with = model.roles.project
    contexts = [c for c in (built_with, project) if c is not None]
    if (built_with.parameter_roles if built_with else {}) != (project.parameter_roles if project else {}):
        return False
    if any(getattr(built_with, name, None) != getattr(project, name, None) for name in ("launch_options", "launch_values", "configured_options", "switched_off_keys", "contested_globals", "switches_set_true", "switches_given_to_scripts", "configured_values", "precisions_configured", "precision_keys_configured", "torch_subclasses", "scheduler_methods", "parameter_values", "inner_schedules", "parameter_inner_schedules", "parameter_constructors")):
        return False
    if any(callee.effects or callee.returns or any(callee.returns_each) or callee.options for context in contexts for callee in context.calls.values()):
        return False
    if any(a.order > b.order for a, b in zip(model.events, model.events[1:])):
        return False
    elsewhere = [set(c.called_elsewhere) if c is not None else set() for c in (built_with, project)]
    return all((name in elsewhere[0]) == (name in elsewhere[1]) for name in model.callers_read)
