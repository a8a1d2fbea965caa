"""`steplint trace`: the step-unit map of a training project, drawn from the model the check uses.

For each training loop (a loop that makes an update, directly or through a project helper) the map
tells what steps (the update), when (the window), the counters the loop advances with their units
and evidence (`model.units`), what each counter feeds, the schedulers, what the checkpoints store
and what the resume restores, and the diagnostics `check` reports there. It is plain data (the JSON
schema in README.md, "steplint trace"); `steplint.report.trace` renders it as text or markdown.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional

import libcst as cst

from steplint.config import Settings
from steplint.diagnostic import Diagnostic
from steplint.engine import analyse_source
from steplint.evidence import skip_reason
from steplint.model import (
    CHECKPOINT_SAVE, COMMIT_GATE, COUNTER_INCREMENT, GUESSED_GATE, OPTIMIZER_STEP, SCALED_BACKWARD, SCHEDULER_STEP, SKIPPABLE_STEP, STATE_LOAD,
    Event,
    ModuleModel,
)
from steplint.effects import UPDATE
from steplint.model.events import CALL, EVALUATION, HELPER_STATE
from steplint.model.roles import ACCELERATOR, ENGINE, LOSS_SCALER, OPTIMIZER, SCALER
from steplint.model.units import BATCHES, DATA, UPDATES, WINDOWS, CounterUnit, Evidence
from steplint.model.windows import argument_boundary, modulo_boundary
from steplint.rule import one_line

SCHEMA_VERSION = 1
# What each update strategy steps (Event.strategy -> the words the map uses).
STEPS = {
    "scaler": "scaler+optimizer",
    "loss-scaler": "loss scaler+optimizer",
    "accelerate": "accelerate",
    "deepspeed": "deepspeed engine",
    "apex": "apex amp",
    "declared": "declared skippable",
    "colossalai": "colossalai booster",
    CALL: "helper",
    None: "optimizer",
}
# What a project helper's update steps, by the role of what it steps (its summary's Effect.role).
HELPER_STEPS = {SCALER: STEPS["scaler"], LOSS_SCALER: STEPS["loss-scaler"], ACCELERATOR: STEPS["accelerate"], ENGINE: STEPS["deepspeed"], OPTIMIZER: STEPS[None]}
# Which of steplint.runtime.StepCounters' counts a counter of each unit matches.
RUNTIME_COUNTERS = {BATCHES: "batches", WINDOWS: "attempts", UPDATES: "committed_updates", DATA: "tokens"}


def trace_text(path: str, text: str, settings: Settings, project=None) -> List[dict]:
    """The loops of one file, as the JSON schema's `loops` entries (none when it is not analysed)."""
    model, diagnostics = analyse_source(path, text, settings, project)
    return trace_model(model, diagnostics) if model is not None else []


def trace_model(model: ModuleModel, diagnostics: List[Diagnostic]) -> List[dict]:
    loops: Dict[tuple, List[Event]] = {}
    for update in model.of_kind(SKIPPABLE_STEP, OPTIMIZER_STEP, HELPER_STATE):
        if update.site.loop is not None and (update.kind != HELPER_STATE or _runs_updates(update)):
            loops.setdefault((id(update.site.scope), id(update.site.loop)), []).append(update)
        elif update.site.loop is None and update.kind != HELPER_STATE and _takes_whole_steps(model, update.site.scope):
            loops.setdefault((id(update.site.scope), None), []).append(update)
    return sorted((_loop(model, updates, diagnostics) for updates in loops.values()), key=lambda loop: loop["line"])


_STEP_COMPANIONS = (SCALED_BACKWARD, SCHEDULER_STEP, COUNTER_INCREMENT, CHECKPOINT_SAVE)


def _takes_whole_steps(model: ModuleModel, scope) -> bool:
    """A step function (`Trainer.train_step(batch)`): a function whose update is in no loop of its
    own, called once per batch by a loop elsewhere, which does there what a training step does with the
    update (a scaled backward, a scheduler step, a counter, a save). A helper that only finishes the
    update (`amp_step(scaler, optimizer)`: unscale, clip, step) is part of its caller's map instead."""
    return isinstance(scope.node, cst.FunctionDef) and any(e.site.loop is None for e in model.events_in(scope, *_STEP_COMPANIONS))


def without_covered_step_functions(loops: List[dict]) -> List[dict]:
    """The map of a project: a step function that a traced loop runs as a helper is part of that loop's
    map (its `helpers`), not a map of its own."""
    helpers = {_where(helper.rpartition(" (")[2].rstrip(")")) for loop in loops for helper in loop["helpers"]}
    return [
        loop for loop in loops
        if loop["kind"] == "loop" or not any(_is_file(loop["file"], path) and line == str(loop["line"]) for path, line in helpers)
    ]


