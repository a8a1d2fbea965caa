"""Worker processes that keep what they parse, for a run's two phases.

A file the run lints is parsed once: the project index summarises it in some worker, which keeps the
parse (steplint.engine.parse_and_keep), and its lint later goes to that same worker. With a pool
that hands tasks to any worker, either the parent summarised every linted file alone (one core busy
while the others waited) or each file was parsed twice.
"""

from __future__ import annotations

import gc
import signal
import threading
from collections import deque

from steplint import interrupt
from typing import TYPE_CHECKING, Any, Callable, Deque, Dict, Iterator, List, Optional, Sequence

if TYPE_CHECKING:  # (multiprocessing is imported when workers start: a run without them never needs it)
    from multiprocessing.connection import Connection

# Fewer tasks than this are done in the calling process: starting workers costs more.
PARALLEL_FROM_TASKS = 16


class Pool:
    """`size` worker processes, started on first use (a pool of one is this process). `owner(path)`
    names the worker that keeps a file's parse; `map` runs each task in its owner when it has one,
    else in the first free worker."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.owners: Dict[str, int] = {}  # path -> the worker that parsed it (and keeps the parse)
        self._assigned = [0] * size  # characters parsed by each worker so far, to balance owners
        self._workers: List[tuple] = []  # (process, connection)
        self._prepare: Optional[Callable[[], None]] = None

    def owner(self, path: str, cost: int) -> int:
        """The worker that parses `path` (cost: its length) and keeps the parse: the least loaded."""
        if path not in self.owners:
            chosen = min(range(self.size), key=self._assigned.__getitem__)
            self.owners[path] = chosen
            self._assigned[chosen] += cost
        return self.owners[path]

    def map(self, function: Callable, calls: Sequence[tuple], owners: Sequence[Optional[int]], lost: Callable[[tuple, str], Any]) -> Iterator:
        """`function(*call)` for each call, yielded in order as they finish; `owners[i]`: the worker
        that must run call i (it keeps what the call reuses), or None. A task's exception is raised
        where its result would be yielded. A worker that dies (killed, out of memory, a crash in
        native code) is started again and its task run once more; a task that ends a worker twice
        gets `lost(call, why)` as its result: one file's crash never costs the run. A pool of one
        runs the tasks here."""
        if self.size < 2:
            yield from (function(*call) for call in calls)
            return
        self.start()
        owned: Dict[int, Deque[int]] = {w: deque() for w in range(self.size)}
        shared: Deque[int] = deque()
        for index, owner in enumerate(owners):
            (owned[owner] if owner is not None else shared).append(index)
        busy: Dict[int, int] = {}  # worker -> the task it runs
        done: Dict[int, tuple] = {}
        retried: set = set()
        following = 0

        def feed(worker: int) -> None:
            # One task per worker at a time: the parent sends only to a worker waiting to receive,
            # so a large task and a large result never wait on each other in full pipes.
            queue = owned[worker] or shared
            if queue:
                index = queue.popleft()
                busy[worker] = index
                self._workers[worker][1].send((function, calls[index]))

        for worker in range(self.size):
            feed(worker)
        from multiprocessing.connection import wait

        while following < len(calls):
            connections = {self._workers[w][1]: w for w in busy}
            if not connections:
                raise RuntimeError("steplint's worker pool has tasks left but no worker to run them")
            for connection in wait(list(connections)):
                worker = connections[connection]  # type: ignore[index]
                index = busy.pop(worker)
                try:
                    result = connection.recv_bytes()  # type: ignore[union-attr]
                except (EOFError, OSError):
                    why = self._restart(worker)
                    if index in retried:
                        done[index] = (True, lost(calls[index], why))
                    else:
                        retried.add(index)
                        owned[worker].appendleft(index)
                    feed(worker)
                    continue
                feed(worker)  # (its next task first: the worker computes while this process unpickles)
                done[index] = _unpickled(result)
            while following in done:
                succeeded, value = done.pop(following)
                following += 1
                if not succeeded:
                    raise value
                yield value

    def start(self, prepare: Optional[Callable[[], None]] = None) -> None:
        """Start the workers now (else at the first map); each runs `prepare` first (imports), while
        this process goes on with what precedes their first tasks."""
        if self.size >= 2 and not self._workers:
            self._prepare = prepare
            self._workers = [self._worker() for _ in range(self.size)]

    def _worker(self) -> tuple:
        import multiprocessing

        # Forked from a process with threads (the server's engine thread), a worker can inherit a
        # lock held by another thread and wait forever: there, workers start afresh.
        context = multiprocessing.get_context() if threading.current_thread() is threading.main_thread() else multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        process = context.Process(target=_serve, args=(theirs, self._prepare), daemon=True)
        process.start()
        theirs.close()
        return process, ours

    def _restart(self, worker: int) -> str:
        """Start a dead worker again (what it kept is lost: its files are parsed anew); why it died."""
        process, connection = self._workers[worker]
        connection.close()
        process.join(timeout=5)
        code = process.exitcode
        self._workers[worker] = self._worker()
        return f"the process analysing it ended ({f'signal {-code}' if code is not None and code < 0 else f'exit status {code}'})"

    def close(self) -> None:
        """End the workers: each finishes its task (up to 5 s), or at once after Ctrl-C. (A worker
        ignores SIGINT, and the command ends with os._exit, without multiprocessing's own cleanup:
        only this ends them.)"""
        patient = not interrupt.received()
        for process, connection in self._workers:
            try:
                connection.send(None)
            except OSError:
                pass
            connection.close()
        for process, _ in self._workers:
            if patient:
                process.join(timeout=5)
            if process.is_alive():  # interrupted mid-task: nothing it does now is waited for
                process.terminate()
                process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()
        self._workers = []

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _serve(connection: Connection, prepare: Optional[Callable[[], None]]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    interrupt.install_in_worker()  # (the parent ends a worker mid-task after Ctrl-C: a file being written is finished first)
    try:
        _serve_tasks(connection, prepare)
    except interrupt.Interrupted:
        return  # (ended by the parent once its write was done)


def _serve_tasks(connection: Connection, prepare: Optional[Callable[[], None]]) -> None:
    if prepare is not None:
        prepare()
    while True:
        try:
            task = connection.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        function, call = task
        try:
            result = (True, function(*call))
        except interrupt.Interrupted:
            raise  # (ended by the parent: no one waits for the result)
        except BaseException as error:  # noqa: BLE001 - raised again in the parent, at this task
            result = (False, error)
        # What a task leaves (the parses a worker keeps for its lints) holds no reference cycles: out
        # of the collector's sight, full collections do not rescan it after every task.
        gc.freeze()
        try:
            connection.send(result)
        except Exception as error:  # an unpicklable result or exception
            connection.send((False, RuntimeError(f"{type(error).__name__}: {error}")))


def _unpickled(data: bytes):
    import pickle  # (start-up: only a run that uses workers unpickles their results)

    return pickle.loads(data)
