"""An ``out`` interleaved with an input in one buffer (every other column, a complex tensor's real and
imaginary parts) shares no byte with it and is taken; a view that does share bytes is still refused
(kernels.base.out_overlap, _lattice_apart)."""
import pytest
import torch

from gemmtune import kernels
from gemmtune.configs import Choice
from gemmtune.kernels.base import _lattice_apart, out_overlap

CHOICES = ("aten", "triton_mm:BM16-BN16-BK16-S1-W2-G8", "splitk:BM16-BN16-BK16-S1-W2-G8-SK2-det")


@pytest.mark.parametrize("cid", CHOICES)
def test_column_interleaved_out_is_taken_and_right(cid):
    n, k = 19, 37
    buf = torch.randn(n, 2 * k)  # a [:, 1::2], out [:, 0::2] of one buffer: never the same byte
    a = buf[:, 1::2]
    b = torch.randn(k, n)
    out = torch.empty(n, 2 * n)[:, 0::2]
    ref = a.double() @ b.double()
    same = buf[:, 0::2][:, :n]  # out in the same buffer as a, interleaved with it
    assert same.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    keep_a = a.clone()
    kernels.run_choice(Choice.parse(cid), a, b, same)
    assert torch.equal(a, keep_a)  # the input's columns were not written
    torch.testing.assert_close(same.double(), ref, rtol=1e-4, atol=1e-4)
    kernels.run_choice(Choice.parse(cid), a, b, out)
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-4)


def test_complex_real_and_imaginary_parts_are_apart():
    z = torch.randn(8, 8, dtype=torch.complex64)
    r = torch.view_as_real(z)
    re, im = r[..., 0], r[..., 1]
    assert _lattice_apart(re, im) and _lattice_apart(im, re)
    assert out_overlap(re, im, torch.randn(8, 8)) is None


@pytest.mark.parametrize("make", [
    lambda buf: (buf[:, 0:8], buf[:, 1:9]),           # shifted by one column: shares 7 columns
    lambda buf: (buf[:, 0:8], buf[:, 0:8]),           # the same view
    lambda buf: (buf[:, 0:16:2], buf[:, 2:18:2]),     # same parity, shifted by one step
    lambda buf: (buf[:, 0:8], buf[:, 0:16:2]),        # contiguous against every other column
    lambda buf: (buf[0:8], buf[1:9]),                 # rows shifted by one
])
def test_views_that_share_bytes_are_still_refused(make):
    buf = torch.randn(16, 18)
    out, a = make(buf)
    a = a[:8, :8]
    out = out[:8, :8]
    assert not _lattice_apart(out, a)
    why = out_overlap(out, a, torch.randn(8, 8))
    assert why is not None and "out overlaps a's memory" in why
    with pytest.raises(ValueError, match="out overlaps a's memory"):
        kernels.run_choice(Choice.parse("aten"), a, torch.randn(8, 8), out)


def test_elements_of_other_sizes_and_offsets():
    raw = torch.zeros(64, dtype=torch.uint8)
    f32 = raw[:32].view(torch.float32)        # 8 floats, bytes 0..31
    f16 = raw[2:34].view(torch.float16)       # 16 halves from byte 2: the byte grids meet
    assert not _lattice_apart(f32, f16)
    odd = raw[1:].as_strided((8,), (4,))      # uint8 elements at bytes 1, 5, 9, ...
    assert _lattice_apart(f32[::2], raw[4:].as_strided((4,), (8,)))  # bytes 0-3, 8-11, ... vs 4, 12, ...
    assert not _lattice_apart(f32, odd)
    one = raw[40:41]  # a single element: its own address only
    assert _lattice_apart(one, raw[41:42]) and not _lattice_apart(one, raw[40:42])


# --- row-interleaved and side-by-side views (_rows_apart, session 59) ---

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gemmtune.kernels.base import _rows_apart  # noqa: E402


def _bytes_of(t: torch.Tensor) -> set[int]:
    """Every byte address ``t``'s elements occupy (brute force, for small views)."""
    es, base = t.element_size(), t.data_ptr()
    idx = torch.zeros(t.shape, dtype=torch.int64)
    for d, (n, s) in enumerate(zip(t.shape, t.stride())):
        shape = [1] * t.dim()
        shape[d] = n
        idx = idx + (torch.arange(n) * s).view(shape)
    return {base + int(i) * es + b for i in idx.flatten().tolist() for b in range(es)}


_DTYPES = (torch.uint8, torch.float16, torch.float32, torch.float64)


@st.composite
def _view(draw, raw):
    dt = draw(st.sampled_from(_DTYPES))
    es = torch.tensor([], dtype=dt).element_size()
    whole = raw[: raw.numel() // es * es].view(dt)
    dims = draw(st.integers(0, 3))
    shape = [draw(st.integers(1, 5)) for _ in range(dims)]
    stride = [draw(st.integers(0, 9)) for _ in range(dims)]  # (torch has no negative strides)
    last = sum((n - 1) * s for n, s in zip(shape, stride))  # the last element's offset from the first
    if last >= whole.numel():
        return whole[:1]
    return whole.as_strided(shape, stride, draw(st.integers(0, whole.numel() - 1 - last)))


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_rows_apart_never_passes_views_that_share_a_byte(data):
    raw = torch.zeros(96, dtype=torch.uint8)
    x, y = data.draw(_view(raw)), data.draw(_view(raw))
    if _rows_apart(x, y):
        assert not (_bytes_of(x) & _bytes_of(y)), (x.shape, x.stride(), x.storage_offset(), x.dtype,
                                                    y.shape, y.stride(), y.storage_offset(), y.dtype)


@pytest.mark.parametrize("make", [
    lambda buf: (buf[0::2], buf[1::2]),                # every other row
    lambda buf: (buf[1::2], buf[0::2]),
    lambda buf: (buf[:, :7], buf[:, 7:]),              # column blocks side by side
    lambda buf: (buf[0::3, 2:9], buf[1::3, :]),        # rows of another phase, any columns
    lambda buf: (buf[2, :5], buf[::2, 5:]),            # one run against rows past it
])
def test_row_patterns_that_never_meet_are_apart(make):
    buf = torch.randn(12, 18)
    x, y = make(buf)
    assert _rows_apart(x, y) and _rows_apart(y, x)
    assert not (_bytes_of(x) & _bytes_of(y))


@pytest.mark.parametrize("make", [
    lambda buf: (buf[0::2], buf[2::2]),                # same phase
    lambda buf: (buf[:, :8], buf[:, 7:]),              # blocks sharing a column
    lambda buf: (buf[0::2, :10], buf.view(-1).as_strided((4, 4), (25, 1), 30)),  # another pitch: rows meet
])
def test_row_patterns_that_meet_are_not_apart(make):
    buf = torch.randn(12, 18)
    x, y = make(buf)
    assert _bytes_of(x) & _bytes_of(y)
    assert not _rows_apart(x, y)


@pytest.mark.parametrize("cid", CHOICES)
def test_row_interleaved_out_is_taken_and_right(cid):
    m, n, k = 9, 13, 13  # out and a: every other row of one [2m, k] buffer (n == k: the same row length)
    buf = torch.randn(2 * m, k)
    a, out = buf[1::2], buf[0::2]
    b = torch.randn(k, n)
    ref = a.double() @ b.double()
    keep_a = a.clone()
    assert out_overlap(out, a, b) is None
    kernels.run_choice(Choice.parse(cid), a, b, out)
    assert torch.equal(a, keep_a)  # a's rows were not written
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-4)
