"""Launch the chosen kernels a few times for Nsight Compute (scripts/exp_skinny.py picks them).

    ncu --clock-control none --section SpeedOfLight ... python scripts/ncu_skinny.py RESULT_JSON
Runs, per selected shape, cuBLAS and the best skinny / splitk choice from the JSON, 3 times each.
"""
import json
import sys

import torch

from gemmtune import kernels
from gemmtune.configs import Choice
from gemmtune.kernels.splitk import SplitKWorkspace

PICK = {(1, 6144, 4096, "row"), (1, 6144, 4096, "col"), (16, 6144, 4096, "row"), (200, 200, 20000, "row"),
        (16, 16, 1048576, "row")}
rows = json.load(open(sys.argv[1]))["rows"]
ws = SplitKWorkspace()
for r in rows:
    key = (r["M"], r["N"], r["K"], r["layout_b"])
    if key not in PICK:
        continue
    m, n, k, lay = key
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) if lay == "row" else \
        torch.randn(n, k, device="cuda", dtype=torch.bfloat16).t()
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        torch.mm(a, b, out=out)
    for fam in ("skinny", "splitk"):
        best = r.get(fam + "_best")
        if best:
            ch = Choice.parse(f"{fam}:{best}")
            print(key, ch.id, flush=True)
            for _ in range(3):
                kernels.get(fam).run(a, b, out, ch.config, workspace=ws)
    torch.cuda.synchronize()
