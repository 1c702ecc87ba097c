"""The tuning pipeline: candidates -> compile -> verify + time -> store -> table.

For each problem it lists the candidates of the chosen kernel families (cuBLAS
always included, as the baseline), skips those the results store already holds
for this exact GPU and software (so a killed run resumes where it stopped),
compiles the rest in parallel worker processes, verifies and times them in one
worker per GPU, records every result (failures included) the moment it arrives,
and writes the winners to a lookup table.

Compiling runs ahead of benchmarking: while one shape is verified and timed, the
compile workers (driven from a background thread, with their own pool) already
compile the next shapes' candidates (``compile_ahead``, default 2 shapes). Only
the main thread touches the results store.

Example::

    >>> import gemmtune
    >>> from gemmtune.problem import Problem
    >>> r = gemmtune.tune([Problem.from_sizes(32, 32, 28672, "bf16")],
    ...                   store="results.sqlite", out="table.json")   # doctest: +SKIP
    >>> r.shapes[0].best, r.shapes[0].speedup                         # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import os
import queue
import re
import sys
import threading
import time
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from . import kernels
from .api import space as family_space
from .bench import DEFAULT_RUNNER
from .bench import measure as _measure
from .bench.measure import Status
from .bench.timing import TIMINGS
from .bench.workers import WorkerPool, visible_gpus
from .device import DeviceInfo
from .problem import Problem
from .shapes import Shape
from .configs import AtenConfig, Choice
from .store import STATUSES, ResultRow, ResultStore, RunContext, claim_owner
from .table import LookupTable, TableChoice, as_table, check_provenance, provenance, required_choices

FAILED = tuple(s.value for s in _measure.FAILED)
RETRYABLE = tuple(s.value for s in _measure.RETRYABLE)
COMPILE_NICE = 10  # CPU niceness of the compile workers (they run beside the benchmark worker)


def candidates(problem: Problem, families: Sequence[str], kind: str, device: DeviceInfo) -> list[Choice]:
    """Every choice of ``families`` for ``problem``, cuBLAS first (always, as the baseline).

    For unaligned problems each candidate also comes as its ``pad+`` variant."""
    out = [Choice("aten", AtenConfig())]
    for fam in families:
        if fam != "aten":
            out += family_space(problem, fam, kind, device)
    if not (problem.aligned_a and problem.aligned_b) or (problem.op == "scaled_mm" and problem.padded() != problem):
        # Unaligned operands: also try each family on zero-padded aligned copies; their
        # configs come from the padded problem they actually run (Problem.padded). scaled_mm
        # also where its K or N is not a multiple of 16 or its operands are not K-major: there
        # cuBLASLt (torch._scaled_mm) and TMA run only on the padded, K-major copies.
        padded = problem.padded()
        out.append(Choice("aten", AtenConfig(), True))
        for fam in families:
            if fam != "aten":
                out += [c.padded() for c in family_space(padded, fam, kind, device)]
    seen, unique = set(), []
    for c in out:
        if c.id not in seen:
            seen.add(c.id)
            unique.append(c)
    return unique


@dataclass
class ShapeResult:
    name: str
    group: str
    problem: Problem
    best: str | None
    best_ms: float | None
    aten_ms: float | None
    tried: int
    failed: int
    statuses: dict = field(default_factory=dict)
    # status -> the first failure's reason (one line), so that a summary can say why
    reasons: dict = field(default_factory=dict)
    # Wall time from the moment the tuner turned to this shape until its last result was
    # in: the wait for whatever of its compilation had not already run ahead (during the
    # previous shapes' benchmarking), then its verification and timing. Compile work done
    # ahead is not counted here, so the shapes' tune_s add up to the run's wall time
    # (less start-up). Near 0 when every candidate was reused.
    tune_s: float = 0.0
    # How many of the model's best were benchmarked (cuBLAS and table choices on top) and
    # why: 'fixed' for benchmark_space=k / DEFAULT, choose_k's reason for 'AUTO'; None
    # when every candidate was benchmarked or a table entry fixed them.
    k: int | None = None
    k_reason: str | None = None

    @property
    def speedup(self) -> float | None:
        if self.best_ms and self.aten_ms:
            return self.aten_ms / self.best_ms
        return None


@dataclass
class TuneResult:
    shapes: list[ShapeResult]
    context: RunContext
    representative: bool
    wall_s: float
    measured: int
    reused: int
    table: LookupTable | None = None
    table_path: Path | None = None
    store_path: Path | None = None
    # Of wall_s, the time the benchmark worker(s) waited for compilation to finish
    # (with compile workers only): much of wall_s here means compiling is the bottleneck.
    compile_wait_s: float = 0.0
    # Of wall_s, the time until the benchmark worker answered (its torch import and CUDA
    # context; the compile workers start at the same time), and the number of compile
    # workers started (compile_pool_size; 0: the benchmark worker compiled).
    startup_s: float = 0.0
    compile_workers: int = 0
    # Work left unrecorded, one line each (a cluster run: a task that failed on every try,
    # or results from a worker on another device); a rerun measures it.
    rejected: list = field(default_factory=list)


def _as_shapes(problems: Iterable) -> list[Shape]:
    out = []
    for i, p in enumerate(problems):
        if isinstance(p, Shape):
            out.append(p)
        elif isinstance(p, Problem):
            out.append(Shape("api", f"{p.m}x{p.n}x{p.k}", p))
        else:
            raise TypeError(f"problems[{i}] must be a Problem or a Shape, not {type(p).__name__}")
    return out


def _row(problem: Problem, choice: Choice, res: dict) -> ResultRow:
    def num(key):
        v = res.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    return ResultRow(
        problem_key=problem.key, choice_id=choice.id, family=choice.family,
        status=res.get("status") if res.get("status") in STATUSES else Status.ERROR.value,
        device_ms=num("device_ms"), eager_ms=num("eager_ms"), rel_err=num("rel_err"),
        reason=str(res.get("reason", ""))[:2000], m=problem.m, n=problem.n, k=problem.k,
        dtype=problem.dtype, out_dtype=problem.out_dtype,
        layout=f"{problem.layout_a}/{problem.layout_b}", aligned=problem.aligned_a and problem.aligned_b,
        params_json=json.dumps(choice.config.params(), sort_keys=True),
        repeats=int(res["repeats"]) if isinstance(res.get("repeats"), int) else None,
        spread=num("spread"),
    )


class _Progress:
    """Progress of a tuning run: a rich bar on a terminal; plain lines otherwise (a log file, CI,
    a pipe), at most one every ``every_s`` seconds plus one per finished shape, each with the
    candidates done, the total and an ETA, so a long run is never silent; nothing when disabled."""

    def __init__(self, enabled: bool, stream=None, every_s: float = 10.0, tty: bool | None = None):
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.every_s = every_s
        self._p = None
        self._tasks: dict[int, list] = {}  # id -> [description, done, total]
        self._next_id = 0
        self._t0 = self._last = 0.0

    def __enter__(self):
        if self.enabled and self.tty:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)
            self._p = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                               TimeElapsedColumn(), TimeRemainingColumn(), transient=False,
                               console=Console(file=self.stream))
            self._p.__enter__()
        self._t0 = self._last = time.monotonic()
        return self

    def task(self, description: str, total: int):
        if not self.enabled:
            return None
        if self._p is not None:
            return self._p.add_task(description, total=total)
        self._next_id += 1
        self._tasks[self._next_id] = [description, 0, total]
        return self._next_id

    def advance(self, task, description: str | None = None, by: int = 1) -> None:
        if task is None:
            return
        if self._p is not None:
            self._p.update(task, advance=by, **({"description": description} if description else {}))
            return
        t = self._tasks.get(task)
        if t is None:
            return
        if description:
            t[0] = description
        t[1] += by
        now = time.monotonic()
        if t[1] >= t[2] or now - self._last >= self.every_s:
            self._last = now
            self._line(t, now)

    def _line(self, t, now) -> None:
        desc, done, total = t
        el = now - self._t0
        eta = f", ETA {el / done * (total - done):.0f} s" if 0 < done < total else ""
        print(f"[gemmtune] {desc}: {done}/{total} ({el:.0f} s elapsed{eta})", file=self.stream, flush=True)

    def remove(self, task) -> None:
        if self._p is not None and task is not None:
            self._p.remove_task(task)
        self._tasks.pop(task, None)

    def __exit__(self, *exc):
        if self._p is not None:
            self._p.__exit__(*exc)


def tune(problems: Iterable[Problem | Shape], *, families: Sequence[str] | None = None,
         space: str = "default", store: str | os.PathLike | ResultStore = "gemmtune.sqlite",
         out: str | os.PathLike | None = None, workers: int | None = None, timeout: float = 120.0,
         compile_workers: int | None = None, progress: bool = True, runner: str = DEFAULT_RUNNER,
         device: str | None = None, seed: int = 0, env: dict | None = None,
         table: LookupTable | str | os.PathLike | None = None,
         benchmark_space: str | int = "SAME", fast: bool = False, model=None,
         retry_failed: bool = False, timing: str = "standard", compile_ahead: int = 2,
         overwrite: bool = False, cluster=None, server: str | os.PathLike | None = None) -> TuneResult:
    """Tune ``problems``: benchmark every candidate once, keep every result, return the winners.

    ``families``: kernel families to search (default: all). ``space``: 'default' or
    'exhaustive'. ``store``: SQLite results file (resumable). ``out``: lookup-table
    JSON to write. ``workers``: benchmark workers (default one per GPU).
    ``compile_workers``: parallel compile processes beside benchmarking (default:
    compile_pool_size: on a GPU up to min(usable CPU cores, 16), no more than can be busy;
    none in the interpreter). They start with the benchmark worker. ``timeout``: seconds a
    candidate may take before its worker is killed. ``device``: built-in GPU whose
    limits shape the spaces when running in the CPU interpreter (default H100).
    ``retry_failed``: measure again candidates the store holds as crashed, timed out
    or errored (by default every stored result, failures included, is final).
    ``runner``: the worker's task handler (tests inject faults through it).
    ``timing``: the timer profile of every measurement (bench.timing.TIMINGS):
    'standard' (default; 20 CUDA-graph replays) or 'quick' (5 shorter replays, fewer
    eager calls: for bulk data collection). Both time L2-cold, report median and
    spread, and verify against fp64 first; each row stores its ``repeats``.
    ``out`` onto an existing table merges (``table.merge``: per problem, the faster measured
    choice first), so a run never loses what an earlier one wrote (a table from another GPU is
    refused before anything is measured); ``overwrite=True`` replaces it instead.
    ``compile_ahead``: how many shapes beyond the one being benchmarked the compile
    workers may compile ahead (default 2; 0 compiles each shape only when its turn
    comes, as in strictly separate phases). Only with compile workers.
    ``table``: a lookup table (or its path) whose entries fix the candidates: a
    problem with an entry benchmarks exactly the entry's choices (one choice: just
    that one, timed once; several: tuned among those only); problems without an
    entry get the normal candidates. A table from another GPU / Triton warns
    (table.check_provenance) and is still used.

    The search space (``space``) and what is benchmarked are separate:
    ``benchmark_space='SAME'`` (default) benchmarks every candidate; ``'DEFAULT'``
    benchmarks as many as the default space holds, the performance model's best of
    the search space; an int k benchmarks the model's k best; ``'AUTO'`` lets k grow
    where the model is unsure (gemmtune.model.topk.choose_k: 1 to 8, more when its
    estimates are close, the problem is far from its training data or a thinly trained
    family ranks near the top; each shape records its k and why). cuBLAS ('aten', the
    baseline) is always benchmarked on top, and so is every choice a lookup-table
    entry lists (a problem with an entry benchmarks exactly its choices, filtered or
    not). ``fast=True`` is ``space='exhaustive', benchmark_space=1``. ``model``: an
    object with ``predict(problem, choices) -> est. ms`` (see gemmtune.model), or the
    path of a saved learned model (loaded with gemmtune.model.load_model: one made on
    another GPU / triton warns and the analytic model ranks instead); None ranks with
    the learned model shipped for this GPU and triton MAJOR.MINOR, else (with a
    ModelWarning) the analytic model (gemmtune.model.default_model). It is only
    consulted when filtering.

    ``cluster``: run across many GPUs on a Dask cluster instead of this host's worker
    pool: a scheduler address ('tcp://host:8786'), 'local:N' (N worker processes here,
    one per GPU) or a ``distributed.Client`` (see gemmtune.cluster.tune_cluster; needs
    ``pip install gemmtune[cluster]``; ``workers`` and ``compile_ahead`` do not apply).

    ``server``: the Unix socket of a warm worker pool started with ``gemmtune worker --serve``
    (gemmtune.bench.server): its workers run the candidates, so no worker starts on this
    call's critical path; still crash-proof (the server's workers are subprocesses).
    ``workers``, ``runner`` and the compile workers are then the server's.
    """
    if cluster is not None:
        from .cluster import tune_cluster
        return tune_cluster(problems, cluster=cluster, families=families, space=space, store=store, out=out,
                            timeout=timeout, compile_workers=compile_workers, progress=progress, runner=runner,
                            device=device, seed=seed, env=env, table=table, benchmark_space=benchmark_space,
                            fast=fast, model=model, retry_failed=retry_failed, timing=timing,
                            overwrite=overwrite)
    t0 = time.monotonic()
    bspace = _benchmark_space(benchmark_space, fast)
    if timing not in TIMINGS:
        raise ValueError(f"timing must be one of {', '.join(map(repr, TIMINGS))}, got {timing!r}")
    if not isinstance(compile_ahead, int) or isinstance(compile_ahead, bool) or compile_ahead < 0:
        raise ValueError(f"compile_ahead must be an int >= 0 (shapes compiled ahead), got {compile_ahead!r}")
    if fast:
        space = "exhaustive"
    if model is not None and not isinstance(model, (str, os.PathLike)) and not callable(
            getattr(model, "predict", None)):
        raise TypeError(f"model must have a predict(problem, choices) method or be a model file path, "
                        f"not {type(model).__name__}")
    if isinstance(model, (str, os.PathLike)) and not Path(model).is_file():
        raise ValueError(f"model file {model} does not exist")
    shapes = _as_shapes(problems)
    lut = as_table(table)  # a bad table fails here, before anything is written
    if out is not None and not Path(out).resolve().parent.is_dir():
        # Fail before the sweep, not after it.
        raise ValueError(f"cannot write the table to {out}: directory {Path(out).resolve().parent} does not exist")
    # The table --out merges into, read now: a bad one fails before the sweep, not after it.
    earlier = as_table(out) if out is not None and not overwrite and Path(out).exists() else None
    families = list(families) if families else list(kernels.FAMILIES)
    for f in families:
        kernels.get(f)
    gpus = visible_gpus()
    wenv = dict(env or {})
    if not gpus:
        wenv.setdefault("TRITON_INTERPRET", "1")
    n_compile = 0 if server is not None else compile_pool_size(
        compile_workers, cpus=usable_cpus(), on_gpu=bool(gpus),
        per_shape=[_compiles_at_most(lut, s.problem, bspace) for s in shapes], compile_ahead=compile_ahead)
    own_store = not isinstance(store, ResultStore)
    db = ResultStore(store) if own_store else store
    owner = claim_owner()  # this tuner, in the store's claims
    redo = RETRYABLE if retry_failed else ()
    measured = reused = 0
    compile_wait = 0.0
    compiler = None
    try:
        if server is not None:
            from .bench.server import RemotePool
            pool_cm = RemotePool(server, timeout=timeout)
        else:
            pool_cm = WorkerPool(workers, timeout=timeout, runner=runner, env=wenv, gpus=gpus)
        with pool_cm as pool:
            # The compile workers start now, so their torch imports run while the benchmark
            # worker starts (niced: compiling runs beside benchmarking, which must not wait
            # for a CPU).
            compiler = (_Compiler(WorkerPool(n_compile, timeout=timeout, runner=runner, env=wenv, gpus=gpus,
                                             nice=COMPILE_NICE).start())
                        if n_compile > 1 else None)
            info = pool.info()
            startup = time.monotonic() - t0
            ctx = RunContext(info["device_name"], info["capability"], info["torch"],
                             info["triton"], info["gemmtune"])
            representative = bool(info.get("representative", False))
            dev = run_device(info, device, ctx, earlier, out, lut)
            ranker = _ranker(model, dev, ctx) if bspace != "SAME" else None

            def shape_candidates(s: Shape) -> list[Choice]:
                cands, kw = plan_candidates(s.problem, families, space, dev, lut, bspace, ranker)
                if kw is not None:
                    picked[s.problem.key] = kw
                return cands

            picked: dict[str, tuple[int, str]] = {}  # problem key -> (k, why) of the model's top-k

            plans: list = []  # candidates of shapes[0 .. len(plans) - 1] (or why there are none)
            compiling: dict[int, Future | None] = {}  # shape index -> its compile job

            def plan_ahead(current: int, upto: int) -> None:
                """Candidates of every shape up to index ``upto``; with compile workers,
                queue their compilation (the compile thread works through it in order)."""
                while len(plans) <= min(upto, len(shapes) - 1):
                    j = len(plans)
                    s = shapes[j]
                    try:
                        plans.append(shape_candidates(s))
                    except Exception as e:  # raised when the shape's turn comes
                        if j == current:
                            raise
                        plans.append(e)
                        continue
                    if compiler is not None:
                        # What is not in the store now; re-checked when the shape's turn
                        # comes (the store only grows, so nothing needed is skipped here).
                        _, todo = _pending(s.problem, plans[j], db, ctx, retry_failed)
                        todo = [pc for pc in todo if pc[1].needs_compile]
                        compiling[j] = compiler.submit(todo, seed) if todo else None

            result_shapes = []

            def measure(todo, bar: _Progress, task) -> None:
                """Verify and time ``todo`` in the benchmark worker(s), recording each result."""
                nonlocal measured
                tasks = [{"problem": p.key, "choice": c.id, "seed": seed, "timer": timing} for p, c in todo]
                index = _index(todo)
                for t, res in pool.map(tasks):
                    p, c = index[(t["problem"], t["choice"])]
                    db.record(ctx, _row(p, c, res))
                    measured += 1
                    bar.advance(task)

            try:
                with _Progress(progress) as bar:
                    overall = bar.task("shapes", len(shapes))
                    # One shape at a time in the benchmark worker(s); compilation runs ahead.
                    for i, s in enumerate(shapes):
                        ts = time.monotonic()
                        plan_ahead(i, i + (compile_ahead if compiler is not None else 0))
                        cands = plans[i]
                        if isinstance(cands, Exception):  # as if planned now: the shapes before are done
                            raise cands
                        done, todo = _pending(s.problem, cands, db, ctx, retry_failed)
                        reused += sum(c.id in done for c in cands)
                        # Tuners sharing the store split the work: measure what this one
                        # claims; what another holds is waited for below (ResultStore.claim).
                        mine = set(db.claim(ctx, s.problem.key, [c.id for _, c in todo], owner,
                                            claim_ttl(timeout, len(todo)), redo))
                        others = [pc for pc in todo if pc[1].id not in mine]
                        todo = [pc for pc in todo if pc[1].id in mine]
                        task = bar.task(f"  {s.name}", len(todo))
                        job = compiling.pop(i, None)
                        if job is not None and todo:
                            if not job.done():
                                # Time what needs no compiling (cuBLAS) while the rest compiles.
                                measure([pc for pc in todo if not pc[1].needs_compile], bar, task)
                                todo = [pc for pc in todo if pc[1].needs_compile]
                            tw = time.monotonic()
                            compiled = job.result()
                            compile_wait += time.monotonic() - tw
                            n_todo = len(todo)
                            todo = _record_compile_failures(todo, compiled, db, ctx)
                            bar.advance(task, by=n_todo - len(todo))  # failed to compile: recorded
                        measure(todo, bar, task)
                        reused += _await_others(s.problem, others, db, ctx, owner, redo, timeout,
                                                lambda pcs: measure(pcs, bar, task))
                        db.release(ctx, s.problem.key, owner)
                        bar.remove(task)
                        r = _summarize(s, cands, db, ctx)
                        r.tune_s = time.monotonic() - ts
                        r.k, r.k_reason = picked.get(s.problem.key, (None, None))
                        result_shapes.append(r)
                        bar.advance(overall)
            finally:
                if compiler is not None:
                    compiler.close()
        table, table_path = write_table(result_shapes, db, ctx, out, overwrite)
        return TuneResult(result_shapes, ctx, representative, time.monotonic() - t0, measured, reused,
                          table, table_path, Path(db.path), compile_wait, startup, n_compile if compiler else 0)
    finally:
        if compiler is not None:
            compiler.close()  # a no-op if closed above; here when the benchmark worker failed to start
        if own_store:
            db.close()


def plan_candidates(problem: Problem, families: Sequence[str], space: str, dev: DeviceInfo,
                    lut: LookupTable | None, bspace: str | int, ranker) -> tuple[list[Choice], tuple | None]:
    """What ``tune`` benchmarks for ``problem``: a table entry's choices, else the candidates of
    ``families``, filtered by ``ranker`` unless ``bspace`` is 'SAME'. Returns (candidates,
    (k, why) of the model's top-k or None). The one plan both ``tune`` and the cluster use."""
    cands = required_choices(lut, problem)
    if cands:
        return cands, None
    cands = candidates(problem, families, space, dev)
    if ranker is None:
        return cands, None
    if bspace == "AUTO":
        cands, k, why = select_adaptive(problem, cands, ranker)
    else:
        k = bspace if isinstance(bspace, int) else len(candidates(problem, families, "default", dev)) - 1
        cands, why = select_by_model(problem, cands, k, ranker), "fixed"
    return cands, (k, why)


def write_table(shapes: list[ShapeResult], db: ResultStore, ctx: RunContext, out, overwrite: bool):
    """The winners as a lookup table, written to ``out`` when given (merged into an existing
    one unless ``overwrite``). Returns (table, path or None)."""
    table = _table(shapes, db, ctx)
    table_path = None
    if out:
        if not overwrite and Path(out).exists():
            from .table import merge
            # Never destroy an earlier table: merge into it (read again: a run sharing it may
            # have written it since; one from another GPU was refused before the sweep).
            table = merge([as_table(out), table])
        table_path = table.save(out)
    return table, table_path


def _compiles_at_most(lut: LookupTable | None, problem: Problem, bspace: str | int) -> int | None:
    """How many candidates of ``problem`` tune may compile, before its candidates are listed:
    a table entry's Triton choices, else k when only the model's k best are benchmarked,
    else None (its whole search space)."""
    listed = required_choices(lut, problem)
    if listed:
        return sum(c.needs_compile for c in listed)
    if bspace == "AUTO":
        from .model.topk import K_MAX
        return K_MAX
    return bspace if isinstance(bspace, int) else None


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
    so idle ones cost start-up time and memory: ``--fast`` on one shape starts none.

    >>> compile_pool_size(None, cpus=32, on_gpu=True, per_shape=[1], compile_ahead=2)
    1
    >>> compile_pool_size(None, cpus=32, on_gpu=True, per_shape=[5] * 29, compile_ahead=2)
    15
    >>> compile_pool_size(None, cpus=32, on_gpu=True, per_shape=[5, None], compile_ahead=2)
    16
    """
    if requested is not None:
        return requested
    if not on_gpu:
        return 0
    n = min(cpus, 16)
    if per_shape and all(b is not None for b in per_shape):
        n = min(n, sum(sorted(per_shape, reverse=True)[:compile_ahead + 1]))
    return n


def usable_cpus() -> int:
    """CPU cores this process may run on: its affinity set where the OS has one (a process
    pinned with taskset, e.g. one collector per GPU), else the machine's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity API on this OS
        return os.cpu_count() or 1


BENCHMARK_SPACES = ("SAME", "DEFAULT", "AUTO")


def _benchmark_space(value, fast: bool) -> str | int:
    """'SAME', 'DEFAULT' or a positive int k; ValueError for anything else."""
    parsed = None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        parsed = value
    elif isinstance(value, str):
        v = value.strip().upper()
        parsed = v if v in BENCHMARK_SPACES else int(v) if v.isdigit() and int(v) >= 1 else None
    if parsed is None:
        raise ValueError(f"benchmark_space must be 'SAME', 'DEFAULT', 'AUTO' or a positive int k (the model's top k), "
                         f"got {value!r}")
    if fast:
        if parsed != "SAME":
            raise ValueError(f"fast=True benchmarks the model's top 1; do not also pass benchmark_space={value!r}")
        return 1
    return parsed


def run_device(info: dict, device: str | None, ctx: RunContext, earlier: LookupTable | None, out,
               lut: LookupTable | None) -> DeviceInfo:
    """The DeviceInfo a run plans for (the benchmark worker's GPU, else the built-in ``device``,
    default H100, in the interpreter), after checking that the table ``out`` merges into
    (``earlier``) was made on this GPU and warning about a ``lut`` from another GPU / triton.
    Shared by ``tune`` and the cluster driver."""
    if info.get("device"):
        d = dict(info["device"])
        d["capability"] = tuple(d["capability"])
        dev = DeviceInfo(**d)
    else:
        dev = DeviceInfo.lookup(device or "h100")
    if earlier is not None and (earlier.provenance["device_name"], earlier.provenance["capability"]) != (
            ctx.device_name, ctx.capability):
        raise ValueError(f"{out} holds a table made on {earlier.provenance['device_name']!r}, this run is on "
                         f"{ctx.device_name!r}: their times do not compare; pass overwrite=True "
                         "(--overwrite) to replace it, or write to another file")
    if lut is not None:
        check_provenance(lut, ctx.device_name, ctx.triton_version)
    return dev


def _ranker(model, dev: DeviceInfo, ctx: RunContext):
    """The model object that ranks candidates: the given one, a loaded file, or the default."""
    from . import model as models  # only the factory and the loader: no concrete model here

    if model is None:
        return models.default_model(dev, triton_version=ctx.triton_version)
    if isinstance(model, (str, os.PathLike)):
        return models.load_model(model, dev, triton_version=ctx.triton_version)
    return model


def select_by_model(problem: Problem, cands: list[Choice], k: int, model) -> list[Choice]:
    """cuBLAS (the baseline, when among ``cands``) plus the ``k`` other candidates the model
    ranks fastest; all of ``cands`` when they are no more than that. Ties and non-finite
    estimates keep the candidates' order (non-finite ones rank last).

    Example::

        >>> class ByIndex:
        ...     def predict(self, problem, choices): return list(range(len(choices)))
        >>> p = Problem.from_sizes(64, 64, 4096, "bf16")
        >>> [c.id for c in select_by_model(p, candidates(p, ["decompose_k"], "default",
        ...      DeviceInfo.lookup("h100")), 2, ByIndex())]
        ['aten', 'decompose_k:s2', 'decompose_k:s4']
    """
    base = [c for c in cands if c.family == "aten" and not c.pad]
    rest = [c for c in cands if not (c.family == "aten" and not c.pad)]
    if len(rest) <= k:
        return cands
    est = [float(x) for x in model.predict(problem, rest)]
    if len(est) != len(rest):
        raise ValueError(f"{type(model).__name__}.predict returned {len(est)} estimates for {len(rest)} choices")
    order = sorted(range(len(rest)), key=lambda i: (est[i] if math.isfinite(est[i]) else math.inf, i))
    return base + [rest[i] for i in order[:k]]


def select_adaptive(problem: Problem, cands: list[Choice], model) -> tuple[list[Choice], int, str]:
    """cuBLAS plus the model's k best others, k chosen by gemmtune.model.topk.choose_k from
    the model's ranking keys, its trust in ``problem`` and its families' training support.
    Returns (candidates, k, why)."""
    from .model.topk import model_k  # pure numpy; the model object is still the one passed in

    base = [c for c in cands if c.family == "aten" and not c.pad]
    rest = [c for c in cands if not (c.family == "aten" and not c.pad)]
    if not rest:
        return cands, 0, "no candidate besides cuBLAS"
    keys, k, why = model_k(model, problem, rest)
    if len(keys) != len(rest):
        raise ValueError(f"{type(model).__name__} returned {len(keys)} ranking keys for {len(rest)} choices")
    order = sorted(range(len(rest)), key=lambda i: (keys[i] if math.isfinite(keys[i]) else math.inf, i))
    return base + [rest[i] for i in order[:k]], min(k, len(rest)), why


def _index(todo):
    """(problem key, choice id) -> (problem, choice), to pair pool results with their task."""
    return {(p.key, c.id): (p, c) for p, c in todo}


def claim_ttl(timeout: float, n: int) -> float:
    """How long a tuner holds its claim on ``n`` candidates: each is killed after ``timeout``
    seconds at worst, plus a minute of slack for compiling and recording."""
    return 60.0 + timeout * max(n, 1)


# How often a tuner looks at the store for the results another tuner is measuring.
POLL_S = 0.5


def _await_others(problem: Problem, others: list, db: ResultStore, ctx: RunContext, owner: str, redo,
                  timeout: float, measure) -> int:
    """Wait until the candidates other tuners claimed have results; any whose claim expired
    (its tuner died) is claimed and measured here. Returns how many came from the others."""
    got = 0
    while others:
        done = {cid for cid, r in db.done(ctx, problem.key).items() if r.status not in redo}
        got += sum(pc[1].id in done for pc in others)
        others = [pc for pc in others if pc[1].id not in done]
        if not others:
            break
        take = set(db.claim(ctx, problem.key, [c.id for _, c in others], owner, claim_ttl(timeout, len(others)),
                            redo))
        if take:
            measure([pc for pc in others if pc[1].id in take])
            others = [pc for pc in others if pc[1].id not in take]
        else:
            time.sleep(POLL_S)
    return got


def _pending(problem: Problem, cands: list[Choice], db: ResultStore, ctx: RunContext, retry_failed: bool):
    """(results to reuse by choice id, [(problem, choice)] still to measure)."""
    done = db.done(ctx, problem.key)
    if retry_failed:
        # Crashes, hangs and errors can be transient (a busy GPU, a killed worker):
        # measure those again; wrong results stay.
        done = {k: r for k, r in done.items() if r.status not in RETRYABLE}
    return done, [(problem, c) for c in cands if c.id not in done]


class _Compiler:
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


def _record_compile_failures(todo, compiled: dict, db: ResultStore, ctx: RunContext):
    """Record the candidates that failed to compile; return the rest (to benchmark).
    A candidate without a compile result is benchmarked (its worker compiles it)."""
    keep = []
    for p, c in todo:
        res = compiled.get((p.key, c.id))
        if res is not None and res.get("status") in FAILED:
            db.record(ctx, _row(p, c, res))
        else:
            keep.append((p, c))
    return keep


def _summarize(s: Shape, cands: list[Choice], db: ResultStore, ctx: RunContext) -> ShapeResult:
    rows = db.done(ctx, s.problem.key)
    ids = {c.id for c in cands}
    rel = [r for cid, r in rows.items() if cid in ids]
    statuses = Counter(r.status for r in rel)
    ok = [r for r in rel if r.status == Status.OK and r.device_ms is not None and math.isfinite(r.device_ms)]
    best = min(ok, key=lambda r: (r.device_ms, r.choice_id)) if ok else None
    aten = rows.get("aten")
    reasons: dict[str, str] = {}
    for r in sorted(rel, key=lambda r: r.choice_id):
        if r.status != Status.OK and r.status not in reasons:
            reasons[r.status] = reason_line(r.reason or "")
    return ShapeResult(s.name, s.group, s.problem, best.choice_id if best else None,
                       best.device_ms if best else None,
                       aten.device_ms if aten is not None and aten.status == Status.OK else None,
                       len(rel), sum(statuses[f] for f in FAILED), dict(statuses), reasons)


def reason_line(reason: str, width: int = 200) -> str:
    """A failure reason in one line for a summary: its first line, and for a Triton
    compilation error, whose first line only says where ("at 12:4:"), its last line too
    (the error itself, after the quoted source).

    >>> reason_line("CompilationError: at 3:8:\\n    acc = tl.dot(a, b)\\n        ^\\nValueError('bad')")
    "CompilationError: at 3:8: ... ValueError('bad')"
    """
    lines = [ln.strip() for ln in reason.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    line = lines[0]
    if len(lines) > 1 and re.search(r"\bat \d+:\d+:?$", line):
        line = f"{line} ... {lines[-1]}"
    return line[:width]


def _table(shapes: list[ShapeResult], db: ResultStore, ctx: RunContext) -> LookupTable:
    from . import __version__
    table = LookupTable(provenance(ctx.device_name, ctx.capability, ctx.torch_version,
                                   ctx.triton_version, __version__, "tuned"))
    for s in shapes:
        if s.best is not None:
            table.entries[s.problem.key] = [TableChoice(Choice.parse(s.best), s.best_ms)]
    return table


def summary(result: TuneResult) -> dict:
    """Everything the per-shape table shows, as JSON-able data."""
    return {
        "context": result.context.__dict__, "representative": result.representative,
        "wall_s": result.wall_s, "measured": result.measured, "reused": result.reused,
        "compile_wait_s": result.compile_wait_s, "startup_s": result.startup_s,
        "compile_workers": result.compile_workers,
        "shapes": [{"group": s.group, "name": s.name, "key": s.problem.key, "best": s.best,
                    "best_ms": s.best_ms, "aten_ms": s.aten_ms, "speedup": s.speedup,
                    "tried": s.tried, "failed": s.failed, "statuses": s.statuses, "tune_s": s.tune_s,
                    "k": s.k, "k_reason": s.k_reason}
                   for s in result.shapes],
    }


def failure_lines(result: TuneResult) -> list[str]:
    """One line per shape with failures: the count of each failure status and the first
    reason of each, so that 'failed 15' says why (e.g. every candidate's compile error).

    >>> from gemmtune.problem import Problem
    >>> s = ShapeResult("x", "cli", Problem.from_sizes(4, 4, 4), None, None, None, 3, 3,
    ...                 {"compile_error": 3}, {"compile_error": "CompilationError: bad"})
    >>> failure_lines(TuneResult([s], None, False, 0.0, 3, 0, None, None, None))
    ['x: failed 3: compile_error x3 (CompilationError: bad)']
    """
    lines = []
    for s in result.shapes:
        if not s.failed:
            continue
        parts = [f"{st} x{n}" + (f" ({s.reasons[st]})" if s.reasons.get(st) else "")
                 for st, n in sorted(s.statuses.items()) if st != Status.OK and st in FAILED]
        lines.append(f"{s.name}: failed {s.failed}: " + ", ".join(parts))
    return lines


def render(result: TuneResult, console=None) -> None:
    """Print the per-shape summary table (rich)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=None if sys.stdout.isatty() else 160)
    title = f"gemmtune tune on {result.context.device_name}"
    if not result.representative:
        title += "  [bold yellow](CPU interpreter: timings NOT representative)[/]"
    t = Table(title=title)
    num = ("best µs", "aten µs", "speedup", "tried", "failed", "tune s")
    with_k = any(s.k is not None for s in result.shapes)
    num += ("model k",) if with_k else ()
    for col in ("shape", "problem", "best choice") + num:
        t.add_column(col, justify="right" if col in num else "left",
                     overflow="fold", no_wrap=col != "best choice")
    for s in result.shapes:
        bias = " +bias" if s.problem.op == "addmm" else ""
        batch = f"{s.problem.batch}x" if s.problem.op == "bmm" else ""  # bmm: batch x M x N x K
        t.add_row(s.name, f"{batch}{s.problem.m}x{s.problem.n}x{s.problem.k} {s.problem.dtype}{bias}",
                  s.best or "-", f"{s.best_ms * 1e3:.2f}" if s.best_ms else "-",
                  f"{s.aten_ms * 1e3:.2f}" if s.aten_ms else "-",
                  f"{s.speedup:.2f}x" if s.speedup else "-", str(s.tried), str(s.failed),
                  f"{s.tune_s:.1f}", *([f"{s.k}" if s.k is not None else "-"] if with_k else []))
    console.print(t)
    for line in failure_lines(result):
        console.print(line, markup=False)
    console.print(f"{result.measured} measured, {result.reused} reused from {result.store_path}, "
                  f"{result.wall_s:.1f} s ({result.startup_s:.1f} s worker start-up)"
                  + (f"; table -> {result.table_path}" if result.table_path else ""))
