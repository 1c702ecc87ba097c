"""Zero-padded row-major copies, the operands of ``pad+`` choices (kernels.run_choice; 2-D for mm,
3-D for bmm) and of the per-parameter cache (kernels.padcache).

Two ways to make the copy (``zero_pad``'s ``backend``):
* ``"triton"``: ``pad_copy``, one Triton launch that writes every output element once (data
  inside the source, zero outside) and reads the source once through its strides;
* ``"torch"``: F.pad, or aten copies into the data region plus fills of the margins (below).
The default (``backend=None``) is the policy in ``_backend``: Triton for CUDA tensors while
``TRITON_PAD`` is true, torch everywhere else.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .launch_args import on_other_gpu

# The torch path: above this many bytes of padded output, zero_pad writes each output element
# once instead of F.pad's (aten constant_pad_nd) fill of the whole copy followed by a copy over it
# (1.5x the bytes). H200, 2026-11-24, bf16, device time (scripts/pad_copy_bench.py, then CUDA
# events over 50 back-to-back calls):
#   row-major 4095^2 -> 4096^2: F.pad 55 us, cat into the top rows 32, copy into a strided slice 47
#   row-major 768x50257 -> 768x50264: F.pad 119, cat 73, slice 95
#   transposed 4095^2: F.pad 123, cat 146, slice 116; transposed 768x50257: 297, 325, 273
#   row-major 1025x4097 -> 1032x4104 (8.5 MB): F.pad 16, cat 30, slice 33
# so: cat for a row-major operand, the strided-slice copy for a transposed one, and one F.pad
# launch below 16 MiB, where the extra launches cost more than the fill saves.
PAD_SPLIT_BYTES = 16 << 20

# Policy: zero_pad(backend=None) copies CUDA tensors with the Triton kernel (pad_copy) while this
# is true. H100, 2026-11-25 (scripts/pad_copy_bench.py, CUDA graphs, L2-cold; bf16;
# benchmarks/results/2026-11-25-h100-pad-copy): device time 1.06-1.9x below the best torch path
# for row-major sources and 2.3-5.5x for transposed ones (4095^2 transposed: 27.5 vs 132 us;
# 16x2047x2047 -> 16x2048x2048: 95 vs 180 us), at 2.2-3.0 TB/s. But its host time per eager call
# was 50-75 us against 23-40 us for one aten op, so until session 24 a row-major copy under
# TRITON_PAD_MIN_BYTES (4 MiB then; the kernel saves ~1 us of device time on one copy: 333x1025 2.7
# vs 3.7 us) stayed on torch. Since session 24 a dispatcher relaunches the compiled copy
# (prepare_copies) for a few us of host time, always on Triton, and a pad+ choice whose two copies
# were both small paid two F.pad calls (a fill and a copy each) where one pad_pair launch serves:
# on 1021x2053x509 bf16 its pad+persistent_tma took 23.7 us through torch copies, 15.1 through
# the prepared Triton pair (H100, benchmarks/results/2026-11-27-h100-s24, bench_prepared). The
# tuner times the generic path, so it now copies as a dispatcher does: the threshold is 0.
TRITON_PAD = True
TRITON_PAD_MIN_BYTES = 0

# The kernel copies bits, so it runs on a same-size integer view: any of these dtypes works,
# bf16 and fp8 included (also in the interpreter, where bf16 arithmetic is wrong but no
# arithmetic is done). Others (complex, ...) stay on the torch path.
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
TRITON_DTYPES = frozenset(
    [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool,
     torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]
    + [getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
       if hasattr(torch, n)])

# Offsets in int32 while every one fits (tests lower it to run the int64 path).
_INDEX32_LIMIT = 2**31 - 1
# Bytes of output per program, the aim of _tiles (8-16 KB: enough bytes in flight per SM from
# a few resident programs, few enough registers to keep them resident; not tuned).
TILE_BYTES = 16 << 10


@triton.jit
def _pad_tile(src, dst, pid, rows_src, cols_src, rows, cols_vecs, col_tiles, tiles,
              s_b, s_r, s_c,
              BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, VEC: tl.constexpr,
              SRC: tl.constexpr, INDEX_64: tl.constexpr):
    """Tile ``pid`` (BLOCK_R x BLOCK_C) of the contiguous (batch, rows, cols) output.
    SRC: 0 the source's columns are contiguous (s_c == 1), 1 its rows are (s_r == 1,
    transposed), 2 neither."""
    # One grid axis: CUDA's axes 1 and 2 stop at 65535 programs, too few for the row tiles of
    # a tall operand or a large batch. Column tiles vary fastest.
    b = pid // tiles
    pr = (pid % tiles) // col_tiles
    pc = pid % col_tiles
    if INDEX_64:
        b = b.to(tl.int64)
        pr = pr.to(tl.int64)
        pc = pc.to(tl.int64)
    # cols as a multiple of VEC (16 bytes where cols allows) that the compiler can see: it then
    # knows each output row starts 16-byte aligned and that the mask c < cols is constant over
    # VEC columns, and stores 16-byte vectors even where cols is not a multiple of 16 elements
    # (sm_90 PTX of a bf16 1032x4104 copy: st.global.v4.b32).
    cols = cols_vecs * VEC
    r = pr * BLOCK_R + tl.arange(0, BLOCK_R)
    c = pc * BLOCK_C + tl.arange(0, BLOCK_C)
    src = src + b * s_b
    if SRC == 1:
        # A transposed source is contiguous along the output's rows: load the tile as
        # (BLOCK_C, BLOCK_R), rows innermost, so that a warp reads consecutive addresses, then
        # transpose it in registers (the compiler exchanges it through shared memory) so the
        # stores below run along the output rows. Loading (BLOCK_R, BLOCK_C) directly would
        # leave the load's layout to the compiler's coalescing heuristics.
        x = tl.load(src + c[:, None] * s_c + r[None, :],
                    mask=(c[:, None] < cols_src) & (r[None, :] < rows_src), other=0)
        x = tl.trans(x)
    else:
        if SRC == 0:
            off = r[:, None] * s_r + c[None, :]
        else:  # no unit stride: uncoalesced either way, the rare case
            off = r[:, None] * s_r + c[None, :] * s_c
        x = tl.load(src + off, mask=(r[:, None] < rows_src) & (c[None, :] < cols_src), other=0)
    out = b * rows * cols + r[:, None] * cols + c[None, :]
    # Each row's run of BLOCK_C is contiguous and starts at a multiple of VEC.
    out = tl.max_contiguous(tl.multiple_of(out, [1, VEC]), [1, BLOCK_C])
    tl.store(dst + out, x, mask=(r[:, None] < rows) & (c[None, :] < cols))


@triton.jit
def _pad_copy_kernel(src, dst, rows_src, cols_src, rows, cols_vecs, col_tiles, tiles,
                     s_b, s_r, s_c,
                     BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, VEC: tl.constexpr,
                     SRC: tl.constexpr, INDEX_64: tl.constexpr):
    """One tile of one operand's padded copy per program (``_pad_tile``)."""
    _pad_tile(src, dst, tl.program_id(0), rows_src, cols_src, rows, cols_vecs, col_tiles, tiles,
              s_b, s_r, s_c, BLOCK_R, BLOCK_C, VEC, SRC, INDEX_64)


