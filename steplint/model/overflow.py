"""fairseq-style overflow handling: an fp16 optimizer raises `OverflowError` when the gradients
overflow (fairseq's FP16Optimizer from `clip_grad_norm`, BMTrain's optimizers from `step()`), and
the training loop catches it, drops the update and goes on.

In `try: ... optimizer.step() ... except OverflowError: ...`, the `step()` is a skippable update
when the handler lets the pass go on (it does not end in `raise`) and treats the update as dropped:
it clears the gradients (`zero_grad()`), calls the optimizer (`optim.set_scale(...)`) or sets a flag.
(A handler of an `OverflowError` from `math.exp(loss)`, after a step that was made, does none of
that.) What the `try` runs after the step, and its `else:`, runs only after a committed update; the
handler, only after a skipped one; what follows the `try` runs after both, unless the handler ends
the pass (`continue`, `break`, `return`). A name the handler sets to True or False
(`overflow = True`) is the code's commit flag.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Set, Tuple

import libcst as cst

from steplint.model.events import OPTIMIZER_STEP, SKIPPABLE_STEP, Event
from steplint.model.structure import Block, Guard, Site, ends_in
from steplint.model.syntax import dotted, walk_expressions

if TYPE_CHECKING:
    from steplint.model import ModuleModel

OVERFLOW_ERROR = "overflow-error"  # strategy of a step an `except OverflowError` drops and goes on


@dataclass
class OverflowHandling:
    guards: Dict[int, Guard] = field(default_factory=dict)  # id(event node) -> runs only after a committed, or only after a skipped, update
    flags: Set[str] = field(default_factory=set)  # keys of the names the handlers set to True or False


def overflow_handling(model: "ModuleModel") -> OverflowHandling:
    """Turns the steps such handlers drop into skippable updates, and finds which events run only
    after a committed (or a skipped) update. Runs before anything reads the events by kind."""
    found = OverflowHandling()
    after: Dict[int, List[Tuple[Guard, int, Optional[cst.CSTNode]]]] = defaultdict(list)  # block -> runs after the step in it
    inside: Dict[int, Guard] = {}  # id(else or handler block owner) -> its guard
    handlers: Set[int] = set()
    guards: Dict[int, Guard] = {}  # one per `try`
    for event in model.events:
        handling = _dropped_by(event) if event.kind == OPTIMIZER_STEP else None
        if handling is None:
            continue
        entry, handler = handling
        body = event.site.trail[entry][0]
        handling_try = body.owner
        event.kind, event.strategy = SKIPPABLE_STEP, OVERFLOW_ERROR
        guard = guards.setdefault(id(handling_try), Guard(handler.type, False, handling_try))  # type: ignore[arg-type]
        after[id(body)].append((guard, event.order, None))
        for part in (handling_try.orelse, handler):
            if part is not None:
                inside[id(part)] = guard
        handlers.add(id(handler))
        if ends_in(handler.body, (cst.Continue, cst.Break, cst.Return)):
            stop = cst.Return if ends_in(handler.body, (cst.Return,)) else None
            for block, holder in _enclosing(event.site, entry, stop):
                after[id(block)].append((guard, event.order, holder))
    for event in model.events:
        guard = _guard_of(event, after, inside)
        if guard is not None and not any(g is guard for g in event.site.guards):
            found.guards[id(event.node)] = guard
    if handlers:
        for node, site in model.structure.statements:
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and any(
                id(block.owner) in handlers for block, _ in site.trail
            ) and isinstance(node.value, cst.Name) and node.value.value in ("True", "False"):
                found.flags.add(model.roles.key(node.targets[0].target, site.scope))  # type: ignore[arg-type]
    return found


def _dropped_by(event: Event) -> Optional[Tuple[int, cst.ExceptHandler]]:
    """(index in the trail of the `try` body, its handler) when the innermost `try` around the step,
    in the same pass of its loop, catches OverflowError and goes on."""
    for index in range(len(event.site.trail) - 1, -1, -1):
        block, _ = event.site.trail[index]
        if isinstance(block.owner, (cst.For, cst.While)):
            return None  # a `try` around the whole loop ends the loop: nothing goes on
        if isinstance(block.owner, cst.Try):
            handler = next((h for h in block.owner.handlers if catches_overflow(h)), None)
            if handler is not None:
                goes_on = not ends_in(handler.body, (cst.Raise,)) and _drops_the_update(handler, dotted(event.subject))
                return (index, handler) if goes_on else None
    return None


def catches_overflow(handler: cst.ExceptHandler) -> bool:
    caught = handler.type
    names = [e.value for e in caught.elements] if isinstance(caught, cst.Tuple) else [caught]
    return any(isinstance(n, cst.Name) and n.value == "OverflowError" for n in names)


def _drops_the_update(handler: cst.ExceptHandler, optimizer: Optional[str]) -> bool:
    """The handler clears gradients, calls the optimizer (its dotted text) or sets a flag."""
    for node in walk_expressions(handler.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and (
            node.func.attr.value == "zero_grad" or optimizer is not None and dotted(node.func.value) == optimizer
        ):
            return True
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name) and node.value.value in ("True", "False"):
            return True
    return False


def _enclosing(site: Site, entry: int, stop) -> List[Tuple[Block, cst.CSTNode]]:
    """(block, the statement in it that holds the `try`), from the `try` outward to the body of the
    loop the pass belongs to (to the function's body when the handler returns)."""
    found = []
    for block, holder in reversed(site.trail[:entry]):
        found.append((block, holder))
        if stop is None and isinstance(block.owner, (cst.For, cst.While)):
            break
    return found


def _guard_of(event: Event, after, inside) -> Optional[Guard]:
    """The overflow guard an event runs under: in a `try` body after the step, after the `try` when
    the handler ends the pass, or in the `else:` or the handler."""
    for block, statement in event.site.trail:
        guard = inside.get(id(block.owner))
        if guard is not None:
            return guard
        for guard, order, holder in after.get(id(block), ()):
            if event.order > order and statement is not holder:
                return guard
    return None
