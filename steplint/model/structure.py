"""One walk over a module: scopes, blocks, loops and the conditions each statement runs under.

Everything here is syntax; what the names mean (roles) and what the calls do (events) is decided
later from these records, so the module is walked only once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

import libcst as cst

from steplint.model.syntax import dotted, import_bindings, walk_expressions

LoopNode = Union[cst.For, cst.While]
EXITS = (cst.Continue, cst.Break, cst.Return, cst.Raise)  # statements that end a pass early
_STOPS = (cst.Break, cst.Return)  # ... and with it the loop they run in


@dataclass(eq=False)
class Scope:
    """The module's top level or one function: the unit in which events are ordered."""

    node: Union[cst.Module, cst.FunctionDef]
    name: str
    class_name: Optional[str] = None
    self_name: Optional[str] = None
    params: Tuple[cst.Param, ...] = ()
    local_names: set = field(default_factory=set)
    parent: Optional["Scope"] = None  # the enclosing function of a nested function
    global_names: set = field(default_factory=set)  # names the function declares `global`: the module's, not its own
    nonlocal_names: set = field(default_factory=set)  # names it declares `nonlocal`: an enclosing function's
    imports: Dict[str, str] = field(default_factory=dict)  # names its own import statements bind -> qualified names

    def owner_of(self, name: str) -> Optional["Scope"]:
        """The function scope that binds `name`, this one or an enclosing one; None: a global."""
        scope: Optional[Scope] = self
        while scope is not None and scope.name != "<module>":
            if name in scope.local_names:
                return scope
            scope = scope.parent
        return None


@dataclass(eq=False)
class Block:
    """A statement sequence: a module, function or loop body, one branch of an `if`."""

    owner: cst.CSTNode
    statements: Sequence[cst.BaseStatement]

    def index(self, statement: cst.BaseStatement) -> int:
        return next(i for i, s in enumerate(self.statements) if s is statement)


@dataclass(eq=False)
class Guard:
    """A condition a statement runs under. `early_exit`: from `if cond: continue` before it."""

    test: cst.BaseExpression
    negated: bool
    statement: cst.CSTNode
    early_exit: bool = False
    raises: bool = False  # the guarded branch ends in `raise` or `sys.exit(...)`: the run stops there, nothing is skipped
    stops: bool = False  # ... or in `break` or `return`: the loop it runs in stops there (if inside one)


@dataclass(eq=False)
class Site:
    """Where a statement sits: its scope, enclosing loops and guards, and its block trail."""

    scope: Scope
    loops: Tuple[LoopNode, ...]
    guards: Tuple[Guard, ...]
    trail: Tuple[Tuple[Block, cst.BaseStatement], ...]  # (block, statement in it), outermost first
    order: int

    @property
    def statement(self) -> cst.BaseStatement:
        return self.trail[-1][1]

    @property
    def loop(self) -> Optional[LoopNode]:
        return self.loops[-1] if self.loops else None


def shared_loops(first: Site, second: Site) -> int:
    """How many enclosing loops, from the outermost, two sites share."""
    shared = 0
    for x, y in zip(first.loops, second.loops):
        if x is not y:
            break
        shared += 1
    return shared


@dataclass
class Structure:
    scopes: List[Scope] = field(default_factory=list)
    # (node, site) for every small statement and compound-statement header, in program order
    statements: List[Tuple[cst.CSTNode, Site]] = field(default_factory=list)
    calls: List[Tuple[cst.Call, Site]] = field(default_factory=list)
    for_loops: List[Tuple[cst.For, Site]] = field(default_factory=list)
    while_loops: List[Tuple[cst.While, Site]] = field(default_factory=list)
    with_items: List[Tuple[cst.WithItem, Site]] = field(default_factory=list)  # (`open(path, "w") as f`, ...)
    remainders: List[Tuple[cst.BinaryOperation, Site]] = field(default_factory=list)  # every `a % b`, where it is read
    site_of: Dict[int, Site] = field(default_factory=dict)  # id(small statement or header) -> site
    holder: Dict[int, cst.CSTNode] = field(default_factory=dict)  # id(node) -> the recorded statement that holds it
    top_of: Dict[int, cst.CSTNode] = field(default_factory=dict)  # id(statement or recorded node) -> its top-level statement


def walk_module(module: cst.Module) -> Structure:
    walker = _Walker(module)
    top = Scope(node=module, name="<module>")
    walker.structure.scopes.append(top)
    walker.block(Block(module, module.body), top, (), (), ())
    return walker.structure