def _where(where: str) -> tuple:
    """`utils.py:41` (a helper's place, as the project index names it) -> ("utils.py", "41")."""
    path, _, line = where.rpartition(":")
    return path, line


def _is_file(given: str, relative: str) -> bool:
    """`given` (a path as the user gave it) is the file the project index names `relative` (a path
    from the project's root)."""
    return os.path.abspath(given).replace(os.sep, "/").endswith("/" + relative)


def _runs_updates(event: Event) -> bool:
    """A call of a project function that runs a loop of updates (`train_one_epoch(..., scaler)`): the
    loop around the call drives training (an epoch loop)."""
    return event.via is not None and event.via.action == UPDATE and event.via.looped


def _loop(model: ModuleModel, updates: List[Event], diagnostics: List[Diagnostic]) -> dict:
    site = updates[0].site
    loop, scope = site.loop, site.scope
    inside = [e for e in model.events if e.site.scope is scope and _in(loop, e.site)]
    helpers = sorted({f"{e.via.via} ({e.via.where})" for e in inside if e.via is not None and e.via.via})
    rows = [_rows(model, scope)] + _helper_rows(model, [e for e in model.events if e.site.scope is scope])
    return {
        "file": model.source.path,
        "line": model.text.rows(loop if loop is not None else scope.node)[0],
        "kind": "loop" if loop is not None else "step function",
        "function": scope.name,
        "helpers": helpers,
        "updates": [_update(model, u) for u in updates],
        "window": _window(model, updates[0]),
        "counters": _counters(model, loop, scope, updates[0], diagnostics),
        "schedulers": [_scheduler(model, e, loop, updates[0]) for e in model.events_in(scope, SCHEDULER_STEP) if e.kind == SCHEDULER_STEP and isinstance(e.node, cst.Call)],
        "checkpoints": [_checkpoint(model, e) for e in model.events_in(scope, CHECKPOINT_SAVE)],
        "resume": _resume(model, scope),
        "diagnostics": [_diagnostic(d) for d in diagnostics if any(first <= d.row <= last for first, last in rows)],
    }


def _in(loop, site) -> bool:
    """`site` runs in `loop`; for a step function (no loop), in no loop of the function."""
    return loop in site.loops if loop is not None else not site.loops


def _rows(model: ModuleModel, scope) -> tuple:
    return model.text.rows(scope.node) if isinstance(scope.node, cst.FunctionDef) else (1, len(model.source.line_starts))


def _helper_rows(model: ModuleModel, events: List[Event]) -> List[tuple]:
    """The rows of the functions of this module that the loop's function runs through (a resume in
    `self.restore()` called from `self.set_up()`): what `check` reports there belongs to the loop's map."""
    lines = {
        int(line) for path, line in (_where(e.via.where) for e in events if e.via is not None and e.via.where)
        if line.isdigit() and _is_file(model.source.path, path)
    }
    functions = [_rows(model, s) for s in model.structure.scopes if isinstance(s.node, cst.FunctionDef)]
    return [rows for rows in functions if rows[0] in lines]


def _code(model: ModuleModel, node: cst.CSTNode) -> str:
    """A node's source on one line: the map's lines (text, JSON, markdown) never break inside a quote."""
    return one_line(model.text.of(node))


def _row(model: ModuleModel, node: cst.CSTNode) -> int:
    return model.text.rows(node)[0]


def _update(model: ModuleModel, update: Event) -> dict:
    if update.kind == HELPER_STATE:
        return {
            "line": _row(model, update.node),
            "code": _code(model, update.node),
            "steps": HELPER_STEPS.get(update.via.role, STEPS[CALL]),
            "via": update.via.via or None,
            "skippable": update.role is not None and update.role.kind == SCALER,
            "why": f"each call runs a loop of updates in `{update.via.via}` ({update.via.where})",
            "commit_signal": "none",
        }
    skippable = True if update.kind == SKIPPABLE_STEP else None if _precision_unknown(update) else False
    return {
        "line": _row(model, update.node),
        "code": _code(model, update.node),
        "steps": _steps(update),
        "via": update.via.via if update.via is not None and update.via.via else None,
        "skippable": skippable,
        "why": skip_reason(update) if skippable else _plain_reason(update),
        "commit_signal": _commit_signal(model, update),
    }


def _steps(update: Event) -> str:
    if update.strategy == CALL and update.via is not None:
        return HELPER_STEPS.get(update.via.role, STEPS[CALL])
    if update.strategy is None and update.role is not None and update.role.prepared:
        return STEPS["accelerate"]
    return STEPS.get(update.strategy, update.strategy)


