"""F.pad against kernels.zero_pad on the operands pad+ copies (GPU only): device time of each
copy, CUDA events over 50 back-to-back calls, interleaved 3 rounds, best round. Prints one JSON
line a case (2-D operands, then bmm's batched ones); 'slice_copy' is the earlier zero_pad (copy into
a strided slice of an empty copy).

    python3 scripts/pad_copy_bench.py
"""
import json
import math

import torch

from gemmtune.kernels.pad import zero_pad


def timed(fn, reps=50):
    fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps * 1e3  # us


def slice_copy(t, rows, cols):
    *batch, r, c = t.shape
    out = t.new_empty((*batch, rows, cols))
    out[..., :r, :c].copy_(t)
    out[..., :r, c:].zero_()
    out[..., r:, :].zero_()
    return out


def case(t, rp, cp, trans):
    *batch, r, c = t.shape
    fp, zp, sp = [], [], []
    for _ in range(3):
        fp.append(timed(lambda: torch.nn.functional.pad(t, (0, cp - c, 0, rp - r))))
        zp.append(timed(lambda: zero_pad(t, rp, cp)))
        sp.append(timed(lambda: slice_copy(t, rp, cp)))
    assert torch.equal(zero_pad(t, rp, cp), torch.nn.functional.pad(t, (0, cp - c, 0, rp - r)))
    lead = "".join(f"{b}x" for b in batch)
    print(json.dumps({"shape": f"{lead}{r}x{c}->{lead}{rp}x{cp}", "transposed": trans,
                      "bytes_out": math.prod(batch) * rp * cp * 2,
                      "f_pad_us": min(fp), "zero_pad_us": min(zp), "slice_copy_us": min(sp)}), flush=True)


CASES = [(4095, 4095, 4095, 4096), (333, 1025, 333, 1032), (1025, 4097, 1032, 4104),
         (768, 50257, 768, 50264), (2049, 1531, 2056, 1536),
         (4095, 4095, 4096, 4096), (4096, 4095, 4096, 4096)]
# bmm operands (batch, rows, cols), padded matrix by matrix: A gains columns only; B gains rows
# too, so zero_pad's cat writes the strided top rows of each matrix.
BATCHED = [(16, 2047, 2047, 2047, 2048), (16, 2047, 2047, 2048, 2048), (64, 1023, 127, 1024, 128)]
for r, c, rp, cp in CASES:
    for trans in (False, True):
        t = torch.randn(r, c, device="cuda", dtype=torch.bfloat16) if not trans else \
            torch.randn(c, r, device="cuda", dtype=torch.bfloat16).t()
        case(t, rp, cp, trans)
for bt, r, c, rp, cp in BATCHED:
    for trans in (False, True):
        t = torch.randn(bt, r, c, device="cuda", dtype=torch.bfloat16) if not trans else \
            torch.randn(bt, c, r, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        case(t, rp, cp, trans)
