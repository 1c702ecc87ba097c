"""Bulk timing collection for the learned performance model (GPU, resumable, in 10-minute calls).

    gemmtune collect --list-shapes                    # the plan; any machine, no GPU
    gemmtune collect --dry-run                        # candidates per phase; any machine
    gemmtune collect --dry-run --resume-from data/collect/collect.sqlite.gz   # what is left
    gemmtune collect --resume-from ... --drop-stale-edges   # re-time rows of the old edge wrap
    gemmtune collect --resume-from ... --drop-launch-bound  # re-time rows the old early cut mis-timed
    gemmtune collect --resume-from ... --drop-oom           # re-time rows that failed on a full GPU
    gemmtune collect --max-minutes 8                  # one device call: $OUT/collect.sqlite(.gz)
    gemmtune collect --resume-from data/collect/collect.sqlite.gz --max-minutes 8   # next call
    gemmtune collect --gpus 0,1,2,3 --max-minutes 8   # one collector per GPU of this host, one store
    gemmtune collect --cluster local:2 --max-minutes 8  # Dask: one worker per GPU, this process writes
    gemmtune collect --cluster tcp://HOST:8786 ...      # a running Dask cluster, many hosts (README 'Many GPUs')
    gemmtune collect --export-only --resume-from ...  # just the compressed CSV for data/
    gemmtune collect --timing standard ...            # the tuner's full timer (4x the replays)
    gemmtune collect --shapes my.csv --max-minutes 8  # your own shapes (a suite CSV) instead of the plan

(``python scripts/collect.py ARGS`` is the same command.)

What it measures. At least 400 shapes, the same every run (seeded), none of them a
shape of the public benchmark suite (that suite is for evaluation only):

* llm:     qkv / o / gate-up / down / lm-head layers of 12 open models from 1B to 70B
           parameters, at decode and prefill token counts; half with the weight as
           nn.Linear holds it (B column-major), half row-major;
* decode:  M from 1 to 64 against those layers' (N, K);
* splitk:  small M x N (16..512) with long K (4k..128k);
* odd:     odd and unaligned sizes (the kernels' narrow-load paths and pad+);
* square:  squares, powers of two and not;
* random:  log-uniform M, N, K (capped at ~2 TFLOP a call).

Per shape: a seeded random sample of the exhaustive triton_mm space, of the exhaustive
split-K space, every DecomposeK split, cuBLAS, and for unaligned shapes some pad+
variants. Phases run bf16 first, then fp16, then fp32 (fp32 on a third of the shapes).

How. Each batch of shapes goes through ``gemmtune.tune`` with a lookup table that
fixes the sampled candidates, so the results store skips everything already measured:
a call that runs out of time loses nothing, and the next call (started with
``--resume-from`` the store the last one returned) goes on where it stopped.

Throughput. Every candidate is verified against fp64 and then timed with the ``quick``
timer profile (``--timing quick``, the default here; tune()'s default is ``standard``):
5 CUDA-graph replays of ~1 ms (at most 64 launches) instead of 20 of ~2 ms (at most 256),
3 eager calls instead of 20, one warm-up; still L2-cold (rotating input sets, more than
twice the L2), still median + inter-quartile spread: the same quantity as the standard
profile measures, from fewer samples; each row stores its ``repeats`` (5 here, 20 under
the standard profile), so the two can be told apart. Since 2026-11-22 (after the first
31,981 rows) the quick profile also cuts early: a candidate whose one event-timed pass takes
more than 3x the best time measured on its problem so far is stored from that pass
(``repeats`` 1, no eager time), provided the pass was GPU-bound (since 2026-11-23; before,
launch-bound passes were cut too: ``--drop-launch-bound``). On long-K shapes such
candidates took most of the time. Inside tune() the compile workers
compile the next shapes (``--compile-ahead``, default 2) while the GPU worker times the
current one, so the GPU no longer waits for each shape's compile phase; they run at lower
CPU priority. Batches grow to ``--batch`` shapes (one tune() call each, so worker start-up
and the first compile are paid once per batch): the first batch of each dtype is small (at
most 4 shapes) to measure seconds per shape, later batches are sized from that so that
they end before ``--max-minutes`` (counted from the start of the process). How fast this
is on a GPU: collect-progress.json records it per call and process
(``candidates_per_s``, and ``compile_wait_s``: how long the GPU worker waited for
compiles, which is large when compiling, not timing, is the bottleneck); data/collect/
README.md quotes the rates of the H200 calls.

At the end of every call it writes $OUT/collect.sqlite.gz (carry it to the next call),
$OUT/collect-<gpu>.csv.gz (the rows, for data/) and $OUT/collect-progress.json. Should a
batch still be running at ``--hard-stop-minutes`` (default ``--max-minutes`` + 1), a
watchdog writes the same three files from a consistent snapshot of the store and exits,
so that a mis-estimated batch cannot take the whole call's results with it.

Several GPUs of one host: ``--gpus 0,1`` starts one collector process per GPU (its
``CUDA_VISIBLE_DEVICES``, an equal share of the CPU cores), all filling one store; each shape
goes to the process that claims it first (``claims.claim``: a claims folder beside the store),
and the store is exported once, after all of them ended.

The parts: ``shapes`` (the shape plan), ``sampling`` (each shape's candidates), ``claims``
(one process per shape), ``rows`` (what a store holds, the rows to re-time, export) and
``run`` (the batches, the budget and the watchdog).

Then, on any machine: ``gemmtune train --store collect.sqlite.gz --out model.json``.
"""

from __future__ import annotations

from .claims import claim
from .rows import EDGE_MASKS_SINCE, LAUNCH_BOUND_MS, LAUNCH_BOUND_SINCE, export, launch_bound_rows, stale_edge_rows
from .run import batch_size, run, run_on_gpus
from .sampling import (NEW_FAMILIES, POOL_SIZES, SAMPLERS, exhaustive_raw, pool_raw, sample_choices, sample_new,
                       sample_space, shape_choices)
from .shapes import MODELS, csv_plan, problems_for, shape_plan

__all__ = ["claim", "EDGE_MASKS_SINCE", "LAUNCH_BOUND_MS", "LAUNCH_BOUND_SINCE", "export", "launch_bound_rows",
           "stale_edge_rows", "batch_size", "run", "run_on_gpus", "POOL_SIZES", "SAMPLERS", "exhaustive_raw",
           "pool_raw", "sample_choices", "sample_space", "shape_choices", "MODELS", "csv_plan", "problems_for", "shape_plan",
           "NEW_FAMILIES", "sample_new"]
