"""Reports: Markdown tables and PNG plots from a bench JSON (``gemmtune bench``), merging
of partial runs, and the Markdown of a tuning run directory (``scripts/gpu_run.sh tune``).

    gemmtune report out/2026-11-23-h200-torch2.11.0-cu130-triton3.6.0-bench.json
    gemmtune report --merge part-a-bench.json part-b-bench.json --out benchmarks/results/DIR
    gemmtune report --tune-run benchmarks/results/2026-11-21-h200-public-full

A bench JSON (schema ``gemmtune-bench/1``, written by gemmtune.bench.suite) holds a header
(GPU, date, versions), the ceilings measured in the same run, notes, and one record per
shape: the roofline floor, cuBLAS, and one record per method, each
``{"status": "ok", "choice": ..., "kernel": {"ms", "spread", "repeats"}, "eager": {...},
"tune_s": ..., "rel_err": ...}`` or ``{"status": "skipped" | "wrong" | "error", "reason": ...}``.
A method record may carry ``baseline``, the cuBLAS time measured in the same process as
that method when it differs from the shape's cuBLAS (recorded runs assembled from two
calls); speedups use it.

Since the interleaved timing (gemmtune.bench.rounds.round_robin), a kernel entry also holds
``rounds``, ``round_ms`` and ``round_spread`` (per round), ``within_spread`` and
``across_spread`` (``spread`` is the larger), and the ceilings hold ``read`` (a read
bandwidth, beside ``copy``) and ``memory_gbps``; older JSONs, without them, still read
and render (their floors are the copy bandwidth's, as they were computed then). Since the
write ceiling the ceilings also hold ``write`` (a write bandwidth) and ``write_gbps``, and a shape
record ``write_bytes`` (C's part of ``min_bytes``): its floor's memory time is then read bytes /
``memory_gbps`` + write bytes / ``write_gbps`` (``roofline_ms``); JSONs and ceilings files without
them keep min_bytes / ``memory_gbps``. A method
whose choice is ``aten`` ran the very kernel cuBLAS ran (``same_kernel_as_cublas``): the
report marks it, since any difference from cuBLAS there is measurement noise.

A shape record also holds its operands' ``layout_a`` / ``layout_b`` (older JSONs: none, read as
row-major); the header holds ``unmeasured`` (the names of the shapes not measured, with a note
saying so) while a run is not finished or where its ``--deadline`` left shapes out. A value that
is not a finite number (a NaN output's relative error) is written as null. A memory-bound shape
whose output is a small part of its bytes (a decode GEMV) may hold ``read``: a kernel that only
reads as many bytes as its inputs hold, timed in the same rounds (gemmtune.bench.readtime), with
``bytes``, ``programs``, ``block`` and ``kernel`` (or ``status`` "error" and ``reason``); the
report gives it beside the floor (``read_line``). Older JSONs have none.

The package by job: ``stats`` (the arithmetic, small pure functions with exact tests:
``geomean``, ``is_tie``, ``speedup``, ``roofline_ms``, ``memory_gbps``, ``write_gbps``, ``verdict``),
``records`` (reading a bench JSON's records, the methods and the targets), ``files`` (load,
save, name, merge), ``markdown`` and ``plots`` (rendering), ``render`` (both into files),
``tune_run`` (a tuning-run directory) and ``store`` (``gemmtune report --store``: a results
store's per-problem summary). Every name is re-exported here.

Example::

    >>> from gemmtune.report import geomean, is_tie
    >>> geomean([2.0, 8.0])
    4.0
    >>> is_tie(10.0, 0.05, 10.4, 0.0)   # 0.4 apart, inside 10.0 x 5% IQR
    True
"""

from __future__ import annotations

from .files import SCHEMA, bench_filename, load_bench, merge_bench, save_bench, slug, unused_bench_path
from .markdown import read_line, render_markdown
from .plots import PLOTS, plot_roofline, plot_speedup, plot_tuning
from .records import (CUBLAS_CHOICE, GEMMTUNE_METHODS, GROUPS, LABELS, METHODS, SAME_MARK, SAME_NOTE,
                      SPEEDUP_TARGETS, TUNE_QUALITY, TUNE_TIME_RATIO, best_ms, floor_fraction, group_speedups, read_fraction,
                      kernel, method_speedup, methods_present, same_kernel_as_cublas, targets, tuning_summary)
from .render import render, render_file
from .stats import geomean, is_tie, memory_gbps, roofline_ms, speedup, verdict, write_gbps
from .tune_run import bench_from_tune_run, render_tune_run
from .markdown import _choice  # noqa: F401 -- read by tests

__all__ = ["SCHEMA", "bench_filename", "load_bench", "merge_bench", "save_bench", "slug", "unused_bench_path",
           "read_line", "render_markdown", "PLOTS",
           "plot_roofline", "plot_speedup", "plot_tuning", "CUBLAS_CHOICE", "GEMMTUNE_METHODS", "GROUPS", "LABELS",
           "METHODS", "SAME_MARK", "SAME_NOTE", "SPEEDUP_TARGETS", "TUNE_QUALITY", "TUNE_TIME_RATIO", "best_ms",
           "floor_fraction", "read_fraction", "group_speedups", "kernel", "method_speedup", "methods_present", "same_kernel_as_cublas",
           "targets", "tuning_summary", "render", "render_file", "geomean", "is_tie", "memory_gbps", "roofline_ms",
           "speedup", "verdict", "write_gbps", "bench_from_tune_run", "render_tune_run"]
