"""persistent_tma: a persistent, TMA-fed matmul for Hopper and later (sm 9.0+).

Why a second tiled kernel: on large compute-bound shapes the per-tile kernel
(``triton_mm``) pays, per output tile, a program launch, its prologue (address
set-up, pipeline fill) and an epilogue that the next tile cannot overlap. Here a
grid of one program per SM walks the output tiles in the same grouped order
(GROUP_M rows of tiles share B columns in L2), so the pipeline of the next tile's
loads can start while the previous tile's accumulator is stored.

Operands come through tensor descriptors (TMA, the Tensor Memory Accelerator): one
instruction copies a BLOCK x BLOCK box from global to shared memory, computing the
addresses in hardware, and fills out-of-bounds parts with zeros, so ragged M, N and
K edges need no masks in the K loop. Host-side descriptors
(``triton.tools.tensor_descriptor.TensorDescriptor``) are used: both triton 3.6 and
the newest take them as kernel arguments, and unlike device-side
``tl.make_tensor_descriptor`` they need no global scratch allocator
(``triton.set_allocator`` is process-wide state). The output goes back through a
descriptor too (a TMA store), when its rows are 16-byte aligned.

What TMA needs, and so what this family serves (``constraint``): compute capability
9.0 or newer, operands whose inner stride is 1 (row-major, or a transposed view:
the descriptor is then laid over the stored [K, M] / [N, K] matrix and the tile
transposed in shared memory), a 16-byte aligned base and 16-byte multiple leading
strides. An odd leading dimension (N = 20001 in bf16) fails the last rule: the
``pad+`` variant of this family runs on aligned copies instead, and the measurement
decides whether the copy pays.

Config knobs beyond the tile (``PersistentConfig``): ``warp_spec`` asks Triton to
warp-specialise the tile loop (producer warps issue TMA, consumer warps run the
MMAs; where the triton version or the GPU has no such pass it is a compile error
the tuner records), and ``flatten`` fuses the tile and K loops into one so the
pipeline runs across tile boundaries.

In Triton's CPU interpreter the descriptors are emulated, so the family is tested
on a CPU; the number of programs is then 4, so the walk over tiles is exercised.
"""

from __future__ import annotations

import copy

import torch
import triton
import triton.language as tl

from ..configs import PersistentConfig
from ..epilogue import EpilogueArgs
from ..problem import Problem
from .base import Unsupported
from .launch_args import gpu_sm_count, layout_key, operands_key
from .relaunch import relaunch
from .tiled import (_INTERPRETED, _launch, epilogue_consts, epilogue_pointers, epilogue_strides,
                    epilogue_tensors, fused_epilogue, input_precision, mma, needs_int64)

try:  # triton >= 3.3 (3.6 on the GPU machine, the newest on CPUs)
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - an older triton: the family reports itself unavailable
    TensorDescriptor = None
# The family's pure part (configs, space, constraint, launch plan, model row): kept in persistent_spec so that
# planning imports no Triton (kernels.spec); the family's names as before.
from .persistent_spec import (  # noqa: F401
    CONFIG, DEFAULT_TILES, MAX_BOX, NAME, TMA_ALIGN, _layout_ok, constraint, default_configs,
    exhaustive_configs, features_row, plan, problem_reason, space, tensor_descriptors, validate)

# Edges cost nothing here: TMA zero-fills boxes past the matrix, with no mask and no narrower
# vectors, so a pad+ choice of this family runs on B[:, :N] of the padded copy and writes its
# output in place (kernels.run_choice).
TMA_EDGES = True
INDUCTOR_TEMPLATE = "triton::mm_persistent_tma"  # Inductor's Hopper persistent TMA template
# tuned_scaled_mm's persistent device-TMA template for tensor- and row-wise scales (torch
# 2.13 kernel/mm.py scaled_mm_device_tma_epilogue_scaling_template), offered without a bias only.
INDUCTOR_SCALED_TEMPLATE = "triton::scaled_mm_device_tma_epilogue_scaling"
TMA_DESCRIPTOR_SIZE = 128  # bytes of a CUtensorMap (Inductor's TMA_SIZE option)

INTERPRETER_PROGRAMS = 4


