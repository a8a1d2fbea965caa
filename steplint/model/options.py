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

The options may be declared in another module of the project: a function or method that returns what
its `parse_args()` returned (`args = get_args()`, `opt = Options().parse()`), or the parser itself
(`parser = get_parser()`, then `parser.parse_args()` here). Its summary hands on that module's
declarations (`declarations()`), and the caller adopts them for the names it binds to the call.

Two other switches are read as run, each labelled for messages: a config key (`hps.train.fp16_run`,
`config:train.fp16_run`) that the project's config files set, each time, to false and nothing sets true
(steplint.project.launches); and a global the module sets once to a literal (`dtype = "bfloat16"`,
`constant:dtype`), which a configurator the module runs (`exec(...)`) may change only through a launch
option or another module of the project that sets it to something else.

The same holds for a branch: what runs only under a switch of loss scaling that nothing the project
shows turns on (`if algorithm.use_amp:`, or the `else` of `if not cfg.fp16:`, where no config file,
launch line, option declared true or code of the project sets `use_amp` or `fp16` true) never runs. The
key must name loss scaling itself (`_LOSS_SCALING_SWITCH`): that is a premise for silence, never for a
diagnostic.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set

import libcst as cst

from steplint.effects import ANY_OPTION, PASSED_NONE, PRECISION_KEY
from steplint.model.structure import Scope, Structure
from steplint.model.syntax import assignment_targets, conjuncts, disjuncts, dotted, keyword, last_name, literal, positional
from steplint.source import parse_python

# Keys that switch loss scaling itself on (`use_amp`, `fp16_run`, `enable_amp`, `mixed_precision`,
# `use_grad_scaler`; not `bf16`, which scales nothing, nor `scaler`, an object)
_LOSS_SCALING_SWITCH = re.compile(r"(?:^|_)(?:amp|fp16|f16|apex|half|autocast)(?:_|$)|mixed_precision|(?:^|_)(?:use|enable|with)_(?:grad_|loss_)?scal(?:er|ar|ing)(?:_|$)", re.I)
_PARSE_CALLS = ("parse_args", "parse_known_args", "parse_intermixed_args", "parse_known_intermixed_args")


