"""The project index: the summaries of a project's modules, calls resolved between them, and the
effects of each function composed through the functions it calls (bounded depth, cycle-safe)."""

from __future__ import annotations

import posixpath
from dataclasses import replace
from functools import cached_property
from typing import Dict, FrozenSet, List, Optional, Set, Tuple

from steplint.effects import OPTIMIZER_BASES, PASSED_NONE, PROJECT_LR_SCHEDULE, SCHEDULER_MODULES
from steplint.project import summary as s
from steplint.project.context import Callee, ModuleContext
from steplint.project.launches import Launches

MAX_DEPTH = 4  # calls of calls followed when composing effects
_OWN_RETURN = (s.RETURNS_COMMIT, s.RETURNS_REDUCED)  # about the callee's own return value: not passed on
Target = Tuple[str, s.FunctionSummary, Optional[str]]  # (module path, function, `self` prefix for its self.* places)


class ProjectIndex:
    def __init__(self, summaries: Dict[str, s.ModuleSummary], launches: Optional[Launches] = None, unseen_importers: FrozenSet[str] = frozenset()) -> None:
        self.modules = summaries  # by path relative to the project root, with "/"
        self.launches = launches
        self.unseen_importers = unseen_importers  # what a module with no summary may import and call unseen (steplint.project.build.unseen_importers)
        self._dotted = dotted_names(summaries)
        self._found_modules: Dict[Tuple[str, str], List[Tuple[str, str]]] = {}  # (importer's folder, name) -> modules_for
        self._composed: Dict[Tuple[str, str], List[s.Effect]] = {}
        self._resolved: Dict[Tuple[str, str, str], Optional[Target]] = {}
        self._incoming: Dict[Tuple[str, str], Dict[str, Optional[str]]] = {}
        self._passed: Dict[Tuple[str, str], Dict[str, Optional[int]]] = {}  # function -> parameter -> the integer every call leaves it at
        self._handed_schedules: Dict[Tuple[str, str], Dict[str, Optional[list]]] = {}  # function -> parameter -> the inner schedule of what every call hands it
        self._handed_constructors: Dict[Tuple[str, str], Dict[str, Optional[str]]] = {}  # function -> parameter -> what built the scheduler every call hands it
        self._caller_updates: Dict[Tuple[str, str], Set[str]] = {}
        self._called: Set[Tuple[str, str]] = set()
        self._called_elsewhere: Set[Tuple[str, str]] = set()  # called by a function of another module
        self._caller_modules: Dict[str, Set[str]] = {}  # module -> the modules whose functions call its functions
        self._resolved_calls = list(self._calls())
        self._link_roles()
        self._calls_linked = False  # the rest of what calls tell (_link_calls) waits for a module's view: a first index only lends its roles

    # -- resolving calls -------------------------------------------------------------------------

    def resolve(self, path: str, caller: s.FunctionSummary, callee: str) -> Optional[Target]:
        # (a method of a local object depends on what built it in that very function)
        key = (path, caller.name if callee.split(".")[0] in caller.local_classes else caller.class_name or "", callee)
        if key not in self._resolved:
            self._resolved[key] = self._resolve(path, caller, callee)
        return self._resolved[key]

    def _resolve(self, path: str, caller: s.FunctionSummary, callee: str) -> Optional[Target]:
        parts = callee.split(".")
        module = self.modules[path]
        if parts[0] == "self":
            if caller.class_name is None:
                return None
            if len(parts) == 2:
                found = self._method(path, caller.class_name, parts[1])
                return (found[0], found[1], "") if found else None
            if len(parts) == 3:
                built_by = self._attribute_built_by(path, caller.class_name, parts[1])
                holder = self._class_of(*built_by) if built_by else None
                found = self._method(*holder, parts[2]) if holder is not None else None
                return (found[0], found[1], parts[1] + ".") if found else None
            return None
        built_by = caller.local_classes.get(parts[0]) if len(parts) == 2 else None
        if built_by:  # `ckpt = CheckPoint(run_dir)`, then `ckpt.save(...)`
            holder = self._class_of(path, caller.class_name or "", built_by)
            found = self._method(*holder, parts[1]) if holder is not None else None
            return (found[0], found[1], None) if found is not None else None
        found = self._definition(path, callee)
        if found is None:
            return None
        function = self.modules[found[0]].functions.get(found[1])
        if function is None and _defines_class(self.modules[found[0]], found[1]):
            init = self._method(found[0], found[1], "__init__")  # (building an instance runs its `__init__`)
            return (init[0], init[1], None) if init is not None else None
        return (found[0], function, None) if function is not None and function.class_name is None else None

    def _bases(self, path: str, class_name: str) -> List[Tuple[str, str]]:
        """(module path, class) of each base class of the project that `class_name` names."""
        found = []
        for base in self.modules[path].class_bases.get(class_name, ()):
            where = self._definition(path, base)
            if where is not None and _defines_class(self.modules[where[0]], where[1]):
                found.append(where)
        return found

    def _method(self, path: str, class_name: str, method: str, hops: int = 3) -> Optional[Tuple[str, s.FunctionSummary]]:
        """(module path, summary) of `class_name.method`: defined by the class or inherited from a base
        class of the project (in the order Python looks, depth first as single inheritance has it)."""
        found = self.modules[path].functions.get(f"{class_name}.{method}")
        if found is not None:
            return path, found
        for base_path, base in self._bases(path, class_name) if hops else ():
            inherited = self._method(base_path, base, method, hops - 1)
            if inherited is not None:
                return inherited
        return None

    def _attribute_built_by(self, path: str, class_name: str, attribute: str, hops: int = 3) -> Optional[Tuple[str, str, str]]:
        """(module path, class, callee) that built `self.attribute` of the class, in it or a base class."""
        built_by = self.modules[path].attribute_classes.get(class_name, {}).get(attribute)
        if built_by:
            return path, class_name, built_by
        for base_path, base in self._bases(path, class_name) if hops else ():
            found = self._attribute_built_by(base_path, base, attribute, hops - 1)
            if found is not None:
                return found
        return None

    def _class_of(self, path: str, class_name: str, built_by: str, hops: int = 2) -> Optional[Tuple[str, str]]:
        """(module path, class) of an attribute's value: a class named directly, or the class that
        a function or method building it returns (`self.setup_optimizers()` -> `Optimizers`)."""
        module = self.modules[path]
        if built_by.startswith("self."):
            method = module.functions.get(f"{class_name}.{built_by[len('self.'):]}")
            found = (path, method.name) if method is not None else None
        else:
            found = self._definition(path, built_by)
        if found is None:
            return None
        function = self.modules[found[0]].functions.get(found[1])
        if function is None:
            return found if _defines_class(self.modules[found[0]], found[1]) else None
        if function.returns_class and hops:
            return self._class_of(found[0], function.class_name or "", function.returns_class, hops - 1)
        return None

    def _definition(self, path: str, name: str, hops: int = 3) -> Optional[Tuple[str, str]]:
        """(module path, local name) of what `name`, read in module `path`, stands for in the project."""
        module = self.modules[path]
        head, _, rest = name.partition(".")
        if head in module.imports:
            qualified = module.imports[head] + (f".{rest}" if rest else "")
            for target, attribute in self._modules_for(path, qualified) or self._on_a_search_path(path, qualified):
                if not attribute:
                    return None  # a module, not a function or class
                if attribute in self.modules[target].functions or "." not in attribute and _defines_class(self.modules[target], attribute):
                    return target, attribute
                if hops and attribute.split(".")[0] in self.modules[target].imports:  # re-exported by a package
                    return self._definition(target, attribute, hops - 1)
                if hops and "." not in attribute:  # or through `from .module import *`
                    for star in self.modules[target].star_modules:
                        for inner, name in self._modules_for(target, f"{star}.{attribute}" if not star.endswith(".") else star + attribute):
                            if name == attribute and (attribute in self.modules[inner].functions or _defines_class(self.modules[inner], attribute)):
                                return inner, attribute
            return None
        if not rest and (head in module.functions or _defines_class(module, head)):
            return path, head
        return None

    def _modules_for(self, importer: str, qualified: str) -> List[Tuple[str, str]]:
        # (the same for every module of a folder: a name imported across a package is looked up once)
        key = (posixpath.dirname(importer), qualified)
        if key not in self._found_modules:
            self._found_modules[key] = modules_for(self.modules, self._dotted, importer, qualified)
        return self._found_modules[key]

    def _on_a_search_path(self, importer: str, qualified: str) -> List[Tuple[str, str]]:
        """An absolute import found from no folder of the importer: the one module of the project whose
        dotted name ends with it (`from base import Trainer` for `common/base.py`, a folder the scripts
        put on `sys.path`), or of several, the one in a folder the importer puts there by name (`import
        utils` after `sys.path.append(os.path.join(now_dir, "train"))`). A caller takes it only if it
        defines the name imported."""
        parts = qualified.split(".")
        folders = set(self.modules[importer].search_folders)
        for cut in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:cut])
            paths = self._by_dotted_tail.get(module, ())
            if len(paths) > 1 and folders:  # (the folder that holds the module's first part)
                depth = module.count(".") + 1
                paths = [p for p in paths if posixpath.basename(posixpath.dirname(_strip_parts(p, depth))) in folders]
            if len(paths) == 1:
                return [(paths[0], ".".join(parts[cut:]))]
        return []

    @cached_property
    def _by_dotted_tail(self) -> Dict[str, List[str]]:
        return dotted_tails(self.modules)

    # -- composing effects -----------------------------------------------------------------------

    def effects(self, path: str, name: str) -> List[s.Effect]:
        """The function's effects with those of the project functions it calls, in its own places."""
        return self._compose(path, name, 0, set())

    def _compose(self, path: str, name: str, depth: int, active: Set[Tuple[str, str]]) -> List[s.Effect]:
        key = (path, name)
        if key in self._composed:
            return self._composed[key]
        function = self.modules[path].functions[name]
        found = list(function.effects)
        if depth >= MAX_DEPTH or key in active:
            return found  # a cycle or a deep chain: own effects only, and not remembered as complete
        active.add(key)
        for call in function.calls:
            target = self.resolve(path, function, call.callee)
            if target is None or (target[0], target[1].name) in active:
                continue
            for effect in self._compose(target[0], target[1].name, depth + 1, active):
                mapped = _through_call(effect, call, target[1], target[2])
                if mapped is not None:
                    found.append(mapped)
        active.discard(key)
        self._composed[key] = found
        return found

    # -- what callers tell callees ---------------------------------------------------------------

    def _calls(self):
        for path, module in self.modules.items():
            for function in module.functions.values():
                for call in function.calls:
                    target = self.resolve(path, function, call.callee)
                    if target is not None:
                        yield path, function, call, target

    def _link_roles(self) -> None:
        """Roles of arguments -> parameters (a few rounds, for chains of calls)."""
        calls = self._resolved_calls
        for _ in range(3):
            changed = False
            for path, function, call, (target_path, target, _) in calls:
                incoming = self._incoming.setdefault((target_path, target.name), {})
                for param, argument, role in _bindings(call, target):
                    if role is None and argument.startswith("param:"):
                        role = self._incoming.get((path, function.name), {}).get(argument[len("param:"):])
                    if role is None or incoming.get(param, ...) is None:
                        continue  # nothing known, or callers already disagree
                    agreed = role if incoming.get(param, role) == role else None
                    if incoming.get(param, ...) != agreed:
                        incoming[param] = agreed
                        changed = True
            if not changed:
                break

    def _link_calls(self) -> None:
        """The values and schedules calls hand parameters, which functions are called and from where, and
        the parameters whose scaler a caller updates after the call."""
        if self._calls_linked:
            return
        self._calls_linked = True
        for path, function, call, (target_path, target, _) in self._resolved_calls:
            callee = (target_path, target.name)
            for param, value in _values_bound(call, target):
                _agree(self._passed, callee, param, value)
            for param, built in _classes_bound(call, target):
                _agree(self._handed_schedules, callee, param, self._inner_schedule_of(path, built) if built else None)
            for param, place in () if call.starred else _bound(call, target):
                if place in call.constructors:  # (a scheduler, handed by a call that may run: `None` in an evaluation script hands none)
                    _agree(self._handed_constructors, callee, param, call.constructors[place] or None)
            self._called.add((target_path, target.name))
            if target_path != path:
                self._called_elsewhere.add((target_path, target.name))
                self._caller_modules.setdefault(target_path, set()).add(path)
            updated = {e.place for e in self.effects(path, function.name) if e.action == s.SCALER_UPDATE}
            for param, argument, _ in _bindings(call, target):
                if argument and argument in updated:
                    self._caller_updates.setdefault((target_path, target.name), set()).add(param)

    # -- the view of one module ------------------------------------------------------------------

    def parameter_roles(self, path: str) -> Dict[str, Dict[str, str]]:
        """Function -> parameter -> the role its callers in the project agree it holds."""
        functions = self.modules[path].functions
        return {name: roles for name in functions if (roles := {p: r for p, r in self._incoming.get((path, name), {}).items() if r})}

    def parameter_values(self, path: str) -> Dict[str, Dict[str, object]]:
        """Function -> parameter -> the integer or bool every call of the project leaves it at (passes it as
        written, or leaves it to its default): `Trainer(..., grad_accumulation_steps=1)`, `fit(amp=False)`; or
        PASSED_NONE, when every call passes it `None` as written (`train_one_epoch(..., scaler=None)`)."""
        self._link_calls()
        agreed = _agreed(self._passed, path, self.modules[path].functions)
        unseen = self.unseen_importers

        def hidden(function: str) -> bool:  # (a module with no summary may call it too: what switches it, `None` or a bool, is not known)
            name = function.split(".")[0]
            return path in unseen or f"{path}:{name}" in unseen or f"*:{name}" in unseen

        return {name: kept for name, found in agreed.items() if (kept := {p: v for p, v in found.items() if type(v) is int or not hidden(name)})}

    def context_for(self, path: str) -> Optional[ModuleContext]:
        module = self.modules.get(path)
        if module is None:
            return None
        self._link_calls()
        calls: Dict[str, Callee] = {}
        for function in module.functions.values():
            for call in function.calls:
                target = self.resolve(path, function, call.callee)
                if target is None:
                    continue
                target_path, callee, prefix = target
                calls[f"{function.name}|{call.callee}"] = Callee(
                    callee.name, f"{target_path}:{callee.line}", list(callee.params), self.effects(target_path, callee.name),
                    callee.returns, prefix, list(callee.returns_each), list(callee.returns_none_at),
                    callee.returns_options, self.modules[target_path].command_line if callee.returns_options else None, callee.returns_constructor,
                )
        roles = self.parameter_roles(path)
        updates = {name: sorted(self._caller_updates.get((path, name), ())) for name in module.functions}
        called = sorted(name for name in module.functions if (path, name) in self._called)
        elsewhere = sorted(name for name in module.functions if (path, name) in self._called_elsewhere)
        resumed = any(self.modules[caller].resumes for caller in self._caller_modules.get(path, ()))
        return ModuleContext(
            path, calls, roles, {k: v for k, v in updates.items() if v}, called, elsewhere, sorted(self._switched_on.get(path, ())), resumed,
            parameter_values=self.parameter_values(path),
            **(self.launches.context_of(path) if self.launches is not None else {}), torch_subclasses=self._imported_torch_subclasses(path),
            scheduler_methods=self._scheduler_methods, inner_schedules=self._inner_schedules_called(path),
            parameter_inner_schedules=self.parameter_inner_schedules(path),
            parameter_constructors=_agreed(self._handed_constructors, path, module.functions),
        )

    def _inner_schedules_called(self, path: str) -> Dict[str, list]:
        """The classes of other modules that module `path` calls (builds), as written, that keep a schedule inside
        and leave its position out of their state_dict() -> [class, counter, where]."""
        module = self.modules[path]
        written = {call.callee for function in module.functions.values() for call in function.calls}
        written |= {callee for function in module.functions.values() for callee in function.local_classes.values()}
        written |= {callee for attributes in module.attribute_classes.values() for callee in attributes.values()}
        return {callee: inner for callee in sorted(written) if (inner := self._inner_schedule_of(path, callee, elsewhere=True)) is not None}

    def _inner_schedule_of(self, path: str, callee: str, elsewhere: bool = False) -> Optional[list]:
        """[class, counter, where] when `callee`, read in module `path`, is a class of the project that keeps a schedule
        inside and leaves its position out of its state_dict() (`elsewhere`: of another module only)."""
        where = self._definition(path, callee)
        if where is None or elsewhere and where[0] == path:
            return None
        inner = self.modules[where[0]].inner_schedules.get(where[1])
        return [where[1], inner[0], f"{where[0]}:{inner[1]}"] if inner is not None else None

    def parameter_inner_schedules(self, path: str) -> Dict[str, Dict[str, list]]:
        """Function -> parameter -> the inner schedule of the object every call of the project hands it."""
        self._link_calls()
        return _agreed(self._handed_schedules, path, self.modules[path].functions)

    @cached_property
    def _scheduler_methods(self) -> List[str]:
        """Methods that set an optimizer's LR in some class of the project: on a scheduler built by a
        factory of another module (`get_scheduler(optim, hp)`), their call is its step."""
        return sorted({name for module in self.modules.values() for name in module.lr_methods})

    def _imported_torch_subclasses(self, path: str) -> Dict[str, str]:
        """The names module `path` imports that are classes of the project derived from a torch scheduler or
        optimizer -> that class (`from lib.lr_scheduler import WarmupPolyLR`, `from optim.adamw import AdamW`), or
        whose step() sets an optimizer's LR -> PROJECT_LR_SCHEDULE."""
        found = {}
        for name in self.modules[path].imports:
            where = self._definition(path, name)
            elsewhere = where is not None and where[0] != path
            base = None if not elsewhere else PROJECT_LR_SCHEDULE if where[1] in self.modules[where[0]].lr_classes else self._torch_base(*where)
            if base is not None:
                found[name] = base
            for target, attribute in self._modules_for(path, self.modules[path].imports[name]) if where is None else ():
                other = self.modules[target]
                for class_name in sorted(set(other.lr_classes) | set(other.class_bases)) if not attribute and target != path else ():
                    # (`import utils`, then `utils.CosineLRSchedule(...)`)
                    base = PROJECT_LR_SCHEDULE if class_name in other.lr_classes else self._torch_base(target, class_name)
                    if base is not None:
                        found[f"{name}.{class_name}"] = base
        return found

    def _torch_base(self, path: str, class_name: str, hops: int = 4) -> Optional[str]:
        """The torch scheduler or optimizer (qualified) that a class of the project derives from, through its bases."""
        module = self.modules[path]
        for base in module.class_bases.get(class_name, ()):
            head, _, rest = base.partition(".")
            qualified = module.imports[head] + (f".{rest}" if rest else "") if head in module.imports else None
            if qualified is not None and (qualified.startswith(SCHEDULER_MODULES) or qualified in OPTIMIZER_BASES):
                return qualified
            where = self._definition(path, base)
            found = self._torch_base(*where, hops - 1) if where is not None and hops else None
            if found is not None:
                return found
        return None

    @cached_property
    def _switched_on(self) -> Dict[str, Set[str]]:
        """Module path -> keywords that some call of the project may pass a true value to one of its
        functions or classes: the callee's module when the call resolves, else every module that
        defines a function or class of the callee's last name."""
        defining: Dict[str, Set[str]] = {}
        for path, module in self.modules.items():
            for name in module.functions:
                defining.setdefault(name.split(".")[0], set()).add(path)  # `Trainer.__init__` defines `Trainer`
                defining.setdefault(name.rsplit(".", 1)[-1], set()).add(path)
        found: Dict[str, Set[str]] = {}
        for path, module in self.modules.items():
            for pair in module.switched_on:
                callee, keyword = pair.rsplit("|", 1)
                target = self._definition(path, callee) or self._through_star(path, callee)
                for where in [target[0]] if target else defining.get(callee.rsplit(".", 1)[-1], ()):
                    found.setdefault(where, set()).add(keyword)
        return found

    def _through_star(self, path: str, name: str) -> Optional[Tuple[str, str]]:
        """(module path, name) of a plain name a module gets through its own `from pkg.mod import *`."""
        if "." in name:
            return None
        for star in self.modules[path].star_modules:
            for inner, attribute in self._modules_for(path, f"{star}.{name}" if not star.endswith(".") else star + name):
                if attribute == name and (name in self.modules[inner].functions or _defines_class(self.modules[inner], name)):
                    return inner, name
        return None


