"""What it costs just to read a memory-bound shape's inputs: the bench's reference for the time a
bytes-only floor leaves out.

A shape's floor (``report.roofline_ms``) is its bytes over the read ceiling, and that ceiling is
measured on 1 GiB. A kernel that reads tens of MB also pays for its launch, its first bytes' latency
and its tail. On an H200 in the bench's own timer (session 60, benchmarks/results/2026-12-03-h200-s60,
call 1), a Triton kernel that only reads ran at:

- 34 MB: 9.7 µs, 79% of the floor;
- 50 MB: 85%;
- 117 MB: 95%;
- 235 MB: 54.0 µs, 99.5%.

A fit over 16-235 MB puts the fixed cost at about 2.5 µs a launch. So "% of the floor" alone cannot
say how far a decode GEMM is from what any kernel reaches.

For each memory-bound shape that writes little, the bench also times ``stream_read``. The limit is
``WRITE_SHARE`` of its bytes: a GEMV-like product, a decode step's. Anything that writes more (C
large against A and B) is bound by its writes too, which a read does not show.

``stream_read`` is a Triton kernel that reads a buffer of the shape's read bytes (``read_bytes``: A,
B and a bias, as the floor counts them):
- 16-bit elements, converted to fp32 and summed;
- ``PROGRAMS_PER_SM`` programs an SM, each with a contiguous slice, in ``BLOCK``-element steps;
- it writes one float a program.

It is timed in the same interleaved rounds as the shape's methods, on its own rotating buffers
(as many as the shape has input sets, so every read comes from HBM). The record's ``read`` entry
holds its kernel time, and the report sets it beside the floor.

Its grid was the best of session 60's 8 (1-8 programs an SM, 2048- or 8192-element blocks) at every
size from 8.4 to 235 MB. At 4.2 MB 4 programs an SM ran 3% faster.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..kernels.launch_args import gpu_sm_count

PROGRAMS_PER_SM = 8
BLOCK = 2048
NUM_WARPS = 8
WRITE_SHARE = 0.05   # the most of a shape's bytes that its output may be for the read to be its reference
ELEMENT = 2          # bytes an element: the buffers are 16-bit


@triton.jit
def _stream_sum(x_ptr, out_ptr, n, per_prog, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    start = pid * per_prog
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(start, start + per_prog, BLOCK):
        idx = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + idx, mask=idx < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc, axis=0))


def wants_read(bound: str, min_bytes: int, write_bytes: int) -> bool:
    """Whether a shape gets the read reference: memory-bound, its output at most WRITE_SHARE of
    its bytes.

    >>> wants_read("memory", 50_000_000, 12_288), wants_read("memory", 1000, 400), wants_read("compute", 10**9, 10)
    (True, False, False)
    """
    return bound == "memory" and min_bytes > 0 and write_bytes <= WRITE_SHARE * min_bytes


INTERPRETER_SMS = 4  # the grid's SM count off the GPU (the CPU interpreter), where it only has to be right


def sm_count(device: str) -> int:
    """The SMs of the GPU that runs ``device``'s tensors (launch_args.gpu_sm_count), or
    INTERPRETER_SMS off the GPU."""
    return gpu_sm_count(torch.device(device)) or INTERPRETER_SMS


def grid_for(numel: int, sm_count: int) -> tuple[int, int]:
    """(programs, elements a program): PROGRAMS_PER_SM programs an SM, each slice a whole number
    of blocks, and no program without work.

    >>> grid_for(16 * 2048 * 132 * 8, 132)
    (1056, 32768)
    >>> grid_for(100, 132)  # smaller than one block a program: one program
    (1, 2048)
    """
    per = triton.cdiv(triton.cdiv(numel, max(1, sm_count) * PROGRAMS_PER_SM), BLOCK) * BLOCK
    return triton.cdiv(numel, per), per


class StreamRead:
    """Rotating 16-bit buffers of ``nbytes`` each (``n_sets`` of them) and ``launch(i)``, which reads
    buffer ``i``. The buffers are filled with random values, as the bench's operands are."""

    def __init__(self, nbytes: int, n_sets: int, device: str, sm_count: int, seed: int = 0):
        self.numel = max(1, nbytes // ELEMENT)
        g = torch.Generator(device=device).manual_seed(seed)
        first = torch.empty(self.numel, dtype=torch.float16, device=device).normal_(generator=g)
        # One draw copied to every set: each set is still its own memory, which is what rotating needs.
        self.bufs = [first] + [first.clone() for _ in range(max(1, n_sets) - 1)]
        self.programs, self.per = grid_for(self.numel, sm_count)
        self.out = torch.empty(self.programs, dtype=torch.float32, device=device)

    def launch(self, i: int) -> None:
        _stream_sum[(self.programs,)](self.bufs[i], self.out, self.numel, self.per, BLOCK=BLOCK, num_warps=NUM_WARPS)

    def total(self) -> float:
        """The sum the last launch computed (its check: every element was read once)."""
        return float(self.out.double().sum())

    def close(self) -> None:
        self.bufs.clear()
