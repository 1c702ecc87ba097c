"""Patched layers against torch's own under forward-mode AD and torch.func transforms, and with
in_features = 0 (each test failed before its fix)."""
from __future__ import annotations

import contextlib
import copy
import warnings

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch.func import functional_call, grad, jvp, vmap

import gemmtune
from gemmtune.kernels import tiled

TRITON = "triton_mm:BM16-BN16-BK16-S1-W2-G8"

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() and not tiled._INTERPRETED,
                                reason="the Triton kernels need a GPU or TRITON_INTERPRET=1")


def _tune(problems, **kw):
    return {p.key: TRITON for p in problems}


def _mlp(k=32, n=48):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(k, n), torch.nn.ReLU(), torch.nn.Linear(n, 16))
    ref = copy.deepcopy(model)
    gemmtune.patch(model, hints={"m": [8]}, tune_fn=_tune, eager_policy="tuned", progress=False)
    assert type(model[0]) is gemmtune.nn.Linear and model[0].dispatcher.hint_choices[0].choice.id == TRITON
    return model, ref


def _conv1d_model():
    Conv1D = pytest.importorskip("transformers.pytorch_utils").Conv1D
    torch.manual_seed(0)
    model = torch.nn.Sequential(Conv1D(48, 32), torch.nn.ReLU(), Conv1D(16, 48))
    ref = copy.deepcopy(model)
    gemmtune.patch(model, hints={"m": [8]}, tune_fn=_tune, eager_policy="tuned", progress=False)
    assert type(model[0]).__name__ == "GemmtuneConv1D"
    return model, ref


