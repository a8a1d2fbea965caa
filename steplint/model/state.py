"""State: what a checkpoint stores, which step state a run has that a checkpoint should store, and
what a resume restores.

The step state of a run is what moves with committed updates and must come back on resume for the
resumed run to continue in the same unit: the schedulers the code steps, the scalers that may skip
(their loss scale and growth tracker), and the update counters that set the LR or the end of the run.
A checkpoint's contents are read when they are visible (a dict literal, a dict built key by key, a
saver of the project whose summary says what it stores); otherwise they are unknown and no rule
speaks. Schedulers put back at the resumed position by hand, or replayed to it, need no entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Dict, List, Optional, Set, Tuple

import libcst as cst

from steplint.model.events import CHECKPOINT_SAVE, COUNTER_INCREMENT, HELPER_STATE, OPTIMIZER_STEP, STATE_LOAD, SCALED_BACKWARD, SCHEDULER_STEP, SKIPPABLE_STEP, Event
from steplint.effects import FRESH_SCALER, LOAD, POSITIONED_STEP
from steplint.effects import SCHEDULER_STEP as STEPS_A_SCHEDULER
from steplint.model.calls import argument_at_call
from steplint.model.inner_schedules import InnerSchedule, inner_schedules
from steplint.model.precision import command_line_default
from steplint.model.roles import ACCELERATOR, ACCELERATOR_CLASSES, APEX_AMP, CONSTRUCTOR, OPTIMIZER, PRECISION_FROM_EXPRESSION, SCALE_HOLDERS, SCALER, SCHEDULER, module_binding, optimizer_named
from steplint.model.schedules import never_moves
from steplint.model.syntax import assignment_targets, children, disjuncts, dotted, keyword, last_name, literal, positional, reads_name, walk_expressions
from steplint.model.values import argument_for

if TYPE_CHECKING:
    from steplint.model import ModuleModel
    from steplint.model.structure import Scope, Site


@dataclass
class PositionResume:
    node: cst.CSTNode  # the statement that reads the position back
    site: "Site"
    position: str  # the key of the name it sets (`main:epoch_str`)
    # what the same statement sets besides (`model, optimizer, scheduler, start_epoch = setup(...)`): the
    # call that read the position back built these and is where they are restored, or not
    set_with: frozenset = frozenset()

    @property
    def order(self) -> int:
        return self.site.order


@dataclass
class Checkpoint:
    save: Event
    entries: Dict[str, cst.BaseExpression]  # key -> stored value
    dict_node: Optional[cst.Dict] = None  # the literal, when the contents are one
    name: Optional[str] = None  # the variable filled key by key, when they are built up
    holds: Dict[str, List[str]] = field(default_factory=dict)  # "optimizer"/"scheduler"/"scaler"/"counter" -> role keys


class State:
    """What the module's checkpoints store and what its resume restores."""

    def __init__(self, model: "ModuleModel"):
        self.model = model
        self._checkpoints: Dict[int, Optional[Checkpoint]] = {}
        self._step_states: Dict[int, Dict[str, List[str]]] = {}

    def checkpoint(self, save: Event) -> Optional[Checkpoint]:
        """What a save visibly stores, or None when its contents cannot be seen (memoised per save)."""
        if id(save) not in self._checkpoints:
            self._checkpoints[id(save)] = self._contents(save)
        return self._checkpoints[id(save)]

    def _contents(self, save: Event) -> Optional[Checkpoint]:
        if save.via is not None:
            found = _saved_through(self.model, save)
        elif not isinstance(save.node, cst.Call):
            return None
        elif self.model.roles.qualified(save.node.func, save.site.scope) == "torch.save" and save.node.args:
            found = stored_contents(self.model, save, save.node.args[0].value)
        else:
            stored = _handed_to_own_save(self.model, save)
            found = stored_contents(self.model, save, stored) if stored is not None else None
        if found is None:
            return None
        scope = save.site.scope
        counters = self.model.counters.resume_keys()
        for value in found.entries.values():
            for sub in walk_expressions(value):
                if isinstance(sub, (cst.Name, cst.Attribute, cst.Subscript)):
                    key = self.model.roles.key(sub, scope)
                    role = self.model.roles.roles.get(key or "")
                    kind = role.kind if role else (SCALER if key in self.held_scalers else "counter" if key in counters else
                                                   "position" if key in self.inner_positions else None)
                    kind = SCALER if kind in SCALE_HOLDERS else kind
                    if kind in (OPTIMIZER, SCHEDULER, SCALER, "counter", "position"):
                        found.holds.setdefault(kind, []).append(key)  # type: ignore[arg-type]
                    elif kind is None and isinstance(sub, cst.Name):
                        # a parameter: the counter its callers pass (`self.save(self.epoch + 1)`), or the scaler
                        # (`def save_checkpoint(..., amp, ...)` given apex's `amp` module: `amp.state_dict()`)
                        passed = self._passed_for(scope, sub.value)
                        found.holds.setdefault("counter", []).extend(sorted(passed & counters))
                        found.holds.setdefault(SCALER, []).extend(sorted(passed & set(self.held_scalers)))
        # an object stored whole, or by its own `state_dict()`, stores the counters it holds (`self.stats.steps`);
        # an optimizer stored whole (pickled) keeps the position of a schedule it keeps inside, too
        for value in found.entries.values():
            owner = value.func.value if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "state_dict" and not value.args else value
            key = self.model.roles.key(owner, scope) if isinstance(owner, (cst.Name, cst.Attribute)) else None
            if key:
                found.holds.setdefault("counter", []).extend(sorted(c for c in counters if c.startswith(key + ".")))
            if key and owner is value:
                found.holds.setdefault("position", []).extend(sorted(p for p in self.inner_positions if self.optimizer_of_position(p) == key))
        # a counter in the checkpoint's file name is stored there (`ckpt-{step}`): a resume reads it back from the name
        found.holds.setdefault("counter", []).extend(sorted(self.named_after(save) & counters))
        found.holds["counter"].extend(sorted(self.written_beside(save) & counters))
        return found

    def written_beside(self, save: Event) -> Set[str]:
        """Keys a file the save's function writes into the checkpoint's folder stores (`step_file =
        join(last_dir, "step_file.txt")`, then `f.write(str(global_step))` in `with open(step_file, "w") as f:`,
        beside `torch.save(..., join(last_dir, "optimizer.pt"))`): a resume may read them back from there."""
        scope = save.site.scope
        folders = _folders(self.path_expressions(save))
        found: Set[str] = set()
        for path, written, site in _text_files_written(self.model).get(id(scope), ()):
            if not self.model.passes.exclusive(site, save.site) and folders & _folders(_spelled(self.model, path, scope, site.order)):
                found |= self.model.keys_in(written, scope)
        return found

    def named_after(self, save: Event) -> Set[str]:
        """Keys the path a save writes to reads: in the path itself (`f"opt{step:06d}.pt"`), or in what
        the names in it were set to (`folder = join(out, "ckpt-%d" % step)`, then `join(folder, "optim.pt")`);
        through a helper that names the file after what it is handed (`save_network(net, opt, step, dir)`
        writing `f"save_step_{step}.pth"`), what the caller hands it."""
        scope = save.site.scope
        keys = {key for path in self.path_expressions(save) for key in self.model.keys_in(path, scope)}
        context = self.model.roles.project
        callee = context.callee(save.node, scope) if save.via is not None and save.via.named_by and context is not None else None
        for where in save.via.named_by if callee is not None else ():
            handed = context.argument(callee, where, save.node, scope)
            keys |= self.model.keys_in(handed, scope) if handed is not None else set()
        return keys

    def path_expressions(self, save: Event) -> List[cst.BaseExpression]:
        """The expressions the path of a save is made of (see named_after)."""
        call, scope = save.node, save.site.scope
        if not isinstance(call, cst.Call):
            return []

        def spelled(expr: cst.BaseExpression) -> List[cst.BaseExpression]:
            return _spelled(self.model, expr, scope, save.order)

        if save.via is None:
            path = argument_for(call, 1, "f")
            paths = spelled(path) if path is not None else []
        else:  # through a helper: the text it is handed beside the objects (`save(model, opt, f"ckpt-{step}")`)
            handed = [spelled(a.value) for a in call.args]
            paths = [e for each in handed if any(isinstance(s, (cst.SimpleString, cst.FormattedString)) for e in each for s in walk_expressions(e)) for e in each]
        return paths

    @cached_property
    def _calls_by_name(self) -> Dict[str, List[tuple]]:
        """The module's calls by the last name of their callee (`save` of `self.save(...)`), once."""
        found: Dict[str, List[tuple]] = {}
        for call, site in self.model.structure.calls:
            name = call.func.attr.value if isinstance(call.func, cst.Attribute) else call.func.value if isinstance(call.func, cst.Name) else None
            if name is not None:
                found.setdefault(name, []).append((call, site))
        return found

    def _passed_for(self, scope: "Scope", parameter: str) -> Set[str]:
        """Keys read by what every call of a function of this module passes for one of its parameters:
        the same counter through each caller's argument (`def save(self, epoch)` called as
        `self.save(self.epoch + 1)`). Empty when it is no parameter, or some call passes no counter."""
        params = [p.name.value for p in scope.params]
        if parameter not in params or scope.parent is not None:
            return set()
        method, name = scope.class_name is not None, scope.name.rsplit(".", 1)[-1]
        position = params.index(parameter) - (1 if scope.self_name else 0)
        if position < 0:
            return set()  # `self` itself: no argument passes it
        passed: List[Set[str]] = []
        for call, site in self._calls_by_name.get(name, ()):
            func = call.func
            if method and isinstance(func, cst.Attribute) and dotted(func.value) == "self" and site.scope.class_name == scope.class_name:
                pass
            elif not method and isinstance(func, cst.Name):
                pass
            else:
                continue
            argument = argument_for(call, position, parameter) if not any(a.star for a in call.args) else None
            passed.append(set(self.model.keys_in(argument, site.scope)) if argument is not None else set())
        return set.intersection(*passed) if passed else set()

    @cached_property
    def held_scalers(self) -> Dict[str, str]:
        """Loss scalers the run holds without naming them -> what they are, for a message.
        - The GradScaler an Accelerator in fp16 holds (`accelerator.scaler`), for the Accelerators whose
          prepared optimizers the module steps. A checkpoint written by hand (not `save_state`) must store
          it all the same. fp16 shows as `mixed_precision="fp16"`, or as the default of the module's
          argument parser for the option it is given (`--mixed-precision`, `default="fp16"`); an
          Accelerator whose precision the code does not show (`Accelerator(**kwargs)`) holds none.
        - apex amp's loss scaler, kept in the `amp` module (`amp.state_dict()`), where the module's steps
          go through `amp.scale_loss` and no `amp.initialize` of the module sets a static scale."""
        found: Dict[str, str] = {}
        for step in self.model.of_kind(SKIPPABLE_STEP):
            role = step.role
            if step.strategy == "apex":
                key = self._apex_amp_key(step.site.scope)
                if key:
                    found[key] = "apex amp's dynamic loss scaler: `amp.state_dict()`"
                continue
            if step.strategy != "accelerate" or role is None or not role.accelerator:
                continue
            if role.mixed_precision == "fp16":
                how = "the fp16 Accelerator"
            elif role.mixed_precision == PRECISION_FROM_EXPRESSION and (told := self._fp16_from_the_command_line(self._precision_given(role.accelerator, step.site.scope), step.site.scope)):
                how = f"the Accelerator, fp16 {told}"
            else:
                continue
            key = self.model.roles.key(cst.parse_expression(f"{role.accelerator}.scaler"), step.site.scope)
            if key:
                found[key] = f"the GradScaler of {how}"
        return found

    def _fp16_from_the_command_line(self, given: Optional[cst.BaseExpression], scope: "Scope") -> Optional[str]:
        """How the precision option an Accelerator is handed is fp16 in the runs the project shows (`--mixed-precision`
        defaulting to "fp16", or given it by every launch line; a README's `--mixed-precision="bf16"` is not): None if not."""
        if given is None:
            return None
        as_run, option = self.model.roles.command_line.value_as_run(given, scope)
        if as_run is not ...:
            return ("by the command line's default" if self.model.roles.command_line.declared.get(option.lstrip("-").replace("-", "_")) == "fp16"
                    else "as every launch gives it") if as_run == "fp16" else None
        return "by the command line's default" if command_line_default(self.model, given) == "fp16" else None

    def _apex_amp_key(self, scope: "Scope") -> Optional[str]:
        """The key of the name bound to `apex.amp`, unless an `amp.initialize` sets a static loss scale
        (`loss_scale=128.0`) or an fp32 level (`opt_level="O0"`), or every one is disabled as run."""
        if self.model.roles.apex_disabled is not None:
            return None
        for call, site in self.model.structure.calls:
            if self.model.roles.qualified(call.func, site.scope) == "apex.amp.initialize":
                scale, level = keyword(call, "loss_scale"), literal(keyword(call, "opt_level"))
                if scale is not None and literal(scale) != "dynamic" or level == "O0":
                    return None
        name = module_binding(self.model.imports.names, APEX_AMP, scope)
        return self.model.roles.key(cst.parse_expression(name), scope) if name else None

    def _precision_given(self, accelerator: str, scope: "Scope") -> Optional[cst.BaseExpression]:
        """The `mixed_precision=` expression of the Accelerator constructor assigned to `accelerator`."""
        key = self.model.roles.key(cst.parse_expression(accelerator), scope)
        for node, site in self.model.statements_in(scope, key) if key else ():
            if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and self.model.roles.qualified(node.value.func, site.scope) in ACCELERATOR_CLASSES:
                if any(self.model.roles.key(t.target, site.scope) == key for t in node.targets):
                    return keyword(node.value, "mixed_precision")
        return None

    def started_over(self, load: Event) -> bool:
        """A restore whose position is then set back to the run's start, under a test of what chose the
        checkpoint (`_, _, _, epoch_str = load_checkpoint(ckpt_g, net_g, optim_g)` under `if ckpt_g is not
        None:`, then `if ckpt_g is not None or ckpt_d is not None: epoch_str = 1`): a pretrained model the
        run starts from, with its schedule and scaler fresh by design, not a resume."""
        statement, scope = self.model.structure.holder.get(id(load.node)), load.site.scope
        if not isinstance(statement, cst.Assign):
            return False
        read_back = {t.value for t in assignment_targets(statement) if isinstance(t, cst.Name) and t.value != "_"}
        written = self.model.text.of
        chosen_by = {written(guard.test) for guard in load.site.guards if not guard.negated and not guard.early_exit}
        if not read_back or not chosen_by:
            return False
        # (a branch the load's own tests rule out, `else:` of `if load_step and load_optimizer:`, is another path: a warm start beside the resume)
        ruled_out = {(id(guard.test), not guard.negated) for guard in load.site.guards if not guard.early_exit}
        for node, site in self.model.statements_of(scope):
            if site.order <= load.order or not isinstance(node, cst.Assign) or len(node.targets) != 1:
                continue
            if any((id(guard.test), guard.negated) in ruled_out for guard in site.guards):
                continue
            target, value = node.targets[0].target, literal(node.value)
            if isinstance(target, cst.Name) and target.value in read_back and isinstance(value, int) and not isinstance(value, bool):
                # (under a test the load's own test makes true: the same test, or one of its disjuncts)
                tests = {written(part) for guard in site.guards if not guard.negated for part in disjuncts(guard.test)}
                if tests & chosen_by:
                    return True
        return False

    def warm_start(self, load: Event) -> bool:
        """An optimizer load that puts back the learning rates read before it (`lrs = [g["lr"] for g in
        opt.param_groups]`, load, then `g["lr"] = lr` for each group): the run starts from another
        run's optimizer state with its own schedule, it does not resume; its scaler starts fresh."""
        scope = load.site.scope
        kept = set()  # names holding what the param groups held before the load
        for node, site in self.model.statements_of(scope):
            if site.order >= load.order:
                break
            if isinstance(node, cst.Assign) and any(isinstance(sub, cst.Attribute) and sub.attr.value == "param_groups" for sub in walk_expressions(node.value)):
                kept.update(self.model.roles.key(t.target, scope) for t in node.targets)
        kept.discard(None)
        if not kept:
            return False
        for node, site in self.model.statements_of(scope):
            if site.order <= load.order or not (isinstance(node, cst.Assign) and any(_is_lr_entry(t.target) for t in node.targets)):
                continue
            read = set(self.model.keys_in(node.value, scope))
            for loop in site.loops:
                read |= self.model.keys_in(loop.iter, scope) if isinstance(loop, cst.For) else set()
            if not kept.isdisjoint(read):
                return True
        return False

    def describe_held(self, key: str) -> str:
        """A step state's name for a message: `scheduler`, or `accelerator.scaler` (the GradScaler ...), or
        `optimizer.step_num` (the position of the schedule `NoamOpt` keeps inside ...)."""
        name = f"`{key.split(':', 1)[1]}`"
        inner = self.inner_positions.get(key)
        if inner is not None:
            return name + f" (the position of the schedule `{inner.class_name}` ({inner.where}) keeps inside, which its `state_dict()` leaves out)"
        return name + f" ({self.held_scalers[key]})" if key in self.held_scalers else name

    @cached_property
    def inner_positions(self) -> Dict[str, InnerSchedule]:
        """The position key of each schedule an optimizer keeps inside (`main:optimizer.step_num`) -> that schedule."""
        return {f"{key}.{inner.counter}": inner for key, inner in inner_schedules(self.model).items()}

    def optimizer_of_position(self, key: str) -> str:
        """The optimizer key of a position key (`main:optimizer` of `main:optimizer.step_num`)."""
        return key[: -len(self.inner_positions[key].counter) - 1]

    @cached_property
    def saved_under(self) -> Dict[str, str]:
        """Role key -> the checkpoint key it is saved under, over every visible checkpoint of the module."""
        saved: Dict[str, str] = {}
        for save in self.model.of_kind(CHECKPOINT_SAVE):
            checkpoint = self.checkpoint(save)
            for name, value in (checkpoint.entries if checkpoint else {}).items():
                for sub in walk_expressions(value):
                    if isinstance(sub, (cst.Name, cst.Attribute)):
                        key = self.model.roles.key(sub, save.site.scope)
                        if key:
                            saved.setdefault(key, name)
        return saved

    @cached_property
    def restored_from_checkpoint(self) -> set:
        """Names assigned from a checkpoint read: `step = ckpt["step"]`, `ckpt.get("step", 0)`, each name
        of an unpacking (`epoch, step = ckpt["epoch"], ckpt["step"]`), or what a call that restores the
        optimizer returns (`model, opt, step = checkpointer.load(model, opt, step)`), also as a branch of
        the value."""
        found = set()
        restoring = {id(e.node) for e in self.model.of_kind(STATE_LOAD) if e.via is not None}
        # a resume helper of the project that sets the caller's attributes (`self.epoch = state["epoch"]`)
        context = self.model.roles.project
        for call, site in self.model.structure.calls if context is not None else ():
            callee = context.callee(call, site.scope)
            for effect in callee.effects if callee is not None else ():
                if effect.action == LOAD and effect.role is None and effect.place.startswith("self."):
                    target = context.argument(callee, effect.place, call, site.scope)
                    found.add(self.model.roles.key(target, site.scope) if target is not None else None)
        assignments = [(node, site) for node, site in self.model.structure.statements if type(node) is cst.Assign]  # (type tests: see steplint.model.syntax.dotted)
        for _ in range(3):  # (through temporaries, in any order of the methods: `epoch = self.start_epoch` above the `resume_training` that sets it)
            before = len(found)
            for node, site in assignments:
                reads = reads_an_entry(node.value) or any(id(s) in restoring for s in walk_expressions(node.value))  # (`step = ckpt.load(...) if resume else 0`)
                if reads or not found.isdisjoint(self.model.keys_in(node.value, site.scope)):  # or through a temporary
                    found.update(self.model.roles.key(target, site.scope) for target in assignment_targets(node))
            if len(found) == before:
                break
        found.discard(None)
        return found

    @cached_property
    def resumes_here(self) -> bool:
        """The module can resume a run, so that what its checkpoints leave out is lost there: it restores
        an optimizer's state (`optimizer.load_state_dict(...)`, also through a helper of the project it
        calls), or resumes through a framework (`accelerator.load_state(...)`, an engine's or a
        checkpointer's `load_checkpoint(...)`, `resume_or_load(...)`, `resume_from_checkpoint=`), or puts
        the run back at a stored position without the optimizer (weights and an epoch read back)."""
        return self._restores_the_run or bool(self.position_resumes)

    @cached_property
    def _restores_the_run(self) -> bool:
        """The module restores an optimizer's state or resumes through a framework (see resumes_here)."""
        if any(e.role is not None and e.role.kind == OPTIMIZER for e in self.model.of_kind(STATE_LOAD)):
            return True
        project = self.model.roles.project
        if project is not None and any(_loads_an_optimizer(effect) for callee in project.calls.values() for effect in callee.effects):
            return True  # (a call that resumes inside: `trainer.build()` building its own optimizer and loading it)
        for call, _ in self.model.structure.calls:
            name = last_name(call.func)
            if name in ("load_state", "load_checkpoint", "resume_or_load", "resume", "load_from_checkpoint"):
                return True
            if name == "load_state_dict" and isinstance(call.func, cst.Attribute) and optimizer_named(dotted(call.func.value) or ""):
                return True  # (what is named an optimizer: leaving a save reported is the safe side here)
            if any(a.keyword is not None and a.keyword.value in ("resume_from_checkpoint", "ckpt_path") for a in call.args):
                return True
        return False

    @cached_property
    def fresh_scalers(self) -> List[tuple]:
        """(function scope, key) of each loss scaler a function builds for its own steps, keeps to itself
        and never restores: a local shown to be a scaler by its class or its use, scaling as run, whose name
        is only ever the receiver of its own methods or handed to functions of the project (whose loads
        would show). A run that resumes and then calls the function starts its loss scale over."""
        found = []
        # (shown a loss scaler by its class, or by the protocol only one follows: `scaler.scale(loss).backward()`)
        scaling = {self.model.roles.key(e.subject, e.site.scope) for e in self.model.of_kind(SCALED_BACKWARD) if e.via is None}
        # (from the roles, not the step state: a function that hands its scaler to others of its module steps it through
        # them, which its summary, made before the project is known, cannot show)
        stepped = {key for entries in _step_state_by_owner(self.model).values() for _, kind, key in entries if kind == "scaler"}
        for key in sorted(stepped | self._handed_on_scalers):
            role = self.model.roles.roles.get(key)
            if role is None or role.kind not in SCALE_HOLDERS or role.evidence < CONSTRUCTOR and key not in scaling or role.enabled is False or role.off_as_run or self.loaded(key):
                continue
            owner, _, name = key.partition(":")
            if owner.startswith("class ") and name.startswith("self.") and "." not in name[len("self."):]:
                # (an instance's own scaler, built in `__init__`: constructing the class builds it afresh)
                init = _built_in_init(self.model, owner[len("class "):], name[len("self."):])
                if init is not None and _attribute_kept_to_itself(self.model, owner[len("class "):], name[len("self."):]):
                    found.append((init, key))
                continue
            scope = next((s for s in self.model.structure.scopes if s.name == owner and s.parent is None), None)
            if scope is None or "." in name or name not in scope.local_names or name in {p.name.value for p in scope.params}:
                continue
            # (a function that builds its own optimizer too is a stage of its own, `finetune()` after pretraining:
            # what it steps starts over with it by design, and no resume of its caller restores any of it)
            if _kept_to_itself(self.model, scope, name) and not self.optimizers_built_in(scope):
                found.append((scope, key))
        return found

    @cached_property
    def _handed_on_scalers(self) -> Set[str]:
        """Keys of the scalers (shown by their class) a function hands, where it may run, to a function of
        its own module: it steps them through it."""
        local = {s.name for s in self.model.structure.scopes if s.parent is None and s.class_name is None}
        found = set()
        for call, site in self.model.structure.calls:
            if isinstance(call.func, cst.Name) and call.func.value in local and self.model.roles.command_line.never_runs(site) is None:
                for argument in call.args:
                    key = self.model.roles.key(argument.value, site.scope) if isinstance(argument.value, cst.Name) else None
                    role = self.model.roles.roles.get(key or "")
                    if role is not None and role.kind in SCALE_HOLDERS and role.evidence >= CONSTRUCTOR:
                        found.add(key)
        return found

    def restarted_by_callees(self, load: Event) -> List[Event]:
        """The calls after a restore, in its function, of project functions that build a loss scaler
        afresh (fresh_scalers in the callee's module): one per such scaler. Not a call in a loop the
        restore is not in (`train_one_epoch()` each epoch): that scaler starts over on every pass by
        design, and a resume could not carry its state."""
        found, seen = [], set()
        for event in self.model.events_in(load.site.scope, HELPER_STATE):
            effect = event.via
            per_pass = any(loop not in load.site.loops for loop in event.site.loops)
            if getattr(effect, "action", None) == FRESH_SCALER and event.order > load.order and not per_pass and (effect.via, effect.other) not in seen:
                seen.add((effect.via, effect.other))
                found.append(event)
        return found

    def optimizers_built_in(self, scope: "Scope") -> List[str]:
        """Keys of the optimizers a function builds (shown by their class): what a resume must restore."""
        return [key for key, role in self.model.roles.roles.items()
                if role.kind == OPTIMIZER and role.evidence >= CONSTRUCTOR and key.split(":", 1)[0] == scope.name]

    def saved_object(self, save: Event) -> Optional[cst.BaseExpression]:
        """What the caller hands a helper that saves it as its own file (`torch.save(obj.state_dict(), path)`
        inside `save_part(obj, ...)`): the argument of that parameter at the call; None for other saves."""
        context, effect = self.model.roles.project, save.via
        if effect is None or not effect.stored_state or context is None:
            return None
        callee = context.callee(save.node, save.site.scope)
        return context.argument(callee, effect.stored_state, save.node, save.site.scope) if callee is not None else None

    def naming_arguments(self, save: Event) -> Optional[Set[int]]:
        """Ids of the nodes of the arguments a save through a helper names its file with or stores
        (`save(global_step, step)` writing `gs{global_step}.pkl` and logging `step`: `global_step`'s);
        None for a save of this module's own."""
        effect, context = save.via, self.model.roles.project
        callee = context.callee(save.node, save.site.scope) if effect is not None and context is not None else None
        if callee is None:
            return None
        found: Set[int] = set()
        for place in set(effect.named_by) | {place for place, _ in effect.contents.values() if place}:
            argument = context.argument(callee, place, save.node, save.site.scope)
            found |= {id(sub) for sub in walk_expressions(argument)} if argument is not None else set()
        return found

    def _read_from_a_checkpoint(self, expr: cst.BaseExpression, scope: "Scope") -> bool:
        """`expr` reads an entry of what `torch.load` returned, directly or through a name of `scope` set
        from one (`init_step = optim_sd["iter"] - optim_sd["skipped_iter"]`, then `last_iter=init_step`)."""
        def entry_of_a_load(value: cst.BaseExpression) -> bool:
            for sub in walk_expressions(value):
                base = sub.value if type(sub) is cst.Subscript else sub.func.value if type(sub) is cst.Call and type(sub.func) is cst.Attribute and sub.func.attr.value in _ENTRY_READS else None
                if isinstance(base, cst.Name) and self.model.roles.key(base, scope) in self._loaded_results:
                    return True
            return False
        if entry_of_a_load(expr):
            return True
        names = {sub for sub in walk_expressions(expr) if isinstance(sub, cst.Name)}
        if any(self.model.roles.key(name, scope) in self._unpacked_from_restores for name in names):
            return True  # (`best, last_epoch = load_state(path, model, optimizer=optimizer)`, then `start_epoch=last_epoch`)
        if any(entry_of_a_load(value) for name in names for value in self.model.roles.command_line.assigned(scope, name.value) if value is not None):
            return True
        # (an attribute the method sets from one: `self.start_step = state["train_infos"]["step"]`, then `last_epoch=self.start_step - 1`)
        attributes = {sub.attr.value for sub in walk_expressions(expr)
                      if isinstance(sub, cst.Attribute) and isinstance(sub.value, cst.Name) and sub.value.value == scope.self_name}
        return any(entry_of_a_load(value) for attribute in attributes for value, owner, receiver in self.model.roles.command_line.written_values.get(attribute, ())
                   if owner is scope and receiver == scope.self_name and value is not None)

    @cached_property
    def _unpacked_from_restores(self) -> Set[str]:
        """Keys of the names a statement unpacks from a call of the project that restores state into what it is
        handed: what it returns besides comes from the checkpoint (an epoch, a step)."""
        context, found = self.model.roles.project, set()
        for node, site in self.model.structure.statements if context is not None else ():
            value = node.value if type(node) is cst.Assign else None
            callee = context.callee(value, site.scope) if isinstance(value, cst.Call) else None
            if callee is not None and any(e.action == LOAD for e in callee.effects) and any(isinstance(t.target, cst.Tuple) for t in node.targets):
                found.update(k for t in assignment_targets(node) if isinstance(t, cst.Name) and (k := self.model.roles.key(t, site.scope)))
        return found

    @cached_property
    def _loaded_results(self) -> Set[str]:
        """Keys of the names set from `torch.load(...)`."""
        found = set()
        for node, site in self.model.structure.statements:
            if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and self.model.roles.qualified(node.value.func, site.scope) == "torch.load":
                found.update(k for t in assignment_targets(node) if (k := self.model.roles.key(t, site.scope)))
        return found

    @cached_property
    def accelerate_states(self) -> Dict[str, List[Tuple[cst.Call, "Site"]]]:
        """The `load_state(...)` and `save_state(...)` calls of the module's Accelerators, by method."""
        found: Dict[str, List[Tuple[cst.Call, "Site"]]] = {"load_state": [], "save_state": []}
        for call, site in self.model.structure.calls:
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in found and self.model.roles.is_(call.func.value, site.scope, ACCELERATOR):
                found[call.func.attr.value].append((call, site))
        return found

    @cached_property
    def registers_for_checkpointing(self) -> bool:
        """An object of the module's own is registered with accelerate (`register_for_checkpointing`): its
        states carry what that object holds, counters and schedules included."""
        return any(last_name(call.func) == "register_for_checkpointing" for call, _ in self.model.structure.calls)

    def left_out_of_saved_state(self, site: "Site") -> List[str]:
        """The schedulers the function of an `accelerator.save_state(...)` at `site` steps (ones that move) that the
        state it writes leaves out: never handed to `prepare`, nor registered, nor stored in a checkpoint of the
        module, nor restored or positioned by hand. (What accelerate saves: what `prepare` was given and what is
        registered for checkpointing.)"""
        if self.registers_for_checkpointing:
            return []
        held = self._held_by_checkpoints
        steps = {self.model.roles.key(e.subject, e.site.scope): e for e in self.model.of_kind(SCHEDULER_STEP) if e.site.scope is site.scope and e.subject is not None}
        return sorted(key for key, step in steps.items() if key and step.role is not None and step.role.kind == SCHEDULER and not (
            step.role.prepared or step.role.engine_owned or step.role.metric or step.explicit_position) and key not in held
            and not self.loaded(key) and key not in self.positioned_on_resume and not never_moves(self.model, step))

    @cached_property
    def _held_by_checkpoints(self) -> Set[str]:
        return {key for save in self.model.of_kind(CHECKPOINT_SAVE) if (checkpoint := self.checkpoint(save)) is not None
                for keys in checkpoint.holds.values() for key in keys}

    @cached_property
    def framework_resumes(self) -> List[Tuple[cst.Call, "Site", List[str]]]:
        """(call, site, counters) for each `accelerator.load_state(...)`: it restores every prepared object
        (optimizer, scheduler, scaler) and no counter of the loop. The update counters of its function that
        nothing sets after it (from the checkpoint's name, `completed_steps = resume_step // accum`, or a
        file) restart at their initial value. None where an object of the module's own is registered for
        checkpointing (it may carry the counters)."""
        calls = self.accelerate_states["load_state"]
        if not calls or self.registers_for_checkpointing:
            return []
        # (a module that writes its states only under tests no launch passes, `if args.checkpointing_steps == "epoch":`
        # with no launch giving it, writes none: no run leaves a state of it to resume from)
        saves = self.accelerate_states["save_state"]
        if saves and all(self.model.roles.command_line.never_runs(site) is not None for _, site in saves):
            return []
        found = []
        for call, site in calls:
            advanced = {self.model.roles.key(e.subject, e.site.scope) for e in self.model.events_in(site.scope, COUNTER_INCREMENT)}
            restarted = [key for key in self.step_state(site.scope)["counter"]
                         if key in advanced and not self._assigned_after(site, key) and not self._set_with_the_path(call, site, key)]
            if restarted:
                found.append((call, site, restarted))
        return found

    def _assigned_after(self, site: "Site", key: str) -> bool:
        """A plain assignment of `key` after `site` in its function (not its increments)."""
        return any(other.order > site.order and other.scope is site.scope and isinstance(node, (cst.Assign, cst.AnnAssign))
                   and any(self.model.roles.key(t, other.scope) == key for t in assignment_targets(node))
                   for node, other in self.model.statements_in(site.scope, key))

    def _set_with_the_path(self, call: cst.Call, site: "Site", key: str) -> bool:
        """`path, global_step, first_epoch = latest_checkpoint(...)` before `load_state(path)`: the counter
        comes back from the same statement as the checkpoint the resume loads."""
        handed = {k for arg in call.args for k in self.model.keys_in(arg.value, site.scope)}
        for node, other in self.model.statements_in(site.scope, key):
            if other.scope is site.scope and other.order < site.order and type(node) is cst.Assign:
                targets = {self.model.roles.key(t, other.scope) for t in assignment_targets(node)}
                if key in targets and targets & handed:
                    return True
        return False

    @cached_property
    def position_resumes(self) -> List["PositionResume"]:
        """Resumes that put the run back at a stored position without restoring any optimizer: a name read
        from a checkpoint (`ckpt = torch.load(...)`, then `start = ckpt["epoch"]`; or unpacked from a call of
        the project that loads state into what it is handed, `_, _, _, epoch = load_checkpoint(path, net,
        None)`), not set again after it in its block or an enclosing one, that starts a loop of the
        function (`range(epoch, ...)`) or is a counter the function advances. One per resume statement."""
        found: List[PositionResume] = []
        restoring = {id(e.site.scope) for e in self.model.of_kind(STATE_LOAD) if e.role is not None and e.role.kind == OPTIMIZER}
        # (and a restore under a flag or key no run turns on, whose event is dropped: that resume restores the optimizer too)
        restoring |= {id(site.scope) for call, site in self.model.structure.calls if isinstance(call.func, cst.Attribute)
                      and call.func.attr.value == "load_state_dict" and self.model.roles.is_(call.func.value, site.scope, OPTIMIZER)}
        # (and a framework's resume, which puts back every object it prepared: `accelerator.load_state(path)`)
        # (or an object the model cannot tell, whose `load_state(path)` may put back as much: a vendored copy of accelerate's
        # Accelerator, `from pasd.accelerate import Accelerator`)
        restoring |= {id(site.scope) for _, site in self.accelerate_states["load_state"]}
        restoring |= {id(site.scope) for call, site in self.model.structure.calls if isinstance(call.func, cst.Attribute)
                      and call.func.attr.value == "load_state" and self.model.roles.of(call.func.value, site.scope) is None}
        for node, site, position in _position_reads(self.model):
            if id(site.scope) in restoring or any(r.site.scope is site.scope and r.site.trail[0] == site.trail[0] for r in found):
                continue
            if _set_again_after(self.model, site, position) or not _positions_the_run(self.model, site.scope, position):
                continue
            found.append(PositionResume(node, site, position, frozenset(k for t in assignment_targets(node) if (k := self.model.roles.key(t, site.scope))) - {position}))
        return found

    @cached_property
    def restores_lost_to_a_loop(self) -> List[Tuple[cst.Assign, "Site", cst.For]]:
        """A counter read back from the checkpoint (`step = checkpoint["step"]`) by a function that restores an
        optimizer or a scheduler, which a `for` loop then binds anew (`for step in range(max_steps)`) before
        anything reads it: the resumed run counts from the loop's start again while what was restored goes on."""
        resuming = {id(e.site.scope) for e in self.model.of_kind(STATE_LOAD)
                    if e.role is not None and e.role.kind in (OPTIMIZER, SCHEDULER) and not self.started_over(e)}
        found = []
        for node, site in self.model.structure.statements:
            if type(node) is not cst.Assign or id(site.scope) not in resuming or not reads_an_entry(node.value):
                continue
            names = [t.value for t in assignment_targets(node) if isinstance(t, cst.Name)]
            blocks = [block for block, _ in site.trail]
            for name in names:
                loop = next((loop for loop, s in self.model.structure.for_loops if s.scope is site.scope and s.order > site.order
                             and isinstance(loop.target, cst.Name) and loop.target.value == name), None)
                if loop is None:
                    continue
                at = self.model.structure.site_of[id(loop.target)]
                # (a loop that starts at another name read back, `range(args.start_epoch, ...)`, goes on from the checkpoint)
                if (any(b is at.trail[-1][0] for b in blocks) and not reads_name(loop.iter, name)
                        and not self.model.keys_in(loop.iter, at.scope) & self.restored_from_checkpoint
                        and not self._read_between(site, at, name) and self._read_in(loop, at.scope, name)):
                    found.append((node, site, loop))
        return found

    def _read_between(self, first: "Site", last: "Site", name: str) -> bool:
        """`name` read by a statement of the scope that runs after `first`, before `last` (not counting
        assignments to it that read nothing of it)."""
        loop_targets = {id(loop.target) for loop, _ in self.model.structure.for_loops}
        for node, site in self.model.statements_of(first.scope):
            if first.order < site.order < last.order and id(node) not in loop_targets:
                if reads_name(node.value if type(node) is cst.Assign else node, name):
                    return True
        return False

    def _read_in(self, loop: cst.For, scope: "Scope", name: str) -> bool:
        return any(s.scope is scope and any(l is loop for l in s.loops) and reads_name(node, name) for node, s in self.model.statements_of(scope))

    @cached_property
    def position_entries(self) -> Set[str]:
        """The entries of a checkpoint that a position resume reads back (`start_epoch = checkpoint["epoch"]`):
        a checkpoint that stores one is the one the run resumes from, optimizer or not."""
        return {text for resume in self.position_resumes if isinstance(resume.node, cst.Assign)
                for sub in walk_expressions(resume.node.value) if isinstance(sub, cst.Subscript)
                for element in sub.slice if isinstance(element.slice, cst.Index) and isinstance(text := literal(element.slice.value), str)}

    def read_back(self, checkpoint: Checkpoint) -> bool:
        """Whether a resume of the run can read the checkpoint back. Where the run's only resumes put it back
        at a position each reads by its entry (`global_step = ckpt["global_step"]`), restoring no optimizer,
        with no caller of the module resuming, a checkpoint that holds none of those entries is none they
        read (reading it, they would fail): a final export `{"epoch", "state_dict", "optimizer"}` beside a
        resume of `ckpt["global_step"]`."""
        project = self.model.roles.project
        if self._restores_the_run or (project is not None and project.resumed_by_a_caller) or not self.position_resumes:
            return True
        if not all(isinstance(r.node, cst.Assign) and _entry_read(r.node.value) is not None for r in self.position_resumes):
            return True
        return not self.position_entries.isdisjoint(checkpoint.entries)

    @property
    def resumable(self) -> bool:
        """A run can resume from this module's checkpoints: the module resumes, or a module that calls
        its functions does (`main.py` resuming what `train.py` saves)."""
        project = self.model.roles.project
        return self.resumes_here or (project is not None and project.resumed_by_a_caller)

    def loaded(self, key: str) -> bool:
        """Whether the module restores the object `key` holds: its own `load_state_dict`, one of an
        object it wraps (`self.sched.inner.load_state_dict(...)` restores `self.sched`), or one of
        another name for the same object (`distr_scheduler = scheduler`)."""
        return any(k in self._loaded_keys or k in self._loaded_wrappers for k in self._same_object.get(key, {key}))

    def same_snapshot(self, parts: List[tuple], site, optimizers: List[Optional[str]]) -> bool:
        """Whether a save or restore of `optimizers` at `site` is one more part of the snapshot `parts`
        ((site, optimizer keys) each): in the same function, of other optimizers than each part (a GAN's
        `G.pth` and `D.pth`), and never in another branch than one. Another copy of the same optimizer
        (`best.pth` beside `last.pth`, a second resume block) is another snapshot."""
        if any(o is None for o in optimizers):
            return False
        mine = {name for o in optimizers for name in self._same_object.get(o, {o})}
        for other_site, others in parts:
            if other_site.scope is not site.scope or any(o is None for o in others) or self.model.passes.exclusive(other_site, site):
                return False
            if mine & {name for o in others for name in self._same_object.get(o, {o})}:
                return False
        return True

    def moves_with(self, key: str, optimizers: List[Optional[str]]) -> bool:
        """Whether the step state `key` moves with one of `optimizers` (role keys; None: unknown): a scaler
        whose `step()` steps one of them, a scheduler built on one. True where the code does not show
        which (a scaler stepped only through helpers, a scheduler whose constructor names no optimizer):
        a classifier's resume in a GAN trainer's class owes nothing to the GAN's scaler."""
        names: Set[str] = set()
        for optimizer in optimizers:
            if optimizer is None:
                return True
            names |= self._same_object.get(optimizer, {optimizer})
        if not names:
            return True
        if key in self._optimizers_of_scalers:
            stepped = self._optimizers_of_scalers[key]
            return stepped is None or bool(stepped & names)
        role = self.model.roles.roles.get(key)
        if role is not None and role.kind == SCHEDULER and role.optimizer is not None:
            return bool(self._same_object.get(role.optimizer, {role.optimizer}) & names)
        return True

    @cached_property
    def _optimizers_of_scalers(self) -> Dict[str, Optional[Set[str]]]:
        """Scaler key -> the optimizers (keys, with their other names) its `step()` steps in this module;
        None when one of them has no key (`scaler.step(self.optimizers()[0])`)."""
        found: Dict[str, Optional[Set[str]]] = {}
        for event in self.model.of_kind(SKIPPABLE_STEP, OPTIMIZER_STEP):
            if event.strategy != SCALER or event.subject is None or event.via is not None:
                continue
            scaler = self.model.roles.key(event.subject, event.site.scope)
            if scaler is None:
                continue
            stepped = self.model.roles.key(event.optimizer, event.site.scope) if event.optimizer is not None else None
            if stepped is None or found.get(scaler, set()) is None:
                found[scaler] = None
            else:
                found.setdefault(scaler, set()).update(self._same_object.get(stepped, {stepped}))
        return found

    @cached_property
    def _same_object(self) -> Dict[str, Set[str]]:
        """Key -> the keys holding the same object: a name assigned once, from another plain name
        assigned at most once (`distr_scheduler = scheduler`), holds what that name holds; so does a
        parameter of a function of the module that each of its calls hands the same name
        (`train_one_epoch(model, optimizer, ...)` from `main`)."""
        writes: Dict[str, List[Optional[str]]] = {}
        for node, site in self.model.structure.statements:
            if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                plain = isinstance(node, cst.Assign) and len(targets) == 1 and isinstance(node.value, (cst.Name, cst.Attribute))
                for target in targets:
                    key = self.model.roles.key(target, site.scope)
                    if key:
                        writes.setdefault(key, []).append(self.model.roles.key(node.value, site.scope) if plain else None)
        for call, site in self.model.structure.calls:
            callee = self.model.roles.callee(call.func, site.scope)
            if callee is None:
                continue
            params = [p.name.value for p in callee.params][1 if callee.self_name and callee.parent is None else 0:]
            for index, argument in enumerate(call.args):
                name = argument.keyword.value if argument.keyword is not None else params[index] if index < len(params) and not argument.star else None
                key = self.model.roles.key(cst.Name(name), callee) if name else None
                if key:
                    plain = isinstance(argument.value, (cst.Name, cst.Attribute))
                    writes.setdefault(key, []).append(self.model.roles.key(argument.value, site.scope) if plain else None)
        groups: Dict[str, Set[str]] = {}
        for key, sources in writes.items():
            if len(set(sources)) == 1 and sources[0] is not None and sources[0] != key and len(writes.get(sources[0], ())) <= 1:
                group = groups.get(key, {key}) | groups.get(sources[0], {sources[0]})
                for member in group:
                    groups[member] = group
        return groups

    @cached_property
    def _loaded_wrappers(self) -> set:
        return {k[:i] for k in self._loaded_keys for i, c in enumerate(k) if c == "."}

    @cached_property
    def _loaded_keys(self) -> set:
        """Keys of every object whose `load_state_dict(...)` the module calls, whatever its role."""
        found = {self.model.roles.key(e.subject, e.site.scope) for e in self.model.of_kind(STATE_LOAD)}
        for call, site in self.model.structure.calls:
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == "load_state_dict":
                found.add(self.model.roles.key(call.func.value, site.scope))
        found.discard(None)  # `get_model().load_state_dict(...)`: no name to match
        return found

    def step_state(self, scope: "Scope") -> Dict[str, List[str]]:
        """The run's step state visible from a scope: {"scheduler": [keys], "scaler": [...], "counter": [...]}: schedulers
        the code steps, scalers that may skip, and update counters that feed something (memoised per scope)."""
        if id(scope) not in self._step_states:
            self._step_states[id(scope)] = self._step_state(scope)
        return self._step_states[id(scope)]

    def _step_state(self, scope: "Scope") -> Dict[str, List[str]]:
        by_owner = _step_state_by_owner(self.model)
        owners = ["<module>", scope.name] + ([f"class {scope.class_name}"] if scope.class_name is not None else [])
        # (a global the function's own name hides is not its state; nor is a global counter it does not declare
        # `global`: it cannot set that number back, its caller can, from what it returns)
        visible = {entry for owner in owners for entry in by_owner.get(owner, ())
                   if owner != "<module>" or scope.owner_of(_head(entry[2])) is None
                   and (entry[1] != "counter" or scope.name == "<module>" or _head(entry[2]) in scope.global_names or _head(entry[2]) != entry[2].split(":", 1)[1])}
        enclosing = scope.parent
        while enclosing is not None and enclosing.name != "<module>":  # (a nested function's closure: what it names of its encloser's)
            visible |= {entry for entry in by_owner.get(enclosing.name, ()) if scope.owner_of(_head(entry[2])) is enclosing}
            enclosing = enclosing.parent
        visible = sorted(visible)
        state: Dict[str, List[str]] = {"scheduler": [], "scaler": [], "counter": [], "position": []}
        for _, kind, key in visible:
            state[kind].append(key)
        return state

    @cached_property
    def positioned_on_resume(self) -> Set[str]:
        """Schedulers put back at the resumed position by hand (`scheduler.last_epoch = start - 1`, or a
        counter of theirs read back from the checkpoint: `scheduler.model_step = state["model_step"]`),
        built by a helper told that position (`self._setup_lr_scheduler(..., last_epoch=step - 1)`), or
        replayed to it (`for _ in range(start * per_epoch): scheduler.step()`, a loop that trains nothing),
        or told it: `scheduler.step(start_epoch)` outside any loop, or given its position at every step
        (`step(epoch)`, `step_update(n)`), which the state would not add to."""
        found: Set[str] = {key for key in map(self.replayed_scheduler, self.model.of_kind(SCHEDULER_STEP)) if key}
        told: Dict[str, List[Event]] = {}
        for event in self.model.of_kind(SCHEDULER_STEP):
            if event.role is not None and not event.role.metric and isinstance(event.node, cst.Call) and event.subject is not None:
                told.setdefault(self.model.roles.key(event.subject, event.site.scope) or "", []).append(event)
        found.update(key for key, events in told.items() if all(e.explicit_position for e in events) or any(e.explicit_position and e.site.loop is None for e in events))
        # (handed to a function of the project that positions it: `load_checkpoint(path, model, optimizer, scheduler)` replaying its steps)
        context = self.model.roles.project
        for call, site in self.model.structure.calls if context is not None else ():
            callee = context.callee(call, site.scope)
            stepped = {e.place for e in callee.effects if e.action == STEPS_A_SCHEDULER} if callee is not None else set()
            for effect in callee.effects if callee is not None else ():
                if effect.action == POSITIONED_STEP and effect.place.startswith("param:") and effect.place not in stepped:
                    handed = context.argument(callee, effect.place, call, site.scope)
                    key = self.model.roles.key(handed, site.scope) if isinstance(handed, (cst.Name, cst.Attribute)) else None
                    if key:
                        found.add(key)
        # (timm's schedulers take their position at every step: `step(epoch)` and `step_update(num_updates)`
        # need it, a bare `step()` raises; what they hold besides is built from their arguments)
        found.update(key for e in self.model.of_kind(SCHEDULER_STEP, HELPER_STATE)
                     if e.subject is not None and e.role is not None and (e.role.constructor or "").startswith("timm.scheduler.")
                     and (key := self.model.roles.key(e.subject, e.site.scope)))
        counters = set(self.model.units.increments)
        for node, site in self.model.structure.statements:
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    if isinstance(target.target, cst.Attribute) and (target.target.attr.value == "last_epoch" or (
                            reads_an_entry(node.value) or self._read_from_a_checkpoint(node.value, site.scope)) and self.model.roles.is_(target.target.value, site.scope, SCHEDULER)):
                        # (`scheduler.last_epoch = start - 1`; a scheduler's own counter read back from the checkpoint,
                        # `self.scheduler.model_step = checkpoint["model_step"]`, or through a local set from it; in a method handed the scheduler,
                        # `self.restore_scheduler(self.scheduler, ...)`, the scheduler each call hands it)
                        found.add(self.model.roles.key(target.target.value, site.scope) or "")
                        if isinstance(target.target.value, cst.Name):
                            found.update(self._passed_for(site.scope, target.target.value.value))
                    elif isinstance(node.value, cst.Call) and any(
                        a.keyword is not None and a.keyword.value == "last_epoch" and literal(a.value) != -1 for a in node.value.args
                    ):
                        found.add(self.model.roles.key(target.target, site.scope) or "")
                    elif isinstance(node.value, cst.Call) and self.model.roles.is_(target.target, site.scope, SCHEDULER) and any(
                        self.model.keys_in(a.value, site.scope) & counters or self._read_from_a_checkpoint(a.value, site.scope) for a in node.value.args[1:]
                    ):
                        # (built told the counter its run resumes at: `LinearWarmupCosineDecay(optimizer, ..., iteration=n_iter)`)
                        found.add(self.model.roles.key(target.target, site.scope) or "")
        return found

    def replayed_scheduler(self, event: Event) -> Optional[str]:
        """The scheduler's key when `event` sits in a replay loop: `for _ in range(n):` whose body only
        advances schedules (`x.step()`, `next(x)`), so it fast-forwards them and trains nothing."""
        loop = event.site.loop
        if event.subject is not None and _replayed_in_a_comprehension(event):
            return self.model.roles.key(event.subject, event.site.scope)
        if event.subject is None or not isinstance(loop, cst.For) or not (isinstance(loop.iter, cst.Call) and dotted(loop.iter.func) == "range"):
            return None
        body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ()
        return self.model.roles.key(event.subject, event.site.scope) if body and all(map(_advances_a_schedule, body)) else None


