"""Units: what each step counter counts and what each consumer it feeds expects (DESIGN.md §4).

A counter counts batches (micro-batches), windows (attempted updates), committed updates, a data
position (samples, tokens) or epochs. Its unit is inferred from evidence the code shows: a declared
unit (`# steplint: counter=batches` on its increment, or `[tool.steplint.units]`), where it is
incremented and under which gate, arithmetic with a batch size (its product is a data position),
recomputation from the data length (`(epoch - 1) * len(loader)`), what it feeds (`step_batch(n)`),
and its name, which only confirms. A consumer (a schedule, an LR computation, a checkpoint, an
evaluation cadence, the end of the run) expects a unit when the code shows one: `step_batch(n)`
counts batches, a timm scheduler built to count updates counts updates through `step_update(n)`,
a budget computed as `ceil(len(loader) / accum) * epochs` is in updates. Otherwise the consumer
follows its counter: a checkpoint named after a batch index is in batches.

A finding is a unit conflict between a counter and a consumer it feeds: the rules read
`counter_unit` and `conflicting_consumers`, and every premise carries its `Evidence`, which a report
can print.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from typing import Dict, Iterator, List, Optional, Set, Tuple

import libcst as cst

from steplint.model.counters import DATA_SIZE, enumerated
from steplint.model.precision import command_line_default
from steplint.model.roles import SCHEDULER
from steplint.model.events import CHECKPOINT_SAVE, COUNTER_INCREMENT, EARLY_EXIT, EVALUATION, SCHEDULER_STEP, Event
from steplint.model.schedules import assignments, built_from_its_loops_batches, length_argument, loop_iterable, unwrapped
from steplint.model.structure import Site
from steplint.model.syntax import assignment_targets, conjuncts, dotted, last_name, walk_expressions
from steplint.suppress import DECLARED_UNITS, intent_basis

BATCHES = "batches"  # one per item of the data loader (a micro-batch under accumulation)
WINDOWS = "windows"  # one per attempted update
UPDATES = "updates"  # one per committed update
DATA = "data"  # samples or tokens: where the data stands
EPOCHS = "epochs"
RUNS = "runs"  # the runs of the block it gates (saves made on a timer): no step at all
STREAK = "streak"  # events in a row (evaluations without improvement): set back inside the loop that advances it
UNKNOWN = "unknown"

# Each unit in words, for messages.
UNIT_WORDS = {
    BATCHES: "batches", WINDOWS: "attempted updates", UPDATES: "committed updates", DATA: "samples or tokens", EPOCHS: "epochs",
    RUNS: "the runs of the block it gates", STREAK: "events in a row", UNKNOWN: "an unknown unit",
}
# What `# steplint: counter=...` and `[tool.steplint.units]` accept, and the unit each means.
DECLARED = dict(zip(DECLARED_UNITS, (BATCHES, DATA, DATA, UPDATES, EPOCHS)))
# Units a counter has by design when it counts what the data loader gives: skipped updates consumed their data too.
DATA_UNITS = (BATCHES, DATA, EPOCHS)

_COUNTER_DECLARATION = re.compile(r"#\s*steplint:\s*counter\s*=\s*(?P<unit>[a-z]+)")
# Names that say a batch index or a data position: confirmation only, never alone against a gate.
_DATA_NAME = re.compile(r"batch_?(idx|index|id|no|num|count|nb)|^(n_?|num_)?batches|nimg|kimg|tokens?_(seen|consumed)|samples?_(seen|consumed)|^(n_?|num_)?samples$", re.I)
_BASIS_UNITS = {"batches": BATCHES, "tokens": DATA, "epochs": EPOCHS, "committed-updates": UPDATES}


@dataclass(frozen=True)
class Evidence:
    """One premise and what the code shows for it: `unit` at `node`, because `why`."""

    unit: str
    node: cst.CSTNode
    why: str
    name_only: bool = False  # from a name: confirms, never decides against other evidence


@dataclass(frozen=True)
class CounterUnit:
    unit: str
    evidence: Tuple[Evidence, ...]
    declared: bool = False

    @property
    def by_design(self) -> bool:
        """Counts what the data loader gives (batches, samples, epochs), shown by the code or declared:
        consumers that follow it are in that unit too, and skipped updates are counted on purpose."""
        return self.unit in DATA_UNITS + (RUNS, STREAK) and bool(self.evidence)

    @property
    def shown_by(self) -> Optional[Evidence]:
        return self.evidence[0] if self.evidence else None


@dataclass(frozen=True)
class Consumer:
    """A place that reads a counter: `label` is schedule, lr, checkpoint, eval or stop; `unit` is None
    when the consumer follows its counter's unit (a name, a cadence), else what the code shows it expects."""

    label: str
    node: cst.CSTNode
    unit: Optional[str]
    evidence: Optional[Evidence]
    keys: frozenset  # the keys it reads
    scope: object  # the Scope it reads them in


