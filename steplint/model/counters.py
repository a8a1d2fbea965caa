"""Counters: what each counter the code advances counts, and what reading it feeds.

A counter advanced in the loop counts batches; one advanced under the update's window boundary counts
windows, that is attempted updates; one advanced under a commit gate counts committed updates. A
counter feeds a schedule or an LR (its unit must be the schedule's), a checkpoint name, an evaluation
cadence or the end of the run; held back on a skipped update, a cadence reading it fires twice. A
counter that also locates the data (`sample_start = step * batch_size`) or counts one epoch's batches
is in batches by design. The scheduler's own basis (`# steplint: schedule=`, else the setting) says
which unit its steps are meant in. Facts are computed once per module (or per counter) and memoised.
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import cached_property
from typing import TYPE_CHECKING, Dict, List, Optional, Set

import libcst as cst

from steplint.model.events import COLLECTIVE, COUNTER_INCREMENT, EARLY_EXIT, OPTIMIZER_STEP, SCHEDULER_STEP, SKIPPABLE_STEP, Event
from steplint.model.guards import MODULO, RANK, WINDOW_BOUNDARY
from steplint.model.schedules import never_moves, sized_by_its_loops_batches, sized_in_the_batches_it_steps_per
from steplint.model.structure import Scope, Site
from steplint.model.syntax import assignment_targets, bound_names, dotted, is_cadence, last_name, names_in, unwrap_progress, walk_expressions
from steplint.suppress import intent_basis

if TYPE_CHECKING:
    from steplint.model import ModuleModel

COMMITTED_UPDATES = "committed-updates"

# Names of sizes that turn a count of batches into a data position (`step * batch_size * world_size`).
DATA_SIZE = re.compile(r"batch|sample|seq_len|block_size|context|tokens|duration|world_size", re.I)
_DATA_SKIP = re.compile(r"^(skip_first_batches|islice|set_start_index|set_start_iter|set_skip|skip|seek)$|sampler", re.I)


class Counters:
    """What the counters of one module count and feed (memoised per module, counter or loop)."""

    def __init__(self, model: "ModuleModel"):
        self.model = model

    def batch_indices(self, loop, counters: bool = True) -> Set[str]:
        """Keys that count the batches of a loop: `i` of `for i, batch in enumerate(loader)`, and
        (with `counters`) counters advanced every batch, under no window boundary, in it."""
        return self.model.remember(("batch_indices", id(loop), counters), lambda: self._batch_indices(loop, counters))

    def _batch_indices(self, loop, counters: bool) -> Set[str]:
        keys: Set[str] = set()
        for node, site in self._for_loops.get(id(loop), ()):
            if enumerated(self.model, node, site) is not None:
                if isinstance(node.target, cst.Tuple) and node.target.elements and isinstance(node.target.elements[0].value, cst.Name):
                    keys.add(self.model.roles.key(node.target.elements[0].value, site.scope))  # type: ignore[arg-type]
        for increment in self._increments_by_loop.get(id(loop), ()) if counters else ():
            if self.model.windows.boundary(increment.site) is None and not self.model.guards.gated(increment.site, self.model.passes.attempt_for(increment)):
                keys.add(self.model.roles.key(increment.subject, increment.site.scope))  # type: ignore[arg-type]
        return keys

    @cached_property
    def _for_loops(self) -> Dict[int, list]:
        found: Dict[int, list] = defaultdict(list)
        for node, site in self.model.structure.for_loops:
            found[id(node)].append((node, site))
        return found

    @cached_property
    def _increments_by_loop(self) -> Dict[int, List[Event]]:
        found: Dict[int, List[Event]] = defaultdict(list)
        for increment in self.model.of_kind(COUNTER_INCREMENT):
            found[id(increment.site.loop)].append(increment)
        return found

    def in_a_training_pass(self, increment: Event) -> bool:
        """An update or a scheduler step runs in the loop the counter advances in (or, for a counter outside
        loops, in its function): `i += 1` in a `while` that picks a data subset on the main process counts no step."""
        steps = self.model.events_in(increment.site.scope, SKIPPABLE_STEP, OPTIMIZER_STEP, SCHEDULER_STEP)
        loop = increment.site.loop
        return any(any(around is loop for around in step.site.loops) for step in steps) if loop is not None else bool(steps)

    def shared_by_a_collective(self, increment: Event) -> bool:
        """After the advance, a collective every rank runs takes the counter (`accelerator.reduce(stop_mark)`,
        `dist.all_reduce(stop_mark)`): what reads its result reads the same value on every rank."""
        scope = increment.site.scope
        key = self.model.roles.key(increment.subject, scope)
        return key is not None and any(
            c.order > increment.order and not self.model.guards.of_kind(c.site, RANK) and c.node.args
            and self.model.mentions(c.node.args[0].value, scope, key)
            for c in self.model.events_in(scope, COLLECTIVE))

    def advanced_only_before(self, key: str, site: Site) -> bool:
        """Every advance of the counter `key` is in the function of `site`, before it and in no loop around it (a
        notebook-like script whose resume section comes after its training loop): nothing counts on after `site`."""
        advances = self._increments_by_key.get(key, ())
        return bool(advances) and all(e.site.scope is site.scope and e.order < site.order and not any(
            loop is around for loop in site.loops for around in e.site.loops) for e in advances)

    @cached_property
    def _increments_by_key(self) -> Dict[str, List[Event]]:
        found: Dict[str, List[Event]] = defaultdict(list)
        for increment in self.model.of_kind(COUNTER_INCREMENT):
            found[self.model.roles.key(increment.subject, increment.site.scope)].append(increment)
        return found

    @staticmethod
    def offsets_its_loop_index(increment: Event) -> bool:
        """`i += 1` on a name a `for` around it binds (`for i, batch in enumerate(loader): i += 1`): the loop's
        own index moved to count from 1, bound anew at each iteration; nothing is counted across iterations."""
        subject = increment.subject
        return type(subject) is cst.Name and any(type(loop) is cst.For and subject.value in bound_names(loop) for loop in increment.site.loops)

    def windowed(self, update: Event) -> Set[str]:
        """Counters advanced under the update's window boundary, under no test of their own but a commit gate:
        they count windows (update attempts). (`spikes_skipped += 1` under `if loss > limit:` counts something else.)"""
        boundary = self.model.windows.boundary(update.site)
        if boundary is None:
            return set()
        shared = {(id(g.test), g.negated) for g in update.site.guards}
        return {
            self.model.roles.key(i.subject, i.site.scope)  # type: ignore[misc]
            for i in self.model.pass_events(update.site, COUNTER_INCREMENT)
            if self.model.windows.same_window(update.site, i.site)
            and all((id(g.test), g.negated) in shared or WINDOW_BOUNDARY in self.model.guards.kinds(g) or g in self.model.guards.gates(i.site) for g in i.site.guards)
        }

    def derived_keys(self, increment: Event) -> Set[str]:
        """The counter's key and the keys of names computed from it (`epoch = step // per_epoch`)."""
        scope = increment.site.scope
        key = self.model.roles.key(increment.subject, scope)
        if key is None:
            return set()
        return self.model.remember(("derived_keys", key), lambda: self._derived_keys(scope, key))

    def _derived_keys(self, scope: Scope, key: str, visited: frozenset = frozenset()) -> Set[str]:
        derived = {key}
        for node, site in self.model.statements_in(scope, key):
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and not derived.isdisjoint(self.model.keys_in(node.value, site.scope)):
                if self._result_not_computed_from(node.value, site.scope, derived, visited | {(scope.name, key)}):
                    continue
                target_key = self.model.roles.key(node.targets[0].target, site.scope)
                if target_key and target_key != key:
                    derived.add(target_key)
        for caller_scope, caller_key in self._handed_back_to(scope, key):
            if (caller_scope.name, caller_key) not in visited:
                derived |= self._derived_keys(caller_scope, caller_key, visited | {(scope.name, key)})
        return derived

    def _result_not_computed_from(self, value: cst.BaseExpression, scope: Scope, derived: Set[str], visited: frozenset) -> bool:
        """`metrics = self.evaluate(epoch, niters=niters)`: the counter handed to a function of this module
        whose returns read none of the parameters it lands in (it logs it): the result owes it nothing."""
        while isinstance(value, (cst.Subscript, cst.Attribute)):  # (`self.evaluate(epoch, niters)[0]`)
            value = value.value
        callee = self.model.roles.callee(value.func, scope) if isinstance(value, cst.Call) else None
        if callee is None or not derived.isdisjoint(self.model.keys_in(value.func, scope)):
            return False
        params = list(callee.params)
        if callee.self_name and params and params[0].name.value == callee.self_name:
            params = params[1:]
        by_name = {p.name.value: p for p in params}
        landing = []
        for index, argument in enumerate(value.args):
            if derived.isdisjoint(self.model.keys_in(argument.value, scope)):
                continue
            param = None if argument.star else by_name.get(argument.keyword.value) if argument.keyword else params[index] if index < len(params) else None
            key = self.model.roles.key(param.name, callee) if param is not None else None
            if key is None:
                return False
            landing.append(key)
        if any((callee.name, key) in visited for key in landing):
            return False  # (a recursion: not followed)
        returns = [n.value for n, _ in self.model.statements_of(callee) if isinstance(n, cst.Return) and n.value is not None]
        read = set().union(*(self._derived_keys(callee, key, visited) for key in landing)) if landing else set()
        return all(read.isdisjoint(self.model.keys_in(r, callee)) for r in returns)

    @cached_property
    def _assigned_calls(self) -> Dict[int, list]:
        """id of a function scope of the module -> (node, site) of the `target = f(...)` statements that call it."""
        found: Dict[int, list] = defaultdict(list)
        for node, site in self.model.structure.statements:
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.value, cst.Call):
                callee = self.model.roles.callee(node.value.func, site.scope)
                if callee is not None:
                    found[id(callee)].append((node, site))
        return found

    def _handed_back_to(self, scope: Scope, key: str) -> List[tuple]:
        """(scope, key) of the callers' counters a function's parameter counter returns to: in
        `n = run_epoch(..., n)` or `n, loss = train(args, n, loader)`, where the function advances its
        parameter `n` and returns it (alone, or always at the same place of a tuple), the caller's `n`
        is the same counter."""
        name = key.split(":", 1)[1]
        params = [p.name.value for p in scope.params]
        if name not in params:
            return []
        returns = [n for n, _ in self.model.statements_of(scope) if isinstance(n, cst.Return)]
        places = {_returned_at(r.value, name) for r in returns}
        if not returns or len(places) != 1 or None in places:
            return []
        place = places.pop()
        handed_at = params.index(name) - (1 if scope.self_name and params[0] == scope.self_name else 0)  # (a method called on `self`)
        found = []
        for node, site in self._assigned_calls.get(id(scope), ()):
            target = node.targets[0].target
            if place >= 0:
                elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else ()
                target = elements[place].value if place < len(elements) and not isinstance(elements[place], cst.StarredElement) else None
            target_key = self.model.roles.key(target, site.scope) if target is not None else None
            call = node.value
            handed = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)
            if handed is None and 0 <= handed_at < len(call.args) and not any(a.star or a.keyword for a in call.args[: handed_at + 1]):
                handed = call.args[handed_at].value
            if target_key and handed is not None and self.model.roles.key(handed, site.scope) == target_key:
                found.append((site.scope, target_key))
        return found

    @cached_property
    def handed_back(self) -> Dict[str, Set[str]]:
        """Caller key -> the keys of the parameter counters handed back to it (`n = run_epoch(..., n)`):
        the caller's name is a counter advanced by the function it hands it to."""
        found: Dict[str, Set[str]] = defaultdict(set)
        for increment in self.model.of_kind(COUNTER_INCREMENT):
            key = self.model.roles.key(increment.subject, increment.site.scope)
            if key is not None:
                for _, caller_key in self._handed_back_to(increment.site.scope, key):
                    found[caller_key].add(key)
        return found

    def repeating_readers(self, increment: Event) -> List[Site]:
        """Cadence tests in the counter's loop that read it (`if step % eval_every == 0:`): held
        back on a skipped update, the counter would make them fire again on the next pass."""
        loop = increment.site.loop
        derived = self.derived_keys(increment)
        found = []
        for node, site in self.model.statements_of(increment.site.scope):
            if loop is None or loop not in site.loops or node is increment.node or not is_cadence(node):
                continue
            if any(self.model.mentions(node, site.scope, k) for k in derived):
                found.append(site)
        return found

    def readers_right_after(self, increment: Event) -> Optional[int]:
        """How many statements right after the increment must move under a commit gate with it: the
        cadence checks that read the counter. None when one of them sits elsewhere in the loop."""
        readers = self.repeating_readers(increment)
        if not readers:
            return 0
        block, statement = increment.site.trail[-1]
        following = block.statements[block.index(statement) + 1 :]

        def holds(statement, reader: Site) -> bool:
            return any(s is statement for _, s in reader.trail)

        count = 0
        while count < len(following) and any(holds(following[count], r) for r in readers):
            count += 1
        return count if all(any(holds(h, r) for h in following[:count]) for r in readers) else None

    def recipe_counts_attempts(self, update: Event) -> bool:
        """accelerate and DeepSpeed skip the prepared scheduler with the update and count their steps
        in attempts by convention (as HF Trainer does), and plain code that follows the convention
        declares it (`recipe = "hf-trainer"`): checkpoint names, cadences and the end of the run in
        attempts are that recipe, not a bug; only a schedule computed from the counter is."""
        return update.strategy in ("accelerate", "deepspeed") or self.model.settings.recipe == "hf-trainer"

    def feeds(self, increment: Event) -> Set[str]:
        """What an update counter feeds: schedule, lr, checkpoint, eval, stop. A counter that is
        also the data position (`sample_start = step * batch_size`) is saved to resume the data
        where it was, in batches, skipped updates included: that checkpoint entry is not a feed."""
        derived = self.derived_keys(increment)
        if self.model.roles.key(increment.subject, increment.site.scope) in self.retry_counters:
            return frozenset()
        feeds: Set[str] = set()
        for k in derived:
            feeds |= self._fed_by_key.get(k, set())
        if not derived.isdisjoint(self.data_positions):
            feeds.discard("checkpoint")
        if not derived.isdisjoint(self._epoch_data_counters):
            feeds.discard("stop")
        return frozenset(feeds)

    @cached_property
    def _epoch_data_counters(self) -> Set[str]:
        """Counters of one epoch's data: set to a literal in an outer loop, outside the loop over the
        data, and ending that loop when they reach its length (`epoch_iter = 1` per epoch, then
        `if epoch_iter == len(loader) // accum: break`). That stop is where the data runs out,
        skipped updates included, not an update budget; a counter never reset (`global_step >=
        max_steps`) stays one."""
        found: Set[str] = set()
        for event in self.model.of_kind(EARLY_EXIT):
            loop, scope = event.site.loop, event.site.scope
            if not isinstance(event.node, cst.Break) or not isinstance(loop, cst.For):
                continue
            data = {dotted(sub) for sub in walk_expressions(loop.iter) if isinstance(sub, (cst.Name, cst.Attribute))} - {None}
            lengths = self._lengths_of(data, scope)
            for guard in event.site.guards:
                test = guard.test
                if guard.negated or not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
                    continue
                if not isinstance(test.comparisons[0].operator, (cst.Equal, cst.GreaterThanEqual, cst.GreaterThan)):
                    continue
                bound = test.comparisons[0].comparator
                if not (_reads_length_of(bound, data) or dotted(bound) in lengths):
                    continue
                key = self.model.roles.key(test.left, scope) if isinstance(test.left, (cst.Name, cst.Attribute)) else None
                if key and self._reset_outside(key, loop, scope):
                    found.add(key)
        return found

    @cached_property
    def retry_counters(self) -> Dict[str, Event]:
        """Counters advanced only in an `except` handler, inside a `while` loop their own test bounds
        (`while tries < 10: try: save(...); break` / `except OSError: tries += 1`) -> one increment.
        They count the failures of what the `try` attempts, not steps: they feed nothing of the run."""
        by_key: Dict[str, List[Event]] = defaultdict(list)
        for increment in self.model.of_kind(COUNTER_INCREMENT):
            key = self.model.roles.key(increment.subject, increment.site.scope)
            if key:
                by_key[key].append(increment)
        return {key: increments[0] for key, increments in by_key.items() if all(map(self._retried, increments))}

    def _retried(self, increment: Event) -> bool:
        loop, site = increment.site.loop, increment.site
        key = self.model.roles.key(increment.subject, site.scope)
        if not isinstance(loop, cst.While) or key is None or not self.model.mentions(loop.test, site.scope, key):
            return False
        return any(isinstance(getattr(block, "owner", None), cst.ExceptHandler) for block, _ in site.trail)

    @cached_property
    def reset_each_pass(self) -> Set[str]:
        """Counters the code sets back to a literal before each pass over the data, in the function
        that advances them: in an outer loop around the loop that advances them (`for epoch ...: n = 0`,
        then `for batch in loader: n += 1`), or first in a function that makes one pass over data it is
        handed (`def train_one_epoch(self, loader): self.local_step = 0`, then `for data in loader:`),
        with nothing else setting it there, and that this module calls only from inside loops (once
        per epoch). Other functions may advance the same counter if they reset it the same way (an
        evaluation pass run once by hand). They index a batch in its epoch: a value a resume restored
        would be overwritten when the next pass starts, so they are no step state to store."""
        by_key: Dict[str, List[Event]] = defaultdict(list)
        for increment in self.model.of_kind(COUNTER_INCREMENT):
            key = self.model.roles.key(increment.subject, increment.site.scope)
            if key:
                by_key[key].append(increment)
        found = set()
        for key, increments in by_key.items():
            passes = [self._reset_before_its_pass(i) for i in increments]
            if all(passes) and any(p == "epoch" for p in passes):
                found.add(key)
        return found

    def _reset_before_its_pass(self, increment: Event) -> Optional[str]:
        """"epoch" when the counter is set back before each pass of an outer loop; "pass" when it is set
        back first in a function that makes one pass over data it is handed but whose calls are not
        all in loops (an evaluation run once by hand); else None."""
        loop, scope = increment.site.loop, increment.site.scope
        key = self.model.roles.key(increment.subject, scope)
        if loop is None or key is None:
            return None
        if self._reset_outside(key, loop, scope):
            return "epoch"  # (also a `while` walking a batch: `pointer = 0`, then `while ...: pointer += 1`, on each pass)
        if not isinstance(loop, cst.For):
            return None
        if len(increment.site.loops) != 1:
            return None
        params = {self.model.roles.key(p.name, scope) for p in scope.params}
        if params.isdisjoint(self.model.keys_in(loop.iter, scope)):
            return None  # not a pass over data the caller hands in
        writes = [
            (node, site) for node, site in self.model.statements_of(scope)
            if isinstance(node, (cst.Assign, cst.AnnAssign)) and any(self.model.roles.key(t, scope) == key for t in assignment_targets(node) if isinstance(t, (cst.Name, cst.Attribute)))
        ]
        resets = [site for node, site in writes if isinstance(node.value, cst.Integer) and not site.loops and not site.guards and site.order < increment.order]
        increments = {id(e.node) for e in self.model.of_kind(COUNTER_INCREMENT)}  # `n = n + 1` is one too
        if not resets or not all(isinstance(node.value, cst.Integer) or id(node) in increments for node, _ in writes):
            return None
        return "epoch" if self._called_in_loops(scope) else "pass"

    def _called_in_loops(self, scope: Scope) -> bool:
        """The function is called in this module, and only from inside loops (`for epoch ...:
        self.train_one_epoch(loader)`): each call is one pass of an outer loop."""
        if scope.parent is not None or scope.name == "<module>":
            return False
        method, name = scope.class_name is not None, scope.name.rsplit(".", 1)[-1]
        sites = []
        for call, site in self.model.structure.calls:
            func = call.func
            if method and isinstance(func, cst.Attribute) and func.attr.value == name and site.scope.self_name is not None and dotted(func.value) == site.scope.self_name and site.scope.class_name == scope.class_name:
                sites.append(site)
            elif not method and isinstance(func, cst.Name) and func.value == name and site.scope.owner_of(name) is None:
                sites.append(site)
        return bool(sites) and all(site.loops for site in sites)

    def _lengths_of(self, data: Set[str], scope: Scope) -> Set[str]:
        """Names a scope sets from the length of the data (`num_iters = len(loader) // accum`)."""
        return {
            dotted(target) or ""
            for node, site in self.model.statements_of(scope)
            if isinstance(node, cst.Assign) and _reads_length_of(node.value, data)
            for target in assignment_targets(node)
        }

    def _reset_outside(self, key: str, loop, scope: Scope) -> bool:
        """The counter is set to a literal in a loop that encloses `loop` (once per epoch), not in `loop`."""
        where = self.model.structure.site_of.get(id(loop.iter if isinstance(loop, cst.For) else loop.test))  # the header's site: the loops around `loop`
        if where is None:
            return False
        return any(
            site.scope is scope and site.loop is not None and loop not in site.loops and site.loop in where.loops
            for site in self._literal_writes.get(key, ())
        )

    @staticmethod
    def stores_data_position(call: cst.Call) -> bool:
        """A saver handed the batch size with the index (`save_checkpoint(..., step=i + 1,
        batch_size=bs)`) stores where the data stands, in batches: the right unit for that."""
        return any(DATA_SIZE.search(a.keyword.value if a.keyword else dotted(a.value) or "") for a in call.args)

    @cached_property
    def data_positions(self) -> Set[str]:
        """Keys that locate the data: multiplied by a batch or sequence size, or handed to a
        sampler or loader to skip what was consumed (`skip_first_batches(loader, step)`)."""
        found: Set[str] = set()
        for node, site in self.model.structure.statements:
            for sub in walk_expressions(node):
                if isinstance(sub, cst.BinaryOperation) and isinstance(sub.operator, cst.Multiply):
                    for side, other in ((sub.left, sub.right), (sub.right, sub.left)):
                        if isinstance(side, (cst.Name, cst.Attribute)) and DATA_SIZE.search(" ".join(names_in(other))):
                            found.add(self.model.roles.key(side, site.scope) or "")
                elif isinstance(sub, cst.Call) and _DATA_SKIP.search(last_name(sub.func) or ""):
                    found.update(self.model.keys_in(sub, site.scope))
        return found

    @cached_property
    def _fed_by_key(self) -> Dict[str, Set[str]]:
        """Key -> what reading it feeds: "schedule" (scheduler arguments), "lr" (a manual LR value),
        "checkpoint" (a save or its condition), "eval" and "stop" (their conditions, a while test):
        the labels of its consumers (model.units)."""
        return {key: {c.label for c in consumers} for key, consumers in self.model.units.consumers.items()}

    def resume_keys(self) -> Set[str]:
        """Update counters a resumed run needs back: they set the LR or the end of the run. (One that
        only names checkpoints or paces evaluation restarts harmlessly, or lives on in the file name;
        one the code sets back to 0 at each pass over the data is the index of a batch in its epoch.)"""
        def compute():
            keys = set()
            for event in self.model.of_kind(COUNTER_INCREMENT):
                # (a local moved in no loop of its function, `steps = steps + 1`, adjusts a budget once: it
                # counts nothing; an attribute may be moved by a method its caller's loop calls)
                once = not event.site.loops and isinstance(event.subject, cst.Name) and event.site.scope.name != "<module>"
                if not once and self.feeds(event) & {"schedule", "lr", "stop"}:
                    keys.add(self.model.roles.key(event.subject, event.site.scope))
            return keys - self.reset_each_pass - self.reset_in_their_loop
        return self.model.remember(("resume_keys",), compute)

    @cached_property
    def reset_in_their_loop(self) -> Set[str]:
        """Counters set back to a literal inside the loop that advances them (`bad += 1` on a
        non-finite loss, `bad = 0` on a good one): a streak or a position in a window, which starts
        over by itself; a resumed run does not need it back."""
        found = set()
        for increment in self.model.of_kind(COUNTER_INCREMENT):
            loop = increment.site.loop
            key = self.model.roles.key(increment.subject, increment.site.scope)
            if loop is not None and any(loop in site.loops for site in self._literal_writes.get(key, ())):
                found.add(key)
        return found

    @cached_property
    def _literal_writes(self) -> Dict[str, List[Site]]:
        """Key -> the sites where the module sets it to an integer literal (`n = 0`, `best, n = x, 0`)."""
        found: Dict[str, List[Site]] = defaultdict(list)
        for node, site in self.model.structure.statements:
            if not isinstance(node, cst.Assign):
                continue
            for target in node.targets:
                for element, value in _paired(target.target, node.value):
                    key = self.model.roles.key(element, site.scope) if isinstance(element, (cst.Name, cst.Attribute)) else None
                    if key and isinstance(value, cst.Integer):
                        found[key].append(site)
        return found

    def schedule_basis(self, event: Event) -> str:
        """What a scheduler call counts: its `# steplint: schedule=` comment; else batches when it is
        built from the number of batches its loop runs (an LR range test) or, stepped every batch under
        accumulation, its length counts that loop's batches; "constant" for a schedule that never moves the
        learning rate (it counts nothing); else the setting."""
        if self.model.remember(("intent comments",), lambda: "steplint:" in self.model.source.text):  # none: no need to place the call
            first, last = self.model.text.rows(event.site.statement)
            declared = intent_basis(self.model.source, range(first, last + 1))
            if declared:
                return declared
        if event.kind == SCHEDULER_STEP and never_moves(self.model, event):
            return "constant"
        if event.kind == SCHEDULER_STEP and (sized_by_its_loops_batches(self.model, event) is not None or sized_in_the_batches_it_steps_per(self.model, event)):
            return "batches"
        if event.kind == SCHEDULER_STEP and self._stepped_at_a_cadence(event):
            return "batches"
        return self.model.settings.schedule_basis

    def _stepped_at_a_cadence(self, event: Event) -> bool:
        """Stepped once every k passes (`if i > 0 and i % 100 == 0:`), a cadence that is not the
        window boundary: each step stands for k attempts, a position in the data that one skipped
        update does not move (and gating it on that one update would drop k passes of schedule)."""
        guards = self.model.guards
        if event.role is not None and event.role.metric:
            return False  # (a plateau schedule stepped at evaluation counts evaluations)
        return any(MODULO in guards.kinds(g) and WINDOW_BOUNDARY not in guards.kinds(g) and not g.negated for g in event.site.guards)

    def per_update_scheduler(self, event: Event) -> bool:
        """A scheduler call that advances one step per call and that the user, not a framework, drives."""
        role = event.role
        return (
            event.kind == SCHEDULER_STEP
            and not event.explicit_position
            and role is not None
            and not (role.prepared or role.engine_owned or role.metric)
            and self.schedule_basis(event) == COMMITTED_UPDATES
        )


