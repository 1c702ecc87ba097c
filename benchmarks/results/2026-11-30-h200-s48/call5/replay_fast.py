import sqlite3, math, sys
from collections import defaultdict
from gemmtune.device import DeviceInfo
from gemmtune.problem import Problem
from gemmtune.tune import candidates
import gemmtune.tuning.plan as plan
import gemmtune.model as gm
import gemmtune.model.topk as topk
dev = DeviceInfo.lookup("h200")
model = gm.default_model(dev, triton_version="3.6.0")
c = sqlite3.connect('/work/.device/5/fp32x3-default.sqlite')
t = defaultdict(dict)
for k, ch, ms in c.execute("select problem_key, choice_id, device_ms from results where device_ms is not null"):
    t[k][ch] = ms
fams = ("triton_mm","triton_static","persistent_tma","splitk","skinny","decompose_k","aten")
import csv
for on in (False, True):
    if not on:
        orig = topk.x3_pick_applies
        topk.x3_pick_applies = lambda p: False
    else:
        topk.x3_pick_applies = orig
    fr = []
    for r in csv.DictReader(open("/work/main/benchmarks/suites/fp32-s48.csv")):
        p = Problem.from_sizes(int(r["M"]), int(r["N"]), int(r["K"]), "fp32", layout_a=r["layout_a"], layout_b=r["layout_b"])
        tt = t[p.key]
        picked, k, why = plan.select_fast(p, candidates(p, fams, "default", dev), model, dev)
        got = [tt[ch.id] for ch in picked if ch.id in tt]
        miss = [ch.id for ch in picked if ch.id not in tt]
        best = min(tt.values()); g = min(got)
        fr.append(best / g)
        print(on, r["name"], f"{len(picked)} picks, best {best*1e3:.1f} got {g*1e3:.1f} ({best/g:.3f}) aten {tt['aten']*1e3:.1f} missing {len(miss)}")
    print("geomean", math.exp(sum(map(math.log, fr)) / len(fr)))
