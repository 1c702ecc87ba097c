"""``gemmtune collect``: bulk timings for the learned performance model (gemmtune.collect)."""

from __future__ import annotations

import os
from pathlib import Path

from .common import nonneg_int, nonneg_minutes, positive_float, positive_int


def cmd_collect(args) -> int:
    from ..collect import run
    from ..jsonio import check_dir_target

    check_dir_target(args.out, "--out")
    name = args.progress_name
    if name in ("", ".", "..") or Path(name).name != name:
        # Checked first: a path failed at the very end of the call, after every batch and before the
        # export; --gpus' collectors each wrote its stem's file in --out instead.
        raise ValueError(f"--progress-name {name!r}: give a file name (it is written in --out)")
    return run(args)


def add_parsers(sub) -> None:
    from .. import collect

    p = sub.add_parser("collect", help="bulk timings of sampled candidates on ~420 shapes, for the learned model "
                       "(GPU, resumable, sized to a time budget; --gpus: one collector per GPU)",
                       description=collect.__doc__)
    p.add_argument("--gpus", metavar="0,1,...", help="one collector process per listed GPU of this host, all "
                   "filling one store (claims give each shape to one of them), then one export")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="measure on a Dask cluster, one worker per GPU ('local:N': N workers on this host's GPUs, "
                   "or a scheduler's tcp://host:8786); this process alone plans and writes the store "
                   "(needs pip install 'gemmtune[cluster]'; see the README's 'Many GPUs')")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")), metavar="DIR",
                   help="where collect.sqlite, its compressed copy, the CSV and the progress JSON go "
                   "(default: $OUT, else ./out)")
    p.add_argument("--store", type=Path, help="results store to fill (default: DIR/collect.sqlite)")
    p.add_argument("--resume-from", type=Path, metavar="STORE[.gz]",
                   help="start from this earlier store (copied/decompressed to --store when that is missing)")
    p.add_argument("--max-minutes", type=nonneg_minutes, default=8.0,
                   help="size batches to end within this many minutes of the start (default 8: one 10-minute call)")
    p.add_argument("--hard-stop-minutes", type=nonneg_minutes,
                   help="if a batch is still running after this many minutes, export what the store holds "
                    "and exit (default: --max-minutes + 1; 0: never)")
    p.add_argument("--dtypes", default="bf16,fp16,fp32",
                   help="phases, in order (default bf16,fp16,fp32; e4m3 / e5m2: fp8 scaled_mm on a third of the "
                    "shapes, bf16 out, B column-major, row-wise and tensor-wise scales)")
    p.add_argument("--shapes", type=Path, metavar="CSV",
                   help="collect these shapes instead of the built-in plan: a suite CSV "
                        "(group,name,M,N,K,dtype[,layout_b]) of mm rows; every --dtypes phase collects "
                        "every row (the dtype column is not used); public-suite shapes are left out")
    p.add_argument("--groups", help="only these comma-separated shape groups")
    p.add_argument("--batch", type=positive_int, default=24,
                   help="most shapes per tune() call (default 24; fewer when the time left is short)")
    p.add_argument("--order", choices=("plan", "spread"), default="plan",
                   help="the order shapes are measured in: 'plan' (default: group after group) or 'spread' "
                    "(round-robin over the groups, so that a collection cut short, a new GPU's first calls, "
                    "covers every group; resume with the same order)")
    p.add_argument("--limit-shapes", type=positive_int, metavar="N", help="only the first N shapes of the plan (after --groups, --order)")
    p.add_argument("--mm-sample", type=nonneg_int, metavar="N", default=80, help="triton_mm configs per shape (default 80)")
    p.add_argument("--splitk-sample", type=nonneg_int, metavar="N", default=40, help="split-K configs per shape (default 40)")
    p.add_argument("--pad-sample", type=nonneg_int, metavar="N", default=16, help="pad+ configs per unaligned shape (default 16)")
    p.add_argument("--new-sample", type=nonneg_int, metavar="N", default=8,
                   help="configs per shape of each family the shipped model has no timings of (skinny, "
                    "persistent_tma, triton_static; default 8, 0: none). Shapes finished before these "
                    "families existed are measured again for them only")
    p.add_argument("--core-sample", type=nonneg_int, metavar="N", default=0,
                   help="skinny CUDA-core configs per shape with M <= 16, beyond --new-sample's random draw, "
                   "where they are a tenth of its space (default 0: none). Shapes already collected are "
                   "measured again for them only")
    p.add_argument("--sampler", choices=collect.SAMPLERS, default="pool",
                   help="how new shapes draw their configs: 'pool' (default: from a fixed subset of each "
                    "exhaustive space, so that shapes share compiled kernels) or 'random' (the whole space); "
                    "shapes the store already holds keep the sampler they were started with")
    p.add_argument("--claims", type=Path, metavar="DIR",
                   help="several collectors (one per GPU) share --store: each shape is measured by "
                    "the process that claims it first in DIR (empty it before a new set of processes starts)")
    p.add_argument("--no-export", action="store_true",
                   help="write only the progress file at the end, not the compressed store and CSV "
                    "(processes sharing a store: export once, with --export-only, after all have ended)")
    p.add_argument("--progress-name", default="collect-progress.json",
                   help="file name of the progress record in --out (default collect-progress.json)")
    p.add_argument("--compile-workers", type=nonneg_int, metavar="N", help="parallel compile processes (default: tune's)")
    p.add_argument("--compile-ahead", type=nonneg_int, metavar="N", default=2,
                   help="shapes compiled ahead of the one being timed (default 2; 0: separate phases)")
    p.add_argument("--timing", choices=("quick", "standard"), default="quick",
                   help="timer profile (default quick: 5 CUDA-graph replays; standard: 20)")
    p.add_argument("--timeout", type=positive_float, default=60.0, help="seconds per candidate before it is killed")
    p.add_argument("--drop-stale-edges", action="store_true",
                   help="first delete the rows timed before the kernel masked small-M / odd-N edges, "
                        "for the configs it now masks, so the plan measures them again")
    p.add_argument("--drop-launch-bound", action="store_true",
                   help="first delete the rows the early cut stored before it checked for launch-bound passes, "
                        f"with times under {collect.LAUNCH_BOUND_MS} ms (they may be Python's launch time); they are "
                        "added to DIR/dropped-launch-bound.csv.gz, and the plan measures them again")
    p.add_argument("--drop-oom", action="store_true",
                   help="first delete the rows that failed with CUDA out of memory (a full GPU says nothing about "
                        "the candidate); they are added to DIR/dropped-oom.csv.gz, and the plan measures them again")
    p.add_argument("--list-shapes", action="store_true", help="print the shape plan as CSV and exit")
    p.add_argument("--dry-run", action="store_true", help="count candidates per phase and exit (no GPU)")
    p.add_argument("--export-only", action="store_true", help="only write the compressed store and CSV")
    p.add_argument("--cpu-interpreter", action="store_true",
                   help="measure in the Triton CPU interpreter (tests only: needs TRITON_INTERPRET=1; "
                    "timings mean nothing)")
    p.set_defaults(fn=cmd_collect)
