"""Session 43: the GPU zoo's mixtral decode step, compiled against eager, unpatched and patched:
is a compiled MoE's divergence gemmtune's or the router's (bf16 near ties)? GPU only."""
import copy
import sys
import warnings

import torch

sys.path.insert(0, "tests")
import test_model_zoo_gpu as z  # noqa: E402

import gemmtune  # noqa: E402
torch.manual_seed(0)
ref, model = z.build("mixtral")
ids = torch.randint(0, z.SIZES["vocab_size"], (z.BATCH, z.PROMPT), device="cuda")
with torch.no_grad():
    for label in ("unpatched", "patched"):
        m = copy.deepcopy(model)
        if label == "patched":
            gemmtune.fuse_linears(m, ids)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                gemmtune.patch(m, z.table_for(m, (z.BATCH * z.PROMPT, z.BATCH)), hints={"m": [1]},
                               tune_fn=lambda ps, **kw: {p.key: "aten" for p in ps})
        pre, dec, tok, _ = z.steps(m, ids)
        torch._dynamo.reset()
        c = torch.compile(m)
        cpre, cdec, ctok, _ = z.steps(c, ids)
        row = (cdec - dec).abs().amax(-1).flatten().tolist()
        print(label, "prefill", round(z.rel(cpre, pre), 4), "decode", round(z.rel(cdec, dec), 4),
              "same tokens", bool((ctok == tok).all()), "per-row max diff", [round(r, 3) for r in row], flush=True)
        torch._dynamo.reset()