def _precision_unknown(update: Event) -> bool:
    """An accelerate-prepared optimizer whose Accelerator's mixed precision the code does not show
    (`accelerate config` sets it): its step is no skippable update in the model (events.py), yet not
    one that always commits either."""
    role = update.role
    return role is not None and role.prepared and role.mixed_precision in (None, ...)


def _plain_reason(update: Event) -> str:
    role = update.role
    if role is not None and role.off_as_run:
        kind, _, name = role.off_as_run.partition(":")  # (steplint.model.options labels a config key or a constant so)
        if kind == "config":
            return f"loss scaling is off as run (`{name}` turns it on, and every config file of the project sets it false): every step commits"
        if kind == "unproven":
            return f"loss scaling is off as run (nothing in the project turns `{name}` on: no launch, config file or code sets it true): every step commits"
        if kind == "constant":
            return f"loss scaling is off as run (the global `{name}` that turns it on is set once, to a value that does not): every step commits"
        return f"loss scaling is off as run (`{role.off_as_run}` turns it on, and no launch of this script gives it): every step commits"
    if update.strategy == "scaler" and role is not None and role.enabled is False:
        return "the scaler is disabled (enabled=False): every step commits"
    if role is not None and role.prepared:
        if _precision_unknown(update):
            return f"prepared by `{role.accelerator}`, whose mixed precision is not visible here (the launcher's or a variable's): under fp16 it can skip the update"
        return f"prepared by `{role.accelerator}` with mixed_precision={role.mixed_precision!r}: no loss scaling, every step commits"
    return "a plain optimizer step always commits"


def _commit_signal(model: ModuleModel, update: Event) -> str:
    """authoritative: something in the loop runs under a commit gate of this update; guessed: under a
    guessed one (a scale comparison); none: nothing reads whether the update committed."""
    if update.kind != SKIPPABLE_STEP:
        return "none"
    kinds = set()
    for event in model.pass_events(update.site, *_GATED_KINDS):
        for guard in model.guards.gates(event.site, update):
            kinds |= model.guards.kinds(guard)
    return "authoritative" if COMMIT_GATE in kinds else "guessed" if GUESSED_GATE in kinds else "none"


_GATED_KINDS = (SCHEDULER_STEP, COUNTER_INCREMENT, CHECKPOINT_SAVE, "evaluation", "log", "ema-update")


def _window(model: ModuleModel, update: Event) -> Optional[dict]:
    boundary = model.windows.boundary(update.site) if update.kind != HELPER_STATE else None
    if boundary is None:
        told = argument_boundary(update)
        if told is None:
            return None
        return {"line": _row(model, told), "boundary": _code(model, told), "length": _code(model, told.left.right)}  # type: ignore[attr-defined]
    modulo = modulo_boundary(model, boundary)
    return {
        "line": _row(model, boundary.test),
        "boundary": _code(model, boundary.test),
        "length": _code(model, modulo.length) if modulo is not None else None,
    }


def _counters(model: ModuleModel, loop, scope, update: Event, diagnostics: List[Diagnostic]) -> List[dict]:
    found: Dict[str, dict] = {}
    index = _batch_index(model, loop, scope)
    if index is not None:
        key, call = index
        found[key] = _counter(model, key, model.units.unit_of_key(key), [_row(model, call)], None)
    for increment in model.of_kind(COUNTER_INCREMENT):
        if increment.site.scope is not scope or not _in(loop, increment.site):
            continue
        key = model.roles.key(increment.subject, scope)
        if key is None:
            continue
        if key in found:
            found[key]["incremented"].append(_row(model, increment.node))
            continue
        found[key] = _counter(model, key, model.units.counter_unit(increment), [_row(model, increment.node)], increment)
    boundary = _window_counter(model, update)
    if boundary is not None and boundary[0] in found:
        found[boundary[0]]["consumers"].insert(0, boundary[1])
    for counter in found.values():
        counter["reported"] = sorted({d.code for d in diagnostics if d.row in counter["incremented"]})
    return list(found.values())


def _window_counter(model: ModuleModel, update: Event) -> Optional[tuple]:
    """(key, consumer) of the counter the update's window boundary tests (`(i + 1) % accum == 0` reads `i`)."""
    boundary = model.windows.boundary(update.site)
    modulo = modulo_boundary(model, boundary) if boundary is not None else None
    if modulo is None or modulo.counter is None:
        return None
    key = model.roles.key(modulo.counter, update.site.scope)
    consumer = {"kind": "window", "line": _row(model, boundary.test), "code": _code(model, boundary.test), "expects": BATCHES, "conflict": False}
    return key, consumer


def _batch_index(model: ModuleModel, loop, scope) -> Optional[tuple]:
    """The key of `i` when the loop is `for i, batch in enumerate(loader)`, with the `enumerate` call."""
    if not isinstance(loop, cst.For):
        return None
    for key, call in model.units.enumerate_indices.items():
        if call is loop.iter:
            return key, call
    return None


