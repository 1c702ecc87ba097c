"""The persistent TMA family against fp64: ragged M, N and K edges (TMA zero-fills the boxes past
them), M = 1, primes, both layouts of A and B, 16-byte aligned offset views, the TMA store and the
pointer store, the fused epilogue, and its config space with TMA's rules as pruning reasons.

CPU: the Triton interpreter emulates tensor descriptors (conftest sets it up; bf16 dots upcast,
kernels.tiled.mma), with 4
programs so the walk over tiles is exercised. GPU (sm 9.0+): bf16, the default space, warp
specialisation and a flattened loop (test_persistent_gpu_*).
"""

from __future__ import annotations

import pytest
import torch

import gemmtune
from gemmtune import kernels
from gemmtune.configs import Choice, PersistentConfig
from gemmtune.device import DeviceInfo
from gemmtune.epilogue import bind, reference
from gemmtune.kernels import persistent
from gemmtune.kernels.base import Unsupported
from gemmtune.problem import Problem
from gemmtune.verify import compare

# Relative Frobenius error by input dtype, as in test_kernels.py (fp32 accumulation; fp32 with
# ieee dots near 1e-7; a 16-bit output dominated by its own rounding).
TOL = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}
ON_GPU = torch.cuda.is_available()
HOPPER = ON_GPU and torch.cuda.get_device_capability()[0] >= 9
needs_hopper = pytest.mark.skipif(not HOPPER, reason="TMA needs an sm 9.0+ GPU")

DTYPES = [pytest.param(torch.float16, id="fp16"), pytest.param(torch.float32, id="fp32"),
          pytest.param(torch.bfloat16, id="bf16")]

# Small tiles so that the interpreter walks several tiles per program; blocks past the edges.
CONFIGS = [PersistentConfig(32, 16, 16, 2, 4), PersistentConfig(16, 32, 32, 3, 4, 1)]
# (M, N, K): every leading dim a multiple of 8 (16 bytes in fp16) where TMA reads it; M = 1, a
# prime M, ragged N and K edges, K shorter than BLOCK_K.
SHAPES = [(1, 40, 48), (37, 48, 40), (64, 24, 200), (13, 8, 8)]


def operand(rows, cols, layout, dtype, device):
    if layout == "row":
        return torch.randn(rows, cols, dtype=dtype, device=device)
    if layout == "col":
        return torch.randn(cols, rows, dtype=dtype, device=device).t()
    if layout == "offset16":
        # Starts 16 bytes into its storage: aligned for TMA, but not the allocation's base.
        per = 16 // torch.empty((), dtype=dtype).element_size()
        return torch.randn(rows * cols + per, dtype=dtype, device=device)[per:].view(rows, cols)
    raise ValueError(layout)


def run(cfg, a, b, **kw):
    out = torch.full((a.shape[0], b.shape[1]), float("nan"), dtype=a.dtype, device=a.device)
    persistent.run(a, b, out, cfg, **kw)
    return out


def check(out, a, b, tol=None):
    res = compare(out, torch.mm(a.double(), b.double()), tol or TOL[a.dtype])
    assert res.ok, f"{tuple(a.shape)}x{tuple(b.shape)} {a.dtype}: {res.reason}"


def _layout_fits(m, n, k, la, lb, dtype):
    es = torch.empty((), dtype=dtype).element_size()
    lead_a = k if la != "col" else m
    lead_b = n if lb != "col" else k
    return (lead_a * es) % 16 == 0 and (lead_b * es) % 16 == 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layouts", [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col"),
                                     ("offset16", "offset16")], ids="-".join)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.id)
def test_matches_fp64(cfg, shape, layouts, dtype, device):
    m, n, k = shape
    if not _layout_fits(m, n, k, *layouts, dtype):
        pytest.skip("a leading dim that TMA cannot read (covered by test_unaligned_operands_are_refused)")
    a, b = operand(m, k, layouts[0], dtype, device), operand(k, n, layouts[1], dtype, device)
    check(run(cfg, a, b), a, b)


