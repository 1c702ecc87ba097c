import sys
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4] / "src"))
from gemmtune.tuning.plan import CandidatePlan, load_ranker, candidates
from gemmtune.device import DeviceInfo
from gemmtune.problem import Problem
from gemmtune.model.topk import rank_keys
import numpy as np
dev = DeviceInfo.lookup(sys.argv[1])
ranker = load_ranker(None, dev, "3.6.0")
fams = ("triton_mm","triton_static","splitk","skinny","persistent_tma","decompose_k","aten")
for s in sys.argv[2:]:
    lb = "col" if s.endswith("c") else "row"; m, n, k = map(int, s.rstrip("c").split("x")[:3])
    p = Problem.from_sizes(m, n, k, "bf16", layout_b=lb)
    pl = CandidatePlan(fams, "exhaustive", dev, None, "FAST", ranker)(p)
    print(s, pl.why); print("  fast:", [c.id for c in pl.choices])
    cands = [c for c in candidates(p, fams, "exhaustive", dev) if not (c.family == "aten" and not c.pad)]
    keys = np.asarray(rank_keys(ranker, p, cands)); o = np.argsort(keys)
    print("  top10:", [(cands[i].id, round(float(keys[i] - keys[o[0]]), 3)) for i in o[:10]])
