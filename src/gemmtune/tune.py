"""The tuning pipeline: candidates -> compile -> verify + time -> store -> table.

``tune`` is ``Tuner(TuneOptions(**keywords)).run(problems)``: its parts live in
``gemmtune.tuning`` (options, plan, executor, recorder, progress, results, tuner); the
names below are re-exported from there for code written against this module.

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

import os
from typing import Iterable, Sequence

from .bench import DEFAULT_RUNNER
from .problem import Problem
from .shapes import Shape
from .store import ResultStore
from .table import LookupTable
from .tuning.executor import COMPILE_NICE, Compiler, compile_pool_size, usable_cpus
from .tuning.options import TuneOptions, option_names
from .tuning.plan import (BENCHMARK_SPACES, CandidatePlan, Planned, as_shapes, candidates, compiles_at_most,
                          load_ranker, parse_benchmark_space, plan_candidates, select_adaptive, select_by_model)
from .tuning.progress import Progress
from .tuning.recorder import POLL_S, RETRYABLE, Recorder, claim_ttl, result_row, write_table
from .tuning.runoff import RUNOFF_MARGIN
from .tuning.results import FAILED, ShapeResult, TuneResult, failure_lines, reason_line, render, summary
from .tuning.tuner import Tuner, run_device

# The older private spellings (tests and scripts written against the one-module tuner).
_Progress = Progress
_compiles_at_most = compiles_at_most
_benchmark_space = parse_benchmark_space
_as_shapes = as_shapes


def _ranker(model, dev, ctx):
    return load_ranker(model, dev, ctx.triton_version)


def tune(problems: Iterable[Problem | Shape], *, families: Sequence[str] | None = None,
         space: str = "default", store: str | os.PathLike | ResultStore = "gemmtune.sqlite",
         out: str | os.PathLike | None = None, workers: int | None = None, timeout: float = 120.0,
         compile_workers: int | None = None, progress: bool = True, runner: str = DEFAULT_RUNNER,
         device: str | None = None, seed: int = 0, env: dict | None = None,
         table: LookupTable | str | os.PathLike | None = None,
         benchmark_space: str | int = "SAME", fast: bool = False, model=None,
         retry_failed: bool = False, timing: str = "standard", compile_ahead: int = 2,
         overwrite: bool = False, cluster=None, server: str | os.PathLike | None = None,
         deterministic: bool = False, min_gain: float = 0.0, in_process: bool = False,
         prestarted: Sequence = (), runoff: float = RUNOFF_MARGIN, pdl_credit: float = 0.0) -> TuneResult:
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
    refused before anything is measured); a choice this run timed, found wrong or saw refused
    counts with this run's verdict only (an older, faster time of a choice now slower, wrong or
    beaten by the run-off or ``min_gain`` is dropped; a crash, timeout or error, perhaps the
    machine's, leaves it); ``overwrite=True`` replaces it instead.
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
    not). ``'FAST'`` benchmarks the model's first choice of each of its two best families
    and its next best choice, up to 3 where it does not trust its ranking, and at decode (fp32, or
    16-bit with an unaligned B) up to 3 of skinny's CUDA-core tiles (tuning.plan.select_fast).
    ``fast=True`` is ``space='exhaustive', benchmark_space='FAST'``. ``model``: an
    object with ``predict(problem, choices) -> est. ms`` (see gemmtune.model), or the
    path of a saved learned model (loaded with gemmtune.model.load_model: one made on
    another GPU / triton warns and the analytic model ranks instead); None ranks with
    the learned model shipped for this GPU and triton MAJOR.MINOR, else (with a
    ModelWarning) the analytic model (gemmtune.model.default_model). It is only
    consulted when filtering.

    ``cluster``: run across many GPUs on a Dask cluster instead of this host's worker
    pool: a scheduler address ('tcp://host:8786'), 'local:N' (N worker processes here,
    one per GPU) or a ``distributed.Client`` (see gemmtune.cluster.tune_cluster; needs
    ``pip install gemmtune[cluster]``; ``workers`` and ``compile_ahead`` do not apply, and
    ``server`` is refused with it).

    ``server``: the Unix socket of a warm worker pool started with ``gemmtune worker --serve``
    (gemmtune.bench.server): its workers run the candidates, so no worker starts on this
    call's critical path; still crash-proof (the server's workers are subprocesses).
    ``workers``, ``runner`` and the compile workers are then the server's.

    ``in_process``: measure the candidates in this process instead of a worker subprocess
    (gemmtune.bench.inprocess): no worker start-up (3.5 s on an H100), for a caller that already
    holds the GPU; a candidate that crashes or hangs the GPU then takes this process with it.

    ``prestarted``: benchmark workers started before this call (``gemmtune_entry.spawn.prestart``:
    the ``gemmtune`` command starts a tune's worker before it imports torch, so that the two
    start-ups overlap). The pool adopts each one it would have started itself (same GPU,
    runner and environment); the caller stops the rest (``Prestarted.close``).

    ``deterministic``: benchmark only choices that give the same bits on every call
    (``tuning.plan.is_deterministic``: no fp32-atomic split-K reduction), for models whose
    outputs must reproduce exactly (greedy decoding compared run to run, a CUDA-graph replay
    checked against the plain call). The winners, and the dispatchers built from them, are
    then deterministic too; a lookup table's entries are filtered the same way.

    ``min_gain``: a winner other than cuBLAS must be at least this fraction faster than cuBLAS
    (0.02: 2%), else cuBLAS wins the shape (``tuning.recorder.prefer_aten``). For tables that
    serve a model: a kernel that wins alone by less than the timing's repeatability (median 1.1%,
    90th percentile 4.0% between two H100 machines, 2026-11-25) may lose inside a model. There
    a cuBLAS layer also stays torch's own (``patch``), which Inductor can fuse around.
    0 (the default) keeps the fastest measured.

    ``runoff``: a winner other than cuBLAS that beats it by less than this fraction (default
    0.05) is timed again beside cuBLAS, in interleaved rounds, and the faster median wins
    (``tuning.runoff``; recorded as the shape's ``runoff``). The sweep times candidates one
    after another, so a close call can turn on when each ran. 0 turns it off; a cluster run
    (``cluster``) runs it on one of its workers once the shape's candidates are in.

    ``pdl_credit``: a one-slice CUDA-core skinny strip on a K-contiguous B, which ``pdl=True``
    serves as its ``-pdl`` twin, is picked as if this fraction faster than its time alone (in the
    sweep's pick and in the run-off; the recorded time is its own). ``tune_model(pdl=True)``
    passes ``gemmtune.pdl.PDL_CREDIT`` (0.02) on Hopper, where the twins gained 2.5-6% in
    measured chains and decode steps. 0 (the default) picks by time alone. scaled_mm problems get
    none: gemmtune.scaled_mm serves no twin.
    """
    return Tuner(TuneOptions(
        families=families, space=space, store=store, out=out, workers=workers, timeout=timeout,
        compile_workers=compile_workers, progress=progress, runner=runner, device=device, seed=seed, env=env,
        table=table, benchmark_space=benchmark_space, fast=fast, model=model, retry_failed=retry_failed,
        timing=timing, compile_ahead=compile_ahead, overwrite=overwrite, cluster=cluster, server=server,
        deterministic=deterministic, min_gain=min_gain, in_process=in_process,
        prestarted=tuple(prestarted), runoff=runoff, pdl_credit=pdl_credit)).run(problems)


__all__ = ["tune", "Tuner", "TuneOptions", "option_names", "TuneResult", "ShapeResult", "CandidatePlan", "Planned",
           "Recorder", "Progress", "Compiler", "candidates", "plan_candidates", "select_by_model", "select_adaptive",
           "compile_pool_size", "usable_cpus", "compiles_at_most", "parse_benchmark_space", "BENCHMARK_SPACES",
           "COMPILE_NICE", "FAILED", "RETRYABLE", "POLL_S", "claim_ttl", "result_row", "write_table", "run_device",
           "summary", "failure_lines", "reason_line", "render"]
