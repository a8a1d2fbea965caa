"""The summary of one module, read off its model: a pure function of the file's text."""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Dict, List, Optional

import libcst as cst

from steplint.effects import PASSED_NONE
from steplint.model import (
    CHECKPOINT_SAVE,
    CLIP,
    COLLECTIVE,
    COUNTER_INCREMENT,
    SCALED_BACKWARD,
    SCALER_UPDATE,
    SCHEDULER_STEP,
    SKIPPABLE_STEP,
    STATE_LOAD,
    UNSCALE,
    ModuleModel,
)
from steplint.model.events import CALL, copies_live_state
from steplint.model.guards import COMMIT_GATE, RANK
from steplint.model.inner_schedules import own_inner_schedules
from steplint.model.options import returned_options
from steplint.model.roles import SCALER, SCALER_OFF, SCHEDULER, STATEFUL_MODULES, own_imports
from steplint.model.structure import Scope, Site
from steplint.model.state import reads_an_entry
from steplint.model.syntax import assignment_targets, dotted, last_name, literal, walk_expressions
from steplint.project import summary as s
from steplint.project.context import callee_text, top_scope

# Calls of these never run project code.
_EXTERNAL = ("torch.", "numpy.", "math.", "os.", "sys.", "time.", "logging.", "json.", "re.", "random.", "copy.", "deepspeed.",
             "accelerate.", "transformers.", "timm.", "typing.", "collections.", "functools.", "itertools.", "pathlib.", "wandb.")
_ACTIONS = {
    SCHEDULER_STEP: s.SCHEDULER_STEP, SCALER_UPDATE: s.SCALER_UPDATE, UNSCALE: s.UNSCALE, SCALED_BACKWARD: s.SCALED_BACKWARD,
    CLIP: s.CLIP, STATE_LOAD: s.LOAD, COUNTER_INCREMENT: s.INCREMENT,
}


def place(expr: Optional[cst.BaseExpression], scope: Scope) -> str:
    """How a function names an expression to its callers (see steplint.project.summary)."""
    text = dotted(expr) if expr is not None else None
    if text is None or scope.name == "<module>":
        return ""
    head, _, rest = text.partition(".")
    if scope.self_name and head == scope.self_name and scope.owner_of(head) in (None, top_scope(scope)):
        return f"self.{rest}" if rest else ""
    names = _parameter_names(scope)
    if rest:
        return ""
    if head in names:
        return f"param:{head}"
    if head == _star_name(scope, "star_kwarg"):
        return "kwargs"
    if head in scope.local_names:
        return f"local:{head}"
    # (a nested function acts through the function that holds it, on the names it reads from there)
    return place(expr, scope.parent) if scope.parent is not None else ""


def _parameter_names(scope: Scope) -> List[str]:
    names = [p.name.value for p in scope.params]
    return names[1:] if scope.self_name and scope.parent is None and names and names[0] == scope.self_name else names


def _star_name(scope: Scope, which: str) -> Optional[str]:
    node = scope.node
    star = getattr(node.params, which, None) if isinstance(node, cst.FunctionDef) else None
    return star.name.value if isinstance(star, cst.Param) else None