def dotted_names(paths) -> Dict[str, str]:
    """Dotted module name -> path, for the paths of a project's modules (the first path in sorted
    order takes a name two paths share)."""
    found: Dict[str, str] = {}
    for path in sorted(paths):
        for name in _module_names(path):
            found.setdefault(name, path)
    return found


def _strip_parts(path: str, depth: int) -> str:
    """`train/utils.py` with depth 1 -> `train/utils`; `lib/core/function.py` with depth 2 -> `lib/core`...: the
    path of the module's first dotted part."""
    stem = path[: -len("/__init__.py")] if path.endswith("/__init__.py") else path[: -len(".py")]
    for _ in range(depth - 1):
        stem = posixpath.dirname(stem)
    return stem


def dotted_tails(paths) -> Dict[str, List[str]]:
    """The last parts of each module's dotted name (`base`, `core.function` of `lib/core/function.py`)
    -> the modules whose name they end: what an import finds once a script puts a folder on `sys.path`."""
    found: Dict[str, List[str]] = {}
    for path in sorted(paths):
        names = _module_names(path)
        parts = names[0].split(".") if names else []
        for cut in range(1, len(parts)):
            found.setdefault(".".join(parts[cut:]), []).append(path)
    return found


def import_root(importer: str, qualified: str) -> Tuple[str, List[str], bool]:
    """(the folder a name imported by `importer` is looked up from, the name's parts, whether the
    import is relative): `..utils.f` from `pkg/sub/train.py` is looked up from `pkg`."""
    dots = len(qualified) - len(qualified.lstrip("."))
    root = posixpath.dirname(importer)  # a script's own folder is first on sys.path; `.` is its package
    for _ in range(max(dots - 1, 0)):
        root = posixpath.dirname(root)
    return root, [p for p in qualified[dots:].split(".") if p], bool(dots)