@triton.jit
def _pad_pair_kernel(src_a, dst_a, rows_src_a, cols_src_a, rows_a, cols_vecs_a, col_tiles_a, tiles_a,
                     s_b_a, s_r_a, s_c_a, programs_a,
                     src_b, dst_b, rows_src_b, cols_src_b, rows_b, cols_vecs_b, col_tiles_b, tiles_b,
                     s_b_b, s_r_b, s_c_b,
                     BLOCK_R_A: tl.constexpr, BLOCK_C_A: tl.constexpr, VEC_A: tl.constexpr, SRC_A: tl.constexpr,
                     BLOCK_R_B: tl.constexpr, BLOCK_C_B: tl.constexpr, VEC_B: tl.constexpr, SRC_B: tl.constexpr,
                     INDEX_64: tl.constexpr):
    """Two operands' padded copies in one launch: programs below ``programs_a`` copy A's tiles,
    the rest B's (``pad_pair``)."""
    pid = tl.program_id(0)
    if pid < programs_a:
        _pad_tile(src_a, dst_a, pid, rows_src_a, cols_src_a, rows_a, cols_vecs_a, col_tiles_a, tiles_a,
                  s_b_a, s_r_a, s_c_a, BLOCK_R_A, BLOCK_C_A, VEC_A, SRC_A, INDEX_64)
    else:
        _pad_tile(src_b, dst_b, pid - programs_a, rows_src_b, cols_src_b, rows_b, cols_vecs_b, col_tiles_b,
                  tiles_b, s_b_b, s_r_b, s_c_b, BLOCK_R_B, BLOCK_C_B, VEC_B, SRC_B, INDEX_64)


_INTERPRETED = type(_pad_copy_kernel).__name__ == "InterpretedFunction"


