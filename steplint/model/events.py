"""The training-step events of a module, in program order, classified with the roles."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Set

import libcst as cst

from steplint.effects import ACCELERATE_PRECISION
from steplint.model.roles import ACCELERATOR, EMA, ENGINE, LOSS_SCALER, OPTIMIZER, SCALER, SCHEDULER, Role, RoleTable
from steplint.model.structure import Site, Structure
from steplint.model.syntax import dotted, keyword, last_name, literal, positional, walk_expressions

SKIPPABLE_STEP = "skippable-step"  # an attempted update the framework may skip
OPTIMIZER_STEP = "optimizer-step"  # a plain optimizer.step(): always commits
SCHEDULER_STEP = "scheduler-step"  # scheduler.step(), step_update(...), param_group["lr"] = ...
SCALER_UPDATE = "scaler-update"
SCALE_READ = "scale-read"  # scaler.get_scale()
COUNTER_INCREMENT = "counter-increment"  # n += 1
CHECKPOINT_SAVE = "checkpoint-save"
EVALUATION = "evaluation"
EARLY_EXIT = "early-exit"  # break / return: what guards it is a loop stop
SCALED_BACKWARD = "scaled-backward"  # scaler.scale(loss).backward()
UNSCALE = "unscale"  # scaler.unscale_(optimizer)
CLIP = "clip"  # torch.nn.utils.clip_grad_norm_ / clip_grad_value_
ZERO_GRAD = "zero-grad"  # optimizer.zero_grad()
STEP_HOOK = "step-hook"  # optimizer.register_step_post_hook(fn)
STEP_WRAPPER = "step-wrapper"  # optimizer.step = wrapper(optimizer.step)
SKIP_FLAG_READ = "skip-flag-read"  # accelerator.optimizer_step_was_skipped
STATE_LOAD = "state-load"  # optimizer/scheduler/scaler.load_state_dict(...)
LOG = "log"  # print(...), logger.info(...), writer.add_scalar(...), wandb.log(...)
COLLECTIVE = "collective"  # dist.all_reduce(x), accelerator.gather(x) / reduce(x)
HELPER_STATE = "helper-state"  # a call of a project function that steps the scheduler or scaler it is given
EMA_UPDATE = "ema-update"  # ema.update(model), averaged.update_parameters(model), ema_model.step(params)

_LOG_CALLS = {"print", "log", "info", "debug", "warning", "add_scalar", "add_scalars", "log_dict", "log_metrics", "set_postfix"}
_COLLECTIVES = {"all_reduce", "all_gather", "broadcast", "reduce", "gather", "gather_for_metrics", "all_gather_into_tensor", "broadcast_object_list", "all_gather_object"}

CLIP_FUNCTIONS = {
    f"torch.nn.utils.{module}{name}"
    for module in ("", "clip_grad.")
    for name in ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm")
}

CALL = "call"  # strategy of a call to a function of the module that makes one skippable update
COMMITTED_STEP = "committed_step"  # the helper steplint's fix adds (or imports from steplint.runtime)

_SAVE_CALL = re.compile(r"^(save|save_checkpoint|save_state|save_pretrained|save_model|save_ckpt|checkpoint)$|^save_.*(checkpoint|ckpt|model|state)", re.I)
# Files a sample is written to (an image, a clip, a plot): not a checkpoint, whatever the call's name.
_MEDIA_FILE = re.compile(r"\.(png|jpe?g|gif|bmp|tiff?|webp|svg|pdf|wav|flac|mp3|ogg|mp4|avi|mkv|webm)$", re.I)
_PATH_KEYWORDS = {"fp", "path", "filename", "file", "fname", "save_path"}
_EVAL_CALL = re.compile(r"^(evaluate|validate|validation|eval_model|run_eval|run_validation|evaluation|test_model|do_eval)$|^(evaluate|validate|eval)_", re.I)


@dataclass(eq=False)
class Event:
    kind: str
    node: cst.CSTNode  # the call, or the assignment for manual LR and counters
    site: Site
    subject: Optional[cst.BaseExpression] = None  # the scheduler, scaler, optimizer or counter
    role: Optional[Role] = None
    optimizer: Optional[cst.BaseExpression] = None  # of a step
    strategy: Optional[str] = None  # of a skippable step: scaler, loss-scaler, accelerate, deepspeed
    gate_var: Optional[str] = None  # the name that holds committed_step(...)'s result
    explicit_position: bool = False  # a scheduler told where it is: step(epoch), step_update(n), lr = f(n)
    via: Optional[object] = None  # a call of a project function: the summarised effect it stands for (steplint.project)

    @property
    def order(self) -> int:
        return self.site.order


def _launched_precision(roles: RoleTable) -> Optional[str]:
    """"fp16" when a launch of the module gives `accelerate launch --mixed_precision fp16` (one of its
    launches may train in fp16), else None (not known)."""
    given = roles.project.launch_options if roles.project is not None else None
    return "fp16" if given and f"{ACCELERATE_PRECISION}fp16" in given else None


def collect_events(structure: Structure, roles: RoleTable, helper_names: frozenset, skip_flag_named: bool, param_group_vars: set) -> List[Event]:
    """The module's events, in order. `skip_flag_named`: whether the text names `optimizer_step_was_skipped`
    at all (without it, no statement is searched for a read of it). `param_group_vars`: param_group_vars(structure)."""
    events: List[Event] = []
    for call, site in structure.calls:
        event = _call_event(call, site, roles, helper_names)
        if event is not None:
            events.append(event)
    call_events = {id(e.node): e for e in events}
    for node, site in structure.statements:
        statement = type(node)  # (type tests: see steplint.model.syntax.dotted)
        if statement is cst.AugAssign and type(node.operator) is cst.AddAssign:
            if _adds_one(node.value) and isinstance(node.target, (cst.Name, cst.Attribute)):
                events.append(Event(COUNTER_INCREMENT, node, site, subject=node.target))
        elif statement is cst.Assign and len(node.targets) == 1:
            target = node.targets[0].target
            if isinstance(target, cst.Subscript) and _is_lr_slot(target, site, param_group_vars):
                events.append(Event(SCHEDULER_STEP, node, site, subject=target.value, explicit_position=True))
            elif _is_self_increment(target, node.value):
                events.append(Event(COUNTER_INCREMENT, node, site, subject=target))
            elif _is_helper_call(node.value, helper_names) and isinstance(target, cst.Name) and id(node.value) in call_events:
                call_events[id(node.value)].gate_var = target.value
        elif statement is cst.Break or statement is cst.Return:
            events.append(Event(EARLY_EXIT, node, site))
        if statement is cst.Assign and len(node.targets) == 1:
            target = node.targets[0].target
            if type(target) is cst.Attribute and target.attr.value == "step" and roles.is_(target.value, site.scope, OPTIMIZER):
                events.append(Event(STEP_WRAPPER, node, site, subject=target.value, role=roles.of(target.value, site.scope)))
        for sub in walk_expressions(node) if skip_flag_named else ():
            if isinstance(sub, cst.Attribute) and sub.attr.value == "optimizer_step_was_skipped" and roles.is_(sub.value, site.scope, ACCELERATOR):
                events.append(Event(SKIP_FLAG_READ, sub, site, subject=sub.value))
    if any(e.kind == STATE_LOAD for e in events):
        snapshots = _kept_snapshots(structure)
        events = [e for e in events if not (e.kind == STATE_LOAD and _rolled_back(positional(e.node)[0], snapshots))]
    events.extend(_updating_calls(structure, roles, events))
    events.extend(_closure_increments(structure, roles, events))
    # The helper steplint adds is correct by construction: its inside is not training code to check.
    events = [e for e in events if not (e.site.scope.name in helper_names and e.site.scope.class_name is None)]
    events.sort(key=lambda e: e.order)
    return events


def _updating_calls(structure: Structure, roles: RoleTable, events: List[Event]) -> List[Event]:
    """Calls of this module's functions that make one skippable update each (`_backward(loss)`,
    `self.optimizer_step()`): at the call site they are the update. A function that loops over
    updates (`train_one_epoch`) is not one update."""
    updating = {id(e.site.scope) for e in events if e.kind == SKIPPABLE_STEP and not e.site.loops}
    known = {id(e.node) for e in events}  # committed_step(...) is an update already, with its gate
    gates = {(id(e.site.scope), e.gate_var) for e in events if e.gate_var}
    returns_commit, assigned_to = set(), {}  # helpers that `return committed`; call -> the name its result goes to
    for node, site in structure.statements:
        if isinstance(node, cst.Return) and isinstance(node.value, cst.Name) and (id(site.scope), node.value.value) in gates:
            returns_commit.add(id(site.scope))
        elif isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            assigned_to[id(node.value)] = node.targets[0].target.value
    found: List[Event] = []
    for _ in range(3):  # calls of calls
        added = False
        for call, site in structure.calls:
            callee = roles.callee(call.func, site.scope)
            if callee is not None and id(callee) in updating and id(call) not in known:
                known.add(id(call))
                gate = assigned_to.get(id(call)) if id(callee) in returns_commit else None
                found.append(Event(SKIPPABLE_STEP, call, site, subject=call.func, strategy=CALL, gate_var=gate))
                if not site.loops and id(site.scope) not in updating:
                    updating.add(id(site.scope))
                    added = True
        if not added:
            break
    return found


def _closure_increments(structure: Structure, roles: RoleTable, events: List[Event]) -> List[Event]:
    """Calls of a nested function that advances its caller's counter once per call (`nonlocal step`,
    then `step += 1` outside any loop, condition or early exit): at the call statement, they are
    that counter's increment, with the counter as it is named in the caller."""
    advancing: Dict[int, List[Event]] = {}
    for e in events:
        if e.kind == COUNTER_INCREMENT and isinstance(e.subject, cst.Name) and e.subject.value in e.site.scope.nonlocal_names:
            advancing.setdefault(id(e.site.scope), []).append(e)
    found: List[Event] = []
    for node, site in structure.statements:
        if not (isinstance(node, cst.Expr) and isinstance(node.value, cst.Call)):
            continue
        callee = roles.callee(node.value.func, site.scope)
        increments = advancing.get(id(callee), []) if callee is not None else []
        if len(increments) == 1 and not increments[0].site.loops and not increments[0].site.guards and callee.parent is not None:
            found.append(Event(COUNTER_INCREMENT, node, site, subject=increments[0].subject))
    return found


