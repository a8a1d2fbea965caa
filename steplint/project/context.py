"""What the project tells the model of one module: the project functions its calls run (with their
composed effects), the roles its functions' parameters receive from callers, and which of their
scalers a caller updates. Plain data: the per-file lint stays a pure function of its inputs."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from typing import TYPE_CHECKING

from steplint.project.summary import Effect

if TYPE_CHECKING:  # (the index is built, and read from the cache, without the parser)
    import libcst as cst

    from steplint.model.structure import Scope


@dataclass
class Callee:
    name: str  # `save_checkpoint`, `Trainer.step`
    where: str  # `utils.py:41`
    params: List[str]
    effects: List[Effect]  # composed through the functions it calls, in its own places
    returns: Optional[str] = None  # the role of its return value
    self_prefix: Optional[str] = None  # its `self.x` is the caller's `self.<prefix>x` (None: not the caller's self)
    returns_each: List[Optional[str]] = field(default_factory=list)  # the role of each value of a tuple it returns
    returns_none_at: List[int] = field(default_factory=list)  # positions of that tuple that may hold None
    returns_options: Optional[str] = None  # it returns command-line options (or their parser) its module declares ...
    options: Optional[dict] = None  # ... these (steplint.model.options.CommandLine.declarations)
    returns_constructor: Optional[str] = None  # the torch class or factory that built the scheduler it returns


@dataclass
class ModuleContext:
    path: str  # relative to the project root
    calls: Dict[str, Callee] = field(default_factory=dict)  # "caller function|callee as written" -> callee
    parameter_roles: Dict[str, Dict[str, str]] = field(default_factory=dict)  # function -> parameter -> role from callers
    caller_updates: Dict[str, List[str]] = field(default_factory=dict)  # function -> parameters whose scaler a caller updates
    called: List[str] = field(default_factory=list)  # functions of the module that some function of the project calls
    called_elsewhere: List[str] = field(default_factory=list)  # ... that a function of another module calls
    switched_on: List[str] = field(default_factory=list)  # keywords some call of the project passes a value that may be true
    resumed_by_a_caller: bool = False  # a module that calls this one's functions can resume a run (`main.py` resuming, `train.py` saving)
    # Command-line options a run of the module as a script may be given, as the project's launch files
    # show (steplint.project.launches; `-` written `_`, "*" for any); None: no launch facts read.
    launch_options: Optional[List[str]] = None
    launch_values: Optional[List[Dict[str, Optional[str]]]] = None  # per launch line naming the module: option -> value as written ("" a flag, None a variable)
    configured_options: List[str] = field(default_factory=list)  # keys the project's config files set true
    switched_off_keys: List[str] = field(default_factory=list)  # config key paths set false, each time, and never true (`train.fp16_run`)
    contested_globals: List[str] = field(default_factory=list)  # globals the project's modules set to more than one value
    switches_set_true: List[str] = field(default_factory=list)  # keys of loss-scaling switches some config, launch or code sets true
    switches_given_to_scripts: List[str] = field(default_factory=list)  # loss-scaling switches a launch line gives the script it names
    configured_values: Dict[str, List[str]] = field(default_factory=dict)  # precision key or number key path -> the values the configs give it (nothing else sets it)
    precisions_configured: List[str] = field(default_factory=list)  # each value a config file gives a key named `precision` (Lightning's Trainer)
    precision_keys_configured: Dict[str, List[str]] = field(default_factory=dict)  # each precision key a config file gives a value, whatever else sets it -> those values
    torch_subclasses: Dict[str, str] = field(default_factory=dict)  # imported name -> the torch scheduler or optimizer its class of the project derives from
    scheduler_methods: List[str] = field(default_factory=list)  # methods that set an optimizer's LR in some class of the project (ModuleSummary.lr_methods)
    parameter_values: Dict[str, Dict[str, object]] = field(default_factory=dict)  # function -> parameter -> the integer or bool every call of the project leaves it at, or PASSED_NONE
    inner_schedules: Dict[str, list] = field(default_factory=dict)  # a class called as written (`optim.NoamOpt`) -> [class, counter, where]: steplint.model.inner_schedules
    parameter_inner_schedules: Dict[str, Dict[str, list]] = field(default_factory=dict)  # function -> parameter -> [class, counter, where] of what every caller hands it
    parameter_constructors: Dict[str, Dict[str, str]] = field(default_factory=dict)  # function -> parameter -> the class or factory that built the scheduler every caller hands it

    def fingerprint(self) -> str:
        """A hash of everything the lint of the module reads from the project (for cache keys)."""
        # (vars for each dataclass, not asdict: the same fields, without asdict's deep copies)
        return hashlib.sha256(json.dumps(self, default=vars, sort_keys=True).encode()).hexdigest()

    def callee(self, call: cst.Call, scope: Scope) -> Optional[Callee]:
        text = callee_text(call, scope)
        return self.calls.get(f"{top_scope(scope).name}|{text}") if text else None

    def argument(self, callee: Callee, place: str, call: cst.Call, scope: Scope) -> Optional[cst.BaseExpression]:
        """The caller's expression for a callee's place: an argument, or the caller's `self.x`."""
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        if place.startswith("param:"):
            name = place[len("param:"):]
            index = callee.params.index(name) if name in callee.params else len(positional)
            if index < len(positional) and not any(a.star for a in call.args[:index + 1]):
                return positional[index]
            return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)
        if place.startswith("star:"):
            index = len(callee.params) + int(place[len("star:"):])
            return positional[index] if index < len(positional) and not any(a.star for a in call.args[:index + 1]) else None
        if place.startswith("self.") and callee.self_prefix is not None and scope.self_name:
            import libcst as cst

            return cst.parse_expression(f"{scope.self_name}.{callee.self_prefix}{place[len('self.'):]}")
        return None

    def argument_roles(self, call: cst.Call, scope: Scope) -> List[Tuple[cst.BaseExpression, str]]:
        """Roles the callee gives what the caller passes (a parameter it steps as a scaler is a scaler)."""
        callee = self.callee(call, scope)
        found = []
        for effect in callee.effects if callee is not None else ():
            for where, role in ((effect.place, effect.role), (effect.other, "optimizer" if effect.other else None)):
                expression = self.argument(callee, where, call, scope) if role and where else None
                if type(expression).__name__ in ("Name", "Attribute"):
                    found.append((expression, role))
        return found

    def returned_role(self, call: cst.Call, scope: Scope) -> Tuple[Optional[str], Optional[str]]:
        """(the role of what the callee returns, the torch class or factory that built it when it is a scheduler)."""
        callee = self.callee(call, scope)
        return (callee.returns, callee.returns_constructor) if callee is not None else (None, None)

    def returned_roles(self, call: cst.Call, scope: Scope) -> List[Tuple[Optional[str], bool]]:
        """The role of each value of the tuple the callee returns (`optimizer, scheduler = build(...)`), and
        whether it may be None."""
        callee = self.callee(call, scope)
        return [(role, i in callee.returns_none_at) for i, role in enumerate(callee.returns_each)] if callee is not None else []


def top_scope(scope: Scope) -> Scope:
    """The function (or method) that holds a nested function: summaries are per top-level function."""
    while scope.parent is not None:
        scope = scope.parent
    return scope


def callee_text(call: cst.Call, scope: Scope) -> Optional[str]:
    """The callee as the summaries write it: dotted, with the method's own name for `self` spelled `self`."""
    from steplint.model.syntax import dotted

    text = dotted(call.func)
    if text is None:
        return None
    head, dot, rest = text.partition(".")
    return f"self{dot}{rest}" if scope.self_name and head == scope.self_name else text
