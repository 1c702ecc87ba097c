"""One collection run: the shapes of the plan in batches, each batch one ``gemmtune.tune`` call with
a lookup table that fixes its candidates, sized so that the run ends within its budget; a
watchdog exports what the store holds should a batch overrun. ``run_on_gpus`` runs one such
process per GPU of this host, all filling one store."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np

from .claims import claim, clear as clear_claims
from ..jsonio import write_atomic  # the progress file: a reader (or a cut call) never sees half of one
from ..store import ResultStore
from .rows import export, launch_bound_rows, stale_edge_rows, unpack, with_store
from .sampling import shape_choices
from .shapes import csv_plan, problems_for, shape_plan, spread

FIRST_BATCH = 4  # shapes in the first batch of each dtype, which measures seconds per shape
FIRST_EST_S = 30.0  # assumed seconds per shape before anything was measured
MARGIN = 1.3  # a batch starts only when MARGIN x its estimated time fits in what is left



def batch_size(left_s: float, est_s_per_shape: float, max_batch: int, calibrated: bool) -> int:
    """Shapes in the next tune() call: up to ``max_batch`` (``FIRST_BATCH`` until this dtype
    has been measured), and no more than fit in ``left_s`` with the margin; 0: stop."""
    n = max_batch if calibrated else min(max_batch, FIRST_BATCH)
    fit = int(left_s // (MARGIN * max(est_s_per_shape, 1e-3)))
    return max(0, min(n, fit))


def process_age_s() -> float:
    """Seconds since this process started (Linux /proc; 0 elsewhere): the budgets count from the
    start of the process, imports included."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


def selected_shapes(args) -> list[tuple]:
    """The plan (or ``--shapes``'s CSV: collect.shapes.csv_plan), narrowed by ``--groups``, ordered
    by ``--order``, cut by ``--limit-shapes``."""
    if getattr(args, "shapes", None):
        shapes, left = csv_plan(args.shapes)
        if left:
            print(f"--shapes: left out {len(left)} row(s) of the public suite or repeating a shape: "
                  f"{', '.join(left[:8])}{' ...' if len(left) > 8 else ''}", file=sys.stderr)
    else:
        shapes = shape_plan()
    if args.groups:
        keep = {g.strip() for g in args.groups.split(",") if g.strip()}
        if not keep:  # (',' selected no shape: a run of nothing, exit 0, nothing said)
            raise ValueError(f"--groups {args.groups!r} names no group; the groups are "
                             f"{', '.join(dict.fromkeys(s[0] for s in shapes))}")
        unknown = sorted(keep - {s[0] for s in shapes})
        if unknown:
            raise ValueError(f"--groups: no shapes in group(s) {', '.join(unknown)}; the groups are "
                             f"{', '.join(dict.fromkeys(s[0] for s in shapes))}")
        shapes = [s for s in shapes if s[0] in keep]
    if getattr(args, "order", "plan") == "spread":
        shapes = spread(shapes)
    if args.limit_shapes is not None:
        shapes = shapes[:args.limit_shapes]
    return shapes


def phase_dtypes(text: str) -> list[str]:
    """``--dtypes``' phases, canonical names in order; a dtype named twice (``bf16,bfloat16``) is a
    ValueError: its phase ran twice, the dry run counting its candidates twice and a run every
    shape twice in ``shapes_done``."""
    from ..problem import dtype_name

    out: list[str] = []
    for d in text.split(","):
        name = dtype_name(d)
        if name in out:
            raise ValueError(f"--dtypes {text!r} names {name} twice; give each phase once")
        out.append(name)
    return out


