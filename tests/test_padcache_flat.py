"""Parameters that are views of one flat vector (``vector_to_parameters``) and pad+ weight copies.

Found by session 45's CPU hunts (training use, adversarial inputs); both tests failed before the
fix. A pad+ layer keeps a padded copy of its weight per parameter version (kernels.padcache), keyed
by the parameter's version counter, data pointer, view and storage identity.
``torch.nn.utils.vector_to_parameters`` rebinds each parameter's ``.data`` to a view of the flat
vector it is given; called again with the same vector after that vector was written in place (an
evolution-strategies loop: ``theta.add_(step)``, then ``vector_to_parameters(theta, ...)``), every
part of the key was unchanged (the write bumped the vector's counter, not the parameter's; same
storage, same address), so the layer kept multiplying the old weights while torch's layer used the
new ones. A parameter that is part of a larger storage is no longer cached."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters

import gemmtune
from gemmtune import kernels
from gemmtune.kernels import padcache

DEV = "cuda" if torch.cuda.is_available() and not kernels.tiled._INTERPRETED else "cpu"
PAD_MM = "pad+triton_mm:BM16-BN16-BK16-S1-W2-G1"


@pytest.fixture
def pad_linear():
    if DEV == "cpu" and not kernels.tiled._INTERPRETED:
        pytest.skip("the Triton kernels need a GPU or TRITON_INTERPRET=1")
    padcache.WEIGHTS.clear()
    torch.manual_seed(0)
    lin = torch.nn.Linear(31, 17, device=DEV)  # odd N and K: pad+ pads the weight
    d = gemmtune.compile_mm(n=17, k=31, dtype="float32", layout_b="col", hints={"m": [4]},
                            tune_fn=lambda ps, **kw: {p.key: PAD_MM for p in ps}, progress=False)
    gemmtune.nn.Linear.from_linear(lin, d)
    yield lin
    padcache.WEIGHTS.clear()


def test_vector_to_parameters_of_a_vector_written_in_place_is_seen(pad_linear):
    lin = pad_linear
    x = torch.randn(4, 31, device=DEV)
    theta = parameters_to_vector(lin.parameters()).detach().clone()
    with torch.no_grad():
        vector_to_parameters(theta, lin.parameters())
        lin(x)  # the padded copy of W is kept
        theta.mul_(-2.0)  # an in-place update of the flat parameters (an ES / hypernetwork step)
        vector_to_parameters(theta, lin.parameters())  # the parameters are set from it again
        got = lin(x)
        want = F.linear(x, lin.weight, lin.bias)  # what torch's layer computes now
    err = (got - want).abs().max().item()
    assert err < 1e-3, f"stale padded weight after vector_to_parameters: max err {err:.3g}"


def test_patched_linear_after_vector_to_parameters_and_an_update_of_the_vector():
    # pad+aten: pads like every pad+ choice, then torch.mm (no Triton needed)
    padcache.WEIGHTS.clear()
    torch.manual_seed(1)
    lin = torch.nn.Linear(23, 21)
    gemmtune.patch(torch.nn.Sequential(lin), hints={"m": [8]}, progress=False,
                   tune_fn=lambda ps, **kw: {p.key: "pad+aten" for p in ps})
    lin.requires_grad_(False)
    x = torch.randn(6, 23)
    vec = torch.randn(21 * 23 + 21)
    vector_to_parameters(vec, lin.parameters())  # weight, bias: views of vec
    want = lambda: F.linear(x.double(), lin.weight.double(), lin.bias.double())  # noqa: E731
    torch.testing.assert_close(lin(x).double(), want(), rtol=1e-4, atol=1e-3)
    vec.mul_(3)  # the parameters change with it (torch's F.linear sees the new values)
    torch.testing.assert_close(lin(x).double(), want(), rtol=1e-4, atol=1e-3)
    assert len(padcache.WEIGHTS) == 0  # a view of a larger storage is never cached
    padcache.WEIGHTS.clear()