def stored_contents(model: "ModuleModel", save: Event, stored: cst.BaseExpression) -> Optional[Checkpoint]:
    """What `save` stores when it stores `stored`: a dict literal, a dict built key by key, `self.state_dict()`."""
    if isinstance(stored, cst.Dict):
        entries = _entries(stored)
        return Checkpoint(save, entries, dict_node=stored) if entries is not None else None
    if isinstance(stored, cst.Name):
        return _built_up(model, save, stored.value)
    if isinstance(stored, cst.Call) and isinstance(stored.func, cst.Name) and stored.func.value == "dict":
        keywords = {a.keyword.value: a.value for a in stored.args if a.keyword is not None}
        return Checkpoint(save, keywords) if len(keywords) == len(stored.args) else None  # `dict(**extra)`: not all visible
    if isinstance(stored, cst.Call):
        return _from_state_dict_method(model, save, stored)
    return None


def _loads_an_optimizer(effect) -> bool:
    """An effect of a project function that loads an optimizer's state, wherever that optimizer lives
    (one the function builds for itself too): a call of it resumes the run."""
    return effect.action == LOAD and (effect.role == OPTIMIZER or optimizer_named(effect.place.rsplit(":", 1)[-1]))


_ENTRY_READS = ("get", "pop")  # the methods of a dict that read an entry of it


