"""Tuning across many GPUs: the same plan, store and results as ``tune``, run on Dask.

The driver (this process) plans every shape's candidates exactly as ``tune`` does
(``tune.plan_candidates``), drops what the results store already holds for this run
context (resume), and submits one task per shape (or per ``batch`` candidates) to a
Dask cluster, largest expected cost first: the analytic model's time of the shape
times its number of candidates. Each Dask worker owns one GPU (CUDA_VISIBLE_DEVICES)
and runs the task in gemmtune's own crash-proof worker pool (bench/workers.py) on
that GPU, so a crashing kernel costs one candidate, as in ``tune``; the task returns
plain result dicts. Only the driver writes the SQLite store (one writer), with the run
context of the workers' device, each result once per (problem, choice, context).

Dask because its wheels are pure Python (they can be carried to an offline GPU
machine: scripts/fetch_cluster_wheels.sh), one worker process per GPU is its usual
layout (``dask worker --nworkers 1`` with CUDA_VISIBLE_DEVICES, or dask-cuda), a task
whose worker dies is re-run on another worker by the scheduler, and it is widely
installed. (Ray's wheel is too large to carry and needs its raylet binary.)

Each candidate's result is written the moment the worker has it (the task sends it as a
Dask event, ``log_event``; the task's reply repeats them all), so a driver stopped part way
keeps every finished measurement, as ``tune`` does. The driver claims its candidates in the
store before it submits them (ResultStore.claim, renewed while it runs, released however it
ends), as ``tune`` does: drivers and plain tuners sharing one store split the work, and each
waits for what another holds.

* A worker that dies mid-task (killed, lost host): the scheduler re-runs the task
  elsewhere (up to ``distributed.scheduler.allowed-failures`` deaths, default 3); a task
  that raises is run again by the scheduler up to ``retries`` more times. Its candidates
  are measured again from the start; a result already written is never written twice.
* A worker whose device or software differs from the run's (the most common among the
  workers at start) is avoided, and any result it returns is rejected, not written; its
  task is sent again, up to ``retries`` more times, else left for a rerun.
* The driver stopped (Ctrl-C, kill -9): every result it received is in the store; a rerun
  measures the rest. Ctrl-C reaches the driver only (the workers of ``local:N`` ignore
  SIGINT), which closes the cluster and says one line.

Example::

    >>> import gemmtune
    >>> r = gemmtune.tune(shapes, store="results.sqlite", cluster="local:2")  # doctest: +SKIP
    >>> r = gemmtune.tune(shapes, cluster="tcp://10.0.0.1:8786")              # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import signal
import sys
import threading
import time
import uuid
import warnings
from collections import Counter
from concurrent.futures import CancelledError
from pathlib import Path
from typing import Callable, Iterable, Sequence

from . import kernels
from .bench import DEFAULT_RUNNER
from .bench.workers import WorkerPool, visible_gpus
from .configs import AtenConfig, Choice
from .problem import Problem
from .shapes import Shape
from .store import ResultStore, RunContext
from .table import as_table
from .tuning import plan as P
from .tuning.executor import COMPILE_NICE, MAX_COMPILE_WORKERS, usable_cpus
from .tuning.progress import Progress
from .tuning.recorder import POLL_S, Recorder, result_row, table_to_merge, write_table
from .tuning.results import FAILED, TuneResult
from .tuning.runoff import RUNOFF_MARGIN, RUNOFF_TIE, runoff_winner, wants_runoff
from .tuning.tuner import context_of, report_coverage, run_device

try:  # the plugin must be a WorkerPlugin to be registered; without Dask this module still imports
    from distributed import SpecCluster as _SpecCluster
    from distributed import WorkerPlugin as _WorkerPlugin
    from distributed.core import Status as _Status
except ImportError:
    _SpecCluster = _WorkerPlugin = object
    _Status = None

# A task that raises (not one whose worker dies: the scheduler counts those) is tried
# this many more times; a result from a worker on another device is resubmitted as often.
DEFAULT_RETRIES = 2
# How long a worker may take to start its pools (torch import, CUDA context, compile workers)
# before the run goes on without it; a GPU worker took 8 s on an H200 host, the interpreter's
# ~30 s on a 2-core CPU machine.
START_TIMEOUT_S = 300.0
PLUGIN_PREFIX = "gemmtune-pool-"
INSTALL_HINT = "the cluster needs Dask: pip install 'gemmtune[cluster]' (or 'dask[distributed]')"
# A driver that has waited this long (for workers to join or start, for another tuner's
# candidates) says what it waits for, once.
SAY_AFTER_S = 5.0
# How often a driver renews its claims in the store (Recorder.renew; each renewal lasts a minute
# plus one candidate's timeout), and how often it looks at what another tuner sharing it holds.
RENEW_S = 20.0
OTHERS_POLL_S = 4 * POLL_S
# Each local:N worker ignores SIGINT from its start (a Dask preload, run as the worker starts).
IGNORE_SIGINT = "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)"
# The Dask event topic of every run's results as they come ([run id, JSON text] each): one topic,
# as the scheduler keeps the last 1000 events of each topic it ever saw. A driver process routes
# each event to its run (_ROUTES: run id -> that run's inbox); others' runs are not its own.
RESULTS_TOPIC = "gemmtune-results"
_ROUTES: dict[str, queue.SimpleQueue] = {}


def _route(event) -> None:
    """A RESULTS_TOPIC event (``(time, [run id, text])``) to its run's inbox, if it runs here."""
    run, text = event[1]
    box = _ROUTES.get(run)
    if box is not None:
        box.put(("result", None, text))