def prepare_store(args, store: Path, out_dir: Path) -> None:
    """The store a run starts from: ``--resume-from`` unpacked where the store is missing, then
    the rows ``--drop-stale-edges`` / ``--drop-launch-bound`` / ``--drop-oom`` name taken out to be
    measured again (the launch-bound and out-of-memory ones kept in ``out_dir``). Once per run,
    before any collector."""
    if not store.exists() and args.resume_from:
        unpack(args.resume_from, store)
        print(f"resumed from {args.resume_from}")
    drop_oom = getattr(args, "drop_oom", False)
    if (args.drop_stale_edges or args.drop_launch_bound or drop_oom) and store.exists():
        with ResultStore(store) as st:
            if args.drop_stale_edges:
                print(f"--drop-stale-edges: {st.drop(stale_edge_rows(st))} rows dropped, to be measured again")
            if args.drop_launch_bound:
                bound = launch_bound_rows(st)
                kept = out_dir / "dropped-launch-bound.csv.gz"
                st.save_rows(bound, kept)
                print(f"--drop-launch-bound: {st.drop(bound)} rows dropped (kept in {kept}), to be measured again")
            if drop_oom:
                oom = st.oom_rows()
                kept = out_dir / "dropped-oom.csv.gz"
                st.save_rows(oom, kept)
                print(f"--drop-oom: {st.drop(oom)} rows dropped (kept in {kept}), to be measured again")


def snapshot_path(out_dir: Path, progress_name: str) -> Path:
    """Where the hard stop copies the store to export it: one name per collector, from its progress
    file's name (``--gpus`` gives each GPU's collector its own), this host and this process.
    Collectors sharing --out (one per GPU, or two runs into one folder) each write, read and delete
    their own copy: under the one name they shared, a collector's copy was overwritten by another's
    (exported as its own), or deleted under it, and that collector's hard stop failed."""
    return Path(out_dir) / f"{Path(progress_name).stem}.{socket.gethostname()}-{os.getpid()}.snapshot.sqlite"


def _require_gpu(what: str) -> None:
    """ValueError, before anything is made, where this machine has no CUDA GPU: ``what`` collect
    measures on, and what it can do here instead."""
    import torch
    if not torch.cuda.is_available():
        raise ValueError(f"{what}; this machine has none (use --list-shapes / --dry-run here)")


