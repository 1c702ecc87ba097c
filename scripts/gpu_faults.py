"""Inject one crashing kernel (illegal memory access) into a real GPU tuning run.

Shows that the run completes, the crash is recorded with its reason, and the
candidates after it still verify and time on a healthy CUDA context.
"""

import json
import sys
import tempfile

import gemmtune
from gemmtune.problem import Problem
from gemmtune.store import ResultStore

p = Problem.from_sizes(512, 512, 4096, "bf16")
bad = gemmtune.space(p, "triton_mm")[0].id
faults = {bad: "illegal"}
with tempfile.TemporaryDirectory() as d:
    res = gemmtune.tune([p], families=["triton_mm", "decompose_k"], store=f"{d}/s.sqlite",
                        runner="gemmtune.bench.faults:handle", progress=False, compile_workers=0,
                        timeout=60, env={"GEMMTUNE_FAULTS": json.dumps(faults)})
    with ResultStore(f"{d}/s.sqlite") as st:
        rows = [r for _, r in st.rows()]
by_status = {}
for r in rows:
    by_status.setdefault(r.status, []).append(r)
print(f"injected 'illegal' into {bad}")
for r in rows:
    if r.choice_id == bad or r.status != "ok":
        print(f"  {r.choice_id}: {r.status}: {r.reason[:300]}")
ok = by_status.get("ok", [])
print(f"rows: {len(rows)}; statuses: { {k: len(v) for k, v in by_status.items()} }")
print(f"ok after the crash (healthy context): {len(ok)}; best {res.shapes[0].best} "
      f"{res.shapes[0].best_ms * 1e3:.2f} us vs aten {res.shapes[0].aten_ms * 1e3:.2f} us")
crashed = [r for r in rows if r.choice_id == bad and r.status == "crashed"]
sys.exit(0 if crashed and len(ok) == len(rows) - 1 else 1)