def _is_helper_call(expr: cst.BaseExpression, helper_names: frozenset) -> bool:
    """A call of committed_step (under whatever local name the module gave it)."""
    return (
        isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in helper_names
        and expr.func.value != "committed_hook"
    )


def _call_event(call: cst.Call, site: Site, roles: RoleTable, helper_names: frozenset) -> Optional[Event]:
    scope = site.scope
    func = call.func
    args = positional(call)
    if _is_helper_call(call, helper_names) and len(args) == 2:
        return Event(SKIPPABLE_STEP, call, site, subject=args[0], role=roles.of(args[0], site.scope), optimizer=args[1], strategy=SCALER)
    if isinstance(func, cst.Attribute):
        obj, method = func.value, func.attr.value
        role = roles.of(obj, scope)
        kind = role.kind if role else None
        if kind == EMA and method in ("update", "update_parameters", "step"):
            return Event(EMA_UPDATE, call, site, obj, role)
        if method == "step":
            stepped = args[0] if args else keyword(call, "optimizer")  # `scaler.step(optimizer=opt)` too
            if kind == SCALER and stepped is not None:
                skips = role.enabled is not False
                return Event(SKIPPABLE_STEP if skips else OPTIMIZER_STEP, call, site, obj, role, optimizer=stepped, strategy=SCALER)
            if kind == OPTIMIZER and any(roles.is_(a.value, scope, SCALER) for a in call.args):
                return None  # `opt.step("gen", scaler=scaler)`: a project wrapper's step that runs the scaler; no torch optimizer takes one
            if kind == OPTIMIZER and role.skips:  # apex dynamic loss scaling, or declared in configuration
                return Event(SKIPPABLE_STEP, call, site, obj, role, optimizer=obj, strategy=role.skips)
            if kind == OPTIMIZER:
                # A prepared optimizer skips its step on fp16 overflow. Without mixed_precision in the
                # code it comes from the launcher (`accelerate launch --mixed_precision fp16`, read in the
                # project's launch files) or from `accelerate config`, which we cannot see: then, silent.
                precision = role.mixed_precision if role.mixed_precision is not None else _launched_precision(roles)
                if role.prepared and precision not in ("no", "bf16", "fp8", None, ...):
                    return Event(SKIPPABLE_STEP, call, site, obj, role, optimizer=obj, strategy="accelerate")
                return Event(OPTIMIZER_STEP, call, site, obj, role, optimizer=obj)
            if kind == ENGINE:
                return Event(SKIPPABLE_STEP, call, site, obj, role, optimizer=obj, strategy="deepspeed")
            if kind == SCHEDULER:
                return Event(SCHEDULER_STEP, call, site, obj, role, explicit_position=bool(call.args))
        if method == "step_update" and kind == SCHEDULER:
            return Event(SCHEDULER_STEP, call, site, obj, role, explicit_position=True)
        if method in roles.scheduler_methods and kind == SCHEDULER:
            return Event(SCHEDULER_STEP, call, site, obj, role, explicit_position=bool(call.args))
        if method == "backward" and isinstance(obj, cst.Call) and isinstance(obj.func, cst.Attribute) and obj.func.attr.value == "scale":
            scaler = obj.func.value
            if roles.is_(scaler, scope, SCALER):
                return Event(SCALED_BACKWARD, call, site, scaler, roles.of(scaler, scope))
        if method == "unscale_" and kind == SCALER and (args or keyword(call, "optimizer") is not None):
            return Event(UNSCALE, call, site, obj, role, optimizer=args[0] if args else keyword(call, "optimizer"))
        if method == "zero_grad" and kind == OPTIMIZER:
            return Event(ZERO_GRAD, call, site, obj, role, optimizer=obj)
        if method == "load_state_dict" and kind in (OPTIMIZER, SCHEDULER, SCALER) and args and not copies_live_state(args[0]):
            return Event(STATE_LOAD, call, site, obj, role)
        if method == "register_step_post_hook" and kind == OPTIMIZER:
            return Event(STEP_HOOK, call, site, obj, role, optimizer=obj)
        if method == "update" and kind == SCALER:
            return Event(SCALER_UPDATE, call, site, obj, role)
        if method == "get_scale" and kind == SCALER:
            return Event(SCALE_READ, call, site, obj, role)
        if method == "eval" and not args and not call.args:
            return Event(EVALUATION, call, site, obj)
    name = last_name(func) or ""
    if isinstance(func, (cst.Name, cst.Attribute)):
        if roles.is_(func, scope, LOSS_SCALER) and len(args) >= 2:
            return Event(SKIPPABLE_STEP, call, site, func, roles.of(func, scope), optimizer=args[1], strategy=LOSS_SCALER)
        qualified = roles.qualified(func, scope)
        parameters = args[0] if args else keyword(call, "parameters")
        if qualified in CLIP_FUNCTIONS and parameters is not None:
            return Event(CLIP, call, site, parameters)
        if qualified == "torch.save" or (_SAVE_CALL.search(name) and not writes_media(call)):
            return Event(CHECKPOINT_SAVE, call, site, func)
        if _EVAL_CALL.search(name):
            return Event(EVALUATION, call, site, func)
        if name in _COLLECTIVES:
            return Event(COLLECTIVE, call, site, func)
        if name in _LOG_CALLS:
            return Event(LOG, call, site, func)
    return None


