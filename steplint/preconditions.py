"""Preconditions every fix must meet, checked mechanically on the text the fix would write
(DESIGN.md §6). The rewrite layer drops a fix that fails one (`rewrite.vetted`), and
benchmarks/fix_preconditions.py checks every fix a corpus produces with the same functions.

- **Binding**: every name the inserted text reads is bound on every path to it (a name the replaced
  text already read at that place is the original's business), and an object whose state the fix
  restores (`x.load_state_dict(...)`) is not built again after the restore.
- **Committed-path equivalence**: for a gating fix, with every update committed (its gate true), the
  fixed module is the original one: same statements, same order, same branches.

Python's own parser is used (not LibCST): it is fast, and these checks read only the tree's shape.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterator, List, Optional, Sequence, Set, Tuple

from steplint.fixes import Edit, Fix, apply_edits, normalized
from steplint.source import RUNNING_PYTHON

COMMITTED_STEP = "committed_step"
RUNTIME_MODULE = "steplint.runtime"
_IDENTIFIER_CHAIN = re.compile(r"[A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*")
_ANYTHING = None  # the "bound set" of unreachable code: every name counts as bound there


@dataclass(frozen=True)
class Unfixed:
    """The text before any fix, parsed once per file: its tree, its rows, the rows of each top-level
    statement (decorators included), which a fix's edits touch or leave as they are, and what each
    of those does with every update committed, by gate (filled as gates are checked)."""

    tree: Optional[ast.Module]
    line_starts: Tuple[int, ...]
    firsts: Tuple[int, ...]
    lasts: Tuple[int, ...]
    committed: Dict[Tuple[str, Optional[str]], Dict[int, List[str]]] = field(default_factory=dict, compare=False)

    def row(self, offset: int) -> int:
        return bisect_right(self.line_starts, offset)

    def span(self, first: int, last: int, length: int) -> Tuple[int, int]:
        """Offsets of rows first..last, their line breaks included."""
        return self.line_starts[first - 1], self.line_starts[last] if last < len(self.line_starts) else length


def unfixed(text: str, tree: Optional[ast.Module] = None) -> Unfixed:
    """The facts of a text every check of its fixes reads (`tree`: Python's parse of it, when made);
    compute them once per file."""
    starts = _line_starts(text)
    try:
        tree = tree or ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return Unfixed(None, starts, (), ())
    firsts = tuple(min([s.lineno] + [d.lineno for d in getattr(s, "decorator_list", [])]) for s in tree.body)
    return Unfixed(tree, starts, firsts, tuple(s.end_lineno or s.lineno for s in tree.body))


def _line_starts(text: str) -> Tuple[int, ...]:
    return (0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", text)))


@dataclass(frozen=True)
class _Region:
    """Rows of the fixed text parsed again: whole top-level statements and the lines between them."""

    first_row: int
    start: int
    text: str
    line_starts: Tuple[int, ...]


@dataclass(frozen=True)
class Edited:
    """The module a fix writes, and where its inserted text lies in it. Its tree holds the top-level
    statements the edits touch parsed again, and the others as the original's tree has them
    (`copied`), with their original positions: no inserted text lies in those, and no check looks at
    them but to follow the bindings of the module's own statements."""

    tree: ast.Module
    copied: FrozenSet[int]  # id() of each top-level statement taken from the original's tree
    regions: Tuple[_Region, ...]
    first_rows: Tuple[int, ...]
    inserted: Tuple[Tuple[int, int, FrozenSet[str]], ...]  # (start, end, names the replaced text read)
    original: str
    shifts: Tuple[Tuple[int, int], ...]  # (end of an edit in the new text, how much longer the text is from there on)

    def original_row(self, node: ast.AST) -> int:
        """The row, in the text before the fix, of a node the fix did not insert."""
        offset = self.offset(node)
        offset -= next((shift for end, shift in reversed(self.shifts) if end <= offset), 0)
        return self.original.count("\n" if "\n" in self.original else "\r", 0, offset) + 1

    def offset(self, node: ast.AST) -> int:
        """The offset in the fixed text of a node in a region parsed again."""
        region = self.regions[bisect_right(self.first_rows, node.lineno) - 1]
        row, starts = node.lineno - region.first_row, region.line_starts
        line = region.text[starts[row] : starts[row + 1] if row + 1 < len(starts) else len(region.text)]
        return region.start + starts[row] + len(line.encode("utf-8")[: node.col_offset].decode("utf-8", "replace"))

    def inserted_at(self, node: ast.AST) -> Optional[FrozenSet[str]]:
        """For a node inside inserted text: the names the text it replaced read; else None."""
        offset = self.offset(node)
        for start, end, replaced in self.inserted:
            if start <= offset < end:
                return replaced
        return None


def edited(text: str, edits: Sequence[Edit], original: Unfixed) -> Optional[Edited]:
    """The fixed module. Only the top-level statements the edits touch are parsed again, so that
    checking every fix of a file costs in proportion to the file, not to the file times its fixes;
    when those do not parse on their own, the whole fixed text is parsed, as its own verdict."""
    ordered = normalized(edits)
    if ordered is None:
        return None
    whole = [(1, len(original.line_starts))]
    if original.tree is not None:
        result = _parsed(text, original, ordered, _touched_rows(original, ordered))
        if result is not None:
            return result
    return _parsed(text, original, ordered, whole)


def _touched_rows(original: Unfixed, ordered: Sequence[Edit]) -> List[Tuple[int, int]]:
    """(first, last) original rows around each edit, grown to whole top-level statements, merged."""
    merged: List[Tuple[int, int]] = []
    for edit in ordered:
        first, last = original.row(edit.start), original.row(edit.end)
        while True:
            i, k = bisect_left(original.lasts, first), bisect_right(original.firsts, last)
            grown = (min(first, original.firsts[i]), max(last, original.lasts[k - 1])) if i < k else (first, last)
            if grown == (first, last):
                break
            first, last = grown
        while merged and first <= merged[-1][1]:
            first = min(first, merged[-1][0])
            last = max(last, merged.pop()[1])
        merged.append((first, last))
    return merged


def _parsed(text: str, original: Unfixed, ordered: Sequence[Edit], rows: Sequence[Tuple[int, int]]) -> Optional[Edited]:
    """The fixed module with the given original rows (whole top-level statements) parsed again;
    None when one of them does not parse on its own."""
    inserted, shifts, shift = [], [], 0
    for edit in ordered:
        start = edit.start + shift
        replaced = frozenset(_chains(text[edit.start : edit.end]))
        inserted.append((start, start + len(edit.content), replaced))
        shift += len(edit.content) - (edit.end - edit.start)
        shifts.append((start + len(edit.content), shift))
    kept = original.tree.body if original.tree is not None else []
    body: List[ast.stmt] = []
    copied: Set[int] = set()
    regions: List[_Region] = []
    added_rows = added_length = copied_to = 0
    for first, last in rows:
        start, end = original.span(first, last, len(text))
        inside = [Edit(e.start - start, e.end - start, e.content) for e in ordered if start <= e.start < end or e.start == end == len(text)]
        region_text = apply_edits(text[start:end], inside)
        try:
            region_tree = ast.parse(region_text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        starts = _line_starts(region_text)
        ast.increment_lineno(region_tree, first + added_rows - 1)
        regions.append(_Region(first + added_rows, start + added_length, region_text, starts))
        if original.tree is not None:
            before = kept[copied_to : bisect_left(original.lasts, first)]
            body += before
            copied.update(id(s) for s in before)
            copied_to = bisect_right(original.firsts, last)
        body += region_tree.body
        added_rows += len(starts) - len(_line_starts(text[start:end]))
        added_length += len(region_text) - (end - start)
    body += kept[copied_to:]
    copied.update(id(s) for s in kept[copied_to:])
    return Edited(
        ast.Module(body=body, type_ignores=[]), frozenset(copied), tuple(regions), tuple(r.first_row for r in regions),
        tuple(inserted), text, tuple(shifts),
    )


def _chains(text: str) -> Iterator[str]:
    """`self.scaler.step` -> `self`, `self.scaler`, `self.scaler.step`: what a text reads."""
    for chain in _IDENTIFIER_CHAIN.findall(text):
        parts = [p.strip() for p in chain.split(".")]
        for end in range(1, len(parts) + 1):
            yield ".".join(parts[:end])


def violations(text: str, fix: Fix, original: Optional[Unfixed] = None) -> List[str]:
    """What keeps the fix from being offered, in words for the diagnostic; empty when nothing does."""
    original = original or unfixed(text)
    if original.tree is None:
        return [f"Python {RUNNING_PYTHON}, which runs steplint, cannot parse the module to check the fix; Python 3.12 or later can"]
    result = edited(text, fix.edits, original)
    if result is None:
        return ["the fixed module would not parse"]
    unbound = {name for name, _ in unbound_reads(result)}
    found = [f"`{name}` may not exist yet where the fix would read it" for name in sorted(unbound)]
    rebuilt = {}
    for name, row in overwritten_restores(result):
        rebuilt.setdefault(name, row)
    found += [f"`{name}` is built again at line {row}, after the fix would restore it" for name, row in sorted(rebuilt.items()) if name not in unbound]
    if fix.gate is not None:
        found += [f"`{name}` would be set only when the update commits, and is read where it may then not exist"
                  for name in bound_only_under_the_gate(result, fix.gate)]
    if fix.gate is not None and committed_path_differs(text, original, result, fix.gate):
        found.append("with every update committed, the fixed code would not do what the original does")
    return found


# -- binding -------------------------------------------------------------------------------------


def unbound_reads(result: Edited) -> List[Tuple[str, int]]:
    """(name, row) of each read in inserted text of a local name, or of `self.attr`, that may be unbound."""
    found: List[Tuple[str, int]] = []
    for scope, cls in _scopes(result):
        flow = _Flow(result, _local_names(scope), _self_name(scope) if cls is not None else None, _class_attributes(cls, scope), found)
        start = set(_parameters(scope)) if not isinstance(scope, ast.Module) else set()
        flow.block(_body(scope), frozenset(start))
    return found


def _scopes(result: Edited) -> Iterator[Tuple[ast.AST, Optional[ast.ClassDef]]]:
    """Each scope with its statements: the module, and every function (with its class, for a method)
    in the statements parsed again (those the original has as they are hold no inserted text)."""
    yield result.tree, None

    def walk(node: ast.AST, cls: Optional[ast.ClassDef]) -> Iterator[Tuple[ast.AST, Optional[ast.ClassDef]]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield child, cls
                yield from walk(child, None)
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, child)
            else:
                yield from walk(child, cls if not isinstance(child, ast.Lambda) else None)

    for statement in result.tree.body:
        if id(statement) not in result.copied:
            yield from walk(ast.Module(body=[statement], type_ignores=[]), None)


def _body(scope: ast.AST) -> List[ast.stmt]:
    return list(scope.body)  # type: ignore[attr-defined]


def _parameters(function: ast.AST) -> List[str]:
    args = function.args  # type: ignore[attr-defined]
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return names


def _self_name(function: ast.AST) -> Optional[str]:
    parameters = _parameters(function)
    decorators = {getattr(d, "id", None) for d in function.decorator_list}  # type: ignore[attr-defined]
    return parameters[0] if parameters and not decorators & {"staticmethod", "classmethod"} else None


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a scope, not those of the functions, classes and lambdas inside it."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _local_names(scope: ast.AST) -> Set[str]:
    names: Set[str] = set(_parameters(scope)) if not isinstance(scope, ast.Module) else set()
    declared: Set[str] = set()
    for node in _own_nodes(scope):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
    return names - declared


def _class_attributes(cls: Optional[ast.ClassDef], method: ast.AST) -> FrozenSet[str]:
    """`self.x` names bound before any other method runs: in the class body, or on every path of
    `__init__` (for a method other than `__init__` itself)."""
    if cls is None:
        return frozenset()
    names = {f"self.{t.id}" for s in cls.body if isinstance(s, (ast.Assign, ast.AnnAssign)) for t in _targets(s) if isinstance(t, ast.Name)}
    if cls.bases:  # what the class never assigns comes from a base class (its `__init__`, as far as we can tell)
        names |= {f"self.{n.attr}" for n in ast.walk(cls) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)} - _assigned_attributes(cls)
    init = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
    if init is not None and init is not method:
        after = _Flow(None, _local_names(init), _self_name(init), frozenset(), []).block(list(init.body), frozenset(_parameters(init)))
        if after is not _ANYTHING:
            names |= {n for n in after if n.startswith("self.")}
    return frozenset(names)


def _assigned_attributes(cls: ast.ClassDef) -> Set[str]:
    """`self.x` of every `x` a method of the class assigns."""
    found = set()
    for method in cls.body:
        if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self_name = _self_name(method)
            for node in _own_nodes(method):
                if isinstance(node, ast.stmt):
                    for target in _targets(node):
                        found |= {n for n in _bound_by(target, self_name) if n.startswith("self.")}
    return found


def _targets(statement: ast.stmt) -> List[ast.expr]:
    if isinstance(statement, ast.Assign):
        return list(statement.targets)
    if isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
        return [statement.target]
    return []


def _bound_by(target: ast.AST, self_name: Optional[str]) -> Set[str]:
    names = set()
    for node in ast.walk(target):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name) and node.value.id == self_name:
            names.add(f"self.{node.attr}")
    return names