class Units:
    """The units facet (`model.units`): the unit of each counter and of each consumer, computed once
    per module (per counter, on first use) and read by SL102, SL301 and SL304."""

    def __init__(self, model):
        self.model = model

    @cached_property
    def consumers(self) -> Dict[str, List[Consumer]]:
        """Key -> the consumers that read it (schedule, lr, checkpoint, eval, stop), with their units."""
        return _consumers(self.model)

    @cached_property
    def batch_keyed(self) -> Dict[str, List[Evidence]]:
        """Key -> evidence that it steps a schedule laid out in batches (`step_batch(key)`)."""
        return _batch_keyed(self.model)

    @cached_property
    def increments(self) -> Dict[str, List[Event]]:
        """Counter key -> its increments, in program order."""
        found: Dict[str, List[Event]] = defaultdict(list)
        for increment in self.model.of_kind(COUNTER_INCREMENT):
            key = self.model.roles.key(increment.subject, increment.site.scope)
            if key is not None:
                found[key].append(increment)
        return found

    @cached_property
    def enumerate_indices(self) -> Dict[str, cst.Call]:
        """Keys of `i` in `for i, batch in enumerate(loader)` -> the `enumerate(...)` call."""
        return _enumerate_indices(self.model)

    @cached_property
    def data_offsets(self) -> Dict[str, List[Evidence]]:
        """Counter key -> evidence that it locates the data: its remainder starts a loop
        (`start_it = it % per_epoch`, then `for i in range(start_it, per_epoch)`), so a resumed run
        continues the epoch's batches where the counter says."""
        return _data_offsets(self.model)

    @cached_property
    def data_products(self) -> Set[str]:
        """Keys assigned a product with a batch or sequence size (`images_seen = n * batch_size`)."""
        return _data_products(self.model)

    def counter_unit(self, increment: Event) -> CounterUnit:
        """The unit of the counter `increment` advances, from all its increments and uses in the module."""
        return self.unit_of_key(self.model.roles.key(increment.subject, increment.site.scope))

    def unit_of_key(self, key: Optional[str]) -> CounterUnit:
        """The unit of a counter or of a loop's batch index (`i` of `enumerate(loader)`), by its key."""
        if key is None:
            return CounterUnit(UNKNOWN, ())
        if key in self.enumerate_indices:
            return self.model.remember(("index unit", key), lambda: _index_unit(self.model, key))
        return self.model.remember(("counter unit", key), lambda: _counter_unit(self.model, key))

    def consumer_at(self, node: cst.CSTNode) -> Optional[Consumer]:
        """The consumer whose test or call is `node` (a cadence's test), with the unit it expects."""
        return self._by_node.get(id(node))

    @cached_property
    def _by_node(self) -> Dict[int, Consumer]:
        return {id(c.node): c for found in self.consumers.values() for c in found}

    def consumers_of(self, increment: Event) -> List[Consumer]:
        """The consumers that read the counter or a name computed from it, each with the unit it expects."""
        seen, found = set(), []
        for key in self.model.counters.derived_keys(increment):
            for consumer in self.consumers.get(key, ()):
                if id(consumer) not in seen:
                    seen.add(id(consumer))
                    found.append(consumer)
        return found

    def reads_only_data_position(self, consumer: Consumer, increment: Event) -> bool:
        """The consumer reads the counter only through a product with a batch or sequence size, or through
        a name that holds such a product (`images_seen = batches * batch_size * world_size`)."""
        derived = self.model.counters.derived_keys(increment)
        read = consumer.keys & derived
        return bool(read) and all(k in self.data_products for k in read) or _inside_products(self.model, consumer, derived)

    def conflicting_consumers(self, increment: Event, unit: CounterUnit) -> List[Consumer]:
        """Consumers the counter feeds that expect committed updates while the code shows that it counts
        something else (batches, attempted updates, data): the unit conflicts to report."""
        if unit.unit == UPDATES:
            return []
        return [c for c in self.consumers_of(increment) if c.unit == UPDATES and not self.reads_only_data_position(c, increment)]

    def counts_in_other_units(self, increment: Event, consumer: Consumer, unit: CounterUnit) -> bool:
        """The consumer expects, by what the code shows, a unit of the data (batches, samples, epochs), or
        reads the counter only as a data position: a counter that counts attempts is right for it (a
        counter of windows is not right for a consumer sized in batches)."""
        if consumer.unit == BATCHES and unit.unit == WINDOWS:
            return False
        return consumer.unit in DATA_UNITS or self.reads_only_data_position(consumer, increment)

    def all_in_other_units(self, increment: Event, unit: CounterUnit, consumers: List[Consumer]) -> bool:
        """There are such consumers, and each one counts in other units than attempts (counts_in_other_units)."""
        return bool(consumers) and all(self.counts_in_other_units(increment, c, unit) for c in consumers)

    @staticmethod
    def describe(unit: CounterUnit) -> str:
        """The evidence for a counter's unit, for a message: `counts batches (set to ...; named ...)`."""
        reasons = "; ".join(e.why for e in unit.evidence[:2])
        return f"counts {UNIT_WORDS[unit.unit]}" + (f" ({reasons})" if reasons else "")


# -- counters ------------------------------------------------------------------------------------


def _counter_unit(model, key: str) -> CounterUnit:
    increments = model.units.increments.get(key, [])
    declared = _declared(model, key, increments)
    if declared is not None:
        return CounterUnit(declared.unit, (declared,), declared=True)
    retried = model.counters.retry_counters.get(key)
    if retried is not None:
        return CounterUnit(RUNS, (Evidence(RUNS, retried.node, f"advanced only when the `try` in `{model.text.of(retried.site.loop.test)}` fails: it counts retries"),))
    if increments and key in model.counters.reset_in_their_loop:
        return CounterUnit(STREAK, (Evidence(STREAK, increments[0].node, "set back inside the loop that advances it: it starts over by itself"),))
    found: List[Evidence] = [e for e in map(lambda i: _own_test(model, key, i), increments) if e is not None]
    if increments and len(found) == len(increments):
        return CounterUnit(RUNS, tuple(found[:1]))
    found = []
    for increment in increments:
        update = model.passes.attempt_for(increment, before_only=False)
        if model.guards.gated(increment.site, update):
            found.append(Evidence(UPDATES, increment.node, "advanced under a commit gate"))
        elif model.windows.boundary(increment.site) is not None:
            found.append(Evidence(WINDOWS, increment.node, f"advanced once per window (`{model.text.of(model.windows.boundary(increment.site).test)}`)"))
        elif update is not None and update.order > increment.order:
            found.append(Evidence(BATCHES, increment.node, "advanced at the start of each batch, before the update is attempted"))
    scope = increments[0].site.scope if increments else None
    if scope is not None:
        found.extend(_recomputed(model, key, scope))
        if key in model.units.data_products or key in model.counters.data_positions:
            found.append(Evidence(BATCHES, increments[0].node, "multiplied by a batch size: its product is where the data stands"))
        found.extend(model.units.batch_keyed.get(key, ()))
        found.extend(model.units.data_offsets.get(key, ()))
        found.extend(_position_by_length(model, key, scope))
        found.extend(_added_to_whole_passes(model, key, scope))
        found.extend(e for e in (_replays(model, key, i) for i in increments) if e is not None)
        if key in model.counters.reset_each_pass:
            found.append(Evidence(BATCHES, increments[0].node, "set back to 0 before each pass over the data: the index of a batch in its epoch"))
        name = key.rsplit(".", 1)[-1].rsplit(":", 1)[-1]
        if _DATA_NAME.search(name):
            found.append(Evidence(BATCHES, increments[0].node, f"named `{name}`", name_only=True))
    found.extend(_skips_ahead(model, key))
    return _decide(found)