class _Walker:
    def __init__(self, module: cst.Module) -> None:
        self.structure = Structure()
        self.order = 0
        self.module = module
        self.top: Optional[cst.CSTNode] = None  # the top-level statement being walked

    def block(self, block: Block, scope: Scope, loops, guards, trail) -> None:
        guards = tuple(guards)
        for statement in block.statements:
            if block.owner is self.module:
                self.top = statement
            self.structure.top_of[id(statement)] = self.top
            here = trail + ((block, statement),)
            self.statement(statement, scope, loops, guards, here)
            exit_guard = _early_exit_guard(statement)
            if exit_guard is not None:
                guards = guards + (exit_guard,)

    def site(self, scope, loops, guards, trail) -> Site:
        self.order += 1
        return Site(scope, tuple(loops), tuple(guards), trail, self.order)

    def record(self, node: cst.CSTNode, site: Site, scope: Scope) -> None:
        self.structure.statements.append((node, site))
        self.structure.site_of[id(node)] = site
        self.structure.top_of[id(node)] = self.top
        holder = self.structure.holder
        for sub in walk_expressions(node):
            holder.setdefault(id(sub), node)
            kind = type(sub)  # (type tests: see steplint.model.syntax.dotted)
            if kind is cst.Call:
                self.structure.calls.append((sub, site))
            elif kind is cst.BinaryOperation and type(sub.operator) is cst.Modulo:
                self.structure.remainders.append((sub, site))
        _bind_names(node, scope)

    def statement(self, statement, scope, loops, guards, trail) -> None:
        if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in statement.body:
                added = _conditional_add(small)
                site = self.site(scope, loops, guards + added, trail)
                self.record(small, site, scope)
                for guard in added:
                    self.structure.site_of[id(guard.test)] = site  # (where the test is read, like an `if`'s)
        elif isinstance(statement, cst.If):
            self.if_statement(statement, scope, loops, guards, trail)
        elif isinstance(statement, (cst.For, cst.While)):
            header = statement.iter if isinstance(statement, cst.For) else statement.test
            site = self.site(scope, loops, guards, trail)
            self.record(header, site, scope)
            if isinstance(statement, cst.For):
                self.record(statement.target, site, scope)
                _bind_target(statement.target, scope)
                self.structure.for_loops.append((statement, site))
                body_guards = guards
            else:
                self.structure.while_loops.append((statement, site))
                body_guards = guards + (Guard(statement.test, False, statement),)
            self.body(statement.body, statement, scope, loops + (statement,), body_guards, trail)
            if statement.orelse is not None:
                self.body(statement.orelse.body, statement.orelse, scope, loops, guards, trail)
        elif isinstance(statement, cst.With):
            site = self.site(scope, loops, guards, trail)
            for item in statement.items:
                self.record(item.item, site, scope)
                self.structure.with_items.append((item, site))
                if item.asname is not None:
                    _bind_target(item.asname.name, scope)
            self.body(statement.body, statement, scope, loops, guards, trail)
        elif isinstance(statement, cst.Try):
            self.body(statement.body, statement, scope, loops, guards, trail)
            for handler in statement.handlers:
                self.body(handler.body, handler, scope, loops, guards, trail)
            for part in (statement.orelse, statement.finalbody):
                if part is not None:
                    self.body(part.body, part, scope, loops, guards, trail)
        elif isinstance(statement, cst.FunctionDef):
            self.function(statement, scope)
        elif isinstance(statement, cst.ClassDef):
            self.body(statement.body, statement, _ClassScope(scope, statement.name.value), loops, guards, trail)

    def if_statement(self, statement: cst.If, scope, loops, guards, trail) -> None:
        self.structure.top_of[id(statement)] = self.top
        self.record(statement.test, self.site(scope, loops, guards, trail), scope)
        raises = ends_the_run(statement.body)
        self.body(statement.body, statement, scope, loops, guards + (Guard(statement.test, False, statement, raises=raises),), trail)
        orelse = statement.orelse
        negated = guards + (Guard(statement.test, True, statement),)
        if isinstance(orelse, cst.If):
            self.if_statement(orelse, scope, loops, negated, trail + ((Block(statement, (orelse,)), orelse),))
        elif isinstance(orelse, cst.Else):
            self.body(orelse.body, orelse, scope, loops, negated, trail)

    def body(self, suite, owner, scope, loops, guards, trail) -> None:
        if isinstance(suite, cst.IndentedBlock):
            self.block(Block(owner, suite.body), scope, loops, guards, trail)
        else:  # `if x: a; b` on one line: the suite stands for its statements
            self.block(Block(owner, (suite,)), scope, loops, guards, trail)

    def function(self, node: cst.FunctionDef, outer) -> None:
        params = tuple(node.params.posonly_params) + tuple(node.params.params) + tuple(node.params.kwonly_params)
        if isinstance(outer, _ClassScope):
            class_name, parent = outer.class_name, None
            # (a staticmethod has no instance: its first parameter is an argument like the others)
            static = any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in node.decorators)
            self_name = params[0].name.value if params and not static else None
            name = f"{class_name}.{node.name.value}"
        elif outer.name != "<module>":  # a nested function sees its enclosing function's names
            class_name, self_name, parent = outer.class_name, outer.self_name, outer
            name = f"{outer.name}.{node.name.value}"
        else:
            class_name, self_name, parent, name = None, None, None, node.name.value
        scope = Scope(node, name, class_name, self_name, params, {p.name.value for p in params}, parent)
        for star in (node.params.star_arg, node.params.star_kwarg):
            if isinstance(star, cst.Param):
                scope.local_names.add(star.name.value)
        self.structure.scopes.append(scope)
        self.body(node.body, node, scope, (), (), ())