def summarize(model: ModuleModel, relative_path: str) -> s.ModuleSummary:
    summary = s.ModuleSummary(
        relative_path, dict(model.imports.names), star_modules=list(model.imports.star_modules), switched_on=sorted(model.guards.switched_on_calls),
        resumes=model.state.resumes_here, lr_methods=sorted(model.roles.own_scheduler_methods), lr_classes=sorted(model.roles.own_schedule_classes), search_folders=_search_folders(model),
        inner_schedules={name: list(found) for name, found in sorted(own_inner_schedules(model).items())},
    )
    for scope in model.structure.scopes:  # (names a function imports for itself: the index resolves its calls with them)
        for name, qualified in scope.imports.items() if scope.name != "<module>" else ():
            summary.imports.setdefault(name, qualified)
    lines = _definition_lines(model.source.text)
    functions: Dict[int, s.FunctionSummary] = {}
    for scope in model.structure.scopes:
        if scope.name == "<module>" or scope.parent is not None:
            continue  # nested functions act through the function that holds them
        returns = scope.node.returns.annotation if isinstance(scope.node, cst.FunctionDef) and scope.node.returns else None
        functions[id(scope)] = summary.functions[scope.name] = s.FunctionSummary(
            scope.name, _parameter_names(scope), lines.get(scope.name, 0), class_name=scope.class_name, returns_class=dotted(returns),
            defaults={p.name.value: literal(p.default) if type(literal(p.default)) in (int, bool) else PASSED_NONE for p in scope.params
                      if p.default is not None and (type(literal(p.default)) in (int, bool) or isinstance(p.default, cst.Name) and p.default.value == "None")},
        )
    summary.functions["<module>"] = s.FunctionSummary("<module>")

    def owner(site: Site) -> Optional[s.FunctionSummary]:
        scope = top_scope(site.scope)
        return summary.functions["<module>"] if scope.name == "<module>" else functions.get(id(scope))

    for event in model.events:
        function = owner(event.site)
        effect = _effect(model, event) if function is not None and function.name != "<module>" else None
        if effect is not None:
            effect.via, effect.where = function.name, f"{relative_path}:{function.line}"
            function.effects.append(effect)
    for scope, key in model.state.fresh_scalers:
        function = functions.get(id(scope))
        if function is not None:
            function.effects.append(s.Effect(s.FRESH_SCALER, other=key.split(":", 1)[1], via=function.name, where=f"{relative_path}:{function.line}"))
    defined = {st.name.value for st in model.module.body if isinstance(st, (cst.FunctionDef, cst.ClassDef))}
    for statement in model.module.body:
        if isinstance(statement, cst.ClassDef):
            bases = [dotted(b.value) for b in statement.bases if b.keyword is None and not b.star]
            if any(bases):
                summary.class_bases[statement.name.value] = [b for b in bases if b]
    loads = {id(event.node) for event in model.of_kind(STATE_LOAD)}
    for call, site in model.structure.calls:
        function = owner(site)
        if function is not None and function.name != "<module>" and id(call) not in loads:
            effect = _load_into_parameter(model, call, site)
            if effect is not None:
                effect.via, effect.where = function.name, f"{relative_path}:{function.line}"
                function.effects.append(effect)
        record = _call_record(model, call, site, defined, function) if function is not None else None
        if record is not None:
            function.calls.append(record)
    resuming = {f.name for f in summary.functions.values() if any(e.action == s.LOAD for e in f.effects)}
    for node, site in model.structure.statements:
        function = owner(site)
        if function is None or function.name == "<module>":
            continue
        if isinstance(node, cst.Assign) and function.name in resuming and reads_an_entry(node.value):
            _read_back(node, site, function)
        if isinstance(node, cst.Return) and node.value is not None:
            _returns(model, node.value, site, function)
        elif isinstance(node, (cst.Assign, cst.AnnAssign)) and site.scope.class_name:
            _attribute_class(node, site.scope, summary.attribute_classes.setdefault(site.scope.class_name, {}))
    if any(f.returns_options for f in summary.functions.values()):
        summary.command_line = model.roles.command_line.declarations()
    return summary


def _read_back(node: cst.Assign, site: Site, function: s.FunctionSummary) -> None:
    """In a function that restores state, an attribute set from an entry of what it loaded
    (`self.epoch = state["epoch"]`) is read back for the caller's instance too."""
    for target in assignment_targets(node):
        where = place(target, site.scope)
        if where.startswith("self."):
            function.effects.append(s.Effect(s.LOAD, where, via=function.name))


def _flags(model: ModuleModel, site: Site) -> dict:
    return {"looped": bool(site.loops), "rank_guarded": bool(model.guards.of_kind(site, RANK))}


