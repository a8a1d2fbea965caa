"""What a function of the project does to a place (a parameter, an attribute of its `self`, its
return value), as the project index summarises it: an attempted update, a scheduler step, an unscale,
a save, ... The project layer writes these (steplint.project.summarize); the model reads them at the
call sites of a module (steplint.model.calls). Plain data, below both, and free of the parser: the
index is read from the cache without it. Places are written as text, see steplint.project.summary.
"""

from __future__ import annotations

import re

from dataclasses import dataclass, field
from typing import Dict, List, Optional

# The actions of effects.
UPDATE = "update"  # an attempted update: scaler.step(optimizer) (place: the scaler, other: the optimizer)
SCHEDULER_STEP = "scheduler-step"
POSITIONED_STEP = "positioned-step"  # a scheduler the step tells its position (`step_update(n)`) or a replay loop fast-forwards: no state to save
SCALER_UPDATE = "scaler-update"
UNSCALE = "unscale"
SCALED_BACKWARD = "scaled-backward"
CLIP = "clip"  # clips gradients (no place)
SAVE = "save"  # saves a checkpoint (stored: the place saved whole; contents: key -> place)
LOAD = "load"  # loads state into the place
REDUCE = "reduce"  # all-reduces / gathers the place
INCREMENT = "increment"  # counter += 1
RETURNS_COMMIT = "returns-commit"  # returns whether its update committed (committed_step's result)
RETURNS_REDUCED = "returns-reduced"  # returns the value it all-reduced
FRESH_SCALER = "fresh-scaler"  # builds a loss scaler for its own steps and never restores it (other: its name there)


@dataclass
class Effect:
    action: str
    place: str = ""
    role: Optional[str] = None  # the place's role where the effect happens, when known there
    other: str = ""  # the optimizer of an update or an unscale
    looped: bool = False  # inside a loop of the function (or of a function it calls): not once per call
    rank_guarded: bool = False  # runs on some ranks only
    stored: str = ""  # SAVE: the place saved whole (`torch.save(checkpoint, path)` with `checkpoint` a parameter)
    contents: Dict[str, List[Optional[str]]] = field(default_factory=dict)  # SAVE: checkpoint key -> [place, role] of the stored value
    named_by: List[str] = field(default_factory=list)  # SAVE: the places its file's path reads (`param:step` in `f"save_step_{step}.pth"`)
    stored_state: str = ""  # SAVE: the place whose own `state_dict()` it saves as the file (`torch.save(model.state_dict(), path)`)
    via: str = ""  # the function that does it, for messages: `save_checkpoint`
    where: str = ""  # file and line of that function: `utils.py:41`


# The roles of objects, as the model names them (steplint.model.roles) and effects carry them (Effect.role).
OPTIMIZER = "optimizer"
SCALER = "scaler"  # GradScaler-like: scale(), step(opt), update()
SCALER_OFF = "scaler-off"  # what a caller hands a function for a parameter: a scaler that scales nothing as run (its `enabled=` off)
LOSS_SCALER = "loss-scaler"  # timm-style callable: loss_scaler(loss, optimizer, clip_grad=...)
SCALE_HOLDERS = frozenset({SCALER, LOSS_SCALER})  # what holds a loss scale a checkpoint and a resume need: a GradScaler, a NativeScaler
SCHEDULER = "scheduler"
ACCELERATOR = "accelerator"
ENGINE = "deepspeed-engine"
SKIPPABLE_OPTIMIZER = "skippable-optimizer"  # declared in configuration: an optimizer whose step() a framework may skip
APEX_AMP = "apex.amp"  # a module that holds a loss scaler for the whole process: `amp.state_dict()`
APEX_SCALE_LOSS = "apex.amp.scale_loss"  # `with amp.scale_loss(loss, optimizer)`: apex skips that optimizer's step on overflow
EMA = "ema"  # an exponential moving average of the weights: ema.update(model), update_parameters, step
PLUGIN = "colossalai-plugin"  # GeminiPlugin(...), LowLevelZeroPlugin(...), ...: may set the precision
BOOSTER = "colossalai-booster"  # Booster(plugin=..., mixed_precision=...): booster.boost(...) wraps the optimizer
COLOSSALAI = "colossalai"  # who skips the step() of an optimizer boosted in fp16


# Modules whose scheduler classes step once per call: the model's roles know them, and the project index
# follows a class of the project back to one of them through its bases.
SCHEDULER_MODULES = ("torch.optim.lr_scheduler.", "colossalai.nn.lr_scheduler.")
OPTIMIZER_BASES = ("torch.optim.Optimizer", "torch.optim.optimizer.Optimizer")  # what a project's own optimizer class derives from
PASSED_NONE = "None"  # what every call of the project passes a parameter, in ModuleContext.parameter_values, when it is `None`
PROJECT_LR_SCHEDULE = "project:lr-schedule"  # a class of the project whose step() sets an optimizer's LR, as the torch base it stands for

# In the options a launch of a script gives it (steplint.project.launches, read by steplint.model.options):
# a launch line that passes variables on where options go, which may give it any option.
ANY_OPTION = "*"
# Keys whose values say the precision (`amp_dtype: fp32`, `precision: bf16`, `dtype`): the project's launch
# facts read their values from config files and launch lines, and the module's options compare them
PRECISION_KEY = re.compile(r"dtype|precision|amp|fp16|bf16|half|mixed|autocast", re.I)
# `accelerate launch --mixed_precision fp16 train.py`: the launcher's precision, noted among the options a launch gives
ACCELERATE_PRECISION = "accelerate:mixed_precision="
