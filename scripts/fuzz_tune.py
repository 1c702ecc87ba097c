"""Random problems through ``gemmtune.tune(fast=True)`` and back through ``gemmtune.matmul``:
does tuning finish on shapes nobody chose, and is each winner right on fresh operands? GPU only.

    python scripts/fuzz_tune.py [--n 40] [--seed 25] [--out DIR]

Draws ``--n`` problems (seeded): M, N, K log-uniform in 1..8192 with a third of each rounded to a
multiple of 64 (the aligned sizes models use) and the rest left odd (primes, ragged K); dtype
bf16, fp16 or fp32; A and B each row- or column-major. All are tuned in one ``tune`` call
(``fast=True``: ranker picks plus cuBLAS, every candidate verified against fp64 in the worker). Each
winner then runs again in this process, through ``gemmtune.matmul``, on new random operands in
three forms (contiguous in the tuned layout, an offset view, the other layout) and is checked
against fp64 with ``verify.check``; and behind a ``compile_mm`` dispatcher serving it, called
first in the tuned layout and then in the other forms on its cached path. Writes fuzz_tune.json under ``--out``: per problem the winner,
its speedup over cuBLAS, the candidates' statuses, and each re-check.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
import warnings

import torch


DEV = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU: TRITON_INTERPRET=1, small --max-size


def draw(rng: random.Random, top: int = 8192) -> tuple[int, int, int, str, str, str]:
    def size():
        x = int(round(math.exp(rng.uniform(0, math.log(top)))))
        return max(64, x - x % 64) if rng.random() < 1 / 3 else max(1, x)
    m, n, k = size(), size(), size()
    while m * n * k > 2**33:  # keep the fp64 reference and the timing short
        m, n, k = max(1, m // 2), max(1, n // 2), k
    return (m, n, k, rng.choice(["bfloat16", "float16", "float32"]), rng.choice(["row", "col"]),
            rng.choice(["row", "col"]))


def operand(rows: int, cols: int, layout: str, dtype: torch.dtype, form: str) -> torch.Tensor:
    if form == "offset":  # one element into its storage: not 16-byte aligned
        return torch.randn(rows * cols + 1, device=DEV, dtype=dtype)[1:].view(rows, cols)
    if (layout == "col") != (form == "other"):
        return torch.randn(cols, rows, device=DEV, dtype=dtype).t()
    return torch.randn(rows, cols, device=DEV, dtype=dtype)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--max-size", type=int, default=8192, help="largest M, N, K drawn")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)

    import gemmtune
    from gemmtune import kernels
    from gemmtune.configs import Choice
    from gemmtune.dispatch import compile_mm
    from gemmtune.problem import Problem
    from gemmtune.verify import check

    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)
    problems = []
    for _ in range(args.n):
        m, n, k, dt, la, lb = draw(rng, args.max_size)
        problems.append(Problem.from_sizes(m, n, k, dt, layout_a=la, layout_b=lb))
    t0 = time.time()
    result = gemmtune.tune(problems, fast=True, store=os.path.join(args.out, "fuzz.sqlite"), progress=False)
    tune_s = time.time() - t0
    rows, bad = [], []
    for s in result.shapes:
        p = s.problem
        dt = getattr(torch, p.dtype)
        row = {"problem": p.key, "best": s.best, "speedup": s.speedup, "tried": s.tried, "failed": s.failed,
               "statuses": s.statuses, "reasons": s.reasons, "checks": {}}
        if s.best is None:
            bad.append(f"{p.key}: no winner ({s.reasons})")
        else:
            for form in ("tuned", "offset", "other"):
                a = operand(p.m, p.k, p.layout_a, dt, form)
                b = operand(p.k, p.n, p.layout_b, dt, form)
                try:
                    out = gemmtune.matmul(a, b, choice=s.best)
                    res = check(out, a, b, Problem.from_tensors(a, b))
                    row["checks"][form] = "ok" if res.ok else f"wrong: {res.reason}"
                except ValueError as e:
                    # An explicit choice on operands it cannot read is refused, by design, saying so.
                    why = kernels.operands_reason(Choice.parse(s.best), a, b)
                    row["checks"][form] = f"refused: {why}" if why else f"ValueError: {str(e)[:200]}"
                except Exception as e:  # noqa: BLE001 - recorded: the point is to find these
                    row["checks"][form] = f"{type(e).__name__}: {str(e)[:200]}"
                if row["checks"][form] != "ok" and not row["checks"][form].startswith("refused"):
                    bad.append(f"{p.key} {s.best} {form}: {row['checks'][form]}")
            # The same winner behind a dispatcher (the path compile_mm, patch and nn.Linear take):
            # its first call in the tuned layout, then the other forms on the cached path.
            d = compile_mm(n=p.n, k=p.k, dtype=p.dtype, layout_a=p.layout_a, layout_b=p.layout_b,
                           hints={"m": [p.m]}, tune_fn=lambda ps, best=s.best, **kw: {q.key: best for q in ps})
            for form in ("tuned", "offset", "other", "tuned again"):
                a = operand(p.m, p.k, p.layout_a, dt, form.split()[0])
                b = operand(p.k, p.n, p.layout_b, dt, form.split()[0])
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # the cuBLAS fallback's note
                        res = check(d(a, b), a, b, Problem.from_tensors(a, b))
                    got = "ok" if res.ok else f"wrong: {res.reason}"
                except Exception as e:  # noqa: BLE001 - recorded: the point is to find these
                    got = f"{type(e).__name__}: {str(e)[:200]}"
                row["checks"][f"dispatcher {form}"] = got
                if got != "ok":
                    bad.append(f"{p.key} {s.best} dispatcher {form}: {got}")
        rows.append(row)
        print(f"{p.key:60s} {str(s.best):50s} {s.speedup or float('nan'):6.2f}x "
              f"tried {s.tried} failed {s.failed} {row['checks']}", flush=True)
    speed = [r["speedup"] for r in rows if r["speedup"]]
    summary = {"gpu": torch.cuda.get_device_name() if DEV == "cuda" else "cpu", "torch": torch.__version__,
               "n": len(rows), "tune_s": round(tune_s, 1),
               "geomean_speedup": math.exp(sum(map(math.log, speed)) / len(speed)) if speed else None,
               "failed_candidates": sum(r["failed"] for r in rows), "bad": bad}
    print(json.dumps(summary, indent=1))
    with open(os.path.join(args.out, "fuzz_tune.json"), "w") as f:
        json.dump({"summary": summary, "rows": rows}, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