class _ClassScope(Scope):
    """While walking a class body: methods get the class name; other statements stay in the outer scope."""

    def __init__(self, outer: Scope, class_name: str) -> None:
        super().__init__(outer.node, outer.name, class_name, outer.self_name, outer.params, outer.local_names)


def _conditional_add(small: cst.BaseSmallStatement) -> Tuple[Guard, ...]:
    """`n += 1 if boundary else 0` adds only when `boundary` holds: it runs as if under `if boundary:`
    (and `n += 0 if warmup else 1` as if under its `else:`)."""
    if not (isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign) and isinstance(small.value, cst.IfExp)):
        return ()
    value = small.value
    if _is_zero(value.orelse) and not _is_zero(value.body):
        return (Guard(value.test, False, small),)
    if _is_zero(value.body) and not _is_zero(value.orelse):
        return (Guard(value.test, True, small),)
    return ()


def _is_zero(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Integer) and expr.evaluated_value == 0


def _early_exit_guard(statement: cst.BaseStatement) -> Optional[Guard]:
    """The condition the rest of a block runs under after an `if` that ends the pass on one side:
    `if cond: ...; continue` (no else) leaves `not cond`; `if cond: ... else: continue` leaves `cond`."""
    if not isinstance(statement, cst.If):
        return None
    inner = _only_statement(statement.body) if statement.orelse is None else None
    if isinstance(inner, cst.If) and inner.orelse is None and ends_in(inner.body, EXITS):
        # `if accum != 1: if step % accum != 0: return`: past it, the inner test failed wherever the
        # outer one held, and where it did not (no accumulation) every batch ends a window anyway
        return Guard(inner.test, True, inner, early_exit=True, raises=ends_the_run(inner.body), stops=ends_in(inner.body, _STOPS))
    if statement.orelse is None:
        if ends_in(statement.body, EXITS):
            return Guard(statement.test, True, statement, early_exit=True, raises=ends_the_run(statement.body), stops=ends_in(statement.body, _STOPS))
    elif isinstance(statement.orelse, cst.Else) and ends_in(statement.orelse.body, EXITS) and not ends_in(statement.body, EXITS):
        return Guard(statement.test, False, statement, early_exit=True, raises=ends_the_run(statement.orelse.body),
                     stops=ends_in(statement.orelse.body, _STOPS))
    return None


def _only_statement(suite: cst.BaseSuite) -> Optional[cst.BaseStatement]:
    body = suite.body if isinstance(suite, cst.IndentedBlock) else ()
    return body[0] if len(body) == 1 else None


_PROCESS_ENDS = ("sys.exit", "exit", "quit", "os._exit", "os.abort")


def ends_the_run(suite: cst.BaseSuite) -> bool:
    """The branch ends in `raise`, or in a call that ends the process (`sys.exit(1)`): nothing after it runs."""
    if ends_in(suite, (cst.Raise,)):
        return True
    body = suite.body if isinstance(suite, cst.IndentedBlock) else [suite]
    last = body[-1] if body else None
    smalls = last.body if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else []
    called = smalls[-1].value if smalls and isinstance(smalls[-1], cst.Expr) and isinstance(smalls[-1].value, cst.Call) else None
    return called is not None and dotted(called.func) in _PROCESS_ENDS


def ends_in(suite: cst.BaseSuite, kinds: tuple) -> bool:
    body = suite.body if isinstance(suite, cst.IndentedBlock) else [suite]
    last = body[-1] if body else None
    smalls = last.body if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else []
    return bool(smalls) and isinstance(smalls[-1], kinds)


def _bind_names(node: cst.CSTNode, scope: Scope) -> None:
    if isinstance(node, (cst.Import, cst.ImportFrom)) and scope.name != "<module>":
        scope.imports.update(import_bindings(node))  # `from apex import amp` in a function or a branch of it
    elif isinstance(node, cst.Global) and scope.name != "<module>":
        scope.global_names.update(n.name.value for n in node.names)
        scope.local_names.difference_update(scope.global_names)
    elif isinstance(node, cst.Nonlocal):
        scope.nonlocal_names.update(n.name.value for n in node.names)
        scope.local_names.difference_update(scope.nonlocal_names)
    elif isinstance(node, (cst.Assign,)):
        for target in node.targets:
            _bind_target(target.target, scope)
    elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
        _bind_target(node.target, scope)


def _bind_target(target: cst.BaseExpression, scope: Scope) -> None:
    if isinstance(target, cst.Name):
        if target.value not in scope.global_names and target.value not in scope.nonlocal_names:
            scope.local_names.add(target.value)
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            _bind_target(element.value, scope)
    elif isinstance(target, cst.StarredElement):
        _bind_target(target.value, scope)
