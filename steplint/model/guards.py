"""What a condition means for the training step: commit gate, window boundary, rank test, ..."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable, FrozenSet, Optional

import libcst as cst

from steplint.model.syntax import dotted, last_name, walk_expressions

COMMIT_GATE = "commit-gate"  # true exactly when the update committed (or a flag the code keeps for it)
GUESSED_GATE = "guessed-gate"  # stands in for one: loss-scale comparison, loss finiteness
WINDOW_BOUNDARY = "window-boundary"  # last micro-batch of an accumulation window
MODULO = "modulo"  # `i % n == 0`: a cadence, or a window boundary when it guards the update
RANK = "rank"  # runs on some ranks only
FINITENESS = "finiteness"  # a rank's own isfinite/isnan check

_EXACT_FLAG = re.compile(r"overflow|skipped|committed|applied|was_run|found_inf", re.I)
_ACCUMULATION_NAME = re.compile(r"accum|grad_acc|update_freq|iters_to_accumulate", re.I)
_BOUNDARY_FLAG = re.compile(r"boundary|should_step|do_step|is_accumulating|sync_gradients|optimizer_step_now", re.I)
_RANK_NAME = re.compile(r"(^|_)(rank|local_rank|global_rank|is_main_process|is_local_main_process|is_master|is_global_zero|is_main|main_process)$", re.I)
_FINITE_CALLS = {"isfinite", "isnan", "isinf", "isnan_", "isfinite_"}
_ACCEPTED_COMMIT_ATTRS = {"optimizer_step_was_skipped"}


def is_finiteness_check(expr: cst.CSTNode) -> bool:
    for sub in walk_expressions(expr):
        if isinstance(sub, cst.Call) and last_name(sub.func) in _FINITE_CALLS:
            return True
    return False


def divides_by_window(modulo: cst.BinaryOperation) -> bool:
    """`x % accum`: the modulus is the accumulation length (`(step // accum) % 2` alternates, it is no window)."""
    text = " ".join(filter(None, (dotted(n) for n in walk_expressions(modulo.right) if isinstance(n, (cst.Name, cst.Attribute)))))
    return bool(_ACCUMULATION_NAME.search(text))


@lru_cache(maxsize=4096)  # the same few names are read in most conditions of a module
def _name_kind(name: str) -> Optional[str]:
    """What a name read in a condition says by itself: a commit flag, a window boundary or a rank."""
    if name in _ACCEPTED_COMMIT_ATTRS or _EXACT_FLAG.search(name):
        return COMMIT_GATE
    if _BOUNDARY_FLAG.search(name):
        return WINDOW_BOUNDARY
    if _RANK_NAME.search(name):
        return RANK
    return None


def condition_kinds(
    test: cst.BaseExpression,
    flag_kind: Callable[[cst.BaseExpression], FrozenSet[str]],
    is_scale_read: Callable[[cst.BaseExpression], bool],
) -> FrozenSet[str]:
    """Kinds of a condition. `flag_kind` gives the kinds of a name the code assigned a condition to;
    `is_scale_read` tells a loss-scale read (`scaler.get_scale()` or a variable holding one)."""
    kinds = set()
    for sub in walk_expressions(test):
        node = type(sub)  # (type tests: see steplint.model.syntax.dotted)
        if node is cst.Call:
            name = last_name(sub.func)
            if name == "was_step_applied" or name == "_found_inf_per_device":
                kinds.add(COMMIT_GATE)
            elif name == "is_gradient_accumulation_boundary":
                kinds.add(WINDOW_BOUNDARY)
            elif name == "get_rank":
                kinds.add(RANK)
            elif name in _FINITE_CALLS:
                kinds.update((GUESSED_GATE, FINITENESS))
        elif node is cst.Comparison:
            operands = [sub.left] + [c.comparator for c in sub.comparisons]
            if any(is_scale_read(o) for o in operands):
                kinds.add(GUESSED_GATE)
        elif node is cst.BinaryOperation and type(sub.operator) is cst.Modulo:
            kinds.add(WINDOW_BOUNDARY if divides_by_window(sub) else MODULO)
        elif node is cst.Name or node is cst.Attribute:
            kind = _name_kind(last_name(sub) or "")
            if kind is not None:
                kinds.add(kind)
            if node is cst.Name:
                kinds.update(flag_kind(sub))
    return frozenset(kinds)
