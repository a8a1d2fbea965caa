"""Events at the call sites of project functions: the call is where the caller's step does what the
callee's summary says (an update, an unscale, a clip, a save, a state load, a reduction).

The project index hands the model its summaries as data: `context` is a steplint.project ModuleContext,
read here through its `callee` and `argument` (the model does not import the project layer)."""

from __future__ import annotations

from typing import List

import libcst as cst

from steplint.model.events import (
    CALL,
    CHECKPOINT_SAVE,
    CLIP,
    COLLECTIVE,
    HELPER_STATE,
    SCALED_BACKWARD,
    SCALER_UPDATE,
    SKIPPABLE_STEP,
    STATE_LOAD,
    UNSCALE,
    Event,
)
from steplint import effects as s
from steplint.model.roles import OPTIMIZER, SCALE_HOLDERS, SCALER, SCHEDULER, Role, USE, module_binding

# Effects that happen once per call (not in a loop of the callee) and that the caller's own step
# order sees at the call: the call is the unscale, the clip, the scaled backward, the update.
_ONCE = {s.SCALER_UPDATE: SCALER_UPDATE, s.UNSCALE: UNSCALE, s.SCALED_BACKWARD: SCALED_BACKWARD, s.CLIP: CLIP, s.REDUCE: COLLECTIVE}
_STATE = (s.UPDATE, s.SCALED_BACKWARD, s.SCHEDULER_STEP)


def call_events(model, context) -> List[Event]:
    known = {}
    for event in model.events:
        known.setdefault(id(event.node), []).append(event)
    found: List[Event] = []
    targets = _call_targets(model)
    gate_vars = {call: target.value for call, target in targets.items() if isinstance(target, cst.Name)}
    for call, site in model.structure.calls:
        callee = context.callee(call, site.scope)
        if callee is None:
            continue
        here = known.get(id(call), [])

        def add(kind, effect, subject=None, role=None, optimizer=None, **extra):
            existing = next((e for e in here if e.kind == kind), None)
            if existing is not None:
                existing.via = existing.via or effect
                existing.gate_var = existing.gate_var or extra.get("gate_var")
                return
            event = Event(kind, call, site, subject=subject, role=role, optimizer=optimizer, via=effect, **extra)
            here.append(event)
            found.append(event)

        commits = any(e.action == s.RETURNS_COMMIT for e in callee.effects)
        # A helper that unscales before it clips does both in its own order: not a clip of scaled gradients.
        unscales = any(e.action == s.UNSCALE and not e.looped for e in callee.effects)
        for effect in callee.effects:
            if effect.action == s.LOAD and effect.place.startswith("local:"):
                # (a builder that restores what it builds and returns it: `optimizer, start = build_optimizer(cfg, model, resume)`)
                subject = _returned(callee, effect.role, targets.get(id(call)))
            else:
                subject = _handed(argument_at_call(model, context, callee, effect.place, call, site.scope)) if effect.place else None
            role = _role(model, subject, site.scope, effect.role)
            if effect.action == s.UPDATE and not effect.looped:
                add(SKIPPABLE_STEP, effect, subject=call.func, strategy=CALL, gate_var=gate_vars.get(id(call)) if commits else None)
            if effect.action == s.RETURNS_REDUCED:
                add(COLLECTIVE, effect, subject=call.func)
            if effect.action == s.CLIP and unscales:
                continue
            if effect.action in _ONCE and not effect.looped and (subject is not None or effect.action == s.CLIP):
                optimizer = context.argument(callee, effect.other, call, site.scope) if effect.other else None
                add(_ONCE[effect.action], effect, subject=subject, role=role, optimizer=optimizer)
            if effect.action in _STATE and subject is not None and role is not None and (role.kind in SCALE_HOLDERS or role.kind == SCHEDULER):
                found.append(Event(HELPER_STATE, call, site, subject=subject, role=role, via=effect))
            if effect.action == s.FRESH_SCALER:  # (no place of the caller's: its state stays in the callee)
                found.append(Event(HELPER_STATE, call, site, role=Role(SCALER, USE), via=effect))
            if effect.action == s.SAVE:
                add(CHECKPOINT_SAVE, effect, subject=call.func)
            if effect.action == s.LOAD and subject is not None and role is not None and (role.kind in SCALE_HOLDERS or role.kind in (OPTIMIZER, SCHEDULER)):
                found.append(Event(STATE_LOAD, call, site, subject=subject, role=role, via=effect))
    return found


def argument_at_call(model, context, callee, where: str, call, scope):
    """The caller's expression for a callee's place; for a stateful module (`module:apex.amp`), the
    caller's own name for that module, if it binds one."""
    if where.startswith("module:"):
        name = module_binding(model.imports.names, where[len("module:"):], scope)
        return cst.parse_expression(name) if name else None
    return context.argument(callee, where, call, scope)


def _handed(argument):
    """What an argument hands the callee: `scaler if amp else None` hands the scaler, or nothing; a
    literal `None` hands nothing (`load_checkpoint(pretrained, net, None)` restores no optimizer)."""
    if isinstance(argument, cst.Name) and argument.value == "None":
        return None
    if isinstance(argument, cst.IfExp):
        for value, other in ((argument.body, argument.orelse), (argument.orelse, argument.body)):
            if isinstance(other, cst.Name) and other.value == "None" and isinstance(value, (cst.Name, cst.Attribute)):
                return value
    return argument


def _role(model, subject, scope, known_in_callee):
    """The caller's role for what it passes, else the callee's."""
    role = model.roles.of(subject, scope) if isinstance(subject, (cst.Name, cst.Attribute)) else None
    if role is None and known_in_callee:
        role = Role(known_in_callee, USE)
    return role


def _returned(callee, role, target):
    """The caller's target that receives the one value of the callee's result with `role`: the whole
    result (`optimizer = build(...)`), or the element at the one position of a returned tuple with that
    role (`optimizer, start = build(...)`)."""
    if target is None:
        return None
    if not isinstance(target, (cst.Tuple, cst.List)):
        return target if not callee.returns_each and callee.returns == role else None
    elements = [e.value for e in target.elements if isinstance(e, cst.Element)]
    positions = [i for i, each in enumerate(callee.returns_each) if each == role]
    return elements[positions[0]] if len(positions) == 1 and len(elements) == len(target.elements) == len(callee.returns_each) else None


def _call_targets(model) -> dict:
    """id(call) -> what a call's result is assigned to, as written (`committed = step_helper(...)`,
    `optimizer, start = build_optimizer(...)`)."""
    return {id(node.value): node.targets[0].target for node, _ in model.structure.statements
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.value, cst.Call)}