def modules_for(modules, dotted: Dict[str, str], importer: str, qualified: str) -> List[Tuple[str, str]]:
    """(module path, attribute path left) for a qualified name imported by `importer`, nearest first,
    among `modules` (paths) and `dotted` (dotted name -> path, from dotted_names)."""
    found = []
    root, parts, relative = import_root(importer, qualified)
    # (an absolute import may also be found from a folder above the script's: scripts in `tools/` run from
    # the repository's root, or put it on sys.path, to import `lib.lr_scheduler`)
    folders = [root] if relative else _folder_and_parents(root)
    for cut in range(len(parts), 0, -1):
        module, attribute = parts[:cut], ".".join(parts[cut:])
        for folder in folders:
            stem = f"{folder}/{'/'.join(module)}" if folder else "/".join(module)
            candidates = [c for c in (stem + ".py", stem + "/__init__.py") if c in modules]
            found.extend((candidate, attribute) for candidate in candidates)
            if candidates:
                break
        if not relative and ".".join(module) in dotted:
            found.append((dotted[".".join(module)], attribute))
    if relative and not parts:
        init = f"{root}/__init__.py" if root else "__init__.py"
        if init in modules:
            found.append((init, ""))
    return found


def _folder_and_parents(folder: str) -> List[str]:
    """`a/b` -> [`a/b`, `a`, ``]: the folder, then each folder above it up to the project's root."""
    found = [folder]
    while folder:
        folder = posixpath.dirname(folder)
        found.append(folder)
    return found