def _skips_ahead(model, key: str) -> List[Evidence]:
    """`if step < start_step: continue` at the top of a pass: batches are passed over until the
    counter reaches a stored start, as a resumed run does; the counter is where the data stands."""
    found = model.remember(("skip-ahead",), lambda: _skip_ahead_tests(model))
    return [found[key]] if key in found else []


def _skip_ahead_tests(model) -> Dict[str, Evidence]:
    """Key -> its skip-ahead evidence, for every `if key < start: continue` of the module (read once)."""
    found: Dict[str, Evidence] = {}
    for node, site in model.structure.statements:
        if not (isinstance(node, cst.Continue) and site.guards):
            continue
        guard = site.guards[-1]
        body, test = getattr(guard.statement, "body", None), guard.test
        alone = isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) and len(body.body) == 1
        if (
            alone and not guard.negated and isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, (cst.LessThan, cst.LessThanEqual))
        ):
            key = model.roles.key(test.left, site.scope)
            if key is not None and key not in found:
                found[key] = Evidence(BATCHES, node, f"passed over while `{model.text.of(test)}`: it is where the data of a resumed run starts")
    return found


def _replays(model, key: str, increment: Event) -> Optional[Evidence]:
    """`if done < resume_at: done += 1; continue`: advanced in a branch that trains nothing, while the
    counter is behind a stored value: it counts the data a resumed run passes over, a data position."""
    scope = increment.site.scope
    for guard in increment.site.guards:
        body = getattr(guard.statement, "body", None)
        if guard.negated or guard.early_exit or not isinstance(body, cst.IndentedBlock) or not body.body:
            continue
        smalls = [s for line in body.body if isinstance(line, cst.SimpleStatementLine) for s in line.body]
        simple = all(isinstance(line, cst.SimpleStatementLine) for line in body.body)
        trains_nothing = simple and all(isinstance(s, (cst.AugAssign, cst.Continue)) for s in smalls)
        behind = any(isinstance(sub, cst.Comparison) and key in model.keys_in(sub, scope) for sub in walk_expressions(guard.test))
        if trains_nothing and isinstance(smalls[-1], cst.Continue) and behind:
            return Evidence(BATCHES, increment.node, f"advanced without training while `{model.text.of(guard.test)}`: it replays the data up to a stored position")
    return None


def _own_test(model, key: str, increment: Event) -> Optional[Evidence]:
    """The increment runs only under a test that compares the counter with a value the loop
    recomputes each pass (`if elapsed // interval >= saves: save(...); saves += 1`): the counter
    counts how often that block ran, not steps. (A bound fixed for the loop, `if n < warmup: n += 1`,
    is a counter that stops, still counting steps until it does.)"""
    loop = increment.site.loop
    for guard in increment.site.guards:
        test = guard.test
        if guard.early_exit or not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            continue
        sides = (test.left, test.comparisons[0].comparator)
        mine = [side for side in sides if key in model.keys_in(side, increment.site.scope)]
        if len(mine) != 1 or not isinstance(_offset_removed(mine[0]), (cst.Name, cst.Attribute)):
            continue
        other = sides[1] if mine[0] is sides[0] else sides[0]
        if loop is not None and _recomputed_in(model, other, increment.site.scope, loop):
            return Evidence(RUNS, increment.node, f"advanced only when `{model.text.of(test)}` holds: it counts the runs of that block")
    return None


def _offset_removed(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`saves + 1` -> `saves`: the counter itself, beside a literal it is moved by."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract)) and isinstance(expr.right, cst.Integer):
        return expr.left
    return expr


def _recomputed_in(model, expr: cst.BaseExpression, scope, loop) -> bool:
    """The expression calls something, reads a name assigned in `loop`, or an attribute of an object
    whose method the loop calls (`pbar.n` beside `pbar.update(k)`): a value that changes each pass."""
    if any(isinstance(s, cst.Call) for s in walk_expressions(expr)):
        return True
    keys = model.keys_in(expr, scope)
    if any(
        loop in site.loops and any(model.roles.key(t, scope) in keys for t in assignment_targets(node) if isinstance(t, (cst.Name, cst.Attribute)))
        for node, site in model.statements_of(scope)
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign))
    ):
        return True
    owners = {dotted(s.value) for s in walk_expressions(expr) if isinstance(s, cst.Attribute)} - {None, scope.self_name}
    return bool(owners) and any(
        loop in site.loops and isinstance(call.func, cst.Attribute) and dotted(call.func.value) in owners
        for call, site in model.structure.calls if site.scope is scope
    )


def _decide(found: List[Evidence]) -> CounterUnit:
    """Committed updates when a commit gate shows it; else the unit of the data when the code shows it
    (a name only confirms: it never wins over an increment per window); else attempts per window."""
    def of(*units, names=False):
        return tuple(e for e in found if e.unit in units and (names or not e.name_only))

    if of(UPDATES):
        return CounterUnit(UPDATES, of(UPDATES))
    shown = of(BATCHES, DATA)
    if shown and not of(WINDOWS):
        return CounterUnit(BATCHES, shown + tuple(e for e in found if e.name_only))
    if of(WINDOWS):
        return CounterUnit(WINDOWS, of(WINDOWS))
    named = of(BATCHES, names=True)
    return CounterUnit(BATCHES, named) if named else CounterUnit(UNKNOWN, ())


