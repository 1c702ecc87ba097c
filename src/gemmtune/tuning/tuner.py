"""``Tuner``: one tuning run, put together from its parts.

``Tuner(options).run(problems)`` opens the results store and the worker pools, asks the
benchmark worker for its device, builds the run's ``CandidatePlan``, then takes one shape at a
time: plan it (and, with compile workers, the next ``compile_ahead`` shapes, whose compilation
is queued at once), skip what the store holds, claim the rest, time what needs no compiling
while the rest compiles, measure, wait for what other tuners sharing the store claimed, and
summarize. The winners go to a lookup table at the end. Only this thread touches the store.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
import warnings
from concurrent.futures import Future
from contextlib import closing, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from ..bench.workers import WorkerPool, current_first, visible_gpus
from ..configs import fp8_device_reason
from ..device import DeviceInfo
from ..shapes import Shape
from ..store import ResultStore, RunContext
from ..table import LookupTable, as_table, check_provenance
from .executor import COMPILE_NICE, Executor, compile_pool_size, usable_cpus
from .options import TuneOptions
from .plan import CandidatePlan, Planned, as_shapes, compiles_at_most, load_ranker, offered_nothing, refine_forms
from .progress import Progress
from .recorder import Recorder, ranked_ms, table_to_merge, write_table
from .results import ShapeResult, TableCoverage, TuneResult
from .runoff import RUNOFF_TIE, runoff_winner, wants_runoff


def run_device(info: dict, device: str | None, ctx: RunContext, earlier: LookupTable | None, out,
               lut: LookupTable | None) -> DeviceInfo:
    """The DeviceInfo candidates are planned for (the worker's GPU, else the built-in ``device``),
    after refusing to merge into a table ``earlier`` (the one ``out`` holds) made on another GPU
    and warning about a ``lut`` from another GPU / triton. Shared by ``Tuner`` and the cluster
    driver."""
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


def table_coverage(lut: LookupTable | None, table, shapes: list[Shape]) -> TableCoverage | None:
    """What of ``shapes`` (their distinct problem keys) ``lut`` has an entry for (None: no table);
    ``table`` is what the caller passed (a path names the table in the messages)."""
    if lut is None:
        return None
    keys = list(dict.fromkeys(s.problem.key for s in shapes))
    uncovered = tuple(k for k in keys if not lut.entries.get(k))
    return TableCoverage(len(keys) - len(uncovered), len(keys), uncovered,
                         os.fspath(table) if isinstance(table, (str, os.PathLike)) else None)


def report_coverage(lut: LookupTable | None, table, shapes: list[Shape], progress: bool, bspace="SAME",
                    stacklevel: int = 2, stream=None) -> TableCoverage | None:
    """Say, once a run, what of ``shapes`` the lookup table ``lut`` covers; returns its
    TableCoverage (None: no table). A table with no entry for any of them warns (RuntimeWarning):
    the user asked for the table's choices and gets none. One that covers some is a progress line
    (when ``progress``: the CLI's default) naming the first shapes it does not cover, which are
    tuned with the usual candidates and can take far longer than the covered ones."""
    coverage = table_coverage(lut, table, shapes)
    if coverage is None or not shapes:
        return coverage
    if coverage.covered == 0:
        # --table with entries for none of these shapes (another dtype, layout or suite) tuned
        # every shape in full, silently: the user asked for the table's choices only.
        where = f" {coverage.source}" if coverage.source else ""
        warnings.warn(f"the lookup table{where} has no entry for any of the {len(shapes)} shape(s) to tune "
                      "(dtype, layout and op are part of a key): each is tuned with the usual candidates",
                      RuntimeWarning, stacklevel=stacklevel + 1)
    elif coverage.uncovered and progress:
        how = "tuned in full" if bspace == "SAME" else "tuned with the usual candidates"
        print(f"[gemmtune] {coverage.line(how=how)}", file=stream if stream is not None else sys.stderr, flush=True)
    return coverage


def local_report(options: TuneOptions, gpus, env: dict) -> dict | None:
    """The benchmark worker's device report (bench.runner.info), computed here where it is
    certain: no GPU visible, gemmtune's own runner, no worker started ahead for this run (it is
    adopted on entry and would be stopped unused) and a worker that would run the Triton
    interpreter (TRITON_INTERPRET=1 in its environment). Its report is then this process's
    versions and the interpreter's fixed name, and a run whose results are all in the store starts
    no worker at all (such a re-run took 0.96 s on the 2-core CPU machine, ~0 s now; the test
    suite's time did not measurably change, 92.3 against 92.7 s on five tune-heavy files). None
    elsewhere: a GPU's facts come from the worker, as the parent never touches CUDA."""
    from ..bench import DEFAULT_RUNNER
    from ..bench.runner import device_report
    from ..bench.timing import timer_profiles

    if (gpus or options.in_process or options.server is not None or options.runner != DEFAULT_RUNNER
            or options.prestarted or env.get("TRITON_INTERPRET") != "1"):
        return None
    return device_report("cpu", timer_profiles(cuda=False)["standard"].representative, interpreter=True)


def context_of(info: dict) -> RunContext:
    """The run context a worker's device report (bench.runner.info) stands for."""
    return RunContext(info["device_name"], info["capability"], info["torch"], info["triton"], info["gemmtune"])


# Up to this many problems, a run ranks through numpy (model.lgbm_text) unless lightgbm is
# imported already: measured on the CPU machine, lightgbm's import (with scikit-learn) cost
# 1.2-3.6 s, and numpy's predictions 0.19 s more a problem (~3,400-5,000 candidates each). Cold
# runs too: on an H100 machine (2026-11-26, benchmarks/results/2026-11-26-h100-cold-start) the
# import took 3.1-3.9 s of a cold one-shape tune, mostly compiling scikit-learn's and scipy's
# sources, and its thread held the GIL while the tune waited on its worker; in-process, nothing
# hid it at all.
NUMPY_RANKER_MAX_PROBLEMS = 3


def numpy_ranker(n_problems: int) -> bool:
    """Whether a run of ``n_problems`` ranks through numpy: few problems, and lightgbm not
    imported already (then nothing imports it)."""
    return n_problems <= NUMPY_RANKER_MAX_PROBLEMS and "lightgbm" not in sys.modules


def make_plan(options: TuneOptions, info: dict, ctx: RunContext, lut: LookupTable | None,
              earlier: LookupTable | None, numpy_predict: bool = False) -> CandidatePlan:
    """The run's CandidatePlan once the worker said which device it has (``numpy_predict``: a
    LightGBM ranker predicts through numpy, ``numpy_ranker``)."""
    dev = run_device(info, options.device, ctx, earlier, options.out, lut)
    bspace = options.bspace
    ranker = load_ranker(options.model, dev, ctx.triton_version, numpy_predict) if bspace != "SAME" else None
    return CandidatePlan(options.family_names, options.search_space, dev, lut, bspace, ranker,
                         deterministic=options.deterministic)


def refuse_unrunnable(shapes: list[Shape], device: DeviceInfo) -> None:
    """Raise a ValueError naming the shapes whose operands ``device`` cannot multiply at all (fp8
    below sm_89: no family, cuBLAS included, is offered there), before any worker time is spent.
    They used to be planned with no candidate and ended with no winner and no reason."""
    bad = [(s, r) for s in shapes if (r := fp8_device_reason(s.problem, device))]
    if bad:
        names = ", ".join(s.name for s, _ in bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        raise ValueError(f"cannot tune {names} on this GPU: {bad[0][1]}")


def warm_plan(info: dict, sizes: tuple) -> float:
    """Plan one problem of ``sizes`` (``Problem.from_sizes`` arguments; the server passes its
    ``bench.server.WARM_SIZES``) as a forwarded ``tune --fast`` of one shape would, on the device of
    the workers' ``info``, and throw the plan away: a warm server (``gemmtune worker --serve``) calls
    this before its first client, which then finds the ranker's files read and the planning code
    run once. Seconds spent. Warnings (no model for this GPU, say) are left to the client's tune,
    which gives them again."""
    import warnings

    from ..problem import Problem

    t0 = time.perf_counter()
    options = TuneOptions(fast=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = make_plan(options, info, context_of(info), None, None, numpy_predict=numpy_ranker(1))
        plan(Problem.from_sizes(*sizes))
    return time.perf_counter() - t0


class PlanAhead:
    """``plan`` run on a background thread over ``problems`` in order, at most ``depth`` problems
    ahead of the ones asked for; calling it with a problem returns that problem's Planned (or raises
    its error), so it must be asked for them in the same order (``Lookahead`` does).

    Planning a problem is pure Python and numpy: its exhaustive space and its ranking took
    0.2-0.9 s a problem (2-core CPU machine and an H100 host, 2026-11-26), all of it on the
    sweep's critical path while the benchmark worker, a separate process, sat idle. On this thread
    it overlaps with the worker's timing and the compile workers: the sweep's thread only waits
    on sockets and pipes then, which release the GIL. Not for an in-process pool, whose timing
    loop runs in this process: a planning thread holding the GIL would delay its launches."""

    def __init__(self, problems: list, plan: Callable, depth: int = 8):
        if not (isinstance(depth, int) and depth >= 1):
            raise ValueError(f"depth must be an int >= 1, got {depth!r}")
        self._problems, self._plan, self.depth = list(problems), plan, depth
        self._futures = [Future() for _ in self._problems]
        self._asked = 0
        self._cv = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="gemmtune-plan-ahead", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for j, (problem, fut) in enumerate(zip(self._problems, self._futures)):
            with self._cv:
                self._cv.wait_for(lambda: self._stop or j < self._asked + self.depth)
                if self._stop:
                    return
            try:
                fut.set_result(self._plan(problem))
            except BaseException as e:  # raised on the sweep's thread when the problem's turn comes
                fut.set_exception(e)

    def __call__(self, problem) -> Planned:
        with self._cv:
            j = self._asked
            if j >= len(self._problems) or self._problems[j] is not problem:
                raise RuntimeError("PlanAhead is asked for its problems in their order")
            self._asked += 1
            self._cv.notify_all()
        return self._futures[j].result()

    def close(self) -> None:
        """Stop planning ahead (a sweep that ended early); idempotent."""
        with self._cv:
            self._stop = True
            self._cv.notify_all()


def release_unadopted(prestarted) -> int:
    """Stop the pre-started workers (gemmtune_entry.spawn.prestart) that neither pool adopted, now
    that both have started: the entry point starts compile workers before it knows how many the
    run needs (executor.compile_pool_size), and an idle one holds a torch import's memory. How
    many were stopped."""
    n = 0
    for w in prestarted:
        if not getattr(w, "adopted", True):
            w.close()
            n += 1
    return n


def tuner_trace() -> Callable[..., None]:
    """``note(op, **facts)``: where ``GEMMTUNE_WORKER_TRACE`` names a directory, a line for each of
    the tuner's steps (planning, measuring, waiting for compiles) in ``tuner-<pid>.jsonl`` beside
    its workers' traces (bench.worker), on the same wall clock; else a no-op. A diagnostic
    (``gemmtune report --trace DIR`` reads both)."""
    from ..bench.worker import TRACE_ENV, open_trace
    try:
        f = open_trace("tuner")
    except OSError as e:
        warnings.warn(f"gemmtune: {TRACE_ENV}={os.environ.get(TRACE_ENV)!r} cannot be written ({e}); no trace",
                      RuntimeWarning, stacklevel=2)
        f = None
    if f is None:
        return lambda op, **facts: None
    lock = threading.Lock()

    def close() -> None:
        # A trace is diagnostics: a write or the final flush that fails (a full disk) failed the
        # whole tune (session 45's CPU hunt); the trace just ends there.
        with contextlib.suppress(OSError):
            f.close()

    def note(op: str, **facts) -> None:
        with lock:
            if not f.closed:
                try:
                    f.write(json.dumps({"t0": round(time.time(), 4), "op": op, **facts}) + "\n")
                except OSError:
                    close()
    note.close = close  # (Tuner.run closes it when the run ends)
    return note


class Lookahead:
    """The plans of shapes[0 .. i + ahead] and their queued compilation, made in order.

    ``plan(i)`` plans shape ``i`` now (raising its error) and, ahead of it, the shapes up to
    ``i + ahead``, whose errors are kept until their turn; ``submit(i, planned)`` queues a
    planned shape's compilation (None: nothing to compile) and its Future is ``job(i)``."""

    def __init__(self, shapes: list[Shape], plan: Callable, ahead: int = 0,
                 submit: Callable[[int, Planned], Future | None] | None = None,
                 note: Callable[..., None] | None = None):
        self.shapes, self._plan, self.ahead, self._submit = shapes, plan, ahead, submit
        self._note = note or (lambda op, **facts: None)
        self.plans: list = []  # Planned, or the exception planning raised
        self._jobs: dict[int, Future | None] = {}

    def plan(self, i: int) -> Planned:
        while len(self.plans) <= min(i + self.ahead, len(self.shapes) - 1):
            j = len(self.plans)
            try:
                self.plans.append(self._plan(self.shapes[j].problem))
            except Exception as e:  # raised when the shape's turn comes
                if j == i:
                    raise
                self.plans.append(e)
                continue
            self._note("planned", shape=j, choices=len(getattr(self.plans[j], "choices", ())))
            if self._submit is not None:
                self._jobs[j] = self._submit(j, self.plans[j])
        got = self.plans[i]
        if isinstance(got, Exception):  # as if planned now: the shapes before are done
            raise got
        return got

    def job(self, i: int) -> Future | None:
        return self._jobs.pop(i, None)


@dataclass(frozen=True)
class Swept:
    """What a sweep gives back: each shape's result, the seconds the benchmark worker waited for
    compiles, and how many candidates came from the store (or from other tuners sharing it)."""
    shapes: list[ShapeResult]
    compile_wait_s: float
    reused: int


class Tuner:
    """One tuning run with ``options`` (TuneOptions). ``run(problems) -> TuneResult``."""

    def __init__(self, options: TuneOptions | None = None, **keywords):
        self.options = options.replace(**keywords) if options is not None else TuneOptions(**keywords)

    def run(self, problems: Iterable) -> TuneResult:
        o = self.options
        if o.cluster is not None:
            from ..cluster import tune_cluster
            kw = o.keywords()
            for k in ("workers", "compile_ahead", "server", "in_process", "prestarted", "pdl_credit"):  # n/a, or refused (TuneOptions)
                kw.pop(k)
            return tune_cluster(problems, **kw)
        t0 = time.monotonic()
        note = tuner_trace()
        note("run")
        o.check()  # an unknown family, a missing model file or out directory fail here
        shapes = as_shapes(problems)
        if not shapes:
            # (an iterator consumed already, a filter that left nothing) ran nothing and, with
            # out= and overwrite=True, replaced the table there with an empty one
            raise ValueError("problems is empty: nothing to tune (an iterator given twice is empty the second time)")
        numpy_predict = numpy_ranker(len(shapes))
        if o.bspace != "SAME" and not hasattr(o.model, "predict") and not numpy_predict:
            # The shipped rankers need lightgbm, whose import (with the scikit-learn it pulls in)
            # took 2.2-3.6 s on the 2-core CPU machine: it overlaps with the workers' start-up.
            from ..model.regressors import prefetch_lightgbm
            prefetch_lightgbm()
        lut = as_table(o.table)  # a bad table fails here, before anything is written
        coverage = report_coverage(lut, o.table, shapes, o.progress, o.bspace)
        # The table --out merges into, read now: a bad one fails before the sweep, not after it.
        earlier = table_to_merge(o.out, o.overwrite)
        gpus = current_first(visible_gpus())  # the caller's GPU first: a one-worker pool runs there
        env = dict(o.env or {})
        if not gpus:
            env.setdefault("TRITON_INTERPRET", "1")
        n_compile = 0 if o.server is not None or o.in_process else compile_pool_size(
            o.compile_workers, cpus=usable_cpus(), on_gpu=bool(gpus),
            per_shape=[compiles_at_most(lut, s.problem, o.bspace) for s in shapes], compile_ahead=o.compile_ahead)
        own_store = not isinstance(o.store, ResultStore)
        db = ResultStore(o.store) if own_store else o.store
        executor = None
        local = local_report(o, gpus, env)
        try:
            pool = self._pool(env, gpus)
            # With the report known here, the pool is not started on entry: its first task starts it.
            with (closing(pool) if local is not None else pool) as pool:
                executor = Executor(pool, seed=o.seed, timing=o.timing, n_compile=n_compile,
                                    compile_pool=WorkerPool(n_compile, timeout=o.timeout, runner=o.runner, env=env,
                                                            gpus=gpus, nice=COMPILE_NICE, prestarted=o.prestarted)
                                    if n_compile > 1 else None,
                                    precompile=bool(gpus) and os.environ.get("GEMMTUNE_PRECOMPILE", "1") != "0")
                info = local or executor.info()
                note("info")
                release_unadopted(o.prestarted)
                startup = time.monotonic() - t0
                ctx = context_of(info)
                rec = Recorder(db, ctx, retry_failed=o.retry_failed, timeout=o.timeout, min_gain=o.min_gain,
                               pdl_credit=o.pdl_credit)
                plan = make_plan(o, info, ctx, lut, earlier, numpy_predict)
                refuse_unrunnable(shapes, plan.device)
                note("plan_made")
                try:
                    swept = self.sweep(shapes, plan, executor, rec, note)
                finally:
                    executor.close()
            table, table_path = write_table(swept.shapes, ctx, o.out, o.overwrite)
            return TuneResult(swept.shapes, ctx, bool(info.get("representative", False)), time.monotonic() - t0,
                              rec.recorded, swept.reused, table, table_path, Path(db.path), swept.compile_wait_s, startup,
                              executor.n_compile, precompile_s=executor.precompile_s,
                              precompiled=executor.precompiled, table_coverage=coverage)
        finally:
            if executor is not None:
                executor.close()  # a no-op if closed above
            if own_store:
                db.close()
            getattr(note, "close", lambda: None)()  # the trace file, where there is one

    def _pool(self, env: dict, gpus):
        o = self.options
        if o.in_process:
            from ..api import interpreter_enabled
            from ..bench.inprocess import InProcessPool
            if not gpus and not interpreter_enabled():
                # A worker gets TRITON_INTERPRET=1 in its environment; this process imported
                # triton already, so it can only run kernels on the CPU if it was set before.
                raise ValueError("in_process on a machine without a GPU runs the Triton kernels here, which "
                                 "needs TRITON_INTERPRET=1 set before gemmtune is imported")
            return InProcessPool(runner=o.runner, timeout=o.timeout)
        if o.server is not None:
            from ..bench.server import RemotePool, served
            # Run by the server itself (a forwarded ``gemmtune tune --server``): its own pool.
            own = served(o.server)
            if own is not None:
                own.timeout = o.timeout
                return own
            return RemotePool(o.server, timeout=o.timeout)
        return WorkerPool(o.workers, timeout=o.timeout, runner=o.runner, env=env, gpus=gpus, prestarted=o.prestarted)

    def sweep(self, shapes: list[Shape], plan: CandidatePlan, executor: Executor, rec: Recorder,
              note: Callable[..., None] | None = None) -> "Swept":
        """Every shape in turn, compilation running ahead: planned by ``plan``, measured by
        ``executor``, recorded and summarized by ``rec`` (testable with a fake executor)."""
        o = self.options
        reused = 0
        compile_wait = 0.0

        def submit(j: int, planned: Planned):
            # What is not in the store now; re-checked when the shape's turn comes (the store
            # only grows, so nothing needed is skipped here).
            return executor.compile_ahead(rec.pending(shapes[j].problem, planned.choices)[1])

        background = None if o.in_process or len(shapes) < 2 else PlanAhead([s.problem for s in shapes], plan)
        note = note or (lambda op, **facts: None)
        ahead = Lookahead(shapes, background or plan, o.compile_ahead if executor.compiler is not None else 0,
                          submit if executor.compiler is not None else None, note)
        out = []
        with Progress(o.progress) as bar, (nullcontext() if background is None else closing(background)):
            overall = bar.task("shapes", len(shapes))

            def measure(todo, task) -> None:
                for p, c, res in executor.measure(todo):
                    rec.record(p, c, res)
                    bar.advance(task)

            def run_claimed(i: int, problem, todo, others, job, task) -> tuple[float, int]:
                """Measure ``todo`` (what this tuner claimed; its compiles in ``job``), then wait
                for ``others`` (what other tuners hold). Returns (seconds waited for the
                compiles, candidates the others measured)."""
                waited = 0.0
                if job is not None and todo:
                    if not job.done():
                        # Time what needs no compiling (cuBLAS) while the rest compiles.
                        note("measure_uncompiled", shape=i)
                        measure([pc for pc in todo if not pc[1].needs_compile], task)
                        todo = [pc for pc in todo if pc[1].needs_compile]
                    note("wait_compiles", shape=i)
                    tw = time.monotonic()
                    compiled = job.result()
                    waited = time.monotonic() - tw
                    n_todo = len(todo)
                    todo = rec.record_compile_failures(todo, compiled)
                    bar.advance(task, by=n_todo - len(todo))  # failed to compile: recorded
                note("measure", shape=i, candidates=len(todo))
                measure(todo, task)
                return waited, rec.await_others(problem, others, lambda pcs: take_over(pcs, task))

            def take_over(todo, task) -> None:
                # Candidates another tuner held, whose claim expired, now measured here: the shape's
                # total counted this tuner's own claims only, so each of them counted past it ("13/12").
                bar.grow(task, len(todo))
                measure(todo, task)

            for i, s in enumerate(shapes):
                ts = time.monotonic()
                planned = ahead.plan(i)
                cands = planned.choices
                done, todo = rec.pending(s.problem, cands)
                reused += sum(c.id in done for c in cands)
                # Tuners sharing the store split the work: measure what this one claims;
                # what another holds is waited for below (ResultStore.claim).
                todo, others = rec.claim(s.problem, todo)
                try:
                    task = bar.task(f"  {s.name}", len(todo))
                    waited, got = run_claimed(i, s.problem, todo, others, ahead.job(i), task)
                    reused += got
                    extra = refine_forms(s.problem, cands, rec.times(s.problem, cands)) if planned.refine else []
                    if extra:
                        # A whole space lists triton_static's carried forms only: the fastest tile's
                        # other forms are compiled and timed now (plan.refine_forms).
                        note("refine_forms", shape=i, candidates=len(extra))
                        cands = cands + extra
                        more_done, more = rec.pending(s.problem, extra)
                        reused += sum(c.id in more_done for c in extra)
                        more, more_others = rec.claim(s.problem, more)
                        bar.grow(task, len(more) + len(more_others))
                        w, got = run_claimed(i, s.problem, more, more_others, executor.compile_ahead(more), task)
                        waited, reused = waited + w, reused + got
                    compile_wait += waited
                finally:
                    # Also when the sweep stops here (Ctrl-C in a notebook, an error): this process's claims
                    # stayed in the store, and a rerun in the same process took them for another live
                    # tuner's and waited out their expiry, 60 s plus the timeout per candidate (session 45's
                    # CPU hunt). A killed process's claims are cleared by the dead-owner check instead.
                    rec.release(s.problem)
                bar.remove(task)
                r = rec.summarize(s, cands)
                if wants_runoff(r.best, r.best_ms, r.aten_ms, o.runoff):
                    winner, r.runoff = runoff_winner(executor.runoff(s.problem, [r.best, "aten"]), r.best,
                                                     max(o.min_gain, RUNOFF_TIE),
                                                     ranked_ms(r.best, 1.0, s.problem.layout_b, o.pdl_credit,
                                                               s.problem.op))
                    if winner == "aten":
                        r.best, r.best_ms = "aten", r.aten_ms
                r.tune_s = time.monotonic() - ts
                r.compile_wait_s = waited
                note("shape_done", shape=i, tune_s=round(r.tune_s, 4))
                r.k, r.k_reason = planned.k, planned.why
                dev = getattr(plan, "device", None)
                if o.families is not None and dev is not None:  # named by the caller: which offered nothing, and why
                    r.offered_nothing = offered_nothing(s.problem, o.family_names, o.search_space, dev)
                out.append(r)
                bar.advance(overall)
        return Swept(out, compile_wait, reused)