@dataclass
class CommandLine:
    declared: Dict[str, object] = field(default_factory=dict)  # dest -> its default as declared (`...`: not a literal, or declared twice)
    aliases: Dict[str, Set[str]] = field(default_factory=dict)  # dest -> the names its long flags give it, as launches write them
    parsed_names: Set[str] = field(default_factory=set)  # names bound to what parse_args() returns
    parsed_dicts: Set[str] = field(default_factory=set)  # names bound to its dict: `args = vars(parser.parse_args())`, read as `args["amp"]`
    written: Set[str] = field(default_factory=set)  # attribute names the module assigns (`args.fp16 = True`)
    written_values: Dict[str, list] = field(default_factory=dict)  # attribute name -> (value or None: not a plain `=`, scope, receiver) of each `x.attr = ...`
    rewritten: bool = False  # the module writes the parsed options from data (a config it loads), or in code
    given: Optional[Set[str]] = None  # options a launch of the module may give (steplint.project.launches); None: unknown
    launch_values: Optional[List[Dict[str, Optional[str]]]] = None  # per launch line naming the module: option -> value as written
    configured: Set[str] = field(default_factory=set)  # keys the project's config files set true
    switched_off: Set[str] = field(default_factory=set)  # config key paths set false in every config file, and never true
    parsers: Set[str] = field(default_factory=set)  # receivers of `add_argument` as written (`parser`, `self.parser`)
    module_scope: Optional[Scope] = None  # the module's top level, whose bindings are its globals
    declared_global: Set[str] = field(default_factory=set)  # globals some function declares `global` (and may change)
    runs_code: bool = False  # the module runs code from text (`exec(open("configurator.py").read())`): its globals may come from config files
    contested: Set[str] = field(default_factory=set)  # globals the project's modules set to more than one value
    set_true: Set[str] = field(default_factory=set)  # switches of loss scaling a config file, launch line or code of the project sets true
    given_to_scripts: Set[str] = field(default_factory=set)  # switches of loss scaling a launch line gives the script it names
    bindings: Dict[tuple, list] = field(default_factory=dict)  # (id(scope), name) -> each value the scope assigns it (None: not a plain `=`)
    binding_sites: Dict[tuple, list] = field(default_factory=dict)  # (id(scope), name) -> the site of each of those assignments
    text_options: Set[str] = field(default_factory=set)  # options declared with no type or action, or `type=bool`: a launch's value is a text (true unless empty)
    configured_values: Dict[str, List[str]] = field(default_factory=dict)  # precision key or number key path -> the values the configs give it, as written
    _option_tested: Dict[tuple, Optional[str]] = field(default_factory=dict)  # (id(guard test), negated) -> what keeps it from running (each read once)
    _branch_tested: Dict[tuple, Optional[str]] = field(default_factory=dict)  # the (id(test), negated) of a site's guards -> never_runs
    _earlier: Dict[tuple, cst.BaseExpression] = field(default_factory=dict)  # (id(scope), name) -> its value before the assignment whose test is being read
    # The launch lines one run takes hold together: a function the module calls only under `if args.do_train:` runs
    # with the options of the lines that train (`--fp16` given only beside `--do_predict` is off there).
    calls_of: Dict[str, list] = field(default_factory=dict)  # top-level function -> the sites of the module that call it by name
    text: str = ""  # the module's text (whether a function is also read other than in its calls)
    callers_read: Set[str] = field(default_factory=set)  # functions whose callers were read (ModuleModel.callers_read)
    called_elsewhere: Set[str] = field(default_factory=set)  # functions other modules of the project call
    parameter_values: Dict[str, Dict[str, object]] = field(default_factory=dict)  # function -> parameter -> what every call hands it (ModuleContext)
    precision_keys_configured: Dict[str, List[str]] = field(default_factory=dict)  # precision keys config files give a value -> the values (ModuleContext)
    _reaching: Dict[int, Optional[frozenset]] = field(default_factory=dict)  # id(scope) -> the lines that may run it (None: all)
    _only_line: Optional[int] = None  # while a call's tests are read for one line
    _uses: Optional[Counter] = None

    def assigned(self, scope, name: str) -> list:
        """The values a scope's assignments give a name, in program order (None for one that is not a
        plain `name = value`: an augmented, annotated-only or unpacking assignment)."""
        return self.bindings.get((id(scope), name), [])

    def set_once(self, scope, name: str) -> Optional[tuple]:
        """(value, site) of the one assignment of a name in a scope, when it is a plain `name = value`."""
        values = self.assigned(scope, name)
        return (values[0], self.binding_sites[(id(scope), name)][0]) if len(values) == 1 and values[0] is not None else None

    def lets_through(self, guard, scope) -> bool:
        """The guard's test goes its statement's way in every run the project shows (`if update:` with
        `update = True`, its other value set only under an option no launch gives; what follows `if
        args.eval_first and is_main_process(): return`, with no launch giving `--eval_first`)."""
        value, option = self.value_as_run(guard.test, scope)
        if option is not None and value is not ... and bool(value) != guard.negated:
            return True
        return (self._false_as_run(guard.test, scope) if guard.negated else self._true_as_run(guard.test, scope)) is not None

    def off_as_run(self, test: Optional[cst.BaseExpression], scope=None) -> Optional[str]:
        """The option (`--fp16`) that makes `test` false in every run the project shows, or None when it
        may be true: `args.fp16`, `args.precision is not None`, `not args.fp32`, `isinstance(args.every,
        int)`, or a local set once from such a test (`use_amp = args.precision == "fp16"`) read in `scope`."""
        value, option = self.value_as_run(test, scope)
        return option if option is not None and value is not ... and not value else None

    def value_as_run(self, expr: Optional[cst.BaseExpression], scope=None) -> tuple:
        """(the value of `expr` in every run the project shows, the option that decides it), or (..., None)
        when a run may give it another: `args.accum` declared with `default=1` that no launch gives is 1."""
        if expr is None:
            return ..., None
        if self.given is None:
            return self._constant(expr, scope)  # (what no launch decides: a local set once to a literal)
        return self._as_run(expr, scope, 0)

    def _constant(self, expr: cst.BaseExpression, scope) -> tuple:
        """(the literal a local the function sets once holds, `constant:NAME`) for `fp16_run` or `not fp16_run`."""
        negated = isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not)
        name = expr.expression if negated else expr
        owner = scope.owner_of(name.value) if isinstance(name, cst.Name) and scope is not None else None
        if owner is None or owner.name == "<module>":
            return ..., None
        value, label = self._as_run(name, scope, 0)
        if label is None or not label.startswith("constant:"):
            return ..., None
        return (not value, label) if negated else (value, label)

    def _as_run(self, expr: cst.BaseExpression, scope, depth: int) -> tuple:
        """(its value in every run the project shows, the option that decides it), or (..., None)."""
        unknown = (..., None)
        # A launch that passes variables on (`$@`) may give any option, or set any global through a configurator; not
        # change the value the config files all give a key no launch line mentions (`cfg.training.grad_accumulation`)
        any_option = self.given is not None and ANY_OPTION in self.given
        # (but a key the configs leave unset or false, `resume:`, may be given by such a launch: only the values they give hold)
        if isinstance(expr, cst.Attribute):
            found = self._option_default(expr, scope) if not any_option else unknown
            found = found if found[1] is not None else self._config_default(expr, switched=not any_option)
            copied = self._set_once_in_its_class(expr, scope) if found[1] is None and depth < 3 else None
            # (`self.lr_decay = self.config.get("lr_decay", False)`, read as `if self.lr_decay:`: the key it copies)
            return self._as_run(copied[0], copied[1], depth + 1) if copied is not None and _reads_key(copied[0], expr.attr.value) else found
        if isinstance(expr, cst.Subscript):
            key = literal(expr.slice[0].slice.value) if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) else None
            if isinstance(expr.value, cst.Name) and expr.value.value in self.parsed_dicts and isinstance(key, str):
                return self._option_value(key, f"--{key}", scope) if not any_option else unknown
            return self._config_default(expr, switched=not any_option)
        if isinstance(expr, cst.Name) and scope is not None and depth < 3 and scope.owner_of(expr.value) is None:
            return self._global_as_run(expr.value, depth) if not any_option else unknown
        if isinstance(expr, cst.Name) and scope is not None and depth < 3:
            owner = scope.owner_of(expr.value)
            if (id(owner), expr.value) in self._earlier:  # (`if steps.isdigit(): steps = int(steps)`: the test reads the value before)
                return self._as_run(self._earlier[(id(owner), expr.value)], owner, depth + 1)
            values = self.bindings.get((id(owner), expr.value), ()) if owner is not None else ()
            if owner is not None and any(p.name.value == expr.value for p in owner.params):
                # (every call of the project hands it the same `None`, bool or integer, and the function never sets it:
                # `train_one_epoch(..., scaler=None)`, `fit(model, amp=False)` whatever the default)
                handed = self.parameter_values.get(owner.name, {}).get(expr.value) if not values and owner.parent is None else None
                if handed == PASSED_NONE or type(handed) in (bool, int):
                    return None if handed == PASSED_NONE else handed, f"callers:{expr.value}"
                return unknown  # (a parameter the function may set: `if not use_fp16: scaler = None` keeps the caller's scaler otherwise)
            if len(values) == 1 and values[0] is not None:
                constant = literal(values[0])
                if isinstance(constant, (bool, int, float, str)) or constant is None and isinstance(values[0], cst.Name):
                    # (a local the function sets once, to a literal: `fp16_run = False`, `use_scheduler = 0`)
                    return constant, f"constant:{expr.value}"
                return self._as_run(values[0], owner, depth + 1)
            return self._the_binding_that_runs(owner, expr.value, depth) if len(values) > 1 else unknown
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            value, option = self._as_run(expr.expression, scope, depth)
            return (not value, option) if value is not ... else unknown
        if isinstance(expr, cst.IfExp):  # (`True if args.model_dtype == "fp16" else False`: the branch its test takes as run)
            value, option = self._as_run(expr.test, scope, depth)
            if value is ... or option is None:
                return unknown
            chosen = expr.body if value else expr.orelse
            constant = literal(chosen)
            if isinstance(constant, (bool, int, float, str)):
                return constant, option
            if torch_dtype(chosen) is not None:  # (`torch.bfloat16 if dtype_name == "bf16" else torch.float16`)
                return torch_dtype(chosen), option
            return self._as_run(chosen, scope, depth + 1) if depth < 3 else unknown
        if isinstance(expr, cst.BooleanOperation):
            # (`a and b` is false as run when one side is, true when both are; `or` the other way round; and where the
            # left side is known, the value is Python's: `args.amp_dtype or "bf16"` with no run giving --amp_dtype is "bf16")
            deciding = not isinstance(expr.operator, cst.And)
            left, right = self._as_run(expr.left, scope, depth), self._as_run(expr.right, scope, depth)
            if left[0] is not ... and left[1] is not None:
                return left if bool(left[0]) == deciding else right if right[1] is not None else unknown
            if right[0] is not ... and right[1] is not None and bool(right[0]) == deciding:
                return deciding, right[1]
            return unknown
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("bool", "isinstance", "hasattr") and expr.args:
            value, option = self._as_run(expr.args[0].value, scope, depth)
            if value is ...:
                return unknown
            if expr.func.value == "bool":
                return bool(value), option
            if expr.func.value == "hasattr":  # (`hasattr(args.checkpointing_steps, "isdigit")`: an option given as text, or left at None)
                name = literal(expr.args[1].value) if len(expr.args) == 2 else None
                return (hasattr(value, name), option) if isinstance(name, str) else unknown
            kinds = {"int": int, "float": float, "str": str, "bool": bool}
            kind = kinds.get(expr.args[1].value.value) if len(expr.args) == 2 and isinstance(expr.args[1].value, cst.Name) else None
            return (isinstance(value, kind), option) if kind is not None else unknown
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "get" and expr.args:
            # (`cfg.run_cfg.get("loss_scale", True)`: a key every config file sets false is false, whatever the default)
            key = literal(expr.args[0].value)
            base = _key_path(expr.func.value) if isinstance(key, str) else []
            found = self._switched_off_key(base + [key]) if base else None
            return found or (self._precision_default(key, expr.args[1].value) if base and len(expr.args) > 1 else unknown)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _STRING_TESTS and not expr.args:
            value, option = self._as_run(expr.func.value, scope, depth)  # (`steps.isdigit()` of an option given as text)
            return (getattr(value, expr.func.attr.value)(), option) if isinstance(value, str) else unknown
        if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
            value, option = self._as_run(expr.left, scope, depth)
            target = expr.comparisons[0]
            other = literal(target.comparator)
            if other is ...:
                other = torch_dtype(target.comparator) or ...
            test = _COMPARISONS.get(type(target.operator))
            if isinstance(other, TorchDtype) and isinstance(target.operator, (cst.Is, cst.IsNot)):
                test = _COMPARISONS[cst.Equal if isinstance(target.operator, cst.Is) else cst.NotEqual]  # (torch's dtypes are singletons)
            elif other is ... or test is None or isinstance(target.operator, (cst.Is, cst.IsNot)) and other is not None and type(other) is not bool:
                return unknown  # (`is` decides against None, True and False, singletons as Python holds them)
            # (a global set once to one of some literals, by the machine it runs on: `dtype = "bfloat16" if
            # torch.cuda.is_bf16_supported() else "float32"`; the test is decided when each gives one answer)
            values, option = ([value], option) if value is not ... else self._global_choices(expr.left, scope)
            if not values:
                values, option = self._config_choices(expr.left)
            try:
                answers = {test(each, other) for each in values}
            except TypeError:
                return unknown  # (`None > 0`: Python would raise; the run does not take this test as false)
            return (answers.pop(), option) if len(answers) == 1 and option is not None else unknown
        return unknown

    def _precision_default(self, key: str, default: cst.BaseExpression) -> tuple:
        """(the default, `default:KEY`) of a precision key read with one (`cfg.get("amp_dtype", "bf16")`) that no
        launch line passes and no code of the module writes, and that every config file giving it gives that same
        value (or none does); (..., None) otherwise."""
        value = literal(default)
        if not (PRECISION_KEY.search(key) and isinstance(value, str)) or self.given is None or key in self.given or key in self.written:
            return ..., None
        if any(scalar(word) != value for word in self.precision_keys_configured.get(key, ())) or key in self.configured or key in self.set_true:
            return ..., None
        return value, f"default:{key}"

    def _writes_in_its_class(self, expr: cst.Attribute, scope) -> Optional[list]:
        """[(value or None, scope)] of each `self.attr = ...` in the class of the method that reads `self.attr`;
        None when `expr` is no such read."""
        if not (isinstance(expr.value, cst.Name) and scope is not None and scope.class_name and expr.value.value == scope.self_name):
            return None
        return [(value, owner) for value, owner, receiver in self.written_values.get(expr.attr.value, ())
                if owner.class_name == scope.class_name and receiver == owner.self_name]

    def _set_once_in_its_class(self, expr: cst.Attribute, scope) -> Optional[tuple]:
        """(the value, its scope) of `self.attr` read in a method, when the module writes `attr` once, in that class."""
        writes = self._writes_in_its_class(expr, scope)
        if not writes or len(writes) != 1 or len(self.written_values[expr.attr.value]) != 1 or writes[0][0] is None:
            return None
        return writes[0]

    def _the_binding_that_runs(self, owner, name: str, depth: int) -> tuple:
        """(the value of a local assigned in several branches, what decides it) when the tests of every
        branch but one are decided as run: `if cfg.amp_dtype == "fp32": dtype = torch.float32 elif ...:
        dtype = torch.float16` with every config giving `fp32` is `torch.float32`. (..., None) otherwise:
        assignments in different loops, or not a plain `=`, or more than one that may run."""
        values = self.bindings.get((id(owner), name), ())
        sites = self.binding_sites.get((id(owner), name), ())
        running, decided_by = [], None
        for value, site in zip(values, sites):
            # (all in one loop body, or in none: a read sees one of the values that run, in any pass)
            if value is None or len(site.loops) != len(sites[0].loops) or any(a is not b for a, b in zip(site.loops, sites[0].loops)):
                return ..., None
            if running and len(running) == 1:  # (a test of this assignment that reads the name reads the value before it)
                self._earlier[(id(owner), name)] = running[0]
            try:
                against = self._decided_against(site, depth)
            finally:
                self._earlier.pop((id(owner), name), None)
            if against is None:
                running.append(value)
            decided_by = decided_by or against
        if len(running) != 1 or decided_by is None:
            return ..., None
        constant = literal(running[0])
        if constant is ...:
            constant = torch_dtype(running[0]) or ...
        if constant is not ...:
            return constant, decided_by
        value, option = self._as_run(running[0], owner, depth + 1)
        return (value, option) if value is not ... and option is not None else (..., None)

    def may_run(self, site) -> bool:
        """Whether `site` may run in some run the project shows: no test it runs under goes the other way
        in every one (`elif args.lr_schedule == "warmup_linear":` with every launch giving `fixed`)."""
        return self.given is None or ANY_OPTION in self.given or self._decided_against(site, 0) is None

    def _decided_against(self, site, depth: int) -> Optional[str]:
        """What makes one of the tests a site runs under go the other way in every run the project shows."""
        for guard in site.guards:
            if guard.early_exit:
                continue
            value, option = self._as_run(guard.test, site.scope, depth + 1)
            if option is not None and value is not ... and bool(value) == guard.negated:
                return option
        return None

    def _config_choices(self, expr: cst.BaseExpression) -> tuple:
        """([each value the configs give a precision key], its label) for `cfg.train.amp_dtype` when the
        project's config files give that key (each path ending in the one read) and nothing else sets it:
        no launch line, no assignment in the project's code, nor in this module. ([], None) otherwise."""
        keys = _key_path(expr)
        if len(keys) < 2 or keys[-1] in self.written:
            return [], None
        below = ".".join(keys[1:])
        paths = [p for p in self.configured_values if p == below or p.endswith("." + below)]
        if paths:
            return [scalar(word) for p in paths for word in self.configured_values[p]], f"config:{paths[0]}"
        # (a precision key every launch line naming the script gives, `--dtype bf16`, read through a config
        # system of the project's own rather than this module's parser: that value, whatever its default)
        key = keys[-1]
        if not PRECISION_KEY.search(key) or not self.launch_values or any(line.get(key) in (None, "") for line in self.launch_values):
            return [], None
        return [scalar(line[key]) for line in self.launch_values], f"--{key}"

    def _global_choices(self, expr: cst.BaseExpression, scope) -> tuple:
        """([each literal a global, or a local, may hold], its label) for a name set once to a choice of literals
        or torch dtypes (`x = "a" if cond else "b"`, `amp_dtype = torch.bfloat16 if amp else None`) that no
        function changes; ([], None) otherwise. A configurator the module runs may change a global only through
        a launch option or another module of the project (as `_global_as_run`)."""
        name = expr.value if isinstance(expr, cst.Name) and scope is not None else None
        owner = scope.owner_of(name) if name is not None else None
        values = self.bindings.get((id(owner if owner is not None else self.module_scope), name), ()) if name is not None else ()
        if len(values) != 1 or not isinstance(values[0], cst.IfExp) or owner is None and name in self.declared_global:
            return [], None
        if owner is None and self.runs_code and (name in self.given or ANY_OPTION in self.given or name in self.contested):
            return [], None
        choices, pending = [], [values[0]]
        while pending:
            node = pending.pop()
            if isinstance(node, cst.IfExp):
                pending += [node.body, node.orelse]
            elif (value := literal(node)) is ... and (value := torch_dtype(node)) is None:
                return [], None
            else:
                choices.append(value)
        return choices, f"constant:{name}"

    def _option_default(self, test: cst.Attribute, scope=None) -> tuple:
        """`args.fp16`: its declared default, when no run the project shows gives it another value."""
        name = test.attr.value
        if self.rewritten and name in self.configured:
            return ..., None  # copied in from a config that sets it
        held = test.value
        if isinstance(held, cst.Attribute) and isinstance(held.value, cst.Name) and held.value.value == "self" and held.attr.value in self.parsed_names:
            held = held.attr  # (`self.args.x`: the options a trainer keeps as `self.args = args`)
        if not (isinstance(held, cst.Name) and held.value in self.parsed_names):
            return ..., None
        return self._option_value(name, option_of(test), scope)

    def _option_value(self, name: str, label: str, scope=None) -> tuple:
        """(the value of the parsed option `name` in every run the project shows that runs `scope`, `label`),
        or (..., None)."""
        default = self.declared.get(name, ...)
        if default is ... or name in self.written or name in _GIVEN_BY_LAUNCHERS:
            return ..., None
        aliases = self.aliases.get(name, {name})
        if not any(alias in self.given for alias in aliases):
            return default, label
        # (given by some launch line: decided when every line that names the script gives one value, or leaves the default)
        lines = self.launch_values or [{alias: None for alias in aliases}]
        if self.launch_values and self._only_line is not None:
            lines = [self.launch_values[self._only_line]]
        elif self.launch_values and scope is not None:
            reaching = self.lines_reaching(scope)
            if reaching is not None:
                lines = [line for i, line in enumerate(self.launch_values) if i in reaching]
        if not lines:
            return ..., None  # (no launch line runs it: nothing to decide by)
        values = []
        for line in lines:
            written = next((line[alias] for alias in aliases if alias in line), ...)
            if written is None:
                return ..., None
            values.append(default if written is ... else True if written == "" else _unquoted(written) if name in self.text_options else scalar(written))
        same = all(type(v) is type(values[0]) and v == values[0] for v in values)
        return (values[0], label) if same else (..., None)

    def lines_reaching(self, scope, depth: int = 0) -> Optional[frozenset]:
        """The launch lines naming the module (indices into launch_values) that may run the function `scope`:
        those that pass the tests of some call of it (`if args.do_train: train(args)`), from the lines that
        run the caller. None: every line (the module's top level, a method, a function named other than
        in its calls of this module, or called from another module)."""
        if scope is None or scope.name == "<module>" or not self.launch_values or depth > 5:
            return None
        if scope.parent is not None:
            return self.lines_reaching(scope.parent, depth + 1)
        if id(scope) in self._reaching:
            return self._reaching[id(scope)]
        self._reaching[id(scope)] = None  # (a recursive call: every line)
        found: Optional[set] = None
        name = scope.name
        calls = self.calls_of.get(name, []) if scope.class_name is None else []
        self.callers_read.add(name)
        if calls and name not in self.called_elsewhere and self._name_uses().get(name) == len(calls):
            found = set()
            for site in calls:
                caller = self.lines_reaching(site.scope, depth + 1)
                found |= {i for i in (range(len(self.launch_values)) if caller is None else caller) if self._line_passes(i, site)}
        self._reaching[id(scope)] = frozenset(found) if found is not None else None
        return self._reaching[id(scope)]

    def _name_uses(self) -> Counter:
        """How often each name is read in the module (its calls among them), from Python's tree: once, and
        only for a module whose launch lines disagree on an option a function reads."""
        if self._uses is None:
            tree = parse_python(self.text)
            self._uses = Counter(n.id for n in ast.walk(tree) if isinstance(n, ast.Name)) if isinstance(tree, ast.AST) else Counter()
        return self._uses

    def _line_passes(self, line: int, site) -> bool:
        """Whether the launch line `line` may pass every test `site` runs under."""
        self._only_line = line
        try:
            for guard in site.guards:
                if guard.early_exit:
                    continue
                value, option = self._as_run(guard.test, site.scope, 1)
                if option is not None and value is not ... and bool(value) == guard.negated:
                    return False
            return True
        finally:
            self._only_line = None

    def unproven(self, expr: Optional[cst.BaseExpression], scope=None, depth: int = 0) -> Optional[str]:
        """`unproven:KEY` for a switch of loss scaling (`GradScaler(enabled=cfg.train.use_amp)`) that nothing
        the project shows turns on: its value as run is not known, and its key (`use_amp`, or `fp16` of
        `kwargs.get("fp16", False)`) is not an option a launch gives or declares true, and no config file,
        launch line or code of the project sets it true. None when it may be on, or is not such a key (a
        name handed in by a caller keeps its callers' say)."""
        if self.given is None or expr is None or self.value_as_run(expr, scope)[0] is not ...:
            return None
        for _ in range(3):  # through locals and attributes set once (`amp = config.get("amp", False)`, `self.amp = params.get("use_amp", True)`)
            if isinstance(expr, cst.Attribute) and (assigned := self._writes_in_its_class(expr, scope)) is not None:
                # (only to a default: a copy of another key, `self.amp_run = args.amp_gen`, is read by its own name)
                if len(assigned) != 1 or not (isinstance(assigned[0][0], cst.Call) and last_name(assigned[0][0].func) == "get"):
                    break
                expr, scope = assigned[0]
                continue
            owner = scope.owner_of(expr.value) if isinstance(expr, cst.Name) and scope is not None else None
            values = self.bindings.get((id(owner), expr.value), ()) if owner is not None else ()
            if len(values) != 1 or values[0] is None:
                break
            expr, scope = values[0], owner
        if depth < 3 and isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.And):  # (`use_amp = bool(cfg_get(...)) and on_cuda`)
            return next((found for side in conjuncts(expr) if (found := self.unproven(side, scope, depth + 1))), None)
        if depth < 3 and isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "bool" and len(expr.args) == 1:
            return self.unproven(expr.args[0].value, scope, depth + 1)  # (bounded: `fp16_run = bool(fp16_run)` names itself)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "get" and expr.args:
            default = literal(expr.args[1].value) if len(expr.args) > 1 else None
            keys = [literal(expr.args[0].value)] if default in (None, False, 0) else []
        elif isinstance(expr, cst.Call) and len(expr.args) >= 3 and isinstance(literal(expr.args[-2].value), str):
            # (`getattr(config, "fp16", False)`, or a helper that reads a key with a default: `_cfg(config, "mixed_precision", False)`)
            keys = [literal(expr.args[-2].value)] if literal(expr.args[-1].value) in (None, False, 0) else []
        else:
            keys = _key_path(expr)[1:]
        key = keys[-1] if keys and isinstance(keys[-1], str) else None
        if key is None or key in self.given or key in self.set_true or key in self.configured or self.declared.get(key, False) is not False:
            return None
        if key in self.given_to_scripts and key not in self.declared:
            return None  # (given to the script that hands its options over: `train.py --fp16`, read here as `self.args.fp16`)
        if any(value is not None and self._as_run(value, owner, 1)[0] is True for value, owner, _ in self.written_values.get(key, ())):
            return None  # (the module sets it true as run: `args.amp = not args.noamp`, `--noamp` given by no launch)
        return f"unproven:{key}"

    def declarations(self) -> dict:
        """The options this module declares, as plain data for the summary of a function that returns
        them or their parser (a default that is not a literal, or is declared twice: `[]`)."""
        return {
            "declared": {dest: [] if default is ... else [default] for dest, default in sorted(self.declared.items())},
            "aliases": {dest: sorted(names) for dest, names in sorted(self.aliases.items())},
            "rewritten": self.rewritten, "written": sorted(self.written), "text": sorted(self.text_options),
        }

    def adopt(self, declarations: dict) -> None:
        """Take in the options another module declares (`declarations()` of its command line)."""
        for dest, default in declarations["declared"].items():
            self.declared[dest] = ... if dest in self.declared or not default else default[0]
            self.aliases[dest] = self.aliases.get(dest, set()) | set(declarations["aliases"].get(dest, [dest]))
        self.rewritten |= declarations["rewritten"]
        self.written |= set(declarations["written"])
        self.text_options |= set(declarations.get("text", ()))

    def _global_as_run(self, name: str, depth: int = 0) -> tuple:
        """A global the module sets once and no function changes: the literal it is set to (`dtype =
        "bfloat16"`), or the value as run of what it is set to (`grad_accm = args.gradient_accumulation`).
        When the module runs a configurator, only if no launch gives `--dtype` and no module of the project
        sets it to another value (a config file the configurator runs)."""
        values = self.bindings.get((id(self.module_scope), name), ())
        if len(values) != 1 or values[0] is None or name in self.declared_global:
            return ..., None
        if self.runs_code and (name in self.given or name in self.contested):
            return ..., None
        if literal(values[0]) is ...:
            return self._as_run(values[0], self.module_scope, depth + 1) if depth < 3 else (..., None)
        return literal(values[0]), f"constant:{name}"

    def _config_default(self, expr: cst.BaseExpression, switched: bool = True) -> tuple:
        """`hps.train.fp16_run`, `config["amp"]`: false when the config files of the project set that key
        (the path below the config object), each time, to false, and nothing sets it true (`switched`); else
        the one value they all give it (a number, a precision)."""
        found = self._switched_off_key(_key_path(expr)) if switched else None
        if found is not None:
            return found
        values, label = self._config_choices(expr)
        return (values[0], label) if len(set(map(_as_compared, values))) == 1 else (..., None)

    def _switched_off_key(self, keys: list) -> Optional[tuple]:
        """(False, its label) for a key the config files set false, each time, and nothing sets true (by its name:
        `self.config.run_cfg.get("loss_scale")` reads the `run:` section's `loss_scale`), the path read, or the
        one of the same name."""
        # (the module's own writes of a false literal, `if not use_cuda: self.args.fp16 = False`, keep it off)
        # (and its copies, `self.lr_decay = config.get("lr_decay", False)`, which hold what the config gives)
        if len(keys) < 2 or keys[-1] in self.written and not all(
                v is not None and (literal(v) is False or _reads_key(v, keys[-1])) for v, _, _ in self.written_values.get(keys[-1], [(None,) * 3])):
            return None
        below = ".".join(keys[1:])
        named = [p for p in sorted(self.switched_off) if p.rsplit(".", 1)[-1] == keys[-1]]
        found = next((p for p in named if p == below or p.endswith("." + below)), named[0] if named else None)
        return (False, f"config:{found}") if found is not None else None

    def value_option(self, option: Optional[str]) -> bool:
        """`--resume PATH`, `--load_epoch N`: an option the module's parser declares to take a value per run,
        with a default that is no run's value (None, "", or a negative sentinel such as -1), as opposed to a
        flag off by default (`--load_optimizer_scheduler`); or a config key every config file gives such a value."""
        if option and option.startswith("config:"):  # (`load_epoch: -1` in every config file: the same, as a config key)
            values = [scalar(word) for word in self.configured_values.get(option[len("config:"):], ())]
            return bool(values) and all(map(_no_runs_value, values))
        name = option[2:].replace("-", "_") if option and option.startswith("--") else None
        return name is not None and name in self.declared and _no_runs_value(self.declared[name])

    def never_runs(self, site) -> Optional[str]:
        """The option (`--fp16`) of a flag off as run that the site runs only under (`if args.fp16:`,
        `if exists(path) and args.resume_optimizer:`), or the switch of loss scaling nothing turns on that
        it needs (`if algorithm.use_amp:`, or the `else` of `if not cfg.fp16:`); None when it may run."""
        # (asked of every statement in each round of the roles' inference: answered once per set of guards)
        branches = tuple((id(g.test), g.negated) for g in site.guards if not g.early_exit)
        if branches not in self._branch_tested:
            self._branch_tested[branches] = self._never_runs(site)
        return self._branch_tested[branches]

    def _never_runs(self, site) -> Optional[str]:
        for guard in site.guards:
            if guard.early_exit:
                continue
            if (id(guard.test), guard.negated) not in self._option_tested:
                self._option_tested[(id(guard.test), guard.negated)] = self._false_as_run(guard.test, site.scope) if not guard.negated else self._true_as_run(guard.test, site.scope)
            found = self._option_tested[(id(guard.test), guard.negated)]
            if found is not None:
                return found
        if not any(g.negated for g in site.guards) or all(g.negated or g.early_exit for g in site.guards):
            return None
        return self._ruled_out_by_an_earlier_branch(site)

    def _ruled_out_by_an_earlier_branch(self, site) -> Optional[str]:
        """`elif args.fp16 and cuda:` after `if args.bf16 and cuda:`, with every launch giving `--bf16`: the
        branch needs the earlier test false and `cuda` true, so `args.bf16` false, which no run shows. The
        option that makes each conjunct of an earlier test true that the branch does not itself require."""
        required = [c for g in site.guards if not g.negated and not g.early_exit for c in conjuncts(g.test)]
        for guard in site.guards:
            if not guard.negated or guard.early_exit:
                continue
            options = []
            for conjunct in conjuncts(guard.test):
                if any(conjunct.deep_equals(other) for other in required):
                    continue
                value, option = self.value_as_run(conjunct, site.scope)
                if option is None or value is ... or not value:
                    break
                options.append(option)
            else:
                if options:
                    return options[0]
        return None

    def _false_as_run(self, test: cst.BaseExpression, scope) -> Optional[str]:
        """What makes `test` false in every run the project shows: one conjunct off as run."""
        for conjunct in conjuncts(test):
            switch = _names_loss_scaling(conjunct)
            found = self.off_as_run(conjunct, scope)
            # (a module without options of its own is told by the config files, each setting the key false:
            # `if args.max_norm:` with `max_norm: 0.` everywhere)
            if found and (self.declared or switch or found.startswith(("config:", "constant:", "callers:"))):
                return found
            if switch and (found := self.unproven(conjunct, scope)):
                return found
        return None

    def _true_as_run(self, test: cst.BaseExpression, scope) -> Optional[str]:
        """What makes `test` true in every run the project shows (the `else` of `if not args.fp16:` never
        runs): one disjunct true as run, or `not SWITCH` for a switch of loss scaling nothing turns on."""
        for disjunct in disjuncts(test):
            negated = isinstance(disjunct, cst.UnaryOperation) and isinstance(disjunct.operator, cst.Not)
            switch = _names_loss_scaling(disjunct.expression if negated else disjunct)
            if self.declared or switch:
                value, option = self.value_as_run(disjunct, scope)
                if option is not None and value is not ... and value:
                    return option
            if negated and switch and (found := self.unproven(disjunct.expression, scope)):
                return found
        return None


