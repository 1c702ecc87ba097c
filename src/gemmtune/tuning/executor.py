"""Where candidates run: the benchmark worker pool (this host's, or a warm server's) and the
compile workers that compile the next shapes while the current one is timed.

``Executor`` owns both for one run: ``measure(todo)`` yields each candidate's result as its
worker answers; ``compile_ahead(todo)`` queues a shape's compilation and returns a Future of
its compile results. ``compile_pool_size`` (pure) says how many compile workers to start.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Iterator, Sequence

# CPU niceness of the compile workers (they run beside the benchmark worker), their pool's bound
# and the cores to share, defined where the entry point pre-starts them (spawn.prestart_compile_count);
# the tuner's compile pool and the cluster's use them from here.
from gemmtune_entry.spawn import COMPILE_NICE, MAX_COMPILE_WORKERS, usable_cpus  # noqa: F401

from ..bench.workers import WorkerPool
# A run that compiles at most this many candidates in all has the benchmark worker compile them
# itself. Cold one-shape `tune --fast` on an H100 (4 candidates, 3 to compile; 2026-11-26,
# benchmarks/results/2026-11-26-h100-s15-fast-next/call2-*): with 3 compile workers, whose torch
# import and CUDA context take ~3.5 s, the tune took 5.7-8.0 s, 3.3-5.5 s of it waiting for
# compiles; with the benchmark worker compiling (--in-process), 3.0-3.9 s.
SEQUENTIAL_COMPILES = 4


def compile_pool_size(requested: int | None, *, cpus: int, on_gpu: bool, per_shape: Sequence[int | None],
                      compile_ahead: int) -> int:
    """How many compile workers ``tune`` starts; 0 or 1 starts none (the benchmark worker
    compiles each candidate itself, just before timing it).

    ``requested`` (the caller's ``compile_workers``) is taken as given. By default: none in
    the CPU interpreter (nothing is compiled there); on a GPU min(cpus, 16), and no more
    than can be compiling at once when every shape's number of compiles is known
    (``per_shape``: at most that many per shape, None where it is the whole search space):
    the sum of the largest ``compile_ahead + 1`` of them, the shape being timed and those
    compiled ahead. Each worker is a process with its own torch import and CUDA context,
    so idle ones cost start-up time and memory; and none start when the whole run compiles
    at most SEQUENTIAL_COMPILES candidates (every shape's count known): ``--fast`` on one
    aligned shape (3 compiles) starts none.

    >>> compile_pool_size(None, cpus=32, on_gpu=True, per_shape=[3], compile_ahead=2)
    0
    >>> compile_pool_size(None, cpus=32, on_gpu=True, per_shape=[3, 3], compile_ahead=2)
    6
    >>> compile_pool_size(None, cpus=32, on_gpu=True, per_shape=[5] * 29, compile_ahead=2)
    15
    >>> compile_pool_size(None, cpus=32, on_gpu=True, per_shape=[5, None], compile_ahead=2)
    16
    """
    if requested is not None:
        return requested
    if not on_gpu:
        return 0
    n = min(cpus, MAX_COMPILE_WORKERS)
    if per_shape and all(b is not None for b in per_shape):
        if sum(per_shape) <= SEQUENTIAL_COMPILES:
            return 0
        n = min(n, sum(sorted(per_shape, reverse=True)[:compile_ahead + 1]))
    return n


# Candidates of one problem compiled together (Executor.measure): enough for a --fast or top-k
# shape in one go, few enough that a crash or time-out in a precompile costs little.
PRECOMPILE_CHUNK = 16


def precompile_chunks(todo: list, size: int = PRECOMPILE_CHUNK) -> list[list]:
    """``todo`` ([(problem, choice)]) cut into runs of at most ``size`` of one problem, in order.

    >>> precompile_chunks([("p", 1), ("p", 2), ("q", 3), ("q", 4), ("q", 5)], size=2)
    [[('p', 1), ('p', 2)], [('q', 3), ('q', 4)], [('q', 5)]]
    """
    out: list[list] = []
    for p, c in todo:
        if out and out[-1][0][0] == p and len(out[-1]) < size:
            out[-1].append((p, c))
        else:
            out.append([(p, c)])
    return out


class Compiler:
    """The parallel compile workers, driven from one background thread.

    ``submit(todo, seed)`` queues one shape's candidates and returns a Future of their
    compile results by (problem key, choice id). The thread takes every job queued at
    that moment into one pool.map (no workers idle between shapes) and completes each
    job's Future as soon as its last result is in. Triton's on-disk cache is shared, so
    the benchmark worker then loads binaries instead of compiling. The thread never
    touches the results store: the caller records what failed. ``close()`` stops a
    running map within about a second and shuts the workers down.
    """

    def __init__(self, cpool: WorkerPool):
        self.pool = cpool
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gemmtune-compile", daemon=True)
        self._thread.start()

    def submit(self, todo, seed: int) -> Future:
        fut: Future = Future()
        self._jobs.put(([{"problem": p.key, "choice": c.id, "seed": seed} for p, c in todo], fut))
        return fut

    def _loop(self) -> None:
        while True:
            batch = [self._jobs.get()]
            while True:
                try:
                    batch.append(self._jobs.get_nowait())
                except queue.Empty:
                    break
            closing = any(job is None for job in batch)
            jobs = [job for job in batch if job is not None and job[1].set_running_or_notify_cancel()]
            if closing or self._stop.is_set():
                for _, fut in jobs:
                    fut.set_exception(RuntimeError("compilation stopped: the tuner is shutting down"))
                return
            self._run(jobs)

    def _run(self, jobs: list) -> None:
        owner, results, left, tasks = {}, [], [], []
        for j, (ts, fut) in enumerate(jobs):
            results.append({})
            left.append(len(ts))
            for t in ts:
                owner[id(t)] = j
                tasks.append(t)
            if not ts:
                fut.set_result({})
        try:
            for t, res in self.pool.map(tasks, op="compile", stop=self._stop):
                j = owner[id(t)]
                results[j][(t["problem"], t["choice"])] = res
                left[j] -= 1
                if left[j] == 0:
                    jobs[j][1].set_result(results[j])
        except BaseException as e:  # noqa: BLE001 -- never leave the caller waiting on a Future
            for _, fut in jobs:
                if not fut.done():
                    fut.set_exception(e)
            return
        for j, (_, fut) in enumerate(jobs):
            if not fut.done():  # stopped part-way: what finished
                fut.set_result(results[j])

    def close(self) -> None:
        """Stop and shut down; a second call does nothing."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._jobs.put(None)
        self._thread.join()
        self.pool.close()  # the thread has ended: no other user of the pool is left


class Executor:
    """The benchmark pool and, with ``n_compile`` > 1, the compile workers of one run.

    ``pool``: a started benchmark pool (WorkerPool or bench.server.RemotePool, entered by
    the caller); the compile workers start here, at once, so their torch imports run while
    the benchmark worker starts. ``close()`` stops them (the caller closes ``pool``)."""

    def __init__(self, pool, *, seed: int = 0, timing: str = "standard", n_compile: int = 0,
                 compile_pool: WorkerPool | None = None, precompile: bool = False):
        self.pool, self.seed, self.timing = pool, seed, timing
        self.compiler = Compiler(compile_pool.start()) if compile_pool is not None and n_compile > 1 else None
        self.n_compile = n_compile if self.compiler is not None else 0
        # Without compile workers, the benchmark worker compiles each chunk of a problem's
        # candidates together on threads before timing them (bench.measure.precompile).
        self.precompile = precompile and self.compiler is None
        self.precompile_s = 0.0  # seconds the benchmark worker spent in those compiles
        self.precompiled = 0  # candidates it compiled that way

    def info(self) -> dict:
        """The benchmark worker's device and software (bench.runner.info)."""
        return self.pool.info()

    def measure(self, todo) -> Iterator[tuple]:
        """Verify and time ``todo`` ([(problem, choice)]): (problem, choice, result dict) as
        each result arrives. With ``precompile``, each chunk of PRECOMPILE_CHUNK of a problem's
        candidates is compiled together first (``_precompile``)."""
        todo = list(todo)
        if not todo:  # all in the store: a pool not started yet (tuner.local_report) stays so
            return
        for part in (precompile_chunks(todo, PRECOMPILE_CHUNK) if self.precompile else [todo]):
            self._precompile(part)
            index = {(p.key, c.id): (p, c) for p, c in part}
            tasks = [{"problem": p.key, "choice": c.id, "seed": self.seed, "timer": self.timing} for p, c in part]
            for t, res in self.pool.map(tasks):
                p, c = index[(t["problem"], t["choice"])]
                yield p, c, res

    def _precompile(self, part) -> bool:
        """Have the benchmark worker compile ``part``'s candidates (one problem) together: its
        'precompile' op, where ``self.precompile``. An optimisation only: a worker or server
        without the op, a crash or any error leaves each candidate to compile when it is timed, as
        before. False where the op is refused for the whole run (not asked again)."""
        need = [c for _, c in part if c.needs_compile]
        if not self.precompile or len(need) < 2:
            return True
        task = {"problem": part[0][0].key, "choices": [c.id for c in need], "seed": self.seed}
        try:
            for _, res in self.pool.map([task], op="precompile"):
                if res.get("status") == "ok":
                    self.precompile_s += float(res.get("s", 0.0))
                    self.precompiled += int(res.get("compiled", 0))
                elif res.get("status") != "skipped" or res.get("for_run", True):
                    # A worker from before the op (an error result), a crash or a time-out, or a
                    # skip that holds for the run (no GPU / no AsyncCompileMode there): compiled one
                    # by one from now on. (A skip for this problem alone, an empty one or one
                    # compile, leaves the others to try.)
                    self.precompile = False
                    return False
        except Exception:  # noqa: BLE001 - e.g. a server that refuses the op: compiled one by one instead
            self.precompile = False
            return False
        return True

    def runoff(self, problem, choices: list[str]) -> dict:
        """``choices`` of ``problem`` verified and timed together in interleaved rounds by the
        benchmark worker (its 'runoff' op: bench.rounds.runoff); the worker's result dict."""
        task = {"problem": problem.key, "choices": list(choices), "seed": self.seed, "timer": self.timing}
        for _, res in self.pool.map([task], op="runoff"):
            return res
        return {"status": "error", "reason": "the pool returned no result"}

    def compile_ahead(self, todo) -> Future | None:
        """Queue the compilation of ``todo``'s candidates that need it; None when there is
        nothing to compile or no compile workers."""
        todo = [pc for pc in todo if pc[1].needs_compile]
        if self.compiler is None or not todo:
            return None
        return self.compiler.submit(todo, self.seed)

    def close(self) -> None:
        if self.compiler is not None:
            self.compiler.close()