def _module_names(path: str) -> List[str]:
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    names = [".".join(parts)] if parts else []
    if len(parts) > 1 and parts[0] in ("src", "lib"):
        names.append(".".join(parts[1:]))
    return names


def _defines_class(module: s.ModuleSummary, name: str) -> bool:
    return any(f.class_name == name for f in module.functions.values()) or name in module.attribute_classes


def _bindings(call: s.CallRecord, target: s.FunctionSummary):
    """(parameter, argument place, argument role) for each argument the call binds to a parameter."""
    for index, (argument, role) in enumerate(zip(call.args, call.arg_roles)):
        if index < len(target.params):
            yield target.params[index], argument, role
    for name, argument in call.kwargs.items():
        if name in target.params:
            yield name, argument, call.kwarg_roles.get(name)


def _agree(table: Dict[Tuple[str, str], Dict[str, object]], callee: Tuple[str, str], param: str, value: object) -> None:
    """Note what one call hands a parameter: kept while every call hands the same, None once two differ."""
    handed = table.setdefault(callee, {})
    before = handed.get(param, value)
    handed[param] = value if before == value and type(before) is type(value) else None  # (`True` is not the `1` another call passes)


def _agreed(table: Dict[Tuple[str, str], Dict[str, object]], path: str, functions) -> Dict[str, Dict[str, object]]:
    """Function of module `path` -> parameter -> what every call hands it, where calls agree on something."""
    return {name: found for name in functions if (found := {p: v for p, v in table.get((path, name), {}).items() if v is not None})}