_COMPARISONS = {
    cst.Is: lambda a, b: a is b, cst.IsNot: lambda a, b: a is not b, cst.Equal: lambda a, b: a == b, cst.NotEqual: lambda a, b: a != b,
    cst.GreaterThan: lambda a, b: a > b, cst.GreaterThanEqual: lambda a, b: a >= b, cst.LessThan: lambda a, b: a < b, cst.LessThanEqual: lambda a, b: a <= b,
}


def _names_loss_scaling(test: cst.BaseExpression) -> bool:
    """A test of a key that switches loss scaling itself: `cfg.use_amp`, `hps["fp16_run"]`, `config.get("amp")`,
    a local `use_amp` (not `if self.scaler:`, an object, nor `if args.resume:`), or a comparison with a
    precision (`dtype == torch.float32`, `cfg.amp_dtype == "fp16"`)."""
    if isinstance(test, cst.Comparison):
        operands = [test.left] + [c.comparator for c in test.comparisons]
        return any(torch_dtype(o) is not None or isinstance(literal(o), str) and literal(o) in _PRECISION_WORDS or _names_loss_scaling(o) for o in operands)
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) and test.func.attr.value == "get" and test.args:
        key = literal(test.args[0].value)
    elif isinstance(test, cst.Name):
        key = test.value
    else:
        keys = _key_path(test)
        key = keys[-1] if keys else None
    return isinstance(key, str) and bool(_LOSS_SCALING_SWITCH.search(key))