def _effect(model: ModuleModel, event) -> Optional[s.Effect]:
    scope = event.site.scope
    flags = _flags(model, event.site)
    role = event.role.kind if event.role is not None else None
    if event.kind == SKIPPABLE_STEP and event.strategy != CALL:
        return s.Effect(s.UPDATE, place(event.subject, scope), role, place(event.optimizer, scope), **flags)
    if event.kind in _ACTIONS:
        if event.kind == SCHEDULER_STEP and (role != SCHEDULER or not isinstance(event.node, cst.Call)):
            return None
        # (told its position by the method itself, `step_update(n)`, or once, outside any loop, by a scheduler that takes no
        # metric: `margin_scheduler.step(current_step=n)`; `step(x)` in a loop may be handed a metric), or replayed to it
        told_once = event.explicit_position and event.site.loop is None and not event.role.metric
        if event.kind == SCHEDULER_STEP and (last_name(event.node.func) == "step_update" or told_once or model.state.replayed_scheduler(event)):
            return s.Effect(s.POSITIONED_STEP, place(event.subject, scope), role, **flags)
        return s.Effect(_ACTIONS[event.kind], place(event.subject, scope), role, place(event.optimizer, scope), **flags)
    if event.kind == COLLECTIVE and isinstance(event.node, cst.Call) and event.node.args:
        return s.Effect(s.REDUCE, place(event.node.args[0].value, scope), **flags)
    if event.kind == CHECKPOINT_SAVE and model.roles.qualified(event.node.func, scope) == "torch.save" and event.node.args:
        named_by = sorted({where for path in model.state.path_expressions(event) for sub in walk_expressions(path)
                           if isinstance(sub, cst.Name) and (where := place(sub, scope)).startswith("param:")})
        saved = event.node.args[0].value
        owner = saved.func.value if isinstance(saved, cst.Call) and isinstance(saved.func, cst.Attribute) and saved.func.attr.value == "state_dict" and not saved.args else None
        return s.Effect(s.SAVE, stored=_stored_place(event.node.args[0], scope), contents=_contents(model, event), named_by=named_by,
                        stored_state=place(owner, scope) if owner is not None else "", **flags)
    return None


def _load_into_parameter(model: ModuleModel, call: cst.Call, site: Site) -> Optional[s.Effect]:
    """`schedule.load_state_dict(state)` on a parameter whose role the helper cannot tell: it restores
    whatever its caller hands it, and the caller knows what that is. Or on a module holding step state
    for the whole process (`amp.load_state_dict(ckpt["amp"])`): it restores the caller's too."""
    receiver = call.func.value if isinstance(call.func, cst.Attribute) and call.func.attr.value == "load_state_dict" else None
    where = place(receiver, site.scope) or _module_place(model, receiver, site.scope)
    if not where.startswith(("param:", "module:")) or not call.args or copies_live_state(call.args[0].value):
        return None
    return s.Effect(s.LOAD, where, STATEFUL_MODULES.get(where[len("module:"):]), **_flags(model, site))


def _module_place(model: ModuleModel, expr: Optional[cst.BaseExpression], scope: Scope) -> str:
    """`module:apex.amp` for a name the module or function imports as a module of STATEFUL_MODULES."""
    if isinstance(expr, cst.Name) and scope.owner_of(expr.value) is None:
        qualified = model.roles.qualified(expr, scope)
        if qualified in STATEFUL_MODULES:
            return f"module:{qualified}"
    return ""


def _stored_place(argument: cst.Arg, scope: Scope) -> str:
    if argument.star == "*":
        return "star:0" if dotted(argument.value) == _star_name(scope, "star_arg") else ""
    return place(argument.value, scope)


def _contents(model: ModuleModel, save) -> Dict[str, List[Optional[str]]]:
    checkpoint = model.state.checkpoint(save)
    contents: Dict[str, List[Optional[str]]] = {}
    scope = save.site.scope
    for key, value in (checkpoint.entries if checkpoint is not None else {}).items():
        for sub in walk_expressions(value):
            if isinstance(sub, (cst.Name, cst.Attribute)):
                where = place(sub, scope) or _module_place(model, sub, scope)
                role = model.roles.of(sub, scope)
                if where or role is not None:
                    contents[key] = [where, role.kind if role is not None else None]
                    break
        else:
            contents[key] = ["", None]
    return contents