@triton.jit
def _tile_coords(tile, grid_m, grid_n, GROUP_M: tl.constexpr):
    # Grouped order: GROUP_M rows of tiles are walked column by column, so the programs
    # in flight share B's columns (and A's rows) in L2.
    in_group = GROUP_M * grid_n
    first_m = (tile // in_group) * GROUP_M
    size_m = min(grid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % in_group) % size_m
    pid_n = (tile % in_group) // size_m
    return pid_m, pid_n


@triton.jit
def _persistent_kernel(
    a_desc, b_desc, c_desc, c_ptr, bias_ptr, res_ptr, sa_ptr, sb_ptr,
    M, N, K, stride_cm, stride_cn, stride_bias, stride_rm, stride_rn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    NUM_PROGRAMS: tl.constexpr, A_COL: tl.constexpr, B_ROW: tl.constexpr, TMA_STORE: tl.constexpr,
    INPUT_PRECISION: tl.constexpr, INDEX_64: tl.constexpr, FLATTEN: tl.constexpr, WARP_SPEC: tl.constexpr,
    HAS_BIAS: tl.constexpr, ACT: tl.constexpr, HAS_RES: tl.constexpr, RN_UNIT: tl.constexpr,
    SCALE: tl.constexpr, EPI_SPLIT: tl.constexpr,
):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    # The epilogue recomputes its tile from its own counter: when the loops are flattened
    # the compiler may not keep a value live from the loop's prologue into its epilogue.
    tile_c = pid - NUM_PROGRAMS
    for tile in tl.range(pid, grid_m * grid_n, NUM_PROGRAMS, flatten=FLATTEN, warp_specialize=WARP_SPEC):
        pid_m, pid_n = _tile_coords(tile, grid_m, grid_n, GROUP_M)
        om = pid_m * BLOCK_M
        on = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            ok = ki * BLOCK_K
            # Boxes past M, N or K arrive zero-filled: no masks in the loop.
            if A_COL:
                a = a_desc.load([ok, om]).T
            else:
                a = a_desc.load([om, ok])
            if B_ROW:
                b = b_desc.load([ok, on])
            else:
                b = b_desc.load([on, ok]).T
            acc = mma(a, b, acc, INPUT_PRECISION)

        tile_c += NUM_PROGRAMS
        pid_m, pid_n = _tile_coords(tile_c, grid_m, grid_n, GROUP_M)
        if INDEX_64:
            om = pid_m.to(tl.int64) * BLOCK_M
            on = pid_n.to(tl.int64) * BLOCK_N
        else:
            om = pid_m * BLOCK_M
            on = pid_n * BLOCK_N
        rm = om + tl.arange(0, BLOCK_M)
        rn = on + tl.arange(0, BLOCK_N)
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        srn = 1 if RN_UNIT else stride_rn
        acc = fused_epilogue(acc, rm[:, None], rn[None, :], mask, N, bias_ptr, res_ptr, stride_bias,
                             stride_rm, srn, HAS_BIAS, ACT, HAS_RES, M, sa_ptr, sb_ptr, SCALE)
        out = acc.to(c_ptr.dtype.element_ty)
        if EPI_SPLIT == 1:
            _store_slice(c_desc, c_ptr, out, om, on, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, TMA_STORE)
        else:
            # Column slices, stored one after another: the TMA store's staging buffer holds one.
            left, right = _halves(out, BLOCK_M, BLOCK_N)
            if EPI_SPLIT == 2:
                _store_slice(c_desc, c_ptr, left, om, on, M, N, stride_cm, stride_cn,
                             BLOCK_M, BLOCK_N // 2, TMA_STORE)
                _store_slice(c_desc, c_ptr, right, om, on + BLOCK_N // 2, M, N, stride_cm, stride_cn,
                             BLOCK_M, BLOCK_N // 2, TMA_STORE)
            else:
                q0, q1 = _halves(left, BLOCK_M, BLOCK_N // 2)
                q2, q3 = _halves(right, BLOCK_M, BLOCK_N // 2)
                _store_slice(c_desc, c_ptr, q0, om, on, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N // 4, TMA_STORE)
                _store_slice(c_desc, c_ptr, q1, om, on + BLOCK_N // 4, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N // 4, TMA_STORE)
                _store_slice(c_desc, c_ptr, q2, om, on + BLOCK_N // 2, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N // 4, TMA_STORE)
                _store_slice(c_desc, c_ptr, q3, om, on + 3 * (BLOCK_N // 4), M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N // 4, TMA_STORE)


@triton.jit
def _halves(x, ROWS: tl.constexpr, COLS: tl.constexpr):
    # [ROWS, COLS] -> its left and right [ROWS, COLS // 2] halves (tl.split takes a last dim of 2).
    return tl.split(tl.permute(tl.reshape(x, (ROWS, 2, COLS // 2)), (0, 2, 1)))


@triton.jit
def _store_slice(c_desc, c_ptr, val, om, on, M, N, stride_cm, stride_cn,
                 ROWS: tl.constexpr, COLS: tl.constexpr, TMA_STORE: tl.constexpr):
    if TMA_STORE:
        # The TMA store clips the box at the matrix edge.
        c_desc.store([om, on], val)
    else:
        rm = om + tl.arange(0, ROWS)
        rn = on + tl.arange(0, COLS)
        tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, val,
                 mask=(rm[:, None] < M) & (rn[None, :] < N))


# ------------------------------------------------------------------ host side
def _lead(t: torch.Tensor, layout: str) -> int:
    """The leading stride TMA steps ``t`` by when reading it ``layout`` ('row' / 'col'). One row
    (column) never steps it, so its extent stands in: a 1-row view of a wider matrix has an odd
    stride TMA would refuse, and B = W.t() of a 1 x K weight, (K, 1) with strides (1, K), reads K
    contiguous elements column-major."""
    rows, cols = t.shape
    if layout == "row":
        return t.stride(0) if rows > 1 else cols
    return t.stride(1) if cols > 1 else rows


def _tma_layout(t: torch.Tensor) -> str | None:
    """'row' / 'col' when TMA can read the 2-D operand ``t`` (its rows, or its columns, are
    contiguous with a 16-byte aligned base and leading stride, ``_lead``), else None. A single
    column (row) may be read either way: the first whose leading stride is aligned wins."""
    if t.data_ptr() % TMA_ALIGN:
        return None
    es = t.element_size()
    s0, s1 = t.stride()
    rows, cols = t.shape
    for layout, contiguous in (("row", s1 == 1 or cols == 1), ("col", s0 == 1 or rows == 1)):
        lead = _lead(t, layout)
        # A leading stride of 0 (an expanded operand: every row one row) is a multiple of 16 too,
        # but a tensor map steps rows by its stride and CUDA documents no stride-0 map: refused,
        # so pad+ (a contiguous copy) or another family serves it. Not tried on a GPU.
        if contiguous and lead > 0 and (lead * es) % TMA_ALIGN == 0:
            return layout
    return None


def num_programs(device: torch.device, tiles: int) -> int:
    """One program per SM (never more than there are tiles; meta operands: the current GPU's SMs,
    launch_args.gpu_sm_count), INTERPRETER_PROGRAMS on the CPU."""
    sms = gpu_sm_count(device)
    return max(1, min(INTERPRETER_PROGRAMS if sms is None else sms, tiles))


def _descriptor(t: torch.Tensor, layout: str, box_rows: int, box_cols: int):
    """A descriptor over the stored matrix of ``t``: [rows, cols] when row-major, the
    transposed [cols, rows] storage when column-major (the kernel transposes the box)."""
    rows, cols = t.shape
    if layout == "row":
        return TensorDescriptor(t, [rows, cols], [_lead(t, "row"), 1], [box_rows, box_cols])
    return TensorDescriptor(t, [cols, rows], [_lead(t, "col"), 1], [box_cols, box_rows])


def operands_reason(a: torch.Tensor, b: torch.Tensor) -> str | None:
    """Why TMA cannot read these operands (None when it can): each must be row- or column-major
    with a 16-byte aligned base and leading stride (cuTensorMapEncodeTiled)."""
    if _tma_layout(a) is None or _tma_layout(b) is None:
        return ("persistent_tma needs A and B row- or column-major with 16-byte aligned base and "
                f"leading strides (A strides {a.stride()}, B strides {b.stride()}); use pad+")
    return None


def _args(a, b, c, cfg: PersistentConfig, allow_tf32: bool, epilogue: EpilogueArgs | None):
    M, K = a.shape
    N = b.shape[1]
    why = operands_reason(a, b)
    if why is not None:
        raise ValueError(why)
    la, lb = _tma_layout(a), _tma_layout(b)
    a_desc = _descriptor(a, la, cfg.block_m, cfg.block_k)
    b_desc = _descriptor(b, lb, cfg.block_k, cfg.block_n)
    tma_store = _tma_layout(c) == "row" and c.stride(-1) == 1
    c_desc = _descriptor(c, "row", cfg.block_m, cfg.block_n // cfg.epi_split) if tma_store else None
    p = plan(M, N, K, cfg, num_programs(a.device, 1 << 30))
    args = (a_desc, b_desc, c_desc, c, *epilogue_pointers(epilogue, c), M, N, K, c.stride(0), c.stride(1),
            *epilogue_strides(epilogue))
    consts = dict(
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
        NUM_PROGRAMS=p["programs"], A_COL=la == "col", B_ROW=lb == "row", TMA_STORE=tma_store,
        INPUT_PRECISION=input_precision(a.dtype, allow_tf32),
        INDEX_64=needs_int64(c, *epilogue_tensors(epilogue)),
        FLATTEN=cfg.flatten, WARP_SPEC=cfg.warp_spec, EPI_SPLIT=cfg.epi_split,
        **epilogue_consts(epilogue),
    )
    return (p["programs"],), args, consts


def run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: PersistentConfig, *,
        allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None):
    """Launch into ``out`` (shapes, sizes and ``epilogue`` already checked); returns what
    Triton's launch returns."""
    grid, args, consts = _args(a, b, out, cfg, allow_tf32, epilogue)
    return _launch(_persistent_kernel, grid, args, {**consts, "num_warps": cfg.num_warps,
                                                    "num_stages": cfg.num_stages})


def prepare(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: PersistentConfig, *,
            allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None):
    """Launch once into ``out`` and return ``(matches(a, b), launch(a, b, out))``, both taking the
    ``epilogue`` as a keyword, for repeated calls at this problem, or None in the interpreter.
    The compiled kernel is relaunched (``relaunch``) with descriptors rebased on each call's
    tensors: copies of the first call's, whose shapes, strides and boxes hold while the operands
    keep their strides and alignment (``matches``), so Triton's binding of 20-odd arguments and
    the descriptors' checks are skipped. The generic launch cost 168-207 us a call on
    unaligned_333 and prime_1021 behind their pad copies (H100, session 23), cuBLAS 43-50."""
    if _INTERPRETED or a.dim() != 2:
        return None
    grid, args, consts = _args(a, b, out, cfg, allow_tf32, epilogue)
    kernel = _persistent_kernel[grid](*args, **consts, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    again = relaunch(_persistent_kernel, kernel, grid, args, consts, slots=range(DESC_SLOTS))
    if again is None:
        return None
    # Templates with no base: the closures must not keep the first call's tensors alive.
    a_desc, b_desc, c_desc = (None if d is None else _rebased(d, None) for d in args[:3])
    key, out_key = operands_key(a, b, epilogue), layout_key(out)

    def matches(a, b, epilogue=None):
        return operands_key(a, b, epilogue) == key

    def launch(a, b, c, epilogue=None):
        if layout_key(c) != out_key:  # another output layout: the ordinary way
            run(a, b, c, cfg, allow_tf32=allow_tf32, epilogue=epilogue)
            return
        again(_rebased(a_desc, a), _rebased(b_desc, b), None if c_desc is None else _rebased(c_desc, c), c,
              *epilogue_pointers(epilogue, c))
    return matches, launch


# The kernel's leading parameters that change per call: the three descriptors, C, and the
# epilogue's bias, residual and scales.
DESC_SLOTS = 8


def _rebased(desc, t: torch.Tensor):
    """A copy of the descriptor ``desc`` over ``t``, a tensor of the same shape, strides and
    16-byte alignment as its base (so its checks hold and are not run again). Its fields are
    copied directly: ``copy.copy`` took 11% of a prepared pad+persistent_tma call's Python time
    (H100, session 24, scripts/profile_prepared.py)."""
    try:
        d = object.__new__(type(desc))
        d.__dict__.update(desc.__dict__)
    except AttributeError:  # a descriptor class without a __dict__ (slots): the generic copy
        d = copy.copy(desc)
    d.base = t
    return d


def inductor_export(choice, problem: Problem, sm_count: int | None = None) -> dict:
    cfg = choice.config
    if cfg.warp_spec or cfg.flatten or cfg.epi_split != 1:
        raise Unsupported("persistent_tma with warp specialisation, a flattened loop or a split epilogue: "
                          "Inductor's Hopper persistent TMA template has none of these knobs")
    if sm_count is None:
        raise Unsupported("persistent_tma: the table's GPU is not one whose SM count (the template's NUM_SMS) "
                          "gemmtune knows: a built-in GPU by its exact name, the same SM count for every GPU "
                          "of a merged table")
    if problem.op == "scaled_mm":
        return _inductor_scaled(cfg, problem, sm_count)
    # Inductor's persistent TMA template (mm_persistent_tma) with our tile, and the TMA
    # options its heuristic adds (A/B_ROW_MAJOR from the key's layouts, the stable
    # tensor-descriptor API that triton 3.6+ has).
    return {"template_id": INDUCTOR_TEMPLATE, "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n,
            "BLOCK_K": cfg.block_k, "GROUP_M": cfg.group_m, "num_stages": cfg.num_stages,
            "num_warps": cfg.num_warps, "EVEN_K": problem.k % cfg.block_k == 0,
            "USE_FAST_ACCUM": False, "ACC_TYPE": "tl.float32",
            "A_ROW_MAJOR": problem.layout_a == "row", "B_ROW_MAJOR": problem.layout_b == "row",
            "NUM_SMS": sm_count, "TMA_SIZE": TMA_DESCRIPTOR_SIZE, "TMA_EXPERIMENTAL_API": False}


def scale_recipe(problem: Problem) -> int:
    """The ScalingType value (0 TensorWise, 1 RowWise) Inductor's get_scaling_options gives this
    problem's scales: tensor-wise, and row-wise with M = N = 1 ((1, 1) scales both), are 0."""
    return 0 if problem.scale == "tensor" or (problem.m == 1 and problem.n == 1) else 1


def _inductor_scaled(cfg: PersistentConfig, problem: Problem, sm_count: int) -> dict:
    if problem.bias:
        raise Unsupported("persistent_tma for scaled_mm with a bias: Inductor's tuned_scaled_mm offers its "
                          "device-TMA template only without a bias")
    if cfg.num_warps == 2 or cfg.block_k < 32:
        raise Unsupported(f"persistent_tma for scaled_mm with num_warps={cfg.num_warps}, BLOCK_K={cfg.block_k}: "
                          "Inductor's scaled TMA heuristic keeps only num_warps != 2 and BLOCK_K >= 32 "
                          "(ScaledTMAConfigMixin._filter_configs)")
    # The kwargs its heuristic (ScaledTMAConfigMixin) yields, plus SCALE_RECIPE_A/B, which
    # tuned_scaled_mm passes as kwarg_overrides and a lookup hit does not apply: the template reads
    # them (load_scales, apply_scaling), so they are stated. No A/B_ROW_MAJOR: this template takes
    # A row-major and B column-major only and does not read them.
    recipe = scale_recipe(problem)
    return {"template_id": INDUCTOR_SCALED_TEMPLATE, "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n,
            "BLOCK_K": cfg.block_k, "GROUP_M": cfg.group_m, "num_stages": cfg.num_stages,
            "num_warps": cfg.num_warps, "EVEN_K": problem.k % cfg.block_k == 0,
            "USE_FAST_ACCUM": False, "ACC_TYPE": "tl.float32",
            "NUM_SMS": sm_count, "TMA_SIZE": TMA_DESCRIPTOR_SIZE, "TMA_EXPERIMENTAL_API": False,
            "SCALE_RECIPE_A": recipe, "SCALE_RECIPE_B": recipe}


__all__ = ["NAME", "CONFIG", "space", "validate", "constraint", "run", "prepare", "plan", "features_row",
           "inductor_export", "problem_reason"]
