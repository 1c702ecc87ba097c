"""Zero-padded row-major copies, the operands of ``pad+`` choices (kernels.run_choice) and of the
per-parameter cache (kernels.padcache)."""

from __future__ import annotations

import torch

# Above this many bytes of padded output, zero_pad writes every output element once (a
# concatenation with a thin zero block, then a contiguous zero tail) instead of F.pad's fill of
# the whole copy followed by a copy over it (aten constant_pad_nd: 1.5x the bytes). H200,
# 2026-11-24, bf16: F.pad 55 us on 4095^2 -> 4095x4096 and 119 us on 768x50257 -> 768x50264;
# copying into a strided slice of an empty copy instead took 46 and 94 us, but 44 us against
# 20 on 1025x4097 (the strided-destination copy kernel). Below the threshold one F.pad launch
# is cheapest.
PAD_SPLIT_BYTES = 8 << 20


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
    top = out[:r]  # whole rows: contiguous, so cat and copy write it with contiguous kernels
    if cols > c:
        torch.cat([t, t.new_zeros((r, cols - c))], dim=1, out=top)
    else:
        top.copy_(t)
    if rows > r:
        out[r:].zero_()
    return out
