"""Guessed commit signals: the sub-expressions of a condition that infer whether an update committed
from the loss scale (`before <= scaler.get_scale()`) or from the loss's finiteness (`isfinite(loss)`),
and what each is true for (a committed update or a skipped one), read from the code."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from steplint.model.guards import GUESSED_GATE, is_finiteness_check
from steplint.model.syntax import last_name, walk_expressions

if TYPE_CHECKING:
    from steplint.model import ModuleModel

COMMITTED, SKIPPED = "committed", "skipped"  # what a guess is true for


def guesses(model: "ModuleModel", test, scope):
    """The guessing sub-expressions of a condition, following a flag to its assignment: each with the
    `not` around it (or None) and the expression it sits in."""
    negations = {id(sub.expression): sub for sub in walk_expressions(test) if isinstance(sub, cst.UnaryOperation) and isinstance(sub.operator, cst.Not)}
    for sub in walk_expressions(test):
        if isinstance(sub, cst.Comparison) and any(model.guards.is_scale_read(o, scope) for o in [sub.left] + [c.comparator for c in sub.comparisons]):
            yield sub, negations.get(id(sub)), test
        elif isinstance(sub, cst.Call) and is_finiteness_check(sub) and not any(isinstance(a.value, cst.Call) and is_finiteness_check(a.value) for a in sub.args):
            yield sub, negations.get(id(sub)), test
        elif isinstance(sub, cst.Name) and GUESSED_GATE in model.guards.flag_kinds(sub, scope):
            assignment = model.guards.flag_assignment(sub, scope)
            if assignment is not None:
                yield from guesses(model, assignment.value, scope)


def guess_sense(model, guess, scope):
    """What the guess is true for: COMMITTED (`before <= after`, `isfinite(loss)`), SKIPPED
    (`before > after`, `isnan(loss)`), or None when the code does not say (`before >= after`, a
    scale compared with a constant, a chain)."""
    if isinstance(guess, cst.Call):
        return _finiteness_sense(guess)
    return _SENSES.get(scale_comparison(model, guess, scope))


def scale_comparison(model, guess, scope):
    """The comparison's operator as `before OP after` (the earlier read on the left), or None."""
    if len(guess.comparisons) != 1:
        return None
    operator = type(guess.comparisons[0].operator)
    times = [_read_time(model, o, scope) for o in (guess.left, guess.comparisons[0].comparator)]
    if None in times or times[0] == times[1]:
        return None
    return _FLIPPED.get(operator, operator) if times[0] > times[1] else operator


_FLIPPED = {cst.LessThan: cst.GreaterThan, cst.GreaterThan: cst.LessThan, cst.LessThanEqual: cst.GreaterThanEqual, cst.GreaterThanEqual: cst.LessThanEqual}
# `before < after` is the strict growth test (meant as "committed"); `before >= after` is true on a
# skip and on an unchanged scale alike: what it was meant for is a guess of our own
_SENSES = {cst.LessThanEqual: COMMITTED, cst.LessThan: COMMITTED, cst.Equal: COMMITTED, cst.GreaterThan: SKIPPED, cst.NotEqual: SKIPPED}


def _read_time(model, operand, scope):
    """Program order at which a compared loss scale was read: the call itself, or the assignment of
    the variable that holds it."""
    if not model.guards.is_scale_read(operand, scope):
        return None
    if isinstance(operand, cst.Name):
        assignment = model.guards.flag_assignment(operand, scope)
        return model.order_of_expression(assignment.value) if assignment is not None else None
    return model.order_of_expression(operand)


def _finiteness_sense(call):
    """`isfinite(x)`, `isfinite(x).all()`: COMMITTED; `isnan(x)`, `isinf(x).any()`: SKIPPED."""
    inner, reduction = call, None
    if isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Call) and not call.args:
        inner, reduction = call.func.value, call.func.attr.value
    name = last_name(inner.func)
    if name == "isfinite" and reduction in (None, "all", "item"):
        return COMMITTED
    if name in ("isnan", "isinf") and reduction in (None, "any", "item"):
        return SKIPPED
    return None
