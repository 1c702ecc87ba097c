"""Outputs interleaved with an input in one CUDA buffer, for compute-sanitizer (kernels.base.out_overlap
takes them since session 58 for columns and session 59 for rows; tests/test_overlap_lattice.py checks
them on the CPU interpreter only).

    compute-sanitizer --tool memcheck python scripts/sanitize_overlap.py

Each case writes ``out`` as every other row (or column) of the buffer that holds ``a`` in the others,
then checks that a's bytes are unchanged and out is within tolerance of fp64. Families with a workspace
(split-K, skinny's K splits) and atomics are among them. Prints one line per case and 'sanitize: all ok'.
"""
import sys

import torch

from gemmtune import kernels
from gemmtune.configs import Choice
from gemmtune.kernels.base import out_overlap

DEV = "cuda" if torch.cuda.is_available() else "cpu"  # (the CPU: Triton's interpreter, a dry run)
CHOICES = ("aten", "triton_mm:BM16-BN16-BK16-S1-W2-G8", "triton_mm:BM64-BN64-BK32-S3-W4-G8",
           "splitk:BM16-BN16-BK16-S1-W2-G8-SK2-det", "splitk:BM32-BN32-BK64-S2-W4-G8-SK4-atomic",
           "skinny:BM16-BN32-BK128-SK2-S3-W4-dot-det", "skinny:BM16-BN64-BK128-SK4-S3-W4-dot-atomic")


def _cases(dtype):
    """(name, a, b, out): out and a interleaved in one buffer, by rows and by columns."""
    m, k = 13, 389  # rows: out [m, n] and a [m, k] alternate in a [2m, k] buffer, so n == k
    buf = torch.randn(2 * m, k, dtype=dtype, device=DEV)
    yield "rows", buf[1::2], torch.randn(k, k, dtype=dtype, device=DEV), buf[0::2]
    m, n, k = 11, 97, 97  # columns: a [m, k] = buf[:, 1::2], out [m, n] = buf[:, 0::2]
    buf = torch.randn(m, 2 * k, dtype=dtype, device=DEV)
    yield "cols", buf[:, 1::2], torch.randn(k, n, dtype=dtype, device=DEV), buf[:, 0::2]


def main() -> int:
    torch.manual_seed(0)
    bad = 0
    for dtype, tol in ((torch.float16, 2e-2), (torch.float32, 1e-3)):
        for cid in CHOICES:
            for name, a, b, out in _cases(dtype):
                assert out_overlap(out, a, b) is None, (name, "refused")
                keep = a.clone()
                ref = a.double() @ b.double()
                kernels.run_choice(Choice.parse(cid), a, b, out)
                kernels.run_choice(Choice.parse(cid), a, b, out)  # twice: a workspace reused
                if DEV == "cuda":
                    torch.cuda.synchronize()
                err = ((out.double() - ref).norm() / ref.norm()).item()
                ok = torch.equal(a, keep) and err < tol
                bad += not ok
                print(f"{cid:48s} {str(dtype):14s} {name}: rel err {err:.1e}, a kept {torch.equal(a, keep)}"
                      f" {'ok' if ok else 'BAD'}", flush=True)
    print("sanitize: all ok" if not bad else f"sanitize: {bad} BAD")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
