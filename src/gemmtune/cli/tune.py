"""``gemmtune tune`` (and ``gemmtune worker --serve``, the warm pool it can use)."""

from __future__ import annotations

import sys

from ..jsonio import check_file_target
from .common import (Help, add_shape_args, alias, check_allocatable, families_help, family_list, gain_fraction,
                     int_at_least, nonneg_int, positive_float, positive_int, refuse_empty, refuse_same_file, seed_int,
                     shapes_of)


def cmd_tune(args) -> int:
    from ..tune import render, tune

    # An empty path ("--out $OUT", OUT unset) was read as the working directory: "cannot write the
    # table to : it is a directory", "cannot open results store .".
    refuse_empty(args, "out", "store", "table", "model", "server", "cluster")
    shapes = shapes_of(args)
    check_allocatable(shapes, args.device)
    # The table is written over its path (--overwrite: told to by the error a suite there gets),
    # which replaced the suite the run read; the summary, below, likewise.
    refuse_same_file("--out", args.out, [("--suite", args.suite)], "give them different paths")
    families = family_list(args.families)
    if args.model and not args.fast and str(args.benchmark_space).upper() == "SAME":
        raise ValueError("--model ranks candidates only when filtering: add --benchmark-space DEFAULT|K or --fast")
    if args.fast and args.space == "default":
        # --fast searches the exhaustive space: "--fast --space default" searched it all the same,
        # the --space dropped without a word (the default is None so that a given one is seen).
        raise ValueError("--fast searches the exhaustive space; --space default contradicts it: give one of them")
    args.space = args.space or "default"
    for opt, value in (("--workers", args.workers), ("--compile-workers", args.compile_workers)):
        if args.in_process and value is not None:
            # Neither starts with --in-process (no worker, no compile pool): the count was dropped
            # without a word. (--server and --cluster say in their help that they do not apply.)
            raise ValueError(f"{opt} {value}: --in-process measures in this process and starts no worker or "
                             "compile process; give one or the other")
    refuse_empty(args, "summary")  # an empty --summary wrote none, without a word
    if args.summary:  # found before the run, not after it
        check_file_target(args.summary, "--summary")
        # The summary is written last, over whatever is at its path: naming the store there
        # replaced every measurement with the summary JSON, naming --out or --table the table.
        refuse_same_file("--summary", args.summary, [("--store", args.store), ("--out", args.out),
                                                     ("--table", args.table), ("--suite", args.suite)],
                         "give them different paths")
    result = tune(shapes, families=families, space=args.space, store=args.store, out=args.out,
                  workers=args.workers, timeout=args.timeout, compile_workers=args.compile_workers,
                  retry_failed=args.retry_failed, timing=args.timing, compile_ahead=args.compile_ahead,
                  progress=not args.quiet, device=args.device, seed=args.seed, table=args.table,
                  benchmark_space=args.benchmark_space, fast=args.fast, model=args.model,
                  deterministic=args.deterministic, min_gain=args.min_gain,
                  overwrite=args.overwrite, cluster=args.cluster, server=args.server,
                  in_process=args.in_process, prestarted=getattr(args, "prestarted", ()), runoff=args.runoff)
    render(result)
    for line in result.rejected:
        print(f"not recorded (rerun to measure it): {line}", file=sys.stderr)
    if args.summary:
        import json

        from ..jsonio import write_atomic
        from ..tune import summary
        write_atomic(args.summary, json.dumps(summary(result), indent=1))
    return 0