def _tiles(rows: int, cols: int, elsize: int, transposed: bool) -> tuple[int, int, int]:
    """(BLOCK_R, BLOCK_C, num_warps) of pad_copy: about TILE_BYTES of output per program.

    Not tuned on a GPU (scripts/pad_copy_bench.py times the result). A row-major source gets
    wide tiles (1 KB of a row: long contiguous runs on both sides); a transposed one square
    tiles (runs of >= 128 bytes along the source's columns and the output's rows both). Both
    shrink to a small matrix so that lanes are not spent on masked-off elements.

    >>> _tiles(4095, 4096, 2, False), _tiles(4095, 4096, 2, True), _tiles(3, 8, 4, False)
    ((16, 512, 8), (64, 64, 4), (4, 8, 4))
    """
    if transposed:
        side = 128 if elsize == 1 else 64 if elsize <= 4 else 32
        block_r, block_c = min(side, triton.next_power_of_2(rows)), min(side, triton.next_power_of_2(cols))
    else:
        block_c = min(triton.next_power_of_2(cols), 1024 // elsize)
        block_r = min(triton.next_power_of_2(rows), max(1, TILE_BYTES // elsize // block_c))
    return block_r, block_c, 8 if block_r * block_c * elsize >= TILE_BYTES else 4


def _pow2_divisor(x: int, cap: int) -> int:
    """Largest power of two <= cap dividing x (x > 0)."""
    d = 1
    while d < cap and x % (2 * d) == 0:
        d *= 2
    return d


def pad_copy(t: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """A contiguous (rows x cols) copy of the 2-D ``t`` (a (batch, rows, cols) one of a 3-D ``t``)
    with zeros past its edges, in one Triton launch: every output element is written once, the
    source is read once through its strides (transposed, offset and batch-stride-0 views
    included; a batch broadcast this way is copied to every matrix: zero_pad pads it once).
    Needs a CUDA tensor, or TRITON_INTERPRET=1; no autograd. A ``rows`` or ``cols`` below the
    source's crops, as F.pad's negative padding does.
    """
    if t.dim() not in (2, 3):
        raise ValueError(f"pad_copy pads 2-D or 3-D tensors, not {t.dim()}-D")
    if t.dtype not in TRITON_DTYPES:
        raise TypeError(f"pad_copy does not copy {t.dtype}")
    if on_other_gpu(t):  # checked first so that the usual call pays no context switch
        with torch.cuda.device(t.device):
            return pad_copy(t, rows, cols)
    out = t.new_empty((*t.shape[:-2], rows, cols))
    if out.numel() == 0:
        return out
    programs, args, consts, warps, reach = _launch(t, out)
    _pad_copy_kernel[(programs,)](*args, **consts, INDEX_64=reach > _INDEX32_LIMIT, num_warps=warps)
    return out


def _launch(t: torch.Tensor, out: torch.Tensor) -> tuple[int, tuple, dict, int, int]:
    """(programs, runtime args, constexprs, num_warps, largest offset formed) of the padded copy
    of ``t`` into ``out`` (non-empty, contiguous, 2-D or 3-D like ``t``)."""
    src = t if t.dim() == 3 else t.unsqueeze(0)
    rows, cols = out.shape[-2:]
    batch, r, c = src.shape
    sb, sr, sc = src.stride()
    layout = 0 if sc == 1 else 1 if sr == 1 else 2
    elsize = t.element_size()
    block_r, block_c, warps = _tiles(rows, cols, elsize, layout == 1)
    row_tiles, col_tiles = triton.cdiv(rows, block_r), triton.cdiv(cols, block_c)
    vec = _pow2_divisor(cols, max(1, 16 // elsize))
    # Offsets the kernel forms: the source's over the whole tile grid (masked lanes included,
    # so that no address computation wraps), and the output's.
    reach = max((batch - 1) * sb + row_tiles * block_r * sr + col_tiles * block_c * sc,
                batch * rows * cols + row_tiles * block_r * cols + col_tiles * block_c)
    bits = _BITS[elsize]
    args = (src.view(bits), out.view(bits), r, c, rows, cols // vec, col_tiles, row_tiles * col_tiles, sb, sr, sc)
    consts = {"BLOCK_R": block_r, "BLOCK_C": block_c, "VEC": vec, "SRC": layout}
    return batch * row_tiles * col_tiles, args, consts, warps, reach


def pad_pair(a: torch.Tensor, a_rows: int, a_cols: int, b: torch.Tensor, b_rows: int, b_cols: int
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(pad_copy(a, a_rows, a_cols), pad_copy(b, b_rows, b_cols))`` of two operands on one
    device, both 2-D or both 3-D (bmm: every matrix of each), in one Triton launch: a pad+ choice
    on a problem where both operands are odd pays one copy kernel instead of two (and one launch
    gap in a CUDA graph; H100, 333x4097x1025 bf16: A's copy alone took 3.7 us beside B's 5.6 us,
    and the whole pad+persistent_tma choice went from 28.2 to 21.7 us,
    benchmarks/results/2026-11-27-h100-s20)."""
    if a.dim() != b.dim() or a.dim() not in (2, 3):
        raise ValueError(f"pad_pair pads two 2-D or two 3-D operands, not {a.dim()}-D and {b.dim()}-D")
    if a.device != b.device:
        raise ValueError(f"pad_pair: the operands are on {a.device} and {b.device}")
    for t in (a, b):
        if t.dtype not in TRITON_DTYPES:
            raise TypeError(f"pad_pair does not copy {t.dtype}")
    if on_other_gpu(a):
        with torch.cuda.device(a.device):
            return pad_pair(a, a_rows, a_cols, b, b_rows, b_cols)
    ap, bp = a.new_empty((*a.shape[:-2], a_rows, a_cols)), b.new_empty((*b.shape[:-2], b_rows, b_cols))
    if ap.numel() == 0 or bp.numel() == 0:  # nothing to fuse: each on its own
        return pad_copy(a, a_rows, a_cols), pad_copy(b, b_rows, b_cols)
    n_a, args_a, ca, warps_a, reach_a = _launch(a, ap)
    n_b, args_b, cb, warps_b, reach_b = _launch(b, bp)
    consts = {**{f"{k}_A": v for k, v in ca.items()}, **{f"{k}_B": v for k, v in cb.items()}}
    _pad_pair_kernel[(n_a + n_b,)](*args_a, n_a, *args_b, **consts,
                                   INDEX_64=max(reach_a, reach_b) > _INDEX32_LIMIT,
                                   num_warps=max(warps_a, warps_b))
    return ap, bp


class PreparedCopies:
    """``copies(*sources)``: padded copies (fresh, contiguous) of one or two 2-D operands, by
    relaunching the compiled copy kernel that ``prepare_copies`` ran once. Valid only while each
    source keeps the strides and 16-byte alignment of the one it was prepared on (sizes, strides
    and tiles are frozen in the launch): the caller checks that (``launch_args.operands_key``)."""

    __slots__ = ("launch", "shapes", "dtype", "device")

    def __init__(self, launch, outs):
        self.launch, self.shapes = launch, tuple(tuple(o.shape) for o in outs)
        self.dtype, self.device = outs[0].dtype, outs[0].device

    def __call__(self, *sources) -> list[torch.Tensor]:
        outs = [torch.empty(s, dtype=self.dtype, device=self.device) for s in self.shapes]
        if len(outs) == 1:
            self.launch(sources[0], outs[0])
        else:
            self.launch(sources[0], outs[0], sources[1], outs[1])
        return outs


def prepare_copies(*specs: tuple[torch.Tensor, int, int]) -> tuple[PreparedCopies, list[torch.Tensor]] | None:
    """Pad one or two 2-D CUDA operands, ``(t, rows, cols)`` each, in one launch (``pad_copy``,
    ``pad_pair``) and return ``(copies, [padded ...])``, ``copies`` making the same copies again
    for later operands at a fraction of the host time; None in the interpreter or where the
    Triton copy cannot serve (a dtype it does not copy, operands on different devices or not on
    the current one, an empty copy). The ordinary launch binds 20-odd arguments per call: 50-75 us
    of host time against 23-40 for one aten op (TRITON_PAD)."""
    ts = [t for t, _, _ in specs]
    if (_INTERPRETED or not 1 <= len(specs) <= 2 or any(t.dim() != 2 or not t.is_cuda for t in ts)
            or any(t.dtype not in TRITON_DTYPES or t.dtype != ts[0].dtype or t.device != ts[0].device for t in ts)
            or on_other_gpu(ts[0])):
        return None
    outs = [t.new_empty((r, c)) for t, r, c in specs]
    if any(o.numel() == 0 for o in outs):
        return None
    from .relaunch import relaunch

    parts = [_launch(t, o) for t, o in zip(ts, outs)]
    index_64 = max(p[4] for p in parts) > _INDEX32_LIMIT
    if len(parts) == 1:
        programs, args, consts, warps, _ = parts[0]
        fn, slots, consts = _pad_copy_kernel, (0, 1), {**consts, "INDEX_64": index_64}
    else:
        (n_a, args_a, ca, warps_a, _), (n_b, args_b, cb, warps_b, _) = parts
        programs, args, warps = n_a + n_b, (*args_a, n_a, *args_b), max(warps_a, warps_b)
        consts = {**{f"{k}_A": v for k, v in ca.items()}, **{f"{k}_B": v for k, v in cb.items()},
                  "INDEX_64": index_64}
        fn, slots = _pad_pair_kernel, (0, 1, len(args_a) + 1, len(args_a) + 2)
    kernel = fn[(programs,)](*args, **consts, num_warps=warps)
    again = relaunch(fn, kernel, (programs,), args, consts, slots)
    return None if again is None else (PreparedCopies(again, outs), outs)


def _backend(t: torch.Tensor, backend: str | None, out_bytes: int | None = None) -> str:
    """Which way zero_pad copies ``t``: ``backend`` when given (``"triton"`` refused where it
    cannot run), else Triton for a CUDA tensor while TRITON_PAD allows, torch otherwise: on the
    CPU (no compiled Triton), where autograd records (the kernel's output has no gradient; F.pad
    has), for a dtype not in TRITON_DTYPES, and for a row-major source whose copy (``out_bytes``)
    is under TRITON_PAD_MIN_BYTES (host time over device time, see TRITON_PAD)."""
    recording = t.requires_grad and torch.is_grad_enabled()
    if backend == "torch":
        return backend
    if backend == "triton":
        if recording:
            raise ValueError("zero_pad(backend='triton') is not differentiable: pad under no_grad or use 'torch'")
        if t.dtype not in TRITON_DTYPES:
            raise TypeError(f"zero_pad(backend='triton') does not copy {t.dtype}")
        if not (t.is_cuda or (_INTERPRETED and t.device.type == "cpu")):
            raise ValueError(f"zero_pad(backend='triton') needs a CUDA tensor or TRITON_INTERPRET=1, not {t.device}")
        return backend
    if backend is not None:
        raise ValueError(f"unknown zero_pad backend {backend!r}: None, 'torch' or 'triton'")
    if not (TRITON_PAD and t.is_cuda and not recording and t.dtype in TRITON_DTYPES):
        return "torch"
    small = out_bytes is not None and out_bytes < TRITON_PAD_MIN_BYTES
    return "torch" if small and t.stride(-1) == 1 else "triton"


def zero_pad_pair(a: torch.Tensor, a_rows: int, a_cols: int, b: torch.Tensor, b_rows: int, b_cols: int,
                  *, backend: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(zero_pad(a, a_rows, a_cols), zero_pad(b, b_rows, b_cols))``: one ``pad_pair`` launch where
    both are 2-D (or both 3-D, neither one matrix broadcast over the batch: zero_pad pads that
    once), of one dtype and device, and could be copied by Triton, and at least one of them
    would be (``_backend``: the other then rides along, so the pair costs one Triton launch's
    host time, not a Triton and a torch one); otherwise two ``zero_pad`` calls. ``backend``: as
    zero_pad's, for both."""
    if (a.dim() == b.dim() and a.dim() in (2, 3) and not broadcast_matrix(a) and not broadcast_matrix(b)
            and a.dtype == b.dtype and a.device == b.device and backend != "torch"):
        ways = [_backend(t, backend, math.prod(t.shape[:-2]) * r * c * t.element_size())
                for t, r, c in ((a, a_rows, a_cols), (b, b_rows, b_cols))]
        able = all(_backend(t, None) == "triton" for t in (a, b)) or backend == "triton"
        if able and "triton" in ways:
            return pad_pair(a, a_rows, a_cols, b, b_rows, b_cols)
    return zero_pad(a, a_rows, a_cols, backend=backend), zero_pad(b, b_rows, b_cols, backend=backend)


def broadcast_matrix(t: torch.Tensor) -> bool:
    """A 3-D ``t`` that is one matrix broadcast over a batch of more than one (batch stride 0)."""
    return t.dim() == 3 and t.shape[0] > 1 and t.stride(0) == 0


def zero_pad(t: torch.Tensor, rows: int, cols: int, *, backend: str | None = None) -> torch.Tensor:
    """A row-major (rows x cols) copy of the 2-D ``t`` with zeros past its edges; of a 3-D ``t``
    (a bmm operand), the same for every matrix: a contiguous (batch, rows, cols) copy, except that
    one matrix broadcast over the batch (batch stride 0) is padded once and expanded again.
    ``backend``: None (the policy of ``_backend``), ``"torch"`` or ``"triton"`` (``pad_copy``).

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
        return zero_pad(t[0], rows, cols, backend=backend).expand(t.shape[0], rows, cols)
    if _backend(t, backend, math.prod(t.shape[:-2]) * rows * cols * t.element_size()) == "triton":
        return pad_copy(t, rows, cols)
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
