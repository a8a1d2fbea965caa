"""Small readers of LibCST expressions shared by the model's passes."""

from __future__ import annotations

import dataclasses
import typing
from typing import Dict, Iterator, List, Optional, Set, Tuple, Union

import libcst as cst


# The model's hottest code tests some node classes by `type(x) is`, not isinstance: node classes are
# ABCs, whose isinstance takes a slow path, and those have no subclasses (tests/test_syntax.py checks).
def dotted(expr: Optional[cst.BaseExpression]) -> Optional[str]:
    """`a.b.c` for a chain of names and attributes, else None."""
    kind = type(expr)
    if kind is cst.Name:
        return expr.value  # type: ignore[union-attr]
    if kind is cst.Attribute:
        base = dotted(expr.value)  # type: ignore[union-attr]
        return f"{base}.{expr.attr.value}" if base else None  # type: ignore[union-attr]
    return None


def unwrap_progress(expr: cst.BaseExpression) -> cst.BaseExpression:
    """What a progress bar iterates: `enumerate(loader)` of `tqdm(enumerate(loader), desc=...)`."""
    while isinstance(expr, cst.Call) and last_name(expr.func) == "tqdm" and expr.args and expr.args[0].keyword is None and not expr.args[0].star:
        expr = expr.args[0].value
    return expr


def last_name(expr: cst.BaseExpression) -> Optional[str]:
    kind = type(expr)
    if kind is cst.Name:
        return expr.value  # type: ignore[attr-defined]
    if kind is cst.Attribute:
        return expr.attr.value  # type: ignore[attr-defined]
    return None


def keyword(call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def positional(call: cst.Call) -> List[cst.BaseExpression]:
    return [a.value for a in call.args if a.keyword is None and not a.star]


def literal(expr: Optional[cst.BaseExpression]) -> object:
    """The value of a simple literal (True/False/None, numbers with their sign, plain strings), else `...`."""
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[expr.value]
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value
    if isinstance(expr, (cst.Integer, cst.Float)):
        return expr.evaluated_value
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)) and isinstance(expr.expression, (cst.Integer, cst.Float)):
        return -expr.expression.evaluated_value if isinstance(expr.operator, cst.Minus) else expr.expression.evaluated_value
    return ...


# LibCST computes `children` by visiting the node each time; the model walks the same statements
# many times, so each node's children are computed once. Held for one module at a time (nodes hash
# by identity, and the references keep their ids from being reused while cached).
_CHILDREN: Dict[cst.CSTNode, Tuple[cst.CSTNode, ...]] = {}
# LibCST's `children` rebuilds the node through a visitor, which costs more than the parse over a
# module. The same children, in the same (lexical) order, are the node's fields that its
# `_visit_and_replace_children` visits, in the order it names them: read once per node class from
# that method's string constants (tests/test_syntax.py compares with LibCST over whole modules).
_FIELD_ORDER: Dict[type, Tuple[str, ...]] = {}


def children(node: cst.CSTNode) -> List[cst.CSTNode]:
    """`node.children`, without the visit."""
    kind = type(node)
    order = _FIELD_ORDER.get(kind)
    if order is None:
        order = _FIELD_ORDER[kind] = _visit_order(kind)
    return _values(node, order)


def _visit_order(kind: type) -> Tuple[str, ...]:
    fields = {f.name for f in dataclasses.fields(kind)}
    constants = kind._visit_and_replace_children.__code__.co_consts
    return tuple(c for c in constants if isinstance(c, str) and c in fields)


# Node classes are ABCs: `isinstance(value, cst.CSTNode)` takes ABCMeta's slow path on every call,
# the most frequent call of a model's build. Whether a class is a node is asked once per class.
class _NodeKinds(dict):
    def __missing__(self, kind: type) -> bool:
        self[kind] = issubclass(kind, cst.CSTNode)
        return self[kind]


_IS_NODE = _NodeKinds()


def _values(node: cst.CSTNode, names: Tuple[str, ...]) -> List[cst.CSTNode]:
    found: List[cst.CSTNode] = []
    is_node = _IS_NODE
    for name in names:
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            found.extend([v for v in value if is_node[type(v)]])
        elif is_node[kind]:
            found.append(value)
    return found


def forget_children() -> None:
    """Start a new module's cache of children (build_model calls it for each new module). The previous
    module's is left as it was: a module kept for a second build keeps it (current_children)."""
    global _CHILDREN
    _CHILDREN = {}


def current_children() -> Dict[cst.CSTNode, Tuple[cst.CSTNode, ...]]:
    return _CHILDREN


