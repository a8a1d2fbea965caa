"""Whether a framework trains in fp16, the precision whose loss scaling skips updates on overflow.

ColossalAI: a plugin that controls the precision (Gemini, LowLevelZero, HybridParallel and
MoeHybridParallel, fp16 unless told otherwise) or, for a plugin that leaves it to the booster
(TorchDDPPlugin) or no plugin, the booster's `mixed_precision`. Its fp16 optimizers skip the update
on overflow and return nothing that says so; bf16, fp8 and fp32 never skip.

DeepSpeed: the engine's config, when the module shows it. A `"bf16"` entry, or an `"fp16"` entry
that says `"enabled": False`, is no sign of fp16 (DeepSpeed refuses both enabled at once). In bf16
there is no loss scale to calibrate, so no run of skipped updates; ZeRO 1/2 still drops an update
whose gradients hold inf/NaN (`check_grad_overflow`, DeepSpeed >= 0.17.1), a rare event that
`was_step_applied()` reports: steplint stays silent there, as for a plain optimizer.
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from steplint.model.syntax import keyword, literal, positional, walk_expressions

# Plugins that set the precision themselves -> position of `precision` among their positional
# parameters (each defaults to "fp16").
_PRECISION_PLUGINS = {"GeminiPlugin": 10, "LowLevelZeroPlugin": 1, "HybridParallelPlugin": 3, "MoeHybridParallelPlugin": 4}
_BOOSTER_PRECISION_PLUGINS = {"TorchDDPPlugin"}  # leaves the precision to `Booster(mixed_precision=...)`
_FP16_NAMES = {"fp16", "fp16_apex", "fp16_naive"}  # Booster's mixed_precision strings that scale the loss
COLOSSALAI_PLUGINS = "colossalai.booster.plugin."
COLOSSALAI_BOOSTERS = {"colossalai.booster.Booster", "colossalai.booster.booster.Booster"}
_COLOSSALAI_MIXED_PRECISION = "colossalai.booster.mixed_precision."


def plugin_precision(qualified: str, call: cst.Call) -> Optional[bool]:
    """For a ColossalAI plugin's constructor: True when it trains in fp16 (or may: the precision is
    an expression), False when in another precision, None when the booster decides."""
    tail = qualified.rsplit(".", 1)[-1]
    if tail in _BOOSTER_PRECISION_PLUGINS:
        return None
    index = _PRECISION_PLUGINS.get(tail)
    if index is None:
        return False  # TorchFSDPPlugin and others: no loss scaling of ColossalAI's
    given = keyword(call, "precision")
    if given is None:
        if any(a.star for a in call.args):
            return False  # `**plugin_kwargs`: the precision is not in the code
        arguments = positional(call)
        given = arguments[index] if index < len(arguments) else None
    return True if given is None else _may_be_fp16(given, lambda _: None)


def booster_precision(call: cst.Call, qualified) -> bool:
    """For `Booster(...)`'s own `mixed_precision` (positional second): whether it may be fp16.
    `qualified` resolves a callee's import name."""
    given = keyword(call, "mixed_precision")
    if given is None:
        arguments = positional(call)
        given = arguments[1] if len(arguments) > 1 else None
    return given is not None and _may_be_fp16(given, qualified)


def _may_be_fp16(value: cst.BaseExpression, qualified) -> bool:
    """"fp16" or a ColossalAI FP16 precision object: yes; another string or object: no; an
    expression (`args.mixed_precision`): it may be fp16, as an accelerate `mixed_precision=` is taken."""
    text = literal(value)
    if isinstance(text, str):
        return text in _FP16_NAMES
    if isinstance(value, cst.Call):
        name = qualified(value.func) or ""
        return name.startswith(_COLOSSALAI_MIXED_PRECISION) and name.rsplit(".", 1)[-1].startswith("FP16")
    return isinstance(value, (cst.Name, cst.Attribute, cst.Subscript))


# Words that show fp16 in a module that hands DeepSpeed its config (`torch.bfloat16` is not one,
# nor Python's `OverflowError`, which `math.exp(loss)` for a perplexity raises in any precision).
_FP16_WORDS = re.compile(r"fp16|(?<!b)float16|\bhalf\b|loss_scale|cur_scale|overflow(?!error)", re.I)
_NOT_FP16_ENTRIES = ("bf16", "bfloat16")


def deepspeed_fp16_shown(module: cst.Module, text: str, statements) -> bool:
    """Whether a module's code (not its comments or docstrings) shows DeepSpeed running in fp16: a
    word of fp16 outside the config entries that say it is off (`"fp16": {"enabled": False}`,
    `fp16=False`) or that configure bf16. `statements`: the module's (statement, site) pairs."""
    if not _FP16_WORDS.search(text):
        return False
    for statement, _ in statements:
        if isinstance(statement, cst.Expr) and isinstance(statement.value, (cst.SimpleString, cst.ConcatenatedString)):
            continue
        mentions = len(_FP16_WORDS.findall(module.code_for_node(statement)))
        if not mentions:
            continue
        for node in walk_expressions(statement):
            for name, value in _config_entries(node):
                if name in _NOT_FP16_ENTRIES or name == "fp16" and _switched_off(value):
                    mentions -= len(_FP16_WORDS.findall(module.code_for_node(node)))
        if mentions > 0:
            return True
    return False


def _config_entries(node: cst.CSTNode):
    """(key, value) of a config entry: `"fp16": {...}` in a dict display, `fp16=dict(...)` in a call."""
    if isinstance(node, cst.DictElement) and isinstance(node.key, cst.SimpleString):
        yield node.key.evaluated_value, node.value
    elif isinstance(node, cst.Arg) and node.keyword is not None:
        yield node.keyword.value, node.value


def _switched_off(value: cst.BaseExpression) -> bool:
    """`False`, `{"enabled": False, ...}` or `dict(enabled=False)`; DeepSpeed's default is off too (`{}`)."""
    enabled: object = literal(value)
    if isinstance(value, cst.Dict):
        found = [e.value for e in value.elements if isinstance(e, cst.DictElement) and literal(e.key) == "enabled"]
        enabled = literal(found[0]) if found else False
    elif isinstance(value, cst.Call) and getattr(value.func, "value", None) == "dict":
        given = keyword(value, "enabled")
        enabled = False if given is None else literal(given)
    return enabled is False


def command_line_default(model, expr: cst.BaseExpression) -> object:
    """The default the module's argument parser gives `args.mixed_precision`: the `default=` of its one
    `add_argument("--mixed-precision", ...)` (or `dest="mixed_precision"`), as a literal; `...` when
    the module shows none, or more than one."""
    if not isinstance(expr, cst.Attribute):
        return ...
    name = expr.attr.value
    defaults = []
    for call, _ in model.structure.calls:
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_argument"):
            continue
        dest = literal(keyword(call, "dest"))
        flags = [literal(a) for a in positional(call)]
        if dest == name or dest is ... and any(isinstance(f, str) and f.lstrip("-").replace("-", "_") == name for f in flags):
            default = keyword(call, "default")
            defaults.append(literal(default) if default is not None else None)
    return defaults[0] if len(defaults) == 1 else ...
