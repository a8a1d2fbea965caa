"""Loops over a group of optimizers or schedulers (`for opt in self.optimizers: scaler.step(opt)`).

Such a loop is not a pass over data: the steps it makes belong to the pass of the loop around it.
Events inside it are re-sited in that outer pass, and remembered, because a fix that pairs one
scheduler with one optimizer's commit does not fit a loop over several of each.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Set

import libcst as cst

from steplint.model.roles import OPTIMIZER, SCHEDULER

if TYPE_CHECKING:
    from steplint.model import ModuleModel


def group_loops(model: "ModuleModel") -> Set[int]:
    """Ids of `for x in ...:` loops whose target holds an optimizer or a scheduler."""
    found = set()
    for loop, site in model.structure.for_loops:
        role = model.roles.of(loop.target, site.scope) if isinstance(loop.target, cst.Name) else None
        if role is not None and role.kind in (OPTIMIZER, SCHEDULER):
            found.add(id(loop))
    return found


def resite_group_events(model: "ModuleModel") -> Set[int]:
    """Move events whose innermost loop is a group loop into the pass around it; returns their node ids."""
    loops = group_loops(model)
    moved = set()
    for event in model.events:
        site = event.site
        while site.loops and id(site.loops[-1]) in loops:
            site = replace(site, loops=site.loops[:-1])
        if site is not event.site:
            event.site = site
            moved.add(id(event.node))
    return moved