def _entry_read(value: cst.BaseExpression) -> Optional[str]:
    """`"epoch"` of `ckpt["epoch"]` (also inside `int(...)`): the entry a value reads by subscript, without a default."""
    while isinstance(value, cst.Call) and len(value.args) == 1 and isinstance(value.func, cst.Name):
        value = value.args[0].value
    if isinstance(value, cst.Subscript) and len(value.slice) == 1 and isinstance(value.slice[0].slice, cst.Index):
        text = literal(value.slice[0].slice.value)
        return text if isinstance(text, str) else None
    return None


def reads_an_entry(value: cst.BaseExpression) -> bool:
    """The value reads an entry of something (`state["epoch"]`, `ckpt.get("step", 0)`, `ckpt.pop("iteration")`): in a
    resume, what the checkpoint holds."""
    return any(
        type(sub) is cst.Subscript or (type(sub) is cst.Call and type(sub.func) is cst.Attribute and sub.func.attr.value in _ENTRY_READS)
        for sub in walk_expressions(value)
    )


def _handed_to_own_save(model: "ModuleModel", save: Event) -> Optional[cst.BaseExpression]:
    """What the caller hands a function of this module (a nested one too) whose saves all write one of
    its parameters with `torch.save` (`def save_ckpt(state, path): torch.save(state, path)`): the
    checkpoint is what the caller built."""
    callee = model.roles.callee(save.node.func, save.site.scope)
    if callee is None:
        return None
    stored = set()
    for inner in model.events_in(callee, CHECKPOINT_SAVE):
        call = inner.node
        first = call.args[0].value if isinstance(call, cst.Call) and call.args and model.roles.qualified(call.func, callee) == "torch.save" else None
        stored.add(first.value if isinstance(first, cst.Name) else None)
    params = [p.name.value for p in callee.params]
    if len(stored) != 1 or not stored <= set(params):
        return None
    name = stored.pop()
    position = params.index(name) - (1 if callee.self_name and params[0] == callee.self_name else 0)
    return argument_for(save.node, position, name) if position >= 0 and not any(a.star for a in save.node.args) else None


