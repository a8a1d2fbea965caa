"""Updates the code skips itself: `if not torch.isfinite(grad_norm): optimizer.zero_grad()` with the
`optimizer.step()` in the other branch. What follows outside that branch advances on skipped updates."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

from steplint.model.events import OPTIMIZER_STEP, Event
from steplint.model.guards import FINITENESS
from steplint.model.structure import Guard

if TYPE_CHECKING:
    from steplint.model import ModuleModel


def skipped_by_the_code(model: "ModuleModel", event: Event) -> Optional[Tuple[Event, Guard]]:
    """A plain optimizer step of `event`'s pass that runs under a finiteness check `event` does not
    run under, with the check: the update is skipped on non-finite values while `event` goes on."""
    own = {(id(g.test), g.negated) for g in event.site.guards}
    for step in model.in_iteration(event, OPTIMIZER_STEP):
        if not model.same_window(step.site, event.site):
            continue
        for guard in step.site.guards:
            if (id(guard.test), guard.negated) not in own and FINITENESS in model.guard_kinds(guard):
                return step, guard
    return None