@contextlib.contextmanager
def waiting_for(what: str, after: float | None = None):
    """Around a wait: one line on stderr saying what it waits for, should it last ``after``
    seconds (SAY_AFTER_S); nothing when it ends sooner."""
    timer = threading.Timer(SAY_AFTER_S if after is None else after,
                            lambda: print(f"[gemmtune] waiting for {what}", file=sys.stderr, flush=True))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def failure_line(e: BaseException, retries: int) -> str:
    """Why a task gave no answer, naming what was tried: a worker's death is re-run by the
    scheduler (``allowed-failures``), an exception ``retries`` more times.

    >>> failure_line(ValueError("no"), 2)
    'the task raised on each of its 3 tries: ValueError: no'
    >>> class KilledWorker(Exception):
    ...     allowed_failures = 3
    >>> print(failure_line(KilledWorker(), 2))
    the worker running the task died on each of its 4 tries (distributed.scheduler.allowed-failures 3): see the workers' logs
    """
    if type(e).__name__ == "KilledWorker":
        n = getattr(e, "allowed_failures", None)
        tries = f"each of its {n + 1} tries" if isinstance(n, int) else "each try"
        return (f"the worker running the task died on {tries} (distributed.scheduler.allowed-failures {n}): "
                "see the workers' logs")
    if isinstance(e, CancelledError):
        return f"the cluster cancelled the task ({type(e).__name__})"
    return f"the task raised on each of its {retries + 1} tries: {type(e).__name__}: {e}"


def _distributed():
    try:
        import distributed
    except ImportError:
        raise ValueError(INSTALL_HINT) from None
    return distributed


def parse_cluster(address: str) -> tuple[str, int | str]:
    """('local', N) for 'local:N'; ('address', text) for a scheduler address.

    >>> parse_cluster("local:2"), parse_cluster("tcp://10.0.0.1:8786"), parse_cluster("localhost:8786")
    (('local', 2), ('address', 'tcp://10.0.0.1:8786'), ('address', 'localhost:8786'))
    """
    text = str(address).strip()
    head, _, n = text.partition(":")
    if head == "local":  # not 'localhost:8786', a scheduler on this host
        if not n.isdigit() or int(n) < 1:
            raise ValueError(f"--cluster {text!r}: write local:N with N >= 1 worker processes (one per GPU)")
        return "local", int(n)
    if "://" not in text and ":" not in text:
        raise ValueError(f"--cluster {text!r}: give a Dask scheduler address (tcp://host:8786) or local:N")
    return "address", text


def local_cluster(n: int, *, gpus: list[str] | None = None, env: dict | None = None):
    """A Dask cluster on this host: ``n`` single-threaded worker processes, worker i pinned to
    GPU i with CUDA_VISIBLE_DEVICES (the way dask-cuda's LocalCUDACluster does it); without GPUs,
    ``n`` CPU workers (the Triton interpreter). More workers than GPUs is refused: two workers
    timing on one GPU disturb each other's timings.

    Example::

        >>> from distributed import Client
        >>> with local_cluster(2) as c, Client(c) as client:     # doctest: +SKIP
        ...     gemmtune.tune(shapes, cluster=client)
    """
    import logging

    distributed = _distributed()
    gpus = visible_gpus() if gpus is None else list(gpus)
    if gpus and n > len(gpus):
        raise ValueError(f"local:{n} asks for {n} workers but {len(gpus)} GPU(s) are visible ({','.join(gpus)}): "
                         "one worker per GPU")
    src = str(Path(__file__).resolve().parents[1])
    workers = {}
    for i in range(n):
        wenv = {k: str(v) for k, v in (env or {}).items()}
        if gpus:
            wenv["CUDA_VISIBLE_DEVICES"] = gpus[i]
        # The workers must import this very gemmtune, also from a source tree.
        path = os.environ.get("PYTHONPATH")
        wenv["PYTHONPATH"] = src + (os.pathsep + path if path else "")
        # memory_limit 0: the worker process holds little; the GPU work runs in its children.
        workers[f"gpu{gpus[i]}" if gpus else f"cpu{i}"] = {
            "cls": distributed.Nanny,
            # silence_logs: the workers' INFO lines would drown the progress and the table.
            # preload: Ctrl-C is the driver's (see _without_sigint).
            "options": {"nthreads": 1, "env": wenv, "memory_limit": 0, "silence_logs": logging.ERROR,
                        "preload": [IGNORE_SIGINT]}}
    scheduler = {"cls": distributed.Scheduler, "options": {"dashboard": False, "dashboard_address": None}}
    return _without_sigint(lambda: NannyCluster(workers=workers, scheduler=scheduler, silence_logs=logging.ERROR))


