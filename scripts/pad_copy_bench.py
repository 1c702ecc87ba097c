"""Device time of the zero-padded operand copies of pad+ choices (GPU): the Triton kernel
(kernels.pad.pad_copy, zero_pad's default on CUDA while pad.TRITON_PAD is true) against the
torch paths it replaces.

    python3 scripts/pad_copy_bench.py --out pad_copy.json [--dtype bf16]
    python3 scripts/pad_copy_bench.py --smoke --out x.json   # CPU, Triton interpreter, toy shapes

Methods (every output checked bitwise against F.pad's; a mismatch is reported, not raised):
  triton      zero_pad(backend="triton"): one launch, each output element written once
  torch       zero_pad(backend="torch"): the previous default (F.pad below PAD_SPLIT_BYTES, else
              cat / strided-slice copy plus fills; F.pad for a row-major batch gaining rows)
  f_pad       F.pad(...).contiguous(): one fill of the whole copy, then a copy over it
  cat         torch.cat of the source and a zero block into the top rows, then a fill below
  slice_copy  copy into a strided slice of an empty copy, then fills of both margins
Timing: gemmtune's CudaGraphTimer (bench/timing.py), as the tuner times kernels: CUDA graphs of
back-to-back copies over rotating sources that exceed twice the L2 (every copy reads from HBM),
median of 20 replays, with the spread; plus eager wall time per call (host launch cost included,
which device time hides: the Triton launcher costs more host time than one aten op).
(Earlier versions of this script timed 50 back-to-back calls with CUDA events on one source, so small
copies ran from a warm L2: pad.py's table of the torch paths is from that version.)
Every shape and method runs under its own try: a failure is recorded and the run goes on.
Prints a table; --out writes JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

# (batch, rows, cols, padded rows, padded cols); batch 0: a 2-D operand. Each runs row-major and
# transposed. The first three are pad.py's comment table; then the ragged shapes of earlier runs
# (rows only, columns only), a small copy (launch-bound regime) and bmm's batched operands: A gains
# columns only, B rows too (pad.py: the cat into strided top rows lost to F.pad there).
CASES = [(0, 4095, 4095, 4096, 4096), (0, 768, 50257, 768, 50264), (0, 1025, 4097, 1032, 4104),
         (0, 333, 1025, 333, 1032), (0, 2049, 1531, 2056, 1536),
         (0, 4095, 4095, 4095, 4096), (0, 4095, 4096, 4096, 4096), (0, 4096, 4095, 4096, 4096),
         (0, 64, 4095, 64, 4096),
         (16, 2047, 2047, 2047, 2048), (16, 2047, 2047, 2048, 2048), (64, 1023, 127, 1024, 128)]
SMOKE = [(0, 7, 13, 8, 16), (0, 33, 70, 40, 72), (3, 7, 13, 8, 16)]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
METHODS = ("triton", "torch", "f_pad", "cat", "slice_copy")


def slice_copy(t, rows, cols):
    *batch, r, c = t.shape
    out = t.new_empty((*batch, rows, cols))
    out[..., :r, :c].copy_(t)
    out[..., :r, c:].zero_()
    out[..., r:, :].zero_()
    return out


def cat_copy(t, rows, cols):
    *batch, r, c = t.shape
    out = t.new_empty((*batch, rows, cols))
    torch.cat([t, t.new_zeros((*batch, r, cols - c))], dim=-1, out=out[..., :r, :])
    out[..., r:, :].zero_()
    return out


def method_fns():
    from gemmtune.kernels.pad import zero_pad

    f_pad = torch.nn.functional.pad
    return {
        "triton": lambda t, rp, cp: zero_pad(t, rp, cp, backend="triton"),
        "torch": lambda t, rp, cp: zero_pad(t, rp, cp, backend="torch"),
        "f_pad": lambda t, rp, cp: f_pad(t, (0, cp - t.shape[-1], 0, rp - t.shape[-2])).contiguous(),
        "cat": cat_copy,
        "slice_copy": slice_copy,
    }


def source(batch, r, c, transposed, dtype, device):
    lead = (batch,) if batch else ()
    if transposed:
        return torch.randn(*lead, c, r, device=device).to(dtype).transpose(-1, -2)
    return torch.randn(*lead, r, c, device=device).to(dtype)


def bits(t):
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def run_case(case, transposed, dtype, device, timer_for, fns, methods):
    from gemmtune.bench.timing import sets_for

    batch, r, c, rp, cp = case
    lead = f"{batch}x" if batch else ""
    row = {"shape": f"{lead}{r}x{c}->{lead}{rp}x{cp}", "batch": batch, "rows": r, "cols": c,
           "rows_pad": rp, "cols_pad": cp, "layout": "transposed" if transposed else "row-major",
           "dtype": str(dtype).removeprefix("torch."), "methods": {}}
    try:
        esize = torch.empty((), dtype=dtype).element_size()
        n = max(batch, 1)
        row["bytes_in"], row["bytes_out"] = n * r * c * esize, n * rp * cp * esize
        l2 = torch.cuda.get_device_properties(device).L2_cache_size if device == "cuda" else 0
        n_sets = sets_for(row["bytes_in"] + row["bytes_out"], l2) if device == "cuda" else 1
        srcs = [source(batch, r, c, transposed, dtype, device) for _ in range(n_sets)]
        ref = bits(torch.nn.functional.pad(srcs[0], (0, cp - c, 0, rp - r)))
        row["sets"] = n_sets
    except Exception as e:  # noqa: BLE001 - reported per shape
        row["error"] = f"{type(e).__name__}: {e}"
        return row
    for name in methods:
        fn = fns[name]
        try:
            ok = torch.equal(bits(fn(srcs[0], rp, cp)), ref)
            t = timer_for().measure(lambda i: fn(srcs[i], rp, cp), n_sets)
            us = t.device_ms * 1e3
            row["methods"][name] = {"device_us": us, "eager_us": t.eager_ms * 1e3, "spread": t.spread,
                                    "ok": ok, "gbps": (row["bytes_in"] + row["bytes_out"]) / us / 1e3,
                                    "representative": t.representative}
        except Exception as e:  # noqa: BLE001 - reported per method
            row["methods"][name] = {"error": f"{type(e).__name__}: {e}",
                                    "trace": traceback.format_exc(limit=3)[-1500:]}
        if device == "cuda":
            torch.cuda.synchronize()
    return row


def table(rows, methods) -> str:
    head = f"{'shape':<28} {'layout':<10} {'MB':>7} " + " ".join(f"{m + ' us':>13}" for m in methods) + \
        f" {'triton GB/s':>11} {'best torch/triton':>17}"
    lines = [head]
    for row in rows:
        mb = f"{(row.get('bytes_in', 0) + row.get('bytes_out', 0)) / 1e6:7.1f}"
        if "error" in row:
            lines.append(f"{row['shape']:<28} {row['layout']:<10} {mb} ERROR {row['error']}")
            continue
        ms = row["methods"]

        def cell(m):
            x = ms.get(m, {})
            if "error" in x:
                return f"{'error':>13}"
            return f"{x['device_us']:12.1f}{'' if x['ok'] else '!'}".rjust(13)
        tri = ms.get("triton", {})
        torch_best = min((ms[m]["device_us"] for m in methods if m != "triton" and "device_us" in ms.get(m, {})),
                         default=math.nan)
        ratio = torch_best / tri["device_us"] if "device_us" in tri else math.nan
        gbps = tri.get("gbps", math.nan)
        lines.append(f"{row['shape']:<28} {row['layout']:<10} {mb} " + " ".join(cell(m) for m in methods)
                     + f" {gbps:11.0f} {ratio:17.2f}")
    lines.append("(! = output differs from F.pad's, bit for bit)")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS))
    ap.add_argument("--smoke", action="store_true",
                    help="toy shapes; on the CPU (Triton interpreter) when there is no GPU; times not representative")
    ap.add_argument("--replays", type=int, default=20)
    args = ap.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    if bad := [m for m in methods if m not in METHODS]:
        ap.error(f"unknown methods {bad}")
    cuda = torch.cuda.is_available()
    if not cuda:
        if not args.smoke:
            ap.error("needs a CUDA GPU (or --smoke)")
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before gemmtune's kernels are defined
    from gemmtune.bench.timing import CudaGraphTimer, WallTimer

    device = "cuda" if cuda else "cpu"
    dtype = DTYPES[args.dtype]
    fns = method_fns()
    timer_for = (lambda: CudaGraphTimer(replays=args.replays)) if cuda else (lambda: WallTimer(repeats=1, warmup=0))
    rows = []
    for case in SMOKE if args.smoke else CASES:
        for transposed in (False, True):
            row = run_case(case, transposed, dtype, device, timer_for, fns, methods)
            if cuda:
                torch.cuda.empty_cache()  # the case's sources are gone: hand their memory back
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)  # progress, in case a later shape hangs
    print(table(rows, methods), flush=True)
    if args.out:
        doc = {"device": torch.cuda.get_device_name() if cuda else "cpu (Triton interpreter)",
               "date": time.strftime("%Y-%m-%d %H:%M:%S"), "torch": torch.__version__,
               "triton": __import__("triton").__version__, "dtype": args.dtype, "methods": methods,
               "timer": f"CudaGraphTimer(replays={args.replays})" if cuda else "WallTimer (not representative)",
               "rows": rows}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