@pytest.mark.parametrize("n", [40, 36], ids=["tma-store", "pointer-store"])
def test_output_store_paths_write_only_the_output(n, device):
    """The output is a window of a wider buffer: with N = 40 its rows are 96 bytes apart (the
    TMA store), with N = 36 88 bytes (not a 16-byte multiple: the pointer store). Either way
    nothing outside the window is written (the guard band around it stays NaN)."""
    m, k = 19, 32
    a = operand(m, k, "row", torch.float16, device)
    b = torch.randn(k, 48, dtype=torch.float16, device=device)[:, :n]   # leading dim 48: TMA reads it
    big = torch.full((m + 2, n + 8), float("nan"), dtype=torch.float16, device=device)
    out = big[1:m + 1, :n]
    persistent.run(a, b, out, CONFIGS[0])
    check(out, a, b)
    assert torch.isnan(big[0]).all() and torch.isnan(big[m + 1]).all() and torch.isnan(big[:, n:]).all()


@pytest.mark.parametrize("epi", [(True, "none", False), (True, "gelu_tanh", True), (False, "silu", True)],
                         ids=lambda e: "-".join(map(str, e)))
def test_fused_epilogue_matches_fp64(epi, device):
    has_bias, act, has_res = epi
    m, n, k = 37, 40, 56
    a, b = operand(m, k, "row", torch.float16, device), operand(k, n, "col", torch.float16, device)
    bias = torch.randn(n, dtype=torch.float16, device=device) if has_bias else None
    res = torch.randn(m, n + 3, dtype=torch.float16, device=device)[:, 3:] if has_res else None
    out = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
    persistent.run(a, b, out, CONFIGS[1], epilogue=bind(m, n, out.dtype, a.device, bias=bias, activation=act,
                                                         residual=res))
    ref = reference(torch.mm(a.double(), b.double()), None if bias is None else bias.double(), act,
                    None if res is None else res.double())
    r = compare(out, ref, TOL[torch.float16])
    assert r.ok, r.reason


@pytest.mark.parametrize("split", [2, 4])
@pytest.mark.parametrize("n", [40, 36, 64], ids=["tma-store-ragged", "pointer-store", "tma-store-even"])
def test_split_epilogue_stores_every_slice_and_nothing_else(split, n, device):
    """epi_split stores the tile as 2 or 4 column slices, through the TMA store (N = 40 and 64)
    or the pointer store (N = 36); the slices past N are clipped, the window's guard band stays
    NaN, and the fused epilogue is applied to every slice."""
    m, k = 37, 48
    cfg = PersistentConfig(16, 64, 16, 2, 4, epi_split=split)
    a = operand(m, k, "row", torch.float16, device)
    b = torch.randn(k, 72, dtype=torch.float16, device=device)[:, :n]
    bias = torch.randn(n, dtype=torch.float16, device=device)
    big = torch.full((m + 2, n + 8), float("nan"), dtype=torch.float16, device=device)
    out = big[1:m + 1, :n]
    persistent.run(a, b, out, cfg, epilogue=bind(m, n, out.dtype, a.device, bias=bias, activation="relu"))
    ref = reference(torch.mm(a.double(), b.double()), bias.double(), "relu", None)
    r = compare(out, ref, TOL[torch.float16])
    assert r.ok, r.reason
    assert torch.isnan(big[0]).all() and torch.isnan(big[m + 1]).all() and torch.isnan(big[:, n:]).all()


def test_split_epilogue_space_rules():
    p = Problem.from_sizes(4096, 4096, 4096, "bf16")
    h100 = DeviceInfo.lookup("h100")
    # 4 stages of 128x256x64 bf16 boxes (192 KiB) fit beside half the output box, not the whole.
    assert "output box" in persistent.constraint(PersistentConfig(128, 256, 64, 4, 8), p, h100)
    assert persistent.constraint(PersistentConfig(128, 256, 64, 4, 8, epi_split=2), p, h100) is None
    assert "one of" in persistent.constraint(PersistentConfig(128, 256, 64, 3, 8, epi_split=3), p, h100)
    assert "< 16" in persistent.constraint(PersistentConfig(128, 32, 64, 3, 8, epi_split=4), p, h100)
    with pytest.raises(ValueError, match="epi_split"):
        persistent.validate(p, PersistentConfig(128, 256, 64, 3, 8, epi_split=8))
    ch = Choice.parse("persistent_tma:BM128-BN256-BK64-S4-W8-G8-F-E2")
    assert ch.config == PersistentConfig(128, 256, 64, 4, 8, 8, False, True, 2) and ch.id.endswith("-F-E2")
    with pytest.raises(Unsupported, match="split epilogue"):
        persistent.inductor_export(ch, p, 132)