def _saved_through(model: "ModuleModel", save: Event) -> Optional[Checkpoint]:
    """A save through a function of the project, in the caller's words: `save_checkpoint(path, model,
    optimizer)` whose summary stores its `optimizer` parameter under "optimizer"; `save_on_master(checkpoint,
    path)` that saves what the caller built (read in the caller); `save(path, scaler=scaler.state_dict())`
    that saves its keyword arguments."""
    context, effect = model.roles.project, save.via
    callee = context.callee(save.node, save.site.scope)
    if effect.stored == "kwargs":
        return Checkpoint(save, {a.keyword.value: a.value for a in save.node.args if a.keyword is not None})
    if effect.stored and not effect.stored.startswith("local:"):  # (a dict of the helper's own: its contents say what it holds)
        stored = context.argument(callee, effect.stored, save.node, save.site.scope)
        return stored_contents(model, save, stored) if stored is not None else None
    if not effect.contents:  # (one object's own file: with the function's others, one checkpoint)
        return _one_file_each(model, save) if effect.stored_state else None
    entries = {}
    for key, (place, _) in effect.contents.items():
        if key == KWARGS_ENTRY and place == "kwargs":  # (the caller's keywords the helper's own parameters do not take)
            entries.update({a.keyword.value: a.value for a in save.node.args if a.keyword is not None and a.keyword.value not in callee.params})
            continue
        value = argument_at_call(model, context, callee, place, save.node, save.site.scope) if place else None
        entries[key] = value if value is not None else _UNKNOWN
    return Checkpoint(save, entries)


