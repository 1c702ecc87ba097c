#!/usr/bin/env python3
"""On a GPU: our triton_mm against Inductor's mm template running the SAME config, one process.

    python3 scripts/parity_inductor.py --out $OUT/parity.json [--code-dir $OUT/code] [--small] [--static]

For each shape x config, Inductor is forced onto the config through gemmtune's lookup-table
export (``inductor_export.install``: one candidate, so it does not autotune), compiled with
``max-autotune-no-cudagraphs`` (its CUDA graphs cannot nest in our timing graph), and its
kernel and ours are timed together (CUDA graphs, L2-cold, rounds interleaved with cuBLAS)
after both outputs passed the fp64 check. The table: ratio =
ours / Inductor's time (target <= 1.02). ``--code-dir`` keeps Inductor's generated source and
our kernel's TTGIR / PTX of the worst rows, for reading side by side. ``--small`` keeps the
small and unaligned rows; ``--static`` also times our kernel with every size and stride compiled
in as a constant (kernels.tiled._tiled_mm_static, launch_tiled(static=True)): ratio_static.
Inductor's compiled function allocates its output per call; its launch keeps each output alive
for one pass over the input sets (bench.inductor.held_launch), so that it writes a distinct output
per input set as ours and cuBLAS do. Before 2026-11-27 the output was dropped at once, and under
the timing graph's capture the caching allocator handed the same block back every launch: one
L2-resident output (benchmarks/results/2026-11-25-parity-ir). ``--same-out`` times both old
asymmetries beside the fair ratio: our kernel writing every launch into one output (ratio_1out),
and Inductor with its output dropped (ratio_old = ours / that).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="gemmtune-parity-"))

import torch  # noqa: E402

# (M, N, K, dtype, config): shapes of the public suite's classes and beyond, each with a config
# Inductor's own heuristics list for it (large wgmma tiles for big shapes, small ones for small).
CASES = [
    (8192, 8192, 8192, "bfloat16", "BM128-BN256-BK64-S3-W8-G8"),
    (4096, 4096, 4096, "bfloat16", "BM128-BN256-BK64-S3-W8-G8"),
    (4096, 4096, 4096, "bfloat16", "BM128-BN128-BK64-S3-W4-G8"),
    (2048, 6144, 4096, "bfloat16", "BM128-BN256-BK64-S3-W8-G8"),
    (2048, 28672, 4096, "bfloat16", "BM128-BN256-BK64-S3-W8-G8"),
    (2048, 4096, 14336, "bfloat16", "BM128-BN128-BK64-S4-W8-G8"),
    (8192, 4096, 14336, "float16", "BM128-BN256-BK64-S3-W8-G8"),
    (512, 4096, 4096, "bfloat16", "BM64-BN128-BK64-S4-W4-G8"),
    (1024, 1024, 1024, "bfloat16", "BM64-BN128-BK64-S4-W4-G8"),
    (1000, 1000, 1000, "bfloat16", "BM64-BN128-BK64-S4-W4-G8"),
    (4095, 4095, 4095, "bfloat16", "BM128-BN128-BK64-S3-W8-G8"),
    (300, 20001, 512, "float16", "BM128-BN128-BK64-S3-W4-G8"),
    (96, 50257, 768, "bfloat16", "BM64-BN128-BK64-S4-W4-G8"),
    (333, 4097, 1025, "bfloat16", "BM64-BN128-BK64-S4-W4-G8"),
    (4096, 4096, 4096, "float32", "BM128-BN128-BK32-S3-W8-G8"),
    (777, 1531, 2049, "float16", "BM64-BN128-BK64-S3-W4-G8"),
    # session 23's fresh suite: the configs Inductor max-autotune picked there (H100)
    (2048, 4096, 16, "bfloat16", "BM128-BN64-BK16-S3-W4-G8"),
    (1021, 2053, 509, "bfloat16", "BM128-BN64-BK32-S4-W8-G8"),
    # decode with an odd-N row-major B (GPT-2's head at M = 1): A masked along M
    (1, 50257, 768, "bfloat16", "BM16-BN128-BK64-S4-W4-G8"),
]
SMALL = {(512, 4096, 4096), (1024, 1024, 1024), (1000, 1000, 1000), (4095, 4095, 4095), (300, 20001, 512),
         (96, 50257, 768), (333, 4097, 1025), (777, 1531, 2049), (2048, 4096, 16), (1021, 2053, 509),
         (1, 50257, 768)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--code-dir")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--large", action="store_true", help="only the rows --small leaves out")
    ap.add_argument("--static", action="store_true")
    ap.add_argument("--same-out", action="store_true")
    ap.add_argument("--indexed-k", action="store_true",
                    help="also time the K loop indexed from 0 (launch_tiled(indexed_k=True)): ratio_ik, "
                         "and with --static ratio_static_ik; 'ours' and 'static' run the carried form")
    ap.add_argument("--wrap-odd", action="store_true",
                    help="with --indexed-k: also the indexed forms with an odd N wrapped rather than masked "
                         "(launch_args.MASK_ODD_N = False): ratio_ik_wn, and with --static ratio_static_ik_wn")
    ap.add_argument("--odd", action="store_true", help="only rows with a dim that is not a multiple of 16")
    ap.add_argument("--no-coordesc", action="store_true",
                    help="compile Inductor with coordinate descent off: max-autotune turns it on, and it may "
                         "re-tune the template's num_warps / num_stages at its first run, so the template need "
                         "not run the forced config (each row records how many coordesc benchmarks ran)")
    ap.add_argument("--no-assume", action="store_true",
                    help="compile ours without tiled.py's tl.assume(pid_m >= 0, pid_n >= 0) (session 56's change), "
                         "for an A/B against the template in separate processes")
    ap.add_argument("--only", help="comma-separated MxNxK rows to keep (of the cases the other filters keep)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per row (each 30 graph replays "
                    "of every launch); the figures before session 53 used 3")
    args = ap.parse_args()

    from torch._inductor.utils import run_and_get_code

    import gemmtune.inductor_export as ie
    from gemmtune import kernels
    from gemmtune.bench.inductor import held_launch
    from gemmtune.bench.timing import CudaGraphTimer, sets_for
    from gemmtune.benchmark import aggregate, make_entry, round_robin
    from gemmtune.configs import Choice
    from gemmtune.kernels.tiled import launch_tiled, tile_kwargs
    if args.no_assume:
        import triton.language as tl

        from gemmtune.kernels import tiled
        tiled._HAS_ASSUME = tl.constexpr(False)  # before any compile: triton keys its cache on it
    from gemmtune.device import DeviceInfo
    from gemmtune.problem import DTYPES, Problem
    from gemmtune.table import LookupTable, TableChoice
    from gemmtune.verify import compare, tolerance

    torch.backends.cuda.matmul.allow_tf32 = False
    dev = DeviceInfo.from_torch()
    timer = CudaGraphTimer(replays=10)
    rows = []
    code_dir = Path(args.code_dir) if args.code_dir else None
    if code_dir:
        code_dir.mkdir(parents=True, exist_ok=True)
    cases = [c for c in CASES if (not args.small or c[:3] in SMALL) and (not args.large or c[:3] not in SMALL)
             and (not args.odd or any(d % 16 for d in c[:3]))]
    if args.only:
        keep = {tuple(int(x) for x in r.split("x")) for r in args.only.split(",")}
        cases = [c for c in cases if c[:3] in keep]
    for i, (m, n, k, dt, cfg) in enumerate(cases[: args.limit]):
        p = Problem.from_sizes(m, n, k, dt)
        choice = Choice.parse(f"triton_mm:{cfg}")
        tdt = DTYPES[p.dtype]
        nsets = sets_for(p.min_bytes, dev.l2_bytes, 16)
        ins = [(torch.randn(m, k, device="cuda", dtype=tdt), torch.randn(k, n, device="cuda", dtype=tdt))
               for _ in range(nsets)]
        outs = [torch.empty(m, n, device="cuda", dtype=tdt) for _ in range(nsets)]
        ref = ins[0][0].double() @ ins[0][1].double()
        row = {"m": m, "n": n, "k": k, "dtype": dt, "config": cfg}
        try:
            table = LookupTable(ie_provenance(), {p.key: [TableChoice(choice, None)]})
            ie.install(table)
            torch._dynamo.reset()
            if args.no_coordesc:
                opts = {"max_autotune": True, "coordinate_descent_tuning": False, "triton.cudagraphs": False}
                f = torch.compile(lambda a, b: torch.mm(a, b), options=opts, dynamic=False)
            else:
                f = torch.compile(lambda a, b: torch.mm(a, b), mode="max-autotune-no-cudagraphs", dynamic=False)
            from torch._dynamo.utils import counters
            before = counters["inductor"]["coordesc_tuning_bench"]
            out, codes = run_and_get_code(f, *ins[0])
            row["coordesc_benches"] = counters["inductor"]["coordesc_tuning_bench"] - before
            src = "\n".join(codes)
            row["inductor_used_config"] = (f"BLOCK_M : tl.constexpr = {choice.config.block_m}" in src
                                           and f"BLOCK_N : tl.constexpr = {choice.config.block_n}" in src)
            row["inductor_ok"] = compare(out, ref, tolerance(p)).ok
            fam = kernels.get("triton_mm")
            fam.run(*ins[0], outs[0], choice.config)
            row["ours_ok"] = compare(outs[0], ref, tolerance(p)).ok
            launches = {
                "cublas": lambda j: torch.mm(*ins[j], out=outs[j]),
                "inductor": held_launch(f, ins),  # a distinct output per input set, as ours
                "ours": lambda j: fam.run(*ins[j], outs[j], choice.config),
            }
            if args.static:
                skw = {**tile_kwargs(choice.config, False), "k_per_split": k, "static": True}
                launch_tiled(*ins[0], outs[0], **skw)
                row["static_ok"] = compare(outs[0], ref, tolerance(p)).ok
                launches["static"] = lambda j: launch_tiled(*ins[j], outs[j], **skw)
            if args.indexed_k:
                ikw = {**tile_kwargs(choice.config, False), "k_per_split": k}
                launches["ours"] = lambda j: launch_tiled(*ins[j], outs[j], **ikw, indexed_k=False)
                launch_tiled(*ins[0], outs[0], **ikw, indexed_k=True)
                row["ik_ok"] = compare(outs[0], ref, tolerance(p)).ok
                launches["ours_ik"] = lambda j: launch_tiled(*ins[j], outs[j], **ikw, indexed_k=True)
                if args.static:
                    launches["static"] = lambda j: launch_tiled(*ins[j], outs[j], **skw, indexed_k=False)
                    launch_tiled(*ins[0], outs[0], **skw, indexed_k=True)
                    row["static_ik_ok"] = compare(outs[0], ref, tolerance(p)).ok
                    launches["static_ik"] = lambda j: launch_tiled(*ins[j], outs[j], **skw, indexed_k=True)
                if args.wrap_odd:
                    import gemmtune.kernels.launch_args as la

                    def wrapped(kw):
                        def launch(j):
                            la.MASK_ODD_N = False  # read when the launch's constexprs are made
                            try:
                                return launch_tiled(*ins[j], outs[j], **kw, indexed_k=True)
                            finally:
                                la.MASK_ODD_N = True
                        return launch

                    for name, kw in (("ours_ik_wn", ikw), ("static_ik_wn", skw if args.static else None)):
                        if kw is None:
                            continue
                        wrapped(kw)(0)
                        row[f"{name.replace('ours_', '')}_ok"] = compare(outs[0], ref, tolerance(p)).ok
                        launches[name] = wrapped(kw)
            if args.same_out:
                launches["ours_1out"] = lambda j: fam.run(*ins[j], outs[0], choice.config)
                # the measurement before 2026-11-27: Inductor's output dropped at once, so every
                # launch got the same (L2-resident) block back from the caching allocator
                launches["inductor_1out"] = lambda j: f(*ins[j])
            entries = {name: make_entry(timer, fn, nsets) for name, fn in launches.items()}
            try:
                times = round_robin(entries, 30, args.rounds)
            finally:
                for e in entries.values():
                    e.close()
            for name, t in times.items():
                row[name] = aggregate(t) if not isinstance(t, BaseException) else {"error": str(t)[:200]}
            row["ratio"] = row["ours"]["ms"] / row["inductor"]["ms"]
            if "static" in row and "ms" in row["static"]:
                row["ratio_static"] = row["static"]["ms"] / row["inductor"]["ms"]
            for name in ("ours_ik", "static_ik", "ours_ik_wn", "static_ik_wn"):
                if name in row and "ms" in row[name]:
                    row[f"ratio_{name.replace('ours_', '')}"] = row[name]["ms"] / row["inductor"]["ms"]
            if "ours_1out" in row and "ms" in row["ours_1out"]:
                row["ratio_1out"] = row["ours_1out"]["ms"] / row["inductor"]["ms"]
            if "inductor_1out" in row and "ms" in row["inductor_1out"]:
                row["ratio_old"] = row["ours"]["ms"] / row["inductor_1out"]["ms"]
            ck = fam.run(*ins[0], outs[0], choice.config)
            ttgir = ck.asm.get("ttgir", "") if ck is not None else ""
            row["ours_ir"] = {w: ttgir.count(w) for w in ("warp_group_dot", "async_copy_global_to_local",
                                                           "tt.load", "descriptor", "tt.dot ")}
            row["ours_regs"], row["ours_spills"] = getattr(ck, "n_regs", None), getattr(ck, "n_spills", None)
            row["inductor_has"] = {w: src.count(w) for w in ("tl.dot", "make_tensor_descriptor", "tl.load", "% xnumel",
                                                             "rm % M", "tl.max_contiguous")}
            if code_dir:
                (code_dir / f"case{i:02d}_inductor.py").write_text(src)
                ck = fam.run(*ins[0], outs[0], choice.config)
                for kind in ("ttgir", "ptx"):
                    if ck is not None and kind in ck.asm:
                        (code_dir / f"case{i:02d}_ours.{kind}").write_text(ck.asm[kind])
        except Exception as e:  # noqa: BLE001 - a row with the error, the run goes on
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        finally:
            try:
                from torch._inductor.choices import InductorChoices
                from torch._inductor.virtualized import V
                V.set_choices_handler(InductorChoices())
            except Exception:
                pass
        rows.append(row)
        if "ratio" in row:
            print(f"{m}x{n}x{k} {dt:9s} {cfg:28s} ours {row['ours']['ms'] * 1e3:8.1f} us  inductor "
                  f"{row['inductor']['ms'] * 1e3:8.1f} us  cuBLAS {row['cublas']['ms'] * 1e3:8.1f} us  "
                  f"ratio {row['ratio']:.3f}  static {row.get('ratio_static', float('nan')):.3f} "
                  f"({row.get('static_ok')})  1out {row.get('ratio_1out', float('nan')):.3f}  "
                  f"old {row.get('ratio_old', float('nan')):.3f}  "
                  f"ik {row.get('ratio_ik', float('nan')):.3f} ({row.get('ik_ok')})  static_ik "
                  f"{row.get('ratio_static_ik', float('nan')):.3f} ({row.get('static_ik_ok')})  "
                  f"ik_wn {row.get('ratio_ik_wn', float('nan')):.3f} ({row.get('ik_wn_ok')})  static_ik_wn "
                  f"{row.get('ratio_static_ik_wn', float('nan')):.3f} ({row.get('static_ik_wn_ok')})  "
                  f"used-config {row['inductor_used_config']}  coordesc {row.get('coordesc_benches')}  "
                  f"ok {row['ours_ok']}/{row['inductor_ok']} | ours {row['ours_ir']} regs {row['ours_regs']}",
                  flush=True)
        else:
            print(f"{m}x{n}x{k} {dt} {cfg}: {row.get('error')}", flush=True)
        Path(args.out).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                                              "rows": rows}, indent=1))
        del ins, outs, ref
        torch.cuda.empty_cache()
    return 0


def ie_provenance() -> dict:
    import triton

    import gemmtune
    from gemmtune.device import DeviceInfo
    from gemmtune.table import provenance
    d = DeviceInfo.from_torch()
    return provenance(d.name, d.capability_str, torch.__version__, triton.__version__, gemmtune.__version__, "by-hand")


if __name__ == "__main__":
    sys.exit(main())
