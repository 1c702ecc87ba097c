"""Python function calls of one un-graphed decode step: a patched model with every layer on its
F.linear path against an unpatched deep copy (tiny-llama, CPU; cProfile call counts, which do not
depend on timing noise). Prints the per-step difference of each function's call count.

    TRITON_INTERPRET=1 python scripts/diag_patched_calls.py
"""
import copy
import cProfile
import pstats
import warnings
import torch
import gemmtune
from gemmtune.benchmodel.models import build_model, parse_model
from gemmtune.benchmodel.phases import causal_phase
warnings.simplefilter("ignore")
torch.manual_seed(0)
model = build_model(parse_model("tiny-llama"), torch.float32, "cpu")
vocab = model.get_input_embeddings().weight.shape[0]
ctl, pat = copy.deepcopy(model), copy.deepcopy(model)
ph = causal_phase("decode_b1", vocab, "cpu")
with torch.no_grad():
    gemmtune.patch(pat, hints={"m": [1]}, tune_fn=lambda problems, **kw: {p.key: "triton_mm:BM16-BN64-BK64-S1-W4-G8" for p in problems}, progress=False, convert_aten_layers=True)
    ph.run(pat); ph.run(ctl)
    for m in pat.modules():
        if "_gemmtune_eager" in m.__dict__:
            for s in list(m._gemmtune_paths): m._gemmtune_paths[s] = "aten"
    ph.run(pat)
    res = {}
    for name, mm in (("ctl", ctl), ("pat", pat)):
        pr = cProfile.Profile(); pr.enable()
        for _ in range(10): ph.run(mm)
        pr.disable()
        st = pstats.Stats(pr)
        res[name] = {f"{k[0].split('/')[-1]}:{k[1]}:{k[2]}": v[1] for k, v in st.stats.items()}
keys = set(res["ctl"]) | set(res["pat"])
diff = sorted(((res["pat"].get(k, 0) - res["ctl"].get(k, 0)), k) for k in keys)
for d, k in diff[:10] + diff[-25:]:
    if d: print(d / 10, k)
