"""Nsight Compute target for #15's o_m8 class (8 x 4096 x 4096 bf16, a Linear's weight): the best skinny
strip, cuBLAS's mm, and exp_read_ladder's streaming read of the same 33.5 MB, two launches each after a
warm-up, so that ncu (cache control on: L2 flushed before each) sees what each does with its DRAM time.

    ncu --clock-control none -k regex:'skinny|stream_sum|gemv|gemm|Kernel' python3 scripts/sessions/ncu_decode_o.py
"""
import torch
import triton

from exp_read_ladder import _stream_sum
from gemmtune.configs import Choice
from gemmtune.kernels import skinny
from gemmtune.kernels.splitk import SplitKWorkspace

n = k = 4096
w = torch.randn(n, k, dtype=torch.bfloat16, device="cuda")
x = torch.randn(8, k, dtype=torch.bfloat16, device="cuda")
out = torch.empty(8, n, dtype=torch.bfloat16, device="cuda")
ws = SplitKWorkspace()
cfg = Choice.parse("skinny:BM16-BN64-BK256-SK1-S5-W4-dot-det").config
flat = w.view(-1)
sms = torch.cuda.get_device_properties(0).multi_processor_count
per = triton.cdiv(triton.cdiv(flat.numel(), 4 * sms), 8192) * 8192
grid = triton.cdiv(flat.numel(), per)
part = torch.empty(grid, dtype=torch.float32, device="cuda")
for _ in range(2):
    skinny.run(x, w.t(), out, cfg, workspace=ws)
    torch.mm(x, w.t(), out=out)
    _stream_sum[(grid,)](flat, part, flat.numel(), per, BLOCK=8192, num_warps=8)
torch.cuda.synchronize()
print("done")
