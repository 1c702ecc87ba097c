"""WorkerPool: subprocess workers that survive crashes and hangs.

Each worker is ``python -m gemmtune.bench.worker`` started with Popen, pinned to
one GPU with CUDA_VISIBLE_DEVICES before torch is imported, and fed one task at a
time over a pipe. The pool turns every way a task can fail into data:

* the runner reports an exception (compile error, wrong result) -> its status;
* the worker dies (segfault, abort, illegal memory access poisons the CUDA
  context) -> status ``crashed`` with the exit signal and the tail of its stderr,
  and a fresh worker replaces it, so later tasks run on a healthy context;
* the worker does not answer within ``timeout`` seconds -> it is killed, the task
  is ``timeout``, and a fresh worker replaces it.

Example::

    with WorkerPool(timeout=30) as pool:
        for task, result in pool.map([{"problem": key, "choice": "aten"}]):
            print(result["status"], result.get("device_ms"))
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from gemmtune_entry.spawn import Prestarted, spawn_worker, visible_gpus

from . import DEFAULT_RUNNER

STDERR_TAIL = 1500
# How long the pool waits for a worker whose reply pipe closed to exit, for its exit status (how it
# died); one still running then is killed and its task is a crash.
EXIT_WAIT_S = 10.0


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


@dataclass
class _Worker:
    gpu: str | None
    proc: subprocess.Popen
    log_path: Path
    buf: bytes = b""
    task_index: int | None = None
    deadline: float = 0.0
    ready: bool = False  # the worker says so once torch is imported
    warm: bool = False  # ... and this once it has paid its once-per-process costs (bench.worker)

    def stderr_tail(self) -> str:
        try:
            data = self.log_path.read_bytes()[-STDERR_TAIL:]
            return data.decode(errors="replace").strip()
        except OSError:
            return ""


def current_first(gpus: list[str], current: int | None = None) -> list[str]:
    """``gpus`` (as ``visible_gpus`` lists them: position i is this process's CUDA device i) with
    the caller's current CUDA device first, so that a one-worker pool tunes on the GPU the caller
    works on (a model on cuda:1 is tuned on GPU 1, not on GPU 0, which another job may be using).
    ``current``: that device index; None reads it from torch where CUDA is initialised in this
    process, and leaves ``gpus`` as they are where it is not (nothing to follow; initialising CUDA
    here would cost a context on every GPU).

    >>> current_first(["0", "1", "2"], 1), current_first(["4", "5"], 0), current_first(["0"], 3)
    (['1', '2', '0'], ['4', '5'], ['0'])
    """
    if current is None:
        import torch

        if not torch.cuda.is_initialized():
            return list(gpus)
        current = torch.cuda.current_device()
    if not 0 <= current < len(gpus):
        return list(gpus)
    return list(gpus[current:]) + list(gpus[:current])


def _start_failed(slot: int, n: int, e: Exception) -> str:
    """The error of a pool whose worker ``slot`` (from 0) of ``n`` could not be started.

    >>> _start_failed(2, 4, BlockingIOError(11, "Resource temporarily unavailable"))
    'worker 3 of 4 could not be started ([Errno 11] Resource temporarily unavailable); stopped the 2 started before it'
    >>> _start_failed(0, 1, MemoryError())
    'worker 1 of 1 could not be started (MemoryError)'
    """
    why = str(e) or type(e).__name__
    return f"worker {slot + 1} of {n} could not be started ({why})" + (
        f"; stopped the {slot} started before it" if slot else "")


class WorkerPool:
    """A pool of worker subprocesses; see the module docstring.

    ``n``: number of workers (default: one per visible GPU, or 1 without GPUs).
    ``gpus``: GPU ids to pin workers to, round-robin (default: all visible).
    ``runner``: ``module:function`` each worker uses to run a task.
    ``env``: extra environment for the workers (e.g. TRITON_INTERPRET).
    ``nice``: CPU niceness the workers add to their own (e.g. compile workers that
    should not take CPU from a benchmark worker running beside them).
    ``prestarted``: workers started before the pool (the ``gemmtune`` entry point starts a
    tune's first worker before importing torch: gemmtune_entry.spawn); each is adopted in
    place of the worker the pool would start with the same GPU, runner, niceness and
    environment, and stopped by the pool from then on.
    """

    def __init__(self, n: int | None = None, *, timeout: float = 120.0, runner: str = DEFAULT_RUNNER,
                 gpus: list[str] | None = None, env: dict[str, str] | None = None,
                 startup_timeout: float = 300.0, nice: int = 0, prestarted: Sequence[Prestarted] = ()):
        self.gpus = visible_gpus() if gpus is None else list(gpus)
        self.n = n if n is not None else max(1, len(self.gpus))
        if self.n < 1:
            raise ValueError(f"a worker pool needs at least one worker, got n={n}")
        self.timeout = float(timeout)
        self.startup_timeout = float(startup_timeout)
        self.runner = runner
        self.env = dict(env or {})
        self.nice = int(nice)
        self.prestarted = list(prestarted)
        self.workers: list[_Worker] = []
        self.restarts = 0
        self._logdir = tempfile.TemporaryDirectory(prefix="gemmtune-workers-")
        self._sel = selectors.DefaultSelector()
        self._spawned = 0

    # ----------------------------------------------------------------- lifecycle
    def _gpu(self, slot: int) -> str | None:
        return self.gpus[slot % len(self.gpus)] if self.gpus else None

    def _spawn(self, slot: int) -> _Worker:
        gpu = self._gpu(slot)
        self._spawned += 1
        log_path = Path(self._logdir.name) / f"worker{slot}-{self._spawned}.log"
        return self._watch(_Worker(gpu, spawn_worker(gpu, self.runner, self.nice, self.env, log_path), log_path))

    def _adopt(self, slot: int) -> _Worker | None:
        """A pre-started worker that is the one ``_spawn(slot)`` would start, now this pool's."""
        gpu = self._gpu(slot)
        for p in self.prestarted:
            if p.matches(gpu, self.runner, self.nice, self.env):
                p.adopted = True
                return self._watch(_Worker(gpu, p.proc, p.log_path))
        return None

    def _watch(self, w: _Worker) -> _Worker:
        os.set_blocking(w.proc.stdout.fileno(), False)
        self._sel.register(w.proc.stdout, selectors.EVENT_READ, w)
        return w

    def start(self) -> "WorkerPool":
        if not self.workers:
            self.workers = self._start_all()
        return self

    def _start_all(self) -> list[_Worker]:
        """A worker for each slot, adopted or started. Where one cannot be started (a process
        limit, no memory), those started before it are stopped and one OSError says which failed
        and why: built in one expression, they were in no list that close() sees (nor is close()
        called when ``with WorkerPool()`` fails to enter), and ran on, each holding a CUDA context
        on a GPU, while anything held the failed pool; a retried start() began a second set."""
        started: list[_Worker] = []
        try:
            for slot in range(self.n):
                started.append(self._adopt(slot) or self._spawn(slot))
        except BaseException as e:
            for w in started:
                self._kill(w)  # adopted ones too: the pool took them over
            if not isinstance(e, Exception):
                raise  # Ctrl-C mid-start: as it was, with nothing left running
            raise OSError(_start_failed(len(started), self.n, e)) from e
        return started

    def _kill(self, w: _Worker) -> None:
        try:
            self._sel.unregister(w.proc.stdout)
        except (KeyError, ValueError):
            pass
        if w.proc.poll() is None:
            try:
                os.killpg(w.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                w.proc.kill()
        try:
            w.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for f in (w.proc.stdin, w.proc.stdout):
            try:
                f.close()
            except OSError:
                pass

    def _replace(self, w: _Worker) -> _Worker:
        self._kill(w)
        self.restarts += 1
        slot = self.workers.index(w)
        nw = self._spawn(slot)
        self.workers[slot] = nw
        return nw

    def _alive(self, w: _Worker) -> _Worker:
        """``w``, or its replacement if it died while idle (never blame a task for that)."""
        if w.proc.poll() is not None:
            return self._replace(w)
        return w

    def close(self) -> None:
        for w in self.workers:
            if w.proc.poll() is None:
                try:
                    w.proc.stdin.write(b'{"op": "exit"}\n')
                    w.proc.stdin.flush()
                except OSError:
                    pass
        deadline = time.monotonic() + 5
        for w in self.workers:
            try:
                w.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            self._kill(w)
        self.workers = []
        self._sel.close()
        self._logdir.cleanup()

    def __enter__(self) -> "WorkerPool":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ protocol
    def _send(self, w: _Worker, req: dict, deadline_s: float) -> bool:
        try:
            w.proc.stdin.write((json.dumps(req) + "\n").encode())
            w.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return False
        # Until the worker is warm, the clock is its start-up allowance; the task's own timeout
        # starts when it says warm (see _read_lines). It started at "ready", before the worker's
        # warm-up (runner.prewarm), which then counted against the first task's timeout.
        w.deadline = time.monotonic() + (deadline_s if w.warm else self.startup_timeout)
        return True

    def _read_lines(self, w: _Worker) -> tuple[list[dict], bool]:
        """Complete reply lines available from ``w``, and whether it hit EOF."""
        eof = False
        while True:
            try:
                chunk = os.read(w.proc.stdout.fileno(), 65536)
            except BlockingIOError:
                break
            except OSError:
                eof = True
                break
            if not chunk:
                eof = True
                break
            w.buf += chunk
        replies = []
        while b"\n" in w.buf:
            line, w.buf = w.buf.split(b"\n", 1)
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                msg = None
            if msg == {"ready": True}:
                w.ready = True
                continue
            if msg == {"warm": True} and w.ready:
                w.warm = True
                w.deadline = time.monotonic() + self.timeout
                continue
            if not w.ready:
                # Printed while the worker imported gemmtune and torch, before it moved its own
                # output to stderr (a site hook's banner, an import-time print): not a reply, as
                # it answers nothing before it says ready. It was taken as the first task's result
                # (an error, the real result then dropped) or as the device report.
                continue
            if not isinstance(msg, dict):
                # (a reply that is JSON but no object, e.g. a number, failed the map on .get)
                msg = {"status": "error", "reason": f"garbled worker reply: {line[:200]!r}"}
            replies.append(msg)
        return replies, eof

    def info(self) -> dict:
        """Device and version facts from the first worker (the parent never touches CUDA)."""
        self.start()
        w = self._alive(self.workers[0])
        if not self._send(w, {"op": "info"}, self.timeout):
            raise RuntimeError(f"worker failed to start: {w.stderr_tail()}")
        while True:
            left = w.deadline - time.monotonic()
            if left <= 0:
                self._replace(w)
                raise RuntimeError(f"worker did not answer 'info' within {self.startup_timeout:.0f} s")
            for key, _ in self._sel.select(timeout=min(left, 1.0)):
                if key.data is not w:
                    continue
                replies, eof = self._read_lines(w)
                if replies:
                    w.deadline = 0.0
                    return replies[0]
                if eof:
                    tail = w.stderr_tail()
                    self._replace(w)
                    raise RuntimeError(f"worker {_describe_exit(w.proc.poll())} at start-up:\n{tail}")

    def map(self, tasks: Iterable[dict], op: str = "bench",
            on_result: Callable[[int, dict, dict], None] | None = None,
            stop: threading.Event | None = None) -> Iterator[tuple[dict, dict]]:
        """Run ``tasks`` across the workers; yield (task, result) as each finishes.

        Results arrive in completion order. ``on_result(index, task, result)`` is
        called before each yield. A crash or timeout costs only that task.

        ``stop``: an event another thread may set to end the map early (within about
        a second): tasks not yet finished yield nothing, and the workers running them
        are killed (and replaced when the pool is next used).

        A pool is not thread-safe: drive each pool from one thread at a time (two
        pools may run in two threads at once, e.g. compiling while benchmarking).
        """
        self.start()
        tasks = list(tasks)
        queue = deque(range(len(tasks)))
        running: dict[int, _Worker] = {}
        try:
            while queue or running:
                if stop is not None and stop.is_set():
                    for w in running.values():
                        self._kill(w)
                        w.task_index = None
                    return
                for w in self.workers:
                    if w.task_index is None and queue:
                        w = self._alive(w)
                        i = queue.popleft()
                        if not self._send(w, {"op": op, "task": tasks[i]}, self.timeout):
                            res = self._failure(w, "crashed", "worker pipe closed before the task was sent")
                            self._replace(w)
                            yield self._finish(i, tasks[i], res, on_result)
                            continue
                        w.task_index = i
                        running[i] = w
                if not running:
                    continue
                now = time.monotonic()
                nearest = min(w.deadline for w in running.values())
                events = self._sel.select(timeout=max(0.0, min(nearest - now, 1.0)))
                for key, _ in events:
                    w = key.data
                    if w.task_index is None:
                        _, eof = self._read_lines(w)
                        if eof:  # died while idle: replace it before it gets a task
                            self._replace(w)
                        continue
                    replies, eof = self._read_lines(w)
                    if replies:
                        i = w.task_index
                        w.task_index = None
                        running.pop(i, None)
                        if replies[0].get("status") == "crashed":
                            # The worker reported a poisoned CUDA context and is exiting:
                            # replace it now, before it is handed (and blamed for) a new task.
                            self._replace(w)
                        yield self._finish(i, tasks[i], replies[0], on_result)
                    elif eof:
                        i = w.task_index
                        running.pop(i, None)
                        try:
                            w.proc.wait(timeout=EXIT_WAIT_S)  # for its exit status, to say how it died
                        except subprocess.TimeoutExpired:
                            # Its pipe closed but it lingers (a GPU context's teardown after a fault
                            # can outlast the pipe): this raised out of the map and failed the whole
                            # tune. It is killed by _replace below, and the candidate is a crash.
                            pass
                        code = w.proc.poll()
                        what = (f"worker {_describe_exit(code)}" if code is not None
                                else f"worker closed its reply pipe and had not exited {EXIT_WAIT_S:.0f} s later")
                        res = self._failure(w, "crashed", what)
                        self._replace(w)
                        yield self._finish(i, tasks[i], res, on_result)
                now = time.monotonic()
                for i, w in list(running.items()):
                    if w.task_index == i and now > w.deadline:
                        running.pop(i)
                        res = self._failure(w, "timeout", f"no answer within {self.timeout:.0f} s; worker killed" if w.warm
                                            else f"no answer within {self.startup_timeout:.0f} s, its start-up allowance: the worker "
                                            "never finished warming up; worker killed")
                        self._replace(w)
                        yield self._finish(i, tasks[i], res, on_result)
        finally:
            # A map left before it finished (its caller stopped iterating or raised; the server's
            # client went away): the workers still running its tasks answered later, and the next
            # map filed that answer under its own task: one candidate's time recorded for another,
            # and the real one lost (session 45's CPU hunt). They are killed, as ``stop`` kills
            # them, and replaced when the pool is next used.
            for w in running.values():
                if w.task_index is not None:
                    self._kill(w)
                    w.task_index = None

    def _failure(self, w: _Worker, status: str, what: str) -> dict:
        tail = w.stderr_tail()
        last = tail.splitlines()[-3:] if tail else []
        reason = what + (": " + " | ".join(s.strip() for s in last) if last else "")
        return {"status": status, "reason": reason[:2000]}

    @staticmethod
    def _finish(i: int, task: dict, result: dict, on_result) -> tuple[dict, dict]:
        if on_result is not None:
            on_result(i, task, result)
        return task, result