@pytest.mark.parametrize("make", [_mlp, _conv1d_model], ids=["linear", "conv1d"])
@pytest.mark.parametrize("frozen", [False, True])
def test_forward_ad_tangent_is_kept(make, frozen):
    """A dual input under no_grad (or into frozen weights) ran the tuned kernel on its primal and
    dropped the tangent (unpack_dual gave None, no error); torch.func.jvp of the patched model gave
    a zero tangent."""
    model, ref = make()
    if frozen:
        model.requires_grad_(False)
        ref.requires_grad_(False)
    x, t = torch.randn(8, 32), torch.randn(8, 32)
    for _ in range(2):  # the second call takes the eager path cached for the shape
        with torch.no_grad(), fwAD.dual_level():
            y, ty = fwAD.unpack_dual(model(fwAD.make_dual(x, t)))
            y0, ty0 = fwAD.unpack_dual(ref(fwAD.make_dual(x, t)))
        torch.testing.assert_close(y, y0, rtol=1e-4, atol=1e-4)
        assert ty is not None
        torch.testing.assert_close(ty, ty0, rtol=1e-4, atol=1e-4)
        got, want = jvp(model, (x,), (t,)), jvp(ref, (x,), (t,))
        torch.testing.assert_close(got[0], want[0], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(got[1], want[1], rtol=1e-4, atol=1e-4)
    # outside the transforms the tuned kernel still runs
    with torch.no_grad():
        torch.testing.assert_close(model(x), ref(x), rtol=1e-4, atol=1e-4)
    assert model[0].eager_paths == {(torch.Size([8, 32]), torch.float32): "tuned"}


def test_vmap_and_per_sample_grads():
    """vmap under no_grad raised (a BatchedTensor has no storage to read) and torch.func.grad
    raised from the custom op's autograd; torch's Linear runs both."""
    model, ref = _mlp()
    xb = torch.randn(5, 8, 32)
    with torch.no_grad():
        torch.testing.assert_close(vmap(model)(xb), vmap(ref)(xb), rtol=1e-4, atol=1e-4)
    params = {k: v.detach() for k, v in ref.named_parameters()}

    def per_sample(mod):
        loss = lambda p, x: functional_call(mod, p, (x,)).square().sum()  # noqa: E731
        return vmap(grad(loss), in_dims=(None, 0))(params, xb)
    got, want = per_sample(model), per_sample(ref)
    for k in params:
        torch.testing.assert_close(got[k], want[k], rtol=1e-4, atol=1e-4)


def test_zero_in_features():
    """Linear(0, n) gives its bias broadcast; the patched layer's first eager call raised
    ZeroDivisionError (M computed as numel // in_features)."""
    model, ref = _mlp(k=0, n=8)
    for m in (8, 0):
        x = torch.randn(m, 0)
        with torch.no_grad():
            torch.testing.assert_close(model(x), ref(x))


def test_bmm_module_and_route_keep_forward_ad_tangents():
    """nn.BMM and route_bmm dropped a dual input's tangent the same way (tuned kernel on the primal)."""
    d = gemmtune.compile_bmm(batch=2, n=12, k=16, dtype="fp32", hints={"m": [8]},
                             tune_fn=lambda ps, **kw: {p.key: TRITON for p in ps})
    a, b, ta = torch.randn(2, 8, 16), torch.randn(2, 16, 12), torch.randn(2, 8, 16)
    want = jvp(lambda x: torch.bmm(x, b), (a,), (ta,))
    got = jvp(lambda x: gemmtune.nn.BMM(d)(x, b), (a,), (ta,))
    torch.testing.assert_close(got[1], want[1], rtol=1e-4, atol=1e-4)
    with gemmtune.nn.route_bmm(d) as route:
        got = jvp(lambda x: torch.bmm(x, b), (a,), (ta,))
        with torch.no_grad(), fwAD.dual_level():
            y, t = fwAD.unpack_dual(torch.bmm(fwAD.make_dual(a, ta), b))
        plain = torch.bmm(a, b)
    torch.testing.assert_close(got[1], want[1], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(t, want[1], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(y, want[0], rtol=1e-4, atol=1e-4)
    assert route.routed == 1  # the plain call outside the transforms still took the tuned route
    torch.testing.assert_close(plain, torch.bmm(a, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("make", [_mlp, _conv1d_model], ids=["linear", "conv1d"])
@pytest.mark.parametrize("bias_shape", [(1,), ()])
def test_a_broadcasting_bias_runs_as_torchs(make, bias_shape):
    """A bias replaced by one that broadcasts over the outputs (shape (1,) or ()), which F.linear and
    Conv1D take: the patched layer raised the dispatcher's "bias must have shape (N,)"; now it runs
    torch's forward for it, eager and compiled."""
    model, ref = make()
    with torch.no_grad():
        b = torch.randn(bias_shape)
        model[0].bias = torch.nn.Parameter(b.clone())
        ref[0].bias = torch.nn.Parameter(b.clone())
        x = torch.randn(8, 32)
        for _ in range(2):  # the first call measures the paths, the second takes the cached one
            torch.testing.assert_close(model(x), ref(x), rtol=1e-4, atol=1e-4)
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(model, backend="aot_eager")(x), ref(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("make", [_mlp, _conv1d_model], ids=["linear", "conv1d"])
@pytest.mark.parametrize("no_grad", [True, False], ids=["no_grad", "grad"])
def test_jit_trace_records_torchs_own_forward(make, no_grad):
    """torch.jit.trace of a patched model under no_grad raised "Problem.m must be a non-negative
    int, got tensor(8)" from deep in the dispatcher (a traced size is a tensor); with grad it
    recorded the gemmtune::mm op, which a saved TorchScript cannot run without this process's
    dispatchers. Traced, a patched layer records torch's own forward."""
    model, ref = make()
    x = torch.randn(8, 32)
    with torch.no_grad():
        model(x)  # an eager call first: the shape's path is cached
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit.trace is deprecated in torch 2.13
        with torch.no_grad() if no_grad else contextlib.nullcontext():
            traced = torch.jit.trace(model, x, check_trace=False)
    assert "gemmtune::" not in str(traced.inlined_graph)
    with torch.no_grad():
        for m in (8, 3):
            xm = torch.randn(m, 32)
            torch.testing.assert_close(traced(xm), ref(xm), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(model(x), ref(x), rtol=1e-4, atol=1e-4)
    assert model[0].eager_paths == {(torch.Size([8, 32]), torch.float32): "tuned"}  # outside a trace


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=["coo", "csr"])
def test_a_sparse_input_runs_torchs_own_forward_and_a_dispatcher_names_it(layout):
    """torch's nn.Linear takes a sparse input; a patched layer raised from Triton's launcher
    ("Cannot access data pointer of Tensor that doesn't have storage", "Sparse CSR tensors do not
    have strides"), and so did a dispatcher called directly, at first sight and after a dense call
    of the same shape (its fast path's key has no layout)."""
    model, ref = _mlp()
    x = torch.randn(8, 32)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CSR support is in beta
        model(x)  # the shape's tuned path is cached first
        xs = x.to_sparse(layout=layout)
        torch.testing.assert_close(model[0](xs), ref[0](x), rtol=1e-4, atol=1e-4)
        assert model[0].eager_paths == {(torch.Size([8, 32]), torch.float32): "tuned"}  # dense calls still tuned
        d = model[0].dispatcher
        w = model[0].weight.t()
        d(x, w)  # dense first: the fast path has the shape
        with pytest.raises(TypeError, match=f"a is a {layout} tensor"):
            d(xs, w)
        with pytest.raises(TypeError, match=f"a is a {layout} tensor"):
            gemmtune.matmul(xs, w, choice=TRITON)


@pytest.mark.parametrize("make", [_mlp, _conv1d_model], ids=["linear", "conv1d"])
def test_fx_symbolic_trace_records_torchs_own_forward(make):
    """torch.fx treats nn.Linear as a leaf and traces through a patched layer, whose checks on
    the input raised "symbolically traced variables cannot be used as inputs to control flow".
    It now records torch's own forward, and the traced module computes the layer's product."""
    model, ref = make()
    gm = torch.fx.symbolic_trace(model)
    assert "gemmtune" not in gm.code
    x = torch.randn(8, 32)
    with torch.no_grad():
        torch.testing.assert_close(gm(x), ref(x), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(model(x), ref(x), rtol=1e-4, atol=1e-4)
    assert model[0].eager_paths == {(torch.Size([8, 32]), torch.float32): "tuned"}  # the model itself still tuned


def _plain_conv1d():
    Conv1D = pytest.importorskip("transformers.pytorch_utils").Conv1D
    torch.manual_seed(0)
    return torch.nn.Sequential(Conv1D(48, 32), torch.nn.ReLU(), Conv1D(16, 48))


def _plain_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16))


@pytest.mark.parametrize("make", [_plain_mlp, _plain_conv1d], ids=["linear", "conv1d"])
def test_a_model_patched_while_another_thread_calls_it(monkeypatch, make):
    """``patch`` (or ``load_patched``) onto a model other threads are serving. Forced interleaving:
    the patching thread stops inside a layer's conversion (at its dispatcher's registration) while
    the model is called. The layer's class was switched first, so the call ran the patched forward
    on a layer with no path table yet: AttributeError '_gemmtune_paths'."""
    import threading
    from gemmtune import torch_ops

    model = make()
    ref = copy.deepcopy(model)
    x = torch.randn(5, 32)
    paused, go, errors = threading.Event(), threading.Event(), []
    register = torch_ops.REGISTRY.register

    def register_slowly(dispatcher):
        if threading.current_thread().name == "patcher" and not paused.is_set():
            paused.set()
            assert go.wait(30)
        return register(dispatcher)
    monkeypatch.setattr(torch_ops.REGISTRY, "register", register_slowly)

    def patcher():
        try:
            gemmtune.patch(model, hints={"m": [8]}, tune_fn=_tune, eager_policy="tuned", progress=False)
        except Exception as e:  # (an assert in a thread would be lost)
            errors.append(repr(e))

    t = threading.Thread(target=patcher, name="patcher", daemon=True)
    t.start()
    try:
        assert paused.wait(30)
        with torch.no_grad():
            torch.testing.assert_close(model(x), ref(x))  # the layer as torch's, or patched: not half of each
    finally:
        go.set()
        t.join(30)
    assert not t.is_alive() and not errors
    with torch.no_grad():
        torch.testing.assert_close(model(x), ref(x))


class _Counted(torch.nn.Module):
    """A parametrization that counts its evaluations (and doubles the weight)."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, w):
        self.calls += 1
        return w * 2


@pytest.mark.parametrize("make", [_mlp, _conv1d_model], ids=["linear", "conv1d"])
def test_a_layer_parametrized_after_patch_computes_its_weight_once_a_call(make):
    """``torch.nn.utils.parametrize`` on a patched layer: its weight is computed at each read, and
    the patched forward read it three times a call (torch's reads it once). spectral_norm in train
    mode then ran three power iterations a call: other outputs than torch's (6e-3 off on the
    first call), and other ``_u`` / ``_v`` buffers after it."""
    from torch.nn.utils import parametrize
    from torch.nn.utils.parametrizations import spectral_norm

    model, ref = make()
    for m in (model, ref):
        torch.manual_seed(1)
        spectral_norm(m[0])
        parametrize.register_parametrization(m[2], "weight", _Counted())
    x = torch.randn(8, 32)
    counts = [m[2].parametrizations.weight[0] for m in (model, ref)]
    before = [c.calls for c in counts]  # (register_parametrization evaluates it once)
    for _ in range(2):
        y, y0 = model(x), ref(x)
        torch.testing.assert_close(y, y0, rtol=1e-5, atol=1e-5)
        y.square().sum().backward()
        y0.square().sum().backward()
    assert [c.calls - b for c, b in zip(counts, before)] == [2, 2]  # once a call, as torch's
    for (name, b), b0 in zip(model[0].named_buffers(), ref[0].buffers()):
        torch.testing.assert_close(b, b0, rtol=1e-5, atol=1e-5, msg=name)
    for (name, p), p0 in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, p0.grad, rtol=1e-4, atol=1e-4, msg=name)
    with torch.no_grad():  # eval, no grad: the cached eager path
        model.eval(), ref.eval()
        torch.testing.assert_close(model(x), ref(x), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(model(x), ref(x), rtol=1e-5, atol=1e-5)


def test_torch_save_of_a_layer_parametrized_after_patch_is_refused():
    """A patched layer pickles as torch's own class from its ``__dict__``; parametrized after
    ``patch``, that wrote an ``nn.Linear`` with no ``weight`` (parametrize moves it into
    ``parametrizations``): the file loaded, and the model raised AttributeError 'weight' when
    called. torch refuses to pickle a parametrized module (use state_dict); so does gemmtune."""
    import io
    from torch.nn.utils import parametrize

    model, ref = _mlp()
    parametrize.register_parametrization(model[0], "weight", _Counted())
    buf = io.BytesIO()
    with pytest.raises(RuntimeError, match="parametrized .*state_dict"):
        torch.save(model, buf)
    parametrize.remove_parametrizations(model[0], "weight")
    buf = io.BytesIO()
    torch.save(model, buf)  # without its parametrization it saves as before
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    x = torch.randn(4, 32)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x), rtol=1e-4, atol=1e-4)


def test_patch_names_the_lazy_and_parametrized_linears_it_leaves():
    """A LazyLinear before its first call (no in_features yet) and a Linear parametrized before
    ``patch`` (parametrize's own class) are not converted: patch left them with no warning, and
    the LazyLinear became a plain, unpatched nn.Linear at its first call. Patched after the first
    call (or before parametrizing) they convert."""
    from torch.nn.utils.parametrizations import weight_norm

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.LazyLinear(32), torch.nn.ReLU(), weight_norm(torch.nn.Linear(32, 48)),
                                torch.nn.ReLU(), torch.nn.Linear(48, 16))
    with pytest.warns(RuntimeWarning, match=r"left 2 nn.Linear layer\(s\) as they were: 0 \(a LazyLinear not yet "
                      r"called: call the model once before patch\), 2 \(parametrized: patch before parametrizing\)"):
        gemmtune.patch(model, hints={"m": [8]}, tune_fn=_tune, eager_policy="tuned", progress=False)
    assert type(model[4]) is gemmtune.nn.Linear
    x = torch.randn(8, 20)
    want = model(x)
    assert type(model[0]) is torch.nn.Linear
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the MHA's out_proj (used by weight, never called) is no news
        gemmtune.patch(torch.nn.MultiheadAttention(32, 4), hints={"m": [8]}, tune_fn=_tune, progress=False)
        gemmtune.patch(model[:2], hints={"m": [8]}, tune_fn=_tune, eager_policy="tuned", progress=False)
    assert type(model[0]) is gemmtune.nn.Linear
    torch.testing.assert_close(model(x), want, rtol=1e-4, atol=1e-4)