def _without_sigint(start: Callable[[], object]):
    """``start()`` (which starts the cluster's event-loop thread, the thread every worker process
    is spawned from, also a restarted one) run in a thread that blocks SIGINT: its threads, and
    the processes they spawn, inherit the mask. A terminal's Ctrl-C goes to the whole foreground
    process group; the worker processes are in it, and each printed a KeyboardInterrupt traceback
    while the driver shut the cluster down. The mask keeps it from them until their preload
    (IGNORE_SIGINT) ignores it; the driver alone gets it.

    multiprocessing's resource tracker is started first: its first start, done in whichever thread
    spawns first, unblocks SIGINT in that thread after it (multiprocessing.resource_tracker)."""
    if not hasattr(signal, "pthread_sigmask"):
        return start()
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    made: dict = {}

    def run():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            made["cluster"] = start()
        except BaseException as e:  # noqa: BLE001 -- raised in the caller's thread below
            made["error"] = e

    t = threading.Thread(target=run, name="gemmtune-cluster-start", daemon=True)
    t.start()
    t.join()  # Ctrl-C meanwhile: raised here; distributed closes a cluster left so at exit
    if "error" in made:
        raise made["error"]
    return made["cluster"]


class NannyCluster(_SpecCluster):
    """``local_cluster``'s SpecCluster: a worker whose process dies is restarted by its nanny,
    however long the restart takes; the cluster never closes a nanny for it.

    SpecCluster, told by the scheduler that a worker left, closes that worker's nanny for good
    ``distributed.deploy.lost-worker-timeout`` (15 s) later unless a worker of that name is
    registered at that very moment (a timer meant to reap lost job-queue workers). A nanny's
    restart (new process, imports, registration) took 3.5 s on 2 idle cores and up to 16.7 s
    with 6 busy processes beside it, and a timer left from an earlier death of the same worker
    fires whenever it falls inside a later restart, however short: either way the nanny was
    closed mid-restart and the cluster ran one worker short from then on (tests/test_cluster.py
    failed so on a 2-core CI runner).
    A nanny still running is left to bring its worker back; the timer stays for one that is
    closing or closed, as in SpecCluster. ``_update_worker_status`` is SpecCluster's private
    hook: were it renamed, this override would go unused and SpecCluster's timer would apply."""

    def _update_worker_status(self, op, msg):
        if op == "remove":
            name = self.scheduler_info["workers"].get(msg, {}).get("name")
            nanny = self.workers.get(name)
            if nanny is not None and nanny.status == _Status.running:
                # Cluster's own bookkeeping only (forget the worker's address), not SpecCluster's timer.
                return super(_SpecCluster, self)._update_worker_status(op, msg)
        return super()._update_worker_status(op, msg)