def run(args) -> int:
    """``gemmtune collect`` with its parsed options (cli/collect.py)."""
    t0 = time.monotonic() - process_age_s()
    # How every shape's candidates are drawn (shape_choices), in the dry run and the real one.
    sampling = {"mm": args.mm_sample, "splitk": args.splitk_sample, "pad": args.pad_sample, "sampler": args.sampler,
                "new": getattr(args, "new_sample", 0), "core": getattr(args, "core_sample", 0)}
    every = bool(getattr(args, "shapes", None))  # a user's CSV: every row in every dtype phase (problems_for)

    shapes = selected_shapes(args)
    order = getattr(args, "order", "plan")  # the order shapes come in: each phase keeps it (problems_for)
    cluster_addr = getattr(args, "cluster", None)  # an address, or (from Python) a distributed.Client
    cluster_name = cluster_addr if isinstance(cluster_addr, str) or cluster_addr is None else "client"
    if cluster_addr is not None and (args.gpus or args.claims is not None or args.cpu_interpreter):
        # A ValueError, so that the command line prints it as every other usage error
        # ('gemmtune collect: error: ...', exit 2); it was a bare line.
        raise ValueError("--cluster runs one collector (this process, the only writer) over the cluster's workers: "
                         "it does not combine with --gpus, --claims or --cpu-interpreter (a local cluster on a "
                         "machine without GPUs runs the interpreter by itself)")
    resume = getattr(args, "resume_from", None)
    if resume is not None and not Path(resume).is_file():
        # Checked before anything reads it: the dry run opened a missing .sqlite as a store, which
        # created an empty one at that path and reported every candidate left, exit 0.
        why = "it is a directory" if Path(resume).is_dir() else "no such file"
        raise ValueError(f"--resume-from {resume}: {why} (give an earlier collect.sqlite or collect.sqlite.gz)")
    store_arg = getattr(args, "store", None)
    if store_arg is not None and Path(store_arg).name.lower().endswith(".gz"):
        # A SQLite file was made under that name and filled, and the export's DIR/collect.sqlite.gz
        # was then written over it while it was read.
        raise ValueError(f"--store {store_arg}: the store is a SQLite file, not a .gz (give a compressed "
                         "store to --resume-from)")
    # Checked before --gpus starts its collectors (each refused a bad --dtypes on its own, then the
    # parent exported); nothing of the plan needs torch's dtypes before this.
    dtypes = phase_dtypes(args.dtypes)
    if args.gpus is not None:
        gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
        if not gpus or not all(g.isdigit() for g in gpus):
            raise ValueError(f"--gpus {args.gpus!r}: give this host's GPU indices, comma-separated, e.g. 0,1")
        twice = sorted({g for g in gpus if gpus.count(g) > 1}, key=int)
        if twice:  # two collectors on one GPU time against each other, each stored as if alone
            raise ValueError(f"--gpus {args.gpus!r} names GPU {', '.join(twice)} twice; give each GPU once")
        # Those plan or export only: one process, no GPU (--export-only started a collector per GPU).
        if not (args.list_shapes or args.dry_run or args.export_only):
            if not args.cpu_interpreter:  # (the interpreter's test mode)
                # Said once, before anything is made: each collector said it, after ./out was made
                # and the store prepared, then the empty store was exported (exit 1).
                _require_gpu("collect --gpus measures on this host's GPUs")
            return run_on_gpus(args, gpus)
    if args.list_shapes:
        print("# group,name,M,N,K,layout_b")
        for s in shapes:
            print(",".join(map(str, s)))
        print(f"# {len(shapes)} shapes", file=sys.stderr)
        return 0
    if args.dry_run:
        from ..device import current_or

        dev = current_or()
        done = None
        # What the run would resume from: --store where it exists (it then reads no --resume-from),
        # else --resume-from. --store was accepted and ignored here: every candidate 'left'.
        source = args.store if args.store is not None and Path(args.store).is_file() else args.resume_from
        if source:  # one unpacking for both reads
            from ..precision import fp32_precision

            done, stale, bound, oom, arith = with_store(source, lambda st: (
                st.keys(), stale_edge_rows(st) if args.drop_stale_edges else [],
                launch_bound_rows(st) if args.drop_launch_bound else [],
                st.oom_rows() if getattr(args, "drop_oom", False) else [],
                st.other_precision_rows(fp32_precision()) if "float32" in dtypes else []))
            if arith:  # timed under the other fp32 arithmetic, or unknown: ResultStore.done skips them
                print(f"{len(arith)} fp32 rows of {Path(source).name} were timed under another fp32 "
                      f"arithmetic than {fp32_precision()} (or an unknown one) and would be measured again")
                done -= {r[-2:] for r in arith}
            if args.drop_stale_edges:
                print(f"--drop-stale-edges: {len(stale)} rows of {Path(source).name} would be measured again")
                done -= {r[-2:] for r in stale}
            if args.drop_launch_bound:
                print(f"--drop-launch-bound: {len(bound)} rows of {Path(source).name} would be measured again")
                done -= {r[-2:] for r in bound}
            if getattr(args, "drop_oom", False):
                print(f"--drop-oom: {len(oom)} rows of {Path(source).name} would be measured again")
                done -= {r[-2:] for r in oom}
        have_of: dict[str, set[str]] = {}  # problem key -> measured choice ids
        for k, c in (done or ()):
            have_of.setdefault(k, set()).add(c)
        for dt in dtypes:
            probs = problems_for(dt, shapes, every=every, order=order)
            per = [[c.id for c in shape_choices(p, dev, have_of.get(p.key), **sampling)] for _, _, p in probs]
            line = f"{dt}: {len(probs)} shapes, {sum(map(len, per))} candidates"
            if done is not None:  # what a resumed run still has to measure
                left = [[c for c in ids if (p.key, c) not in done] for (_, _, p), ids in zip(probs, per)]
                line += (f"; left after {Path(source).name}: {sum(map(len, left))} candidates "
                         f"on {sum(1 for x in left if x)} shapes")
            print(line)
        return 0

    if cluster_addr is None and not args.cpu_interpreter and not args.export_only:
        # Before anything is written: the refusal below came after ./out was made and the store
        # prepared in it (--resume-from unpacked there, --drop-* rows taken out of the copy).
        _require_gpu("collect measures on a GPU")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    store = args.store or out_dir / "collect.sqlite"
    if args.claims is not None:
        args.claims.mkdir(parents=True, exist_ok=True)
    prepare_store(args, store, out_dir)
    if args.export_only:
        if not store.exists():  # opening it would export a new, empty store
            raise ValueError(f"--export-only: no results store at {store} (give --store or --resume-from)")
        for p in export(store, out_dir):
            print(p)
        return 0

    import torch

    from .. import __version__
    from ..device import DeviceInfo
    from ..shapes import Shape
    from ..store import RunContext
    from ..table import LookupTable, TableChoice, provenance
    from ..tune import tune

    client = cluster_closers = None
    if cluster_addr is not None:
        # The cluster's workers measure; this process plans, sizes the batches and alone
        # writes the store. The context is the workers' (the driver needs no GPU), and the
        # pools they start here are the ones every batch's tune() uses (same settings).
        from .. import cluster as C
        from ..tuning.tuner import run_device

        try:
            client, *cluster_closers = C.connect(cluster_addr, {})
            _, ctx, good, info = C.start_workers(client, timeout=args.timeout, compile_workers=args.compile_workers)
        except (ImportError, ValueError, OSError, TimeoutError, RuntimeError) as e:
            C.close(*(cluster_closers or ()))
            print(f"gemmtune collect: error: --cluster {cluster_name}: {e}", file=sys.stderr)
            return 2
        dev = run_device(info, None, ctx, None, None, None)
        print(f"cluster {cluster_name}: {len(good)} worker(s) on {ctx.device_name}", flush=True)
    elif args.cpu_interpreter:
        from ..api import interpreter_enabled
        from ..bench.runner import WorkerState, info

        if not interpreter_enabled():
            raise ValueError("--cpu-interpreter needs TRITON_INTERPRET=1 in the environment")
        facts = info(WorkerState(device="cpu"))  # the context the tuner's workers report
        ctx = RunContext(facts["device_name"], facts["capability"], facts["torch"], facts["triton"],
                         facts["gemmtune"])
        dev = DeviceInfo.lookup("h100")  # the spaces tune() uses in the interpreter
    elif not torch.cuda.is_available():
        raise ValueError("collect measures on a GPU; this machine has none (use --list-shapes / --dry-run here)")
    else:
        dev = DeviceInfo.from_torch()
        ctx = RunContext.current(dev.name, dev.capability_str)
    budget = args.max_minutes * 60.0
    hard_stop = args.hard_stop_minutes if args.hard_stop_minutes is not None else args.max_minutes + 1.0
    spent: dict[str, list[float]] = {}  # dtype -> [tune() seconds, shapes]
    st = {"tune_s": 0.0, "compile_wait_s": 0.0, "done_shapes": 0, "measured": 0, "batches": 0,
          "per_shape_s": [], "stopped": False, "batch_t0": None}
    def counts(path: Path) -> dict[str, int]:
        with ResultStore(path) as st:
            return st.status_counts()

    before = counts(store) if store.exists() else {}

    def progress(db_path: Path, hard: bool = False) -> dict:
        after = counts(db_path)
        # Over the statuses of both: one no longer held (its rows all replaced: fp32 rows of another
        # arithmetic measured again) counts its loss; rows_added said those rows were gained.
        added = {k: after.get(k, 0) - before.get(k, 0) for k in dict.fromkeys([*after, *before])
                 if after.get(k, 0) != before.get(k, 0)}
        rows_added = sum(added.values())
        wall = time.monotonic() - t0
        tuning = st["tune_s"] + (time.monotonic() - st["batch_t0"] if st["batch_t0"] is not None else 0.0)
        return {"device": ctx.device_name, "context": ctx.__dict__, "shapes_planned": len(shapes),
                "dtypes": dtypes, "shapes_done": st["done_shapes"], "finished": not (st["stopped"] or hard),
                "hard_stop": hard, "timing": args.timing, "compile_ahead": args.compile_ahead,
                "sampler": args.sampler, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                # With --claims, other processes write the same store at the same time: rows_added
                # and rows_in_store count all of them, measured_this_call this process alone.
                "shared_store": args.claims is not None,
                "cluster": cluster_name, "cluster_workers": len(good) if cluster_addr is not None else None,
                "batches": st["batches"], "rows_in_store": sum(after.values()),
                "measured_this_call": st["measured"], "rows_added": rows_added, "rows_added_by_status": added,
                "wall_s": wall, "tune_s": tuning,
                # candidates this process recorded (every status) per second of this call, and
                # per second inside tune(); ok rows per second only where no other process
                # writes the store (rows_added_by_status counts them all)
                "candidates_per_s": st["measured"] / wall if wall > 0 else None,
                "candidates_per_tune_s": st["measured"] / tuning if tuning > 0 else None,
                "ok_per_s": added.get("ok", 0) / wall if wall > 0 and args.claims is None else None,
                "compile_wait_s": st["compile_wait_s"],
                "median_s_per_shape": float(np.median(st["per_shape_s"])) if st["per_shape_s"] else None,
                "s_per_shape_by_dtype": {d: sec / n for d, (sec, n) in spent.items()}}

    finishing = threading.Lock()

    def stop_hard() -> None:
        """The call is about to run out of time (a batch took longer than estimated): export
        a consistent snapshot of the store and exit. Rows already recorded are kept, and the
        next call resumes from them."""
        if not finishing.acquire(blocking=False):
            return  # the normal end is already exporting
        code = 1
        try:
            snap = db.backup(snapshot_path(out_dir, args.progress_name))
            doc = progress(snap, hard=True)
            write_atomic(out_dir / args.progress_name, json.dumps(doc, indent=1) + "\n")
            if not args.no_export:
                for path in export(snap, out_dir):
                    print(path, flush=True)
            snap.unlink()
            print(f"hard stop: still running after {hard_stop:g} minutes; exported what the store holds",
                  file=sys.stderr, flush=True)
            print(json.dumps(doc), flush=True)
            code = 0
        except BaseException:  # noqa: BLE001 -- whatever it was, say so and exit
            traceback.print_exc()
        finally:
            os._exit(code)  # workers notice their parent is gone and exit

    watchdog = None
    interrupted = None  # Ctrl-C (or SIGTERM) in a batch: exported below, then raised again
    with ResultStore(store) as db:
        if hard_stop > 0:  # started once the store exists
            watchdog = threading.Timer(max(0.0, hard_stop * 60.0 - (time.monotonic() - t0)), stop_hard)
            watchdog.daemon = True
            watchdog.start()
        try:
            for dt in dtypes:
                pending = []  # (shape, its candidates or None: computed when its batch comes)
                for group, name, p in problems_for(dt, shapes, every=every, order=order):
                    have = db.done(ctx, p.key)
                    if not have:
                        pending.append((Shape(group, name, p), None))
                        continue
                    cands = shape_choices(p, dev, have, **sampling)
                    if all(c.id in have for c in cands):
                        st["done_shapes"] += 1
                    else:
                        pending.append((Shape(group, name, p), cands))
                i = 0
                while i < len(pending):
                    mine = spent.get(dt)
                    if mine:
                        est = mine[0] / mine[1]
                    else:  # a new dtype: the slowest seen so far, or the first guess
                        est = max([FIRST_EST_S] + [sec / n for sec, n in spent.values()])
                    n = batch_size(budget - (time.monotonic() - t0), est, args.batch, bool(mine))
                    if n == 0:
                        if not st["batches"]:  # (from Python, in a process older than the budget, it said nothing)
                            print(f"collect: --max-minutes {args.max_minutes:g} was spent before the first batch: it "
                                  f"counts from this process's start, {(time.monotonic() - t0) / 60:.1f} min ago; "
                                  "nothing measured (give a larger --max-minutes)", file=sys.stderr, flush=True)
                        st["stopped"] = True
                        break
                    chunk = []
                    while len(chunk) < n and i < len(pending):
                        s, c = pending[i]
                        i += 1
                        if args.claims is not None and not claim(args.claims, s.problem.key):
                            continue  # another process measures it
                        chunk.append((s, c if c is not None else shape_choices(s.problem, dev, None, **sampling)))
                    if not chunk:
                        break
                    lut = LookupTable(provenance(ctx.device_name, ctx.capability, ctx.torch_version,
                                                 ctx.triton_version, __version__, "by-hand"),
                                      {s.problem.key: [TableChoice(c) for c in cands] for s, cands in chunk})
                    tb = st["batch_t0"] = time.monotonic()
                    r = tune([s for s, _ in chunk], store=db, table=lut, progress=False, timeout=args.timeout,
                         compile_workers=args.compile_workers, compile_ahead=args.compile_ahead,
                         timing=args.timing, cluster=client)
                    took = time.monotonic() - tb
                    st["tune_s"] += took
                    st["batch_t0"] = None
                    st["compile_wait_s"] += r.compile_wait_s
                    st["batches"] += 1
                    acc = spent.setdefault(dt, [0.0, 0])
                    acc[0] += took
                    acc[1] += len(chunk)
                    st["per_shape_s"].append(took / len(chunk))
                    st["measured"] += r.measured
                    st["done_shapes"] += len(chunk)
                    print(f"[{time.monotonic() - t0:6.0f} s] {dt}: {st['done_shapes']} shapes done, +{r.measured} rows "
                          f"in {took:.0f} s ({r.measured / took:.1f}/s, waited {r.compile_wait_s:.0f} s for compiles; "
                          f"{', '.join(s.name for s, _ in chunk)})", flush=True)
                if st["stopped"]:
                    break
        except BaseException as e:
            # Ctrl-C or an error in a batch: disarm the hard stop, which otherwise fired later in a
            # process that went on (run() from Python), on the closed store, and os._exit-ed it.
            if watchdog is not None:
                watchdog.cancel()
            if not isinstance(e, KeyboardInterrupt):  # (Terminated, SIGTERM, is one too)
                raise
            # Ctrl-C ended the call without the export a normal end writes: what this call measured
            # was in the store alone, and the next call's --resume-from (the .gz) did not have it.
            interrupted = e
            st["stopped"] = True
    if not finishing.acquire(blocking=False):  # the hard stop is exporting: it exits the process
        time.sleep(3600)
    if cluster_closers:
        from .. import cluster as C

        C.close(*cluster_closers)
    if watchdog is not None:
        watchdog.cancel()
    if interrupted is not None:
        print("collect: interrupted; exporting what the store holds (Ctrl-C again leaves without it)",
              file=sys.stderr, flush=True)
    doc = progress(store)
    write_atomic(out_dir / args.progress_name, json.dumps(doc, indent=1) + "\n")
    if not args.no_export:
        for p in export(store, out_dir):
            print(p)
    print(json.dumps(doc))
    if interrupted is not None:
        raise interrupted  # the command line's exit status for it (130; SIGTERM 143)
    return 0


