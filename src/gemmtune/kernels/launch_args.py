"""Host-side facts the Triton families' launchers pass to their kernels: what a stride or size is
a multiple of (the alignment hints Triton's own specialisation misses), whether offsets need
int64, whether a tile's edges wrap or mask, and the epilogue's pointer slots, strides and
constexprs. Pure functions of the tensors' sizes, strides and pointers; kernels.tiled
re-exports them."""

from __future__ import annotations

import functools
import math

import torch

from ..epilogue import NONE, EpilogueArgs

_INT32_LIMIT = 2**31 - 1


@functools.lru_cache(maxsize=None)
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def on_other_gpu(t: torch.Tensor) -> bool:
    """Whether ``t`` lives on a GPU that is not the current one. Triton launches on the current
    device, so a launch for such a tensor must switch first (a model spread over GPUs calls its
    cuda:1 layers while cuda:0 is current)."""
    return t.is_cuda and t.device.index != torch.cuda.current_device()


def stream_key(device: torch.device) -> int:
    """The stream a launch on ``device`` goes to now, as an int (0 off the GPU): the raw
    ``cudaStream_t`` that Triton's launcher reads too, which costs no Stream object per call.
    Scratch and cached copies are kept per stream with it (splitk.SplitKWorkspace, padcache)."""
    if device.type != "cuda":
        return 0
    index = device.index if device.index is not None else torch.cuda.current_device()
    return int(torch._C._cuda_getCurrentRawStream(index))


def gpu_sm_count(device: torch.device) -> int | None:
    """SMs of the GPU that runs kernels on ``device``'s tensors; None on the CPU (the interpreter).
    Meta tensors (a compile worker's, bench.measure.COMPILE_ON_META) count as the current GPU's
    where there is one: launch constexprs that read the SM count (split-K's one-wave mode, the
    persistent kernel's program count) must compile the kernel the real operands run."""
    if device.type == "meta" and torch.cuda.is_available():
        return _sm_count(torch.cuda.current_device())
    if device.type != "cuda":
        return None
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())


def _pow2_divisor(x: int, cap: int = 16) -> int:
    """Largest power of two <= cap dividing x (x = 0 counts as divisible by anything)."""
    d = 1
    while d < cap and x % (d * 2) == 0:
        d *= 2
    return d


def batch_divisor(stride: int) -> int:
    """What a batch stride is a multiple of (a power of two up to 16; 0, a broadcast operand's,
    counts as 16): the kernel states it on each matrix's offset (BATCHED)."""
    return _pow2_divisor(stride)


def lead_divisor(t: torch.Tensor) -> int:
    """What the leading (non-unit) stride of a 2-D operand is known to be a multiple of.

    Only reported when the data pointer is 16-byte aligned too, else 1: the hint
    is for 16-byte vector loads, which need both.
    """
    if t.data_ptr() % 16:
        return 1
    s0, s1 = t.stride()
    lead = s0 if s1 == 1 else s1 if s0 == 1 else 0
    return _pow2_divisor(lead) if lead else 1


