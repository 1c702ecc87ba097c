"""compute-sanitizer memcheck of the wave-2 op paths (GPU only): fp8 scaled_mm through every
Triton family (scales in the epilogue; split-K's atomics and workspace, persistent_tma's TMA),
and bmm through the batched tiled kernel (padbmm: its pad+ variant, zero_pad's 3-D path).
Odd sizes, row-wise scales with a bias, a row-major
fp8 B (pad+ makes it K-major), and for bmm a transposed and a broadcast (stride-0) operand.

    compute-sanitizer --tool memcheck python scripts/sanitize_fp8_bmm.py [fp8] [bmm] [padbmm] [static]
Each output is checked against fp64; prints one line per launch, then 'sanitize: all ok'.
"""
import sys

import torch

import gemmtune

F8 = torch.float8_e4m3fn
FP8_CASES = [  # (choice, M, N, K, B layout, scale mode)
    ("triton_mm:BM64-BN64-BK64-S3-W4-G8", 77, 1040, 528, "col", "row"),
    ("splitk:BM32-BN32-BK128-S4-W4-G8-SK8-atomic", 17, 272, 8192, "col", "row"),
    ("splitk:BM32-BN32-BK128-S4-W4-G8-SK8-det", 17, 272, 8192, "col", "tensor"),
    ("persistent_tma:BM128-BN128-BK128-S3-W8-G8", 333, 1040, 1056, "col", "row"),
    ("pad+triton_mm:BM64-BN64-BK64-S3-W4-G8", 29, 1000, 520, "row", "row"),
]


def fp8_case(choice, m, n, k, lay, mode):
    a = (torch.randn(m, k, device="cuda") * 2).to(F8)
    b = (torch.randn(n, k, device="cuda") * 2).to(F8).t() if lay == "col" else \
        (torch.randn(k, n, device="cuda") * 2).to(F8)
    if mode == "row":
        sa = torch.rand(m, 1, device="cuda") + 0.5
        sb = torch.rand(1, n, device="cuda") + 0.5
    else:
        sa, sb = torch.tensor(0.7, device="cuda"), torch.tensor(1.3, device="cuda")
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    out = gemmtune.scaled_mm(a, b, sa, sb, bias=bias, choice=choice)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double()) * sa.double() * sb.double() + bias.double()
    err = float((out.double() - ref).abs().max() / ref.abs().max())
    return err < 2e-2, f"fp8 {choice} {m}x{n}x{k} B={lay} scale={mode}: rel err {err:.1e}"


def matmul_case(label, a, b, choice) -> bool:
    """gemmtune.matmul(a, b, choice) against fp64 (largest error over the largest output < 1e-2);
    prints one line, 'WRONG' at its end when it fails or raises."""
    try:
        out = gemmtune.matmul(a, b, choice=choice)
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        err = float((out.double() - ref).abs().max() / ref.abs().max())
        ok, line = err < 1e-2, f"{label}: rel err {err:.1e}"
    except Exception as e:  # noqa: BLE001
        ok, line = False, f"{label}: {type(e).__name__}: {str(e)[:200]}"
    print(line if ok else line + "  WRONG", flush=True)
    return ok


WHAT = sys.argv[1:] or ["fp8", "bmm"]
bad = 0
for case in FP8_CASES if "fp8" in WHAT else []:
    for _ in range(2):  # the second launch reuses what the first left (workspaces, descriptors)
        try:
            ok, line = fp8_case(*case)
        except Exception as e:  # noqa: BLE001 - a config this triton cannot compile is not a memory error
            ok, line = True, f"fp8 {case[0]}: not run ({type(e).__name__}: {str(e)[:160]})"
        bad += not ok
        print(line if ok else line + "  WRONG", flush=True)

def bmm_operands(bt, m, n, k, var):
    """bf16 A [bt, m, k] and B [bt, k, n]: contiguous, transposed (K-major) or broadcast (stride 0)."""
    a = torch.randn(bt, m, k, device="cuda", dtype=torch.bfloat16)
    if var == "transposed":
        return a, torch.randn(bt, n, k, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    if var == "broadcast":
        return a, torch.randn(1, k, n, device="cuda", dtype=torch.bfloat16).expand(bt, k, n)
    return a, torch.randn(bt, k, n, device="cuda", dtype=torch.bfloat16)


BMM_CASES = [  # (choice, batch, M, N, K, variant)
    ("triton_mm:BM64-BN64-BK32-S3-W4-G8", 5, 77, 130, 72, "plain"),
    ("triton_mm:BM32-BN64-BK32-S2-W4-G8", 3, 129, 64, 257, "transposed"),
    ("triton_mm:BM64-BN32-BK64-S3-W4-G1", 7, 33, 96, 128, "broadcast"),
]
PADBMM_CASES = [  # (choice, batch, M, N, K, variant): pad+ bmm; operands past 16 MiB take zero_pad's margin path
    ("pad+triton_mm:BM128-BN128-BK64-S3-W4-G8", 4, 1001, 1003, 2049, "plain"),
    ("pad+triton_mm:BM64-BN128-BK64-S3-W4-G8", 3, 777, 4095, 2047, "transposed"),
    ("pad+triton_mm:BM64-BN64-BK64-S3-W4-G8", 6, 515, 4097, 2051, "broadcast"),
]
for what, cases in (("bmm", BMM_CASES), ("padbmm", PADBMM_CASES)):
    for choice, bt, m, n, k, var in cases if what in WHAT else []:
        a, b = bmm_operands(bt, m, n, k, var)
        bad += not matmul_case(f"{what} {choice} {bt}x{m}x{n}x{k} {var}", a, b, choice)
STATIC_CASES = [  # (config, M, N, K, B layout, dtype): triton_static on unaligned operands
    ("BM64-BN128-BK64-S4-W4-G8", 333, 4097, 1025, "row", torch.bfloat16),
    ("BM128-BN128-BK64-S3-W4-G8", 300, 20001, 512, "row", torch.float16),
    ("BM32-BN64-BK32-S2-W4-G8", 7, 1531, 2049, "col", torch.float16),
    ("BM64-BN64-BK64-S3-W4-G8", 1, 97, 131, "row", torch.float16),
]
for cfg, m, n, k, lay, dt in STATIC_CASES if "static" in WHAT else []:
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(k, n, device="cuda", dtype=dt) if lay == "row" else torch.randn(n, k, device="cuda", dtype=dt).t()
    bad += not matmul_case(f"static {cfg} {m}x{n}x{k} B={lay} {dt}", a, b, f"triton_static:{cfg}")
print("sanitize: all ok" if not bad else f"sanitize: {bad} WRONG")
sys.exit(1 if bad else 0)
