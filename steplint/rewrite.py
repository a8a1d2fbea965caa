"""Fixes as text edits: committed-step gating (DESIGN.md §6) and moving a statement.

Every edit is computed from CST positions and touches only the statements it is about; the
engine re-parses the result and drops a fix that would not.
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Dict, List, Optional, Tuple

import libcst as cst

from steplint import runtime
from steplint.fixes import UNSAFE, Edit, Fix
from steplint.preconditions import unfixed, violations
from steplint.model import COMMITTED_STEP, SKIPPABLE_STEP, ModuleModel
from steplint.model.events import CALL, Event
from steplint.model.overflow import OVERFLOW_ERROR, catches_overflow
from steplint.model.roles import ACCELERATOR, ANNOTATION, LOSS_SCALER, SCALER
from steplint.model.structure import Site
from steplint.model.syntax import dotted, walk_expressions
from steplint.notebook import starts_cell
from steplint.rule import Finding

INLINE, IMPORT = "inline", "import"
_COMMITTED_NAMES = ("committed", "update_committed")


class _CommentFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found = False

    def visit_Comment(self, node: cst.Comment) -> None:
        self.found = True


def holds_comment(node: cst.CSTNode) -> bool:
    """Whether a comment sits inside the node (in its brackets): a fix that rewrites the node would drop it."""
    finder = _CommentFinder()
    node.visit(finder)
    return finder.found


# -- the preconditions every fix meets ---------------------------------------------------------


def vetted(model: ModuleModel, finding: Finding) -> Finding:
    """The finding, without its fix when the fix fails a precondition checked on the text it would
    write (binding, committed-path equivalence: steplint.preconditions); the message then says what
    blocks it. Rules check the preconditions that need the model (role, consistency) as they build
    their fixes, with the functions below."""
    if finding.fix is None:
        return finding
    blocked = violations(model.source.text, finding.fix, model.remember(("unfixed",), lambda: unfixed(model.source.text, model.source.python_tree)))
    return replace(finding, fix=None, message=f"{finding.message} (no fix: {'; '.join(blocked)})") if blocked else finding


# -- consistency: the readers that must agree with an edit ------------------------------------------


def window_index_readers(model: ModuleModel, index: cst.Name, length: cst.BaseExpression, scope, tested: cst.BinaryOperation) -> Tuple[list, list]:
    """The other reads of `index % length` in the scope, beside the window test `tested`: (those that
    read it unshifted, which a shifted window test must shift too, as a `no_sync()` test on the same
    index; those already shifted, which disagree with the test as it is)."""
    length_text = model.text.of(length)
    unshifted, shifted = [], []
    for remainder, site in model.structure.remainders:
        if remainder is tested or site.scope is not scope or model.text.of(remainder.right) != length_text:
            continue
        left = remainder.left
        if isinstance(left, cst.Name) and left.value == index.value:
            unshifted.append(remainder)
        elif isinstance(left, cst.BinaryOperation) and isinstance(left.left, cst.Name) and left.left.value == index.value:
            shifted.append(remainder)
    return unshifted, shifted


def ungated_cadences(model: ModuleModel, increment: Event, through: int) -> List[int]:
    """Rows of the cadence tests (`n % k == 0`, `n == k`: true once per value) that read a counter
    anywhere in the module (by its name: `trainer.num_updates` in the caller, a callback's
    `state.num_updates`) outside the statements a gating fix would put under the gate: held back on
    a skipped update, the counter would make each of them fire again (at 0 too)."""
    name = (dotted(increment.subject) or "").rsplit(".", 1)[-1]
    block, statement = increment.site.trail[-1]
    index = block.index(statement)
    gated = [model.text.span(s) for s in block.statements[index : index + 1 + through]]
    scope = increment.site.scope
    local = isinstance(increment.subject, cst.Name) and scope.name != "<module>" and scope.owner_of(name) is scope and not _leaves(model, scope, name)
    rows = []
    for start, comparison in _equality_tests_by_name(model).get(name, ()):
        if any(a <= start < b for a, b in gated):
            continue
        if local and not (model.text.span(scope.node)[0] <= start < model.text.span(scope.node)[1]):
            continue  # a local that is neither returned nor passed on is read only in its function
        rows.append(model.text.rows(comparison)[0])
    return sorted(set(rows))


def _leaves(model: ModuleModel, scope, name: str) -> bool:
    """The local `name` is returned, yielded or passed to a call, somewhere in its function."""
    for node in walk_expressions(scope.node.body):
        if isinstance(node, (cst.Return, cst.Yield)) and node.value is not None and any(isinstance(n, cst.Name) and n.value == name for n in walk_expressions(node.value)):
            return True
        if isinstance(node, cst.Arg) and isinstance(node.value, cst.Name) and node.value.value == name:
            return True
    return False


def _equality_tests_by_name(model: ModuleModel) -> Dict[str, List[Tuple[int, cst.Comparison]]]:
    """Every comparison of the module with `==` or `!=`, in every scope, with its start offset, under
    each name it reads (a variable, or the last part of an attribute): once per module, as a
    counter's readers are looked up for each increment."""

    class Finder(cst.CSTVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.found = []

        def visit_Comparison(self, node: cst.Comparison) -> None:
            if any(isinstance(c.operator, (cst.Equal, cst.NotEqual)) for c in node.comparisons):
                self.found.append(node)

    def by_name() -> Dict[str, List[Tuple[int, cst.Comparison]]]:
        found: Dict[str, List[Tuple[int, cst.Comparison]]] = defaultdict(list)
        for comparison in _visited(model.module, Finder()).found:
            start, _ = model.text.span(comparison)
            read = walk_expressions(comparison)
            for name in {n.value if isinstance(n, cst.Name) else n.attr.value for n in read if isinstance(n, (cst.Name, cst.Attribute))}:
                found[name].append((start, comparison))
        return found

    return model.remember(("equality_tests_by_name",), by_name)


def _visited(node: cst.CSTNode, visitor: cst.CSTVisitor) -> cst.CSTVisitor:
    node.visit(visitor)
    return visitor


# -- statements as lines ------------------------------------------------------------------------


def lone_statement(model: ModuleModel, site: Site) -> Optional[cst.SimpleStatementLine]:
    """The site's statement when it is one simple statement that owns its lines."""
    statement = site.statement
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    first, _ = model.text.rows(statement.body[0])
    start, _ = model.text.span(statement.body[0])
    if model.source.text[model.source.line_starts[first - 1] : start].strip(" \t\f"):  # (a form feed in the indentation is whitespace too)
        return None
    return statement


def _line_block(model: ModuleModel, statement: cst.SimpleStatementLine) -> Tuple[int, int]:
    """Offsets of the whole lines of a statement, trailing comment and line break included."""
    first, last = model.text.rows(statement.body[0])
    starts = model.source.line_starts
    end = starts[last] if last < len(starts) else len(model.source.text)
    return starts[first - 1], end


def _indent_unit(model: ModuleModel, block_owner: cst.CSTNode) -> str:
    body = getattr(block_owner, "body", None)
    indent = getattr(body, "indent", None)
    return indent if indent is not None else model.module.default_indent


def _reindented(model: ModuleModel, statement: cst.SimpleStatementLine, indent: str) -> str:
    start, end = _line_block(model, statement)
    lines = model.source.text[start:end].splitlines(keepends=True)
    old = model.source.indentation(model.text.rows(statement.body[0])[0])
    out = [indent + lines[0][len(old):]]
    out += [indent + line[len(old):] if line.startswith(old) else line for line in lines[1:]]
    text = "".join(out)
    return text if text.endswith(("\n", "\r")) else text + model.source.newline


def move_to(model: ModuleModel, statement: cst.SimpleStatementLine, offset: int, indent: str) -> List[Edit]:
    """Edits that move a statement's lines to the line start `offset`, re-indented."""
    start, end = _line_block(model, statement)
    return [Edit(start, end, ""), Edit(offset, offset, _reindented(model, statement, indent))]


def after_statement(model: ModuleModel, statement: cst.BaseStatement) -> Optional[int]:
    """The line start just past a statement, or None at the end of a file without a final newline."""
    _, last = model.text.rows(statement)
    starts = model.source.line_starts
    return starts[last] if last < len(starts) else None


# -- committed-step gating ----------------------------------------------------------------------


def gate_condition(model: ModuleModel, update: Event) -> Optional[str]:
    """The commit gate for the update, as the code will read it, or None when there is none to use."""
    scope = update.site.scope
    if update.strategy == SCALER:
        if update.gate_var:
            return update.gate_var
        taken = scope.local_names if scope.name != "<module>" else _module_names(model)
        names = _COMMITTED_NAMES
        if model.passes.shares_its_pass(update):  # one flag per optimizer: `opt_d_committed`, `opt_g_committed`
            optimizer = (dotted(update.optimizer) or "").replace(".", "_").lstrip("_")
            names = (f"{optimizer}_committed",) if optimizer.isidentifier() else ()
        return next((n for n in names if n not in taken), None)
    if update.strategy == "accelerate" and update.role and update.role.accelerator and not update.role.fused:
        # (accelerate's flag is blind to a fused optimizer's skips: SL106 reports those)
        if model.roles.is_(cst.parse_expression(update.role.accelerator), scope, ACCELERATOR):
            return f"not {update.role.accelerator}.optimizer_step_was_skipped"
    if update.strategy == "deepspeed":
        return f"{model.text.of(update.subject)}.was_step_applied()"
    if update.strategy == OVERFLOW_ERROR:
        handling = overflow_try(update)
        if handling is None:
            return None
        existing = _flag_of(model, handling)
        if existing is not None:
            return existing
        return next((n for n in _COMMITTED_NAMES if n not in scope.local_names), None) if scope.name != "<module>" else None
    if update.strategy == CALL:
        if update.gate_var:
            return update.gate_var
        helper = step_helper(model, update)
        taken = scope.local_names | (helper.site.scope.local_names if helper is not None else set())
        return next((n for n in _COMMITTED_NAMES if n not in taken), None) if helper is not None else None
    return None  # timm-style loss scalers step and update in one call: nothing exact to read after it


def is_grad_scaler(model: ModuleModel, subject: cst.BaseExpression, scope) -> bool:
    """Role precondition of `committed_step(subject, ...)`: the object is a torch GradScaler, built
    here by its qualified constructor (or annotated so), or one the code shows the GradScaler
    protocol of (`step(...)`, `update()` and one of GradScaler's own methods: `scale`, `unscale_`,
    `is_enabled`, `get_scale`) and never builds from anything else. A wrapper with a `step` of its
    own (a toolkit's accelerator) is not one, nor a name given another object on some path
    (`self.scaler = NoScaling()` when a switch is off)."""
    role = model.roles.of(subject, scope)
    if role is None or role.kind != SCALER or model.roles.holds_another(model.roles.key(subject, scope), SCALER):
        return False
    if role.evidence >= ANNOTATION:
        return True
    key = model.roles.key(subject, scope)
    uses = _scaler_uses(model).get(key, _NO_USES)
    return {"step", "update"} <= uses.methods and bool(uses.methods & _SCALER_ONLY) and not uses.built_otherwise


_SCALER_ONLY = frozenset({"scale", "unscale_", "is_enabled", "get_scale"})  # methods a GradScaler has and a wrapper's `step` does not imply


@dataclass(frozen=True)
class _Uses:
    methods: frozenset  # methods called on the object
    built_otherwise: bool  # assigned from a call that does not build a GradScaler


_NO_USES = _Uses(frozenset(), False)


def _scaler_uses(model: ModuleModel) -> dict:
    """Per role key: the methods the module calls on the object, and whether it is built from a
    call that does not build a GradScaler. An argument and the parameter it is passed to, in a
    function of this module, are one object."""

    def compute() -> dict:
        methods, otherwise = {}, set()
        for call, site in model.structure.calls:
            if isinstance(call.func, cst.Attribute):
                key = model.roles.key(call.func.value, site.scope)
                if key is not None:
                    methods.setdefault(key, set()).add(call.func.attr.value)
        for node, site in model.structure.statements:
            if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
                built = model.roles.constructed(node.value, site.scope)
                if built is None or built.kind != SCALER:
                    otherwise.update(model.roles.key(t.target, site.scope) for t in node.targets)
        for _ in range(3):  # through up to three calls
            for argument, parameter in _passed(model):
                joined = methods.get(argument, set()) | methods.get(parameter, set())
                methods[argument] = methods[parameter] = joined
                if argument in otherwise:
                    otherwise.add(parameter)
        return {key: _Uses(frozenset(methods.get(key, ())), key in otherwise) for key in set(methods) | otherwise}

    return model.remember(("scaler_uses",), compute)


def _passed(model: ModuleModel) -> List[Tuple[str, str]]:
    """(argument key, parameter key) of each name passed to a function of this module."""
    found = []
    for call, site in model.structure.calls:
        target = model.roles.callee(call.func, site.scope)
        if target is None:
            continue
        params = list(target.params)[1:] if target.self_name else list(target.params)
        by_name = {p.name.value: p for p in params}
        for index, arg in enumerate(call.args):
            if arg.star:
                break
            param = by_name.get(arg.keyword.value) if arg.keyword else (params[index] if index < len(params) else None)
            key = model.roles.key(arg.value, site.scope) if param is not None and isinstance(arg.value, (cst.Name, cst.Attribute)) else None
            if key is not None:
                found.append((key, f"{target.name}:{param.name.value}"))
    return found


def gate_advice(model: ModuleModel, update: Event) -> str:
    """Why a gating fix is not offered, when it is the role precondition: empty otherwise."""
    if update.strategy == SCALER and not update.gate_var and not is_grad_scaler(model, update.subject, update.site.scope):
        name = model.text.of(update.subject)
        return f" (no fix: `{name}` is not shown to be a torch GradScaler, so nothing exact says whether its `step` committed)"
    return ""


@dataclass(frozen=True)
class OverflowTry:
    """The `try` whose `except OverflowError` handler drops an update, where it stands."""

    statement: cst.Try
    handler: cst.ExceptHandler
    block: object  # the block that holds the `try`


def overflow_try(update: Event) -> Optional[OverflowTry]:
    """For an update an `except OverflowError` drops: the innermost `try` around it with that handler."""
    for index in range(len(update.site.trail) - 1, 0, -1):
        block, _ = update.site.trail[index]
        if isinstance(block.owner, cst.Try):
            handler = next((h for h in block.owner.handlers if catches_overflow(h)), None)
            if handler is not None:
                return OverflowTry(block.owner, handler, update.site.trail[index - 1][0])
    return None


def _flag_of(model: ModuleModel, handling: OverflowTry) -> Optional[str]:
    """`committed`, when the code already sets it True before the `try` and False first in the handler."""
    body = handling.handler.body
    index = handling.block.index(handling.statement)
    before = handling.block.statements[index - 1] if index else None
    first = body.body[0] if isinstance(body, cst.IndentedBlock) and body.body else None
    for name in _COMMITTED_NAMES:
        if (
            isinstance(first, cst.SimpleStatementLine) and model.text.of(first.body[0]).strip() == f"{name} = False"
            and isinstance(before, cst.SimpleStatementLine) and model.text.of(before.body[0]).strip() == f"{name} = True"
        ):
            return name
    return None


def _overflow_flag_edits(model: ModuleModel, update: Event, target: Event, condition: str) -> Optional[List[Edit]]:
    """`committed = True` before the `try`, `committed = False` first in its `except OverflowError`
    handler: the handler runs exactly when the update was dropped. Only for a target after the `try`,
    in the block that holds it."""
    handling = overflow_try(update)
    if handling is None or not any(b is handling.block for b, _ in target.site.trail):
        return None
    if model.text.span(target.node)[0] < model.text.span(handling.statement)[1]:
        return None
    if _flag_of(model, handling) == condition:
        return []
    body = handling.handler.body
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return None  # `except OverflowError: pass` on one line
    newline = model.source.newline
    start, _ = model.text.span(handling.statement)
    indent = model.source.indentation(model.text.rows(handling.statement)[0])
    first = body.body[0]
    first_start, _ = model.text.span(first)
    inner = model.source.indentation(model.text.rows(first)[0])
    return [Edit(start, start, f"{condition} = True{newline}{indent}"), Edit(first_start, first_start, f"{condition} = False{newline}{inner}")]


def step_helper(model: ModuleModel, update: Event) -> Optional[Event]:
    """The scaler step inside a function of this module that `update` calls, when that function can
    return whether it committed: one unconditional `scaler.step(optimizer)` in its body, no loop, no
    `return` or `yield` of its own. (A helper in another module would be a second file to edit.)"""
    if not isinstance(update.node, cst.Call):
        return None
    helper = model.roles.callee(update.node.func, update.site.scope)
    if helper is None or not isinstance(helper.node, cst.FunctionDef):
        return None
    steps = [e for e in model.of_kind(SKIPPABLE_STEP) if e.site.scope is helper]
    if len(steps) != 1 or steps[0].strategy != SCALER or steps[0].gate_var or steps[0].site.guards or len(steps[0].site.trail) != 1:
        return None
    if any(isinstance(node, (cst.Return, cst.Yield)) for node in walk_expressions(helper.node.body)):
        return None
    return steps[0]


def _module_names(model: ModuleModel) -> set:
    def compute() -> set:
        names = set()
        for scope in model.structure.scopes:
            names |= scope.local_names
        return names | set(model.imports.names)

    return model.remember(("module_names",), compute)


def gate_fix(
    model: ModuleModel, update: Event, target: Event, title: str, applicability: str, fix_gate: str, through: int = 0
) -> Optional[Fix]:
    """Run `target` (and the `through` statements after it in its block) only when `update`
    committed: rewrite the update to keep its result if needed, add the helper once, and put the
    statements under `if <gate>:`."""
    condition = gate_condition(model, update)
    statement = lone_statement(model, target.site)
    if condition is None or statement is None or update.strategy == LOSS_SCALER:
        return None
    if {id(update.node), id(target.node)} & model.in_group_loop:
        return None  # several optimizers or schedulers: one commit flag cannot gate them all
    block, _ = target.site.trail[-1]
    index = block.index(statement)
    run = list(block.statements[index : index + 1 + through])
    rows = _indentable_rows(model, run)
    if rows is None:
        return None
    if update.strategy == OVERFLOW_ERROR:
        edits = _overflow_flag_edits(model, update, target, condition)
    else:
        edits = committed_update_edits(model, update, condition, fix_gate)
    if edits is None:
        return None
    edits += _init_edits(model, update, target, condition)
    start, _ = model.text.span(statement.body[0])
    previous = block.statements[index - 1] if index else None
    if (
        isinstance(previous, cst.If) and previous.orelse is None and isinstance(previous.body, cst.IndentedBlock)
        and model.text.of(previous.test).strip() == condition
    ):
        unit = _indent_unit(model, previous)  # join the gate just above
        edits.append(Edit(start, start, unit))
    else:
        indent = model.source.indentation(model.text.rows(statement)[0])
        unit = model.module.default_indent
        edits.append(Edit(start, start, f"if {condition}:{model.source.newline}{indent}{unit}"))
    for row in rows[1:]:
        offset = model.source.line_starts[row - 1]
        edits.append(Edit(offset, offset, unit))
    if update.strategy == "deepspeed":
        applicability = UNSAFE  # fp16 DeepSpeed needs a GPU: no runtime test here proves `was_step_applied()`
    return Fix(title, applicability, tuple(edits), group=f"gate@{model.text.span(update.node)[0]}", gate=condition)


def _indentable_rows(model: ModuleModel, run: List[cst.BaseStatement]) -> Optional[List[int]]:
    """The non-blank rows of statements that move one level in, or None when a string literal
    spans lines (indenting its inner lines would change its value)."""
    first, _ = model.text.rows(run[0])
    _, last = model.text.rows(run[-1])
    if len(run) > 1 and any(
        isinstance(sub, (cst.SimpleString, cst.FormattedString)) and "\n" in model.text.of(sub)
        for statement in run
        for sub in walk_expressions(statement)
    ):
        return None
    return [row for row in range(first, last + 1) if model.source.line(row).strip()]


def committed_update_edits(model: ModuleModel, update: Event, condition: str, fix_gate: str) -> Optional[List[Edit]]:
    """For plain PyTorch: `committed = committed_step(scaler, optimizer)` and the helper, once."""
    if update.strategy == CALL and not update.gate_var:
        return _commit_through_helper(model, update, condition, fix_gate)
    if update.strategy != SCALER or update.gate_var:
        return []
    if not is_grad_scaler(model, update.subject, update.site.scope):
        return None  # committed_step calls is_enabled(), step() and reads the found-inf record: a GradScaler's
    statement = lone_statement(model, update.site)
    if statement is None or not isinstance(statement.body[0], cst.Expr) or statement.body[0].value is not update.node:
        return None
    call = update.node
    if not isinstance(call, cst.Call) or len(call.args) != 1:
        return None  # further arguments go to optimizer.step(), and committed_step does not pass them on
    # Rewrite `scaler.step(` only: the argument, and any comment around it, stay as they are.
    start, _ = model.text.span(call)
    after = model.source.text.index("(", model.text.span(call.func)[1]) + 1
    space = "" if model.source.text[after : after + 1] in (" ", "\t", "\r", "\n", "#") else " "
    edits = [Edit(start, after, f"{condition} = {COMMITTED_STEP}({model.text.of(update.subject)},{space}")]
    helper = helper_edit(model, fix_gate)
    if helper is not None:
        edits.append(helper)
    return edits


def _commit_through_helper(model: ModuleModel, update: Event, condition: str, fix_gate: str) -> Optional[List[Edit]]:
    """A helper that steps becomes the commit signal: inside it `committed = committed_step(...)`
    and `return committed`; at the call `committed = helper(...)`."""
    step = step_helper(model, update)
    call = lone_statement(model, update.site)
    if step is None or call is None or not isinstance(call.body[0], cst.Expr) or call.body[0].value is not update.node:
        return None
    inside = committed_update_edits(model, step, condition, fix_gate)
    last = step.site.scope.node.body.body[-1]
    end = after_statement(model, last)
    if inside is None or end is None:
        return None
    indent = model.source.indentation(model.text.rows(step.site.statement)[0])
    start, _ = model.text.span(update.node)
    return inside + [Edit(end, end, f"{indent}return {condition}{model.source.newline}"), Edit(start, start, f"{condition} = ")]


def _init_edits(model: ModuleModel, update: Event, target: Event, condition: str) -> List[Edit]:
    """`committed = True` before the branch that holds the update when the target runs without it
    (`if use_amp: scaler.step(opt) else: opt.step()` and then `scheduler.step()`)."""
    if update.strategy != SCALER:
        return []
    for depth, ((block_u, stmt_u), (block_t, stmt_t)) in enumerate(zip(update.site.trail, target.site.trail)):
        if block_u is not block_t:
            return []
        if stmt_u is not stmt_t:
            break
    else:
        return []
    if all(isinstance(s, cst.With) for _, s in update.site.trail[depth:-1]):
        return []  # the update runs whenever the target does
    index = block_u.index(stmt_u)
    previous = block_u.statements[index - 1] if index else None
    init = f"{condition} = True"
    if isinstance(previous, cst.SimpleStatementLine) and model.text.of(previous.body[0]).strip() == init:
        return []
    start, _ = model.text.span(stmt_u)
    indent = model.source.indentation(model.text.rows(stmt_u)[0])
    return [Edit(start, start, f"{init}{model.source.newline}{indent}")]


def helper_edit(model: ModuleModel, fix_gate: str, name: str = COMMITTED_STEP) -> Optional[Edit]:
    """Add a steplint.runtime helper to the module once: its source after the imports, or an import."""
    if name in model.helpers:
        return None
    return model.remember(("helper_edit", fix_gate, name), lambda: _helper_edit(model, fix_gate, name))


def _helper_edit(model: ModuleModel, fix_gate: str, name: str) -> Optional[Edit]:
    newline = model.source.newline
    body = list(model.module.body)
    index = 1 if body and _is_docstring(body[0]) else 0
    while index < len(body) and _is_import(body[index]) and not (index and starts_cell(body[index])):
        index += 1  # (in a notebook, the helper goes in the first code cell, after its imports)
    if fix_gate == IMPORT:
        text = f"from steplint.runtime import {name}{newline}"
    else:
        text = _runtime_source(name).replace("\n", newline)
    if index > 0:  # after the docstring and imports
        offset = after_statement(model, body[index - 1])
        if offset is None:
            return Edit(len(model.source.text), len(model.source.text), newline * (3 - (fix_gate == IMPORT) * 2) + text)
        if fix_gate == IMPORT:
            return Edit(offset, offset, text)
        following = model.text.rows(body[index])[0] if index < len(body) else None
        blanks = _blank_lines_before(model, following) if following else 2
        return Edit(offset, offset, newline * 2 + text + newline * max(0, 2 - blanks))
    if not body:
        return None
    offset, _ = model.text.span(body[0])  # after a shebang or header comments
    return Edit(offset, offset, text + (newline * 2 if fix_gate != IMPORT else newline))


@lru_cache(maxsize=None)
def _runtime_source(name: str) -> str:
    return inspect.getsource(getattr(runtime, name))


def _blank_lines_before(model: ModuleModel, row: int) -> int:
    count = 0
    while row - count - 1 >= 1 and not model.source.line(row - count - 1).strip():
        count += 1
    return count


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _is_import(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body)


def move_into_window(model: ModuleModel, event: Event, boundary, title: str, applicability: str) -> Optional[Fix]:
    """Move a statement to the end of the `if <window boundary>:` block beside it."""
    statement = lone_statement(model, event.site)
    window = boundary.statement
    block, _ = event.site.trail[-1]
    if statement is None or boundary.early_exit or boundary.negated or window not in block.statements:
        return None
    body = window.body.body
    index = block.index(window)
    following = block.statements[index + 1] if index + 1 < len(block.statements) else None
    if following is statement and window.orelse is None:
        start, _ = model.text.span(statement.body[0])
        return Fix(title, applicability, (Edit(start, start, window.body.indent or model.module.default_indent),))
    offset = after_statement(model, body[-1])
    if offset is None:
        return None
    indent = model.source.indentation(model.text.rows(body[-1])[0])
    return Fix(title, applicability, tuple(move_to(model, statement, offset, indent)))


def insert_before(model: ModuleModel, site: Site, line: str) -> Optional[Edit]:
    """A new line, at the statement's indentation, just before it."""
    statement = lone_statement(model, site)
    if statement is None:
        return None
    start, _ = model.text.span(statement.body[0])
    indent = model.source.indentation(model.text.rows(statement)[0])
    return Edit(start, start, f"{line}{model.source.newline}{indent}")


def insert_after(model: ModuleModel, site: Site, line: str) -> Optional[Edit]:
    """A new line, at the statement's indentation, just after it."""
    statement = lone_statement(model, site)
    offset = after_statement(model, statement) if statement is not None else None
    if offset is None:
        return None
    indent = model.source.indentation(model.text.rows(statement)[0])
    return Edit(offset, offset, f"{indent}{line}{model.source.newline}")


def move_before(model: ModuleModel, statements: List[cst.SimpleStatementLine], anchor: cst.SimpleStatementLine) -> List[Edit]:
    """Edits that move consecutive lone statements, in order, to just before `anchor`, at its indentation."""
    start, _ = _line_block(model, statements[0])
    _, end = _line_block(model, statements[-1])
    offset, _ = _line_block(model, anchor)
    indent = model.source.indentation(model.text.rows(anchor)[0])
    return [Edit(start, end, ""), Edit(offset, offset, "".join(_reindented(model, s, indent) for s in statements))]
