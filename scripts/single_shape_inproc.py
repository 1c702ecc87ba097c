"""Issue #19, single-shape tuning inside a Python process that already holds the GPU (GPU only).

For each shape, in this one process: ``gemmtune.tune([p], fast=True)`` against a warm
``gemmtune worker --serve`` pool (``--server``), the same with its own cold worker (first shape only), and
torch.compile max-autotune-no-cudagraphs of ``a @ b`` (``torch._dynamo.reset()`` between shapes,
its own Inductor cache dir per shape so nothing is reused). Each figure is the wall time of that
call alone; the torch import and CUDA context are paid before the first and count for neither.
A cProfile of one warm call names where its time goes.

    python3 scripts/single_shape_inproc.py SOCKET OUT_DIR [SHAPE:DT ...]
"""
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import time

import torch

import gemmtune
from gemmtune.problem import Problem

sock, out = sys.argv[1], sys.argv[2]
shapes = sys.argv[3:] or ["2048x6144x4096:bf16", "512x4096x4096:bf16", "16x6144x4096:bf16",
                          "1000x1000x1000:bf16", "64x64x65536:bf16"]
torch.zeros(1, device="cuda")
rows = []
for s in shapes:
    dims, dt = s.split(":")
    m, n, k = map(int, dims.split("x"))
    p = Problem.from_sizes(m, n, k, dt)
    row = {"shape": s}
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        r = gemmtune.tune([p], fast=True, server=sock, store=os.path.join(d, "w.sqlite"), progress=False)
        row["warm_s"] = time.perf_counter() - t0
        row["warm_startup_s"], row["warm_best"] = r.startup_s, r.shapes[0].best
        if not rows:  # once: the cold path differs by its worker start-up (startup_s)
            t0 = time.perf_counter()
            r = gemmtune.tune([p], fast=True, store=os.path.join(d, "c.sqlite"), progress=False)
            row["cold_s"] = time.perf_counter() - t0
            row["cold_startup_s"] = r.startup_s
    torch._dynamo.reset()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="ti-")
    a = torch.randn(m, k, device="cuda", dtype=p.torch_dtype)
    b = torch.randn(k, n, device="cuda", dtype=p.torch_dtype)
    f = torch.compile(lambda a, b: a @ b, mode="max-autotune-no-cudagraphs")
    t0 = time.perf_counter()
    f(a, b)
    torch.cuda.synchronize()
    row["maxautotune_s"] = time.perf_counter() - t0
    row["warm_vs_mat"] = row["warm_s"] / row["maxautotune_s"]
    rows.append(row)
    print(json.dumps(row), flush=True)

# Where a warm call's time goes (a shape not tuned above, so nothing is reused).
prof = cProfile.Profile()
with tempfile.TemporaryDirectory() as d:
    prof.enable()
    gemmtune.tune([Problem.from_sizes(768, 3072, 1024, "bf16")], fast=True, server=sock,
                  store=os.path.join(d, "p.sqlite"), progress=False)
    prof.disable()
buf = io.StringIO()
pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(35)
with open(os.path.join(out, "single_shape_inproc.json"), "w") as fh:
    json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows,
               "profile_top": buf.getvalue()[:20000]}, fh, indent=1)
print(buf.getvalue()[:6000])
