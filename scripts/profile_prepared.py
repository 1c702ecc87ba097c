"""Where a prepared dispatcher call spends its host time: cProfile over repeated calls of a few
cases of scripts/bench_prepared.py. GPU only.

    python scripts/profile_prepared.py [--calls 300] [--out DIR]

Prints, per case, the wall µs per call without the profiler and the top functions by own time
(``tottime``) under it, and writes profile_prepared.txt under ``--out`` (default $OUT or .).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_prepared import CASES  # noqa: E402

PROFILED = ("unaligned_333", "unaligned_777", "cube_1000", "tiny_mn_32", "unaligned_333 +bias")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("profile_prepared: needs a CUDA GPU", file=sys.stderr)
        return 2
    from gemmtune.bench.timing import wall_ms_per_call
    from gemmtune.configs import Choice
    from gemmtune.dispatch import compile_mm

    report = io.StringIO()
    for label, m, n, k, dtype, cid, b_kind, with_bias in CASES:
        if label not in PROFILED:
            continue
        dt = getattr(torch, dtype)
        choice = Choice.parse(cid)
        a = torch.randn(m, k, device="cuda", dtype=dt)
        b = torch.randn(k, n, device="cuda", dtype=dt)
        bias = torch.randn(n, device="cuda", dtype=dt) if with_bias else None
        disp = compile_mm(m=m, n=n, k=k, dtype=dtype, tune_fn=lambda ps, **kw: {p: choice for p in ps},
                          verify=False, progress=False)

        def call():
            return disp(a, b) if bias is None else disp(a, b, bias=bias)
        wall = wall_ms_per_call(lambda i: call(), args.calls, warmup=5) * 1e3
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.calls):
            call()
        torch.cuda.synchronize()
        prof.disable()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(22)
        report.write(f"\n===== {label} `{cid}`: {wall:.1f} us per call without the profiler\n")
        report.write(s.getvalue())
    text = report.getvalue()
    print(text)
    with open(os.path.join(args.out, "profile_prepared.txt"), "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
