"""Session 58 experiment (GPU host): what each statement of gemmtune.nn.Linear's memoized F.linear path costs
on the host with a CUDA input, against nn.Linear's forward and a bare F.linear forward (call 4 found the
path ~1.7 us a layer dearer than nn.Linear's in a Llama decode step on the GPU host, and no dearer on the
CPU machine). Linear(64, 64) fp32 so each launch is host-bound. Min of 5 timeit runs, ns a call.

    python scripts/sessions/exp_forward_host.py
"""
from __future__ import annotations

import copy
import platform
import sys
import timeit

import torch
import torch.nn.functional as F

import gemmtune
from gemmtune import nn as gnn

sys.path.insert(0, "scripts")
from diag_linear_host import _aten, _Floor  # noqa: E402


def ns(fn, n=20000):
    fn()
    torch.cuda.synchronize()
    best = min(timeit.timeit(fn, number=n) for _ in range(5)) / n * 1e9
    torch.cuda.synchronize()
    return best


def main() -> None:
    print(platform.python_version(), torch.__version__, flush=True)
    dev = "cuda"
    base = torch.nn.Sequential(torch.nn.Linear(64, 64, device=dev))
    pat = copy.deepcopy(base)
    gemmtune.patch(pat, hints={"m": [1]}, progress=False, convert_aten_layers=True, tune_fn=_aten)
    lin, g = base[0], pat[0]
    x = torch.randn(1, 1, 64, device=dev)
    with torch.no_grad():
        g(x)
        fl = copy.deepcopy(g)
        fl.__class__ = _Floor
        paths, ps = g._gemmtune_paths, g._parameters
        w, b = ps["weight"], ps["bias"]
        rows = {
            "nn.Linear call": lambda: lin(x),
            "gemmtune Linear call": lambda: g(x),
            "floor call": lambda: fl(x),
            "nn.Linear.forward": lambda: lin.forward(x),
            "gemmtune forward": lambda: g.forward(x),
            "F.linear(x, w, b)": lambda: F.linear(x, w, b),
            "x.shape": lambda: x.shape,
            "paths.get(x.shape)": lambda: paths.get(x.shape),
            "torch.compiler.is_compiling()": torch.compiler.is_compiling,
            "g._gemmtune_paths": lambda: g._gemmtune_paths,
            "g._parameters": lambda: g._parameters,
            "lin.weight (Module.__getattr__)": lambda: lin.weight,
            "type(g) is gnn.Linear": lambda: type(g) is gnn.Linear,
            "noop": lambda: None,
        }
        for name, fn in rows.items():
            print(f"{name:34s} {ns(fn):9.1f} ns", flush=True)


if __name__ == "__main__":
    main()