def _returned_at(value: Optional[cst.BaseExpression], name: str) -> Optional[int]:
    """Where a `return` hands back the name: -1 when it returns the name alone, the place in the tuple
    it returns (`return step, loss`), else None."""
    if isinstance(value, cst.Name) and value.value == name:
        return -1
    if isinstance(value, cst.Tuple):
        places = [i for i, e in enumerate(value.elements) if isinstance(e.value, cst.Name) and e.value.value == name]
        return places[0] if len(places) == 1 and not any(isinstance(e, cst.StarredElement) for e in value.elements) else None
    return None


def _paired(target: cst.BaseExpression, value: cst.BaseExpression) -> List[tuple]:
    """(target, value) pairs of an assignment, element by element for `a, b = x, 0`."""
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) and len(target.elements) == len(value.elements):
        return [pair for t, v in zip(target.elements, value.elements) for pair in _paired(t.value, v.value)]
    return [(target, value)]


def _reads_length_of(expr: cst.BaseExpression, data: Set[str]) -> bool:
    """`len(loader)` (or `len(loader) // accum`) for one of the data names."""
    return any(
        isinstance(sub, cst.Call) and dotted(sub.func) == "len" and len(sub.args) == 1 and dotted(sub.args[0].value) in data
        for sub in walk_expressions(expr)
    )


def enumerated(model: "ModuleModel", loop: cst.For, site: Site) -> Optional[cst.Call]:
    """The `enumerate(...)` call a loop iterates: also inside a progress bar (`tqdm(enumerate(loader))`),
    and through a name set once to one (`pbar = tqdm(enumerate(loader)); for i, batch in pbar:`)."""
    iterated = loop.iter
    if isinstance(iterated, cst.Name):
        once = model.roles.command_line.set_once(site.scope.owner_of(iterated.value) or model.roles.command_line.module_scope, iterated.value)
        iterated = once[0] if once is not None else iterated
    iterated = unwrap_progress(iterated)
    return iterated if isinstance(iterated, cst.Call) and dotted(iterated.func) == "enumerate" else None
