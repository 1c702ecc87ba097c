"""GPU experiment (#16): does a split epilogue (PersistentConfig.epi_split) make persistent_tma faster
on compute-bound shapes, and by how much against cuBLAS?

    python scripts/exp_persistent_split.py --out $OUT/split.json [--budget-s 300] [--rounds 3]

Why it might: the TMA store stages the whole output tile in shared memory (64 KiB for 128x256
bf16) beside the operand ring, so 128x256x64 fits 3 stages, not 4. Storing the tile in 2 or 4
column slices stages only one slice, and the freed room holds another stage.

Per shape: cuBLAS (before and after), and every persistent_tma default tile plain and flattened,
each with epi_split 1, 2 and 4 and, where the smaller output box makes room for them, one and two
more stages (persistent.constraint decides). L2-cold device time from CUDA graphs
(CudaGraphTimer); each config's output is checked against fp64 first. The best configs and cuBLAS
are then timed again in ``--rounds`` interleaved rounds, so the comparison is side by side.
The last rows are the odd cube 4095^3: pad+persistent_tma (the shipped choice path, pads included)
beside cuBLAS on the odd shape and pad+aten.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing as mp
import statistics
import time
from dataclasses import replace

import torch

from gemmtune import kernels
from gemmtune.bench.timing import CudaGraphTimer, sets_for
from gemmtune.configs import Choice
from gemmtune.device import DeviceInfo
from gemmtune.kernels import persistent
from gemmtune.problem import Problem, element_size

SHAPES = [  # (M, N, K, dtype, layout of B)
    (4096, 4096, 4096, "bfloat16", "row"), (8192, 8192, 8192, "bfloat16", "row"),
    (2048, 2048, 2048, "bfloat16", "row"), (1024, 1024, 1024, "bfloat16", "row"),
    (4096, 4096, 4096, "float32", "row"),
    (2048, 6144, 4096, "bfloat16", "col"), (2048, 28672, 4096, "bfloat16", "col"),
    (8192, 4096, 14336, "float16", "row"), (512, 4096, 4096, "bfloat16", "col"),
    (4096, 4096, 4096, "bfloat16", "pad4095"),  # cube_4095's padded operands, into the odd C
]
ODD = (4095, 4095, 4095)


def operands(m, n, k, dt, lay, g=None):
    a = torch.randn(m, k, device="cuda", dtype=dt, generator=g)
    if lay == "col":
        return a, torch.randn(n, k, device="cuda", dtype=dt, generator=g).t()
    return a, torch.randn(k, n, device="cuda", dtype=dt, generator=g)


def candidates(p: Problem, dev: DeviceInfo) -> list:
    out = []
    for base in persistent.default_configs(element_size(p.dtype)):
        for split in (1, 2, 4) if base.block_n >= 256 else (1, 2):
            for extra in (0, 1, 2):
                c = replace(base, epi_split=split, num_stages=base.num_stages + extra)
                if extra and persistent.constraint(replace(c, epi_split=1), p, dev) is None:
                    continue  # fits without the split: the default space has it already
                if persistent.constraint(c, p, dev) is None and c not in out:
                    out.append(c)
    return out


def _compile_job(job):
    (m, n, k, dt, lay), ids = job
    from gemmtune.kernels.tiled import compile_only
    a, b = operands(m, n, k, getattr(torch, dt), "row" if lay == "pad4095" else lay)
    out = torch.empty(m, n, device="cuda", dtype=getattr(torch, dt))
    if lay == "pad4095":
        b, out = b[:, :ODD[1]], torch.empty(ODD[0], ODD[1], device="cuda", dtype=getattr(torch, dt))
        a = a[:ODD[0]]
    with compile_only():
        for cid in ids:
            try:
                persistent.run(a, b, out, Choice.parse(cid).config)
            except Exception:  # noqa: BLE001 - the timing pass records it
                pass
    return len(ids)


def problem_of(m, n, k, dt, lay):
    return Problem.from_sizes(m, n, k, dt, layout_b="row" if lay == "pad4095" else lay)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    t0 = time.time()
    dev = DeviceInfo.from_torch()
    timer = CudaGraphTimer(replays=10, target_ms_per_replay=2.0, max_launches=64, eager_calls=10)
    cands = {s: candidates(problem_of(*s), dev) for s in SHAPES}
    jobs = [(s, [f"persistent_tma:{c.id}" for c in cs[i:i + 6]]) for s, cs in cands.items()
            for i in range(0, len(cs), 6)]
    with cf.ProcessPoolExecutor(14, mp_context=mp.get_context("spawn")) as ex:
        n = sum(ex.map(_compile_job, jobs))
    print(f"# precompiled {n} configs in {time.time() - t0:.0f}s", flush=True)
    rows = []
    for s in SHAPES:
        if time.time() - t0 > args.budget_s:
            print("# budget spent, stopping", flush=True)
            break
        m, n, k, dts, lay = s
        dt = getattr(torch, dts)
        es = torch.empty((), dtype=dt).element_size()
        nsets = sets_for((m * k + k * n + m * n) * es, dev.l2_bytes, 16)
        g = torch.Generator(device="cuda").manual_seed(0)
        ins = [operands(m, n, k, dt, "row" if lay == "pad4095" else lay, g) for _ in range(nsets)]
        if lay == "pad4095":  # zero rows/cols past 4095, as pad_copy leaves them
            for a, b in ins:
                a[:, ODD[2]:] = 0
                b[ODD[2]:] = 0
            ins = [(a[:ODD[0]], b[:, :ODD[1]]) for a, b in ins]
            m, n = ODD[0], ODD[1]
        outs = [torch.empty(m, n, device="cuda", dtype=dt) for _ in range(nsets)]
        ref = ins[0][0].double() @ ins[0][1].double()
        peak = (dev.peak_tflops_32 if dt == torch.float32 else dev.peak_tflops_16) * 1e12
        floor_ms = 2 * m * n * k / peak * 1e3
        tol = 1e-4 if dt == torch.float32 else 1e-2

        def launcher(cfg):
            return lambda i: persistent.run(ins[i][0], ins[i][1], outs[i], cfg, allow_tf32=False)

        cub = lambda i: torch.mm(ins[i][0], ins[i][1], out=outs[i])  # noqa: E731
        res = {"shape": list(s), "floor_ms": floor_ms, "sets": nsets, "configs": {}}
        res["cublas_ms"] = [timer.measure(cub, nsets).device_ms]
        for cfg in cands[s]:
            try:
                outs[0].fill_(float("nan"))
                launcher(cfg)(0)
                torch.cuda.synchronize()
                err = ((outs[0].double() - ref).norm() / ref.norm()).item()
                r = timer.measure(launcher(cfg), nsets).device_ms if err < tol else f"wrong {err:.2e}"
            except Exception as e:  # noqa: BLE001
                r = f"error: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
            res["configs"][cfg.id] = r
        res["cublas_ms"].append(timer.measure(cub, nsets).device_ms)
        ok = {c: v for c, v in res["configs"].items() if isinstance(v, float)}
        by_split = {}
        for cid, v in ok.items():
            sp = int(cid.rsplit("-E", 1)[1]) if "-E" in cid else 1
            if sp not in by_split or v < ok[by_split[sp]]:
                by_split[sp] = cid
        # Side by side: cuBLAS and each split's best, interleaved.
        final = {"cublas": [], **{f"E{sp}": [] for sp in sorted(by_split)}}
        for _ in range(args.rounds):
            final["cublas"].append(timer.measure(cub, nsets).device_ms)
            for sp in sorted(by_split):
                final[f"E{sp}"].append(timer.measure(launcher(Choice.parse(
                    f"persistent_tma:{by_split[sp]}").config), nsets).device_ms)
        res["best_by_split"] = by_split
        res["rounds"] = final
        med = {k2: statistics.median(v) for k2, v in final.items()}
        res["median_ms"] = med
        line = f"{s}: cuBLAS {med['cublas'] * 1e3:.1f}us ({floor_ms / med['cublas']:.0%} of floor)"
        for sp in sorted(by_split):
            v = med[f"E{sp}"]
            line += f" | E{sp} {v * 1e3:.1f}us {med['cublas'] / v:.3f}x ({floor_ms / v:.0%}) {by_split[sp]}"
        bad = [c for c, v in res["configs"].items() if not isinstance(v, float)]
        if bad:
            line += f" [{len(bad)} failed, e.g. {bad[0]}: {res['configs'][bad[0]][:90]}]"
        print(line, flush=True)
        rows.append(res)
        del ins, outs
        torch.cuda.empty_cache()

    # The odd cube through the shipped choice path (pads included), beside cuBLAS and pad+aten.
    odd = {}
    if rows and rows[-1]["shape"][-1] == "pad4095":
        m, n, k = ODD
        g = torch.Generator(device="cuda").manual_seed(1)
        ins = [operands(m, n, k, torch.bfloat16, "row", g) for _ in range(3)]
        outs = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
        ref = ins[0][0].double() @ ins[0][1].double()
        chs = ["pad+aten"] + [f"pad+persistent_tma:{c}" for c in dict.fromkeys(rows[-1]["best_by_split"].values())]
        fns = {"cublas": lambda i: torch.mm(ins[i][0], ins[i][1], out=outs[i])}
        for cid in chs:
            ch = Choice.parse(cid)
            kernels.run_choice(ch, ins[0][0], ins[0][1], outs[0])
            err = ((outs[0].double() - ref).norm() / ref.norm()).item()
            if err < 1e-2:
                fns[cid] = lambda i, ch=ch: kernels.run_choice(ch, ins[i][0], ins[i][1], outs[i])
            else:
                odd[cid] = f"wrong {err:.2e}"
        times = {name: [] for name in fns}
        for _ in range(args.rounds + 2):
            for name, fn in fns.items():
                times[name].append(timer.measure(fn, 3).device_ms)
        odd.update({name: statistics.median(v) for name, v in times.items()})
        print("4095^3 choices (median ms): " + ", ".join(f"{k2} {v * 1e3:.1f}us" if isinstance(v, float) else
                                                        f"{k2} {v}" for k2, v in odd.items()), flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "triton": __import__("triton").__version__, "date": time.strftime("%Y-%m-%d")}
    json.dump({"meta": meta, "rows": rows, "odd_4095": odd}, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