def _counter(model: ModuleModel, key: str, unit: CounterUnit, rows: List[int], increment: Optional[Event]) -> dict:
    consumers = model.units.consumers_of(increment) if increment is not None else model.units.consumers.get(key, [])
    conflicting = {id(c) for c in model.units.conflicting_consumers(increment, unit)} if increment is not None else set()
    shown: Dict[tuple, dict] = {}  # (one line per consumer: a test guarding two evaluations is one eval it feeds)
    for c in consumers:
        if not _mode_switch_before_save(model, c, consumers):
            line = {"kind": c.label, "line": _row(model, c.node), "code": _code(model, c.node), "expects": c.unit, "conflict": False}
            line = shown.setdefault((line["kind"], line["line"], line["code"], line["expects"]), line)
            line["conflict"] = line["conflict"] or id(c) in conflicting
    return {
        "name": _name(key),
        "incremented": rows,
        "unit": unit.unit,
        "declared": unit.declared,
        "evidence": [_evidence(model, e) for e in unit.evidence],
        "runtime": RUNTIME_COUNTERS.get(unit.unit),
        "consumers": list(shown.values()),
    }


def _mode_switch_before_save(model: ModuleModel, consumer, consumers) -> bool:
    """An "eval" reading of a test that guards a checkpoint save, where the only evaluation under it
    is `model.eval()` (switching modes around the save): the block saves, it does not evaluate."""
    if consumer.label != "eval" or not any(c.label == "checkpoint" and c.node is consumer.node for c in consumers):
        return False
    under = [e for e in model.of_kind(EVALUATION) if any(g.test is consumer.node for g in e.site.guards)]
    return all(isinstance(e.node, cst.Call) and isinstance(e.node.func, cst.Attribute) and e.node.func.attr.value == "eval" for e in under)


def _evidence(model: ModuleModel, evidence: Evidence) -> dict:
    return {"unit": evidence.unit, "line": _row(model, evidence.node), "why": evidence.why, "name_only": evidence.name_only}


def _scheduler(model: ModuleModel, event: Event, loop, update: Event) -> dict:
    """Where a scheduler steps relative to the loop's update: per committed update (under a commit
    gate), under a cadence of the loop (`step % eval_every == 0`), per window (under the window
    boundary, or each pass of a loop without one), per batch (each pass of an accumulating loop), or
    outside the loop (per epoch)."""
    site = event.site
    cadence = model.windows.cadence(site, loop) if _in(loop, site) else None
    if event.role is not None and event.role.prepared:
        stepped = "by accelerate"
    elif not _in(loop, site):
        stepped = "outside the loop"
    elif update.kind == HELPER_STATE:
        stepped = "per helper loop"
    elif model.guards.gated(site, update):
        stepped = "per committed update"
    elif cadence is not None:
        stepped = "under a cadence"
    elif model.windows.boundary(update.site) is None or model.windows.boundary(site) is not None:
        stepped = "per attempted update"
    else:
        stepped = "per batch"
    return {
        "name": _code(model, event.subject) if event.subject is not None else None,
        "line": _row(model, event.node),
        "code": _code(model, event.node),
        "stepped": stepped,
        "cadence": _code(model, cadence.test) if cadence is not None else None,
        "basis": model.counters.schedule_basis(event),
        "position": "metric" if event.role is not None and event.role.metric else "told" if event.explicit_position else "counted",
    }


def _checkpoint(model: ModuleModel, save: Event) -> dict:
    checkpoint = model.state.checkpoint(save)
    return {
        "line": _row(model, save.node),
        "code": _code(model, save.node),
        "keys": sorted(checkpoint.entries) if checkpoint is not None else None,
        "stores": {kind: sorted(_name(k) for k in keys) for kind, keys in sorted(checkpoint.holds.items()) if keys} if checkpoint is not None else None,
    }


def _resume(model: ModuleModel, scope) -> dict:
    needed = model.state.step_state(scope)
    # One call may restore several objects (a helper handed the optimizer and the scaler): one line each.
    loads = {id(e.node): e for e in model.of_kind(STATE_LOAD) if e.site.scope is scope}.values()
    return {
        "needs": {kind: sorted(_name(k) for k in keys) for kind, keys in needed.items()},
        "restores": [{"line": _row(model, e.node), "code": _code(model, e.node)} for e in loads],
    }


def _name(key: str) -> str:
    """A model key (`train:step`, `<module>:scaler`) as the code names it."""
    return key.rsplit(":", 1)[-1]


def _diagnostic(d: Diagnostic) -> dict:
    return {"code": d.code, "line": d.row, "message": d.message}
