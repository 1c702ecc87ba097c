"""One torch.compile max-autotune (no cudagraphs) of ``a @ b`` for SHAPE ("MxNxK:dtype"), called
once: the comparison process of the one-shape timing scripts (single_shape_fast.sh,
cold_timeline.sh), whose wall time they measure. GPU only.

    python3 scripts/maxautotune_once.py 512x4096x4096:bf16
"""
import sys

import torch

dims, dt = sys.argv[1].split(":")
m, n, k = map(int, dims.split("x"))
dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dt]
a = torch.randn(m, k, device="cuda", dtype=dtype)
b = torch.randn(k, n, device="cuda", dtype=dtype)
torch.compile(lambda a, b: a @ b, mode="max-autotune-no-cudagraphs")(a, b)
torch.cuda.synchronize()
