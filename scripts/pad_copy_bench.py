"""F.pad against kernels.zero_pad on the operands pad+ copies (GPU only): device time of each
copy, CUDA events over 50 back-to-back calls, interleaved 3 rounds. Prints one JSON line a case.

    python3 scripts/pad_copy_bench.py
"""
import json

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


CASES = [(4095, 4095, 4095, 4096), (333, 1025, 333, 1032), (1025, 4097, 1032, 4104),
         (768, 50257, 768, 50264), (2049, 1531, 2056, 1536)]
for r, c, rp, cp in CASES:
    t = torch.randn(r, c, device="cuda", dtype=torch.bfloat16)
    fp, zp = [], []
    for _ in range(3):
        fp.append(timed(lambda: torch.nn.functional.pad(t, (0, cp - c, 0, rp - r))))
        zp.append(timed(lambda: zero_pad(t, rp, cp)))
    assert torch.equal(zero_pad(t, rp, cp), torch.nn.functional.pad(t, (0, cp - c, 0, rp - r)))
    print(json.dumps({"shape": f"{r}x{c}->{rp}x{cp}", "bytes_out": rp * cp * 2, "f_pad_us": min(fp),
                      "zero_pad_us": min(zp)}), flush=True)