# Options a per-GPU collector takes over from the command that started it (run_on_gpus); the
# store, its claims folder, --resume-from and the drops are the parent's, done once.
PASSED_ON = ("dtypes", "shapes", "groups", "order", "batch", "limit_shapes", "mm_sample", "splitk_sample", "pad_sample", "new_sample",
             "core_sample", "sampler",
             "compile_workers", "compile_ahead", "timing", "timeout")


def core_shares(cores: list[int], n: int) -> list[list[int]]:
    """``cores`` split into ``n`` contiguous, near-equal shares (each at least one core).

    >>> core_shares(list(range(8)), 3)
    [[0, 1, 2], [3, 4, 5], [6, 7]]
    >>> core_shares([0], 2)
    [[0], [0]]
    """
    if len(cores) < n:
        return [[cores[i % len(cores)]] for i in range(n)]
    per, extra = divmod(len(cores), n)
    out, i = [], 0
    for j in range(n):
        take = per + (j < extra)
        out.append(cores[i:i + take])
        i += take
    return out


def child_argv(args, gpu: str, store: Path, claims: Path, minutes_left: float) -> list[str]:
    """The command line of the collector on ``gpu``: one process of ``gemmtune collect`` with the
    parent's options, the shared store and claims folder, no export of its own."""
    argv = [sys.executable, "-m", "gemmtune.cli", "collect", "--store", str(store), "--claims", str(claims),
            "--no-export", "--progress-name", f"{Path(args.progress_name).stem}-gpu{gpu}.json",
            "--out", str(args.out), "--max-minutes", f"{max(minutes_left, 0.0):.4f}"]
    if args.hard_stop_minutes:
        # Counted from the parent's start, as --max-minutes is (minutes_left): the child starts later,
        # and the stop given as it was came that much after the call's. Past already: a moment, as
        # 0 means never.
        spent = args.max_minutes - minutes_left
        argv += ["--hard-stop-minutes", f"{max(args.hard_stop_minutes - spent, 1e-4):.4f}"]
    elif args.hard_stop_minutes is not None:
        argv += ["--hard-stop-minutes", "0.0000"]  # never
    for name in PASSED_ON:
        v = getattr(args, name)
        if v is not None:
            argv += [f"--{name.replace('_', '-')}", str(v)]
    if args.cpu_interpreter:
        argv.append("--cpu-interpreter")
    return argv