def warm_note(info: dict, warm_plan) -> str:
    """The "serving" line's account of the server's warm-up: ``warm_plan()`` run now (seconds),
    and the workers' results in ``info["warm"]`` (bench.server.warm_workers). A warm-up that fails
    is named, never raised: it is an optimisation, and what failed fails again, with its message,
    in a client's tune.

    >>> warm_note({"warm": [{"status": "ok", "s": 1.3}]}, lambda: 0.7)
    '; warmed up: planning 0.7 s, workers 1.3 s'
    >>> warm_note({"warm": [{"status": "skipped", "reason": "not on a GPU"}]}, lambda: 1 / 0)
    '; warmed up: planning not (ZeroDivisionError: division by zero), workers not (not on a GPU)'
    """
    try:
        plan = f"planning {warm_plan():.1f} s"
    except Exception as e:  # noqa: BLE001 - see the docstring
        plan = f"planning not ({type(e).__name__}: {e})"
    warm = info.get("warm") or []
    done = [w for w in warm if w.get("status") == "ok"]
    if done:
        return f"; warmed up: {plan}, workers {max(w['s'] for w in done):.1f} s"
    return f"; warmed up: {plan}" + (f", workers not ({warm[0].get('reason')})" if warm else "")


def cmd_worker(args) -> int:
    import signal
    import threading

    from ..bench.server import serve

    def ready(info: dict) -> None:
        # What a forwarded tune imports on its first call (the tuner, the ranker's modules): here,
        # before the first client, not on its clock (the first forwarded one-shape tune took 3.3 s
        # on an H100 against 1.0-1.6 s for the next ones).
        from .. import tune as _tune  # noqa: F401
        from ..bench.server import WARM_SIZES
        from ..model import lgbm_text  # noqa: F401
        from ..tuning import tuner
        # Likewise the first plan (the ranker's files read, the planning code run once) and each
        # worker's first compile and first timing (bench.server.warm_workers, done by now).
        note = warm_note(info, lambda: tuner.warm_plan(info, WARM_SIZES))
        print(f"gemmtune worker: serving {info.get('device_name', '?')} on {args.serve} "
              f"(tune --server {args.serve}){note}; Ctrl-C or kill stops it", file=sys.stderr, flush=True)
    # SIGTERM (kill) stops it as Ctrl-C does, removing the socket and its key: a shell script's
    # background job ignores SIGINT, and the default SIGTERM would leave both behind.
    stop = threading.Event()
    before = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        serve(args.serve, workers=args.workers, timeout=args.timeout, ready=ready, stop=stop)
    finally:
        # cli.main called in process (a test, a script) goes on after the server: a SIGTERM left
        # setting a dead event would be swallowed, and later commands' own handler is installed only
        # over the default one (cli._on_sigterm)
        signal.signal(signal.SIGTERM, before)
    return 0