def restore_children(cached: Dict[cst.CSTNode, Tuple[cst.CSTNode, ...]]) -> None:
    """Take back the cache of children a module had (from forget_children) for its second build."""
    global _CHILDREN
    _CHILDREN = cached


# Whitespace, comments, punctuation and operator tokens: two thirds of a module's nodes, and none is
# anything the model asks about (an operator is read from its expression's field: `op.operator`).
_TOKENS = frozenset(
    [cst.BaseParenthesizableWhitespace, cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.Newline, cst.TrailingWhitespace,
     cst.EmptyLine, cst.Comment, cst.Comma, cst.Dot, cst.Colon, cst.Semicolon, cst.AssignEqual, cst.LeftParen, cst.RightParen,
     cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace]
    + [kind for kind in vars(cst).values() if isinstance(kind, type) and issubclass(kind, cst.CSTNode)
       and issubclass(kind, (cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp, cst.BaseUnaryOp, cst.BaseAugOp))]
)
# Per node class, the fields walk_expressions reads: those whose type admits something besides tokens
# (`Call.func`, `Call.args`, not `Call.lpar` or `Call.whitespace_after_func`), in visit order.
_WALKED_FIELDS: Dict[type, Tuple[str, ...]] = {}


def walked_children(node: cst.CSTNode) -> List[cst.CSTNode]:
    """`children(node)` without the tokens (_TOKENS)."""
    kind = type(node)
    names = _WALKED_FIELDS.get(kind)
    if names is None:
        hints = typing.get_type_hints(kind)
        names = _WALKED_FIELDS[kind] = tuple(n for n in _visit_order(kind) if not _only_tokens(hints.get(n)))
    return [c for c in _values(node, names) if type(c) not in _TOKENS]


def _only_tokens(annotation) -> bool:
    """Whether every node a field's annotation admits is a token (None, unknown: no)."""
    kinds = []
    pending = [annotation]
    while pending:
        current = pending.pop()
        if isinstance(current, type):
            kinds.append(current)
        else:
            pending.extend(typing.get_args(current))
    nodes = [k for k in kinds if issubclass(k, cst.CSTNode)]
    return bool(nodes) and all(k in _TOKENS for k in nodes)


_SCOPE_KINDS = frozenset([cst.FunctionDef, cst.ClassDef])  # (a type test: see dotted)


def conjuncts(test: cst.BaseExpression) -> List[cst.BaseExpression]:
    """`a and b and c` -> [a, b, c] (in parentheses too); any other test -> [test]."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return conjuncts(test.left) + conjuncts(test.right)
    return [test]


def disjuncts(test: cst.BaseExpression) -> List[cst.BaseExpression]:
    """`a or b or c` -> [a, b, c] (in parentheses too); any other test -> [test]."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return disjuncts(test.left) + disjuncts(test.right)
    return [test]


def walk_expressions(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under `node` but tokens (_TOKENS), parents before children, without entering
    nested scopes' bodies."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if type(current) in _SCOPE_KINDS and current is not node:
            continue
        below = _CHILDREN.get(current)
        if below is None:
            below = _CHILDREN[current] = tuple(reversed(walked_children(current)))
        stack.extend(below)


def assignment_targets(node: cst.CSTNode) -> List[cst.BaseExpression]:
    """The targets an assignment (plain, augmented, annotated) writes, tuples unpacked."""
    if isinstance(node, cst.Assign):
        found: List[cst.BaseExpression] = []
        for target in node.targets:
            stack = [target.target]
            while stack:
                current = stack.pop()
                if isinstance(current, (cst.Tuple, cst.List)):
                    stack.extend(e.value for e in reversed(current.elements))  # (popped in the order written)
                else:
                    found.append(current)
        return found
    if isinstance(node, (cst.AnnAssign, cst.AugAssign)):
        return [node.target]
    return []


def bound_names(node: cst.CSTNode) -> Set[str]:
    """The names `node` itself binds: targets of an assignment (plain, augmented, annotated, walrus),
    of a `for` (statement or comprehension), and `as` names (`with`, `except`, `import`)."""
    if isinstance(node, cst.Assign):
        targets = [t.target for t in node.targets]
    elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.For, cst.CompFor)):
        targets = [node.target]
    elif isinstance(node, cst.With):
        targets = [item.asname.name for item in node.items if item.asname is not None]
    elif isinstance(node, cst.AsName):
        targets = [node.name]
    else:
        return set()
    return {n.value for target in targets for n in walk_expressions(target) if isinstance(n, cst.Name)}


