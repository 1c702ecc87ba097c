"""GPU check: torch.compile(mode="max-autotune") takes gemmtune's exported Inductor lookup table for
a persistent_tma mm and a triton_mm addmm (F.linear with a bias), and its outputs match fp64.

    python scripts/check_inductor_lut.py        # prints one line per case and 'inductor lut: ok'

Inductor logs "lookup hit" at INFO for torch._inductor.lookup_table; the lines are counted here.
"""
import logging
import sys

import torch
import torch.nn.functional as F

from gemmtune import inductor_export as ie
from gemmtune.configs import Choice
from gemmtune.problem import Problem
from gemmtune.table import LookupTable, TableChoice, provenance

hits = []


class Hits(logging.Handler):
    def emit(self, record):
        msg = record.getMessage()
        if "lookup hit" in msg.lower():
            hits.append(msg[:160])


log = logging.getLogger("torch._inductor.lookup_table")
log.setLevel(logging.INFO)
log.addHandler(Hits())
logging.getLogger("torch._inductor.lookup_table.choices").setLevel(logging.INFO)

dev = torch.cuda.get_device_name()
prov = provenance(dev, "9.0", torch.__version__, "3.6.0", "0.1.0", "tuned")
m, n, k = 2048, 4096, 4096
mm_p = Problem.from_sizes(m, n, k, "bf16")
lin_p = Problem.from_sizes(256, 1024, 512, "bf16", layout_b="col", op="addmm")
table = LookupTable(prov, {
    mm_p.key: [TableChoice(Choice.parse("persistent_tma:BM128-BN256-BK64-S3-W8-G8"))],
    lin_p.key: [TableChoice(Choice.parse("triton_mm:BM64-BN64-BK64-S3-W4-G8"))],
})
conv = ie.convert(table)
print("exported:", len(conv.table), "entries; skipped:", [str(s) for s in conv.skipped])
ie.install(table)
bad = 0
a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
x = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
w = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
bias = torch.randn(1024, device="cuda", dtype=torch.bfloat16)
for name, fn, args, ref in (
        ("mm persistent_tma", lambda a, b: a @ b, (a, b), lambda: a.double() @ b.double()),
        ("addmm triton_mm", lambda x, w, bias: F.linear(x, w, bias), (x, w, bias),
         lambda: x.double() @ w.double().T + bias.double())):
    before = len(hits)
    try:
        out = torch.compile(fn, mode="max-autotune-no-cudagraphs")(*args)
        r = ref()
        err = ((out.double() - r).norm() / r.norm()).item()
        ok = err < 1e-2
    except Exception as e:  # noqa: BLE001 - report and go on
        print(f"{name}: FAILED {type(e).__name__}: {str(e)[:300]}")
        bad += 1
        continue
    print(f"{name}: rel err {err:.2e} {'ok' if ok else 'WRONG'}; lookup hits {len(hits) - before}")
    bad += not ok
print("hits:", hits)
print("inductor lut: ok" if not bad else f"inductor lut: {bad} failed")
sys.exit(1 if bad else 0)
