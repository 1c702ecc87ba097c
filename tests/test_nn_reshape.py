"""Patched layers whose weight was replaced by one of another shape after ``patch``
(``layer.weight = nn.Parameter(...)``, HF ``resize_token_embeddings`` tying a larger vocabulary to
an lm_head, a pruned head). Their dispatcher's N and K are static: such a call raised the
dispatcher's "static N" / "static K" ValueError from deep inside it. Now it runs torch's own
forward (eager and traced by torch.compile) with one warning per layer, and re-running
``gemmtune.patch`` tunes the new shape.

CPU: the Triton interpreter (conftest), a fake tuner, results against fp64 products.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from gemmtune.nn import patch
from gemmtune.verify import compare

from test_eager import TRITON, _grad_mode, _tune  # noqa: F401 - _grad_mode: its autouse fixture applies here too


def _patched(winner=TRITON, bias=True, dtype=torch.float16):
    """A patched Linear(32, 48) (the aten winner converted too: its cached F.linear path)."""
    model = torch.nn.Sequential(torch.nn.Linear(32, 48, bias=bias)).to(dtype)
    patch(model, hints={"m": [8]}, tune_fn=_tune(winner), progress=False, convert_aten_layers=winner == "aten")
    return model[0]


def _reshape(layer, n, k, bias, dtype=torch.float16):
    layer.weight = torch.nn.Parameter(torch.randn(n, k, dtype=dtype))
    layer.bias = torch.nn.Parameter(torch.randn(n, dtype=dtype)) if bias else None


def _want(x, layer):
    b = layer.bias
    return torch.nn.functional.linear(x.double(), layer.weight.detach().double(),
                                      None if b is None else b.detach().double())


def _calls(fn, n=2):
    """``fn()`` n times; (results, the RuntimeWarnings they raised)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = [fn() for _ in range(n)]
    return out, [w for w in caught if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize("winner", [TRITON, "aten"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("new", [(40, 32), (48, 24), (56, 40)], ids=["out", "in", "both"])
def test_a_linear_given_a_weight_of_another_shape_runs_f_linear_and_warns_once(winner, bias, new):
    torch.manual_seed(0)
    layer = _patched(winner, bias)
    _reshape(layer, *new, bias)
    ys, caught = _calls(lambda: layer(torch.randn(5, new[1], dtype=torch.float16)), 1)
    with torch.no_grad():
        for _ in range(3):  # the first sight of the shape, then later calls of it
            x = torch.randn(2, 5, new[1], dtype=torch.float16)
            (y,), more = _calls(lambda: layer(x), 1)
            assert y.shape == (2, 5, new[0]) and compare(y, _want(x, layer), 2e-3).ok
            caught += more
    assert len(caught) == 1, [str(w.message) for w in caught]
    msg = str(caught[0].message)
    assert "gemmtune.nn.Linear" in msg and f"now {new}" in msg and "N=48, K=32" in msg
    assert "re-run gemmtune.patch" in msg
    assert not layer.eager_paths  # no path cached for a shape the dispatcher was not tuned for


@pytest.mark.parametrize("grad", [False, True])
def test_a_cached_tuned_path_then_a_weight_of_another_out_features(grad):
    """The eager path is cached by the input's shape, which a new out_features keeps: the cached
    tuned path must not run the old dispatcher's kernel on the new weight."""
    torch.manual_seed(1)
    layer = _patched(TRITON)
    x = torch.randn(5, 32, dtype=torch.float16)
    with torch.no_grad():
        layer(x)
    assert layer.eager_paths == {(x.shape, torch.float16): "tuned"}
    _reshape(layer, 40, 32, True)
    torch.set_grad_enabled(grad)  # with grad, the tuned path runs the gemmtune::mm op
    ys, caught = _calls(lambda: layer(torch.randn(5, 32, dtype=torch.float16).copy_(x)), 3)
    for y in ys:
        assert y.shape == (5, 40) and compare(y.detach(), _want(x, layer), 2e-3).ok
    assert len(caught) == 1 and "now (40, 32)" in str(caught[0].message)
    if grad:
        ys[0].float().sum().backward()
        assert layer.weight.grad is not None and layer.weight.grad.shape == (40, 32)


def test_a_cached_tuned_path_then_a_weight_of_another_in_features_gets_torchs_error():
    """The old input shape, cached as tuned, against a weight of another in_features: torch's own
    shape error, as an unpatched layer gives, not the dispatcher's."""
    layer = _patched(TRITON)
    x = torch.randn(5, 32, dtype=torch.float16)
    with torch.no_grad():
        layer(x)
        _reshape(layer, 48, 24, True)
        with pytest.warns(RuntimeWarning, match="N=48, K=32"), pytest.raises(RuntimeError, match="cannot be multiplied"):
            layer(x)


def test_a_patched_conv1d_given_a_weight_of_another_shape_runs_its_own_forward():
    pytest.importorskip("transformers")
    from transformers.pytorch_utils import Conv1D

    torch.manual_seed(2)
    for n, k in ((40, 32), (48, 24)):
        conv = Conv1D(48, 32).half()
        torch.nn.init.normal_(conv.bias)
        patch(torch.nn.Sequential(conv), hints={"m": [8]}, tune_fn=_tune(TRITON), progress=False)
        x0 = torch.randn(5, 32, dtype=torch.float16)
        with torch.no_grad():
            conv(x0)  # a cached tuned path for x0's shape
        conv.weight = torch.nn.Parameter(torch.randn(k, n, dtype=torch.float16))  # [in, out]
        conv.bias = torch.nn.Parameter(torch.randn(n, dtype=torch.float16))
        conv.nf = n  # (Conv1D's own forward shapes its output by nf)
        caught = []
        with torch.no_grad():
            for shape in ((5, k), (3, 7, k), (5, k)):  # first sights, then a later call
                x = torch.randn(*shape, dtype=torch.float16)
                (y,), more = _calls(lambda: conv(x), 1)
                caught += more
                want = x.double() @ conv.weight.detach().double() + conv.bias.detach().double()
                assert y.shape == (*shape[:-1], n) and compare(y, want, 2e-3).ok
        assert len(caught) == 1, [str(w.message) for w in caught]
        msg = str(caught[0].message)
        assert "Conv1D" in msg and f"now {(k, n)} (N={n}, K={k})" in msg and "N=48, K=32" in msg


def _ops(layer_or_model, x):
    """The call_function targets torch.compile traced for ``layer_or_model(x)``, and its result."""
    ops = []

    def backend(gm, example_inputs):
        ops.extend(str(node.target) for node in gm.graph.nodes if node.op == "call_function")
        return gm.forward
    torch._dynamo.reset()
    with torch.no_grad():
        y = torch.compile(layer_or_model, backend=backend)(x)
    return ops, y


@pytest.mark.parametrize("new", [(40, 32), (48, 24)], ids=["out", "in"])
def test_compiled_a_reshaped_linear_traces_torchs_f_linear(new):
    torch.manual_seed(3)
    layer = _patched(TRITON, dtype=torch.float32)
    ops, _ = _ops(layer, torch.randn(5, 32))
    assert any("gemmtune" in o for o in ops), ops  # the control: the op, before the weight changed
    _reshape(layer, *new, True, dtype=torch.float32)
    x = torch.randn(5, new[1])
    with pytest.warns(RuntimeWarning, match="re-run gemmtune.patch"):
        ops, y = _ops(layer, x)
    assert not any("gemmtune" in o for o in ops), ops
    assert compare(y, _want(x, layer), 1e-4).ok


def test_compiled_a_reshaped_conv1d_traces_its_own_forward():
    pytest.importorskip("transformers")
    from transformers.pytorch_utils import Conv1D

    torch.manual_seed(4)
    conv = Conv1D(48, 32)
    patch(torch.nn.Sequential(conv), hints={"m": [8]}, tune_fn=_tune(TRITON), progress=False)
    conv.weight = torch.nn.Parameter(torch.randn(32, 40))
    conv.bias = torch.nn.Parameter(torch.randn(40))
    conv.nf = 40
    x = torch.randn(5, 32)
    with pytest.warns(RuntimeWarning, match="Conv1D"):
        ops, y = _ops(conv, x)
    assert not any("gemmtune" in o for o in ops), ops
    assert compare(y, x.double() @ conv.weight.detach().double() + conv.bias.detach().double(), 1e-4).ok


@pytest.mark.parametrize("winner", [TRITON, "aten"])
def test_patch_again_tunes_the_new_shape(winner):
    """The warning's advice works: a second ``patch`` puts the layer on a dispatcher of its new
    shape (it kept the old one: a converted layer was only re-attached to a given dispatcher)."""
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(32, 48)).half()
    patch(model, hints={"m": [8]}, tune_fn=_tune(winner), progress=False, convert_aten_layers=winner == "aten")
    layer = model[0]
    _reshape(layer, 40, 32, True)
    patch(model, hints={"m": [8]}, tune_fn=_tune(winner), progress=False)
    assert model[0] is layer and (layer.dispatcher.dims["n"], layer.dispatcher.dims["k"]) == (40, 32)
    x = torch.randn(5, 32, dtype=torch.float16)
    with torch.no_grad():
        ys, caught = _calls(lambda: layer(x), 2)
    assert not caught, [str(w.message) for w in caught]
    assert all(compare(y, _want(x, layer), 2e-3).ok for y in ys)
    assert layer.eager_paths == {(x.shape, torch.float16): "tuned" if winner == TRITON else "aten"}