def sets_scale(event: Event) -> bool:
    """`scaler.update(new_scale)`: sets the loss scale by hand (a reset or a bump on a cadence). It
    reads no inf check, so it is not the update that ends a window's step."""
    return event.kind == SCALER_UPDATE and isinstance(event.node, cst.Call) and bool(event.node.args)


def writes_media(call: cst.Call) -> bool:
    """`image.save(f"{out}/step_{i}.jpg")`: a save whose path names an image, audio or video file
    writes a sample for a human to look at, not training state."""
    path = next(iter(positional(call)), None) or next(
        (a.value for a in call.args if a.keyword is not None and a.keyword.value in _PATH_KEYWORDS), None
    )
    return path is not None and any(_MEDIA_FILE.search(text) for text in _literal_tails(path))


def _literal_tails(expr: cst.BaseExpression) -> List[str]:
    """The literal text each string in an expression ends with (`f"{d}/x.png"` -> `/x.png`)."""
    tails = []
    for sub in walk_expressions(expr):
        if isinstance(sub, cst.SimpleString):
            value = sub.evaluated_value
            tails.append(value if isinstance(value, str) else "")
        elif isinstance(sub, cst.FormattedString) and sub.parts and isinstance(sub.parts[-1], cst.FormattedStringText):
            tails.append(sub.parts[-1].value)
    return tails


