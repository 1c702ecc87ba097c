"""kernels.pad.pad_copy, the one-launch Triton zero-padded copy (zero_pad(backend="triton")):
bit for bit against F.pad on every source layout (row-major, transposed, offset and strided
views, batches, a broadcast batch), every output element written (new_empty hands back garbage),
and the policy that picks it. Runs on a GPU where there is one, else in the Triton interpreter."""

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from gemmtune import kernels
from gemmtune.kernels import pad

DEV = "cuda" if torch.cuda.is_available() and not pad._INTERPRETED else "cpu"
pytestmark = pytest.mark.skipif(DEV == "cpu" and not pad._INTERPRETED,
                                reason="the Triton kernel needs a GPU or TRITON_INTERPRET=1")
DTYPES = pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])


@pytest.fixture(autouse=True)
def garbage_new_empty(monkeypatch):
    """new_empty hands back all-ones bits (NaN for a float, -1 for an int), as uninitialised
    memory may hold anything: an element the kernel does not write shows."""
    real = torch.Tensor.new_empty

    def new_empty(self, *size, **kw):
        out = real(self, *size, **kw)
        if out.numel():
            out.view(torch.uint8).fill_(0xFF)
        return out
    monkeypatch.setattr(torch.Tensor, "new_empty", new_empty)


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def check(t: torch.Tensor, rows: int, cols: int, *, via_zero_pad: bool = True) -> torch.Tensor:
    """The Triton copy of ``t`` equals F.pad's bit for bit, and is contiguous."""
    got = pad.zero_pad(t, rows, cols, backend="triton") if via_zero_pad else pad.pad_copy(t, rows, cols)
    ref = F.pad(t, (0, cols - t.shape[-1], 0, rows - t.shape[-2]))
    assert got.shape == ref.shape and got.dtype == t.dtype
    assert torch.equal(bits(got), bits(ref.contiguous()))
    if not pad.broadcast_matrix(t) or not via_zero_pad:
        assert got.is_contiguous()
    return got


def layout(rows: int, cols: int, kind: str, dtype) -> torch.Tensor:
    """A random (rows, cols) source lying in memory as ``kind`` says."""
    if kind == "row":
        return torch.randn(rows, cols, dtype=dtype, device=DEV)
    if kind == "transposed":  # x.t(): unit stride along the rows
        return torch.randn(cols, rows, dtype=dtype, device=DEV).t()
    if kind == "offset":  # base[1:, 3:]: row stride cols + 3, data pointer not 16-byte aligned
        return torch.randn(rows + 1, cols + 3, dtype=dtype, device=DEV)[1:, 3:]
    if kind == "offset_t":  # a transposed view of an offset one
        return torch.randn(cols + 2, rows + 1, dtype=dtype, device=DEV)[2:, 1:].t()
    assert kind == "strided"  # no unit stride at all
    return torch.randn(rows, 2 * cols, dtype=dtype, device=DEV)[:, ::2]


# (rows, cols, padded rows, padded cols)
SHAPES = [
    (1, 1, 1, 1),        # 1x1, nothing to pad
    (1, 1, 2, 8),        # 1x1, both
    (7, 13, 8, 16),      # primes
    (8, 16, 8, 16),      # exact: a plain copy
    (7, 16, 8, 16),      # rows only
    (8, 13, 8, 16),      # columns only
    (37, 1030, 40, 1040),  # several column tiles (fp16: 512 wide) and row tiles (16 high)
    (130, 70, 136, 72),  # several 64x64 tiles of a transposed source, ragged both ways
]


