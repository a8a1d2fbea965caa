"""What a module tells the rest of its project: its imports and, per function and method, the step
effects it has on its parameters, its `self` attributes and its return value.

Summaries are plain data (dataclasses of strings, lists and dicts) so that they can be cached by
content hash and sent to worker processes. A place is written as text:

- `param:NAME`    a parameter of the function (`self` excluded)
- `self.ATTR`     an attribute of the instance (`self.sched.inner` for a nested one)
- `local:NAME`    a local variable: seen by the function itself only, never by its callers
- `star:N`        the N-th value of `*args` (positional arguments past the named parameters)
- `kwargs`        the keyword arguments gathered by `**kwargs`
- `module:NAME`   a module holding step state for the whole process (`module:apex.amp`), as imported
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

# What a function does to a place (steplint.effects, shared with the model that reads it), named
# here too because the summaries are written in it.
from steplint.effects import (  # noqa: F401
    CLIP, FRESH_SCALER, INCREMENT, LOAD, POSITIONED_STEP, REDUCE, RETURNS_COMMIT, RETURNS_REDUCED, SAVE, SCALED_BACKWARD, SCALER_UPDATE, SCHEDULER_STEP,
    UNSCALE, UPDATE, Effect,
)

SUMMARY_FORMAT = 22  # part of the cache key: change it when the summaries change meaning

@dataclass
class CallRecord:
    """A call that may run a function of the project, with what the caller passes."""

    callee: str  # the callee as written: `save_checkpoint`, `utils.save_on_master`, `self.step`, `self.opt.step_all`
    args: List[str] = field(default_factory=list)  # place of each positional argument in the caller ("" if none)
    arg_roles: List[Optional[str]] = field(default_factory=list)
    kwargs: Dict[str, str] = field(default_factory=dict)  # keyword -> place
    kwarg_roles: Dict[str, Optional[str]] = field(default_factory=dict)
    literals: Dict[str, object] = field(default_factory=dict)  # position ("0", "1", ...) or keyword -> the integer or bool passed as written
    nones: List[str] = field(default_factory=list)  # positions or keywords passed `None` as written (`scaler=None`)
    classes: Dict[str, str] = field(default_factory=dict)  # position ("0", ...) or keyword -> the callee of the project that built the local passed
    constructors: Dict[str, str] = field(default_factory=dict)  # position or keyword -> the import-resolved class or factory that built a scheduler passed ("" unknown), where the call may run as launched
    starred: bool = False  # it passes `*args` or `**kwargs`: what reaches which parameter is not visible
    looped: bool = False
    rank_guarded: bool = False
    line: int = 0


@dataclass
class FunctionSummary:
    name: str  # `train_one_epoch`, `Trainer.step`
    params: List[str] = field(default_factory=list)  # named parameters, in order, without `self`
    line: int = 0
    effects: List[Effect] = field(default_factory=list)
    calls: List[CallRecord] = field(default_factory=list)
    returns: Optional[str] = None  # the role of what it returns (`build_scaler` returns a scaler)
    returns_constructor: Optional[str] = None  # the torch class or factory that built the scheduler it returns (`return LambdaLR(...)`)
    returns_each: List[Optional[str]] = field(default_factory=list)  # the role of each value of a tuple it returns (`return optimizer, scheduler`)
    returns_none_at: List[int] = field(default_factory=list)  # positions of that tuple that may hold None (`scheduler = None` on some path)
    class_name: Optional[str] = None
    returns_class: Optional[str] = None  # the class its instances come from: `-> Optimizers`, `return Optimizers(...)`
    local_classes: Dict[str, str] = field(default_factory=dict)  # local -> the callee that built it (`ckpt = CheckPoint(dir)`), as written
    returns_options: Optional[str] = None  # it returns the module's parsed command-line options, or their parser (steplint.model.options)
    defaults: Dict[str, object] = field(default_factory=dict)  # parameter -> its default, where that is an integer or bool literal, or PASSED_NONE for `None`


@dataclass
class ModuleSummary:
    path: str
    imports: Dict[str, str] = field(default_factory=dict)  # local name -> qualified name as imported
    functions: Dict[str, FunctionSummary] = field(default_factory=dict)
    attribute_classes: Dict[str, Dict[str, str]] = field(default_factory=dict)  # class -> attr -> its class or the callee that built it
    star_modules: List[str] = field(default_factory=list)  # modules it imports with `*` (a package re-exporting them)
    switched_on: List[str] = field(default_factory=list)  # "callee|keyword": a call passes the keyword a value that may be true
    resumes: bool = False  # the module can resume a run (restores an optimizer's state, or through a framework)
    class_bases: Dict[str, List[str]] = field(default_factory=dict)  # class -> its base classes, as written
    command_line: Optional[dict] = None  # the options it declares, when a function returns them (CommandLine.declarations)
    lr_methods: List[str] = field(default_factory=list)  # methods of its classes that set an optimizer's LR (steplint.model.events.lr_setting_methods)
    search_folders: List[str] = field(default_factory=list)  # folders it puts on sys.path by name (`sys.path.append(os.path.join(root, "train"))`: train)
    inner_schedules: Dict[str, list] = field(default_factory=dict)  # class -> [counter, line]: a schedule its step() keeps, left out of its state_dict()
    lr_classes: List[str] = field(default_factory=list)  # its classes whose step() sets an optimizer's LR (steplint.model.events.lr_schedule_classes)

    @staticmethod
    def from_dict(data: dict) -> "ModuleSummary":
        functions = {}
        for name, f in data["functions"].items():
            f = dict(f)
            f["effects"] = [Effect(**e) for e in f["effects"]]
            f["calls"] = [CallRecord(**c) for c in f["calls"]]
            functions[name] = FunctionSummary(**f)
        return ModuleSummary(
            data["path"], dict(data["imports"]), functions, {k: dict(v) for k, v in data["attribute_classes"].items()}, list(data.get("star_modules", ())),
            list(data.get("switched_on", ())), bool(data.get("resumes", False)), {k: list(v) for k, v in data.get("class_bases", {}).items()},
            data.get("command_line"), list(data.get("lr_methods", ())), list(data.get("search_folders", ())),
            {k: list(v) for k, v in data.get("inner_schedules", {}).items()}, list(data.get("lr_classes", ())),
        )
