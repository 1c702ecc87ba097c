"""The side-by-side benchmark: gemmtune against cuBLAS, torch.compile max-autotune and
nvMatmulHeuristics on one GPU, with every number in one JSON and a report beside it.

    gemmtune bench                                   # the public suite -> benchmarks/results/
    gemmtune bench --groups splitk,odd --limit 3 --skip-inductor --out out/

One run, in one process (gemmtune's tuner adds its own worker processes):

1. Ceilings, measured at the start (``ceilings.measure_ceilings``): memory bandwidth two ways -- a
   1 GiB device-to-device copy (bytes read plus bytes written) and read-dominated kernels
   (the best of a 1 GiB fp32 sum and a bf16 GEMV over a 1 GiB matrix, bytes read plus the
   few written) -- and cuBLAS mm throughput on 8192^3 in bf16, fp16 and fp32 (tf32 off).
   A write bandwidth too: a 1 GiB fp32 fill (bytes written, next to nothing read).
   A shape's roofline floor is max(flops / peak of its dtype, memory time); the memory time
   is read bytes / read bandwidth + write bytes (C) / write bandwidth (``report.roofline_ms``),
   the read bandwidth being the higher of the copy's and the read kernels'
   (``report.memory_gbps``), the write bandwidth the better of the fill's and the one the
   copy implies (``report.write_gbps``); without a write ceiling (an older ceilings file) it
   is min_bytes / read bandwidth, as before.
2. gemmtune's modes (TUNE_MODES: the default space; --fast and the model's top-5 where
   tune() takes their keywords), each over all selected shapes with a fresh results store
   and a fresh Triton cache, so each shape's tuning wall time includes its compilation.
3. Per shape, on the same rotating inputs (together bigger than L2): cuBLAS; the kernel
   each mode chose; torch.compile(mode="max-autotune-no-cudagraphs") with Inductor's
   caches disabled (its first call's wall time is its tuning time; the kernel it runs is
   read from its generated code, its autotuning from select_algorithm's feedback hook);
   nvMatmulHeuristics' top-1 and top-5 configs run through gemmtune's Triton kernels.
   Every output is checked against the fp64 reference (gemmtune.verify) before its time
   is kept, once per method. Then all of them are timed together in interleaved rounds
   (``rounds.round_robin``): no method is favoured or penalised by when it ran. A memory-bound
   shape that writes little (a decode GEMV) also gets, in the same rounds, a kernel that only
   reads as many bytes as its inputs hold (``readtime``; the record's ``read``): what any kernel
   pays for those bytes, launch and latency included, which the bytes-only floor leaves out.

Times: ``round_robin`` and ``aggregate``. Each method's launch is captured once in a CUDA
graph as gemmtune.bench.timing.CudaGraphTimer does it (L2-cold: the graph cycles through
the rotating input sets). Then ``ROUNDS`` rounds (R) replay every method's graph
ceil(repeats / R) times each, in an order that rotates per round; the kept time is the
median over rounds of the round medians, the spread the larger of the median
within-round relative IQR and the across-round range / median. Eager per-call wall time
is measured once per method after the rounds. The JSON
(``<date>-<gpu>-torch<v>-triton<v>[-groups]-bench.json``; ``-t<HHMMSS>`` added where an
earlier run's is there) is rewritten after every shape, so a killed run keeps what it finished,
and until the last shape its header's ``unmeasured`` and a note name the shapes not measured
yet; partial runs (``groups``, ``limit``) merge with ``gemmtune report --merge``. The format is
described in gemmtune.report.

Two options serve scripts/bench_gpu.sh (several runs in one device call):
``--ceilings-file FILE`` reads the ceilings from FILE when it holds ones measured on this
GPU (by an earlier run of the same call), else measures them and writes FILE;
``--deadline <unix time>`` stops before a shape that would likely end past that time (the
longest shape so far is the guess), notes the shapes left out and still writes the JSON
and its report.

The parts: ``modes`` (gemmtune's modes, the tuning phase), ``ceilings``, ``rounds``
(interleaved timing), ``inductor``, ``tunableop``, ``nvmmh`` (the peers), ``records`` (the
JSON's entries), ``settings`` (process-wide settings, put back), this module (the run).
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

import torch

from .. import report
from ..shapes import Shape
from .ceilings import check_ceilings_file, fp32_peak_tflops, load_ceilings, measure_ceilings, save_ceilings
from .eager import EAGER_CALLS, EAGER_WARMUP, dispatch_launch
from .inductor import INDUCTOR_MODE, AutotuneLog, _install_autotune_log, _remove_autotune_log, compile_inductor
from .modes import NVMMH_TOPK, OPTIONAL_MODES, TUNE_MODES, tune_phase
from .readtime import BLOCK as READ_BLOCK
from .readtime import StreamRead, sm_count, wants_read
from .records import dist_version, failed_method, failure_record, mark_failed, time_entry, timer_text
from .rounds import ROUNDS, aggregate, make_entry, round_robin, timer_count, verified_launch
from .settings import bench_settings
from .timing import CudaGraphTimer, wall_ms_per_call
from .tunableop import TunableOp

READ = "\0read"  # the read reference's entry in a shape's rounds: a name no method can have
CUDA_ERROR = "bench needs a CUDA GPU; use `gemmtune report` to render recorded results"


def measure_shape(shape: Shape, state, ceilings: dict, tuned: dict, skipped: dict, *, seed: int,
                  inductor_log: AutotuneLog | None, extra_s: dict | None = None,
                  errors: dict | None = None, rounds: int = ROUNDS, tunableop: TunableOp | None = None,
                  sweeps: dict | None = None) -> dict:
    """Every method on one shape; the record that goes into the bench JSON.

    ``tuned``: mode -> problem key -> the tuner's ShapeResult (gemmtune's modes and
    nvMMH's top-k); ``skipped``: mode -> why it did not run; ``extra_s``: mode -> key ->
    seconds to add to the tuning time (nvMMH's query); ``errors``: mode -> key -> why
    the mode has no result for this shape; ``sweeps``: mode -> key -> what the mode timed
    (``records.sweep_record``), kept in its record as ``sweep``.

    First every method's kernel is checked against the fp64 reference (Inductor's after
    its compile, which is its tuning); then cuBLAS and every kernel that passed are timed
    together, ``round_robin`` over ``rounds`` rounds with the state's timer's repeats in
    all (``aggregate``); then the eager time of each, once.
    """
    p = shape.problem
    timer = state.timer
    peak = fp32_peak_tflops(ceilings, p.allow_tf32) if p.dtype == "float32" else (ceilings["mm"].get(p.dtype) or {}).get("tflops")
    if peak is None and p.op == "scaled_mm":
        # fp8: no fp8 ceiling is measured; Hopper's fp8 tensor cores run at twice the bf16 rate.
        bf16 = (ceilings["mm"].get("bfloat16") or {}).get("tflops")
        peak = 2 * bf16 if bf16 else None
    floor = report.roofline_ms(p.flops, p.min_bytes, peak, report.memory_gbps(ceilings), p.write_bytes,
                               report.write_gbps(ceilings))
    compute = p.flops / (peak * 1e9) if peak else 0.0
    rec = {"group": shape.group, "name": shape.name, "key": p.key, "m": p.m, "n": p.n, "k": p.k, "batch": p.batch,
           "dtype": p.dtype, "layout_a": p.layout_a, "layout_b": p.layout_b, "flops": p.flops,
           "min_bytes": p.min_bytes, "write_bytes": p.write_bytes, "floor_ms": floor,
           "bound": "compute" if floor and compute >= floor else "memory", "methods": {}}
    methods = rec["methods"]
    # name -> (record so far, launch): the methods whose output checked out, in timing order
    passed: dict[str, tuple[dict, Callable[[int], object]]] = {}

    def check(name: str, choice: str, **extra) -> dict:
        res, launch = verified_launch(p, choice, state, seed)
        if launch is None:
            return failed_method(res, choice=choice, **extra)
        r = {"status": "ok", "choice": choice, "rel_err": res.get("rel_err"), **extra}
        passed[name] = (r, launch)
        return r

    rec["cublas"] = check("cublas", "aten")
    asked = [m for m in OPTIONAL_MODES if m in tuned or m in skipped]
    for mode in (*TUNE_MODES, *asked, *NVMMH_TOPK):
        r = tuned.get(mode, {}).get(p.key)
        why = (errors or {}).get(mode, {}).get(p.key)
        sweep = (sweeps or {}).get(mode, {}).get(p.key)
        if mode in skipped:
            methods[mode] = {"status": "skipped", "reason": skipped[mode]}
        elif why or r is None:
            methods[mode] = {"status": "error", "reason": why or "the tuner gave no result for this shape (see notes)"}
        elif r.best is None:
            methods[mode] = {"status": "error", "reason": f"no candidate passed: {r.statuses}", "tune_s": r.tune_s,
                             **({"sweep": sweep} if sweep else {})}
        else:
            methods[mode] = check(mode, r.best, candidates=r.tried, tuner_ms=r.best_ms, **({"sweep": sweep} if sweep else {}),
                                  tune_s=r.tune_s + (extra_s or {}).get(mode, {}).get(p.key, 0.0),
                                  **({"compile_wait_s": r.compile_wait_s} if getattr(r, "compile_wait_s", 0.0) else {}),
                                  **({"runoff": r.runoff} if getattr(r, "runoff", None) else {}))
    compiled = False
    entries: dict = {}
    read: StreamRead | None = None
    try:
        if inductor_log is None:
            methods["inductor"] = {"status": "skipped", "reason": "--skip-inductor"}
        elif state.key != p.key:  # the inputs could not be made (e.g. out of memory)
            methods["inductor"] = {"status": "error", "reason": rec["cublas"].get("reason") or "no inputs"}
        else:
            compiled = True
            methods["inductor"], launch = compile_inductor(p, state, inductor_log)
            if launch is not None:
                passed["inductor"] = (methods["inductor"], launch)
        if tunableop is not None and state.key == p.key:
            methods["tunableop"], launch = tunableop.launch(p, state)
            if launch is not None:
                passed["tunableop"] = (methods["tunableop"], launch)
        # Capture (warm-up, graph) every verified launch, then time them all together.
        for name, (r, launch) in passed.items():
            try:
                entries[name] = make_entry(timer, launch, len(state.inputs))
            except Exception as e:
                mark_failed(r, e)
        if wants_read(rec["bound"], p.min_bytes, p.write_bytes) and state.key == p.key:
            # Reading the inputs' bytes and nothing else, in the same rounds (readtime says why)
            nbytes = p.min_bytes - p.write_bytes
            try:
                read = StreamRead(nbytes, len(state.inputs), state.device, sm_count(state.device), seed)
                rec["read"] = {"status": "ok", "bytes": nbytes, "programs": read.programs, "block": READ_BLOCK}
                entries[READ] = make_entry(timer, read.launch, len(state.inputs))
            except Exception as e:  # noqa: BLE001 - the methods' times stand without it; the reason is kept
                rec["read"] = failure_record(e)
        times = round_robin(entries, timer_count(timer), rounds)
        for name, entry in entries.items():
            t = times[name]
            if name == READ:
                rec["read"] = failure_record(t) if isinstance(t, BaseException) else {**rec["read"], "kernel": aggregate(t)}
                continue
            r = passed[name][0]
            if isinstance(t, BaseException):
                mark_failed(r, t)
                continue
            try:
                eager = entry.eager_ms()
            except Exception:  # the kernel time stands without it
                eager = None
            r["kernel"] = aggregate(t)
            r["eager"] = time_entry(eager, None, getattr(timer, "eager_calls", None))
        for name in passed:
            if name in GEMMTUNE_MODES and name in entries:
                methods[name]["eager_dispatch"] = dispatch_eager(p, methods[name]["choice"], state)
    finally:
        for entry in entries.values():
            entry.close()
        if read is not None:
            read.close()
        if compiled:
            torch._dynamo.reset()
    # Records in the bench JSON's usual key order: status, kernel, eager first.
    for name in passed:
        r = rec["cublas"] if name == "cublas" else methods[name]
        ordered = {k: r[k] for k in ("status", "kernel", "eager", "eager_dispatch") if k in r}
        ordered.update((k, v) for k, v in r.items() if k not in ordered)
        if name == "cublas":
            rec["cublas"] = ordered
        else:
            methods[name] = ordered
    return rec


# gemmtune's own modes: their choices are what a dispatcher serves (nvMMH's picks are configs of
# gemmtune's families too, so they are served the same way).
GEMMTUNE_MODES = frozenset((*TUNE_MODES, *OPTIONAL_MODES, *NVMMH_TOPK))


def dispatch_eager(problem, choice: str, state) -> dict:
    """The ``eager_dispatch`` entry of a gemmtune mode's record: wall ms per call through a
    dispatcher serving ``choice`` (bench.eager), or why it was not taken."""
    try:
        ms = wall_ms_per_call(dispatch_launch(problem, choice, state.inputs), EAGER_CALLS, EAGER_WARMUP)
    except Exception as e:  # noqa: BLE001 - the kernel time stands without it; the reason is kept
        return {"ms": None, "reason": f"{type(e).__name__}: {e}"[:300]}
    return time_entry(ms, None, EAGER_CALLS)


def run(shapes: Sequence[Shape], *, out_dir: str | os.PathLike = "benchmarks/results", suite: str = "public",
        groups: Sequence[str] | None = None, limit: int | None = None, repeats: int = 20,
        skip_inductor: bool = False, seed: int = 0, render: bool = True,
        tune_fn: Callable | None = None, log=None, rounds: int = ROUNDS,
        deadline: float | None = None, ceilings_file: str | os.PathLike | None = None,
        extra: Sequence[str] = (), skip_tunableop: bool = False, notes: Sequence[str] = ()) -> Path:
    """Benchmark ``shapes`` on the current GPU; write the bench JSON (and its report) under
    ``out_dir`` and return the JSON's path. Raises ValueError without a CUDA GPU.

    ``extra``: opt-in gemmtune modes to run as well (OPTIONAL_MODES keys, see ``extra_modes``).
    ``skip_tunableop``: leave PyTorch's TunableOp (cuBLAS/cuBLASLt algorithm tuning) out.
    ``notes``: the caller's notes on the shapes (addmm rows benchmarked as mm), kept in the JSON.
    The JSON never replaces an earlier run's: where ``out_dir`` holds one of the same name (same
    day, GPU, versions and groups), this run's name gets its time of day, ``-t<HHMMSS>``
    (``report.unused_bench_path``).

    ``rounds``: interleaved timing rounds per shape (``repeats`` samples per kernel in
    all). ``deadline`` (unix time; ``gemmtune bench --deadline``): no shape starts when the
    longest shape so far would end past it; the JSON notes the shapes left out.
    ``ceilings_file`` (``--ceilings-file``): ceilings read from it when it holds ones measured
    on a GPU of this name, else measured and written to it (several runs in one device call
    measure them once).

    Every process-wide setting it changes (``bench_settings``: TF32, the Triton and Inductor
    cache directories, Inductor's config; the autotuning hook, TunableOp) is put back when it
    returns or raises.
    """
    if not torch.cuda.is_available():
        raise ValueError(CUDA_ERROR)
    if ceilings_file:
        check_ceilings_file(ceilings_file)  # before anything runs
    import triton

    from .. import __version__, binaries
    from ..device import DeviceInfo
    from ..table import provenance
    from ..tune import tune as gemmtune_tune
    from .runner import WorkerState

    t_run = time.perf_counter()
    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    tune_fn = tune_fn or gemmtune_tune
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="gemmtune-bench-"))
    # Every process-wide setting below (environment, torch.backends, Inductor's config, the
    # autotuning hook, TunableOp) goes back to what it was when run returns or raises.
    with bench_settings(scratch, inductor=not skip_inductor) as settings:
        dev = DeviceInfo.from_torch()
        timer = CudaGraphTimer(replays=repeats)
        header = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "device_name": dev.name,
                  "capability": dev.capability_str, "torch": torch.__version__, "triton": triton.__version__,
                  "gemmtune": __version__, "nvmmh": dist_version("nvidia-matmul-heuristics"),
                  "python": platform.python_version(), "suite": suite, "groups": list(groups) if groups else None,
                  "limit": limit, "repeats": repeats, "rounds": max(1, min(rounds, repeats)), "seed": seed,
                  "inductor_mode": INDUCTOR_MODE, "timer": timer_text(repeats, rounds, timer.eager_calls),
                  "modes": {}, "phases_s": {}}
        suffix = "-".join(groups or []) + (f"-first{limit}" if limit else "")
        path = report.unused_bench_path(out, header, suffix)
        doc = {"schema": report.SCHEMA, "source": "", "header": header, "ceilings": None, "notes": list(notes),
               "shapes": []}
        # Until the last shape is measured, the JSON says which shapes are not (yet): a run stopped
        # part way (Ctrl-C, a time limit's SIGINT or SIGKILL, a crash) read as a finished run of
        # fewer shapes, its report's groups and geomeans silently partial.
        pending = len(doc["notes"])
        doc["notes"].append("")

        def unfinished(left: list[str]) -> None:
            header["unmeasured"] = left
            doc["notes"][pending] = report.files.unfinished_note(left, len(shapes))
        unfinished([x.name for x in shapes])

        try:
            say(f"gemmtune bench: {len(shapes)} shapes on {dev.name} -> {path}")
            t0 = time.perf_counter()
            c = load_ceilings(ceilings_file, dev.name) if ceilings_file else None
            if c is None:
                c = measure_ceilings(timer)
                if ceilings_file:
                    save_ceilings(ceilings_file, dev.name, c)
            doc["ceilings"] = c
            header["phases_s"]["ceilings"] = time.perf_counter() - t0
            def gbps(kind: str) -> str:  # a ceiling that failed (or an older file's absent one): "-"
                r = (c.get(kind) or {}).get("gbps")
                return f"{r:.0f}" if r else "-"
            say(f"ceilings: copy {c['copy']['gbps']:.0f} GB/s, read {gbps('read')} GB/s, write {gbps('write')} GB/s; "
                + ", ".join(f"{k} {v['tflops']:.0f} TFLOP/s" for k, v in c["mm"].items()))
            report.save_bench(doc, path)

            t0 = time.perf_counter()
            phase = tune_phase(shapes, tune_fn=tune_fn, scratch=scratch, seed=seed, provenance=provenance(
                dev.name, dev.capability_str, torch.__version__, triton.__version__, __version__, "nvmmh"), say=say,
                extra=extra)
            header["phases_s"]["tune"] = time.perf_counter() - t0
            doc["notes"] += phase["notes"]
            header["modes"] = phase["modes"]
            # The timing phase loads the kernels the tuning phase compiled instead of compiling them
            # again (Triton's cache is keyed by source, constants and target: a binary is only ever
            # reused for the very same kernel). Tuning times are unaffected: each mode compiled in a
            # cache of its own, from nothing; Inductor's kernels have their own sources.
            restored = 0
            for mode in phase["modes"]:
                try:
                    restored += binaries.restore(scratch / f"triton-{mode}")[0]
                except Exception as e:  # only costs compile time
                    doc["notes"].append(f"kernel binaries of {mode} not reused for timing: {type(e).__name__}: {e}"[:300])
            header["reused_binaries"] = restored
            report.save_bench(doc, path)

            inductor_log = None
            if skip_inductor:
                doc["notes"].append("Inductor: skipped (--skip-inductor)")
            else:
                inductor_log = AutotuneLog()
                settings.callback(_remove_autotune_log, inductor_log)
                if not _install_autotune_log(inductor_log):
                    doc["notes"].append("Inductor's autotuning feedback hook is not available in this torch: "
                                        "its choices are read from the generated code only")
            state = WorkerState(timer=timer)
            tunableop = None
            if skip_tunableop:
                doc["notes"].append("TunableOp: skipped (--skip-tunableop)")
            else:
                try:
                    tunableop = TunableOp(scratch)
                    settings.callback(tunableop.close)  # torch.cuda.tunable put back, also after an exception
                except Exception as e:  # an old torch without torch.cuda.tunable
                    doc["notes"].append(f"TunableOp: not available ({type(e).__name__}: {e})"[:300])
            t_measure = time.perf_counter()
            longest = 0.0
            for i, s in enumerate(shapes):
                if deadline is not None and time.time() + longest > deadline:
                    left = [x.name for x in shapes[i:]]
                    del doc["notes"][pending]
                    pending = None
                    doc["notes"].append(f"deadline: {len(left)} of {len(shapes)} shapes not measured (the longest shape so "
                                        f"far took {longest:.0f} s and too little time was left): {', '.join(left)}")
                    header["unmeasured"] = left
                    say(doc["notes"][-1])
                    break
                t0 = time.perf_counter()
                rec = measure_shape(s, state, c, phase["tuned"], phase["skipped"], seed=seed, inductor_log=inductor_log,
                                    extra_s=phase["extra_s"], errors=phase["errors"], rounds=rounds, tunableop=tunableop,
                                    sweeps=phase.get("sweeps"))
                rec["measure_s"] = time.perf_counter() - t0
                longest = max(longest, rec["measure_s"])
                doc["shapes"].append(rec)
                unfinished([x.name for x in shapes[i + 1:]])
                header["phases_s"]["measure"] = time.perf_counter() - t_measure
                header["phases_s"]["run"] = time.perf_counter() - t_run
                report.save_bench(doc, path)
                cells = []
                for m, label in (("cublas", "cuBLAS"), *report.METHODS):
                    r = rec["cublas"] if m == "cublas" else rec["methods"].get(m)
                    k = report.kernel(r)
                    cells.append(f"{label} {k['ms'] * 1e3:.2f}" if k else f"{label} {(r or {}).get('status', '-')}")
                say(f"{s.group:8} {s.name:24} ({rec['measure_s']:5.1f} s) " + "  ".join(cells))
            if tunableop is not None:
                tunableop.close()
            if pending is not None:  # every shape measured
                del doc["notes"][pending]
                header.pop("unmeasured", None)
            report.save_bench(doc, path)
            if render:
                written = report.render(doc, out, path.stem)
                say("report: " + ", ".join(str(p) for p in written.values()))
            return path
        except KeyboardInterrupt:
            # Ctrl-C (or bench_gpu.sh's SIGINT): say where the shapes measured so far are.
            if path.exists():
                say(f"interrupted: {len(doc['shapes'])} of {len(shapes)} shapes measured, in {path} "
                    f"(`gemmtune report {path}` renders them; its notes name the others)")
            raise
