"""Zero-padded row-major copies, the operands of ``pad+`` choices (kernels.run_choice; 2-D for mm,
3-D for bmm) and of the per-parameter cache (kernels.padcache)."""

from __future__ import annotations

import math

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


def broadcast_matrix(t: torch.Tensor) -> bool:
    """A 3-D ``t`` that is one matrix broadcast over a batch of more than one (batch stride 0)."""
    return t.dim() == 3 and t.shape[0] > 1 and t.stride(0) == 0


def zero_pad(t: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """A row-major (rows x cols) copy of the 2-D ``t`` with zeros past its edges; of a 3-D ``t``
    (a bmm operand), the same for every matrix: a contiguous (batch, rows, cols) copy, except that
    one matrix broadcast over the batch (batch stride 0) is padded once and expanded again.

    >>> zero_pad(torch.ones(2, 3), 3, 4)
    tensor([[1., 1., 1., 0.],
            [1., 1., 1., 0.],
            [0., 0., 0., 0.]])
    >>> zero_pad(torch.ones(1, 2, 1).expand(3, 2, 1), 2, 2).stride()
    (0, 2, 1)
    """
    if t.dim() not in (2, 3):
        raise ValueError(f"zero_pad pads 2-D or 3-D tensors, not {t.dim()}-D")
    if broadcast_matrix(t):
        return zero_pad(t[0], rows, cols).expand(t.shape[0], rows, cols)
    *batch, r, c = t.shape
    # A row-major batch that gains rows (bmm's B when K is padded) would take the cat into
    # strided top rows: slower than F.pad on the H200 (16x2047x2047 -> 16x2048x2048 bf16: 320 vs
    # 207 us; 64x1023x127 -> 64x1024x128: 42 vs 26 us; benchmarks/results/2026-11-25-h200-pad-bmm).
    strided_cat = math.prod(batch) > 1 and rows > r and t.stride(-1) == 1
    if strided_cat or math.prod(batch) * rows * cols * t.element_size() < PAD_SPLIT_BYTES or (
            t.requires_grad and torch.is_grad_enabled()):
        # (out= writes are not differentiable: a recorded pad stays F.pad)
        return torch.nn.functional.pad(t, (0, cols - c, 0, rows - r)).contiguous()
    out = t.new_empty((*batch, rows, cols))
    # Whole rows: contiguous for one matrix or where no rows are added.
    top = out[..., :r, :]
    if t.stride(-1) != 1:  # a transposed operand: one strided copy, then the zero margin
        top[..., :c].copy_(t)
        if cols > c:
            top[..., c:].zero_()
    elif cols > c:
        torch.cat([t, t.new_zeros((*batch, r, cols - c))], dim=-1, out=top)
    else:
        top.copy_(t)
    if rows > r:
        out[..., r:, :].zero_()
    return out