KWARGS_ENTRY = "**"  # the entries a helper's checkpoint takes from its `**kwargs` (`state.update(kwargs)`)


_UNKNOWN = cst.Name("None")  # an entry of a save through a project function whose value the caller cannot name


def _entries(node: cst.Dict) -> Optional[Dict[str, cst.BaseExpression]]:
    entries = {}
    for element in node.elements:
        if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
            return None  # `**extra` or a computed key: the contents are not all visible
        entries[element.key.evaluated_value] = element.value
    return entries


def _built_up(model: "ModuleModel", save: Event, name: str) -> Optional[Checkpoint]:
    """`ckpt = {...}` then `ckpt["scheduler"] = ...` in the same function, before the save."""
    entries: Optional[Dict[str, cst.BaseExpression]] = None
    built = None  # the site of the last assignment of the whole dict
    for node, site in _assignments_to(model).get((id(save.site.scope), name), ()):
        if site.order >= save.order:
            break
        if isinstance(node, cst.Expr):  # (`ckpt.update({"amp": amp.state_dict()})`, `ckpt.update(scaler=...)`)
            added = _updated_entries(node.value, save.site.scope)
            entries = {**entries, **added} if entries is not None and added is not None else None
            continue
        target = node.targets[0].target
        if isinstance(target, cst.Name):
            fresh = _entries(node.value) if isinstance(node.value, cst.Dict) else None
            if built is not None and model.passes.exclusive(built, site):
                # (`if scaler: ckpt = {..., "scaler": ...}` / `else: ckpt = {...}`: either is the one saved, and
                # an entry one of them stores is there whenever its object is)
                entries = {**fresh, **entries} if entries is not None and fresh is not None else None
            else:
                entries = fresh
            built = site
        elif entries is not None:
            index = target.slice[0].slice if len(target.slice) == 1 else None
            if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
                entries[index.value.evaluated_value] = node.value
            else:
                entries = None
    return Checkpoint(save, entries, name=name) if entries is not None else None


