"""pad+ choices pad a weight once per parameter version (kernels.padcache), and never serve a
stale copy: after an in-place update, inside autograd, or for a plain tensor."""
import gc

import pytest
import torch

from gemmtune import kernels
from gemmtune.configs import Choice
from gemmtune.kernels import padcache

pytestmark = pytest.mark.usefixtures("fresh_cache")
# A GPU where there is one (real kernels), else the Triton interpreter on the CPU.
DEV = "cuda" if torch.cuda.is_available() and not kernels.tiled._INTERPRETED else "cpu"


@pytest.fixture
def fresh_cache():
    if DEV == "cpu" and not kernels.tiled._INTERPRETED:
        pytest.skip("the Triton kernels need a GPU or TRITON_INTERPRET=1")
    padcache.WEIGHTS.clear()
    yield
    padcache.WEIGHTS.clear()


PAD_MM = Choice.parse("pad+triton_mm:BM16-BN16-BK16-S1-W2-G1")


def _run(x, b):
    out = torch.empty(x.shape[0], b.shape[1], dtype=x.dtype, device=x.device)
    kernels.run_choice(PAD_MM, x, b, out)
    return out


def _check(out, x, b):
    ref = x.double() @ b.double()
    assert torch.allclose(out.double(), ref, rtol=1e-2, atol=1e-2 * ref.abs().max().item())


@pytest.mark.parametrize("n,k", [(13, 37), (17, 16), (16, 9)])  # odd N, odd K, both
def test_parameter_view_is_padded_once_and_follows_updates(n, k):
    torch.manual_seed(n * k)
    w = torch.nn.Parameter(torch.randn(n, k, dtype=torch.float16, device=DEV))  # Linear weight (out, in)
    x = torch.randn(7, k, dtype=torch.float16, device=DEV)
    with torch.no_grad():
        _check(_run(x, w.t()), x, w.t())
        assert len(padcache.WEIGHTS) == 1
        cached = padcache.WEIGHTS.get(w.t(), *kernels.padded_sizes(7, n, k, 2)[1:])
        _check(_run(x, w.t()), x, w.t())
        assert padcache.WEIGHTS.get(w.t(), *kernels.padded_sizes(7, n, k, 2)[1:]) is cached  # reused
        w.mul_(-0.5)  # an optimizer step: the version changes, the copy must too
        _check(_run(x, w.t()), x, w.t())
        assert padcache.WEIGHTS.get(w.t(), *kernels.padded_sizes(7, n, k, 2)[1:]) is not cached


def test_plain_tensor_is_not_cached():
    torch.manual_seed(1)
    b = torch.randn(37, 13, dtype=torch.float16, device=DEV)
    x = torch.randn(5, 37, dtype=torch.float16, device=DEV)
    _check(_run(x, b), x, b)
    assert len(padcache.WEIGHTS) == 0


def test_autograd_is_not_cached_and_freed_parameters_leave():
    w = torch.nn.Parameter(torch.randn(13, 37, dtype=torch.float16, device=DEV))
    assert padcache.WEIGHTS.get(w.t(), 16, 40) is None  # grad enabled, requires grad
    with torch.no_grad():
        assert padcache.WEIGHTS.get(w.t(), 16, 40) is not None
    assert len(padcache.WEIGHTS) == 1
    del w
    gc.collect()
    assert len(padcache.WEIGHTS) == 0


def test_padded_copy_is_zero_outside_the_weight():
    w = torch.nn.Parameter(torch.randn(13, 37, device=DEV))
    with torch.no_grad():
        p = padcache.WEIGHTS.get(w.t(), 16, 40)
    assert p.shape == (40, 16) and p.is_contiguous()
    assert torch.equal(p[:37, :13], w.t()) and not p[37:].any() and not p[:, 13:].any()


@pytest.mark.parametrize("split_bytes", [0, 1 << 40])  # margins-only path, and F.pad
@pytest.mark.parametrize("transposed", [False, True])
def test_zero_pad_matches_f_pad(monkeypatch, split_bytes, transposed):
    from gemmtune.kernels import pad

    monkeypatch.setattr(pad, "PAD_SPLIT_BYTES", split_bytes)
    t = torch.randn(13, 7) if not transposed else torch.randn(7, 13).t()
    got = pad.zero_pad(t, 16, 8)
    assert got.is_contiguous() and got.shape == (16, 8)
    assert torch.equal(got, torch.nn.functional.pad(t, (0, 1, 0, 3)))
    assert torch.equal(pad.zero_pad(t, 13, 7), t)  # nothing to pad: a plain copy
    # margins are zero even where new_empty handed back garbage
    assert not got[13:].any() and not got[:, 7:].any()


def test_zero_pad_keeps_autograd(monkeypatch):
    from gemmtune.kernels import pad

    monkeypatch.setattr(pad, "PAD_SPLIT_BYTES", 0)
    t = torch.randn(5, 3, requires_grad=True)
    pad.zero_pad(t, 6, 4).sum().backward()
    assert torch.equal(t.grad, torch.ones(5, 3))