def _declared(model, key: str, increments: List[Event]) -> Optional[Evidence]:
    """`# steplint: counter=tokens` on an increment, else the counter's entry in `[tool.steplint.units]`
    (by its name as written, `params.batch_idx_train`, or its last part, `batch_idx_train`)."""
    if "steplint:" in model.source.text:
        for increment in increments:
            first, last = model.text.rows(increment.node)
            for row in range(first, last + 1):
                match = _COUNTER_DECLARATION.search(model.source.line(row))
                if match and match.group("unit") in DECLARED:
                    return Evidence(DECLARED[match.group("unit")], increment.node, f"declared `counter={match.group('unit')}`")
    table = dict(getattr(model.settings, "units", ()) or ())
    for increment in increments:
        text = dotted(increment.subject) or ""
        for name in (text, text.rsplit(".", 1)[-1]):
            if name in table:
                return Evidence(DECLARED[table[name]], increment.node, f"declared `{name} = \"{table[name]}\"` in [tool.steplint.units]")
    return None


def _recomputed(model, key: str, scope) -> List[Evidence]:
    """Assignments that put the counter at a position computed from the data's length or a batch
    index: `(epoch - 1) * len(loader)` counts batches, `epoch * len(loader) // accum` counts windows;
    and additions of the batches a resumed run skips (`skip_first_batches(loader, n)`, then `step += n`)."""
    found = []
    batch_indices = set(model.units.enumerate_indices)
    positions = model.counters.data_positions
    for node, site in model.statements_in(scope, key):
        if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign) and model.roles.key(node.target, site.scope) == key:
            skipped = [k for k in model.keys_in(node.value, site.scope) if k in positions and k != key]
            if skipped:
                found.append(Evidence(BATCHES, node, f"advanced by `{model.text.of(node.value)}`, the batches a resumed run skips"))
            continue
        if not (isinstance(node, cst.Assign) and len(node.targets) == 1 and model.roles.key(node.targets[0].target, site.scope) == key):
            continue
        value = node.value
        divided = any(isinstance(s, cst.BinaryOperation) and isinstance(s.operator, (cst.FloorDivide, cst.Divide)) for s in walk_expressions(value))
        lengths = any(isinstance(s, cst.Call) and dotted(s.func) == "len" for s in walk_expressions(value))
        if lengths and divided:
            found.append(Evidence(WINDOWS, node, f"set to `{model.text.of(value)}`, the data's length in windows"))
        elif lengths:
            found.append(Evidence(BATCHES, node, f"set to `{model.text.of(value)}`, a position in the data's batches"))
        elif not divided and not batch_indices.isdisjoint(model.keys_in(value, site.scope)):
            found.append(Evidence(BATCHES, node, f"set from the batch index (`{model.text.of(value)}`)"))
    return found


def _position_by_length(model, key: str, scope) -> List[Evidence]:
    """The counter, or the value it starts from (`global_step = start_step + 1`), divided by the number
    of batches of an epoch (`start_epoch = start_step // len(loader)`): the code reads it as a position
    in the data's batches."""
    divided = _length_dividends(model)
    if key in divided:
        return [Evidence(BATCHES, divided[key], f"divided by a count of the data's batches (`{model.text.of(divided[key])}`): a position in the data")]
    for node, site in model.statements_in(scope, key):
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and model.roles.key(node.targets[0].target, site.scope) == key:
            for start in model.keys_in(node.value, site.scope) & set(divided):
                why = f"set from `{model.text.of(node.value)}`, which the code divides by a count of the data's batches (`{model.text.of(divided[start])}`)"
                return [Evidence(BATCHES, node, why)]
    return []


def _length_dividends(model) -> Dict[str, cst.BinaryOperation]:
    """Keys of `x` in `x // len(loader)`, `x % len(loader)` or `x / len(loader)` (epochs done, as a
    fraction), for a loader a loop iterates; also `x / max_iterations` with `max_iterations = epochs *
    len(loader)`, the run's length in batches (a poly schedule's progress), and the counter a local `x`
    is set from once (`shift_iter = iter_num - warmup`)."""
    def compute():
        iterated = _iterated(model)
        found: Dict[str, cst.BinaryOperation] = {}
        for node, site in model.structure.statements:
            for sub in walk_expressions(node):
                if not (isinstance(sub, cst.BinaryOperation) and isinstance(sub.operator, (cst.FloorDivide, cst.Modulo, cst.Divide))):
                    continue
                if _counts_batches(model, sub.right, site.scope, iterated, isinstance(sub.operator, cst.Divide)) and isinstance(sub.left, (cst.Name, cst.Attribute)):
                    key = model.roles.key(sub.left, site.scope)
                    if key:
                        found.setdefault(key, sub)
                        for source in _set_from(model, sub.left, site.scope):
                            found.setdefault(source, sub)
        return found
    return model.remember(("length dividends",), compute)


def _counts_batches(model, expr: cst.BaseExpression, scope, iterated: Set[str], run_length: bool) -> bool:
    """`len(loader)` of a loader a loop iterates; with `run_length`, also a product of it (`epochs *
    len(loader)`), or a local set once to one."""
    if isinstance(expr, cst.Call):
        return dotted(expr.func) == "len" and len(expr.args) == 1 and dotted(expr.args[0].value) in iterated
    if not run_length:
        return False
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return any(_counts_batches(model, side, scope, iterated, False) for side in (expr.left, expr.right))
    if isinstance(expr, cst.Name):
        values = _values_set_once(model, expr, scope)
        return len(values) == 1 and isinstance(values[0], cst.BinaryOperation) and _counts_batches(model, values[0], scope, iterated, True)
    return False


