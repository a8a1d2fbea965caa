"""The premises a diagnostic rests on, and where each was established (`check --show-evidence`).

Read from the model the rule queried, never recomputed: the role of the object the finding is about,
the update of its pass and why it can be skipped, the window it runs in, and for a counter or a
consumer of one, the evidence for the counter's unit (`model.units`). A rule may give its own
premises (`Finding.evidence`); these are the ones for the findings that give none.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from steplint.model.events import CALL, COUNTER_INCREMENT, SKIPPABLE_STEP, Event
from steplint.model.units import UNIT_WORDS, Evidence

if TYPE_CHECKING:
    import libcst as cst

    from steplint.model import ModuleModel

# A premise: (claim, row, column), 1-based, in the diagnostic's file.
Premise = Tuple[str, int, int]


def skip_reason(update: Event) -> str:
    """Why an update can be skipped on its path, in words."""
    role = update.role
    if update.strategy == "scaler":
        enabled = "" if role is None or role.enabled is ... else f" (enabled={role.enabled})"
        return f"GradScaler.step skips the update on inf/NaN gradients{enabled}"
    if update.strategy == "accelerate":
        return "accelerate skips the update when its scaler finds inf/NaN gradients (fp16)"
    if update.strategy == "deepspeed":
        return "the DeepSpeed engine skips the update on overflow (fp16)"
    if update.via is not None:
        return f"it steps in `{update.via.via}` ({update.via.where}), where the update can be skipped"
    if update.strategy == CALL:
        return "a function of this module makes a skippable update"
    return f"its framework ({update.strategy}) may skip the update"


def premises(model: "ModuleModel", node: "cst.CSTNode") -> Tuple[Premise, ...]:
    site = model.structure.site_of.get(id(model.structure.holder.get(id(node), node))) or model.site_of_expression(node)
    if site is None:
        return ()
    found: List[Premise] = []
    events = _by_site(model).get(id(site), [])
    for event in events:
        role = event.role
        if event.subject is not None and role is not None:
            built = f", built by `{role.constructor}`" if role.constructor else ""
            found.append(_at(model, event.subject, f"`{model.text.of(event.subject)}` is a {role.kind}{built}"))
    update = _update_of_pass(model, events, site)
    if update is not None:
        found.append(_at(model, update.node, f"`{model.text.of(update.node)}` can skip the update: {skip_reason(update)}"))
    boundary = model.windows.boundary(site)
    if boundary is not None:
        found.append(_at(model, boundary.test, f"runs once per window (`{model.text.of(boundary.test)}`)"))
    elif update is not None and model.windows.boundary(update.site) is not None and update.site.loop in site.loops:
        window = model.windows.boundary(update.site)
        found.append(_at(model, window.test, f"runs every batch, while the update runs once per window (`{model.text.of(window.test)}`)"))
    for event in events:
        if event.kind == COUNTER_INCREMENT:
            found.extend(_unit_premises(model, model.text.of(event.subject), model.units.counter_unit(event).evidence))
    if not any(e.kind == COUNTER_INCREMENT for e in events):
        counters = set(model.by_object(COUNTER_INCREMENT)) | set(model.units.enumerate_indices)
        for key in sorted(model.keys_in(node, site.scope) & counters):
            found.extend(_unit_premises(model, key.rsplit(":", 1)[-1], model.units.unit_of_key(key).evidence))
        for key, consumer in _consumers_by_site(model).get(id(site), []):
            found.extend(_unit_premises(model, key.rsplit(":", 1)[-1], model.units.unit_of_key(key).evidence))
            if consumer.evidence is not None:
                found.append(_at(model, consumer.evidence.node, f"it expects {UNIT_WORDS[consumer.evidence.unit]}: {consumer.evidence.why}"))
    return tuple(dict.fromkeys(p for p in found if p is not None))


def _by_site(model: "ModuleModel") -> Dict[int, List[Event]]:
    """id(site) -> its events (once per module: a diagnostic's premises read it, never the whole list)."""
    def compute():
        found: Dict[int, List[Event]] = defaultdict(list)
        for event in model.events:
            found[id(event.site)].append(event)
        return found

    return model.remember(("events by site",), compute)


def _consumers_by_site(model: "ModuleModel") -> Dict[int, list]:
    """id(site) -> (counter key, consumer) of the counters read there (once per module)."""
    def compute():
        found: Dict[int, list] = defaultdict(list)
        for key, consumers in model.units.consumers.items():
            for consumer in consumers:
                site = model.site_of_expression(consumer.node)
                if site is not None:
                    found[id(site)].append((key, consumer))
        return found

    return model.remember(("consumers by site",), compute)


def _update_of_pass(model: "ModuleModel", events: List[Event], site) -> Optional[Event]:
    for event in events:
        if event.kind == SKIPPABLE_STEP:
            return event
        attempted = model.passes.attempt_for(event, before_only=False)
        if attempted is not None:
            return attempted
    updates = model.pass_events(site, SKIPPABLE_STEP)
    return updates[0] if updates else None


def _unit_premises(model: "ModuleModel", name: str, evidence: Tuple[Evidence, ...]) -> List[Premise]:
    return [
        _at(model, e.node, f"`{name}` counts {UNIT_WORDS[e.unit]}: {e.why}" + (" (its name only)" if e.name_only else ""))
        for e in evidence
    ]


def _at(model: "ModuleModel", node: "cst.CSTNode", claim: str) -> Optional[Premise]:
    """The premise at the node; None for a node without a place in this module's text (a call
    event's subject can be a node the project index handed over for a helper's parameter)."""
    try:
        start, _ = model.text.span(node)
    except KeyError:
        return None
    row, column = model.source.position(start)
    return claim, row, column + 1