def _call_record(model: ModuleModel, call: cst.Call, site: Site, defined: set, function: s.FunctionSummary) -> Optional[s.CallRecord]:
    scope = site.scope
    callee = callee_text(call, scope)
    if callee is None:
        return None
    head = callee.split(".")[0]
    qualified = _imported(model, head, scope)
    built = _local_class_of(model, head, scope)
    if built is not None:  # a method of an object the function builds from a class of the project (`ckpt.save(...)`)
        function.local_classes[head] = built
    elif not (head == "self" and scope.self_name or (qualified is not None and not (qualified + ".").startswith(_EXTERNAL)) or (head in defined and "." not in callee)):
        return None
    elif scope.owner_of(head) is not None and head != "self":
        return None  # a local variable that shadows the name
    record = s.CallRecord(callee, **_flags(model, site))
    runs = model.roles.command_line.never_runs(site) is None
    for arg in call.args:
        if arg.star:
            record.starred = True
            break
        value = literal(arg.value)
        position = arg.keyword.value if arg.keyword is not None else str(len(record.args))
        if type(value) in (int, bool):
            record.literals[position] = value
        elif isinstance(arg.value, cst.Name) and arg.value.value == "None":
            record.nones.append(position)
        built = _local_class_of(model, arg.value.value, scope) if isinstance(arg.value, cst.Name) else None
        if built:  # (`Solver(data, model, optimizer, args)` with `optimizer = NoamOpt(...)`: what the callee is handed)
            record.classes[position] = built
        role = model.roles.value_role(arg.value, scope)
        if role is not None and role.kind == SCHEDULER and runs:  # (`Trainer(args, optimizer, lr_scheduler)` after `lr_scheduler = get_linear_schedule_with_warmup(...)`)
            record.constructors[position] = role.constructor or ""
        kind = (SCALER_OFF if role.kind == SCALER and role.enabled is False else role.kind) if role else None
        if arg.keyword is None:
            record.args.append(place(arg.value, scope))
            record.arg_roles.append(kind)
        else:
            record.kwargs[arg.keyword.value] = place(arg.value, scope)
            record.kwarg_roles[arg.keyword.value] = kind
    return record


def _local_class(node, scope: Scope, found: Dict[str, str]) -> None:
    """`ckpt = CheckPoint(run_dir)`: the callee that built a local, as written, when it is the only
    thing the function assigns to it ("" once it is assigned anything else)."""
    targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target] if isinstance(node, (cst.AnnAssign, cst.AugAssign)) else []
    for target in targets:
        if not isinstance(target, cst.Name) or target.value not in scope.local_names:
            continue
        built = dotted(node.value.func) if isinstance(node, cst.Assign) and len(targets) == 1 and isinstance(node.value, cst.Call) else None
        name = target.value
        found[name] = built if built and found.get(name, built) == built else ""


def _local_class_of(model: ModuleModel, head: str, scope: Scope) -> Optional[str]:
    """The callee that built local `head` of the function holding `scope`, if it names a class or
    function of the project (an import from outside the libraries, or a definition of the module)."""
    top = top_scope(scope)
    at_module_level = top.name == "<module>" and head in top.local_names  # (a global the module builds, `trainer = Trainer(cfg)`)
    if head == "self" or not at_module_level and scope.owner_of(head) is not top:
        return None
    built = _built_locals(model, top).get(head)
    if not built:
        return None
    first = built.split(".")[0]
    qualified = _imported(model, first, top)
    if qualified is not None:
        return built if not (qualified + ".").startswith(_EXTERNAL) else None
    return built if "." not in built and any(isinstance(st, cst.ClassDef) and st.name.value == built for st in model.module.body) else None


def _search_folders(model: ModuleModel) -> List[str]:
    """The folders the module puts on `sys.path`, by the last name its path spells out
    (`sys.path.append(os.path.join(now_dir, "train"))`, `sys.path.insert(0, "../common")`)."""
    found = set()
    for call, site in model.structure.calls:
        if dotted(call.func) in ("sys.path.append", "sys.path.insert") and call.args:
            path = call.args[-1].value
            names = [literal(sub) for sub in walk_expressions(path) if isinstance(sub, cst.SimpleString)]
            last = names[-1].rstrip("/").rsplit("/", 1)[-1] if names and isinstance(names[-1], str) else ""
            if last and last not in (".", ".."):
                found.add(last)
    return sorted(found)


def _imported(model: ModuleModel, name: str, scope: Scope) -> Optional[str]:
    """What `name` was imported as: by the module, or by the function itself (`from base import Trainer`
    inside `main()`, the folder of `base` put on `sys.path` just before)."""
    return model.imports.names.get(name) or own_imports(scope).get(name)