def _spelled(model: "ModuleModel", expr: cst.BaseExpression, scope: "Scope", order: int) -> List[cst.BaseExpression]:
    """The expression and what the names in it were set to, in `scope`, before `order`."""
    assignments = _assignments_to(model)
    found = [expr]
    for sub in walk_expressions(expr):
        if isinstance(sub, cst.Name):
            found += [node.value for node, site in assignments.get((id(scope), sub.value), ()) if site.order < order and isinstance(node, cst.Assign)]
    return found


def _folders(paths: List[cst.BaseExpression]) -> Set[str]:
    """The names a path is built from, its folder among them (`last_output_dir`, `args.output_dir`): not
    the functions that join them, nor the file names."""
    inner = {id(part) for path in paths for sub in walk_expressions(path) if isinstance(sub, cst.Call) for part in walk_expressions(sub.func)}
    inner |= {id(part) for path in paths for sub in walk_expressions(path) if isinstance(sub, cst.Attribute) for part in walk_expressions(sub) if part is not sub}
    return {name for path in paths for sub in walk_expressions(path)
            if isinstance(sub, (cst.Name, cst.Attribute)) and id(sub) not in inner and (name := dotted(sub)) is not None}


def _text_files_written(model: "ModuleModel") -> Dict[int, list]:
    """id(scope) -> (path, what is written, site) of each `f.write(...)` or `json.dump(obj, f)` into a
    file the same function opens for writing (`with open(path, "w") as f:`)."""

    def compute() -> Dict[int, list]:
        opened: Dict[tuple, cst.BaseExpression] = {}
        for item, site in model.structure.with_items:
            call, target = item.item, item.asname.name if item.asname is not None else None
            mode = argument_for(call, 1, "mode") if isinstance(call, cst.Call) else None
            if isinstance(target, cst.Name) and isinstance(call, cst.Call) and dotted(call.func) == "open" and call.args and mode is not None and isinstance(literal(mode), str) and "w" in literal(mode):
                opened[(id(site.scope), target.value)] = call.args[0].value
        found: Dict[int, list] = {}
        for call, site in model.structure.calls if opened else ():
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == "write" and isinstance(call.func.value, cst.Name) and call.args:
                handle, written = call.func.value.value, call.args[0].value
            elif dotted(call.func) in ("json.dump", "yaml.dump", "yaml.safe_dump") and len(call.args) > 1 and isinstance(call.args[1].value, cst.Name):
                handle, written = call.args[1].value.value, call.args[0].value
            else:
                continue
            path = opened.get((id(site.scope), handle))
            if path is not None:
                found.setdefault(id(site.scope), []).append((path, written, site))
        return found

    return model.remember(("text files written",), compute)


