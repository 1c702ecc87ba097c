"""Zero-padded row-major copies, the operands of ``pad+`` choices (kernels.run_choice) and of the
per-parameter cache (kernels.padcache)."""

from __future__ import annotations

import torch

# Above this many bytes of padded output, zero_pad writes only the margins instead of filling
# the whole copy first: F.pad (aten constant_pad_nd) fills every element, then copies the
# input over it, 1.5x the bytes of a copy. Below it the extra launch costs more than the fill.
PAD_SPLIT_BYTES = 8 << 20


def zero_pad(t: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """A row-major (rows x cols) copy of the 2-D ``t`` with zeros past its edges.

    >>> zero_pad(torch.ones(2, 3), 3, 4)
    tensor([[1., 1., 1., 0.],
            [1., 1., 1., 0.],
            [0., 0., 0., 0.]])
    """
    r, c = t.shape
    if rows * cols * t.element_size() < PAD_SPLIT_BYTES:
        return torch.nn.functional.pad(t, (0, cols - c, 0, rows - r)).contiguous()
    out = t.new_empty((rows, cols))
    out[:r, :c].copy_(t)
    if cols > c:
        out[:r, c:].zero_()
    if rows > r:
        out[r:].zero_()
    return out