def _bound(call: s.CallRecord, target: s.FunctionSummary):
    """(parameter, its place in the call: its position, "0", "1", ..., or its keyword) for each parameter the call binds."""
    for index, param in enumerate(target.params[: len(call.args)]):
        yield param, str(index)
    for name in call.kwargs:
        if name in target.params:
            yield name, name


def _classes_bound(call: s.CallRecord, target: s.FunctionSummary):
    """(parameter, the callee that built the local the call hands it, or "") for each parameter the call binds."""
    for param, place in () if call.starred else _bound(call, target):
        yield param, call.classes.get(place, "")


def _values_bound(call: s.CallRecord, target: s.FunctionSummary):
    """(parameter, the integer or bool the call leaves it at, PASSED_NONE for `None`, or None: not known) for each parameter of the target."""
    bound = dict(_bound(call, target))
    for param in target.params:
        if call.starred:
            yield param, None
        elif param in bound:
            yield param, PASSED_NONE if bound[param] in call.nones else call.literals.get(bound[param])
        else:
            yield param, target.defaults.get(param)


def argument_place(place: str, call: s.CallRecord, target: s.FunctionSummary, self_prefix: Optional[str]) -> str:
    """A callee's place in the caller's words, or "" when the caller cannot name it."""
    if place.startswith("param:"):
        name = place[len("param:"):]
        index = target.params.index(name) if name in target.params else len(call.args)
        if index < len(call.args):
            return call.args[index]
        return call.kwargs.get(name, "")
    if place.startswith("star:"):
        index = len(target.params) + int(place[len("star:"):])
        return call.args[index] if index < len(call.args) else ""
    if place.startswith("self.") and self_prefix is not None:
        return "self." + self_prefix + place[len("self."):]
    return place if place.startswith("module:") else ""  # (the same module object in every function)