def run_on_gpus(args, gpus: list[str]) -> int:
    """One collector process per GPU of this host (``CUDA_VISIBLE_DEVICES``, an equal share of
    the cores each), all filling one store, shapes given out by claims; then one export."""
    t0 = time.monotonic() - process_age_s()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    store = Path(args.store or out_dir / "collect.sqlite")
    claims = Path(args.claims or store.with_name(store.name + ".claims"))
    claims.mkdir(parents=True, exist_ok=True)
    clear_claims(claims)  # a new set of processes: every shape is free again
    prepare_store(args, store, out_dir)
    ResultStore(store).close()  # created (schema and all) before the collectors share it
    try:
        cores = sorted(os.sched_getaffinity(0))
    except AttributeError:  # no affinity API on this OS: no pinning
        cores = []
    shares = core_shares(cores, len(gpus)) if cores else [None] * len(gpus)
    procs = []
    left = args.max_minutes - (time.monotonic() - t0) / 60.0
    for gpu, share in zip(gpus, shares):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu)
        pre = (lambda share=share: os.sched_setaffinity(0, share)) if share else None
        procs.append((gpu, subprocess.Popen(child_argv(args, gpu, store, claims, left), env=env, preexec_fn=pre,
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                            bufsize=1)))

    def relay(gpu, proc):
        for line in proc.stdout:
            print(f"[gpu{gpu}] {line}", end="", flush=True)

    relays = [threading.Thread(target=relay, args=pg, daemon=True) for pg in procs]
    for t in relays:
        t.start()
    rc = 0
    interrupted = None  # Ctrl-C (or SIGTERM) while the collectors ran: exported below, then raised again
    try:
        for gpu, proc in procs:
            if proc.wait() != 0:
                print(f"collector on GPU {gpu} exited {proc.returncode}", file=sys.stderr)
                rc = 1
    except KeyboardInterrupt as e:  # (Terminated, SIGTERM, is one too)
        # The parent left without the export a normal end writes (the single-GPU call exports on
        # Ctrl-C): what the collectors had measured was in the store alone, not in the .gz the
        # next call resumes from. Its collectors are stopped first, so the export holds all they wrote.
        interrupted = e
        stop_collectors(procs, e)
    for t in relays:
        t.join(timeout=5)
    if interrupted is not None:
        print("collect: interrupted; exporting what the store holds (Ctrl-C again leaves without it)",
              file=sys.stderr, flush=True)
    if not args.no_export:
        for path in export(store, out_dir):
            print(path)
    if interrupted is not None:
        raise interrupted  # the command line's exit status for it (130; SIGTERM 143)
    return rc