def _values_set_once(model, name: cst.Name, scope) -> List[cst.BaseExpression]:
    """The values a function's plain assignments give a local (`[]` when one is not plain)."""
    found = model.roles.command_line.assigned(scope, name.value)
    return [] if None in found else list(found)


def _set_from(model, expr: cst.BaseExpression, scope) -> Set[str]:
    """The counters a local divided by the run's batches is set from, in each of its assignments
    (`shift_iter = iter_num - args.warmup_period`, `shift_iter = iter_num`): they stand where it does."""
    if not isinstance(expr, cst.Name):
        return set()
    keys = [set(model.keys_in(value, scope)) & set(model.units.increments) for value in _values_set_once(model, expr, scope)]
    return set.intersection(*keys) if keys else set()


def _enumerate_indices(model) -> Dict[str, cst.Call]:
    """Keys of `i` in `for i, batch in enumerate(loader)` -> the `enumerate(...)` call."""
    found = {}
    for node, site in model.structure.for_loops:
        call = enumerated(model, node, site)
        if call is not None and isinstance(node.target, cst.Tuple) and node.target.elements:
            first = node.target.elements[0].value
            key = model.roles.key(first, site.scope) if isinstance(first, cst.Name) else None
            if key:
                found[key] = call
    return found


def _index_unit(model, key: str) -> CounterUnit:
    """A batch index counts batches; the code shows that its consumers mean batches when the loop
    resumes at a stored position (`enumerate(loader, start=resumed + 1)`, or passes over the batches
    before it: `if i < start: continue`) or the learning rate is computed from the index itself."""
    call = model.units.enumerate_indices[key]
    found = []
    start = next((a.value for a in call.args[1:] if a.keyword is None or a.keyword.value == "start"), None)
    if start is not None and not isinstance(start, cst.Integer):
        found.append(Evidence(BATCHES, call, f"the loop resumes at a stored batch (`start={model.text.of(start)}`)"))
    for consumer in model.units.consumers.get(key, ()):
        if consumer.label == "lr":
            found.append(Evidence(BATCHES, consumer.node, f"the learning rate is computed from it (`{model.text.of(consumer.node)}`)"))
    position = _run_position(model, key, call)
    if position is not None:
        found.append(Evidence(BATCHES, position, f"made a position in the run's batches (`{model.text.of(position)}`)"))
    found.extend(_skips_ahead(model, key))
    return CounterUnit(BATCHES, tuple(found))


def _run_position(model, key: str, call: cst.Call) -> Optional[cst.BinaryOperation]:
    """`(epoch - 1) * len(loader) + i + 1`: the batch index added to a count of whole passes over the
    loader it enumerates, which is the index's place among all the run's batches."""
    loader = unwrapped(call)
    name = dotted(loader) if loader is not None else None
    header = model.structure.site_of.get(id(call))  # the loop header's site
    if name is None or header is None:
        return None
    return _sum_with_whole_passes(model, key, header.scope, lambda product: any(
        isinstance(s, cst.Call) and dotted(s.func) == "len" and len(s.args) == 1 and dotted(s.args[0].value) == name for s in walk_expressions(product)))


def _sum_with_whole_passes(model, key: str, scope, counts_passes) -> Optional[cst.BinaryOperation]:
    """A sum, in a statement of `scope` that reads the counter `key`, of the counter and a product that
    `counts_passes` (a count of whole passes over the data): `(epoch - 1) * len(loader) + i + 1`."""
    for node, site in model.statements_in(scope, key):
        for sub in walk_expressions(node):
            if not (isinstance(sub, cst.BinaryOperation) and isinstance(sub.operator, cst.Add)):
                continue
            parts = _addends(sub)
            if any(isinstance(p, cst.BinaryOperation) and isinstance(p.operator, cst.Multiply) and counts_passes(p) for p in parts) and any(
                isinstance(p, (cst.Name, cst.Attribute)) and model.roles.key(p, site.scope) == key for p in parts
            ):
                return sub
    return None


def _added_to_whole_passes(model, key: str, scope) -> List[Evidence]:
    """`it = len(data_loader) * epoch + epoch_it`: the counter added to a count of whole passes over the
    data is where the run stands in the data's batches, and the counter the index of a batch in its pass."""
    found = _sum_with_whole_passes(model, key, scope, lambda product: any(
        isinstance(f, cst.Call) and dotted(f.func) == "len" and len(f.args) == 1 for f in (product.left, product.right)))
    return [Evidence(BATCHES, found, f"added to a count of whole passes over the data (`{model.text.of(found)}`): the index of a batch in its pass")] if found else []