def _updated_entries(call: cst.BaseExpression, scope: "Scope") -> Optional[Dict[str, cst.BaseExpression]]:
    """The entries `d.update({...})` or `d.update(key=value)` adds; `d.update(kwargs)` of the function's own
    `**kwargs` adds what each caller passes by keyword (the entry `**`, read through the summary); None where
    not all are visible."""
    if len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star and isinstance(call.args[0].value, cst.Dict):
        return _entries(call.args[0].value)
    star = scope.node.params.star_kwarg if isinstance(scope.node, cst.FunctionDef) else None
    if (len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star and isinstance(call.args[0].value, cst.Name)
            and isinstance(star, cst.Param) and call.args[0].value.value == star.name.value):
        return {KWARGS_ENTRY: call.args[0].value}
    if call.args and all(a.keyword is not None for a in call.args):
        return {a.keyword.value: a.value for a in call.args}
    return None


def _assignments_to(model: "ModuleModel") -> Dict[tuple, list]:
    """(scope, name) -> single-target assignments to `name` or to `name[...]`, and `name.update(...)` calls,
    in program order."""

    def compute() -> Dict[tuple, list]:
        found: Dict[tuple, list] = {}
        for node, site in model.structure.statements:
            call = node.value if isinstance(node, cst.Expr) else None
            if (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "update"
                    and isinstance(call.func.value, cst.Name)):
                found.setdefault((id(site.scope), call.func.value.value), []).append((node, site))
                continue
            if not isinstance(node, cst.Assign) or len(node.targets) != 1:
                continue
            target = node.targets[0].target
            if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
                target = target.value
            if isinstance(target, cst.Name):
                found.setdefault((id(site.scope), target.value), []).append((node, site))
        return found

    return model.remember(("assignments_to",), compute)


def _from_state_dict_method(model: "ModuleModel", save: Event, call: cst.Call) -> Optional[Checkpoint]:
    """`torch.save(self.state_dict(), path)` with a `state_dict` of this module returning a literal."""
    if not isinstance(call.func, cst.Attribute) or call.func.attr.value != "state_dict":
        return None
    method = model.roles.callee(call.func, save.site.scope)
    if method is None:
        return _one_file_each(model, save)
    for node, _ in model.statements_of(method):
        if isinstance(node, cst.Return) and isinstance(node.value, cst.Dict):
            entries = _entries(node.value)
            return Checkpoint(save, entries, dict_node=node.value) if entries is not None else None
    return None


def _one_file_each(model: "ModuleModel", save: Event) -> Optional[Checkpoint]:
    """A checkpoint written as one file per object (`torch.save(optimizer.state_dict(), ".../optimizer.pt")`,
    then the scheduler's): the function's saves of one `x.state_dict()` each, together, when there are
    two or more, or when the module restores an optimizer from a file of that name (a lone optimizer file
    is otherwise no sign of a checkpoint)."""
    def compute() -> Dict[int, Dict[str, cst.BaseExpression]]:
        found: Dict[int, Dict[str, cst.BaseExpression]] = {}
        saves: Dict[int, List[Event]] = {}
        for event in model.of_kind(CHECKPOINT_SAVE):
            call = event.node
            stored = call.args[0].value if isinstance(call, cst.Call) and event.via is None and call.args else None
            if isinstance(stored, cst.Call) and isinstance(stored.func, cst.Attribute) and stored.func.attr.value == "state_dict" and not stored.args:
                owner = dotted(stored.func.value)
                if owner and owner != "self" and model.roles.qualified(call.func, event.site.scope) == "torch.save":
                    found.setdefault(id(event.site.scope), {})[owner] = stored
                    saves.setdefault(id(event.site.scope), []).append(event)
            elif (handed := model.state.saved_object(event)) is not None:
                # (through a helper that saves what it is handed as its own file: `save_model(optim, "ae_optim", step, dir)`)
                owner = dotted(handed)
                if owner and owner != "self":
                    found.setdefault(id(event.site.scope), {})[owner] = handed
                    saves.setdefault(id(event.site.scope), []).append(event)
        read_back = _file_names_restored(model)
        return {scope: entries for scope, entries in found.items() if len(entries) > 1 or read_back & _file_names(model, saves[scope])}

    entries = model.remember(("one file each",), compute).get(id(save.site.scope))
    return Checkpoint(save, dict(entries)) if entries else None  # (no dict and no variable: no entry to add)


def _file_names_restored(model: "ModuleModel") -> Set[str]:
    """The file names (`"optimizer.pt"`) in the paths the module restores an optimizer's state from."""
    def compute() -> Set[str]:
        loads = [e for e in model.of_kind(STATE_LOAD) if e.via is None and e.role is not None and e.role.kind == OPTIMIZER]
        return _file_names(model, loads)
    return model.remember(("file names restored",), compute)


def _file_names(model: "ModuleModel", events: List[Event]) -> Set[str]:
    """String literals that name a file (`"optimizer.pt"`) in the calls of `events`, also in a local the
    call reads that is set once (`optimizer_last = os.path.join(last, "optimizer.pt")`)."""
    found: Set[str] = set()
    for event in events:
        pending = [event.node]
        for _ in range(3):
            names, next_round = [], []
            for node in pending:
                for sub in walk_expressions(node):
                    value = literal(sub) if isinstance(sub, cst.SimpleString) else None
                    if isinstance(value, str) and "." in value and "/" not in value and " " not in value:
                        found.add(value)
                    elif isinstance(sub, cst.Name):
                        names.append(sub.value)
            for name in names:
                once = model.roles.command_line.set_once(event.site.scope, name)
                if once is not None:
                    next_round.append(once[0])
            pending = next_round
    return found


def _step_state_by_owner(model: "ModuleModel") -> Dict[str, list]:
    """The module's step state once, grouped by the prefix of each key (who can name it): entries
    (rank, kind, key), ranked as step_state lists them (first use in program order; counters sorted)."""

    def compute() -> Dict[str, list]:
        ranked: Dict[tuple, int] = {}
        for event in model.of_kind(SCHEDULER_STEP, SKIPPABLE_STEP, SCALED_BACKWARD, HELPER_STATE):
            key = model.roles.key(event.subject, event.site.scope) if event.subject is not None else None
            role = event.role
            if key is None or role is None:
                continue
            # (a scheduler built with `last_epoch=` a resumed position is restored by its construction)
            # (nor is there anything to restore of one that never moves the learning rate)
            # (nor one that no run builds: `if args.lr_scheduler:` around its construction, no launch giving it)
            if event.kind in (SCHEDULER_STEP, HELPER_STATE) and role.kind == SCHEDULER and not (
                role.prepared or role.engine_owned or role.positioned or role.off_as_run or key in model.state.positioned_on_resume
                or event.kind == SCHEDULER_STEP and never_moves(model, event)
            ):
                kind = "scheduler"
            elif role.kind in SCALE_HOLDERS and role.enabled is not False:
                kind = "scaler"  # (timm's NativeScaler holds a GradScaler: its state_dict() is the scale)
            else:
                continue
            ranked.setdefault((kind, key), len(ranked))
        for key in sorted(model.state.held_scalers):
            ranked.setdefault(("scaler", key), len(ranked))
        for key in sorted(k for k in model.counters.resume_keys() if k):
            ranked.setdefault(("counter", key), len(ranked))
        for key, inner in sorted(inner_schedules(model).items()):  # (the position of a schedule an optimizer keeps inside)
            ranked.setdefault(("position", f"{key}.{inner.counter}"), len(ranked))
        found: Dict[str, list] = {}
        for (kind, key), rank in ranked.items():
            found.setdefault(key.split(":", 1)[0], []).append((rank, kind, key))
        return found

    return model.remember(("step_state_by_owner",), compute)


def _is_lr_entry(target: cst.BaseExpression) -> bool:
    """`group["lr"]`."""
    if not (isinstance(target, cst.Subscript) and len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index)):
        return False
    index = target.slice[0].slice.value
    return isinstance(index, cst.SimpleString) and index.evaluated_value == "lr"