def _built_locals(model: ModuleModel, top: Scope) -> Dict[str, str]:
    def compute() -> Dict[str, str]:
        found: Dict[str, str] = {}
        for node, site in model.statements_of(top):
            _local_class(node, top, found)
        return found
    return model.remember(("built_locals", id(top)), compute)


def _attribute_class(node, scope: Scope, found: Dict[str, str]) -> None:
    """`self.opt = Optimizers(...)`, `self.opt = self.setup_optimizers()`, `self.opt: Optimizers = ...`:
    what (class, or callee whose result) the attribute holds, as written."""
    targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
    if len(targets) != 1 or not place(targets[0], scope).startswith("self."):
        return
    attribute = place(targets[0], scope)[len("self."):]
    if isinstance(node, cst.AnnAssign) and dotted(node.annotation.annotation):
        found[attribute] = dotted(node.annotation.annotation)  # type: ignore[assignment]
    elif isinstance(node.value, cst.Call) and dotted(node.value.func) and attribute not in found:
        found[attribute] = dotted(node.value.func)  # type: ignore[assignment]


def _returns(model: ModuleModel, value: cst.BaseExpression, site: Site, function: s.FunctionSummary) -> None:
    scope = site.scope
    if isinstance(value, cst.Call) and function.returns_class is None:
        function.returns_class = dotted(value.func)
    role = model.roles.value_role(value, scope)
    if role is not None:
        function.returns = role.kind
        function.returns_constructor = role.constructor if role.kind == SCHEDULER else None
    if isinstance(value, cst.Tuple) and not any(isinstance(e, cst.StarredElement) for e in value.elements):
        _returns_each(model, value, scope, function)
    options = returned_options(model.roles.command_line, value)
    if options is not None:
        function.returns_options = options
    if isinstance(value, cst.Name) and COMMIT_GATE in model.guards.flag_kinds(value, scope):
        function.effects.append(s.Effect(s.RETURNS_COMMIT, via=function.name))
    if any(e.node is value for e in model.of_kind(SKIPPABLE_STEP) if e.strategy != CALL and e.site is site):
        function.effects.append(s.Effect(s.RETURNS_COMMIT, via=function.name))
    reduced = {place(e.node.args[0].value, scope) for e in model.of_kind(COLLECTIVE) if e.site.scope is scope and e.node.args}
    if any(place(sub, scope) in reduced for sub in walk_expressions(value) if isinstance(sub, cst.Name)):
        function.effects.append(s.Effect(s.RETURNS_REDUCED, via=function.name))


def _returns_each(model: ModuleModel, value: cst.Tuple, scope: Scope, function: s.FunctionSummary) -> None:
    """The role of each value of a returned tuple (`return optimizer, scheduler`); two returns that
    disagree on a position tell nothing of it."""
    each = [r.kind if (r := model.roles.value_role(e.value, scope)) is not None else None for e in value.elements]
    if function.returns_each:
        same_length = len(function.returns_each) == len(each)
        each = [a if a == b else None for a, b in zip(function.returns_each, each)] if same_length else [None] * len(each)
    function.returns_each = each
    function.returns_none_at = sorted(set(function.returns_none_at) | {
        i for i, e in enumerate(value.elements) if literal(e.value) is None or model.roles.key(e.value, scope) in model.roles.maybe_none})


_DEFINITION = re.compile(r"^([ \t]*)(?:async[ \t]+)?(def|class)[ \t]+(\w+)", re.M)


def _definition_lines(text: str) -> Dict[str, int]:
    """Line of each top-level function and method (`Class.method`), read from the text."""
    found: Dict[str, int] = {}
    classes: List[tuple] = []  # (indent, name)
    line_of = _line_counter(text)
    for match in _DEFINITION.finditer(text):
        indent, kind, name = len(match.group(1).expandtabs()), match.group(2), match.group(3)
        while classes and classes[-1][0] >= indent:
            classes.pop()
        qualified = f"{classes[-1][1]}.{name}" if classes and kind == "def" else name
        found.setdefault(qualified, line_of(match.start()))
        if kind == "class":
            classes.append((indent, name))
    return found


def _line_counter(text: str):
    starts = [0] + [m.end() for m in re.finditer(r"\n", text)]
    return lambda offset: bisect_right(starts, offset)
