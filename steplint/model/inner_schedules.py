"""Schedules an optimizer keeps inside itself (SL302, SL303).

A Noam-style optimizer wrapper, or a torch optimizer subclass, whose `step()` advances a counter of its own
(`self.step_num += 1`) and sets the learning rate of its param groups from it, is its own scheduler: that
counter is the schedule's position. A checkpoint stores the optimizer through its `state_dict()`; one that
leaves the counter out (a wrapper's own that hands back only the inner optimizer's state, or torch's
`Optimizer.state_dict()`, which holds per-parameter state and the param groups, not attributes) loses the
position, and a resumed run starts the warmup over. The classes of the module are read here; those of other
modules come with the project's summaries (ModuleContext.inner_schedules).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Optional, Tuple

import libcst as cst

from steplint.model.events import COUNTER_INCREMENT, SCHEDULER_STEP
from steplint.model.roles import OPTIMIZER
from steplint.model.syntax import dotted, walk_expressions

if TYPE_CHECKING:
    from steplint.model import ModuleModel


@dataclass(frozen=True)
class InnerSchedule:
    class_name: str
    counter: str  # the attribute its `step()` advances and sets the learning rate from: `step_num`
    where: str  # where the class is defined, for messages: `optim.py:12`, or `line 12` of this module


def own_inner_schedules(model: "ModuleModel") -> Dict[str, Tuple[str, int]]:
    """Classes of this module whose `state_dict()` leaves out the counter their `step()` sets the learning
    rate from -> (that counter, the class's line)."""

    def compute() -> Dict[str, Tuple[str, int]]:
        classes = {s.name.value: s for s in model.module.body if isinstance(s, cst.ClassDef)}
        lr_setters = {id(e.site.scope) for e in model.of_kind(SCHEDULER_STEP) if e.explicit_position and isinstance(e.node, cst.Assign)}
        found: Dict[str, Tuple[str, int]] = {}
        for increment in model.of_kind(COUNTER_INCREMENT):
            scope, subject = increment.site.scope, increment.subject
            node = classes.get(scope.class_name or "")
            # (in `step()` itself, or a method of the class it calls: `def _update_lr(self): self.step_num += 1`)
            if node is None or scope.parent is not None or _method(node, "step") is None:
                continue
            if not (isinstance(subject, cst.Attribute) and isinstance(subject.value, cst.Name) and subject.value.value == scope.self_name):
                continue
            # (the method sets the LR from it, or from a method that reads it: `self.cur_lr = self.lr * self._scale()`)
            sets_the_lr = id(scope) in lr_setters or "lr" in model.counters.feeds(increment)
            if sets_the_lr and not _state_dict_keeps(node, subject.attr.value):
                found[scope.class_name] = (subject.attr.value, model.text.rows(node)[0])
        return found

    return model.remember(("own_inner_schedules",), compute)


def _method(node: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
    return next((s for s in node.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name), None)


def _state_dict_keeps(node: cst.ClassDef, counter: str) -> bool:
    """The class's `state_dict()` holds the counter: its own reads `self.<counter>` (or the whole `__dict__`,
    `vars(self)`). A class without one of its own inherits one when it has bases (torch's `Optimizer.state_dict()`
    holds no attributes); a class without bases has none, and no checkpoint stores it through one."""
    method = _method(node, "state_dict")
    if method is None:
        return not node.bases
    for sub in walk_expressions(method.body):
        if isinstance(sub, cst.Attribute) and sub.attr.value in (counter, "__dict__"):
            return True
        if isinstance(sub, cst.Call) and isinstance(sub.func, cst.Name) and sub.func.value == "vars":
            return True
    return False


def inner_schedules(model: "ModuleModel") -> Dict[str, InnerSchedule]:
    """Optimizer keys of the module -> the schedule their class keeps inside and leaves out of its
    `state_dict()`: objects built by such a class of this module, or of another module of the project."""

    def compute() -> Dict[str, InnerSchedule]:
        own = own_inner_schedules(model)
        project = model.roles.project
        imported = project.inner_schedules if project is not None else {}
        handed = project.parameter_inner_schedules if project is not None else {}
        found: Dict[str, InnerSchedule] = {}
        for node, site in model.structure.statements:
            if not (isinstance(node, cst.Assign) and len(node.targets) == 1):
                continue
            if isinstance(node.value, cst.Call):
                inner = _schedule_of(dotted(node.value.func), own, imported, site.scope)
            else:  # (`self.optimizer = optimizer`, handed in by every caller: `Solver(data, model, NoamOpt(...))`)
                inner = _handed(node.value, handed, site.scope)
            target = node.targets[0].target
            if inner is not None and model.roles.is_(target, site.scope, OPTIMIZER):
                key = model.roles.key(target, site.scope)
                if key:
                    found[key] = inner
        return found

    return model.remember(("inner_schedules",), compute)


def _handed(value: cst.BaseExpression, handed: Dict[str, Dict[str, list]], scope) -> Optional[InnerSchedule]:
    """The inner schedule of the object every caller hands the parameter `value` of the function."""
    if not isinstance(value, cst.Name) or scope.parent is not None or scope.owner_of(value.value) is not scope:
        return None
    found = handed.get(scope.name, {}).get(value.value)
    return InnerSchedule(*found) if found else None


def _schedule_of(callee: Optional[str], own: Dict[str, Tuple[str, int]], imported: Dict[str, list], scope) -> Optional[InnerSchedule]:
    if callee is None:
        return None
    if callee in own and scope.owner_of(callee) is None:
        counter, line = own[callee]
        return InnerSchedule(callee, counter, f"line {line}")
    if callee in imported:
        class_name, counter, where = imported[callee]
        return InnerSchedule(class_name, counter, where)
    return None