def store_divisor(t: torch.Tensor, cols: int) -> int:
    """What both the row offsets of a row-contiguous 2-D tile access (``t``'s leading stride,
    ``t.stride(-2)``) and the column edge ``cols`` (the N of the access mask) are multiples of:
    a power of two capped at one 16-byte vector in ``t``'s elements (8 bf16/fp16, 4 fp32),
    1 when ``t``'s rows are not unit-stride or its data pointer is not 16-byte aligned.

    A 16-byte store needs its 8 bf16 elements aligned *and* all in or all out of the mask.
    Triton's own specialisation only knows integers that are multiples of 16 elements, so a
    1000-wide bf16 output (2000 B rows) stored 2 bytes at a time: 64 STG.E.U16 per thread at
    1000^3, against 8 STG.E.128 for the same tile with the stride compiled in (offline sm_90a,
    benchmarks/results/2026-11-26-tiled-prologue).

    Also 1 where both are multiples of 16 elements: Triton's specialisation already sees that,
    and stating it again cost code (the kernel rounds N down to the multiple: 1024^3 bf16 went
    from 547 to 571 SASS instructions, first HGMMA 354 -> 366, with the same 8 STG.E.128), and a
    compiled variant that an aligned problem did not need."""
    if t.data_ptr() % 16 or t.stride(-1) != 1:
        return 1
    both = math.gcd(t.stride(-2), cols)
    if both % 16 == 0:
        return 1
    return _pow2_divisor(both, max(1, 16 // t.element_size()))


def needs_int64(*tensors: torch.Tensor) -> bool:
    """True when some element offset of these tensors does not fit in int32."""
    for t in tensors:
        if t.numel() and sum((d - 1) * abs(s) for d, s in zip(t.shape, t.stride())) > _INT32_LIMIT:
            return True
    return False


# Whether ``auto`` masks an odd N along a row-major B (below). Read at each launch, so that
# scripts/parity_inductor.py can time the wrap beside it (--wrap-odd) before it is decided.
MASK_ODD_N = True


def edge_masks(M: int, N: int, block_m: int, block_n: int, edge: str = "auto", *,
               m_contiguous: bool = False, n_contiguous: bool = False) -> tuple[bool, bool]:
    """(MASK_M, MASK_N): whether the kernel masks rows / cols past the edge instead of wrapping.

    ``auto`` masks a dim smaller than its block, where wrapping re-reads the same few rows
    block/M times in every program, unless that dim is its operand's contiguous one
    (``m_contiguous``: A is column-major; ``n_contiguous``: B is row-major): a mask along
    the contiguous dim hides the 16-byte vector width from Triton. The one exception is
    an odd N along a row-major B: there no vector width is left to lose (rows start at
    odd element offsets), while the wrap ``rn % N`` leaves Triton no contiguity at all.

    Measured on an H200 (scripts/bench_edge.py, 2026-11-22, bf16, row-major A and B):
    masking M took a 64x32x128 tile at M = 1, N = K = 4096 from 43.1 to 12.1 us (cuBLAS
    12.8), and was the better or equal choice for every config's best at M = 1..64. At
    1 x 50257 x 768 (odd N), masking both dims beat wrapping on all 4 configs (0.17-0.55x
    the time; 16-row tiles 2x, where at N = 4096 masking gained them 4%). Masking N = 24 on
    a row-major B (aligned rows) lost 3.9x on one config. ``wrap`` and ``mask`` force one
    behaviour on both dims (for experiments: the results are the same). ``auto_wrap_odd`` is
    ``auto`` with that odd N wrapped instead (the kernel then states BLOCK_N contiguity on the
    wrapped columns): triton_static's ``indexed_wrap`` form (configs.STATIC_FORMS).

    >>> edge_masks(300, 20001, 128, 128, n_contiguous=True), edge_masks(300, 20001, 128, 128, "auto_wrap_odd", n_contiguous=True)
    ((False, True), (False, False))
    """
    if edge in ("auto", "auto_wrap_odd"):
        # auto_wrap_odd wraps only an N of at least one block, as Inductor's template states its
        # contiguity only there: in a narrower N the wrap falls inside every block.
        mask_odd = MASK_ODD_N if edge == "auto" else N < block_n
        return (M < block_m and not m_contiguous,
                (N < block_n and not n_contiguous) or (mask_odd and n_contiguous and N % 2 == 1))
    if edge in ("wrap", "mask"):
        return (edge == "mask",) * 2
    raise ValueError(f"edge must be 'auto', 'auto_wrap_odd', 'wrap' or 'mask', not {edge!r}")


# The pointer arguments every kernel with a fused epilogue takes first, in this order, so
# that a prepared launch (Direct) can pass fresh pointers and keep the rest frozen.
N_POINTERS = 9  # a, b, c, ws, locks, bias, residual, scale_a, scale_b


def epilogue_pointers(epi: EpilogueArgs | None, c: torch.Tensor) -> tuple:
    """(bias, residual, scale_a, scale_b) for the kernel's pointer slots; ``c`` stands in for an
    absent one (its alignment is already part of the specialisation, so a plain mm compiles no
    new variant)."""
    if epi is None:
        return c, c, c, c
    return tuple(c if t is None else t for t in (epi.bias, epi.residual, epi.scale_a, epi.scale_b))


def epilogue_strides(epi: EpilogueArgs | None) -> tuple[int, int, int]:
    """(stride_bias, stride_rm, stride_rn); zeros for absent tensors."""
    if epi is None:
        return 0, 0, 0
    sb = 0 if epi.bias is None else epi.bias.stride(0)
    srm, srn = (0, 0) if epi.residual is None else epi.residual.stride()
    return sb, srm, srn


def epilogue_consts(epi: EpilogueArgs | None) -> dict:
    """HAS_BIAS / ACT / HAS_RES (gemmtune.epilogue) and RN_UNIT (the residual's rows are
    contiguous: a constexpr, like the operands' unit strides, so its loads vectorise)."""
    if epi is None:
        return {**NONE.constexprs(), "RN_UNIT": False}
    return {**epi.spec.constexprs(), "RN_UNIT": epi.residual is not None and epi.residual.stride(1) == 1}


def epilogue_tensors(epi: EpilogueArgs | None) -> tuple:
    return () if epi is None else tuple(t for t in (epi.bias, epi.residual) if t is not None)


def layout_key(t: torch.Tensor) -> tuple:
    """What a compiled kernel specialised on about one tensor argument besides its sizes: its
    strides and its 16-byte alignment (Triton specialises pointers on alignment)."""
    return t.stride(), t.data_ptr() % 16


def epilogue_key(epi: EpilogueArgs | None):
    """What a compiled kernel specialised on about an epilogue: which parts, and the
    ``layout_key`` of its tensors."""
    if epi is None:
        return None
    return (epi.spec,) + tuple(None if t is None else layout_key(t)
                               for t in (epi.bias, epi.residual, epi.scale_a, epi.scale_b))


def operands_key(a: torch.Tensor, b: torch.Tensor, epi: EpilogueArgs | None = None) -> tuple:
    """The ``layout_key`` of both operands and the ``epilogue_key``: a prepared launch made for one
    call serves another call of the same problem exactly where this key is the same."""
    return layout_key(a), layout_key(b), epilogue_key(epi)
