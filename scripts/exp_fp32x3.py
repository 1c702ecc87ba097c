"""GPU experiment (one device call): fp32 GEMMs without TF32 on tensor cores, as 3xTF32.

fp32 problems with TF32 off run on CUDA cores today (Triton's ``input_precision="ieee"``, cuBLAS's
SGEMM). The random suites of sessions 47 and 48 found fp32 decode shapes (M = 16-33, wide N) at
34-44% of the HBM floor with cuBLAS, Inductor and gemmtune all tied. Triton's ``"tf32x3"`` splits
each fp32 operand into a TF32 high part and a TF32 remainder and sums three tensor-core products
(hi*hi + hi*lo + lo*hi): products good to about 2^-21 relative, summed in fp32, at tensor-core
throughput. Question: how much faster, and how accurate, against IEEE fp32 and against cuBLAS?

Per shape (fp32, TF32 off): ``gemmtune tune`` (default space, the Triton families and cuBLAS) in
two processes, one with every Triton fp32 product IEEE and one with 3xTF32
(``GEMMTUNE_FP32_PRECISION``: gemmtune.precision), each with its own store.
Then the 3xTF32 winner's error against fp64 on fresh inputs (3 seeds), beside cuBLAS's fp32 error
and TF32 cuBLAS's, and what each does with an inf in A.

    python scripts/exp_fp32x3.py --out DIR            # the whole experiment (GPU)
    python scripts/exp_fp32x3.py --accuracy DIR       # (internal) the error check, run by the above
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

SHAPES = [  # (name, M, N, K, layout_a, layout_b): the classes where fp32 appears in the suites
    ("cube_4096_fp32", 4096, 4096, 4096, "row", "row"),
    ("cube_1024_fp32", 1024, 1024, 1024, "row", "col"),
    ("tiny_mn_fp32", 64, 64, 32768, "row", "row"),
    ("splitk_96x368x12384", 96, 368, 12384, "row", "col"),
    ("decode_16x10240x2816", 16, 10240, 2816, "row", "col"),
    ("decode_32x49152x1536", 32, 49152, 1536, "row", "col"),
    ("odd_33x32001x5120", 33, 32001, 5120, "row", "row"),
    ("odd_137x1531x1249", 137, 1531, 1249, "row", "col"),
    ("decode_1x2304x10240", 1, 2304, 10240, "row", "row"),
    ("decode_8x4096x4096", 8, 4096, 4096, "row", "col"),
    ("prefill_512x4096x4096", 512, 4096, 4096, "row", "col"),
]
FAMILIES = "triton_mm,triton_static,persistent_tma,splitk,skinny,decompose_k,aten"


def write_suite(path: Path) -> None:
    rows = ["group,name,M,N,K,dtype,layout_a,layout_b"]
    rows += [f"fp32,{n},{m},{nn},{k},float32,{la},{lb}" for n, m, nn, k, la, lb in SHAPES]
    path.write_text("\n".join(rows) + "\n")


def tune(out: Path, prec: str) -> dict:
    env = dict(os.environ, GEMMTUNE_FP32_PRECISION=prec)
    cmd = [sys.executable, "-m", "gemmtune.cli", "tune", "--suite", str(out / "fp32.csv"), "--families", FAMILIES,
           "--store", str(out / f"store_{prec}.sqlite"), "--out", str(out / f"table_{prec}.json"),
           "--summary", str(out / f"summary_{prec}.json")]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    (out / f"tune_{prec}.log").write_text(r.stdout + r.stderr)
    print(f"tune {prec}: rc={r.returncode}", flush=True)
    return json.loads((out / f"summary_{prec}.json").read_text()) if r.returncode == 0 else {"shapes": []}


def accuracy(out: Path) -> None:
    """Run with GEMMTUNE_FP32_PRECISION=tf32x3: each shape's 3xTF32 winner against fp64."""
    import torch

    import gemmtune
    summ = json.loads((out / "summary_tf32x3.json").read_text())
    res = {}
    for s in summ["shapes"]:
        name, m, n, k, la, lb = next(x for x in SHAPES if x[0] == s["name"])
        errs = {"x3": [], "cublas_fp32": [], "cublas_tf32": []}
        for seed in range(3):
            g = torch.Generator(device="cuda").manual_seed(seed)
            a = torch.randn((m, k) if la == "row" else (k, m), device="cuda", generator=g)
            b = torch.randn((k, n) if lb == "row" else (n, k), device="cuda", generator=g)
            a = a if la == "row" else a.t()
            b = b if lb == "row" else b.t()
            ref = a.double() @ b.double()

            def rel(o):
                return ((o.double() - ref).norm() / ref.norm()).item()
            errs["x3"].append(rel(gemmtune.matmul(a, b, choice=s["best"])))
            torch.backends.cuda.matmul.allow_tf32 = False
            errs["cublas_fp32"].append(rel(a @ b))
            torch.backends.cuda.matmul.allow_tf32 = True
            errs["cublas_tf32"].append(rel(a @ b))
            torch.backends.cuda.matmul.allow_tf32 = False
        a2 = a.clone()
        a2[0, 0] = float("inf")
        o_ieee, o_x3 = a2 @ b, gemmtune.matmul(a2, b, choice=s["best"])
        res[name] = {"best": s["best"], **{key: max(v) for key, v in errs.items()},
                     "inf_row_ieee": {"nan": int(o_ieee[0].isnan().sum()), "inf": int(o_ieee[0].isinf().sum())},
                     "inf_row_x3": {"nan": int(o_x3[0].isnan().sum()), "inf": int(o_x3[0].isinf().sum())}}
        print(name, json.dumps(res[name]), flush=True)
    (out / "accuracy.json").write_text(json.dumps(res, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--accuracy", type=Path)
    args = ap.parse_args()
    if args.accuracy:
        accuracy(args.accuracy)
        return
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    write_suite(out / "fp32.csv")
    summ = {p: tune(out, p) for p in ("ieee", "tf32x3")}
    by = {p: {s["name"]: s for s in summ[p]["shapes"]} for p in summ}
    print(f"{'shape':24s} {'cuBLAS us':>10s} {'ieee best us':>12s} {'x3 best us':>10s} {'x3/cuBLAS':>9s}  x3 choice")
    rows = []
    for name, *_ in SHAPES:
        i, x = by["ieee"].get(name), by["tf32x3"].get(name)
        if not i or not x:
            print(f"{name:24s} missing")
            continue
        row = {"shape": name, "aten_us_ieee_run": i["aten_ms"] * 1e3, "aten_us_x3_run": x["aten_ms"] * 1e3,
               "ieee_best": i["best"], "ieee_best_us": i["best_ms"] * 1e3,
               "x3_best": x["best"], "x3_best_us": x["best_ms"] * 1e3, "x3_failed": x["failed"], "ieee_failed": i["failed"]}
        rows.append(row)
        print(f"{name:24s} {row['aten_us_x3_run']:10.2f} {row['ieee_best_us']:12.2f} {row['x3_best_us']:10.2f} "
              f"{row['aten_us_x3_run'] / row['x3_best_us']:9.2f}  {x['best']}", flush=True)
    (out / "fp32x3.json").write_text(json.dumps(rows, indent=1))
    env = dict(os.environ, GEMMTUNE_FP32_PRECISION="tf32x3")
    r = subprocess.run([sys.executable, __file__, "--accuracy", str(out)], env=env, capture_output=True, text=True)
    print(r.stdout[-6000:], r.stderr[-3000:] if r.returncode else "")


if __name__ == "__main__":
    main()