def copies_live_state(argument: cst.BaseExpression) -> bool:
    """`opt.load_state_dict(other.state_dict())` (or a deepcopy of it) copies live state between
    objects: it is not a resume from a checkpoint."""
    return any(
        isinstance(sub, cst.Call) and isinstance(sub.func, cst.Attribute) and sub.func.attr.value == "state_dict"
        for sub in walk_expressions(argument)
    )


def _kept_snapshots(structure: Structure) -> set:
    """(holder, key) of each state the module keeps in memory under a key, `cache.store("optimizer",
    optimizer.state_dict())`: what it reads back from there is a rollback within the run (an LR range
    test putting the model and optimizer back), not a resume."""
    found = set()
    for call, _ in structure.calls:
        args = call.args
        if isinstance(call.func, cst.Attribute) and len(args) >= 2 and not args[0].keyword and copies_live_state(args[1].value):
            key = literal(args[0].value)
            if isinstance(key, str):
                found.add((dotted(call.func.value), key))
    return found


def _rolled_back(argument: cst.BaseExpression, snapshots: set) -> bool:
    """`optimizer.load_state_dict(cache.retrieve("optimizer"))` where the module kept that snapshot (see _kept_snapshots)."""
    return (
        isinstance(argument, cst.Call) and isinstance(argument.func, cst.Attribute) and bool(argument.args)
        and (dotted(argument.func.value), literal(argument.args[0].value)) in snapshots
    )


