"""Zero-padded row-major copies, the operands of ``pad+`` choices (kernels.run_choice) and of the
per-parameter cache (kernels.padcache)."""

from __future__ import annotations

import torch

# Above this many bytes of padded output, zero_pad writes each output element once instead
# of F.pad's (aten constant_pad_nd) fill of the whole copy followed by a copy over it (1.5x the
# bytes). H200, 2026-11-24, bf16, device time (scripts/pad_copy_bench.py):
#   row-major 4095^2 -> 4096^2: F.pad 55 us, cat into the top rows 32, copy into a strided slice 47
#   row-major 768x50257 -> 768x50264: F.pad 119, cat 73, slice 95
#   transposed 4095^2: F.pad 123, cat 146, slice 116; transposed 768x50257: 297, 325, 273
#   row-major 1025x4097 -> 1032x4104 (8.5 MB): F.pad 16, cat 30, slice 33
# so: cat for a row-major operand, the strided-slice copy for a transposed one, and one F.pad
# launch below 16 MiB, where the extra launches cost more than the fill saves.
PAD_SPLIT_BYTES = 16 << 20


def zero_pad(t: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """A row-major (rows x cols) copy of the 2-D ``t`` with zeros past its edges.

    >>> zero_pad(torch.ones(2, 3), 3, 4)
    tensor([[1., 1., 1., 0.],
            [1., 1., 1., 0.],
            [0., 0., 0., 0.]])
    """
    r, c = t.shape
    if rows * cols * t.element_size() < PAD_SPLIT_BYTES or (t.requires_grad and torch.is_grad_enabled()):
        # (out= writes are not differentiable: a recorded pad stays F.pad)
        return torch.nn.functional.pad(t, (0, cols - c, 0, rows - r)).contiguous()
    out = t.new_empty((rows, cols))
    top = out[:r]  # whole rows: contiguous
    if t.stride(-1) != 1:  # a transposed operand: one strided copy, then the zero margin
        top[:, :c].copy_(t)
        if cols > c:
            top[:, c:].zero_()
    elif cols > c:
        torch.cat([t, t.new_zeros((r, cols - c))], dim=1, out=top)
    else:
        top.copy_(t)
    if rows > r:
        out[r:].zero_()
    return out