# What a precision is written as in a comparison (`amp_dtype == "fp16"`, `precision == "16-mixed"`)
_PRECISION_WORDS = frozenset({"fp16", "fp32", "bf16", "float16", "float32", "bfloat16", "16-mixed", "bf16-mixed", "32-true", "O0", "O1", "O2", "O3"})
_TORCH_DTYPES = {"float32": "float32", "float": "float32", "float16": "float16", "half": "float16", "bfloat16": "bfloat16", "float64": "float64", "double": "float64"}


@dataclass(frozen=True)
class TorchDtype:
    """A floating dtype of torch as a value (`torch.float16`, also written `torch.half`)."""

    name: str


def torch_dtype(expr: cst.BaseExpression) -> Optional[TorchDtype]:
    written = dotted(expr)
    if written is None or not written.startswith("torch.") or written.count(".") != 1:
        return None
    name = _TORCH_DTYPES.get(written[len("torch."):])
    return TorchDtype(name) if name else None


def _unquoted(written: str) -> str:
    """A shell word as the program gets it: `"False"` is `False`."""
    return written[1:-1] if len(written) > 1 and written[0] == written[-1] and written[0] in "'\"" else written


def _as_compared(value: object) -> str:
    """A config value as the code's comparisons tell it from others: `1` and `1.` alike, `16` and `"16"` not."""
    return repr(int(value)) if type(value) is float and value.is_integer() else repr(value)


