"""Host cost of the dispatcher's device guard (dispatch.launch.on_device): a cached call through
the guarded closure against the same closure unguarded (``__wrapped__``), interleaved round by
round, wall µs per call (timing.wall_ms_per_call, best of the rounds). GPU only.

    python scripts/bench_device_guard.py [OUT.json]
"""

from __future__ import annotations

import json
import sys

import torch

from gemmtune.bench.timing import wall_ms_per_call
from gemmtune.configs import Choice
from gemmtune.dispatch import compile_mm

CASES = [("triton_mm:BM64-BN64-BK64-S3-W4-G8", 16, 768, 1024), ("decompose_k:s4", 32, 32, 4096),
         ("pad+persistent_tma:BM64-BN64-BK64-S3-W4-G8", 64, 769, 1025)]
CALLS, ROUNDS = 200, 7


def main() -> None:
    rows = []
    for cid, m, n, k in CASES:
        choice = Choice.parse(cid)
        d = compile_mm(n=n, k=k, dtype="bf16", hints={"m": [m]}, tune_fn=lambda ps, **kw: {p.key: choice for p in ps})
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        d(a, b)
        guarded = d._fast[(a.shape, b.shape, a.dtype, b.dtype, 0, 0)]
        plain = guarded.__wrapped__
        best = {"guarded": float("inf"), "unguarded": float("inf")}
        for _ in range(ROUNDS):
            for name, fn in (("guarded", guarded), ("unguarded", plain)):
                best[name] = min(best[name], 1e3 * wall_ms_per_call(lambda i, fn=fn: fn(a, b), CALLS, warmup=20))
        rows.append({"choice": cid, "shape": [m, n, k], "guarded_us": round(best["guarded"], 2),
                     "unguarded_us": round(best["unguarded"], 2)})
        print(rows[-1], flush=True)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
