"""Command-line options: which of the module's options no run of the project turns on.

`parser.add_argument("--fp16", action="store_true")` declares a flag that is off unless the command
line gives it. Loss scaling that exists only when such a flag is on (`GradScaler(enabled=args.amp)`,
`GradScaler() if args.amp else None`, `if args.fp16: amp.initialize(...)`) skips no update in a run
without the flag, and a checkpoint without its state loses nothing. Whether the flag is given is in
the project's launch files (steplint.project.launches, which the project context passes on); a flag they never give is off as run.

Evidence, not names: the flag counts as off only when this module's own parser declares it, once,
with a false default; the tested object is the one `parse_args()` returned here (or a parameter of
the same name, as `args` is handed to `train(args)`); the code does not set it (`args.fp16 = ...`,
`setattr(args, "fp16", ...)`); where the options are copied in from data (`setattr(args, key, value)`,
`set_defaults(**config)`, `vars(args).update(config)`), no config file of the project sets it true;
and the project's launch facts were read. Otherwise the flag may be on, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Set

import libcst as cst

from steplint.effects import ANY_OPTION
from steplint.model.structure import Structure
from steplint.model.syntax import assignment_targets, conjuncts, keyword, literal, positional

_PARSE_CALLS = ("parse_args", "parse_known_args")


@dataclass
class CommandLine:
    declared: Dict[str, object] = field(default_factory=dict)  # dest -> its default as declared (`...`: not a literal, or declared twice)
    parsed_names: Set[str] = field(default_factory=set)  # names bound to what parse_args() returns
    written: Set[str] = field(default_factory=set)  # attribute names the module assigns (`args.fp16 = True`)
    rewritten: bool = False  # the module writes the parsed options from data (a config it loads), or in code
    given: Optional[Set[str]] = None  # options a launch of the module may give (steplint.project.launches); None: unknown
    configured: Set[str] = field(default_factory=set)  # keys the project's config files set true
    _option_tested: Dict[int, Optional[str]] = field(default_factory=dict)  # id(guard test) -> its option off as run (each test read once)

    def off_as_run(self, test: Optional[cst.BaseExpression]) -> bool:
        """`args.fp16` is false in every run the project shows (see the module docstring)."""
        if self.given is None or ANY_OPTION in self.given or not isinstance(test, cst.Attribute):
            return False
        if self.rewritten and test.attr.value in self.configured:
            return False  # copied in from a config that sets it
        if not (isinstance(test.value, cst.Name) and test.value.value in self.parsed_names):
            return False
        name = test.attr.value
        default = self.declared.get(name, ...)
        return default is not ... and not default and name not in self.given and name not in self.written

    def never_runs(self, site) -> Optional[str]:
        """The option (`--fp16`) of a flag off as run that the site runs only under (`if args.fp16:`,
        `if exists(path) and args.resume_optimizer:`); None when it may run."""
        if self.given is None or not self.declared:
            return None  # (most modules: nothing to look up for each statement)
        for guard in site.guards:
            if not guard.negated and not guard.early_exit:
                if id(guard.test) not in self._option_tested:
                    self._option_tested[id(guard.test)] = next((option_of(t) for t in conjuncts(guard.test) if self.off_as_run(t)), None)
                if self._option_tested[id(guard.test)] is not None:
                    return self._option_tested[id(guard.test)]
        return None


def option_of(test: cst.Attribute) -> str:
    """`args.fp16` -> `--fp16`, as a launch would give it."""
    return "--" + test.attr.value


def read_command_line(structure: Structure, project) -> CommandLine:
    launched = project is not None and project.launch_options is not None
    found = CommandLine(given=set(project.launch_options) if launched else None, configured=set(project.configured_options) if launched else set())
    for call, _ in structure.calls:
        func = call.func
        method = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if method == "add_argument":
            _declare(found, call)
        elif method in ("set_defaults", "setattr") or method == "update" and _namespace_dict(func.value):
            found.rewritten = True  # (also of other objects: a namespace may be handed to them)
            named = literal(positional(call)[1]) if method == "setattr" and len(positional(call)) > 1 else None
            if isinstance(named, str):
                found.written.add(named)  # `setattr(args, "fp16", True)`
    for node, _ in structure.statements:
        if isinstance(node, cst.Assign):
            value = node.value
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _PARSE_CALLS:
                if positional(value):
                    found.rewritten = True  # options written in the code (`parse_args(["--fp16"])`)
                for target in assignment_targets(node):
                    if isinstance(target, cst.Name):
                        found.parsed_names.add(target.value)
                for target in node.targets:  # `args, _ = parser.parse_known_args()`
                    if isinstance(target.target, cst.Tuple) and target.target.elements and isinstance(target.target.elements[0].value, cst.Name):
                        found.parsed_names.add(target.target.elements[0].value.value)
        for target in assignment_targets(node):
            if isinstance(target, cst.Attribute):
                found.written.add(target.attr.value)
    return found


def _declare(found: CommandLine, call: cst.Call) -> None:
    flags = [f for f in (literal(a) for a in positional(call)) if isinstance(f, str)]
    dest = literal(keyword(call, "dest"))
    if not isinstance(dest, str):
        long = [f for f in flags if f.startswith("--")]
        if not long:
            return
        dest = long[0].lstrip("-").replace("-", "_")
    action = literal(keyword(call, "action"))
    given = keyword(call, "default")
    default = literal(given) if given is not None else (False if action == "store_true" else True if action == "store_false" else None)
    if any(f.lstrip("-").replace("-", "_") != dest for f in flags if f.startswith("--")):
        default = ...  # an alias (`--amp`, `--fp16` for one dest): a launch may give it under the other name
    found.declared[dest] = ... if dest in found.declared else default


def _namespace_dict(expr: cst.BaseExpression) -> bool:
    """`vars(args)` or `args.__dict__`: the options as a dict, which an `.update(...)` rewrites."""
    if isinstance(expr, cst.Call):
        return isinstance(expr.func, cst.Name) and expr.func.value == "vars"
    return isinstance(expr, cst.Attribute) and expr.attr.value == "__dict__"