def _meet(a, b):
    if a is _ANYTHING:
        return b
    if b is _ANYTHING:
        return a
    return a & b


class _Flow:
    """Definite binding through a scope's statements, in program order (loops may run zero times,
    a branch that exits binds everything for what follows it). Reads in inserted text are checked."""

    def __init__(self, result: Optional[Edited], local: Set[str], self_name: Optional[str], attributes: FrozenSet[str], found: list) -> None:
        self.result, self.local, self.self_name, self.attributes, self.found = result, local, self_name, attributes, found

    def block(self, statements: Sequence[ast.stmt], bound):
        for statement in statements:
            if bound is _ANYTHING:
                return _ANYTHING
            bound = self._following(statement).statement(statement, bound)
        return bound

    def _following(self, statement: ast.stmt) -> "_Flow":
        """The flow for a statement: without checks in a top-level statement the fix left as it was
        (it holds no inserted text, and its positions are the original's)."""
        if self.result is None or id(statement) not in self.result.copied:
            return self
        return _Flow(None, self.local, self.self_name, self.attributes, self.found)

    def statement(self, s: ast.stmt, bound):  # noqa: C901 (one case per statement kind)
        if isinstance(s, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
            self.reads(s, bound)
            return _ANYTHING
        if isinstance(s, ast.If):
            bound = bound | self.reads(s.test, bound)
            return _meet(self.block(s.body, bound), self.block(s.orelse, bound))
        if isinstance(s, (ast.For, ast.AsyncFor)):
            bound = bound | self.reads(s.iter, bound)
            self.block(s.body, bound | _bound_by(s.target, self.self_name))
            self.block(s.orelse, bound)
            return bound
        if isinstance(s, ast.While):
            bound = bound | self.reads(s.test, bound)
            self.block(s.body, bound)
            self.block(s.orelse, bound)
            return bound
        if isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                bound = bound | self.reads(item.context_expr, bound)
                if item.optional_vars is not None:
                    bound = bound | _bound_by(item.optional_vars, self.self_name)
            return self.block(s.body, bound)
        if isinstance(s, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            after = self.block(s.orelse, self.block(s.body, bound))
            for handler in s.handlers:
                if handler.type is not None:
                    self.reads(handler.type, bound)
                after = _meet(after, self.block(handler.body, bound | ({handler.name} if handler.name else set())))
            self.block(s.finalbody, bound)
            return after
        if isinstance(s, ast.Match):
            bound = bound | self.reads(s.subject, bound)
            for case in s.cases:
                self.block(case.body, bound | {n.name for n in ast.walk(case.pattern) if isinstance(getattr(n, "name", None), str)})
            return bound
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator in s.decorator_list:
                self.reads(decorator, bound)
            return bound | {s.name}
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            return bound | {(a.asname or a.name).split(".")[0] for a in s.names}
        if isinstance(s, ast.Delete):
            self.reads(s, bound)
            return bound - {n.id for n in ast.walk(s) if isinstance(n, ast.Name)}
        added = self.reads(s, bound)
        for target in _targets(s):
            if not (isinstance(s, ast.AnnAssign) and s.value is None):
                added |= _bound_by(target, self.self_name)
        return bound | added

    def reads(self, node: ast.AST, bound) -> Set[str]:
        """Check the reads in an expression (or a simple statement); returns the names it binds (walrus)."""
        inner = set()  # names bound inside the expression: comprehension targets, lambda parameters
        for sub in ast.walk(node):
            if isinstance(sub, ast.comprehension):
                inner |= {n.id for n in ast.walk(sub.target) if isinstance(n, ast.Name)}
            elif isinstance(sub, ast.Lambda):
                inner |= set(_parameters(sub))
        walrus = {sub.target.id for sub in ast.walk(node) if isinstance(sub, ast.NamedExpr)}
        if self.result is not None and bound is not _ANYTHING:
            for sub in ast.walk(node):
                name = self._read_name(sub)
                if name is None or name in bound or name in inner or name in walrus or name in self.attributes:
                    continue
                if not name.startswith("self.") and name not in self.local:
                    continue  # a global, a builtin or a closure's name
                replaced = self.result.inserted_at(sub)
                if replaced is not None and name not in replaced:
                    self.found.append((name, sub.lineno))
        return walrus

    def _read_name(self, node: ast.AST) -> Optional[str]:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            return node.id
        if (
            isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and self.self_name is not None
            and isinstance(node.value, ast.Name) and node.value.id == self.self_name
        ):
            return f"self.{node.attr}"
        return None


def overwritten_restores(result: Edited) -> List[Tuple[str, int]]:
    """(object, row of the rebuild) for each inserted `x.load_state_dict(...)` whose object is built
    again after it: later in its function, anywhere in a loop around it, or (for `self.x`) in another
    method of its class than `__init__` (in any other method, when the restore is in `__init__`)."""
    found = []
    for scope, cls in _scopes(result):
        if isinstance(scope, ast.Module):
            continue
        self_name = _self_name(scope) if cls is not None else None
        for call in _own_nodes(scope):
            if not (
                isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "load_state_dict"
                and result.inserted_at(call) is not None
            ):
                continue
            name = _object_name(call.func.value, self_name)
            if name is None:
                continue
            loops = [n for n in _own_nodes(scope) if isinstance(n, (ast.For, ast.While)) and n.lineno <= call.lineno <= n.end_lineno]
            for node in _own_nodes(scope):
                rebound = isinstance(node, ast.stmt) and name in set().union(*[_bound_by(t, self_name) for t in _targets(node)] or [set()])
                if rebound and (node.lineno > call.lineno or any(l.lineno <= node.lineno <= l.end_lineno for l in loops)):
                    found.append((name, result.original_row(node)))
            if name.startswith("self.") and cls is not None:
                for method in cls.body:
                    if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or method is scope:
                        continue
                    if method.name == "__init__" and scope.name != "__init__":  # type: ignore[attr-defined]
                        continue
                    other_self = _self_name(method)
                    for node in _own_nodes(method):
                        if isinstance(node, ast.stmt) and any(name in _bound_by(t, other_self) for t in _targets(node)):
                            found.append((name, result.original_row(node)))
    return found


def _object_name(node: ast.AST, self_name: Optional[str]) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == self_name:
        return f"self.{node.attr}"
    return None


def bound_only_under_the_gate(result: Edited, gate: str) -> List[str]:
    """Each local that, in a function the fix edits, only statements under the gate's `if` bind,
    and code outside those blocks reads (`last = warmup.step()` moved under `if committed:`, `print(last)` after
    the loop): the original bound it on every pass, the fixed code only on the committed ones."""
    try:
        condition = ast.dump(ast.parse(gate, mode="eval").body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found: List[str] = []
    for scope, _ in _scopes(result):
        gated: Set[int] = set()  # id() of the nodes under a gate's `if`
        for node in _own_nodes(scope):
            if isinstance(node, ast.If) and ast.dump(node.test) == condition:
                gated.update(id(inner) for statement in node.body for inner in (statement, *_own_nodes(statement)))
        if not gated:
            continue
        stores: Dict[str, bool] = dict.fromkeys(_parameters(scope), True) if not isinstance(scope, ast.Module) else {}  # name -> also bound outside the gates
        reads: Set[str] = set()
        for node in _own_nodes(scope):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                stores[node.id] = stores.get(node.id, False) or id(node) not in gated
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and id(node) not in gated:
                reads.add(node.id)
        found += [name for name, outside in sorted(stores.items()) if not outside and name in reads]
    return found


# -- committed-path equivalence --------------------------------------------------------------------


def committed_path_differs(text: str, original: Unfixed, result: Edited, gate: str) -> bool:
    """Whether, with the gate true, the fixed module differs from the original: both trees with the
    gate's `if` blocks inlined, its `= True` start, its `return` and the helper's definition or
    import removed, and `gate = committed_step(scaler, opt)` read as `scaler.step(opt)`."""
    try:
        condition = ast.dump(ast.parse(gate, mode="eval").body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    if original.tree is None:
        return True
    variable = gate if gate.isidentifier() else None
    before = _original_committed_path(text, original, condition, variable)
    after = _WithEveryUpdateCommitted(condition, variable)
    fixed = [d for s in result.tree.body for d in (before[id(s)] if id(s) in result.copied else after.statement(s))]
    return _module_path([d for s in original.tree.body for d in before[id(s)]], original.tree.body) != _module_path(fixed, result.tree.body)


def _original_committed_path(text: str, original: Unfixed, condition: str, variable: Optional[str]) -> Dict[int, List[str]]:
    """For each top-level statement of the original (by id), what it does with every update
    committed; once per file and gate (on a tree parsed again: the rewriting is done in place)."""
    key = (condition, variable)
    if key not in original.committed:
        rewriter = _WithEveryUpdateCommitted(condition, variable)
        again = ast.parse(text).body
        original.committed[key] = {id(s): rewriter.statement(a) for s, a in zip(original.tree.body, again)}  # type: ignore[union-attr]
    return original.committed[key]


def _module_path(statements: List[str], body: List[ast.stmt]) -> List[str]:
    return statements or ([ast.dump(ast.Pass())] if body else [])  # a module whose statements all go keeps a `pass`


class _WithEveryUpdateCommitted(ast.NodeTransformer):
    """Rewrites statements, in place, into what they do when the gate is true."""

    def __init__(self, condition: str, variable: Optional[str]) -> None:
        self.condition, self.variable = condition, variable

    def statement(self, s: ast.stmt) -> List[str]:
        """The dumps of what a top-level statement becomes."""
        return [ast.dump(c) for c in self._committed(self.visit(s))]

    def generic_visit(self, node):
        super().generic_visit(node)
        for name in ("body", "orelse", "finalbody"):
            statements = getattr(node, name, None)
            if isinstance(statements, list) and statements and isinstance(statements[0], ast.stmt):
                setattr(node, name, [s for statement in statements for s in self._committed(statement)] or [ast.Pass()])
        return node

    def _committed(self, s: ast.stmt) -> List[ast.stmt]:
        condition, variable = self.condition, self.variable
        if isinstance(s, ast.If) and not s.orelse and ast.dump(s.test) == condition:
            return [inner for statement in s.body for inner in self._committed(statement)]
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == COMMITTED_STEP:
            return []
        if isinstance(s, ast.ImportFrom) and s.module == RUNTIME_MODULE:
            kept = [a for a in s.names if a.name != COMMITTED_STEP]
            return [ast.ImportFrom(s.module, kept, s.level)] if kept else []
        if variable is None:
            return [s]
        if isinstance(s, ast.Return) and isinstance(s.value, ast.Name) and s.value.id == variable:
            return []
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) and s.targets[0].id == variable:
            value = s.value
            if isinstance(value, ast.Constant) and value.value in (True, False):
                return []  # the flag's own bookkeeping (False: where an update was dropped)
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == COMMITTED_STEP and value.args:
                scaler, *rest = value.args  # (the optimizer as written: `optimizer=...` stays a keyword)
                return [ast.Expr(ast.Call(ast.Attribute(scaler, "step", ast.Load()), rest, value.keywords))]
            if isinstance(value, ast.Call):
                return [ast.Expr(value)]
        return [s]