def _addends(expr: cst.BaseExpression) -> List[cst.BaseExpression]:
    """The terms of a sum: `a * b + i + 1` -> [a * b, i, 1]."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return _addends(expr.left) + _addends(expr.right)
    return [expr]


def _data_offsets(model) -> Dict[str, List[Evidence]]:
    found: Dict[str, List[Evidence]] = defaultdict(list)
    remainders: Dict[Tuple[int, str], cst.BinaryOperation] = {}  # (scope, name) -> the `counter % n` it holds
    for node, site in model.structure.statements:
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and _is_remainder(node.value):
            remainders[(id(site.scope), node.targets[0].target.value)] = node.value
    for loop, site in model.structure.for_loops:
        if not (isinstance(loop.iter, cst.Call) and dotted(loop.iter.func) == "range" and len(loop.iter.args) >= 2):
            continue
        start = loop.iter.args[0].value
        remainder = start if _is_remainder(start) else remainders.get((id(site.scope), start.value)) if isinstance(start, cst.Name) else None
        if remainder is None:
            continue
        for key in model.keys_in(remainder.left, site.scope):
            found[key].append(Evidence(BATCHES, loop.iter, f"a loop resumes the data at its remainder (`{model.text.of(remainder)}`, `{model.text.of(loop.iter)}`)"))
    return found


def _is_remainder(expr: cst.BaseExpression) -> bool:
    """`counter % length`, the counter a plain name or attribute."""
    return isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo) and isinstance(expr.left, (cst.Name, cst.Attribute))


def _data_products(model) -> Set[str]:
    """Keys assigned a product with a batch or sequence size (`images_seen = n * batch_size * world_size`),
    or a helper's return of one, read through the helper's call (`adjusted_batch_count(params)`)."""
    found: Set[str] = set()
    for node, site in model.structure.statements:
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and _is_data_product(node.value):
            key = model.roles.key(node.targets[0].target, site.scope)
            if key:
                found.add(key)
    return found


def _is_data_product(expr: cst.BaseExpression) -> bool:
    return any(
        isinstance(s, cst.BinaryOperation) and isinstance(s.operator, cst.Multiply) and DATA_SIZE.search(" ".join(_names(s)))
        for s in walk_expressions(expr)
    )


def _names(expr: cst.BaseExpression) -> List[str]:
    return [dotted(s) or "" for s in walk_expressions(expr) if isinstance(s, (cst.Name, cst.Attribute))]


def _inside_products(model, consumer: Consumer, derived: Set[str]) -> bool:
    """Every read of the counter in the consumer sits in a product with a batch or sequence size."""
    scope = consumer.scope
    inside, outside = 0, 0
    products = [s for s in walk_expressions(consumer.node) if isinstance(s, cst.BinaryOperation) and isinstance(s.operator, cst.Multiply)]
    covered = {id(n) for p in products if DATA_SIZE.search(" ".join(_names(p))) for n in walk_expressions(p)}
    for sub in walk_expressions(consumer.node):
        if isinstance(sub, (cst.Name, cst.Attribute)) and model.roles.key(sub, scope) in derived:
            if id(sub) in covered:
                inside += 1
            else:
                outside += 1
    return inside > 0 and outside == 0


# -- consumers -----------------------------------------------------------------------------------


def _consumers(model) -> Dict[str, List[Consumer]]:
    """Key -> the consumers that read it, with the unit each expects when the code shows one."""
    index: Dict[str, List[Consumer]] = defaultdict(list)
    totals = _totals_in_updates(model)

    def add(label, node, scope, unit=None, evidence=None, expr=None):
        keys = model.keys_in(expr if expr is not None else node, scope)
        consumer = Consumer(label, node, unit, evidence, keys, scope)
        for k in keys:
            index[k].append(consumer)

    batch_totals = _totals_in_batches(model)
    lengths = _schedule_lengths(model)
    for event in model.events:
        scope = event.site.scope
        if event.kind == SCHEDULER_STEP:
            if isinstance(event.node, cst.Assign):
                add("lr", event.node.value, scope)
                continue
            unit, why = _schedule_unit(model, event)
            if unit is False:
                continue  # a timm step_update that moves nothing
            for argument in event.node.args:
                add("schedule", event.node, scope, unit, Evidence(unit, event.node, why) if unit else None, argument.value)
        label = {CHECKPOINT_SAVE: "checkpoint", EVALUATION: "eval", EARLY_EXIT: "stop"}.get(event.kind)
        if label is None:
            continue
        for guard in event.site.guards:
            if label == "stop" and (guard.early_exit or _decided_by_a_call(guard.test) or _only_a_cadence(model, guard.test, event.site)
                                    and not _modulo_by_a_total(guard.test, (totals, batch_totals, lengths))):
                continue  # (an abort checked every N steps, `if step % n == 0: if isnan(loss): return`: no budget)
            unit, evidence = _test_unit(model, guard.test, label, totals, batch_totals, lengths)
            add(label, guard.test, scope, unit, evidence)
        if event.kind == CHECKPOINT_SAVE:
            add(label, event.node, scope)
    for loop, site in model.structure.while_loops:
        unit, evidence = _test_unit(model, loop.test, "stop", totals, batch_totals, lengths)
        add("stop", loop.test, site.scope, unit, evidence)
    for call, site, argument in _lr_helper_arguments(model):
        add("lr", call, site.scope, expr=argument)
    return index


def _lr_helper_arguments(model) -> Iterator[tuple]:
    """(call, site, argument) for `update_lr(args, global_step, opt)` where this module's `update_lr`
    sets a param group's "lr" from that parameter (`lr = base * step / warmup`, then `g["lr"] = lr`):
    the argument feeds the learning rate as the assignment would at the call."""
    fed: Dict[int, Set[str]] = {}  # id(function) -> its parameters the "lr" value reads
    for event in model.of_kind(SCHEDULER_STEP):
        if not isinstance(event.node, cst.Assign):
            continue
        scope = event.site.scope
        read = {n for expr in _spelled_out(model, event.node.value, event.site) for n in _names(expr)}
        fed.setdefault(id(scope), set()).update(p.name.value for p in scope.params if p.name.value in read)
    if not fed:
        return
    for call, site in model.structure.calls:
        callee = model.roles.callee(call.func, site.scope)
        wanted = fed.get(id(callee)) if callee is not None else None
        if not wanted:
            continue
        params = [p.name.value for p in callee.params][1 if callee.self_name and callee.parent is None else 0:]
        for index, argument in enumerate(call.args):
            name = argument.keyword.value if argument.keyword is not None else params[index] if index < len(params) and not argument.star else None
            if name in wanted:
                yield call, site, argument.value


def _moduli(test: cst.BaseExpression) -> List[cst.BaseExpression]:
    return [sub.right for sub in walk_expressions(test) if isinstance(sub, cst.BinaryOperation) and isinstance(sub.operator, cst.Modulo)]


def _modulo_by_a_total(test: cst.BaseExpression, totals: tuple) -> bool:
    """`global_step % t_total == 0` where `t_total` is a total of the run (in updates, in batches, or the
    length a schedule is built with): first true at that total, it ends the run, as `>= t_total` would."""
    return any(name in found for modulus in _moduli(test) for name in _names(modulus) for found in totals)


def _schedule_lengths(model) -> Set[str]:
    """The names a scheduler of the module is built with as its length (`t_total=t_total`)."""
    roles = model.roles.roles
    return {name for key, built in assignments(model).schedulers.items() if key in roles and roles[key].kind == SCHEDULER for call, _ in built
            if (length := length_argument(call)) is not None for name in _names(length)}


def _only_a_cadence(model, test: cst.BaseExpression, site: Site) -> bool:
    """`step % every == 0`: true once every N values, compared with no total; also through the names
    the test reads (`print_step = step % every == 0`, then `if print_step and step != 0:`)."""
    subs = [sub for expr in _spelled_out(model, test, site) for sub in walk_expressions(expr)]
    return any(isinstance(sub, cst.BinaryOperation) and isinstance(sub.operator, cst.Modulo) for sub in subs) and not any(
        isinstance(sub, cst.Comparison) and any(isinstance(c.operator, _ORDERING) for c in sub.comparisons) for sub in subs
    )


def _spelled_out(model, expr: cst.BaseExpression, site: Site) -> List[cst.BaseExpression]:
    """`expr` and the values its names were assigned before `site` in its function, two levels deep
    (`print_step = print_step or early_print_step`; `lr = base * step / warmup`, then `g["lr"] = lr`)."""
    known, spelled, names = assignments(model), [expr], [expr]
    for _ in range(2):
        names = [
            node.value for value in names for sub in walk_expressions(value) if isinstance(sub, cst.Name)
            for node in known.before(site.scope, sub.value, site.order) if isinstance(node, cst.Assign)
        ]
        spelled += names
    return spelled


_ORDERING = (cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)


def _decided_by_a_call(test: cst.BaseExpression) -> bool:
    """`early_stopper.step(score) and step > min_steps`: the run ends when the call says so; a counter
    beside it only delays that (a floor), it cannot end the run by itself: no budget."""
    found = conjuncts(test)
    return len(found) > 1 and any(isinstance(c, cst.Call) for c in found)


def _batch_keyed(model) -> Dict[str, List[Evidence]]:
    """Key -> `x.step_batch(key)` calls: a schedule stepped with the index of the batch counts batches,
    whatever object `x` is (its method says its unit). Evidence for the counter's unit only: which
    objects are schedulers, and so what a counter feeds, is the roles' business."""
    found: Dict[str, List[Evidence]] = defaultdict(list)
    for call, site in model.structure.calls:
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "step_batch" and call.args:
            for key in model.keys_in(call.args[0].value, site.scope):
                found[key].append(Evidence(BATCHES, call, f"steps a schedule laid out in batches (`{model.text.of(call)}`)"))
    return found