_PLACELESS = (s.CLIP, s.SAVE)


def _through_call(effect: s.Effect, call: s.CallRecord, target: s.FunctionSummary, self_prefix: Optional[str]) -> Optional[s.Effect]:
    if effect.action in _OWN_RETURN:
        return None
    if effect.action == s.FRESH_SCALER:  # a scaler of the callee's own, named as it names it
        return replace(effect, looped=effect.looped or call.looped, rank_guarded=effect.rank_guarded or call.rank_guarded)
    where = argument_place(effect.place, call, target, self_prefix)
    if not where and effect.action not in _PLACELESS:
        return None
    contents = {k: [argument_place(p or "", call, target, self_prefix), r] for k, (p, r) in effect.contents.items()}
    if effect.action == s.SAVE and effect.stored == "kwargs":
        contents = {k: [p, call.kwarg_roles.get(k)] for k, p in call.kwargs.items()}
    return replace(
        effect,
        place=where,
        other=argument_place(effect.other, call, target, self_prefix),
        stored=argument_place(effect.stored, call, target, self_prefix) if effect.stored != "kwargs" else "",
        contents=contents,
        named_by=[place for where in effect.named_by if (place := argument_place(where, call, target, self_prefix))],
        looped=effect.looped or call.looped,
        rank_guarded=effect.rank_guarded or call.rank_guarded,
    )
