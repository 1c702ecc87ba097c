"""Where a pad+ choice's time goes on an odd square (4095^3 bf16), against Inductor (#16).

The odd group's cube_4095 ran gemmtune's pad+persistent_tma in ~246 us against Inductor's ~233 us
(H100, session 15), with three different tile configs within 1 us of one another: a fixed cost,
not a tile choice. This times each piece on its own, L2-cold from CUDA graphs (CudaGraphTimer),
in interleaved rounds: the two pad copies, cuBLAS and persistent_tma on the padded operands
(into an odd-strided output, and into a padded one), the whole pad+ choices, and Inductor's
max-autotune of ``a @ b`` (with the strides of the tensor it returns).

GPU only. Usage: python scripts/exp_pad_odd.py OUT.json [M N K] [persistent config ...]
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

from gemmtune import kernels
from gemmtune.bench.timing import CudaGraphTimer
from gemmtune.configs import Choice
from gemmtune.kernels import padded_sizes
from gemmtune.kernels.pad import zero_pad

OUT = sys.argv[1] if len(sys.argv) > 1 else "pad_odd.json"
M, N, K = (int(x) for x in sys.argv[2:5]) if len(sys.argv) > 4 else (4095, 4095, 4095)
CFGS = sys.argv[5:] or ["BM128-BN256-BK64-S3-W8-G8", "BM128-BN256-BK64-S3-W8-G8-WS"]
ROUNDS = 5
dt = torch.bfloat16
SETS = 3  # 3 x (A + B) = 200 MB: past the 50 MB L2


def main() -> None:
    g = torch.Generator(device="cuda").manual_seed(0)
    A = [torch.randn((M, K), device="cuda", dtype=dt, generator=g) for _ in range(SETS)]
    B = [torch.randn((K, N), device="cuda", dtype=dt, generator=g) for _ in range(SETS)]
    _, Np, Kp = padded_sizes(M, N, K, 2)
    Ap = [zero_pad(a, M, Kp) for a in A]
    Bp = [zero_pad(b, Kp, Np) for b in B]
    C = [torch.empty((M, N), device="cuda", dtype=dt) for _ in range(SETS)]
    Cp = [torch.empty((M, Np), device="cuda", dtype=dt) for _ in range(SETS)]
    ref = (A[0].double() @ B[0].double())
    pers = kernels.get("persistent_tma")

    launches = {
        "padA": lambda i: zero_pad(A[i], M, Kp),
        "padB": lambda i: zero_pad(B[i], Kp, Np),
        "cublas_padded_into_padded": lambda i: torch.mm(Ap[i], Bp[i], out=Cp[i]),
        "copy_out_of_padded": lambda i: C[i].copy_(Cp[i][:, :N]),
        "choice pad+aten": lambda i: kernels.run_choice(Choice.parse("pad+aten"), A[i], B[i], C[i]),
    }
    for cfg in CFGS:
        ch = Choice.parse(f"pad+persistent_tma:{cfg}")
        launches[f"pers {cfg} padded into odd C"] = (
            lambda i, c=ch.config: pers.run(Ap[i], Bp[i][:, :N], C[i], c))
        launches[f"pers {cfg} padded into padded C"] = (
            lambda i, c=ch.config: pers.run(Ap[i], Bp[i], Cp[i], c))
        launches[f"choice pad+persistent_tma:{cfg}"] = lambda i, ch=ch: kernels.run_choice(ch, A[i], B[i], C[i])

    fn = torch.compile(lambda a, b: a @ b, mode="max-autotune-no-cudagraphs", dynamic=False)
    y = fn(A[0], B[0])
    torch.cuda.synchronize()
    out = {"shape": [M, N, K], "device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "inductor_out_stride": list(y.stride()), "inductor_out_contiguous": y.is_contiguous(),
           "inductor_rel_err": float((y.double() - ref).norm() / ref.norm())}
    print(f"Inductor's output: stride {tuple(y.stride())}, contiguous {y.is_contiguous()}", flush=True)
    launches["inductor max-autotune"] = lambda i: fn(A[i], B[i])

    # Correctness of every launch that writes C (the copy and pad pieces write elsewhere).
    for name, fn_i in launches.items():
        if name.startswith(("choice", "pers")) and "into padded" not in name:
            C[0].fill_(float("nan"))
            fn_i(0)
            torch.cuda.synchronize()
            err = float((C[0].double() - ref).norm() / ref.norm())
            out.setdefault("rel_err", {})[name] = err
            print(f"{name}: rel err {err:.1e}", flush=True)

    timer = CudaGraphTimer()
    samples: dict[str, list[float]] = {n: [] for n in launches}
    names = list(launches)
    for r in range(ROUNDS):
        for name in names[r % len(names):] + names[:r % len(names)]:
            samples[name].append(timer.measure(launches[name], SETS).device_ms * 1e3)
    out["us"] = {n: statistics.median(v) for n, v in samples.items()}
    out["spread"] = {n: (max(v) - min(v)) / statistics.median(v) for n, v in samples.items()}
    for n in names:
        print(f"{out['us'][n]:9.2f} us  (range {out['spread'][n]:.1%})  {n}", flush=True)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