class PoolPlugin(_WorkerPlugin):
    """Each Dask worker's gemmtune pools: one benchmark worker on the worker's GPU and, on a
    GPU, parallel compile workers; started on first use, closed with the Dask worker.

    Registered under a name made of its settings, so a run with the same settings reuses
    the pools a previous run started (their torch import and CUDA context)."""

    idempotent = True  # a second registration under the same name keeps the running pools

    def __init__(self, settings: dict):
        self.settings = dict(settings)
        digest = hashlib.sha1(json.dumps(self.settings, sort_keys=True).encode()).hexdigest()[:12]
        self.name = PLUGIN_PREFIX + digest

    def setup(self, worker=None) -> None:
        self._bench = self._compile = self._info = None
        self._address = getattr(worker, "address", "")

    def teardown(self, worker=None) -> None:
        self.close()

    def close(self) -> None:
        for pool in (getattr(self, "_bench", None), getattr(self, "_compile", None)):
            if pool is not None:
                pool.close()
        self._bench = self._compile = self._info = None

    def bench_pool(self) -> WorkerPool:
        if self._bench is None:
            s = self.settings
            gpus = visible_gpus()
            env = dict(s["env"])
            if not gpus:
                # As tune and local:N do on a machine without a GPU: a worker of a scheduler address
                # ran Triton without the interpreter, and every Triton candidate was stored as a
                # final error ("0 active drivers").
                env.setdefault("TRITON_INTERPRET", "1")
            self._bench = WorkerPool(1, timeout=s["timeout"], runner=s["runner"], env=env,
                                     gpus=gpus[:1]).start()
            n = s["compile_workers"]
            if n is None:
                # The host's cores shared by its workers (one per GPU), at most 16 each as in tune.
                n = min(MAX_COMPILE_WORKERS, usable_cpus() // max(1, s["per_host"].get(_host(self._address), 1))) \
                    if gpus else 0
            if n > 1:
                self._compile = WorkerPool(n, timeout=s["timeout"], runner=s["runner"], env=env,
                                           gpus=gpus[:1], nice=COMPILE_NICE).start()
        return self._bench

    def info(self) -> dict:
        if self._info is None:
            self._info = self.bench_pool().info()
        return self._info


def _host(address: str) -> str:
    """'tcp://10.0.0.1:4242' -> '10.0.0.1'."""
    return address.partition("://")[2].rpartition(":")[0] or address


def _plugin(name: str) -> PoolPlugin:
    from distributed import get_worker

    worker = get_worker()
    for other, plugin in list(worker.plugins.items()):
        # One set of pools per worker: another run's (other settings) holds a GPU context.
        if other.startswith(PLUGIN_PREFIX) and other != name and isinstance(plugin, PoolPlugin):
            plugin.close()
    return worker.plugins[name]


def worker_info(plugin_name: str) -> dict:
    """Task: start this worker's pools and report its device and software (bench.runner.info)."""
    from distributed import get_worker

    return {"worker": get_worker().address, "pid": os.getpid(), "info": _plugin(plugin_name).info()}


def run_task(task: dict) -> dict:
    """Task: verify and time ``task['items']`` ([problem key, choice id] pairs) on this worker's
    GPU, compiling first in its compile workers when it has them. Returns the worker, its device
    report, the seconds taken and [problem key, choice id, result dict] per candidate. With
    ``task['run']``, each result is also sent as it comes (a Dask event, RESULTS_TOPIC: the
    driver writes it at once). ``task['op'] == 'runoff'``: ``task['choices']`` of
    ``task['problem']`` timed together in interleaved rounds instead (tuning.runoff), the
    worker's result under 'runoff'."""
    from distributed import get_worker

    t0 = time.monotonic()
    worker = get_worker()
    plugin = _plugin(task["plugin"])
    info = plugin.info()
    seed, timer = task["seed"], task["timer"]
    head = {"worker": worker.address, "pid": os.getpid(), "info": info}
    if task.get("op") == "runoff":
        job = {"problem": task["problem"], "choices": list(task["choices"]), "seed": seed, "timer": timer}
        res = next((r for _, r in plugin.bench_pool().map([job], op="runoff")),
                   {"status": "error", "reason": "the pool returned no result"})
        return {**head, "seconds": time.monotonic() - t0, "runoff": res}
    run = task.get("run")
    out: dict[tuple[str, str], dict] = {}

    def got(p: str, c: str, res: dict) -> None:
        out[(p, c)] = res
        if run:
            worker.log_event(RESULTS_TOPIC, [run, json.dumps({**head, "results": [[p, c, res]]})])

    items = [tuple(it) for it in task["items"]]
    if plugin._compile is not None:
        need = [it for it in items if Choice.parse(it[1]).needs_compile]
        for t, res in plugin._compile.map([{"problem": p, "choice": c, "seed": seed} for p, c in need], op="compile"):
            if res.get("status") in FAILED:  # recorded as is; the rest is benchmarked
                got(t["problem"], t["choice"], res)
    todo = [{"problem": p, "choice": c, "seed": seed, "timer": timer} for p, c in items if (p, c) not in out]
    for t, res in plugin.bench_pool().map(todo):
        got(t["problem"], t["choice"], res)
    return {**head, "seconds": time.monotonic() - t0,
            "results": [[p, c, out[(p, c)]] for p, c in items if (p, c) in out]}


def accept(ctx: RunContext, reply: dict) -> str | None:
    """None when ``reply`` (of ``run_task``) was measured under ``ctx``; else why it is rejected.

    >>> ctx = RunContext("NVIDIA H100", "9.0", "2.6", "3.2", "0.1")
    >>> info = {"device_name": "NVIDIA A100", "capability": "8.0", "torch": "2.6", "triton": "3.2",
    ...         "gemmtune": "0.1"}
    >>> accept(ctx, {"worker": "tcp://b:1", "info": info})
    "worker tcp://b:1 runs on 'NVIDIA A100' (8.0, torch 2.6, triton 3.2), the run's device is 'NVIDIA H100' (9.0, torch 2.6, triton 3.2)"
    """
    got = context_of(reply["info"])
    if got == ctx:
        return None

    def say(c):
        return f"{c.device_name!r} ({c.capability}, torch {c.torch_version}, triton {c.triton_version})"
    return f"worker {reply.get('worker', '?')} runs on {say(got)}, the run's device is {say(ctx)}"


def connect(cluster, env: dict):
    """``(client, own client, own cluster)`` for 'local:N' or a scheduler address: the caller
    closes the last two where they are not None (the cluster is None for an address). A
    ``distributed.Client`` is used as it is (nothing to close). ``env`` is the workers'
    environment; a local cluster without GPUs runs the Triton interpreter, and ``env`` records
    that (TRITON_INTERPRET=1)."""
    distributed = _distributed()
    if isinstance(cluster, distributed.Client):
        return cluster, None, None
    kind, where = parse_cluster(cluster)
    own_cluster = None
    if kind == "local":
        gpus = visible_gpus()
        if not gpus:
            env.setdefault("TRITON_INTERPRET", "1")
        with waiting_for(f"{where} local worker process(es) to start"):
            own_cluster = where = local_cluster(where, gpus=gpus, env=env)
    try:
        with waiting_for(f"the Dask scheduler at {where} to answer" if isinstance(where, str)
                         else "the local cluster's scheduler to answer"):
            client = distributed.Client(where)
    except BaseException:
        close(own_cluster)
        raise
    return client, client, own_cluster


def close(*owned) -> None:
    """Close what ``connect`` opened (its last two results), in that order; None is skipped."""
    for thing in owned:
        if thing is not None:
            thing.close()


def _workers(client) -> dict:
    """The scheduler's workers now ({address: identity}), asked of the scheduler itself.

    Not ``client.scheduler_info()``: it fetches the workers into the client's cache and returns
    that cache, which the client's periodic refresh (every 2 s) overwrites with totals only, no
    workers. Read just after such a refresh every worker looks gone: start_workers then
    dropped a healthy worker still starting its pools (once in 5 starts on 2 loaded cores).
    ``identity()`` without arguments lists every worker (distributed 2024 takes none)."""
    return client.sync(client.scheduler.identity)["workers"]


def start_workers(client, *, timeout: float = 120.0, runner: str = DEFAULT_RUNNER, env: dict | None = None,
                  compile_workers: int | None = None, start_timeout: float = START_TIMEOUT_S,
                  info_fn: Callable[[str], dict] | None = None) -> tuple[PoolPlugin, RunContext, list[str], dict]:
    """Start every worker's pools (or find them running: the plugin is registered under a name
    made of these settings, so the same settings reuse them) and ask each for its device and
    software. Returns the plugin, the run context (the most common among the workers), the
    workers that share it and the first one's device report. A worker with another context is
    warned about and gets no work. A worker that dies while starting (or does not answer within
    ``start_timeout`` s) is warned about and left out; the run goes on with the others and fails
    only when none answered. ``info_fn``: what each worker runs (default ``worker_info``; tests
    wrap it)."""
    info_fn = info_fn or worker_info
    if not _workers(client):
        with waiting_for("a worker to join the cluster (none has yet; at most 300 s)"):
            client.wait_for_workers(1, timeout=300)
    addrs = sorted(_workers(client))
    per_host = dict(Counter(_host(a) for a in addrs))
    plugin = PoolPlugin({"timeout": float(timeout), "runner": runner, "env": dict(env or {}),
                         "compile_workers": compile_workers, "per_host": per_host})
    for attempt in range(3):
        try:
            client.register_plugin(plugin, name=plugin.name)
            break
        except OSError:  # CommClosedError: a worker died while it was being sent the plugin
            # The scheduler keeps the plugin and gives it to the worker its nanny restarts;
            # registering again (idempotent) reaches the rest.
            if attempt == 2:
                raise
            time.sleep(1.0)
        except Exception as e:  # noqa: BLE001 - distributed re-raises a worker's setup error as a bare Exception
            # e.g. "ImportError('No module named torch')" from a worker whose Python has no working
            # gemmtune: one line naming it, not distributed's traceback.
            raise ValueError(f"the cluster's workers could not set up gemmtune ({e}); they must import "
                               "the same gemmtune, torch and triton as this process") from None
    # Every worker starts its pools at once and says which device it has. Each task is pinned
    # to its worker, so one whose worker died would wait forever: it is dropped instead.
    futs = {a: client.submit(info_fn, plugin.name, workers=[a], pure=False,
                             key=f"gemmtune-info-{a}-{time.time_ns()}") for a in addrs}
    infos, lost = [], []
    deadline = time.monotonic() + start_timeout
    with waiting_for(f"{len(futs)} worker(s) to start their pools and report their device (torch import, "
                     f"GPU context, compile workers; at most {start_timeout:g} s)"):
        while futs:
            alive = set(_workers(client))
            for a, f in list(futs.items()):
                if f.status == "finished":
                    infos.append(f.result())
                elif f.status in ("error", "cancelled") or a not in alive or time.monotonic() > deadline:
                    lost.append(a)
                    f.cancel()
                else:
                    continue
                del futs[a]
            if futs:
                time.sleep(0.2)
    for a in lost:
        warnings.warn(f"worker {a} died or did not answer within {start_timeout:g} s while starting its GPU "
                      "pools: it gets no work", RuntimeWarning, stacklevel=3)
    if not infos:
        raise RuntimeError(f"no cluster worker started its pools ({len(lost)} lost): see the workers' logs")
    by_ctx = Counter(context_of(r["info"]) for r in infos)
    ctx = by_ctx.most_common(1)[0][0]  # ties: the first worker's (most_common keeps that order)
    good = [r["worker"] for r in infos if context_of(r["info"]) == ctx]
    for r in infos:
        why = accept(ctx, r)
        if why:
            warnings.warn(f"{why}: it gets no work and its results are rejected", RuntimeWarning, stacklevel=3)
    info = next(r["info"] for r in infos if r["worker"] == good[0])
    return plugin, ctx, good, info


def shape_cost(problem: Problem, n: int, model) -> float:
    """Expected cost of measuring ``n`` candidates of ``problem``: the model's time of cuBLAS on
    it times ``n`` (each candidate is verified and timed over repeats of that order)."""
    try:
        t = float(model.predict(problem, [Choice("aten", AtenConfig())])[0])
    except Exception:  # noqa: BLE001 -- a cost is only an order; never fail a run for it
        t = float(problem.m) * problem.n * problem.k * 2e-12
    return max(t, 0.0) * n


def _batches(items: list, size: int | None) -> list[list]:
    if not size or size >= len(items):
        return [items]
    return [items[i:i + size] for i in range(0, len(items), size)]


def tune_cluster(problems: Iterable[Problem | Shape], *, cluster, families: Sequence[str] | None = None,
                 space: str = "default", store: str | os.PathLike | ResultStore = "gemmtune.sqlite",
                 out: str | os.PathLike | None = None, timeout: float = 120.0, compile_workers: int | None = None,
                 progress: bool = True, runner: str = DEFAULT_RUNNER, device: str | None = None, seed: int = 0,
                 env: dict | None = None, table=None, benchmark_space: str | int = "SAME", fast: bool = False,
                 model=None, retry_failed: bool = False, timing: str = "standard", overwrite: bool = False,
                 deterministic: bool = False, min_gain: float = 0.0, runoff: float = RUNOFF_MARGIN,
                 retries: int = DEFAULT_RETRIES, batch: int | None = None,
                 task_fn: Callable[[dict], dict] = run_task):
    """``tune`` across the GPUs of a Dask cluster; returns the same ``TuneResult``.

    ``cluster``: 'local:N', a scheduler address, or a ``distributed.Client``. ``batch``: at most
    this many candidates per task (default: one task per shape). ``retries``: see the module
    docstring. ``task_fn``: what the workers run per task (default ``run_task``; tests wrap it).
    The rest as in ``tune``, the run-off too (a shape's once its candidates are in, on a
    worker); ``compile_workers`` is per Dask worker (default: on a GPU, the host's cores shared
    by its workers, at most 16; none in the interpreter).

    Example::

        >>> r = tune_cluster(shapes, cluster="local:2", store="results.sqlite")  # doctest: +SKIP
        >>> r.measured, r.reused                                               # doctest: +SKIP
    """
    from .model import AnalyticModel

    from . import __version__
    from .tuning.options import TuneOptions

    t0 = time.monotonic()
    # What tune checks before anything is measured, checked the same way: min_gain's range, one
    # family name as a string, --out a writable file other than the store (a read-only table was
    # replaced with --overwrite, a directory or the store itself failed only after the sweep).
    options = TuneOptions(families=families, space=space, store=store, out=out, timeout=timeout,
                          progress=progress, runner=runner, device=device, seed=seed, table=table,
                          benchmark_space=benchmark_space, fast=fast, model=model, timing=timing,
                          overwrite=overwrite, cluster=cluster, deterministic=deterministic, min_gain=min_gain,
                          runoff=runoff)
    options.check()
    families = options.families
    bspace = P.parse_benchmark_space(benchmark_space, fast)
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise ValueError(f"retries must be an int >= 0, got {retries!r}")
    if batch is not None and (not isinstance(batch, int) or batch < 1):
        raise ValueError(f"batch must be a positive int (candidates per task), got {batch!r}")
    if fast:
        space = "exhaustive"
    if isinstance(model, (str, os.PathLike)) and not Path(model).is_file():
        raise ValueError(f"model file {model} does not exist")
    shapes = P.as_shapes(problems)
    lut = as_table(table)
    coverage = report_coverage(lut, table, shapes, progress, bspace)
    earlier = table_to_merge(out, overwrite)
    families = list(families) if families else list(kernels.FAMILIES)
    for f in families:
        kernels.get(f)
    wenv = dict(env or {})
    client, own_client, own_cluster = connect(cluster, wenv)
    own_store = not isinstance(store, ResultStore)
    db = ResultStore(store) if own_store else store
    futures: list = []
    rec = None
    run = uuid.uuid4().hex  # this run's results as they come: RESULTS_TOPIC events routed to inbox
    inbox: queue.SimpleQueue = queue.SimpleQueue()  # ("result", None, text), ("done" | "runoff", which, future)
    try:
        plugin, ctx, good, info = start_workers(client, timeout=timeout, runner=runner, env=wenv,
                                                compile_workers=compile_workers)
        if ctx.gemmtune_version != __version__:
            # The driver plans with its gemmtune and names it in the table; rows measured by another
            # would be stored under that one's version, the table under this one's.
            raise ValueError(f"the cluster's workers run gemmtune {ctx.gemmtune_version}, this process "
                             f"gemmtune {__version__}: install the same gemmtune on the workers")
        startup = time.monotonic() - t0
        representative = bool(info.get("representative", False))
        dev = run_device(info, device, ctx, earlier, out, lut)
        ranker = P.load_ranker(model, dev, ctx.triton_version) if bspace != "SAME" else None
        plan = P.CandidatePlan(tuple(families), space, dev, lut, bspace, ranker, deterministic=deterministic)
        rec = Recorder(db, ctx, retry_failed=retry_failed, timeout=timeout, min_gain=min_gain)
        coster = AnalyticModel(dev)

        # Plan: each distinct problem once; what the store holds for this context is reused; what
        # is left is claimed (tuners sharing the store split the work), what others hold waited for.
        plans: dict[str, list[Choice]] = {}
        picked: dict[str, tuple] = {}
        refine: set[str] = set()  # whole spaces, refined once their sweep is in (plan.refine_forms)
        waiting: dict[str, list] = {}  # problem key -> [(problem, choice)] another tuner holds
        work = []  # (cost, order, problem, [choice ids])
        reused = 0

        def tasks_of(p: Problem, todo) -> list[tuple]:
            """Work items for ``todo``'s candidates of ``p``: at most ``batch`` a task, numbered on
            from the items so far."""
            parts = _batches([c.id for _, c in todo], batch) if todo else []
            return [(shape_cost(p, len(part), coster), len(work) + j, p, part) for j, part in enumerate(parts)]

        renewed = time.monotonic()
        for s in shapes:
            key = s.problem.key
            if key in plans:
                continue
            if time.monotonic() - renewed >= RENEW_S:  # planning thousands of shapes takes minutes
                rec.renew()
                renewed = time.monotonic()
            planned = plan(s.problem)
            plans[key] = planned.choices
            picked[key] = (planned.k, planned.why)
            if planned.refine:
                refine.add(key)
            done, todo = rec.pending(s.problem, plans[key])
            reused += sum(c.id in done for c in plans[key])
            todo, others = rec.claim(s.problem, todo)
            if others:
                waiting[key] = others
            work += tasks_of(s.problem, todo)
        # Largest expected cost first, so that the last tasks to finish are short ones.
        work.sort(key=lambda w: (-w[0], w[1]))
        problems_by_key = {s.problem.key: s.problem for s in shapes}
        shape_of = {}
        for s in shapes:
            shape_of.setdefault(s.problem.key, s)
        written: set[tuple[str, str]] = set()
        rejected: list[str] = []
        tried: dict[int, int] = {}
        running: set[int] = set()  # work items sent and not answered
        runoffs: dict[str, tuple[str, dict]] = {}  # problem key -> (the sweep's best, the run-off's result)
        runoffs_running: set[str] = set()
        seconds: Counter = Counter()
        measured = 0

        def submit(i: int):
            _, _, p, part = work[i]
            tried[i] = tried.get(i, 0) + 1
            f = client.submit(task_fn, {"plugin": plugin.name, "items": [[p.key, c] for c in part], "seed": seed,
                                        "timer": timing, "run": run},
                              key=f"gemmtune-{i}-{tried[i]}-{time.time_ns()}",
                              priority=len(work) - i, retries=retries, pure=False, workers=good,
                              allow_other_workers=True)
            futures.append(f)
            running.add(i)
            f.add_done_callback(lambda f, i=i: inbox.put(("done", i, f)))

        left: Counter = Counter(p.key for _, _, p, _ in work)

        def more(p: Problem, todo) -> None:
            """``todo``'s candidates of ``p`` (claimed by this driver) sent as tasks after the start."""
            bar.grow(task, len(todo))
            for item in tasks_of(p, todo):  # appended: an item's order is its index in work
                work.append(item)
                left[p.key] += 1
                submit(item[1])

        def refined(p: Problem) -> None:
            """As tune's sweep does once a whole space is timed: the fastest tile's other
            triton_static forms, submitted as one more task of ``p`` (plan.refine_forms)."""
            nonlocal reused
            if p.key not in refine:
                return
            refine.discard(p.key)  # once
            extra = P.refine_forms(p, plans[p.key], rec.times(p, plans[p.key]))
            if not extra:
                return
            plans[p.key] = plans[p.key] + extra
            done, todo = rec.pending(p, extra)
            reused += sum(c.id in done for c in extra)
            todo, others = rec.claim(p, todo)
            if others:
                waiting[p.key] = others
            more(p, todo)

        def send_runoff(p: Problem) -> None:
            """As tune does: a winner other than cuBLAS within ``runoff`` of it is timed again beside
            cuBLAS, on a worker (run_task's 'runoff')."""
            r = rec.summarize(shape_of[p.key], plans[p.key])
            if not wants_runoff(r.best, r.best_ms, r.aten_ms, runoff):
                return
            f = client.submit(task_fn, {"op": "runoff", "plugin": plugin.name, "problem": p.key,
                                        "choices": [r.best, "aten"], "seed": seed, "timer": timing},
                              key=f"gemmtune-runoff-{time.time_ns()}", priority=len(work) + 1, retries=retries,
                              pure=False, workers=good, allow_other_workers=True)
            futures.append(f)
            runoffs_running.add(p.key)
            f.add_done_callback(lambda f, best=r.best, key=p.key: inbox.put(("runoff", (key, best), f)))

        def settle(p: Problem) -> None:
            """Once ``p``'s tasks are all in and no other tuner holds any of its candidates: its
            whole space refined (once), then its claims released and its run-off sent."""
            if left[p.key] or p.key in waiting:
                return
            refined(p)
            if left[p.key] or p.key in waiting:
                return
            rec.release(p)
            send_runoff(p)

        def keep(reply: dict) -> int:
            """Write the results of ``reply`` (run_task's, or one of its events) not written yet,
            when its worker measured under the run's context; how many were written."""
            nonlocal measured
            if accept(ctx, reply):
                return 0
            rows = []
            for pk, cid, res in reply.get("results", ()):
                if (pk, cid) in written or pk not in problems_by_key:
                    continue  # a duplicate answer (an event and its reply, a re-run task): the first stays
                written.add((pk, cid))
                rows.append(result_row(problems_by_key[pk], Choice.parse(cid), res))
            db.record_many(ctx, rows)
            measured += len(rows)
            bar.advance(task, by=len(rows))
            return len(rows)

        def answered(i: int, f) -> None:
            running.discard(i)
            _, _, p, part = work[i]
            try:
                reply = f.result()
            except Exception as e:  # noqa: BLE001 -- the task gave no answer, after every try
                rejected.append(f"{p.key}: {failure_line(e, retries)}")
                return
            why = accept(ctx, reply)
            if why:
                if tried[i] <= retries:
                    submit(i)
                else:
                    rejected.append(f"{p.key}: {why} (the task was sent {tried[i]} times)")
                return
            keep(reply)
            seconds[p.key] += reply.get("seconds", 0.0)
            left[p.key] -= 1
            if left[p.key] == 0 and p.key not in waiting:
                bar.advance(task, description=f"candidates ({p.key.split(':')[1]} done)", by=0)
            settle(p)

        def ran_off(key: str, best: str, f) -> None:
            runoffs_running.discard(key)
            try:
                reply = f.result()
            except Exception as e:  # noqa: BLE001 -- the sweep's decision stands, its reason recorded
                runoffs[key] = (best, {"status": "error", "reason": failure_line(e, retries)})
                return
            why = accept(ctx, reply)
            runoffs[key] = (best, {"status": "error", "reason": why} if why else reply.get("runoff", {}))

        def look_at_others() -> None:
            """What other tuners hold: count what they finished, take over what they left."""
            nonlocal reused
            for key in list(waiting):
                p = problems_by_key[key]
                came, take, still = rec.poll_others(p, waiting.pop(key))
                reused += came
                if still:
                    waiting[key] = still
                if take:
                    more(p, take)
                settle(p)

        _ROUTES[run] = inbox
        client.subscribe_topic(RESULTS_TOPIC, _route)  # the same handler for every run of this process
        with Progress(progress) as bar:
            task = bar.task("candidates", sum(len(w[3]) for w in work))
            for i in range(len(work)):
                submit(i)
            for s in shapes:  # a whole space the store already held: refined now (claims released)
                settle(s.problem)
            looked = idle = time.monotonic()
            said = False
            while running or waiting or runoffs_running:
                try:
                    kind, about, x = inbox.get(timeout=POLL_S)
                except queue.Empty:
                    kind = None
                if kind == "result":
                    keep(json.loads(x))
                elif kind == "done":
                    answered(about, x)
                elif kind == "runoff":
                    ran_off(*about, x)
                now = time.monotonic()
                if now - renewed >= RENEW_S:  # queued tasks can wait longer than a claim lasts
                    rec.renew()
                    renewed = now
                if waiting and now - looked >= OTHERS_POLL_S:
                    look_at_others()
                    looked = now
                if running or runoffs_running or not waiting:
                    idle = now
                elif not said and now - idle >= SAY_AFTER_S:
                    said = True
                    n = sum(map(len, waiting.values()))
                    print(f"[gemmtune] waiting for {n} candidate(s) of {len(waiting)} shape(s) that another tuner "
                          f"sharing {db.path} is measuring (taken over if it stops)", file=sys.stderr, flush=True)
        for line in rejected:
            warnings.warn(f"not recorded (rerun to measure it): {line}", RuntimeWarning, stacklevel=2)
        result_shapes = []
        for s in shapes:
            r = rec.summarize(s, plans[s.problem.key])
            best, res = runoffs.get(s.problem.key, (None, None))
            if best is not None and r.best == best:
                winner, r.runoff = runoff_winner(res, r.best, max(min_gain, RUNOFF_TIE))
                if winner == "aten":
                    r.best, r.best_ms = "aten", r.aten_ms
            r.tune_s = seconds.get(s.problem.key, 0.0)
            r.k, r.k_reason = picked.get(s.problem.key, (None, None))
            result_shapes.append(r)
        tbl, table_path = write_table(result_shapes, ctx, out, overwrite)
        result = TuneResult(result_shapes, ctx, representative, time.monotonic() - t0, measured, reused,
                              tbl, table_path, Path(db.path), 0.0, startup, 0, rejected=rejected,
                              table_coverage=coverage)
        return result
    finally:
        # However the run ends (an error, Ctrl-C): nothing left running, the claims given back.
        for f in futures:
            if not f.done():
                f.cancel()
        _ROUTES.pop(run, None)
        try:
            if rec is not None:
                rec.release()
        finally:
            close(own_client, own_cluster)
            if own_store:
                db.close()