_YAML_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+(?:\.\d*)?e[-+]?\d+)")


def scalar(written: str) -> object:
    """A config file's value as written (JSON's text, or a YAML/TOML/INI token): `fp32`, `"16"`, `true`, `16`."""
    try:
        return json.loads(written)
    except ValueError:
        pass
    word = written.lower()
    if word in ("true", "yes", "on"):
        return True
    if word in ("false", "no", "off"):
        return False
    if word in ("null", "none", "~", ""):
        return None
    if _YAML_NUMBER.fullmatch(word):  # (`1.`, `.5`, `1e-4`: YAML's numbers that JSON does not read)
        return float(word)
    return _unquoted(written)


def _key_path(expr: cst.BaseExpression) -> list:
    """`hps.train.fp16_run` -> [hps, train, fp16_run]; `cfg["train"]["amp"]` -> [cfg, train, amp]; else []."""
    keys = []
    while True:
        if isinstance(expr, cst.Attribute):
            keys.append(expr.attr.value)
            expr = expr.value
        elif isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) and isinstance(literal(expr.slice[0].slice.value), str):
            keys.append(literal(expr.slice[0].slice.value))
            expr = expr.value
        elif isinstance(expr, cst.Name):
            return [expr.value] + keys[::-1]
        else:
            return []


