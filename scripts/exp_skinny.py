"""GPU experiment (one device call): the skinny family and split-K against cuBLAS on
memory-bound shapes, L2-cold CUDA-graph device time, every output checked against fp64.

    python scripts/exp_skinny.py --out $OUT/skinny.json [--quick]

Prints a table per shape: cuBLAS, the best skinny / splitk config, % of the HBM floor
(floor = bytes / measured copy bandwidth), and writes every timing to the JSON.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time

import torch

from gemmtune import kernels
from gemmtune.bench.timing import CudaGraphTimer, sets_for
from gemmtune.configs import Choice, SkinnyConfig, SplitKConfig
from gemmtune.device import DeviceInfo
from gemmtune.kernels.splitk import SplitKWorkspace

DECODE = [(1, 6144, 4096), (16, 6144, 4096), (8, 4096, 4096), (16, 28672, 4096), (1, 4096, 14336),
          (16, 4096, 14336), (1, 50257, 768), (8, 1536, 7168), (4, 4608, 3584), (32, 4096, 16384)]
LONGK = [(32, 32, 28672), (64, 64, 65536), (16, 16, 1048576), (48, 96, 49152), (128, 128, 32768),
         (200, 200, 20000), (256, 256, 16384), (512, 512, 131072)]


def ceilings():
    x = torch.empty(2 * 2**30 // 4, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(10):
        y.copy_(x)
    e.record()
    e.synchronize()
    bw = 2 * x.numel() * 4 * 10 / (s.elapsed_time(e) * 1e-3)
    del x, y
    return bw


def skinny_sweep(m, n, k, dev):
    bm_core = max(1, min(16, 1 << max(0, (m - 1).bit_length())))
    bm_dot = max(16, 1 << max(0, (m - 1).bit_length()))
    out = []
    for bn, bk, w in itertools.product((32, 64, 128, 256), (128, 256, 512), (4, 8)):
        for s in (1, 2, 4, 8, 16, 32, 64, 128):
            progs = -(-n // bn) * s
            if progs < dev.sm_count // 4 and s < 128:
                continue
            if progs > 16 * dev.sm_count or -(-k // s) < 256:
                continue
            if m <= 16 and bm_core * bn * bk // (32 * w) <= 64:
                out.append(SkinnyConfig(bm_core, bn, bk, s, 1, w, False, True))
            for st in ((3, 4, 5, 6) if bk >= 128 and w == 4 else (4,)):
                if (bm_dot + bn) * bk * 2 * st <= 220 * 1024 and bm_dot <= 64:
                    out.append(SkinnyConfig(bm_dot, bn, bk, s, st, w, True, True))
                    if s == 1 and bm_dot <= 64:
                        for per_sm in (1, 2):
                            if (bm_dot + bn) * bk * 2 * st * per_sm <= 220 * 1024:
                                out.append(SkinnyConfig(bm_dot, bn, bk, 1, st, w, True, False, per_sm * dev.sm_count))
    return out


def splitk_sweep(m, n, k, dev):
    out = []
    for bm, bn in ((16, 16), (32, 32), (64, 64), (128, 128), (128, 64), (64, 128), (256, 64), (256, 32),
                   (32, 256), (64, 256)):
        if bm > 2 * max(16, m) or bn > 2 * max(16, n):
            continue
        for bk, st, w, s in itertools.product((64, 128, 256), (3, 4, 5), (4, 8), (4, 8, 16, 32, 64, 128)):
            tiles = -(-m // bm) * -(-n // bn)
            progs = tiles * s
            if progs < dev.sm_count // 2 or progs > 8 * dev.sm_count or -(-k // s) < 2 * bk:
                continue
            if (bm + bn) * bk * 2 * st > 220 * 1024 or bm * bn // (32 * w) > 128:
                continue
            out.append(SplitKConfig(bm, bn, bk, st, w, 8, s, False))
    step = max(1, len(out) // 60)  # a spread-out sample: the call has minutes, not hours
    return out[::step]


def _operands(m, n, k, lay, dt=torch.bfloat16):
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(k, n, device="cuda", dtype=dt) if lay == "row" else torch.randn(n, k, device="cuda", dtype=dt).t()
    return a, b


def _compile_job(job):
    """Compile (not run) a list of choices at one shape, in a worker process: fills Triton's
    disk cache so that the timing process only loads binaries."""
    (m, n, k, lay), ids = job
    from gemmtune.kernels.tiled import compile_only
    a, b = _operands(m, n, k, lay)
    out = torch.empty(m, n, device="cuda", dtype=a.dtype)
    ws = SplitKWorkspace()
    bad = 0
    with compile_only():
        for cid in ids:
            ch = Choice.parse(cid)
            try:
                kernels.get(ch.family).run(a, b, out, ch.config, workspace=ws)
            except Exception:  # noqa: BLE001 - the timing pass records the error
                bad += 1
    return len(ids), bad


def precompile(plan, workers=14):
    import concurrent.futures as cf
    import multiprocessing as mp
    jobs = []
    for case, ids in plan:
        for i in range(0, len(ids), 12):
            jobs.append((case, ids[i:i + 12]))
    t0 = time.time()
    with cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as ex:
        done = sum(n for n, _ in ex.map(_compile_job, jobs))
    print(f"# precompiled {done} choices in {time.time() - t0:.0f}s", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--budget-s", type=float, default=420)
    ap.add_argument("--only", choices=("decode", "longk"), help="just one class of shapes")
    args = ap.parse_args()
    t_start = time.time()
    dev = DeviceInfo.from_torch()
    bw = ceilings()
    print(f"# {torch.cuda.get_device_name()} copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    timer = CudaGraphTimer(replays=10, target_ms_per_replay=1.0, max_launches=64, eager_calls=5)
    ws = SplitKWorkspace()
    rows = []
    cases = [(s, "row") for s in DECODE] + [(s, "col") for s in DECODE[:6]] + [(s, "row") for s in LONGK]
    if args.only:
        cases = [c for c in cases if (c[0] in LONGK) == (args.only == "longk")]

    def families_for(m, n, k):
        fams = []
        if m <= 64:
            fams.append(("skinny", skinny_sweep(m, n, k, dev)))
        if (m, n, k) in LONGK:
            fams.append(("splitk", splitk_sweep(m, n, k, dev)))
        return fams
    precompile([((m, n, k, lay), [Choice(f, c).id for f, cs in families_for(m, n, k) for c in cs])
                for (m, n, k), lay in cases])
    for (m, n, k), lay in cases:
        if time.time() - t_start > args.budget_s:
            print("# budget spent, stopping", flush=True)
            break
        dt = torch.bfloat16
        bytes_ = (m * k + k * n + m * n) * 2
        nsets = sets_for(bytes_, dev.l2_bytes, 32)
        ins = [_operands(m, n, k, lay, dt) for _ in range(nsets)]
        outs = [torch.empty(m, n, device="cuda", dtype=dt) for _ in range(nsets)]
        ref = ins[0][0].double() @ ins[0][1].double()
        floor_ms = bytes_ / bw * 1e3

        def time_choice(ch):
            fam = kernels.get(ch.family)
            outs[0].fill_(float("nan"))
            fam.run(ins[0][0], ins[0][1], outs[0], ch.config, workspace=ws)
            torch.cuda.synchronize()
            o = outs[0].double()
            err = ((o - ref).norm() / ref.norm()).item()
            if not err < 1e-2:
                return None, err
            t = timer.measure(lambda i: fam.run(ins[i][0], ins[i][1], outs[i], ch.config, workspace=ws), nsets)
            return t.device_ms, err

        cub = timer.measure(lambda i: torch.mm(ins[i][0], ins[i][1], out=outs[i]), nsets).device_ms
        res = {"M": m, "N": n, "K": k, "layout_b": lay, "floor_ms": floor_ms, "cublas_ms": cub, "skinny": {}, "splitk": {}}
        fams = families_for(m, n, k)
        t0 = time.time()
        for fam, cfgs in fams:
            if args.quick:
                cfgs = cfgs[::3]
            for cfg in cfgs:
                ch = Choice(fam, cfg)
                try:
                    ms, err = time_choice(ch)
                except Exception as e:  # noqa: BLE001
                    res[fam][cfg.id] = f"error: {str(e).splitlines()[0][:120]}"
                    continue
                res[fam][cfg.id] = ms if ms is not None else f"wrong {err:.2e}"
                # cub timing again now and then, interleaved, to see drift
        res["cublas_ms_after"] = timer.measure(lambda i: torch.mm(ins[i][0], ins[i][1], out=outs[i]), nsets).device_ms
        res["sweep_s"] = time.time() - t0
        line = f"{m}x{n}x{k} {lay}: floor {floor_ms*1e3:.1f}us cuBLAS {cub*1e3:.1f}us ({floor_ms/cub:.0%})"
        for fam, _ in fams:
            ok = {c: v for c, v in res[fam].items() if isinstance(v, float)}
            bad = len(res[fam]) - len(ok)
            if ok:
                best = min(ok, key=ok.get)
                res[fam + "_best"] = best
                line += (f" | {fam} {ok[best]*1e3:.1f}us ({floor_ms/ok[best]:.0%}, {cub/ok[best]:.2f}x) "
                         f"{best} [{len(ok)} ok, {bad} bad]")
        line += f" [{res['sweep_s']:.0f}s]"
        print(line, flush=True)
        rows.append(res)
        del ins, outs, ref
        torch.cuda.empty_cache()
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "triton": __import__("triton").__version__, "bw": bw, "rows": rows},
                  open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