def _replayed_in_a_comprehension(event: Event) -> bool:
    """The step is the element of a comprehension over `range(n)` standing alone on its line, its list thrown
    away: `[scheduler.step() for _ in range(start * per_epoch)]` fast-forwards the schedule, as a loop would."""
    statement = event.site.statement
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and isinstance(statement.body[0], cst.Expr)):
        return False
    made = statement.body[0].value
    if not isinstance(made, (cst.ListComp, cst.GeneratorExp, cst.SetComp)) or made.elt is not event.node or made.for_in.inner_for_in is not None:
        return False
    iterated = made.for_in.iter
    return isinstance(iterated, cst.Call) and dotted(iterated.func) == "range" and not made.for_in.ifs


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


def _kept_to_itself(model: "ModuleModel", scope: "Scope", name: str) -> bool:
    """Every read of a function's local `name` (nested functions included) calls one of its methods, or
    hands it to a function the project resolves: nothing unseen can restore it or store it."""
    sites = [(node, site) for node, site in model.structure.statements if site.scope is scope or _inside(site.scope, scope)]
    return _only_used_itself(model, sites, lambda node, site: isinstance(node, cst.Name) and node.value == name,
                             lambda target, site: isinstance(target, cst.Name), handed_on=True)


def _only_used_itself(model: "ModuleModel", sites, names_it, assigns_it, handed_on: bool) -> bool:
    """Every read, in the statements `sites`, of what `names_it(node, site)` tells calls one of its methods or tests
    it (`if scaler is not None`), or (`handed_on`) hands it to a function the project resolves. The values of
    assignments whose every target `assigns_it(target, site)` are read, not their targets."""
    def uses(node: cst.CSTNode, parent: Optional[cst.CSTNode], site) -> bool:
        if names_it(node, site):
            if parent is None or isinstance(parent, (cst.Comparison, cst.UnaryOperation)) or isinstance(parent, cst.Attribute) and parent.value is node:
                return True
            return handed_on and isinstance(parent, cst.Arg) and _resolved_call_of(model, parent, site) is not None
        return all(uses(child, node, site) for child in children(node))

    for node, site in sites:
        targets = assignment_targets(node) if isinstance(node, (cst.Assign, cst.AnnAssign)) else []
        parts = [node.value] if targets and getattr(node, "value", None) is not None and all(assigns_it(t, site) for t in targets) else [node]
        if not all(uses(part, None, site) for part in parts):
            return False
    return True


def _built_in_init(model: "ModuleModel", class_name: str, attribute: str) -> Optional["Scope"]:
    """The `__init__` of the class when it is the one method that assigns `self.<attribute>`, and builds what
    it assigns (`self.scaler = GradScaler()`, not `self.scaler = scaler`, which its caller hands it)."""
    assigning = {}
    for node, site in model.structure.statements:
        if site.scope.class_name == class_name and any(isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name)
                                                       and t.value.value == site.scope.self_name and t.attr.value == attribute
                                                       for t in assignment_targets(node)):
            if not (isinstance(node, cst.Assign) and isinstance(node.value, cst.Call)):
                return None
            assigning[id(site.scope)] = site.scope
    scopes = list(assigning.values())
    return scopes[0] if len(scopes) == 1 and scopes[0].name == f"{class_name}.__init__" else None


def _attribute_kept_to_itself(model: "ModuleModel", class_name: str, attribute: str) -> bool:
    """Every read of `self.<attribute>` in the class's methods calls one of its methods or tests it: nothing
    unseen (a subclass aside) can restore it or store it."""
    sites = [(node, site) for node, site in model.structure.statements if site.scope.class_name == class_name and site.scope.self_name]
    return _only_used_itself(model, sites, lambda node, site: isinstance(node, cst.Attribute) and node.attr.value == attribute
                             and isinstance(node.value, cst.Name) and node.value.value == site.scope.self_name,
                             lambda target, site: True, handed_on=False)


def _inside(scope: "Scope", outer: "Scope") -> bool:
    while scope.parent is not None:
        scope = scope.parent
        if scope is outer:
            return True
    return False


def _resolved_call_of(model: "ModuleModel", argument: cst.Arg, site) -> Optional[object]:
    """The project function a call with this argument runs, when the project resolves it, or the function
    of this module it runs (before the project is known: a summary's own module), when that function
    restores nothing."""
    for call, call_site in model.structure.calls:
        if call_site.scope is site.scope and any(a is argument for a in call.args):
            project = model.roles.project
            found = project.callee(call, call_site.scope) if project is not None else None
            if found is None and isinstance(call.func, cst.Name):
                local = next((s for s in model.structure.scopes if s.name == call.func.value and s.parent is None and s.class_name is None), None)
                restores = local is not None and any(last_name(c.func) == "load_state_dict" for c, c_site in model.structure.calls if c_site.scope is local or _inside(c_site.scope, local))
                return local if local is not None and not restores else None
            return found
    return None


_FILE_LOADS = ("torch.load", "json.load")


def _head(key: str) -> str:
    """The name a key's object is reached by: `lr_scheduler` of `<module>:lr_scheduler.inner`."""
    return key.split(":", 1)[1].split(".", 1)[0].split("[", 1)[0]


def _position_reads(model: "ModuleModel"):
    """(statement, site, key) for each name a function reads back from a checkpoint: an entry of what
    `torch.load`/`json.load` returned (`step = state["step"]`), or a name unpacked from a call of the
    project that loads state into what it is handed (its summary says so)."""
    context = model.roles.project
    loaded: Set[str] = set()  # keys holding what a file load returned
    for node, site in model.structure.statements:
        if type(node) is not cst.Assign:
            continue
        value = node.value
        if isinstance(value, cst.Call) and model.roles.qualified(value.func, site.scope) in _FILE_LOADS:
            loaded.update(k for k in (model.roles.key(t, site.scope) for t in assignment_targets(node)) if k)
            continue
        from_file = reads_an_entry(value) and any(
            type(sub) in (cst.Subscript, cst.Attribute) and model.roles.key(sub.value, site.scope) in loaded for sub in walk_expressions(value))
        callee = context.callee(value, site.scope) if context is not None and isinstance(value, cst.Call) else None
        restoring_call = callee is not None and any(e.action == LOAD for e in callee.effects)
        if restoring_call and _restores_an_optimizer(model, context, callee, value, site.scope):
            continue  # (a full resume in a helper, `model, optimizer, scheduler, scaler, epoch = setup_model(...)`)
        if from_file or restoring_call or _parsed_from_a_name(model, value, site.scope):
            for target in assignment_targets(node):
                key = model.roles.key(target, site.scope) if isinstance(target, cst.Name) and target.value != "_" else None
                if key:
                    yield node, site, key


def _parsed_from_a_name(model: "ModuleModel", value: cst.BaseExpression, scope) -> bool:
    """`int(suffix)` of a piece of a name split apart (`suffix = path.split("/")[-1].split("-")[1]`): a number
    read from a checkpoint's name (`checkpoint-12000`), as transformers' old examples resume."""
    if not (isinstance(value, cst.Call) and dotted(value.func) == "int" and len(value.args) == 1):
        return False
    argument = value.args[0].value
    sources = [argument] + [v for sub in walk_expressions(argument) if isinstance(sub, cst.Name)
                            for v in model.roles.command_line.assigned(scope, sub.value) if v is not None]
    return any(isinstance(sub, cst.Call) and last_name(sub.func) == "split" for source in sources for sub in walk_expressions(source))


def _restores_an_optimizer(model: "ModuleModel", context, callee, call: cst.Call, scope) -> bool:
    """The call restores an optimizer: one it builds itself, or one it is handed (not `None`)."""
    for effect in callee.effects:
        if effect.action == LOAD and effect.role == OPTIMIZER:
            if not effect.place.startswith("param:"):
                return True
            handed = context.argument(callee, effect.place, call, scope)
            if handed is not None and literal(handed) is not None:
                return True
    return False


def _set_again_after(model: "ModuleModel", site, key: str) -> bool:
    """The name is assigned again after the read, in its block or an enclosing one (`epoch = 1` right
    after loading pretrained weights): the read does not position the run."""
    depth = len(site.trail)
    for node, other in model.statements_in(site.scope, key):
        if other.order <= site.order or other.scope is not site.scope or len(other.trail) > depth:
            continue
        if other.trail[:-1] == site.trail[:len(other.trail) - 1] and other.trail[-1][0] is site.trail[len(other.trail) - 1][0]:
            if any(model.roles.key(t, other.scope) == key for t in assignment_targets(node)):
                return True
    return False


def _positions_the_run(model: "ModuleModel", scope: "Scope", key: str) -> bool:
    """The name is where a loop of the function starts (`range(start, epochs)`, `enumerate(loader,
    start)`), also through a name set from it, or a counter the function advances, itself or through a
    function it hands the counter to and takes it back from (`step, loss = train(args, step)`)."""
    counters = {model.roles.key(e.subject, e.site.scope) for e in model.events_in(scope, COUNTER_INCREMENT)}
    counters |= set(model.counters.handed_back)  # (handed to a function that advances it and hands it back)
    derived = {key}
    for node, site in model.statements_in(scope, key):
        if type(node) is cst.Assign and site.scope is scope and key in model.keys_in(node.value, scope):
            derived.update(k for k in (model.roles.key(t, scope) for t in assignment_targets(node)) if k)
    if not derived.isdisjoint(counters):
        return True
    for loop, site in model.structure.for_loops:
        start = _loop_start(loop.iter) if site.scope is scope else None
        if start is not None and not derived.isdisjoint(model.keys_in(start, scope)):
            return True
    return False


def _loop_start(iterated: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """Where a loop starts counting: `range(start, stop)`, `enumerate(items, start)`."""
    if not (isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Name)):
        return None
    if iterated.func.value == "range" and len(positional(iterated)) >= 2:
        return positional(iterated)[0]
    if iterated.func.value == "enumerate":
        return keyword(iterated, "start") or (positional(iterated)[1] if len(positional(iterated)) > 1 else None)
    return None
