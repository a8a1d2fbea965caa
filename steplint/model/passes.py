"""Passes: how the events of one pass of a training loop relate to each other.

One pass is one iteration of the innermost loop in one function: one batch, or one micro-batch under
accumulation. Two events of a pass may be exclusive (never both run: opposite branches of one
unchanged condition, or one ends the pass first), one may cover another (runs on every path through
it), and an event follows the attempted update of its pass (`attempt_for`): a scheduler or counter
after `scaler.step(opt)` runs whether that update committed or was skipped, unless a commit gate
(steplint.model.guards) says otherwise. A scheduler follows the update of the optimizer it was built on.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING, Dict, List, Optional

import libcst as cst

from steplint.model.events import SCHEDULER_STEP, SKIPPABLE_STEP, Event
from steplint.model.roles import ENGINE, OPTIMIZER, SCALER
from steplint.model.structure import EXITS, Site
from steplint.model.syntax import dotted

if TYPE_CHECKING:
    from steplint.model import ModuleModel


class Passes:
    """How the events of one pass relate: exclusive, covering, the update an event follows."""

    def __init__(self, model: "ModuleModel"):
        self.model = model
        self._off: Dict[int, bool] = {}

    @staticmethod
    def same_iteration(a: Site, b: Site) -> bool:
        """In one scope and one iteration of the same innermost loop (or both in no loop)."""
        return a.scope is b.scope and a.loop is b.loop

    def exclusive(self, a: Site, b: Site) -> bool:
        """Never both in one pass: different branches of one `if`, opposite branches of two tests of
        the same unchanged condition (`if args.amp: ...` then later `if not args.amp: ...`), or one
        ends its pass first (`if resuming: counter += 1; continue` before the update)."""
        polarity = {id(g.test): g.negated for g in a.guards if not g.early_exit}
        if any(id(g.test) in polarity and polarity[id(g.test)] != g.negated for g in b.guards if not g.early_exit):
            return True
        if a.scope is b.scope and self._correlated_opposites(a, b):
            return True
        first, second = (a, b) if a.order < b.order else (b, a)
        return _exits_before(first, second)

    def _correlated_opposites(self, a: Site, b: Site) -> bool:
        held = {}
        for guard in a.guards:
            text, flipped = self.model.guards.condition(guard.test)
            held[text] = (guard, guard.negated != flipped)
        for guard in b.guards:
            text, flipped = self.model.guards.condition(guard.test)
            if text in held and held[text][1] != (guard.negated != flipped) and self.model.guards.unchanged(held[text][0], guard, a.scope):
                return True
        return False

    def runs_only_with(self, later: Site, earlier: Site) -> bool:
        """`later` runs only in passes where `earlier`'s conditions held: it is under each of them
        (the same test, or a test of the same unchanged condition with the same polarity)."""
        held = {(id(g.test), g.negated) for g in later.guards}
        texts = {}
        for guard in later.guards:
            text, flipped = self.model.guards.condition(guard.test)
            texts[text] = (guard, guard.negated != flipped)
        for guard in earlier.guards:
            if (id(guard.test), guard.negated) in held:
                continue
            text, flipped = self.model.guards.condition(guard.test)
            match = texts.get(text)
            if match is None or match[1] != (guard.negated != flipped) or not self.model.guards.unchanged(guard, match[0], later.scope):
                return False
        return True

    def attempt_for(self, event: Event, before_only: bool = True) -> Optional[Event]:
        """The skippable update that `event` follows in the same iteration and window, if any."""
        candidates = [
            u for u in self.model.pass_events(event.site, SKIPPABLE_STEP)
            if not self.exclusive(u.site, event.site) and self.model.windows.same_window(u.site, event.site) and not self._never_runs(u)
        ]
        paired = self._own_updates(event, candidates)
        if paired is not None:
            candidates = paired
        before = [u for u in candidates if u.order < event.order]
        if before:
            return before[-1]
        return None if before_only or not candidates else candidates[0]

    def _never_runs(self, update: Event) -> bool:
        """The update sits under a flag off by default that nothing turns on (`if amp:` with `amp=False`
        the only value any call gives): no pass attempts it (computed once per update)."""
        found = self._off.get(id(update))
        if found is None:
            found = self._off[id(update)] = self.model.guards.off_by_default(update.site) is not None
        return found

    def _own_updates(self, event: Event, candidates: List[Event]) -> Optional[List[Event]]:
        """A scheduler follows the update of the optimizer it was built on (two optimizers sharing
        one scaler, GAN-style): None when the code does not say which optimizer that is."""
        optimizer = event.role.optimizer if event.kind == SCHEDULER_STEP and event.role is not None else None
        if optimizer is not None and event.role.optimizer_replaced:
            return []  # (its optimizer was replaced by a new one under the same name: no update here is its own)
        if optimizer is None or optimizer.split(":", 1)[0] not in (event.site.scope.name, "<module>", f"class {event.site.scope.class_name}"):
            return None
        # (a call of a helper that steps, `self.optimizer_step()`, may step it: kept)
        return [u for u in candidates if u.optimizer is None or optimizer in (self.model.roles.key(u.optimizer, u.site.scope), _engine_optimizer(u))]

    def may_follow(self, event: Event, update: Event) -> bool:
        """Whether `event` may be tied to `update`: not a scheduler the code shows built on another
        optimizer (a GAN's generator schedule beside the discriminator's less frequent update)."""
        paired = self._own_updates(event, [update])
        return paired is None or bool(paired)

    def built_on(self, scheduler: Event, update: Event) -> bool:
        """Whether the code says the scheduler was built on the optimizer that `update` steps."""
        paired = self._own_updates(scheduler, [update])
        return bool(paired) and update.optimizer is not None

    def in_iteration(self, event: Event, *kinds: str) -> List[Event]:
        """Events of `kinds` that run in the same pass of the same loop as `event`."""
        return [
            e for e in self.model.pass_events(event.site, *kinds)
            if e is not event and not self.exclusive(e.site, event.site) and not any(
                absent(a, b) for absent in (self._scaler_absent, self._scaler_disabled) for a, b in ((e, event), (event, e))
            )
        ]

    def cleared_between(self, earlier: Event, later: Event) -> bool:
        """A `zero_grad()` runs in the pass between two events, of the optimizer `later` steps or of an
        object the code does not show to be another optimizer (a module, whose parameters may be that
        optimizer's): the gradients `earlier` left may be gone when `later` runs. Another optimizer's
        `zero_grad()` leaves them."""
        scope = later.site.scope
        stepped = self.model.roles.key(later.optimizer or later.subject, scope)
        for call, site in self._zero_grads.get((id(scope), id(later.site.loop)), ()):
            if not earlier.order < site.order < later.order or self.exclusive(site, later.site) or self.exclusive(site, earlier.site):
                continue
            receiver = call.func.value
            role = self.model.roles.of(receiver, scope) if isinstance(receiver, (cst.Name, cst.Attribute)) else None
            if role is not None and role.kind == OPTIMIZER and self.model.roles.key(receiver, scope) != stepped:
                continue
            return True
        return False

    @cached_property
    def _zero_grads(self) -> Dict[tuple, List[tuple]]:
        """(call, site) of every `x.zero_grad()`, by (scope, innermost loop)."""
        found: Dict[tuple, List[tuple]] = defaultdict(list)
        for call, site in self.model.structure.calls:
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == "zero_grad":
                found[(id(site.scope), id(site.loop))].append((call, site))
        return found

    def _scaler_absent(self, scaler_event: Event, other: Event) -> bool:
        """`other` runs only where the scaler of `scaler_event` is None (`else:` of `if scaler is not
        None:`, unchanged in between): a scaler that does not exist scaled and stepped nothing in that pass,
        though a helper called with it (`backward(loss, scaler)`) makes the call look like a scaled backward."""
        role = scaler_event.role
        if scaler_event.subject is None or role is None or role.kind != SCALER:
            return False
        name = dotted(scaler_event.subject)
        for guard in other.site.guards:
            text, flipped = self.model.guards.condition(guard.test)
            if text != name or guard.negated == flipped or guard.early_exit:
                continue
            tested = self.model.structure.site_of.get(id(guard.test))
            if tested is None:
                continue
            low, high = sorted((tested.order, scaler_event.order))
            if not self.model.guards.assigned_between(name, other.site.scope, low, high):
                return True
        return False

    def _scaler_disabled(self, scaler_event: Event, other: Event) -> bool:
        """`other` runs only where the scaler of `scaler_event` is disabled: under the false arm of a
        test of the flag its `enabled=` reads (`GradScaler(enabled=use_amp)`, then `if use_amp: ...
        else: optimizer.step()`), the flag not assigned in that function before. A disabled scaler scales
        nothing and its step is the plain one."""
        role = scaler_event.role
        flag = role.enabled_by if role is not None and role.kind == SCALER else None
        if flag is None:
            return False
        scaler_key = self.model.roles.key(scaler_event.subject, scaler_event.site.scope) or ""
        if "." not in flag and scaler_key.split(":", 1)[0] != other.site.scope.name:
            return False  # a plain name is the same flag only in the function that built the scaler
        for guard in other.site.guards:
            text, flipped = self.model.guards.condition(guard.test)
            if text == flag and guard.negated != flipped and not guard.early_exit:
                return not self.model.guards.assigned_between(flag, other.site.scope, 0, other.order)
        return False

    def covers(self, later: Site, earlier: Site) -> bool:
        """`later` runs on every path through `earlier` (after it): no condition or early exit of its
        own, other than a second test of a condition `earlier` runs under, unchanged in between and
        taken the same way (`if scaler is not None: unscale_` ... `if scaler is None: ... else: step`)."""
        if not (self.same_iteration(later, earlier) and later.order > earlier.order):
            return False
        own = {(id(g.test), g.negated) for g in earlier.guards}
        rest = [g for g in later.guards if (id(g.test), g.negated) not in own]
        if not rest:
            return True
        held = {}
        for guard in earlier.guards:
            text, flipped = self.model.guards.condition(guard.test)
            held[text] = (guard, guard.negated != flipped)
        for guard in rest:
            if guard.early_exit:
                return False
            text, flipped = self.model.guards.condition(guard.test)
            match = held.get(text)
            if match is None or match[1] != (guard.negated != flipped) or not self.model.guards.unchanged(match[0], guard, later.scope):
                return False
        return True

    def covered_by_some(self, laters: List[Site], earlier: Site) -> bool:
        """Some of `laters` runs on every path through `earlier`: one covers it alone, or they sit in
        the arms of one `if`/`else` (`if cap: scaler.update(new_scale=cap) else: scaler.update()`),
        which together run wherever that `if` does."""
        sites = [s for s in laters if self.same_iteration(s, earlier) and s.order > earlier.order]
        while sites:
            if any(self.covers(s, earlier) for s in sites):
                return True
            merged = _merge_opposite_arms(sites)
            if merged is None:
                return False
            sites = merged
        return False

    def shares_its_pass(self, update: Event) -> bool:
        """Another skippable scaler step runs in the same pass (two optimizers, one scaler), not on a
        branch that excludes this one."""
        return any(
            other is not update and other.strategy == SCALER and not self.exclusive(other.site, update.site)
            for other in self.model.pass_events(update.site, SKIPPABLE_STEP)
        )

    def ends_early_before(self, site: Site) -> bool:
        """A `continue` earlier in the same pass of the same loop, inside a nested branch
        (`else: ...; if (i + 1) % accum: continue`): what follows may run once per window only."""
        return any(order < site.order for order in self._continues.get((id(site.scope), id(site.loop)), ()))

    @cached_property
    def _continues(self) -> Dict[tuple, List[int]]:
        found: Dict[tuple, List[int]] = defaultdict(list)
        for node, site in self.model.structure.statements:
            if isinstance(node, cst.Continue):
                found[(id(site.scope), id(site.loop))].append(site.order)
        return found

    def update_left_to_callers(self, step: Event) -> bool:
        """A helper steps a scaler it is given, and updating it is its callers' business: a caller in
        the project updates it after the call, or no caller is in the project to tell."""
        project, scope = self.model.roles.project, step.site.scope
        if project is None or not isinstance(step.subject, cst.Name) or scope.parent is not None:
            return False
        name = step.subject.value
        if name not in {p.name.value for p in scope.params} or scope.owner_of(name) is not scope:
            return False
        return name in project.caller_updates.get(scope.name, ()) or scope.name not in project.called


def _engine_optimizer(update: Event) -> Optional[str]:
    """The key of the optimizer a DeepSpeed engine's step() steps, when the code names it."""
    return update.role.optimizer if update.role is not None and update.role.kind == ENGINE else None


def _exits_before(first: Site, second: Site) -> bool:
    """`first` sits in a block that ends the pass (continue, break, return, raise) after it and
    that does not hold `second`."""
    shared = {id(block) for block, _ in second.trail}
    for block, statement in first.trail:
        if id(block) in shared:
            continue
        rest = block.statements[block.index(statement) + 1 :]
        if any(isinstance(s, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and any(isinstance(x, EXITS) for x in s.body) for s in rest):
            return True
    return False


def _merge_opposite_arms(sites: List[Site]) -> Optional[List[Site]]:
    """Replace two sites in the two arms of the same innermost test (guards equal but for that test,
    taken both ways) by one site under the outer guards only: the pair runs wherever the `if` does.
    None when no such pair exists."""
    for i, a in enumerate(sites):
        for b in sites[i + 1 :]:
            if not a.guards or len(a.guards) != len(b.guards):
                continue
            last_a, last_b = a.guards[-1], b.guards[-1]
            if last_a.test is not last_b.test or last_a.negated == last_b.negated or last_a.early_exit or last_b.early_exit:
                continue
            if any(x.test is not y.test or x.negated != y.negated for x, y in zip(a.guards[:-1], b.guards[:-1])):
                continue
            joined = replace(a, guards=a.guards[:-1], order=min(a.order, b.order))
            return [joined] + [s for s in sites if s is not a and s is not b]
    return None
