#!/usr/bin/env python3
"""On a GPU: does prefetching B's next K tile into registers close the last parity gap on odd N?

    python3 scripts/exp_prefetch_b.py --out $OUT/prefetch_b.json [--rounds 7]
    TRITON_INTERPRET=1 python3 scripts/exp_prefetch_b.py --check      # CPU: correctness only

Why (benchmarks/results/2026-12-02-h200-s53, calls 4 and 5): with an odd N and a row-major B, B's
rows start 2-byte aligned, so its tile is loaded with scalar ``ld.global.b16`` (cp.async takes 4 bytes
or more). Triton then pipelines only A; B's loads are issued, stored to shared memory and consumed in
the same K iteration. Inductor's template hides part of that latency behind ~80 integer instructions
of address arithmetic; our leaner wrapped form (192 SASS instructions an iteration against 383)
waits 15 cycles an instruction on L1TEX against 5, and runs 1.18-1.31x the template on 96x50257x768.

This times, beside Inductor's template on the same config (forced through gemmtune's lookup-table
export, as scripts/parity_inductor.py does) and cuBLAS, one standalone kernel in two forms:
``plain`` (sizes and strides constants, rows and columns wrapped, no mask: the structure of the
template) and ``prefetch`` (B's tile for iteration k+1 loaded before iteration k's product, kept in
registers; the last prefetch re-reads the last tile, so no mask is needed). An experiment: nothing in
the library changes with it.
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
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="gemmtune-prefetch-"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

# (M, N, K, dtype, BLOCK_M, BLOCK_N, BLOCK_K, stages, warps): the even-K odd-N parity rows.
CASES = [
    (96, 50257, 768, "bfloat16", 64, 128, 64, 4, 4),
    (300, 20001, 512, "float16", 128, 128, 64, 3, 4),
]


@triton.jit
def mm_wrapped(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
               PREFETCH: tl.constexpr):
    """C = A @ B for row-major A [M, K], B [K, N], C [M, N]; K a multiple of BLOCK_K."""
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    width = GROUP_M * grid_n
    group_id = pid // width
    group_size = tl.minimum(grid_m - group_id * GROUP_M, GROUP_M)
    pid_m = group_id * GROUP_M + (pid % group_size)
    pid_n = (pid % width) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ram = rm % M
    rbn = tl.max_contiguous(rn % N, BLOCK_N)  # contiguity only: no vector may cross the wrap
    rk = tl.arange(0, BLOCK_K)
    a_rows = a_ptr + ram[:, None] * K
    b_cols = b_ptr + rbn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    n_k = K // BLOCK_K
    if PREFETCH:
        b = tl.load(b_cols + rk[:, None] * N)
        for ki in range(0, n_k):
            # the next tile first (the last iteration re-reads its own: in bounds, and from L2)
            kn = tl.minimum(ki + 1, n_k - 1) * BLOCK_K
            b_next = tl.load(b_cols + (kn + rk)[:, None] * N)
            a = tl.load(a_rows + (ki * BLOCK_K + rk)[None, :])
            acc = tl.dot(a, b, acc)
            b = b_next
    else:
        for ki in range(0, n_k):
            a = tl.load(a_rows + (ki * BLOCK_K + rk)[None, :])
            b = tl.load(b_cols + (ki * BLOCK_K + rk)[:, None] * N)
            acc = tl.dot(a, b, acc)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + (rm[:, None] * N + rn[None, :]), acc.to(c_ptr.dtype.element_ty), mask=mask)


def launch(a, b, c, bm, bn, bk, stages, warps, prefetch):
    m, k = a.shape
    n = b.shape[1]
    assert k % bk == 0, "K must be a multiple of BLOCK_K here"
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    mm_wrapped[grid](a, b, c, m, n, k, bm, bn, bk, 8, prefetch, num_stages=stages, num_warps=warps)


def check() -> int:
    """Both forms against fp64 (gemmtune's per-dtype tolerance) on odd shapes: M = 1, primes, N not a
    multiple of the block (the wrapped columns), in the interpreter; K is a multiple of BLOCK_K here."""
    from gemmtune.problem import Problem
    from gemmtune.verify import compare, tolerance

    bad = 0
    for (m, n, k) in [(1, 37, 32), (5, 37, 32), (33, 45, 64), (17, 129, 96)]:
        a = torch.randn(m, k, dtype=torch.float16)
        b = torch.randn(k, n, dtype=torch.float16)
        ref = a.double() @ b.double()
        for pf in (False, True):
            c = torch.empty(m, n, dtype=torch.float16)
            launch(a, b, c, 16, 32, 16, 2, 4, pf)
            res = compare(c, ref, tolerance(Problem.from_sizes(m, n, k, "float16")))
            bad += not res.ok
            print(f"{m}x{n}x{k} prefetch={pf}: {'ok' if res.ok else 'BAD'} ({res})")
    print("both forms match fp64" if not bad else f"{bad} mismatches")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--check", action="store_true", help="correctness only, small shapes (CPU interpreter)")
    args = ap.parse_args()
    if args.check:
        return check()
    if not args.out:
        ap.error("--out is required (or --check)")

    sys.path.insert(0, str(ROOT / "scripts"))
    from parity_inductor import ie_provenance

    import gemmtune.inductor_export as ie
    from gemmtune.bench.inductor import held_launch
    from gemmtune.bench.timing import CudaGraphTimer, sets_for
    from gemmtune.benchmark import aggregate, make_entry, round_robin
    from gemmtune.configs import Choice
    from gemmtune.device import DeviceInfo
    from gemmtune.problem import DTYPES, Problem
    from gemmtune.table import LookupTable, TableChoice
    from gemmtune.verify import compare, tolerance

    torch.backends.cuda.matmul.allow_tf32 = False
    dev = DeviceInfo.from_torch()
    timer = CudaGraphTimer(replays=10)
    rows = []
    for m, n, k, dt, bm, bn, bk, stages, warps in CASES:
        p = Problem.from_sizes(m, n, k, dt)
        cfg = f"BM{bm}-BN{bn}-BK{bk}-S{stages}-W{warps}-G8"
        tdt = DTYPES[p.dtype]
        nsets = sets_for(p.min_bytes, dev.l2_bytes, 16)
        ins = [(torch.randn(m, k, device="cuda", dtype=tdt), torch.randn(k, n, device="cuda", dtype=tdt))
               for _ in range(nsets)]
        outs = [torch.empty(m, n, device="cuda", dtype=tdt) for _ in range(nsets)]
        ref = ins[0][0].double() @ ins[0][1].double()
        row = {"m": m, "n": n, "k": k, "dtype": dt, "config": cfg}
        ie.install(LookupTable(ie_provenance(), {p.key: [TableChoice(Choice.parse(f"triton_mm:{cfg}"), None)]}))
        torch._dynamo.reset()
        f = torch.compile(lambda x, y: torch.mm(x, y), mode="max-autotune-no-cudagraphs", dynamic=False)
        row["inductor_ok"] = compare(f(*ins[0]), ref, tolerance(p)).ok
        launches = {"cublas": lambda j: torch.mm(*ins[j], out=outs[j]), "inductor": held_launch(f, ins)}
        for name, pf in (("plain", False), ("prefetch", True)):
            launch(*ins[0], outs[0], bm, bn, bk, stages, warps, pf)
            row[f"{name}_ok"] = compare(outs[0], ref, tolerance(p)).ok
            launches[name] = (lambda j, pf=pf: launch(*ins[j], outs[j], bm, bn, bk, stages, warps, pf))
        entries = {name: make_entry(timer, fn, nsets) for name, fn in launches.items()}
        try:
            times = round_robin(entries, 30, args.rounds)
        finally:
            for e in entries.values():
                e.close()
        for name, t in times.items():
            row[name] = aggregate(t) if not isinstance(t, BaseException) else {"error": str(t)[:200]}
        for name in ("plain", "prefetch"):
            if "ms" in row[name] and "ms" in row["inductor"]:
                row[f"{name}_over_inductor"] = row[name]["ms"] / row["inductor"]["ms"]
        rows.append(row)
        print(f"{m}x{n}x{k} {dt} {cfg}: inductor {row['inductor'].get('ms', float('nan')) * 1e3:.1f} us, "
              f"plain {row.get('plain_over_inductor', float('nan')):.3f}, prefetch "
              f"{row.get('prefetch_over_inductor', float('nan')):.3f} (ok {row['plain_ok']}/{row['prefetch_ok']}/"
              f"{row['inductor_ok']})", flush=True)
        Path(args.out).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                                              "triton": triton.__version__, "rows": rows}, indent=1))
        launches.clear()
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