def param_group_vars(structure: Structure) -> set:
    """Loop variables that hold an optimizer's param group: `for g in optimizer.param_groups`, also
    with its index or beside another sequence (`for i, g in enumerate(...)`, `for g, lr in zip(...)`)."""
    found = set()
    for loop, site in structure.for_loops:
        target, iterated = loop.target, loop.iter
        if _param_groups(iterated) and isinstance(target, cst.Name):
            found.add((id(site.scope), target.value))
        elif isinstance(iterated, cst.Call) and isinstance(target, cst.Tuple) and last_name(iterated.func) in ("zip", "enumerate"):
            args = positional(iterated)
            names = [e.value for e in target.elements]
            paired = list(zip(names, args)) if last_name(iterated.func) == "zip" else [(names[1], args[0])] if len(names) == 2 and args else []
            found.update((id(site.scope), name.value) for name, arg in paired if isinstance(name, cst.Name) and _param_groups(arg))
    return found


def _param_groups(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and expr.attr.value == "param_groups"


def lr_setting_methods(structure: Structure, groups: set) -> FrozenSet[str]:
    """Methods of the module's classes that set an optimizer's learning rate themselves (`def
    warmup_step(self): for g in self.optimizer.param_groups: g["lr"] = ...`): called on a scheduler,
    they are its step, whatever their name. (`step` and `step_update` are a scheduler's step already.)
    `groups`: param_group_vars(structure)."""
    return frozenset(
        site.scope.name.rsplit(".", 1)[-1]
        for node, site in structure.statements
        if isinstance(node, cst.Assign) and site.scope.class_name and site.scope.parent is None
        and any(isinstance(t.target, cst.Subscript) and _is_lr_slot(t.target, site, groups) for t in node.targets)
    ) - {"step", "step_update", "__init__"}


def lr_schedule_classes(structure: Structure, groups: set) -> FrozenSet[str]:
    """Classes of the module whose `step()` (or `step_update()`) sets an optimizer's learning rate, itself or
    through another method of the class (`def step(self): ... return self.set_lr(lr)`): schedules, whatever
    they derive from. `groups`: param_group_vars(structure)."""
    setting: Dict[str, Set[str]] = {}  # class -> its methods that set the LR themselves
    for node, site in structure.statements:
        if isinstance(node, cst.Assign) and site.scope.class_name and site.scope.parent is None and any(
                isinstance(t.target, cst.Subscript) and _is_lr_slot(t.target, site, groups) for t in node.targets):
            setting.setdefault(site.scope.class_name, set()).add(site.scope.name.rsplit(".", 1)[-1])
    found = {c for c, methods in setting.items() if methods & {"step", "step_update"}}
    wrappers = set()  # (a Noam-style wrapper whose step() also steps the optimizer it holds is an optimizer: steplint.model.inner_schedules)
    for call, site in structure.calls:
        scope = site.scope
        func = call.func
        if scope.class_name not in setting or scope.name.rsplit(".", 1)[-1] not in ("step", "step_update") or not isinstance(func, cst.Attribute):
            continue
        if isinstance(func.value, cst.Name) and func.value.value == scope.self_name and func.attr.value in setting[scope.class_name]:
            found.add(scope.class_name)
        elif func.attr.value == "step":
            wrappers.add(scope.class_name)
    return frozenset(found - wrappers)


def _is_lr_slot(target: cst.Subscript, site: Site, param_group_vars: set) -> bool:
    """`g["lr"]` for a param group `g`, or `optimizer.param_groups[i]["lr"]`."""
    if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
        return False
    index = target.slice[0].slice.value
    if not (isinstance(index, cst.SimpleString) and index.evaluated_value == "lr"):
        return False
    base = target.value
    if isinstance(base, cst.Name):
        return (id(site.scope), base.value) in param_group_vars
    if isinstance(base, cst.Subscript) and isinstance(base.value, cst.Attribute) and base.value.attr.value == "param_groups":
        return True
    return False


def _adds_one(value: cst.BaseExpression) -> bool:
    """`+= 1`, or `+= 1 if boundary else 0` (steplint.model.structure guards it by its test)."""
    if isinstance(value, cst.IfExp):
        arms = {getattr(value.body, "value", None), getattr(value.orelse, "value", None)}
        return isinstance(value.body, cst.Integer) and isinstance(value.orelse, cst.Integer) and arms == {"1", "0"}
    return isinstance(value, cst.Integer) and value.value == "1"


def _is_self_increment(target: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    """`n = n + 1`."""
    return (
        isinstance(value, cst.BinaryOperation)
        and isinstance(value.operator, cst.Add)
        and isinstance(value.right, cst.Integer)
        and value.right.value == "1"
        and dotted(value.left) is not None
        and dotted(value.left) == dotted(target)
    )