def _schedule_unit(model, event: Event):
    """What a scheduler call told a position expects: (unit or None, why); False for a call that moves nothing."""
    func = event.node.func if isinstance(event.node, cst.Call) else None
    method = func.attr.value if isinstance(func, cst.Attribute) else None
    role = event.role
    if method == "step_update":
        if role is None or role.per_update is not True:
            return False, ""
        return UPDATES, "`step_update(n)` of a scheduler built to count updates (`t_in_epochs=False`)"
    drawn = built_from_its_loops_batches(model, event)
    if drawn is not None:
        return BATCHES, f"a schedule built from `{model.text.of(drawn)}`, the batches of the loop that steps it"
    first, last = model.text.rows(event.site.statement)
    if "steplint:" in model.source.text:
        basis = intent_basis(model.source, range(first, last + 1))
        if basis is not None:
            return _BASIS_UNITS[basis], f"declared `schedule={basis}`"
    return None, ""


def _totals_in_updates(model) -> Dict[str, cst.BaseExpression]:
    """Names set to a number of updates computed from the data: `ceil(len(loader) / accum) * epochs`,
    `len(loader) // accum * epochs` (a length divided by the window)."""
    found = {}
    for node, site in model.structure.statements:
        if not (isinstance(node, cst.Assign) and len(node.targets) == 1):
            continue
        value = node.value
        if _length_per_window(value) and not _is_data_product(value):
            text = dotted(node.targets[0].target)
            if text:
                found[text] = value
    # one level through names, by arithmetic: `max_steps = epochs * updates_per_epoch`, `every = max(1, total // 10)`
    first = dict(found)
    for node, site in model.structure.statements:
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and _arithmetic(node.value):
            text = dotted(node.targets[0].target)
            if text and text not in found and any(n in first for n in _names(node.value)) and not _is_data_product(node.value):
                found[text] = node.value
    return found


def _length_per_window(expr: cst.BaseExpression) -> bool:
    """A division of a length by the window: `len(loader) // accum`, `ceil(len(loader) / grad_accum)`."""
    return any(
        isinstance(s, cst.BinaryOperation) and isinstance(s.operator, (cst.FloorDivide, cst.Divide))
        and any(isinstance(c, cst.Call) and dotted(c.func) == "len" for c in walk_expressions(s.left))
        and _WINDOW_LENGTH.search(" ".join(_names(s.right)))
        for s in walk_expressions(expr)
    )


def _arithmetic(expr: cst.BaseExpression) -> bool:
    """Numbers computed from numbers: operators, and `max`, `min`, `int`, `round`, `ceil` of them."""
    if isinstance(expr, cst.BinaryOperation):
        return True
    return isinstance(expr, cst.Call) and last_name(expr.func) in ("max", "min", "int", "round", "ceil")


