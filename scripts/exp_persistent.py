"""GPU experiment (one device call): the persistent TMA family against triton_mm and cuBLAS on
compute-bound shapes. L2-cold CUDA-graph device time, every output checked against fp64 first.

    python scripts/exp_persistent.py --out $OUT/persistent.json [--budget-s 300]

Per shape: cuBLAS, the best persistent_tma config (default tiles, each also warp-specialised and
flattened), the best triton_mm of its default space, and % of the tensor-core floor
(floor = 2MNK / the datasheet dense peak in gemmtune.device).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

import torch

from gemmtune import kernels
from gemmtune.bench.timing import CudaGraphTimer, sets_for
from gemmtune.configs import Choice
from gemmtune.device import DeviceInfo
from gemmtune.kernels import persistent
from gemmtune.problem import Problem

SHAPES = [  # (M, N, K, dtype, layout of B)
    (4096, 4096, 4096, torch.bfloat16, "row"), (8192, 8192, 8192, torch.bfloat16, "row"),
    (1024, 1024, 1024, torch.bfloat16, "row"), (4096, 4096, 4096, torch.float16, "col"),
    (2048, 6144, 4096, torch.bfloat16, "row"), (512, 4096, 4096, torch.bfloat16, "col"),
    (2048, 28672, 4096, torch.bfloat16, "col"), (2048, 4096, 14336, torch.bfloat16, "col"),
    (8192, 4096, 14336, torch.float16, "row"), (1000, 1000, 1000, torch.bfloat16, "row"),
    (333, 4104, 1032, torch.bfloat16, "row"), (4096, 4096, 4096, torch.float32, "row"),
]


def operands(m, n, k, dt, lay):
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(k, n, device="cuda", dtype=dt) if lay == "row" else torch.randn(n, k, device="cuda", dtype=dt).t()
    return a, b


def candidates(p, dev):
    pcfgs = persistent.space(p, dev)[0]
    pcfgs += [replace(c, warp_spec=True) for c in pcfgs] + [replace(c, flatten=True) for c in pcfgs]
    tcfgs = kernels.get("triton_mm").space(p, dev)[0]
    return [Choice("persistent_tma", c) for c in pcfgs] + [Choice("triton_mm", c) for c in tcfgs]


def _compile_job(job):
    """Compile (not run) some choices at one shape in a worker process: fills Triton's disk cache."""
    (m, n, k, dt, lay), ids = job
    from gemmtune.kernels.tiled import compile_only
    dt = getattr(torch, dt)
    a, b = operands(m, n, k, dt, lay)
    out = torch.empty(m, n, device="cuda", dtype=dt)
    with compile_only():
        for cid in ids:
            ch = Choice.parse(cid)
            try:
                kernels.get(ch.family).run(a, b, out, ch.config)
            except Exception:  # noqa: BLE001 - the timing pass records the error
                pass
    return len(ids)


def precompile(dev, workers=14):
    import concurrent.futures as cf
    import multiprocessing as mp
    jobs = []
    for m, n, k, dt, lay in SHAPES:
        p = Problem.from_sizes(m, n, k, str(dt).removeprefix("torch."), layout_b=lay)
        ids = [c.id for c in candidates(p, dev)]
        for i in range(0, len(ids), 8):
            jobs.append(((m, n, k, str(dt).removeprefix("torch."), lay), ids[i:i + 8]))
    t0 = time.time()
    with cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as ex:
        done = sum(ex.map(_compile_job, jobs))
    print(f"# precompiled {done} choices in {time.time() - t0:.0f}s", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=300)
    args = ap.parse_args()
    t_start = time.time()
    dev = DeviceInfo.from_torch()
    timer = CudaGraphTimer(replays=10, target_ms_per_replay=2.0, max_launches=64, eager_calls=10)
    rows = []
    precompile(dev)
    for m, n, k, dt, lay in SHAPES:
        if time.time() - t_start > args.budget_s:
            print("# budget spent, stopping", flush=True)
            break
        es = torch.empty((), dtype=dt).element_size()
        nsets = sets_for((m * k + k * n + m * n) * es, dev.l2_bytes, 16)
        ins = [operands(m, n, k, dt, lay) for _ in range(nsets)]
        outs = [torch.empty(m, n, device="cuda", dtype=dt) for _ in range(nsets)]
        ref = ins[0][0].double() @ ins[0][1].double()
        p = Problem.from_tensors(*ins[0])
        peak = (dev.peak_tflops_32 if dt == torch.float32 else dev.peak_tflops_16) * 1e12
        floor_ms = 2 * m * n * k / peak * 1e3

        def time_choice(ch):
            fam = kernels.get(ch.family)
            outs[0].fill_(float("nan"))
            fam.run(ins[0][0], ins[0][1], outs[0], ch.config)
            torch.cuda.synchronize()
            err = ((outs[0].double() - ref).norm() / ref.norm()).item()
            if not err < (1e-5 if dt == torch.float32 else 1e-2):
                return f"wrong {err:.2e}"
            return timer.measure(lambda i: fam.run(ins[i][0], ins[i][1], outs[i], ch.config), nsets).device_ms

        res = {"M": m, "N": n, "K": k, "dtype": str(dt), "layout_b": lay, "floor_ms": floor_ms, "persistent_tma": {},
               "triton_mm": {}}
        res["cublas_ms"] = timer.measure(lambda i: torch.mm(ins[i][0], ins[i][1], out=outs[i]), nsets).device_ms
        for ch in candidates(p, dev):
            try:
                r = time_choice(ch)
            except Exception as e:  # noqa: BLE001
                r = f"error: {type(e).__name__}: {str(e).splitlines()[0][:150] if str(e) else ''}"
            res[ch.family][ch.config.id] = r
        res["cublas_ms_after"] = timer.measure(lambda i: torch.mm(ins[i][0], ins[i][1], out=outs[i]), nsets).device_ms
        cub = min(res["cublas_ms"], res["cublas_ms_after"])
        line = f"{m}x{n}x{k} {dt} B={lay}: cuBLAS {cub*1e3:.1f}us ({floor_ms/cub:.0%} of floor)"
        for fam in ("persistent_tma", "triton_mm"):
            ok = {c: v for c, v in res[fam].items() if isinstance(v, float)}
            if ok:
                best = min(ok, key=ok.get)
                line += f" | {fam} {ok[best]*1e3:.1f}us {cub/ok[best]:.2f}x ({floor_ms/ok[best]:.0%}) {best}"
            bad = [c for c, v in res[fam].items() if not isinstance(v, float)]
            if bad:
                line += f" [{len(bad)} failed: {res[fam][bad[0]][:80]}]"
        print(line, flush=True)
        for knob in ("-WS", "-F"):
            pairs = [(c, c + knob) for c in res["persistent_tma"] if not c.endswith(("-WS", "-F"))]
            gains = [res["persistent_tma"][c] / res["persistent_tma"][w] for c, w in pairs
                     if isinstance(res["persistent_tma"].get(c), float) and isinstance(res["persistent_tma"].get(w), float)]
            if gains:
                print(f"   {knob}: speedup over plain, per config: min {min(gains):.2f} max {max(gains):.2f}", flush=True)
        rows.append(res)
        del ins, outs
        torch.cuda.empty_cache()
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "triton": __import__("triton").__version__, "date": time.strftime("%Y-%m-%d")}
    json.dump({"meta": meta, "rows": rows}, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
