"""Session 58 experiment (GPU): which cuBLAS route is fastest on GEMMs with one output row or column.

Session 57 found cuBLAS on the *transposed* problem (1x8192x4096 into a fresh 1xM output) at 18.6 us
where torch.mm on 8192x1x4096 took 35.1 and the best Triton kernel 21.4. With M == 1 or N == 1, C and
C^T have the same bytes, so a transposed call needs no copy. Routes timed here, L2-cold CUDA graphs
(gemmtune's CudaGraphTimer), interleaved by round, each checked against fp64 first:
  mm      torch.mm(a, b, out=out)                            (gemmtune's aten today)
  mv      torch.mv: N == 1: mv(a, b[:, 0]); M == 1: mv(b.t(), a[0])   (cuBLAS gemv)
  mm_t    torch.mm(b.t(), a.t(), out=out viewed as C^T)      (the transposed GEMM)

    python scripts/sessions/exp_gemv_routes.py OUT.csv
"""
from __future__ import annotations

import csv
import statistics
import sys

import torch

from gemmtune.bench.measure import make_operand
from gemmtune.bench.timing import CudaGraphTimer, sets_for

SHAPES = [  # M, N, K, layout_a, layout_b (B col-major = an nn.Linear weight)
    (1, 6144, 4096, "row", "col"), (1, 4096, 14336, "row", "col"), (1, 50257, 768, "row", "col"),
    (1, 28672, 4096, "row", "col"), (1, 4096, 4096, "row", "col"), (1, 1024, 4096, "row", "col"),
    (1, 6144, 4096, "row", "row"), (1, 50257, 768, "row", "row"),
    (8192, 1, 4096, "row", "row"), (8192, 1, 4096, "row", "col"), (4096, 1, 8192, "col", "row"),
    (16384, 1, 2048, "row", "row"), (2048, 1, 2048, "row", "row"), (100003, 1, 256, "row", "row"),
]


def routes(m: int, n: int):
    def mm(a, b, out):
        torch.mm(a, b, out=out)

    def mv(a, b, out):
        if n == 1:
            torch.mv(a, b[:, 0], out=out[:, 0])
        else:
            torch.mv(b.t(), a[0], out=out[0])

    def mm_t(a, b, out):
        torch.mm(b.t(), a.t(), out=out.view(n, m))

    return {"mm": mm, "mv": mv, "mm_t": mm_t}


def main() -> None:
    dev, dt = "cuda", torch.bfloat16
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    timer = CudaGraphTimer(replays=10)
    rows = []
    for m, n, k, la, lb in SHAPES:
        g = torch.Generator(device=dev).manual_seed(m * 7 + n * 3 + k)
        per = 2 * (m * k + k * n + m * n)
        sets = sets_for(per, l2)
        data = [(make_operand(m, k, la, True, dt, dev, g), make_operand(k, n, lb, True, dt, dev, g),
                 torch.empty(m, n, dtype=dt, device=dev)) for _ in range(sets)]
        ref = data[0][0].double() @ data[0][1].double()
        rs = routes(m, n)
        ok = {}
        for name, fn in rs.items():
            a, b, out = data[0]
            out.fill_(float("nan"))
            try:
                fn(a, b, out)
                torch.cuda.synchronize()
                err = ((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item()
                ok[name] = err < 2e-2
                if not ok[name]:
                    print(f"{m}x{n}x{k} {la}/{lb} {name}: WRONG (rel err {err:.3g})")
            except RuntimeError as e:
                print(f"{m}x{n}x{k} {la}/{lb} {name}: {str(e).splitlines()[0]}")
                ok[name] = False
        times = {name: [] for name in rs if ok[name]}
        eager = {}
        for _ in range(3):  # interleaved rounds
            for name in times:
                fn = rs[name]
                t = timer.measure(lambda i, fn=fn, d=data: fn(*d[i]), sets)
                times[name].append(t.device_ms * 1e3)
                eager[name] = t.eager_ms * 1e3
        med = {nm: statistics.median(v) for nm, v in times.items()}
        line = f"{m}x{n}x{k} {la}/{lb} " + "  ".join(f"{nm} {us:.2f} us (eager {eager[nm]:.1f})" for nm, us in med.items())
        print(line, flush=True)
        for nm, us in med.items():
            rows.append({"M": m, "N": n, "K": k, "layout_a": la, "layout_b": lb, "route": nm, "device_us": f"{us:.3f}",
                         "eager_us": f"{eager[nm]:.2f}", "bytes": per})
        del data
    with open(sys.argv[1], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
