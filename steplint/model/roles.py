"""Which names hold an optimizer, a GradScaler, a scheduler, an Accelerator, a DeepSpeed engine,
a ColossalAI booster.

Evidence, strongest first: the constructor or factory by import-resolved name, a type annotation,
flow (assignment, `accelerator.prepare`, call arguments into parameters of the same module), use
(`x.scale(loss).backward()`, `x.step(optimizer)`), and last the name, which only confirms a use and
never stands against a constructor from a library we know is something else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Dict, FrozenSet, Iterable, List, Optional, Tuple

import libcst as cst

# (the role names live beside the effects that carry them: the index and the prefilter read them without the parser;
# re-exported here, where the rules and the model name roles)
from steplint.effects import (  # noqa: F401
    OPTIMIZER, SCALER, SCALER_OFF, LOSS_SCALER, SCALE_HOLDERS, SCHEDULER, ACCELERATOR, ENGINE, SKIPPABLE_OPTIMIZER, APEX_AMP, APEX_SCALE_LOSS, EMA, PLUGIN, BOOSTER, COLOSSALAI, SCHEDULER_MODULES, OPTIMIZER_BASES, PROJECT_LR_SCHEDULE,
)
from steplint.model.options import read_command_line
from steplint.model.precision import COLOSSALAI_BOOSTERS, COLOSSALAI_PLUGINS, booster_precision, plugin_precision
from steplint.model.structure import Scope, Structure
from steplint.model.syntax import ImportMap, dotted, keyword, last_name, literal, positional, reads, walk_expressions
from steplint.model.values import argument_for

CONSTRUCTOR, ANNOTATION, USE, NAME = 4, 3, 2, 1
PRECISION_FROM_EXPRESSION = "expression"  # mixed_precision=args.mixed_precision: may be fp16

SCALER_CLASSES = {
    "torch.GradScaler",
    "torch.amp.GradScaler",
    "torch.amp.grad_scaler.GradScaler",
    "torch.cuda.amp.GradScaler",
    "torch.cuda.amp.grad_scaler.GradScaler",
    "torch.cpu.amp.GradScaler",
    "torch.distributed.fsdp.ShardedGradScaler",
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
}
# apex's fp16 optimizer wrappers: built with `dynamic_loss_scale=True`, their `step()` skips on overflow.
APEX_FUSED_FP16_OPTIMIZERS = {"apex.optimizers.FP16_Optimizer", "apex.optimizers.fp16_optimizer.FP16_Optimizer"}
APEX_FP16_OPTIMIZERS = {"apex.fp16_utils.FP16_Optimizer", "apex.fp16_utils.fp16_optimizer.FP16_Optimizer"} | APEX_FUSED_FP16_OPTIMIZERS
LOSS_SCALER_CLASSES = {"timm.utils.NativeScaler", "timm.utils.cuda.NativeScaler", "timm.utils.ApexScaler", "timm.utils.cuda.ApexScaler"}
OPTIMIZER_FACTORIES = {"timm.optim.create_optimizer", "timm.optim.create_optimizer_v2", "transformers.AdamW", "transformers.Adafactor",
                       "transformers.optimization.AdamW", "transformers.optimization.Adafactor", "torch.distributed.optim.ZeroRedundancyOptimizer"}
OPTIMIZER_MODULES = ("torch.optim.", "bitsandbytes.optim.", "apex.optimizers.", "colossalai.nn.optimizer.")
SCHEDULER_FACTORY_TUPLES = {"timm.scheduler.create_scheduler", "timm.scheduler.create_scheduler_v2"}  # (scheduler, epochs)
SCHEDULER_BASE_ANNOTATIONS = {"torch.optim.lr_scheduler.LRScheduler", "torch.optim.lr_scheduler._LRScheduler"}
EMA_CLASSES = {
    "torch.optim.swa_utils.AveragedModel", "timm.utils.ModelEma", "timm.utils.ModelEmaV2", "timm.utils.ModelEmaV3",
    "timm.utils.model_ema.ModelEma", "timm.utils.model_ema.ModelEmaV2", "timm.utils.model_ema.ModelEmaV3",
    "diffusers.training_utils.EMAModel", "ema_pytorch.EMA", "torch_ema.ExponentialMovingAverage",
}
ACCELERATOR_CLASSES = {"accelerate.Accelerator", "accelerate.accelerator.Accelerator"}
DEEPSPEED_INITIALIZE = "deepspeed.initialize"
# Constructors from libraries whose `scaler`, `scheduler` and `step` mean something else.
FOREIGN_MODULES = ("sklearn.", "scipy.", "gym.", "gymnasium.", "numpy.", "diffusers.schedulers", "torchdiffeq.")
FOREIGN_DIFFUSERS = re.compile(r"^diffusers\.\w*Scheduler\w*$")

# Methods only a loss scaler has (torch's GradScaler API): with one of them, `x.step(optimizer)` is a scaler's.
_SCALER_ONLY_METHODS = frozenset({"scale", "unscale_", "get_scale", "_check_inf_per_device", "_found_inf_per_device"})

_SCHEDULER_NAME = re.compile(r"(^|_)(lr_?)?(sched|scheduler|schedulers)(_|\d|$)", re.I)
# Schedules of something other than the learning rate: an EMA decay warmup, a noise or beta schedule.
_OTHER_SCHEDULE = re.compile(r"ema|noise|beta|sigma|momentum|temp|teacher|wd|weight_decay|decay|timestep|diffusion|kl|dropout|mask", re.I)
_OPTIMIZER_NAME = re.compile(r"(^|_)(opt|optim|optimizer|optimiser)s?(_|\d|$)", re.I)
_SCALER_NAME = re.compile(r"scaler", re.I)


@dataclass(frozen=True)
class Role:
    kind: str
    evidence: int
    prepared: bool = False  # returned by accelerator.prepare(...): skips and accumulates by itself
    accelerator: Optional[str] = None  # source text of the Accelerator that prepared it
    engine_owned: bool = False  # returned by deepspeed.initialize(...): the engine steps it
    enabled: object = ...  # a scaler's literal `enabled=`; `...` when not literal
    enabled_by: Optional[str] = None  # a scaler's `enabled=` when it is a name or attribute (`use_amp`, `args.fp16`)
    off_as_run: Optional[str] = None  # what keeps its loss scaling off as run: an option no launch gives (`--amp`), `config:KEY`, `constant:NAME`
    fused: bool = False  # an optimizer built with fused=True
    metric: bool = False  # ReduceLROnPlateau: stepped with a metric
    mixed_precision: object = ...  # literal mixed_precision of the Accelerator (or the one that prepared it); None: not given
    skips: Optional[str] = None  # who may skip this optimizer's step(): "apex" (amp.scale_loss), "declared" (configuration),
    # "colossalai" (boosted in fp16); of a plugin or booster: that its optimizers are boosted in fp16
    booster_precision: bool = False  # a ColossalAI plugin that leaves the precision to the booster (TorchDDPPlugin)
    constructor: Optional[str] = None  # the import-resolved class or factory that built it, when known
    per_update: object = ...  # a timm scheduler's `t_in_epochs=False`: its step_update(n) moves the LR; ...: unknown
    positioned: bool = False  # a scheduler built with `last_epoch=<where the run resumes>`: restored by construction
    optimizer: Optional[str] = None  # a scheduler's optimizer, by key, when its constructor names it; a DeepSpeed engine's
    optimizer_replaced: bool = False  # a scheduler whose optimizer is then replaced under its name by a new one
    present_if: Optional[str] = None  # built only when a flag holds (`GradScaler() if amp else None`): "<scope>:<flag>"


LIGHTNING_MIXED_PRECISION = "lightning-mixed-precision"  # a Lightning optimizer stepped by hand under 16-bit mixed precision
_LIGHTNING_MIXED_16 = {"16", "16-mixed"}  # Lightning's precisions that scale the loss ("16-true" and "bf16-mixed" do not)
LIGHTNING_TRAINERS = {"lightning.Trainer", "lightning.pytorch.Trainer", "pytorch_lightning.Trainer"}


def _lr_step_shape(call: cst.Call, site) -> bool:
    """A step call shaped as a learning-rate scheduler's: a statement of its own, whose result nothing reads
    (`scheduler.step()`, `step(epoch)`, `step(val_loss)`), not a sampler's denoising step, whose result is the
    next sample (`latents = scheduler.step(noise_pred, t, latents).prev_sample`)."""
    statement = site.statement
    return (isinstance(statement, cst.SimpleStatementLine) and any(isinstance(small, cst.Expr) and small.value is call for small in statement.body)
            and len(positional(call)) <= 2)


def scheduler_named(name: str) -> bool:
    last = name.split(".")[-1]
    return bool(_SCHEDULER_NAME.search(last)) and not _OTHER_SCHEDULE.search(last)


def optimizer_named(name: str) -> bool:
    return bool(_OPTIMIZER_NAME.search(name.split(".")[-1]))


def _without_loss_scaling(role: Optional[Role], option: Optional[str]) -> Optional[Role]:
    """The object as a run without mixed precision has it (`option`, given by no launch, would turn
    it on; None: it is on): a scaler that scales nothing, an optimizer that never skips, a scheduler that
    no run builds (`if args.lr_scheduler: scheduler = MultiStepLR(...)`)."""
    if option is None or role is None:
        return role
    if role.kind in SCALE_HOLDERS:
        return replace(role, enabled=False, enabled_by=None, off_as_run=option)
    if role.kind == OPTIMIZER and role.skips:
        return replace(role, skips=None, off_as_run=option)
    if role.kind == SCHEDULER:
        return replace(role, off_as_run=option)
    return role


class RoleTable:
    """Roles keyed by a reference in its scope: a local, a global, or `self.attr` of a class."""

    def __init__(
        self, imports: ImportMap, structure: Structure, declared: Optional[Dict[str, frozenset]] = None, project=None,
        torch_subclasses: Optional[Dict[str, str]] = None, text: str = "", scheduler_methods: FrozenSet[str] = frozenset(),
        schedule_classes: FrozenSet[str] = frozenset(),
    ) -> None:
        self.imports = imports
        self.structure = structure
        # classes of the project derived from a torch scheduler or optimizer, by the name this module calls them -> that
        # class; or PROJECT_LR_SCHEDULE, for one whose step() sets the LR (steplint.model.events.lr_schedule_classes)
        self.torch_subclasses = torch_subclasses or {}
        # methods that set an optimizer's LR in the module's classes (steplint.model.events.lr_setting_methods), and in the project's
        self.own_scheduler_methods = scheduler_methods
        self.own_schedule_classes = schedule_classes  # classes of the module whose step() sets an optimizer's LR (lr_schedule_classes)
        self.scheduler_methods = scheduler_methods.union(project.scheduler_methods if project is not None else ())
        self.declared = declared or {}  # names the configuration says hold a role
        self.project = project  # steplint.project.context.ModuleContext: roles from the rest of the project
        self.roles: Dict[str, Role] = {}
        self.foreign: set = set()
        self.wrapped: set = set()  # objects handed through a call we do not know: what they do is its business
        self.maybe_none: set = set()  # keys that hold None on some path (`scaler = GradScaler() if amp else None`)
        self._functions = {s.name: s for s in structure.scopes}
        self._aliases = _property_aliases(structure)
        self.command_line = read_command_line(structure, project, text)
        self.callers_read = self.command_line.callers_read  # functions whose callers a fact read (see ModuleModel.callers_read): one set with the command line's
        self._module_names: Optional[set] = None  # names the module binds at its top level (read on first need)
        self._disabled_builds: Dict[str, Optional[str]] = {}  # key -> what keeps each construction of it off (`_built_disabled`)
        self._infer()

    def _bound_at_module_level(self, key: str) -> bool:
        """The global a `<module>:` key reads is bound: assigned, imported or defined at the top level, or
        declared `global` by a function. True when the module may bind names unseen (`import *`, `exec`)."""
        if self._module_names is None:
            module = next((s for s in self.structure.scopes if s.name == "<module>"), None)
            names = set(module.local_names) if module is not None else set()
            names.update(self.imports.names)
            names.update(s.name.split(".", 1)[0] for s in self.structure.scopes)  # (top-level functions and classes)
            names.update(n for s in self.structure.scopes for n in s.global_names)
            names.update(self.declared)
            self._module_names = names
        head = key[len("<module>:"):].split(".", 1)[0].split("[", 1)[0]
        return bool(self.imports.star_modules) or self.command_line.runs_code or head in self._module_names

    def default_as_run(self, name: str, scope: Scope) -> object:
        """A parameter's literal default, when every call of its function the project makes leaves it out
        (`Trainer(...)` of `def __init__(self, ..., mixed_precision=None)`, all in this module): the
        value it has as run. `...` when a call may give it, or none is seen (other callers, unknown)."""
        params = [p.name.value for p in scope.params]
        param = scope.params[params.index(name)] if name in params else None
        default = literal(param.default) if param is not None and param.default is not None and param.star == "" else ...
        if default is ... or self.project is None or scope.parent is not None:
            return ...
        self.callers_read.add(scope.name)
        if scope.name in self.project.called_elsewhere:
            return ...
        method = scope.class_name is not None
        called = scope.class_name if method and scope.name.endswith(".__init__") else scope.name.rsplit(".", 1)[-1]
        position = params.index(name) - (1 if method else 0)
        calls = [c for c, _ in self.structure.calls if last_name(c.func) == called]
        if not calls or any(any(a.star for a in c.args) or argument_for(c, position, name) is not None for c in calls):
            return ...
        return default

    # -- lookups ---------------------------------------------------------------------------------

    def key(self, expr: Optional[cst.BaseExpression], scope: Scope) -> Optional[str]:
        if isinstance(expr, cst.Subscript):  # (an object held in a dict under a literal key: `self.optimizers["G"]`)
            entry = _literal_index(expr)
            base = self.key(expr.value, scope) if entry is not None else None
            return f"{base}[{entry!r}]" if base else None
        text = dotted(expr) if expr is not None else None
        if text is None:
            return None
        head, _, rest = text.partition(".")
        owner = scope.owner_of(head)
        if scope.self_name and head == scope.self_name and scope.class_name and (owner is None or owner.self_name == head):
            first, dot, more = rest.partition(".")
            first = self._aliases.get((scope.class_name, first), first)  # `self.lr_scheduler` -> `self._lr_scheduler`
            rest = first + dot + more if rest else rest
            return f"class {scope.class_name}:self" + (f".{rest}" if rest else "")
        return f"{owner.name}:{text}" if owner is not None else f"<module>:{text}"

    def of(self, expr: Optional[cst.BaseExpression], scope: Scope) -> Optional[Role]:
        key = self.key(expr, scope)
        return self.roles.get(key) if key else None

    def is_(self, expr: Optional[cst.BaseExpression], scope: Scope, kind: str) -> bool:
        role = self.of(expr, scope)
        return role is not None and role.kind == kind

    def qualified(self, expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
        return self.imports.qualified(expr, frozenset(scope.local_names) if scope.name != "<module>" else frozenset(), own_imports(scope))

    # -- inference -------------------------------------------------------------------------------

    def _set(self, key: Optional[str], role: Optional[Role]) -> bool:
        if key is None or role is None or key.endswith(":_"):
            return False  # (`_` holds what is thrown away: `_, _, _, epoch = load_checkpoint(...)`, then `for _ in range(epoch):`)
        if role.evidence <= NAME and key in self.foreign:
            return False
        if role.evidence <= USE and key.startswith("<module>:") and not self._bound_at_module_level(key):
            return False  # (a name no scope binds, a local of another function read here: no object of ours)
        if role.kind in SCALE_HOLDERS and role.evidence < CONSTRUCTOR and role.enabled is not False:
            role = _without_loss_scaling(role, self._built_disabled(key))  # (a scaler known by its use, built by a class of the project handed `enabled=` off)
        old = self.roles.get(key)
        if old is not None and old.kind == role.kind and old.evidence >= role.evidence:
            role = replace(  # weaker evidence of the same role adds what it knows, never takes away
                old,
                prepared=old.prepared or role.prepared,
                skips=old.skips or role.skips,  # one of the objects a name may hold skips: it may skip
                booster_precision=old.booster_precision or role.booster_precision,
                engine_owned=old.engine_owned or role.engine_owned,
                accelerator=old.accelerator or role.accelerator,
                mixed_precision=role.mixed_precision if old.mixed_precision is ... else old.mixed_precision,
                # (off as run only while every construction of it is: another one as strong may be on)
                off_as_run=old.off_as_run if role.off_as_run or role.evidence < old.evidence else None,
            )
        elif old is not None and old.evidence > role.evidence:
            return False
        if role == old:
            return False
        self.roles[key] = role
        return True

    def _infer(self) -> None:
        for scope in self.structure.scopes:
            for param in scope.params:
                self._set(self.key(param.name, scope), self._annotation_role(param.annotation, scope))
                if _is_none(param.default):
                    self.maybe_none.add(self.key(param.name, scope))
        if self.declared:
            self._declared_roles()
        constructors = self.project.parameter_constructors if self.project else {}
        for function, parameters in (self.project.parameter_roles if self.project else {}).items():
            for name, kind in parameters.items():  # what the callers elsewhere in the project pass
                # (a scaler every caller has off as run, `GradScaler() if args["amp"] else None` without --amp, scales nothing here)
                # (a scheduler every caller builds with one class or factory: `get_linear_schedule_with_warmup(...)` sets its first LR)
                role = (Role(SCALER, USE, enabled=False, off_as_run=f"callers of {function}") if kind == SCALER_OFF
                        else Role(kind, USE, constructor=constructors.get(function, {}).get(name) if kind == SCHEDULER else None))
                self._set(f"{function}:{name}", role)
        self._scaler_calls = self._keys_calling(_SCALER_ONLY_METHODS)
        for _ in range(4):  # flow through assignments and calls converges in a few rounds
            changed = False
            for node, site in self.structure.statements:
                changed |= self._assignment(node, site.scope, self.command_line.never_runs(site))
            for call, site in self.structure.calls:
                changed |= self._use(call, site, self.command_line.never_runs(site))
                changed |= self._call_flow(call, site.scope)
                for argument, kind in self.project.argument_roles(call, site.scope) if self.project else ():
                    changed |= self._set(self.key(argument, site.scope), Role(kind, USE))
            if not changed:
                break

    def _declared_roles(self) -> None:
        """`[tool.steplint.roles] scheduler = ["warmup_policy"]`: as strong as an annotation."""
        for node, site in self.structure.statements:
            for sub in walk_expressions(node):
                text = dotted(sub) if isinstance(sub, (cst.Name, cst.Attribute)) else None
                if text is None:
                    continue
                for kind, names in self.declared.items():
                    if text in names or text.split(".")[-1] in names:
                        declared = Role(OPTIMIZER, ANNOTATION, skips="declared") if kind == SKIPPABLE_OPTIMIZER else Role(kind, ANNOTATION)
                        self._set(self.key(sub, site.scope), declared)

    def _annotation_role(self, annotation: Optional[cst.Annotation], scope: Scope) -> Optional[Role]:
        if annotation is None:
            return None
        expr = annotation.annotation
        if isinstance(expr, cst.Subscript) and dotted(expr.value) in ("Optional", "typing.Optional"):
            expr = expr.slice[0].slice.value  # type: ignore[union-attr]
        qualified = self.qualified(expr, scope) if isinstance(expr, (cst.Name, cst.Attribute)) else None
        if qualified is None:
            return None
        if qualified in SCALER_CLASSES:
            return Role(SCALER, ANNOTATION)
        if qualified in ("torch.optim.Optimizer", "torch.optim.optimizer.Optimizer"):
            return Role(OPTIMIZER, ANNOTATION)
        if qualified in SCHEDULER_BASE_ANNOTATIONS:
            return Role(SCHEDULER, ANNOTATION)
        if qualified in ACCELERATOR_CLASSES:
            return Role(ACCELERATOR, ANNOTATION)
        return None

    def constructed(self, call: cst.Call, scope: Scope) -> Optional[Role]:
        """The role of the object a call builds, judged by the import-resolved callee."""
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == scope.self_name and scope.class_name:
            # Lightning manual optimization: self.optimizers(), self.lr_schedulers(); under 16-bit mixed
            # precision the optimizers' `step()` runs the precision plugin's GradScaler, which may skip it
            kind = {"optimizers": OPTIMIZER, "lr_schedulers": SCHEDULER}.get(func.attr.value)
            skips = LIGHTNING_MIXED_PRECISION if kind == OPTIMIZER and self._lightning_mixed_precision else None
            return Role(kind, USE, skips=skips) if kind else None
        written = dotted(call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None  # (`WarmupPolyLR`, `utils.CosineLRSchedule`)
        owner = scope.owner_of(written.partition(".")[0]) if written else None
        derived_from = self.torch_subclasses.get(written) if written and (owner is None or owner.name == "<module>") else None
        if derived_from in OPTIMIZER_BASES:  # `class AdamW(torch.optim.Optimizer)` of the project
            return Role(OPTIMIZER, CONSTRUCTOR)
        if derived_from is not None:  # `class WarmupPolyLR(torch.optim.lr_scheduler._LRScheduler)` of the project
            given = keyword(call, "optimizer") or next(iter(positional(call)), None)
            optimizer = self.key(given, scope) if isinstance(given, (cst.Name, cst.Attribute)) else None
            if derived_from == PROJECT_LR_SCHEDULE:  # (a class whose step() sets the LR: a schedule of the project's own making)
                return Role(SCHEDULER, CONSTRUCTOR, optimizer=optimizer)
            return Role(SCHEDULER, CONSTRUCTOR, metric=derived_from.endswith("ReduceLROnPlateau"), constructor=derived_from, optimizer=optimizer)
        qualified = self.qualified(call.func, scope)
        if qualified is None:
            return None
        tail = qualified.rsplit(".", 1)[-1]
        if qualified in SCALER_CLASSES:
            off = self._built_off(call, scope)
            if off:  # `GradScaler(enabled=args.amp)`, no run giving --amp; `enabled=cfg.use_amp`, nothing setting it true
                return Role(SCALER, CONSTRUCTOR, enabled=False, off_as_run=off)
            enabled = keyword(call, "enabled")
            return Role(SCALER, CONSTRUCTOR, enabled=literal(enabled), enabled_by=dotted(enabled) if enabled is not None else None)
        if qualified in LOSS_SCALER_CLASSES:
            return Role(LOSS_SCALER, CONSTRUCTOR)
        if qualified in APEX_FP16_OPTIMIZERS:
            # apex.optimizers' fused FP16_Optimizer returns from step() whenever the gradients' norm is inf/NaN,
            # whatever its scale; apex.fp16_utils' one only with a dynamic scale (a static scaler sees no overflow)
            if qualified in APEX_FUSED_FP16_OPTIMIZERS:
                return Role(OPTIMIZER, CONSTRUCTOR, skips="apex-fused-fp16-optimizer")
            return Role(OPTIMIZER, CONSTRUCTOR, skips="apex-fp16-optimizer" if literal(keyword(call, "dynamic_loss_scale")) is True else None)
        if qualified in EMA_CLASSES:
            return Role(EMA, CONSTRUCTOR)
        if qualified in OPTIMIZER_FACTORIES or (
            qualified.startswith(OPTIMIZER_MODULES) and tail[:1].isupper() and ".lr_scheduler" not in qualified and ".swa_utils" not in qualified
            and tail not in ("Optimizer", "swa_utils")
        ):
            return Role(OPTIMIZER, CONSTRUCTOR, fused=literal(keyword(call, "fused")) is True)
        positioned = keyword(call, "last_epoch") is not None and literal(keyword(call, "last_epoch")) != -1
        given = keyword(call, "optimizer") or next(iter(positional(call)), None)
        optimizer = self.key(given, scope) if isinstance(given, (cst.Name, cst.Attribute)) else None
        if qualified.startswith(SCHEDULER_MODULES) and tail[:1].isupper():
            return Role(SCHEDULER, CONSTRUCTOR, metric=tail == "ReduceLROnPlateau", constructor=qualified, positioned=positioned, optimizer=optimizer,
                        optimizer_replaced=self._replaced_after(optimizer, call, scope))
        # (`get_linear_schedule_with_warmup`; and the classes of pytorch-transformers and transformers < 3, `WarmupLinearSchedule`)
        if qualified.startswith(("transformers.", "diffusers.optimization.")) and tail.startswith("get_") and "schedule" in tail or (
            qualified.startswith(("transformers.", "pytorch_transformers.")) and tail[:1].isupper() and tail.endswith("Schedule")
        ):
            return Role(SCHEDULER, CONSTRUCTOR, constructor=qualified, positioned=positioned, optimizer=optimizer,
                        optimizer_replaced=self._replaced_after(optimizer, call, scope))
        if qualified.startswith("timm.scheduler.") and tail.endswith("Scheduler"):
            # timm's step_update(n) does nothing unless the scheduler counts updates (t_in_epochs=False)
            in_epochs = literal(keyword(call, "t_in_epochs"))
            per_update = (not in_epochs) if isinstance(in_epochs, bool) else (False if keyword(call, "t_in_epochs") is None else ...)
            return Role(SCHEDULER, CONSTRUCTOR, metric=tail == "PlateauLRScheduler", constructor=qualified, per_update=per_update)
        if qualified.startswith(COLOSSALAI_PLUGINS) and tail.endswith("Plugin"):
            fp16 = plugin_precision(qualified, call)
            return Role(PLUGIN, CONSTRUCTOR, skips=COLOSSALAI if fp16 else None, booster_precision=fp16 is None)
        if qualified in COLOSSALAI_BOOSTERS:
            return Role(BOOSTER, CONSTRUCTOR, skips=COLOSSALAI if self._boosted_in_fp16(call, scope) else None)
        if qualified in ACCELERATOR_CLASSES:
            given = keyword(call, "mixed_precision")
            legacy = keyword(call, "fp16") if given is None else None
            if legacy is not None:  # (accelerate < 0.15: `Accelerator(fp16=args.fp16)`)
                on = literal(legacy)
                if on is ... and self.command_line.off_as_run(legacy, scope):
                    on = False
                return Role(ACCELERATOR, CONSTRUCTOR, mixed_precision=PRECISION_FROM_EXPRESSION if on is ... else "fp16" if on else "no")
            # `...`: an expression (may be fp16); None: not in the code (from `accelerate config`)
            precision = None if given is None else literal(given)
            if precision is ... and isinstance(given, cst.Name):
                precision = self.default_as_run(given.value, scope)
            return Role(ACCELERATOR, CONSTRUCTOR, mixed_precision=PRECISION_FROM_EXPRESSION if precision is ... else precision)
        return None

    @cached_property
    def _lightning_mixed_precision(self) -> bool:
        """The module's Lightning runs may train in 16-bit mixed precision, with a GradScaler: the Trainer it
        builds itself is given that precision as written (`L.Trainer(precision="16-mixed")`, which decides
        alone), or else a config file of the project gives it (`trainer: {precision: 16-mixed}`)."""
        written = [literal(keyword(call, "precision")) for call, site in self.structure.calls
                   if (self.qualified(call.func, site.scope) or "") in LIGHTNING_TRAINERS and keyword(call, "precision") is not None]
        if written and all(value is not ... for value in written):
            return any(str(value) in _LIGHTNING_MIXED_16 for value in written)
        return self.project is not None and any(value in _LIGHTNING_MIXED_16 for value in self.project.precisions_configured)

    def _replaced_after(self, optimizer: Optional[str], call: cst.Call, scope: Scope) -> bool:
        """Whether the optimizer a scheduler is built on (by key) is then replaced under its name by a new
        optimizer wherever the scheduler was built (`optimizer = AdamW(...)` a line below, built from
        anything but the old one): the scheduler then drives an optimizer no loop steps."""
        holder = self.structure.holder.get(id(call))
        built = self.structure.site_of.get(id(holder)) if holder is not None else None
        if optimizer is None or built is None:
            return False
        for node, site in self.statements_of(scope):
            if site.order <= built.order or site.loop is not built.loop or len(site.guards) > len(built.guards):
                continue
            if not all(a is b for a, b in zip(site.guards, built.guards)) or not isinstance(node, cst.Assign) or len(node.targets) != 1:
                continue
            if self.key(node.targets[0].target, scope) != optimizer or not isinstance(node.value, cst.Call):
                continue
            role = self.constructed(node.value, scope)
            if role is not None and role.kind == OPTIMIZER and not any(self.key(read, scope) == optimizer for read in reads(node.value)):
                return True
        return False

    def holds_another(self, key: Optional[str], kind: str) -> bool:
        """Whether some assignment of the module gives `key` a value that is not a `kind` (`self.scaler =
        NoScaling()` in one branch, a GradScaler in the other): a fix that calls a method only a `kind`
        has (`scaler.unscale_(...)`) would fail on that path. A `None` is not counted (`maybe_none`)."""
        return key is not None and any(self._another(value, scope, kind) for value, scope in self._assigned_values.get(key, ()))

    def _another(self, value: cst.BaseExpression, scope: Scope, kind: str) -> bool:
        """A value shown not to be a `kind`: an object of another role, an instance of a class that is not
        one (`NoScaling()`, `utils.DummyGradScalar()`: a CapWords callee without the role), a literal.
        What the model cannot tell (a parameter, a factory's result) is not counted."""
        if isinstance(value, cst.IfExp):
            return any(self._another(v, scope, kind) for v in (value.body, value.orelse) if not _is_none(v))
        if _is_none(value):
            return False
        role = self.value_role(value, scope)
        if role is not None:
            return role.kind != kind
        if isinstance(value, cst.Call):
            name = last_name(value.func) or ""
            return name[:1].isupper() and not name.isupper()
        return literal(value) is not ...

    @cached_property
    def _assigned_values(self) -> Dict[str, List[tuple]]:
        """Key -> (value, scope) of each plain assignment of it in the module (computed once)."""
        found: Dict[str, List[tuple]] = {}
        for node, site in self.structure.statements:
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, (cst.Name, cst.Attribute)):
                key = self.key(node.targets[0].target, site.scope)
                if key:
                    found.setdefault(key, []).append((node.value, site.scope))
        return found

    def statements_of(self, scope: Scope) -> List[tuple]:
        """(node, site) of the statements of one scope, in program order."""
        return self._statements_by_scope.get(id(scope), [])

    @cached_property
    def _statements_by_scope(self) -> Dict[int, List[tuple]]:
        """id(scope) -> (node, site) of its statements, in program order (computed once)."""
        found: Dict[int, List[tuple]] = {}
        for node, site in self.structure.statements:
            found.setdefault(id(site.scope), []).append((node, site))
        return found

    def _boosted_in_fp16(self, call: cst.Call, scope: Scope) -> bool:
        """A booster whose plugin trains in fp16, or whose own `mixed_precision` may be fp16 and is
        not overridden by a plugin that sets the precision. An unknown plugin: silence."""
        given = keyword(call, "plugin")
        if given is None:
            arguments = positional(call)
            given = arguments[2] if len(arguments) > 2 else None
        plugin = self.value_role(given, scope) if given is not None and not _is_none(given) else None
        if given is not None and not _is_none(given) and (plugin is None or plugin.kind != PLUGIN):
            return False
        if plugin is not None and plugin.skips:
            return True
        return (plugin is None or plugin.booster_precision) and booster_precision(call, lambda f: self.qualified(f, scope))

    def _is_foreign(self, call: cst.Call, scope: Scope) -> bool:
        qualified = self.qualified(call.func, scope) or ""
        return qualified.startswith(FOREIGN_MODULES) or bool(FOREIGN_DIFFUSERS.match(qualified))

    def value_role(self, value: cst.BaseExpression, scope: Scope) -> Optional[Role]:
        if isinstance(value, (cst.Name, cst.Attribute)):
            return self.of(value, scope)
        if isinstance(value, cst.Call):
            returned, constructor = self.project.returned_role(value, scope) if self.project else (None, None)
            return self.constructed(value, scope) or (Role(returned, USE, constructor=constructor) if returned else None)
        if isinstance(value, cst.IfExp):  # `GradScaler() if amp else None`: the object, when there is one
            roles = [self.value_role(v, scope) for v in (value.body, value.orelse) if not _is_none(v)]
            kinds = {r.kind for r in roles if r is not None}
            if not (len(kinds) == 1 and all(r is not None for r in roles)):
                return None
            flag = dotted(value.test)
            alone = len(roles) == 1 and _is_none(value.orelse)
            off = (self.command_line.off_as_run(value.test, scope) or self.command_line.unproven(value.test, scope)) if alone else None
            if off:
                return _without_loss_scaling(roles[0], off)  # `GradScaler() if args.amp else None`, no run giving --amp
            if len(roles) == 1 and _is_none(value.orelse) and flag is not None:
                return replace(roles[0], present_if=f"{scope.name}:{flag}")
            return roles[0]
        return None

    def _assignment(self, node: cst.CSTNode, scope: Scope, off_as_run: Optional[str] = None) -> bool:
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
            value = node.value
        elif isinstance(node, cst.AnnAssign):
            changed = self._set(self.key(node.target, scope), self._annotation_role(node.annotation, scope))
            if node.value is None:
                return changed
            targets, value = [node.target], node.value
        else:
            return False
        changed = False
        if _is_none(value) or isinstance(value, cst.IfExp) and (_is_none(value.body) or _is_none(value.orelse)):
            self.maybe_none.update(self.key(t, scope) for t in targets)
        if isinstance(value, cst.Dict) and len(targets) == 1 and isinstance(targets[0], (cst.Name, cst.Attribute)):
            # `self.optimizers = {"G": AdamW(...), "D": AdamW(...)}`: each entry holds its object's role
            for entry in value.elements:
                name = literal(entry.key) if isinstance(entry, cst.DictElement) else None
                if isinstance(name, str):
                    held = cst.Subscript(targets[0], [cst.SubscriptElement(cst.Index(cst.SimpleString(repr(name))))])
                    changed |= self._set(self.key(held, scope), _without_loss_scaling(self.value_role(entry.value, scope), off_as_run))
        for target in targets:
            for element, role in self._unpack(target, value, scope):
                key = self.key(element, scope)
                if isinstance(value, cst.Call) and self._is_foreign(value, scope) and key:
                    self.foreign.add(key)
                if isinstance(value, cst.Call) and role is None and key and self._rewraps(value, element, scope):
                    self.wrapped.add(key)
                changed |= self._set(key, _without_loss_scaling(role, off_as_run))
        return changed

    def _rewraps(self, call: cst.Call, target: cst.BaseExpression, scope: Scope) -> bool:
        """`model, optimizer = msamp.initialize(model, optimizer)`: an unknown call hands back its argument."""
        text = dotted(target)
        return text is not None and any(dotted(a.value) == text for a in call.args)

    def _unpack(self, target, value, scope) -> Iterable[Tuple[cst.BaseExpression, Optional[Role]]]:
        elements = [e.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else None
        call = value if isinstance(value, cst.Call) else None
        if call is not None and isinstance(call.func, cst.Attribute) and call.func.attr.value == "prepare" and self.is_(
            call.func.value, scope, ACCELERATOR
        ):
            accelerator = dotted(call.func.value)
            precision = self.of(call.func.value, scope).mixed_precision  # type: ignore[union-attr]
            args = positional(call)
            outputs = elements if elements is not None else [target]
            for out, arg in zip(outputs, args):
                role = self.value_role(arg, scope)
                if role is None and isinstance(out, (cst.Name, cst.Attribute)):
                    name = dotted(out) or ""
                    kind = SCHEDULER if scheduler_named(name) else OPTIMIZER if optimizer_named(name) else None
                    role = Role(kind, NAME) if kind else None
                yield out, replace(role, prepared=True, accelerator=accelerator, mixed_precision=precision) if role else None
            return
        if call is not None and elements and isinstance(call.func, cst.Attribute) and call.func.attr.value == "boost" and self.is_(
            call.func.value, scope, BOOSTER
        ):
            yield from self._boosted(call, elements, self.of(call.func.value, scope), scope)  # type: ignore[arg-type]
            return
        qualified = self.qualified(call.func, scope) if call is not None else None
        if qualified == DEEPSPEED_INITIALIZE and elements:
            kinds = [ENGINE, OPTIMIZER, None, SCHEDULER]
            # the engine steps the optimizer it returns, which wraps the one it was given
            given = [e for e in elements[1:2] if dotted(e) not in (None, "_")] + [keyword(call, "optimizer")]
            wrapped = next((self.key(e, scope) for e in given if isinstance(e, (cst.Name, cst.Attribute))), None)
            for out, kind in zip(elements, kinds):
                if kind:
                    yield out, Role(kind, CONSTRUCTOR, engine_owned=kind != ENGINE, optimizer=wrapped if kind == ENGINE else None)
            return
        if qualified in SCHEDULER_FACTORY_TUPLES and elements:
            yield elements[0], Role(SCHEDULER, CONSTRUCTOR)
            return
        if elements is not None:
            built = self.constructed(call, scope) if call is not None else None
            if built is not None and built.evidence == USE:  # `opt_g, opt_d = self.optimizers()`
                for out in elements:
                    yield out, built
                return
            returned = self.project.returned_roles(call, scope) if self.project is not None and call is not None else []
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(elements):
                for out, v in zip(elements, value.elements):
                    yield out, self.value_role(v.value, scope)
            elif len(returned) == len(elements):  # `optimizer, scheduler = build_optimizer(cfg, model)`, from the helper's summary
                for out, (kind, maybe_none) in zip(elements, returned):
                    if maybe_none:
                        self.maybe_none.add(self.key(out, scope))
                    yield out, Role(kind, USE) if kind else None
            else:
                for out in elements:
                    yield out, None
            return
        role = self.value_role(value, scope)
        if role is None and call is not None and isinstance(target, (cst.Name, cst.Attribute)):
            # `scheduler = build_scheduler(optimizer, cfg)`: a factory fed an optimizer, named as a scheduler
            name = dotted(target) or ""
            if scheduler_named(name) and any(self.is_(a, scope, OPTIMIZER) for a in positional(call)):
                role = Role(SCHEDULER, NAME)
        yield target, role

    def _boosted(self, call: cst.Call, elements, booster: Role, scope: Scope) -> Iterable[Tuple[cst.BaseExpression, Optional[Role]]]:
        """`model, optimizer, criterion, loader, scheduler = booster.boost(model, optimizer, ...)`: the
        optimizer comes back wrapped, skipping on overflow when boosted in fp16; the scheduler comes
        back as it was given (ColossalAI does not step it)."""
        arguments = positional(call)
        for index, (out, name, kind) in enumerate(zip(elements, _BOOST_PARAMETERS, (None, OPTIMIZER, None, None, SCHEDULER))):
            given = keyword(call, name) or (arguments[index] if index < len(arguments) else None)
            if kind is None or given is None or _is_none(given):
                continue
            role = self.value_role(given, scope)
            role = role if role is not None and role.kind == kind else Role(kind, USE)
            yield out, replace(role, evidence=max(role.evidence, USE), skips=booster.skips) if kind == OPTIMIZER and booster.skips else role

    @cached_property
    def apex_disabled(self) -> Optional[str]:
        """What keeps apex amp off in every run: each `amp.initialize(...)` of the module is given `enabled=`
        false as run (a literal, an option no launch gives, a config key set false): `amp.scale_loss` then
        hands the loss back unscaled and no step is skipped. None when one may enable it, or none is made."""
        found = None
        for call, site in self.structure.calls:
            if self.qualified(call.func, site.scope) != "apex.amp.initialize":
                continue
            enabled = keyword(call, "enabled")
            off = "enabled=False" if enabled is not None and literal(enabled) is False else (
                self.command_line.off_as_run(enabled, site.scope) or self.command_line.unproven(enabled, site.scope)) if enabled is not None else None
            if not off:
                return None
            found = found or off
        return found

    def _keys_calling(self, methods: frozenset) -> set:
        """Keys of the objects on which the module calls one of `methods`."""
        return {
            self.key(call.func.value, site.scope)
            for call, site in self.structure.calls
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in methods
        }

    def _use(self, call: cst.Call, site, off_as_run: Optional[str] = None) -> bool:
        scope = site.scope
        func = call.func
        changed = False
        args = positional(call)
        if len(args) >= 2 and self.qualified(func, scope) == APEX_SCALE_LOSS and not off_as_run and self.apex_disabled is None:
            changed |= self._set(self.key(args[1], scope), Role(OPTIMIZER, USE, skips="apex"))
        if isinstance(func, cst.Attribute):
            obj, method = func.value, func.attr.value
            name = dotted(obj) or ""
            if method == "backward" and isinstance(obj, cst.Call) and isinstance(obj.func, cst.Attribute) and obj.func.attr.value == "scale":
                changed |= self._set(self.key(obj.func.value, scope), Role(SCALER, USE))
            elif method in ("step", "unscale_") and len(args) == 1:
                # `x.step(optimizer)` alone is the shape of many wrappers (a toolkit's accelerator, a
                # trainer); `x` is a scaler when it also does what only a scaler does.
                shown = method == "unscale_" or self.key(obj, scope) in self._scaler_calls
                if shown and self.is_(args[0], scope, OPTIMIZER) and (self.of(obj, scope) is None):
                    changed |= self._set(self.key(obj, scope), Role(SCALER, USE))
                if self.is_(obj, scope, SCALER):
                    changed |= self._set(self.key(args[0], scope), Role(OPTIMIZER, USE))
            elif (method in ("step", "step_update") or method in self.scheduler_methods) and scheduler_named(name) and not self.is_(obj, scope, OPTIMIZER) and _lr_step_shape(call, site):
                changed |= self._set(self.key(obj, scope), Role(SCHEDULER, NAME))
            elif method == "zero_grad" and optimizer_named(name):
                changed |= self._set(self.key(obj, scope), Role(OPTIMIZER, NAME))
        elif isinstance(func, (cst.Name, cst.Attribute)) and len(args) >= 2:
            if self.is_(func, scope, LOSS_SCALER):
                changed |= self._set(self.key(args[1], scope), Role(OPTIMIZER, USE))
            elif (self.is_(args[1], scope, OPTIMIZER) and _SCALER_NAME.search(last_name(func) or "") and self.of(func, scope) is None
                  and not self._a_function(call, scope)):
                changed |= self._set(self.key(func, scope), Role(LOSS_SCALER, NAME))
        return changed

    def _a_function(self, call: cst.Call, scope: Scope) -> bool:
        """The callee is a function the code defines (`def step_optimizer_with_scaler(scaler, optimizer, ...)`), here or
        in a module of the project: not a loss scaler held in a name (`loss_scaler(loss, optimizer)`), whatever its name."""
        if self.project is not None and self.project.callee(call, scope) is not None:
            return True
        name = call.func.value if isinstance(call.func, cst.Name) else None
        return name is not None and any(s.name == name and s.class_name is None and s.parent is None for s in self.structure.scopes)

    def _built_disabled(self, key: str) -> Optional[str]:
        """What keeps a loss scaler of the project's own off as run: each construction of it is handed `enabled=`
        false as run (`NativeScalerWithGradNormCount(enabled=True if args.dtype == "fp16" else False)`, no launch
        giving fp16), as a GradScaler would be. None when some construction may enable it, or hides how."""
        if key not in self._disabled_builds:
            offs = [self._built_off(built, scope) if isinstance(built := _when_present(value), cst.Call) else None
                    for value, scope in self._assigned_values.get(key, ())]
            self._disabled_builds[key] = offs[0] if offs and all(offs) else None
        return self._disabled_builds[key]

    def _built_off(self, call: cst.Call, scope: Scope) -> Optional[str]:
        """What keeps a scaler built by `call` off as run: its `enabled=` false in every run the project shows, or a
        switch of loss scaling nothing turns on (`enabled=cfg.use_amp`); None when it may scale."""
        enabled = keyword(call, "enabled")
        return self.command_line.off_as_run(enabled, scope) or self.command_line.unproven(enabled, scope)

    def _call_flow(self, call: cst.Call, scope: Scope) -> bool:
        """Roles of arguments flow into the parameters of a function or method of this module."""
        target = self.callee(call.func, scope)
        if target is None:
            return False
        params = list(target.params)
        if target.self_name:
            params = params[1:]
        changed = False
        by_name = {p.name.value: p for p in params}
        for index, arg in enumerate(call.args):
            if arg.star:
                break
            param = by_name.get(arg.keyword.value) if arg.keyword else (params[index] if index < len(params) else None)
            role = self.value_role(arg.value, scope) if param is not None else None
            if role is not None:
                changed |= self._set(f"{target.name}:{param.name.value}", role)
            handed = f"{target.name}:{param.name.value}" if param is not None else None
            if handed is not None and handed not in self.maybe_none and (_is_none(arg.value) or self.key(arg.value, scope) in self.maybe_none):
                self.maybe_none.add(handed)  # (`scaler = GradScaler() if amp else None` handed on: None there too)
                changed = True
        return changed

    def callee(self, func: cst.BaseExpression, scope: Scope) -> Optional[Scope]:
        """The function or method of this module that a call runs, when the call says so plainly."""
        if isinstance(func, cst.Name):
            if scope.owner_of(func.value) is not None:
                return None  # a local variable holding who knows what
            enclosing: Optional[Scope] = scope
            while enclosing is not None:  # a nested function of this one or of an enclosing one
                nested = self._functions.get(f"{enclosing.name}.{func.value}")
                if nested is not None and nested.parent is enclosing:
                    return nested
                enclosing = enclosing.parent
            candidate = self._functions.get(func.value)
            if candidate is None:  # (building an instance of a class of this module runs its `__init__`)
                candidate = self._functions.get(f"{func.value}.__init__")
                return candidate if candidate is not None and candidate.parent is None and candidate.class_name == func.value else None
            return candidate if candidate.class_name is None else None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == scope.self_name:
            return self._functions.get(f"{scope.class_name}.{func.attr.value}")
        return None


_BOOST_PARAMETERS = ("model", "optimizer", "criterion", "dataloader", "lr_scheduler")


def _literal_index(expr: cst.Subscript) -> Optional[str]:
    """`"G"` of `x["G"]`: the one string literal a subscript indexes with, else None."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    value = literal(expr.slice[0].slice.value)
    return value if isinstance(value, str) else None


def _is_none(expr: Optional[cst.BaseExpression]) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _when_present(value: cst.BaseExpression) -> cst.BaseExpression:
    """`Scaler(...) if args.gan else None`: the object, when there is one (any other value as it is)."""
    if isinstance(value, cst.IfExp) and (_is_none(value.body) or _is_none(value.orelse)):
        return value.orelse if _is_none(value.body) else value.body
    return value


def _property_aliases(structure: Structure) -> Dict[Tuple[str, str], str]:
    """(class, property) -> the attribute it returns: `@property def lr_scheduler(self): ...
    return self._lr_scheduler` makes `self.lr_scheduler` the same object as `self._lr_scheduler`."""
    found: Dict[Tuple[str, str], str] = {}
    for scope in structure.scopes:
        node = scope.node
        if scope.class_name is None or not isinstance(node, cst.FunctionDef) or scope.parent is not None:
            continue
        if not any(dotted(d.decorator) == "property" for d in node.decorators) or not isinstance(node.body, cst.IndentedBlock):
            continue
        last = node.body.body[-1] if node.body.body else None
        value = last.body[0].value if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], cst.Return) else None
        if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value == scope.self_name:
            found[(scope.class_name, node.name.value)] = value.attr.value
    return found


# Imported modules that hold step state of a role for the whole process, so that a helper restoring
# its own import of one (`amp.load_state_dict(...)` in utils.py) restores the caller's too.
STATEFUL_MODULES = {APEX_AMP: SCALER}


def module_binding(module_names: Dict[str, str], qualified: str, scope: Scope) -> Optional[str]:
    """The name the module's imports (`module_names`), or those of the function, bind to `qualified`, or
    the dotted path to it from a package they bind (`apex.amp` after `import apex`)."""
    names = {**module_names, **(own_imports(scope) or {})}
    found = next((name for name, bound in names.items() if bound == qualified and scope.owner_of(name) is None), None)
    if found is None:  # (`import apex`, then `apex.amp.scale_loss(...)`: the package's name, and the path below it)
        found = next((f"{name}{qualified[len(bound):]}" for name, bound in names.items()
                      if qualified.startswith(bound + ".") and scope.owner_of(name) is None), None)
    return found


def own_imports(scope: Scope) -> Optional[Dict[str, str]]:
    """What the import statements of a function and of the functions around it bind, nearest first."""
    if scope.parent is None:
        return scope.imports  # (the common case: no dict built per lookup)
    found: Dict[str, str] = {}
    while scope is not None:
        for name, qualified in scope.imports.items():
            found.setdefault(name, qualified)
        scope = scope.parent
    return found


def torch_subclasses(module: cst.Module, imports: ImportMap, project=None) -> Dict[str, str]:
    """Classes a module can call that derive from a torch scheduler or optimizer -> that class (qualified): its
    own (`class WarmupPolyLR(_LRScheduler)`, also through another class of it) and those the project index
    found behind its imports."""
    found = dict(project.torch_subclasses) if project is not None else {}
    bases = {
        statement.name.value: [dotted(b.value) for b in statement.bases if b.keyword is None and not b.star]
        for statement in module.body if isinstance(statement, cst.ClassDef)
    }
    for _ in range(len(bases)):  # (a chain of the module's own classes, in any order)
        changed = False
        for name, written in bases.items():
            for base in filter(None, written):
                head, _, rest = base.partition(".")
                qualified = imports.names[head] + (f".{rest}" if rest else "") if head in imports.names else None
                torch_base = qualified if qualified and (qualified.startswith(SCHEDULER_MODULES) or qualified in OPTIMIZER_BASES) else (
                    found.get(base) if base in bases or base in found else None)
                if torch_base and found.get(name) != torch_base:
                    found[name], changed = torch_base, True
                    break
        if not changed:
            break
    return found