# How long an interrupted --gpus parent waits for its collectors to stop on their own (Ctrl-C in a
# terminal reaches the whole process group; each collector writes its progress file and exits)
# before it passes the signal on, and then how long before it kills one that still runs.
STOP_GRACE_S = 10.0
STOP_KILL_S = 60.0


def stop_collectors(procs, why: BaseException) -> None:
    """Stop the collectors of an interrupted ``run_on_gpus`` (``procs``: [(gpu, Popen)]): each has
    ``STOP_GRACE_S`` to stop on its own, as a Ctrl-C that reached it too has it do; one still
    running is then sent the parent's signal (SIGTERM where ``why`` is the CLI's Terminated, else
    SIGINT: the parent alone was signalled), and killed ``STOP_KILL_S`` later. Not sent at once: a
    second signal cuts a collector's own clean-up short."""
    import signal

    from ..cli import Terminated

    sig = signal.SIGTERM if isinstance(why, Terminated) else signal.SIGINT

    def wait(proc, seconds: float) -> bool:
        try:
            proc.wait(timeout=seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    deadline = time.monotonic() + STOP_GRACE_S
    for gpu, proc in procs:
        if not wait(proc, max(0.0, deadline - time.monotonic())):
            proc.send_signal(sig)
    deadline = time.monotonic() + STOP_KILL_S
    for gpu, proc in procs:
        if not wait(proc, max(0.0, deadline - time.monotonic())):
            print(f"collector on GPU {gpu} still running {STOP_KILL_S:.0f} s after the signal: killed",
                  file=sys.stderr, flush=True)
            proc.kill()
            proc.wait()

