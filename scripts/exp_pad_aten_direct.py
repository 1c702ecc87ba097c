"""pad+aten on odd N: into a padded temporary and copied out (as shipped until session 17), or
straight into the odd-strided output from the view B[:, :N] of the padded copy? (#16)

Session 17 (exp_pad_odd.py, H100) timed pad+aten on 4095^3 at 270 us: two pad copies (26 us
each), cuBLAS on the padded operands (177 us) and a 45 us copy out of the padded temporary.
Inductor (225 us) skips that copy by returning the padded buffer's view, which the dispatcher
cannot (its output is contiguous). cuBLAS itself does not need C's leading dimension aligned;
this times whether writing into ``out`` directly costs cuBLAS more than the copy saves.

Per shape, L2-cold CUDA-graph times (CudaGraphTimer) in interleaved rounds, each output checked
against fp64 first: ``copy`` (the shipped path), ``direct``, and both again with B padded once
(a weight: gemmtune.kernels.padcache), so that only A is padded per call.

GPU only. Usage: python scripts/exp_pad_aten_direct.py OUT.json
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

from gemmtune.bench.timing import CudaGraphTimer
from gemmtune.kernels import padded_sizes
from gemmtune.kernels.pad import zero_pad

SHAPES = [(4095, 4095, 4095, torch.bfloat16), (96, 50257, 768, torch.bfloat16), (1, 50257, 768, torch.bfloat16),
          (300, 20001, 512, torch.float16), (333, 4097, 1025, torch.bfloat16), (777, 1531, 2049, torch.float16),
          (1000, 1000, 1000, torch.bfloat16), (2048, 4095, 4096, torch.bfloat16)]
ROUNDS = 5


def one(M, N, K, dt) -> dict:
    _, Np, Kp = padded_sizes(M, N, K, torch.tensor([], dtype=dt).element_size())
    per = (M * K + K * N) * 2
    sets = max(2, min(16, -(-2 * 50 * 2**20 // per)))
    g = torch.Generator(device="cuda").manual_seed(0)
    A = [torch.randn((M, K), device="cuda", dtype=dt, generator=g) for _ in range(sets)]
    B = [torch.randn((K, N), device="cuda", dtype=dt, generator=g) for _ in range(sets)]
    Bp = [zero_pad(b, Kp, Np) for b in B]  # the weight case: padded once
    C = [torch.empty((M, N), device="cuda", dtype=dt) for _ in range(sets)]

    def copy(i, bp=None):
        ap = zero_pad(A[i], M, Kp)
        bp = zero_pad(B[i], Kp, Np) if bp is None else bp
        tmp = torch.empty((M, Np), device="cuda", dtype=dt)
        torch.mm(ap, bp, out=tmp)
        C[i].copy_(tmp[:, :N])

    def direct(i, bp=None):
        ap = zero_pad(A[i], M, Kp)
        bp = zero_pad(B[i], Kp, Np) if bp is None else bp
        torch.mm(ap, bp[:, :N], out=C[i])

    launches = {"copy": copy, "direct": direct,
                "copy, B padded once": lambda i: copy(i, Bp[i]), "direct, B padded once": lambda i: direct(i, Bp[i]),
                "aten unpadded": lambda i: torch.mm(A[i], B[i], out=C[i])}
    ref = A[0].double() @ B[0].double()
    res = {"shape": [M, N, K, str(dt)], "sets": sets, "rel_err": {}, "us": {}, "spread": {}}
    for name, fn in launches.items():
        C[0].fill_(float("nan"))
        fn(0)
        torch.cuda.synchronize()
        res["rel_err"][name] = float((C[0].double() - ref).norm() / ref.norm())
    timer = CudaGraphTimer()
    names = list(launches)
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(ROUNDS):
        for name in names[r % len(names):] + names[:r % len(names)]:
            samples[name].append(timer.measure(launches[name], sets).device_ms * 1e3)
    for n, v in samples.items():
        res["us"][n] = statistics.median(v)
        res["spread"][n] = (max(v) - min(v)) / statistics.median(v)
    return res


def main() -> None:
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": []}
    for M, N, K, dt in SHAPES:
        r = one(M, N, K, dt)
        out["rows"].append(r)
        u, e = r["us"], r["rel_err"]
        print(f"{M}x{N}x{K} {str(dt)[6:]:8s} copy {u['copy']:8.2f}  direct {u['direct']:8.2f} "
              f"({u['copy'] / u['direct']:.3f}x)  | B once: copy {u['copy, B padded once']:8.2f} "
              f"direct {u['direct, B padded once']:8.2f} ({u['copy, B padded once'] / u['direct, B padded once']:.3f}x)"
              f"  | unpadded {u['aten unpadded']:8.2f}  max rel err {max(e.values()):.1e}", flush=True)
    with open(sys.argv[1] if len(sys.argv) > 1 else "pad_aten_direct.json", "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