def reads(node: cst.CSTNode) -> Iterator[cst.BaseExpression]:
    """The names and attributes an expression reads, outermost first: not the attribute of `x.step`
    (read through `x`) nor the keyword of `f(step=n)` (the callee's parameter), which would stand for
    a variable of the same name."""
    not_reads = set()
    for sub in walk_expressions(node):
        kind = type(sub)
        if kind is cst.Attribute:
            not_reads.add(id(sub.attr))
        elif kind is cst.Arg and sub.keyword is not None:
            not_reads.add(id(sub.keyword))
        if (kind is cst.Name or kind is cst.Attribute) and id(sub) not in not_reads:
            yield sub


def names_in(node: cst.CSTNode) -> Iterator[str]:
    """Dotted names read in an expression: `a`, `self.x`, `args.max_steps`."""
    for sub in walk_expressions(node):
        if isinstance(sub, (cst.Name, cst.Attribute)):
            name = dotted(sub)
            if name:
                yield name


def import_bindings(node: Union[cst.Import, cst.ImportFrom]) -> Dict[str, str]:
    """The local names an import statement binds -> the qualified names they stand for (none for `*`)."""
    found: Dict[str, str] = {}
    if isinstance(node, cst.Import):
        for alias in node.names:
            full = dotted(alias.name) or ""
            if alias.asname is not None:
                found[alias.asname.name.value] = full  # type: ignore[union-attr]
            else:
                head = full.split(".")[0]
                found[head] = head
    elif not isinstance(node.names, cst.ImportStar):
        base = "." * len(node.relative) + (dotted(node.module) or "")
        for alias in node.names:
            name = alias.name.value if isinstance(alias.name, cst.Name) else dotted(alias.name)
            local = alias.asname.name.value if alias.asname else name  # type: ignore[union-attr]
            found[local] = f"{base}.{name}" if base and not base.endswith(".") else f"{base}{name}"
    return found


class ImportMap:
    """Local names bound by imports, mapped to the qualified names they stand for."""

    # Used unimported in snippets and notebooks; resolving them as themselves costs no precision.
    _WELL_KNOWN = ("torch", "deepspeed", "accelerate", "transformers", "timm", "math")

    def __init__(self, module: cst.Module) -> None:
        self.names: Dict[str, str] = {}
        self.star_modules: List[str] = []  # `from pkg.mod import *`: what the module re-exports unnamed
        for node in walk_expressions(module):
            if isinstance(node, cst.ImportFrom) and isinstance(node.names, cst.ImportStar):
                self.star_modules.append("." * len(node.relative) + (dotted(node.module) or ""))
            elif isinstance(node, (cst.Import, cst.ImportFrom)):
                self.names.update(import_bindings(node))

    def qualified(self, expr: cst.BaseExpression, local_names: frozenset = frozenset(), own_imports: Optional[Dict[str, str]] = None) -> Optional[str]:
        """The import-resolved name of `expr`, or None when its base is not an imported name.
        `own_imports`: what the enclosing functions' own import statements bind, nearest first."""
        text = dotted(expr)
        if text is None:
            return None
        head, _, rest = text.partition(".")
        if own_imports and head in own_imports:
            return f"{own_imports[head]}.{rest}" if rest else own_imports[head]
        if head in local_names:
            return None
        resolved = self.names.get(head)
        if resolved is None and head in self._WELL_KNOWN:
            resolved = head
        if resolved is None:
            return None
        return f"{resolved}.{rest}" if rest else resolved


def is_cadence(test: cst.CSTNode) -> bool:
    """`n % k == 0`, `n == k`: true once per value of `n`."""
    return isinstance(test, cst.BaseExpression) and any(
        isinstance(sub, cst.BinaryOperation) and isinstance(sub.operator, cst.Modulo)
        or isinstance(sub, cst.Comparison) and any(isinstance(c.operator, cst.Equal) for c in sub.comparisons)
        for sub in walk_expressions(test)
    )


def reads_name(node: cst.CSTNode, name: str) -> bool:
    """`node` holds the variable `name` (not an attribute or keyword spelled the same)."""
    attributes = {id(n.attr) for n in walk_expressions(node) if isinstance(n, cst.Attribute)}
    keywords = {id(n.keyword) for n in walk_expressions(node) if isinstance(n, cst.Arg) and n.keyword is not None}
    return any(isinstance(n, cst.Name) and n.value == name and id(n) not in attributes | keywords for n in walk_expressions(node))


def boolean_operands(test: cst.BaseExpression) -> List[cst.BaseExpression]:
    """The operands of a chain of `and`/`or` (mixed too), in the order written."""
    if isinstance(test, cst.BooleanOperation):
        return boolean_operands(test.left) + boolean_operands(test.right)
    return [test]
