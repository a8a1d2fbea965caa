"""Integers the code shows plainly, and a window length that is 1 as written.

A window boundary `step % accum == 0` with `accum` 1 in every run the project shows holds on every
batch: no window, every attempted update is a batch. The values read here are literals, module
constants set once, locals set once before the point read, and a caller's literal config; anything
else is unknown (None), and an unknown length is not 1.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Dict

import libcst as cst

from steplint.model.structure import Guard, Scope, Site
from steplint.model.syntax import bound_names, dotted, literal

if TYPE_CHECKING:
    from steplint.model import ModuleModel


def one_as_written(model: "ModuleModel", length: cst.BaseExpression, scope: Scope) -> bool:
    """`accum` is 1 in every run the project shows: set to 1, and changed only in a branch whose test
    is false for the values the function's callers pass (`accum = 1; if batch_size > MAX: accum =
    batch_size // MAX` with `batch_size = config["batch_size"]`, every caller passing a literal config
    with `"batch_size": 16` and `MAX = 16`), or an option declared `default=1` that no launch of the
    script gives (`args.gradient_accumulation_steps`), or a parameter every call of the project leaves
    at 1 (`Trainer(..., grad_accumulation_steps=1)`, or its default of 1), never set in the function.
    Then every batch is a window."""
    value, _ = model.roles.command_line.value_as_run(length, scope)
    if type(value) in (int, float) and value == 1:  # (`cfg.grad_accumulation = 1.`: a window of one batch too; not True)
        return True
    if isinstance(length, cst.Name) and model.remember(("left_at_one", id(scope), length.value), lambda: _left_at_one(model, length.value, scope)):
        return True
    if not isinstance(length, cst.Name) or scope.name == "<module>" or scope.parent is not None or scope.class_name is not None:
        return False
    return model.remember(("one_as_written", id(scope), length.value), lambda: _one_as_written(model, length.value, scope))


def _left_at_one(model: "ModuleModel", name: str, scope: Scope) -> bool:
    project = model.roles.project
    value = project.parameter_values.get(scope.name, {}).get(name) if project is not None else None
    if type(value) is not int or value != 1 or scope.parent is not None:
        return False
    return name in {p.name.value for p in scope.params} and not any(name in bound_names(node) for node, _ in model.statements_of(scope))


def _one_as_written(model: "ModuleModel", name: str, scope: Scope) -> bool:
    if name in {p.name.value for p in scope.params}:
        return False
    if name not in scope.local_names:
        return _module_constant_one(model, name)
    writes = [(node, site) for node, site in model.statements_of(scope) if name in bound_names(node)]
    if not writes or not _assigns_literal(writes[0], name, 1) or writes[0][1].guards:
        return False
    values = _Values(model, scope)
    for node, site in writes[1:]:
        if not any(values.evaluate(g.test, _order_of(model, g, site)) is g.negated for g in site.guards if not g.early_exit):
            return False  # a change of the length that may run
    return True


def _module_constant_one(model: "ModuleModel", name: str) -> bool:
    """A global the module sets to 1 wherever it sets it (`gradient_accumulation_steps = 1` under
    `if __name__ == "__main__":`), that no function declares `global` to change."""
    scopes = model.structure.scopes
    if any(name in other.global_names for other in scopes):
        return False
    module = next((other for other in scopes if other.name == "<module>"), None)
    writes = [(node, site) for node, site in model.statements_of(module) if name in bound_names(node)] if module is not None else []
    return bool(writes) and all(_assigns_literal(write, name, 1) for write in writes)


def _order_of(model: "ModuleModel", guard: Guard, site: Site) -> int:
    tested = model.structure.site_of.get(id(guard.test))
    return tested.order if tested is not None else site.order


def _assigns_literal(write: tuple, name: str, value: int) -> bool:
    node = write[0]
    return (
        isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
        and node.targets[0].target.value == name and literal(node.value) == value
    )


class _Values:
    """Integers the code shows plainly, as seen from one function: literals, module constants set once,
    locals set once before the point read, and `param["key"]` when every caller passes a literal dict."""

    def __init__(self, model: "ModuleModel", scope: Scope):
        self.model, self.scope = model, scope

    def evaluate(self, expr: cst.BaseExpression, before: int, depth: int = 0):
        if depth > 8:
            return None
        if isinstance(expr, cst.Integer):
            return literal(expr)
        if isinstance(expr, cst.Name):
            return self._name(expr.value, before, depth)
        if isinstance(expr, cst.Call) and dotted(expr.func) == "int" and len(expr.args) == 1:
            return self.evaluate(expr.args[0].value, before, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self._from_callers(expr)
        if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, (cst.And, cst.Or)):
            left, right = self.evaluate(expr.left, before, depth + 1), self.evaluate(expr.right, before, depth + 1)
            decisive = isinstance(expr.operator, cst.Or)  # the value that decides alone
            if left is decisive or right is decisive:
                return decisive
            return None if left is None or right is None else not decisive
        if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
            left, right = self.evaluate(expr.left, before, depth + 1), self.evaluate(expr.comparisons[0].comparator, before, depth + 1)
            compare = _COMPARISONS.get(type(expr.comparisons[0].operator))
            return None if compare is None or not isinstance(left, int) or not isinstance(right, int) else compare(left, right)
        return None

    def _name(self, name: str, before: int, depth: int):
        writes = [(node, site) for node, site in self.model.statements_of(self.scope) if name in bound_names(node)]
        if writes:
            earlier = [w for w in writes if w[1].order < before]
            node, site = earlier[0] if len(earlier) == 1 else (None, None)
            if node is None or site.guards or not isinstance(node, cst.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
                return None
            return self.evaluate(node.value, site.order, depth + 1)
        if name in {p.name.value for p in self.scope.params}:
            return None
        return _module_constants(self.model).get(name)

    def _from_callers(self, expr: cst.Subscript):
        """`config["batch_size"]` with `config` a parameter: the value every caller in the module passes."""
        params = [p.name.value for p in self.scope.params]
        index = expr.slice[0].slice if len(expr.slice) == 1 else None
        if not (isinstance(expr.value, cst.Name) and expr.value.value in params and isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString)):
            return None
        project = self.model.roles.project
        self.model.callers_read.add(self.scope.name)
        if project is not None and self.scope.name in project.called_elsewhere:
            return None
        position, key = params.index(expr.value.value), index.value.evaluated_value
        function = self.scope.name
        callers = [(call, site) for call, site in self.model.structure.calls if isinstance(call.func, cst.Name) and call.func.value == function]
        mentions = len(re.findall(rf"\b{re.escape(function)}\b", self.model.source.text))
        if not callers or mentions != len(callers) + 1:
            return None  # also handed around as a value (a launcher calls it with what we cannot see)
        found = set()
        for call, site in callers:
            argument = argument_for(call, position, expr.value.value)
            found.add(_dict_literal_entry(self.model, argument, key, site) if argument is not None else None)
        return found.pop() if len(found) == 1 else None


def argument_for(call: cst.Call, position: int, name: str):
    """The expression a call passes for the parameter at `position` named `name` (None: not visible)."""
    if any(a.star for a in call.args):
        return None
    positional = [a.value for a in call.args if a.keyword is None]
    if position < len(positional):
        return positional[position]
    return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def _dict_literal_entry(model: "ModuleModel", argument: cst.BaseExpression, key: str, site: Site):
    """`{"batch_size": 16}` passed as is, or through a name assigned that literal once in the caller."""
    if isinstance(argument, cst.Name):
        writes = [(node, s) for node, s in model.statements_of(site.scope) if argument.value in bound_names(node)]
        if len(writes) != 1 or not isinstance(writes[0][0], cst.Assign) or writes[0][1].order > site.order:
            return None
        argument = writes[0][0].value
    if not isinstance(argument, cst.Dict):
        return None
    for element in argument.elements:
        if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
            return None  # `**defaults`: the entry may come from elsewhere
        if element.key.evaluated_value == key:
            value = literal(element.value)
            return value if isinstance(value, int) and not isinstance(value, bool) else None
    return None


def _module_constants(model: "ModuleModel") -> Dict[str, int]:
    """`MAX_BATCH = 16` at the top level, assigned nowhere else."""

    def compute() -> Dict[str, int]:
        counts: Dict[str, int] = {}
        values: Dict[str, int] = {}
        for node, _ in model.structure.statements:
            for name in bound_names(node):
                counts[name] = counts.get(name, 0) + 1
        for statement in model.module.body:
            for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                    value = literal(small.value)
                    if isinstance(value, int) and not isinstance(value, bool):
                        values[small.targets[0].target.value] = value
        return {name: value for name, value in values.items() if counts.get(name) == 1}

    return model.remember(("module_constants",), compute)


_COMPARISONS = {
    cst.GreaterThan: lambda a, b: a > b, cst.GreaterThanEqual: lambda a, b: a >= b, cst.LessThan: lambda a, b: a < b,
    cst.LessThanEqual: lambda a, b: a <= b, cst.Equal: lambda a, b: a == b, cst.NotEqual: lambda a, b: a != b,
}
