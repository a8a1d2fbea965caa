"""What a checkpoint saved through a project function stores, in the caller's words."""

from __future__ import annotations

import libcst as cst

from steplint.model.checkpoints import Checkpoint

_UNKNOWN = cst.Name("None")  # an entry whose value the caller cannot name


def saved_through(model, save, stored_contents):
    """`save_checkpoint(path, model, optimizer)` whose summary stores its `optimizer` parameter under
    "optimizer"; `save_on_master(checkpoint, path)` that saves what the caller built (`stored_contents`
    reads it in the caller); `save(path, scaler=scaler.state_dict())` that saves its keyword arguments."""
    context, effect = model.roles.project, save.via
    callee = context.callee(save.node, save.site.scope)
    if effect.stored == "kwargs":
        return Checkpoint(save, {a.keyword.value: a.value for a in save.node.args if a.keyword is not None})
    if effect.stored:
        stored = context.argument(callee, effect.stored, save.node, save.site.scope)
        return stored_contents(model, save, stored) if stored is not None else None
    if not effect.contents:
        return None
    entries = {}
    for key, (place, _) in effect.contents.items():
        value = context.argument(callee, place, save.node, save.site.scope) if place else None
        entries[key] = value if value is not None else _UNKNOWN
    return Checkpoint(save, entries)