def test_one_row_views_with_an_odd_stride_run(device):
    """A 1-row operand or output never steps its row stride, so an odd one (a row of a wider
    matrix) is no reason to refuse it: the descriptor takes the aligned row length instead."""
    k, n = 48, 40
    # Row 8 of a stride-51 (102-byte) matrix starts 816 bytes in: an aligned base, an odd stride.
    a = torch.randn(9, k + 3, dtype=torch.float16, device=device)[8:9, :k]
    b = operand(k, n, "row", torch.float16, device)
    big = torch.full((10, n + 3), float("nan"), dtype=torch.float16, device=device)
    out = big[8:9, :n]                                                          # stride 43, 688 bytes in
    assert persistent._tma_layout(a) == persistent._tma_layout(out) == "row"
    persistent.run(a, b, out, CONFIGS[0])
    check(out, a, b)
    assert torch.isnan(big[:8]).all() and torch.isnan(big[9]).all() and torch.isnan(big[:, n:]).all()


@pytest.mark.parametrize("mnk", [(40, 1, 48), (1, 40, 48), (1, 1, 48), (33, 1, 8)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("layouts", [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")], ids="-".join)
def test_the_space_and_the_launcher_agree_on_one_row_or_column(mnk, layouts, device):
    """Where the config space keeps persistent_tma for an M = 1 or N = 1 problem, the launch takes
    the operands as given (a (K, 1) B = W.t() has strides (1, K): before, the launcher read it
    row-major, found a 2-byte leading stride and refused what the space had kept), and is right."""
    m, n, k = mnk
    a, b = operand(m, k, layouts[0], torch.float16, device), operand(k, n, layouts[1], torch.float16, device)
    p = Problem.from_sizes(m, n, k, "float16", layout_a=layouts[0], layout_b=layouts[1])  # as a suite row says
    kept, _ = persistent.space(p, DeviceInfo.lookup("h100"))
    if not kept:
        pytest.skip("the space refuses this layout (an unaligned leading dim)")
    check(run(CONFIGS[0], a, b), a, b)


def test_unaligned_operands_are_refused_with_the_reason(device):
    a = torch.randn(16, 33, dtype=torch.float16, device=device)[:, :31]   # lead 33: 66 bytes
    b = torch.randn(31, 16, dtype=torch.float16, device=device)
    with pytest.raises(ValueError, match="16-byte aligned.*pad\\+"):
        run(CONFIGS[0], a, b)
    p = Problem.from_tensors(a, b)
    kept, rejected = persistent.space(p, DeviceInfo.lookup("h100"))
    assert not kept and rejected and all("pad+ variant" in why for _, why in rejected)


def test_a_stride_0_operand_is_refused_and_pad_serves_it(device):
    """An expanded operand (leading stride 0: every row the same row) passes the 16-byte test with
    a stride of 0, which no tensor map is documented to take: refused by name; pad+ copies it."""
    a = torch.randn(1, 32, dtype=torch.float16, device=device).expand(24, 32)
    b = torch.randn(32, 16, dtype=torch.float16, device=device)
    with pytest.raises(ValueError, match="16-byte aligned.*pad\\+"):
        run(CONFIGS[0], a, b)
    check(gemmtune.matmul(a, b, choice="pad+persistent_tma:BM16-BN16-BK16-S2-W4-G8"), a, b)


def test_pad_variant_runs_unaligned_problems(device):
    """The pad+ variant copies unaligned operands to aligned ones, where TMA can read them."""
    a = torch.randn(21, 31, dtype=torch.float16, device=device)
    b = torch.randn(31, 45, dtype=torch.float16, device=device)
    out = gemmtune.matmul(a, b, choice="pad+persistent_tma:BM16-BN16-BK16-S2-W4-G8")
    check(out, a, b)


def test_space_is_pure_pruned_with_reasons_and_ids_round_trip():
    p = Problem.from_sizes(4096, 4096, 4096, "bfloat16")
    h100, a100 = DeviceInfo.lookup("h100"), DeviceInfo.lookup("a100")
    kept, rejected = persistent.space(p, h100)
    assert kept == persistent.space(p, h100)[0] and len(kept) == 2 * len(persistent.DEFAULT_TILES)
    for c in kept:
        ch = Choice("persistent_tma", c)
        assert Choice.parse(ch.id) == ch
    ws = Choice.parse("persistent_tma:BM128-BN256-BK64-S3-W8-G8-WS")
    assert ws.config.warp_spec and not ws.config.flatten and Choice.parse(ws.id) == ws
    assert Choice.parse("persistent_tma:BM128-BN128-BK64-S4-W8-G8-F").config.flatten
    with pytest.raises(ValueError, match=r"persistent_tma:BM<int>.*\[-WS\]\[-F\]"):
        Choice.parse("persistent_tma:BM128-BN128")
    kept_a, rejected_a = persistent.space(p, a100)
    assert not kept_a and all("compute capability 9.0" in why for _, why in rejected_a)
    # Exhaustive: the shared-memory rule (operand ring + the TMA store's output box) prunes.
    kept_x, rejected_x = persistent.space(p, h100, "exhaustive")
    assert kept_x and any("output box" in why for _, why in rejected_x)
    assert all(persistent.constraint(c, p, h100) is None for c in kept_x)
    assert any(c.flatten for c in kept) and not any(c.warp_spec for c in kept)
    assert any("8 or more warps" in why for _, why in rejected_x)
    # fp32: BLOCK_K halved, so the 4-byte operand ring and output box still fit.
    kept32 = persistent.space(Problem.from_sizes(4096, 4096, 4096, "float32"), h100)[0]
    assert kept32 and all(c.block_k <= 64 for c in kept32)
    # Small problems get small boxes (never a box over the matrix by a factor of 2 or more).
    small = Problem.from_sizes(24, 40, 16, "float16")
    for c in persistent.space(small, h100)[0]:
        assert c.block_m <= 32 and c.block_n <= 64 and c.block_k == 16


def test_registered_as_a_triton_family_with_validate():
    assert kernels.get("persistent_tma") is persistent and "persistent_tma" in kernels.TRITON_FAMILIES
    with pytest.raises(ValueError, match="power of two"):
        persistent.validate(None, PersistentConfig(48, 64, 64, 3, 4))
    with pytest.raises(ValueError, match="<= 256"):
        persistent.validate(None, PersistentConfig(512, 64, 64, 3, 4))


def test_through_matmul_with_a_choice_id(device):
    a = operand(45, 64, "row", torch.float16, device)
    b = operand(64, 72, "col", torch.float16, device)
    check(gemmtune.matmul(a, b, choice="persistent_tma:BM32-BN32-BK32-S2-W4-G8"), a, b)


# ------------------------------------------------------------------ GPU (sm 9.0+)
@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (1000, 1000, 1000), (333, 4104, 1032), (8, 4096, 4096)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("layout_b", ["row", "col"])
def test_persistent_gpu_default_space_verifies(shape, layout_b, dtype):
    m, n, k = shape
    a, b = operand(m, k, "row", dtype, "cuda"), operand(k, n, layout_b, dtype, "cuda")
    p = Problem.from_tensors(a, b)
    kept, _ = persistent.space(p, DeviceInfo.from_torch())
    assert kept
    for cfg in kept:
        check(run(cfg, a, b), a, b)


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("cfg", [PersistentConfig(128, 256, 64, 3, 8, 8, True, False),
                                 PersistentConfig(128, 128, 64, 4, 8, 8, False, True),
                                 PersistentConfig(128, 256, 64, 4, 8, 8, False, True, 2),
                                 PersistentConfig(128, 256, 64, 4, 8, 8, False, False, 4)], ids=lambda c: c.id)
def test_persistent_gpu_loop_knobs_verify_or_fail_to_compile_cleanly(cfg):
    """Warp specialisation / flattening / a split epilogue: correct where this triton compiles them."""
    a, b = operand(2048, 1024, "row", torch.bfloat16, "cuda"), operand(1024, 3072, "col", torch.bfloat16, "cuda")
    try:
        out = run(cfg, a, b)
    except Exception as e:  # noqa: BLE001 - the tuner records this as compile_error
        pytest.skip(f"this triton does not compile {cfg.id}: {type(e).__name__}: {str(e)[:200]}")
    check(out, a, b)


def test_pad_plus_keeps_16_byte_vectors_for_pointer_kernels(monkeypatch, device):
    """pad+ on an odd N: a pointer kernel computes the padded N (a masked odd N along B's contiguous
    dim would cost its 16-byte vectors: --fast lost to cuBLAS on every odd shape that way on the
    H200), while the TMA family reads B[:, :N] of the padded copy and writes in place."""
    a = torch.randn(21, 31, dtype=torch.float16, device=device)
    b = torch.randn(31, 45, dtype=torch.float16, device=device)
    seen = {}
    for name in ("triton_mm", "persistent_tma"):
        fam = kernels.get(name)
        real = fam.run

        def spy(a_, b_, out_, cfg, real=real, name=name, **kw):
            seen[name] = (tuple(b_.shape), b_.stride(), tuple(out_.shape))
            return real(a_, b_, out_, cfg, **kw)
        monkeypatch.setattr(fam, "run", spy)
    out_t = gemmtune.matmul(a, b, choice="pad+triton_mm:BM16-BN16-BK16-S2-W4-G8")
    out_p = gemmtune.matmul(a, b, choice="pad+persistent_tma:BM16-BN16-BK16-S2-W4-G8")
    check(out_t, a, b)
    check(out_p, a, b)
    assert seen["triton_mm"] == ((32, 48), (48, 1), (21, 48))       # padded N, a temporary output
    assert seen["persistent_tma"] == ((32, 45), (48, 1), (21, 45))  # real N over aligned rows, in place


def test_rebased_descriptor_is_a_copy_over_the_new_tensor():
    """The prepared launch rebases the first call's descriptors on each call's tensors
    (persistent._rebased): same shape, strides and box, the new base, the original untouched."""
    from gemmtune.kernels.persistent import TensorDescriptor, _rebased

    if TensorDescriptor is None:
        pytest.skip("this triton has no host TensorDescriptor")
    first, later = torch.zeros(16, 32), torch.ones(16, 32)
    desc = TensorDescriptor(first, [16, 32], [32, 1], [16, 16])
    again = _rebased(desc, later)
    assert again.base is later and desc.base is first
    assert (again.shape, again.strides, again.block_shape, again.padding) == \
        (desc.shape, desc.strides, desc.block_shape, desc.padding)


def test_operands_reason_names_what_tma_cannot_read():
    """kernels.operands_reason: only a copy-free persistent_tma choice refuses operands, and only
    those TMA cannot read (a base or leading stride not 16-byte aligned)."""
    ch, pad = Choice.parse("persistent_tma:BM32-BN16-BK16-S2-W4-G8"), Choice.parse("pad+persistent_tma:BM32-BN16-BK16-S2-W4-G8")
    b = torch.randn(64, 40, dtype=torch.float16)
    aligned, col = torch.randn(17, 64, dtype=torch.float16), torch.randn(64, 24, dtype=torch.float16).t()
    offset = torch.randn(17 * 64 + 1, dtype=torch.float16)[1:].view(17, 64)
    odd_lead = torch.randn(64, 17, dtype=torch.float16).t()  # column-major, 34-byte columns
    assert kernels.operands_reason(ch, aligned, b) is None and kernels.operands_reason(ch, col, b) is None
    for a in (offset, odd_lead):
        assert "16-byte aligned" in kernels.operands_reason(ch, a, b)
        assert kernels.operands_reason(pad, a, b) is None
        assert kernels.operands_reason(Choice.parse("triton_mm:BM16-BN16-BK16-S1-W2-G8"), a, b) is None


@pytest.mark.skipif(ON_GPU, reason="CPU operands in the interpreter; the GPU runs test_gpu.py's twin")
def test_a_cached_call_tma_cannot_read_runs_cublas_once_warned():
    """A dispatcher's shape decided on persistent_tma (first call aligned), then called with an
    offset A and a column-major A whose columns are 34 bytes: those calls run torch.mm with one
    warning instead of raising from the kernel's descriptor check, and stay right; aligned calls
    keep the kernel."""
    import warnings

    from gemmtune.dispatch import compile_mm

    ch = Choice.parse("persistent_tma:BM32-BN16-BK16-S2-W4-G8")
    d = compile_mm(n=40, k=64, dtype="fp16", hints={"m": [17]}, tune_fn=lambda ps, **kw: {p.key: ch for p in ps})
    b = torch.randn(64, 40, dtype=torch.float16)
    a = torch.randn(17, 64, dtype=torch.float16)
    assert compare(d(a, b), a.double() @ b.double(), TOL[torch.float16]).ok
    bias = torch.randn(40, dtype=torch.float16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for a2 in (torch.randn(17 * 64 + 1, dtype=torch.float16)[1:].view(17, 64),
                   torch.randn(64, 17, dtype=torch.float16).t()):
            assert compare(d(a2, b), a2.double() @ b.double(), TOL[torch.float16]).ok
            assert compare(d(a2, b, bias=bias), a2.double() @ b.double() + bias.double(), TOL[torch.float16]).ok
    assert len([w for w in caught if "cannot read these operands" in str(w.message)]) == 1
    assert d.decision(m=17).choice == ch