@DTYPES
@pytest.mark.parametrize("kind", ["row", "transposed", "offset", "offset_t", "strided"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "{}x{}-{}x{}".format(*s))
def test_matches_f_pad_bitwise(shape, kind, dtype):
    r, c, rp, cp = shape
    t = layout(r, c, kind, dtype)
    got = check(t, rp, cp)
    assert torch.equal(got[:r, :c], t) and not got[r:].any() and not got[:, c:].any()


@DTYPES
@pytest.mark.parametrize("variant", ["plain", "transposed", "offset", "broadcast"])
@pytest.mark.parametrize("pads", [(8, 16), (7, 16), (8, 13), (7, 13)], ids=["both", "cols", "rows", "none"])
def test_batched_matches_f_pad_bitwise(pads, variant, dtype):
    bt, r, c = 3, 7, 13
    if variant == "plain":
        t = torch.randn(bt, r, c, dtype=dtype, device=DEV)
    elif variant == "transposed":
        t = torch.randn(bt, c, r, dtype=dtype, device=DEV).transpose(1, 2)
    elif variant == "offset":
        t = torch.randn(bt + 1, r + 2, c + 5, dtype=dtype, device=DEV)[1:, 2:, 5:]
    else:  # one matrix broadcast over the batch (batch stride 0)
        t = torch.randn(1, r, c, dtype=dtype, device=DEV).expand(bt, r, c)
    got = check(t, *pads)
    if variant == "broadcast":  # zero_pad: padded once, expanded again
        assert got.stride(0) == 0 and got[0].is_contiguous()
        check(t, *pads, via_zero_pad=False)  # pad_copy itself: every matrix written


def test_bit_copy_keeps_signed_zeros_nan_payloads_and_any_dtype():
    """The kernel copies bits (a same-size integer view), so -0.0 and NaN payloads survive and
    dtypes the interpreter computes wrongly (bf16) or F.pad may not take (fp8) copy exactly."""
    x = torch.randn(5, 9, dtype=torch.float32, device=DEV)
    x[0, 0], x[1, 1] = -0.0, float("nan")
    bits(x)[2, 2] = 0x7FC0_1234  # a NaN with a payload
    check(x, 8, 12)
    for dtype in (torch.bfloat16, torch.int8, torch.bool, torch.float64, torch.float8_e4m3fn):
        t = torch.randint(-100, 100, (9, 5), device=DEV).to(torch.float32).to(dtype).t()
        got = pad.zero_pad(t, 8, 16, backend="triton")
        ref = torch.zeros(8, 16, dtype=bits(t).dtype, device=DEV)
        ref[:5, :9] = bits(t)
        assert torch.equal(bits(got), ref), dtype


@pytest.mark.parametrize("kind", ["row", "transposed", "strided"])
def test_int64_offsets(monkeypatch, kind):
    """The int64 path (taken where an offset passes 2^31) on a small copy, by lowering the limit."""
    monkeypatch.setattr(pad, "_INDEX32_LIMIT", 0)
    check(layout(37, 70, kind, torch.float16), 40, 72)
    check(torch.randn(2, 13, 7, dtype=torch.float32, device=DEV).transpose(1, 2), 8, 16)


def test_edges_empty_zero_sized_source_and_crop():
    assert pad.pad_copy(torch.randn(3, 4, device=DEV), 0, 8).shape == (0, 8)
    got = pad.pad_copy(torch.randn(0, 5, device=DEV), 4, 8)
    assert got.shape == (4, 8) and not got.any()
    check(torch.randn(7, 13, device=DEV), 5, 8)  # smaller sizes crop, as F.pad's negative pads
    with pytest.raises(ValueError, match="2-D or 3-D"):
        pad.pad_copy(torch.ones(2, 2, 2, 2, device=DEV), 2, 2)


def test_tiles_stay_near_tile_bytes_and_shrink_to_small_matrices():
    for esize in (1, 2, 4):
        for transposed in (False, True):
            br, bc, _ = pad._tiles(4095, 4096, esize, transposed)
            assert 8 << 10 <= br * bc * esize <= pad.TILE_BYTES
    assert pad._tiles(1, 4096, 2, False)[0] == 1 and pad._tiles(4096, 8, 2, False)[1] == 8


# ------------------------------------------------------------------ the policy
def fake(*, is_cuda=True, requires_grad=False, dtype=torch.bfloat16, col_stride=1):
    return SimpleNamespace(is_cuda=is_cuda, requires_grad=requires_grad, dtype=dtype, device=torch.device("cuda"),
                           stride=lambda d: col_stride)


def test_policy_triton_on_cuda_only_while_allowed(monkeypatch):
    assert pad._backend(fake(), None) == "triton"
    assert pad._backend(fake(is_cuda=False), None) == "torch"  # the CPU: torch
    assert pad._backend(fake(requires_grad=True), None) == "torch"  # autograd records: F.pad
    with torch.no_grad():
        assert pad._backend(fake(requires_grad=True), None) == "triton"
    assert pad._backend(fake(dtype=torch.complex64), None) == "torch"
    assert pad._backend(fake(), "torch") == "torch"
    monkeypatch.setattr(pad, "TRITON_PAD", False)
    assert pad._backend(fake(), None) == "torch"
    assert pad._backend(fake(), "triton") == "triton"  # an explicit backend wins over the switch


def test_policy_small_row_major_copies(monkeypatch):
    """Every size goes to Triton by default (a dispatcher relaunches the copy, and the tuner times
    what it serves); TRITON_PAD_MIN_BYTES, when set, keeps smaller row-major copies on torch."""
    assert pad.TRITON_PAD_MIN_BYTES == 0
    assert pad._backend(fake(), None, 64) == "triton"
    monkeypatch.setattr(pad, "TRITON_PAD_MIN_BYTES", 4 << 20)
    small, big = pad.TRITON_PAD_MIN_BYTES - 2, pad.TRITON_PAD_MIN_BYTES
    assert pad._backend(fake(), None, small) == "torch"
    assert pad._backend(fake(), None, big) == "triton"
    assert pad._backend(fake(col_stride=4095), None, small) == "triton"  # transposed: 2.3-5.5x on device
    assert pad._backend(fake(), "triton", small) == "triton"


def test_policy_refuses_what_triton_cannot_do():
    with pytest.raises(ValueError, match="not differentiable"):
        pad.zero_pad(torch.randn(3, 3, device=DEV, requires_grad=True), 4, 4, backend="triton")
    with pytest.raises(TypeError, match="complex"):
        pad.zero_pad(torch.randn(3, 3, dtype=torch.complex64, device=DEV), 4, 4, backend="triton")
    with pytest.raises(ValueError, match="unknown zero_pad backend"):
        pad.zero_pad(torch.randn(3, 3, device=DEV), 4, 4, backend="cuda")
    t = torch.randn(3, 3, device=DEV, requires_grad=True)
    pad.zero_pad(t, 4, 4).sum().backward()  # the default keeps autograd (torch path)
    assert torch.equal(t.grad, torch.ones(3, 3, device=DEV))


@pytest.mark.skipif(DEV == "cuda", reason="the CPU's default path")
def test_cpu_default_stays_torch(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("pad_copy ran on the CPU by default")
    monkeypatch.setattr(pad, "pad_copy", boom)
    assert torch.equal(pad.zero_pad(torch.ones(2, 3), 3, 4), F.pad(torch.ones(2, 3), (0, 1, 0, 1)))


# ------------------------------------------------------------------ pad+ end to end
@pytest.mark.parametrize("op", ["mm", "bmm_broadcast_b"])
def test_pad_plus_runs_on_triton_copies(monkeypatch, op):
    """pad+ choices with every operand copy made by pad_copy (forced on the CPU), against fp64."""
    from gemmtune.configs import Choice

    monkeypatch.setattr(pad, "_backend", lambda t, backend, out_bytes=None: "triton")
    kernels.padcache.WEIGHTS.clear()
    m, n, k = 19, 23, 37
    if op == "mm":
        a = torch.randn(m, k, dtype=torch.float16, device=DEV)
        b = torch.randn(n, k, dtype=torch.float16, device=DEV).t()
    else:
        a = torch.randn(2, m, k, dtype=torch.float16, device=DEV)
        b = torch.randn(1, k, n, dtype=torch.float16, device=DEV).expand(2, k, n)
    out = torch.full((*a.shape[:-2], m, n), float("nan"), dtype=torch.float16, device=DEV)
    kernels.run_choice(Choice.parse("pad+triton_mm:BM16-BN16-BK16-S1-W2-G1"), a, b, out)
    ref = a.double() @ b.double()
    assert torch.allclose(out.double(), ref, rtol=1e-2, atol=1e-2 * ref.abs().max().item())


# ------------------------------------------------------------------ two operands, one launch
@DTYPES
@pytest.mark.parametrize("kinds", [("row", "row"), ("offset", "transposed"), ("transposed", "offset_t")])
@pytest.mark.parametrize("sizes", [((1, 7), (7, 13)), ((19, 37), (37, 29)), ((5, 16), (16, 1))],
                         ids=["one_row", "primes", "n1"])
def test_pad_pair_copies_both_operands_bit_for_bit(dtype, kinds, sizes):
    """pad_pair: one launch, each operand equal to F.pad's copy bit for bit, every element written
    (garbage_new_empty), on offset and transposed views, one row, primes and N = 1."""
    (ar, ac), (br, bc) = sizes
    a, b = layout(ar, ac, kinds[0], dtype), layout(br, bc, kinds[1], dtype)
    pa, pb = (ar, ac + 3), (br + 3, bc + 5)
    ap, bp = pad.pad_pair(a, *pa, b, *pb)
    for got, t, (r, c) in ((ap, a, pa), (bp, b, pb)):
        ref = F.pad(t, (0, c - t.shape[1], 0, r - t.shape[0]))
        assert got.is_contiguous() and torch.equal(bits(got), bits(ref.contiguous()))


@DTYPES
def test_pad_pair_copies_two_batches(dtype):
    """3-D (bmm) operands: every matrix of each, one launch, transposed and offset batches."""
    a = torch.randn(3, 9, 13, dtype=dtype, device=DEV).transpose(1, 2)          # (3, 13, 9)
    b = torch.randn(4, 10, 15, dtype=dtype, device=DEV)[1:, 1:, 2:]              # (3, 9, 13), offset
    ap, bp = pad.pad_pair(a, 13, 16, b, 16, 16)
    for got, t in ((ap, a), (bp, b)):
        ref = F.pad(t, (0, 16 - t.shape[2], 0, got.shape[1] - t.shape[1]))
        assert got.shape == ref.shape and got.is_contiguous() and torch.equal(bits(got), bits(ref.contiguous()))


def test_pad_pair_int64_offsets_and_empty_operands(monkeypatch):
    """The pair's 64-bit offset path (both operands' offsets in int64 once either needs it), and an
    empty operand, which is copied on its own (nothing to fuse)."""
    monkeypatch.setattr(pad, "_INDEX32_LIMIT", 0)
    a, b = layout(5, 9, "offset", torch.float16), layout(9, 3, "transposed", torch.float16)
    ap, bp = pad.pad_pair(a, 5, 16, b, 16, 8)
    assert torch.equal(bits(ap), bits(F.pad(a, (0, 7)))) and torch.equal(bits(bp), bits(F.pad(b, (0, 5, 0, 7))))
    ap, bp = pad.pad_pair(torch.randn(0, 9, device=DEV), 0, 16, torch.randn(9, 3, device=DEV), 16, 8)
    assert ap.shape == (0, 16) and bp.shape == (16, 8) and not bp[9:].any() and not bp[:, 3:].any()


def test_pad_pair_refusals_name_the_problem():
    x = torch.randn(3, 3, device=DEV)
    with pytest.raises(ValueError, match="two 2-D or two 3-D operands"):
        pad.pad_pair(x[None], 1, 4, x, 4, 4)
    with pytest.raises(TypeError, match="does not copy"):
        pad.pad_pair(x, 3, 4, x.to(torch.complex64), 4, 4)


def test_pad_plus_pays_one_copy_launch_for_two_odd_operands(monkeypatch):
    """A pad+ mm whose A and B are both copied per call makes them in one pad_pair launch; B as a
    weight (an nn.Parameter: padcache) leaves only A's copy, on its own."""
    from gemmtune.configs import Choice

    monkeypatch.setattr(pad, "_backend", lambda t, backend, out_bytes=None: "triton")
    calls = []
    for name in ("pad_pair", "pad_copy"):
        real = getattr(pad, name)
        monkeypatch.setattr(pad, name, lambda *a, _r=real, _n=name: calls.append(_n) or _r(*a))
    kernels.padcache.WEIGHTS.clear()
    a = torch.randn(5, 13, dtype=torch.float16, device=DEV)
    b = torch.randn(13, 9, dtype=torch.float16, device=DEV)
    ch = Choice.parse("pad+triton_mm:BM16-BN16-BK16-S1-W2-G1")
    w = torch.nn.Parameter(b, requires_grad=False)
    # (the weight's first call pads it into the cache, apart: the second copies A alone)
    for bb, launches in ((b, ["pad_pair"]), (w, ["pad_copy", "pad_copy"]), (w, ["pad_copy"])):
        out = torch.full((5, 9), float("nan"), dtype=torch.float16, device=DEV)
        calls.clear()
        kernels.run_choice(ch, a, bb, out)
        ref = a.double() @ b.double()
        assert torch.allclose(out.double(), ref, rtol=1e-2, atol=1e-2 * ref.abs().max().item())
        assert calls == launches, calls
    # only N odd, A already row-major and aligned: A is read as it is, B alone is copied
    a8 = torch.randn(5, 16, dtype=torch.float16, device=DEV)
    b8 = torch.randn(16, 9, dtype=torch.float16, device=DEV)
    out = torch.full((5, 9), float("nan"), dtype=torch.float16, device=DEV)
    calls.clear()
    kernels.run_choice(ch, a8, b8, out)
    ref = a8.double() @ b8.double()
    assert torch.allclose(out.double(), ref, rtol=1e-2, atol=1e-2 * ref.abs().max().item())
    assert calls == ["pad_copy"], calls
    calls.clear()
    kernels.run_choice(ch, a8.t().contiguous().t(), b8, out)  # a column-major A is copied: both, one launch
    assert torch.allclose(out.double(), ref, rtol=1e-2, atol=1e-2 * ref.abs().max().item())
    assert calls == ["pad_pair"], calls
    # bmm: two batches in one launch; a B broadcast over the batch is padded once, on its own
    a3 = torch.randn(2, 5, 13, dtype=torch.float16, device=DEV)
    for b3, launches in ((torch.randn(2, 13, 9, dtype=torch.float16, device=DEV), ["pad_pair"]),
                         (b[None].expand(2, 13, 9), ["pad_copy", "pad_copy"])):
        out = torch.full((2, 5, 9), float("nan"), dtype=torch.float16, device=DEV)
        calls.clear()
        kernels.run_choice(ch, a3, b3, out)
        ref = a3.double() @ b3.double()
        assert torch.allclose(out.double(), ref, rtol=1e-2, atol=1e-2 * ref.abs().max().item())
        assert calls == launches, calls
    kernels.padcache.WEIGHTS.clear()


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
def test_a_tensor_on_another_gpu_is_copied_on_its_own_gpu():
    # Triton launches on the current device; the copy must still read cuda:1's memory there.
    t = torch.randn(300, 77, device="cuda:1", dtype=torch.float16)
    assert torch.cuda.current_device() == 0
    out = pad.pad_copy(t.t(), 80, 304)
    assert out.device == t.device and torch.equal(out, F.pad(t.t(), (0, 4, 0, 3)))
    assert torch.cuda.current_device() == 0