def _test_unit(model, test: cst.BaseExpression, label: str, totals: Dict[str, cst.BaseExpression], batch_totals: Dict[str, cst.BaseExpression], lengths: Set[str]):
    """The unit a test that gates a consumer (a stop, an evaluation, a save) is sized in, when the code
    shows one: a stop against a total in updates (`step >= max_train_steps`, set from
    `ceil(len(loader) / accum)`); a stop on a cadence (`if quick and done % 20 == 0: break`) cuts the
    data short, it is no budget; a cadence or budget sized in the data's batches
    (`step % (n_train // (5 * batch_size)) == 0`, `step >= epochs * len(loader)`) counts batches."""
    subs = list(walk_expressions(test))
    if label == "stop":
        ordered = any(isinstance(c.operator, (cst.GreaterThan, cst.GreaterThanEqual, cst.LessThan, cst.LessThanEqual)) for s in subs if isinstance(s, cst.Comparison) for c in s.comparisons)
        if not ordered and _moduli(test) and not _modulo_by_a_total(test, (totals, batch_totals, lengths)):
            return BATCHES, Evidence(BATCHES, test, f"a stop on a cadence (`{model.text.of(test)}`) cuts the data short; it is no update budget")
    if label == "stop":
        for name in _names(test):
            if name in totals and _end_of_the_data(model, name, totals):
                why = f"`{name}` is the end of the data unless the run is given one: `{model.text.of(totals[name])}`"
                return WINDOWS, Evidence(WINDOWS, test, why)
    for name in _names(test):
        if name in totals:  # a budget against a total in updates, or a cadence that is a share of one
            why = f"`{name}` is a number of updates: `{model.text.of(totals[name])}`"
            return UPDATES, Evidence(UPDATES, test, why)
    for name in _names(test):
        if name in batch_totals:
            return BATCHES, Evidence(BATCHES, test, f"`{name}` is a number of batches: `{model.text.of(batch_totals[name])}`")
    iterated = _iterated(model)
    for sub in subs:
        if isinstance(sub, cst.BinaryOperation) and _in_batches(sub, iterated):
            return BATCHES, Evidence(BATCHES, test, f"`{model.text.of(sub)}` is a number of batches")
    return None, None


def _end_of_the_data(model, name: str, totals: Dict[str, cst.BaseExpression]) -> bool:
    """A budget that is the epochs times the windows of an epoch wherever the module sets it
    (`max_train_steps = num_train_epochs * updates_per_epoch`), and that the command line leaves
    unset by default: stopping at it is stopping where the data ends, whatever the counter counts."""
    values = [node.value for node, _ in model.structure.statements if isinstance(node, cst.Assign) and any(dotted(t.target) == name for t in node.targets)]
    if not values or not all(_epochs_of_windows(value, totals) for value in values):
        return False
    given = command_line_default(model, cst.parse_expression(name)) if "." in name else ...
    return given is None or given is ...


def _epochs_of_windows(expr: cst.BaseExpression, totals: Dict[str, cst.BaseExpression]) -> bool:
    """`epochs * updates_per_epoch`, `ceil(len(loader) / accum) * num_epochs`: windows per epoch times epochs."""
    if not (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply)):
        return False
    sides = (expr.left, expr.right)
    per_epoch = [side for side in sides if _length_per_window(side) or dotted(side) in totals and _length_per_window(totals[dotted(side)])]
    epochs = [side for side in sides if side not in per_epoch and re.search(r"epoch", dotted(side) or "", re.I)]
    return bool(per_epoch) and bool(epochs)


# Names of a window's length: a count divided by one is in updates, not batches.
_WINDOW_LENGTH = re.compile(r"accum|grad_acc|update_freq|micro", re.I)


def _totals_in_batches(model) -> Dict[str, cst.BaseExpression]:
    """Names set to a number of batches computed from the data: `len(loader)` of a loader the code
    iterates (times epochs, or a literal fraction of it), or a count of samples divided by the batch
    size (`n_train // (5 * batch_size)`), with no window length in it; and names computed from one."""
    iterated = _iterated(model)
    found: Dict[str, cst.BaseExpression] = {}
    assignments = [(dotted(n.targets[0].target), n.value) for n, _ in model.structure.statements if isinstance(n, cst.Assign) and len(n.targets) == 1]
    for text, value in assignments:
        if text and _in_batches(value, iterated):
            found.setdefault(text, value)
    for text, value in assignments:  # one level through names: `total = epochs * iters_per_epoch`
        if text and text not in found and any(n in found for n in _names(value)) and not _divided(value) and not _is_data_product(value):
            found[text] = value
    return found


def _in_batches(expr: cst.BaseExpression, iterated: Set[str]) -> bool:
    """A count divided by a batch size (`n_train // (5 * batch_size)`, `len(dataset) // batch_size * epochs`),
    or `len(loader)` of a loader a loop iterates (times a count, or divided by a literal), with no
    window length in it (a count divided by the window is in updates)."""
    if _WINDOW_LENGTH.search(" ".join(_names(expr))):
        return False
    subs = list(walk_expressions(expr))
    divisions = [s for s in subs if isinstance(s, cst.BinaryOperation) and isinstance(s.operator, (cst.FloorDivide, cst.Divide))]
    by_batch = [d for d in divisions if re.search(r"batch", " ".join(_names(d.right)), re.I)]
    if by_batch:
        return all(d in by_batch or isinstance(d.right, cst.Integer) for d in divisions)
    loader_lengths = [s for s in subs if isinstance(s, cst.Call) and dotted(s.func) == "len" and len(s.args) == 1 and dotted(s.args[0].value) in iterated]
    if not loader_lengths or _is_data_product(expr):
        return False
    return all(isinstance(d.right, cst.Integer) for d in divisions)


def _divided(expr: cst.BaseExpression) -> bool:
    return any(isinstance(s, cst.BinaryOperation) and isinstance(s.operator, (cst.FloorDivide, cst.Divide)) for s in walk_expressions(expr))


def _iterated(model) -> Set[str]:
    """Names of what the module's `for` loops iterate (`for x in tqdm(enumerate(loader))` iterates `loader`)."""
    def compute():
        return {dotted(iterable) for iterable in (loop_iterable(loop) for loop, _ in model.structure.for_loops) if iterable is not None}
    return model.remember(("iterated",), compute)