def add_parsers(sub) -> None:
    from ..tuning.runoff import RUNOFF_MARGIN  # math only

    p = sub.add_parser("tune", help="benchmark candidates per shape, store every result, write a table",
                       formatter_class=Help)
    add_shape_args(p)
    p.add_argument("--space", choices=("default", "exhaustive"),
                   help="the search space (default: default; exhaustive with --fast)")
    # Once: "--families aten --families triton_mm" kept triton_mm alone, without a word.
    p.add_argument("--families", metavar="F1,F2", help=f"comma-separated: {families_help()} (default all)")
    alias(p, "--family", "--families")  # the old spelling, as space and predict take it
    p.add_argument("--store", default="gemmtune.sqlite",
                   help="SQLite results file, in the working directory unless a path is given (resumable: "
                   "a rerun reuses what it holds)")
    p.add_argument("--out", default="gemmtune-table.json",
                   help="lookup table to write, in the working directory unless a path is given; an existing "
                   "one is merged into (per problem the faster measured choice first), not replaced, "
                   "unless --overwrite")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out table instead of merging")
    p.add_argument("--workers", type=positive_int, metavar="N", help="benchmark workers (default: one per GPU)")
    p.add_argument("--compile-workers", type=nonneg_int, metavar="N",
                   help="parallel compile processes (GPU only; 0: the benchmark worker compiles; default: as many "
                   "as can be busy, at most min(cores, 16))")
    p.add_argument("--timeout", type=positive_float, default=120.0, help="seconds per candidate before it is killed")
    p.add_argument("--retry-failed", action="store_true",
                   help="measure again candidates stored as crashed, timed out or errored")
    p.add_argument("--timing", choices=("standard", "quick"), default="standard",
                   help="timer profile: standard (20 CUDA-graph replays) or quick (5 shorter replays; bulk collection)")
    p.add_argument("--compile-ahead", type=nonneg_int, default=2, metavar="N",
                   help="shapes the compile workers may compile ahead of the one being timed (0: none)")
    p.add_argument("--device", help="built-in GPU for the config spaces when no GPU is present (h100/h200/a100)")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of the random inputs")
    p.add_argument("--summary", metavar="JSON", help="also write the per-shape results as JSON")
    p.add_argument("--table", metavar="JSON", help="lookup table: shapes with an entry benchmark only its choices")
    p.add_argument("--benchmark-space", default="SAME", metavar="SAME|DEFAULT|AUTO|FAST|K",
                   help="benchmark every candidate (SAME), as many as the default space has (DEFAULT), "
                   "the performance model's top K, AUTO: its top 1 to 8, more where it is unsure "
                   "(recorded per shape in --summary), or FAST: its first of each of its two best families and its next best "
                   "(up to 2 more where it does not trust its ranking) "
                   "(what --fast benchmarks); cuBLAS and table choices always")
    p.add_argument("--fast", action="store_true",
                   help="exhaustive search space, benchmark the model's first choice of each of its two best "
                   "families, its next best choice (up to 3 where it is unsure of the shape), and cuBLAS; at "
                   "decode (fp32, or 16-bit with an unaligned B) also up to 3 of skinny's CUDA-core tiles")
    p.add_argument("--deterministic", action="store_true",
                   help="only kernels that give the same bits on every call (no fp32-atomic split-K reduction)")
    p.add_argument("--min-gain", type=gain_fraction, default=0.0, metavar="F",
                   help="a winner other than cuBLAS must beat it by this fraction (0.02: 2%%), else cuBLAS wins: "
                   "for tables that serve a model, where a within-noise win can lose")
    p.add_argument("--runoff", type=gain_fraction, default=RUNOFF_MARGIN, metavar="F",
                   help="a winner other than cuBLAS that beats it by less than this fraction is timed again "
                   "beside cuBLAS in interleaved rounds, and the faster median wins by more than 1%%, else cuBLAS (the margin "
                   "is at least 0.25 where cuBLAS takes under 20 us: one sweep's timing is noisier there); 0: never "
                   "(default: %(default)s)")
    p.add_argument("--model", metavar="PATH", help="learned model that ranks candidates (default: the one shipped "
                   "for this GPU and triton MAJOR.MINOR, else analytic)")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run on a Dask cluster, one worker per GPU: its scheduler address (tcp://host:8786), or "
                   "local:N to start N worker processes here, worker i on GPU i; only this process writes "
                   "--store (needs pip install 'gemmtune[cluster]'; --workers and --compile-ahead do not apply; not with "
                   "--server)")
    p.add_argument("--in-process", action="store_true",
                   help="measure in this process: no benchmark worker to start (3.5 s on an H100), but a "
                   "candidate that crashes or hangs the GPU takes this command with it (default: a worker subprocess)")
    p.add_argument("--server", metavar="SOCKET",
                   help="run the candidates on the warm worker pool of 'gemmtune worker --serve SOCKET' "
                   "(no worker start-up in this call; --workers and the compile workers are the server's); "
                   "GEMMTUNE_SERVER=SOCKET in the environment does the same for every 'gemmtune tune' that "
                   "names no --server, --in-process or --cluster")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(fn=cmd_tune)


def add_worker_parser(sub) -> None:
    p = sub.add_parser("worker", help="keep a benchmark worker pool warm for later tune calls (--serve)",
                       formatter_class=Help)
    p.add_argument("--serve", required=True, metavar="SOCKET",
                   help="the Unix socket to serve on (a key file SOCKET.key, mode 0600, is written beside it)")
    p.add_argument("--workers", type=int_at_least(1), metavar="N", help="benchmark workers (default one per GPU)")
    p.add_argument("--timeout", type=positive_float, default=120.0, help="seconds a candidate may take (tune's --timeout wins "
                   "per call)")
    p.set_defaults(fn=cmd_worker)