# Options a distributed launcher gives every process it starts, whatever the command line says
# (`torch.distributed.launch` and `deepspeed` pass `--local_rank=N`): their defaults decide nothing.
_GIVEN_BY_LAUNCHERS = frozenset({"local_rank"})
_STRING_TESTS = ("isdigit", "isnumeric", "isdecimal", "lower", "upper", "strip")


def _reads_key(value: cst.BaseExpression, key: str) -> bool:
    """`config.get("lr_decay", False)`, `cfg.lr_decay`, `cfg["lr_decay"]`: a read of the key `key`."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "get" and value.args:
        return literal(value.args[0].value) == key
    return bool(_key_path(value)[1:]) and _key_path(value)[-1] == key


def _no_runs_value(default: object) -> bool:
    """None, "", or a negative number: a default that stands for "not given" (`--load_epoch -1`)."""
    return default is None or default == "" or type(default) in (int, float) and default < 0


def option_of(test: cst.Attribute) -> str:
    """`args.fp16` -> `--fp16`, as a launch would give it."""
    return "--" + test.attr.value


def read_command_line(structure: Structure, project, text: str = "") -> CommandLine:
    launched = project is not None and project.launch_options is not None
    found = CommandLine(given=set(project.launch_options) if launched else None, configured=set(project.configured_options) if launched else set(),
                        switched_off=set(project.switched_off_keys) if launched else set(), contested=set(project.contested_globals) if launched else set(),
                        set_true=set(project.switches_set_true) if launched else set(),
                        given_to_scripts=set(project.switches_given_to_scripts) if launched else set(),
                        configured_values=dict(project.configured_values) if launched else {},
                        launch_values=project.launch_values if launched else None,
                        precision_keys_configured=dict(project.precision_keys_configured) if launched else {})
    found.module_scope = next((scope for scope in structure.scopes if scope.name == "<module>"), None)
    found.text = text
    found.called_elsewhere = set(project.called_elsewhere) if project is not None else set()
    found.parameter_values = project.parameter_values if project is not None else {}
    found.declared_global = {name for scope in structure.scopes for name in scope.global_names}
    for call, site in structure.calls:
        func = call.func
        method = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if isinstance(func, cst.Name):
            found.calls_of.setdefault(func.value, []).append(site)
        if method == "add_argument":
            _declare(found, call)
            receiver = dotted(func.value) if isinstance(func, cst.Attribute) else None
            if receiver is not None:
                found.parsers.add(receiver)
        elif method == "exec" or method == "update" and isinstance(func.value, cst.Call) and dotted(func.value.func) == "globals":
            found.runs_code = True
        elif method in ("set_defaults", "setattr") or method == "update" and _namespace_dict(func.value):
            found.rewritten = True  # (also of other objects: a namespace may be handed to them)
            named = literal(positional(call)[1]) if method == "setattr" and len(positional(call)) > 1 else None
            if isinstance(named, str):
                found.written.add(named)  # `setattr(args, "fp16", True)`
    adopted = {}
    for node, site in structure.statements:
        if isinstance(node, cst.Assign):
            value = node.value
            callee = project.callee(value, site.scope) if project is not None and isinstance(value, cst.Call) else None
            if callee is None and project is not None and _parses(value) and isinstance(value.func.value, cst.Call):
                callee = project.callee(value.func.value, site.scope)  # `args = get_parser().parse_args()`
                if callee is not None and callee.returns_options == RETURNS_PARSER and not _defined_here(callee, project):
                    adopted[callee.where] = callee.options
                callee = None
            if callee is not None and callee.options is not None:  # `args = get_args()`, `parser = build_parser()`
                if not _defined_here(callee, project):  # (this module's own declarations are read already)
                    adopted[callee.where] = callee.options
                if callee.returns_options == RETURNS_PARSED:
                    found.parsed_names.update(t.value for t in assignment_targets(node) if isinstance(t, cst.Name))
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "vars" and len(value.args) == 1 and (
                _parses(value.args[0].value) or isinstance(value.args[0].value, cst.Name) and value.args[0].value.value in found.parsed_names
            ):
                found.parsed_dicts.update(t.value for t in assignment_targets(node) if isinstance(t, cst.Name))
            if _parses(value):
                if positional(value):
                    found.rewritten = True  # options written in the code (`parse_args(["--fp16"])`)
                for target in assignment_targets(node):
                    if isinstance(target, cst.Name):
                        found.parsed_names.add(target.value)
                for target in node.targets:  # `args, _ = parser.parse_known_args()`
                    if isinstance(target.target, cst.Tuple) and target.target.elements and isinstance(target.target.elements[0].value, cst.Name):
                        found.parsed_names.add(target.target.elements[0].value.value)
        single = node.targets[0].target if isinstance(node, cst.Assign) and len(node.targets) == 1 else None  # (the target of a plain `=`)
        for target in assignment_targets(node):
            value = node.value if target is single else None
            if isinstance(target, cst.Attribute):
                found.written.add(target.attr.value)
                receiver = target.value.value if isinstance(target.value, cst.Name) else None
                found.written_values.setdefault(target.attr.value, []).append((value, site.scope, receiver))
            elif isinstance(target, cst.Name):
                found.bindings.setdefault((id(site.scope), target.value), []).append(value)
                found.binding_sites.setdefault((id(site.scope), target.value), []).append(site)
    for declarations in adopted.values():
        found.adopt(declarations)
    return found


RETURNS_PARSED = "parsed"  # a function returns what `parse_args()` returned
RETURNS_PARSER = "parser"  # ... or the parser its options are declared on


def returned_options(command_line: CommandLine, value: cst.BaseExpression) -> Optional[str]:
    """Whether a returned value is the parsed options (RETURNS_PARSED) or their parser (RETURNS_PARSER)."""
    if _parses(value) and not positional(value):
        return RETURNS_PARSED if command_line.declared else None
    written = dotted(value)
    if written in command_line.parsed_names and command_line.declared:
        return RETURNS_PARSED
    return RETURNS_PARSER if written in command_line.parsers else None


def _defined_here(callee, project) -> bool:
    """The callee is a function of the module itself (`where` is `path:line`)."""
    return callee.where.rsplit(":", 1)[0] == project.path


def _parses(value: cst.BaseExpression) -> bool:
    """`parser.parse_args()` and its kin."""
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _PARSE_CALLS


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
    # (a launch may give it under any of its long names: `--mixed_precision`, `--mp`)
    found.aliases[dest] = {dest} | {f.lstrip("-").replace("-", "_") for f in flags if f.startswith("--")}
    found.declared[dest] = ... if dest in found.declared else default
    kind = keyword(call, "type")
    if keyword(call, "action") is None and (kind is None or isinstance(kind, cst.Name) and kind.value == "bool") and keyword(call, "nargs") is None and keyword(call, "choices") is None:
        # (argparse hands it over as written: `--noamp False` gives the text "False", which is true; so does
        # `type=bool`, whose `bool("False")` is true too)
        found.text_options.add(dest)


def _namespace_dict(expr: cst.BaseExpression) -> bool:
    """`vars(args)` or `args.__dict__`: the options as a dict, which an `.update(...)` rewrites."""
    if isinstance(expr, cst.Call):
        return isinstance(expr.func, cst.Name) and expr.func.value == "vars"
    return isinstance(expr, cst.Attribute) and expr.attr.value == "__dict__"
