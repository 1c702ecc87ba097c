"""Retired layers (gemmtune.nn.retire) and their GEMM under torch.compile (gemmtune.compile_route).

A converted layer whose every eager shape runs cuBLAS goes back to torch's own class (no eager
cost); compiled, a pre-grad pass puts its dispatcher's ``gemmtune::mm`` where torch's forward traced
``F.linear`` / ``torch.addmm``. CPU: the tuned kernels run in the Triton interpreter (fp32 and fp16).
"""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
import torch.nn.functional as F

import gemmtune
from gemmtune import compile_route
from gemmtune import nn as gnn

from test_modeltune import Conv1D  # noqa: E402 - transformers' Conv1D's shape, as patch sees it

TRITON = "triton_mm:BM16-BN64-BK64-S1-W2-G8"
TOL = {torch.float32: 1e-4, torch.float16: 2e-2}


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    """Each test compiles anew: dynamo's cache of Sequential.forward would otherwise hand one test's
    graph to the next (the backend, and so the pass, not called again)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _tune(winner):
    return lambda problems, **kw: {p.key: winner for p in problems}


def _model(dtype=torch.float32, conv=False, **kw):
    torch.manual_seed(0)
    first = Conv1D(48, 32) if conv else torch.nn.Linear(32, 48)
    model = torch.nn.Sequential(first, torch.nn.ReLU(), torch.nn.Linear(48, 17)).to(dtype)
    gemmtune.patch(model, hints={"m": [8]}, tune_fn=_tune(TRITON), progress=False, **kw)
    return model


def _on_cublas(model, m):
    """Put each converted layer's eager path for an m-row input on cuBLAS, as a GPU timing would."""
    for layer in (model[0], model[2]):
        k = layer.weight.shape[0] if isinstance(layer, Conv1D) else layer.weight.shape[1]
        layer._gemmtune_eager._set(layer, torch.randn(m, k, dtype=layer.weight.dtype), gnn._ATEN)


def _ref(model, x):
    """fp64 reference of the two-layer model."""
    a, b = model[0], model[2]
    x = x.double()
    h = (x @ a.weight.double() + a.bias.double()) if isinstance(a, Conv1D) else F.linear(
        x, a.weight.double(), a.bias.double())
    return F.linear(torch.relu(h), b.weight.double(), b.bias.double())


def _routing_backend(counts):
    """A torch.compile backend that runs the routing pass on dynamo's graph and records how many calls
    it routed (Inductor runs the same pass through its pre-grad hook)."""
    def backend(gm, example_inputs):
        with compile_route.graphed():  # as a compile whose steps replay from CUDA graphs
            counts.append(compile_route.route(gm.graph))
        gm.recompile()
        return gm.forward
    return backend


@pytest.mark.parametrize("conv", [False, True])
def test_retire_gives_back_layers_whose_every_eager_shape_runs_cublas(conv):
    model = _model(conv=conv)
    torch_first = type(model[0]).__mro__[1]
    _on_cublas(model, 5)
    assert gnn.retire(model) == ["0", "2"]
    # torch's forward, in a subclass of the same name (dynamo guards on the class: gnn._retired_class)
    for layer, base in ((model[0], torch_first), (model[2], torch.nn.Linear)):
        assert type(layer).__mro__[1] is base and type(layer).__name__ == base.__name__
        assert type(layer).forward is base.forward and "forward" not in type(layer).__dict__
    for layer in (model[0], model[2]):
        assert gnn.retired(layer)
        assert not any(k in layer.__dict__ for k in gnn._CONVERSION_STATE)
        assert gnn.recorded_dispatcher(layer) is not None
    assert len(gnn.dispatchers(model)) == 2
    x = torch.randn(5, 32)
    with torch.no_grad():
        torch.testing.assert_close(model(x).double(), _ref(model, x), rtol=1e-4, atol=1e-4)


def test_layers_with_a_tuned_path_or_no_shape_yet_stay_converted():
    model = _model()
    _on_cublas(model, 5)
    model[2]._gemmtune_eager._set(model[2], torch.randn(9, 48), gnn._TUNED)  # one tuned shape
    assert gnn.retire(model) == ["0"]
    assert isinstance(model[2], gnn.Linear) and not gnn.retired(model[2])
    fresh = _model()
    assert gnn.retire(fresh) == []  # no shape met yet: each decides at its first call
    tuned = _model(eager_policy="tuned")
    _on_cublas(tuned, 5)
    assert gnn.retire(tuned) == []


def test_a_layer_whose_weight_no_longer_fits_its_dispatcher_stays():
    model = _model()
    _on_cublas(model, 5)
    model[2].weight = torch.nn.Parameter(torch.randn(19, 48))
    assert gnn.retire(model) == ["0"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("conv", [False, True])
def test_compiled_retired_layers_run_their_dispatcher(dtype, conv):
    """Compiled, each retired layer's GEMM is the gemmtune::mm op, and the output is the product's
    (fp64 reference), for 3-D inputs, a prime M, and a transposed, offset view."""
    model = _model(dtype, conv=conv)
    _on_cublas(model, 5)
    gnn.retire(model)
    counts = []
    compiled = torch.compile(model, backend=_routing_backend(counts), dynamic=False)
    inputs = (torch.randn(2, 3, 32, dtype=dtype),          # leading batch dims
              torch.randn(13, 32, dtype=dtype),            # a prime M
              torch.randn(40, 64, dtype=dtype)[1:14, 7:39],  # an offset view with a row stride of 64
              torch.randn(32, 11, dtype=dtype).t(),        # transposed (column-major)
              torch.randn(1, 32, dtype=dtype))             # M = 1
    for x in inputs:
        with torch.no_grad():
            out = compiled(x)
        tol = TOL[dtype]
        torch.testing.assert_close(out.double(), _ref(model, x), rtol=tol, atol=tol)
    assert counts and all(c == 2 for c in counts)


def test_a_deep_copy_is_routed_too_and_pickling_drops_gemmtune():
    model = _model()
    _on_cublas(model, 5)
    gnn.retire(model)
    twin = copy.deepcopy(model)
    assert gnn.retired(twin[0]) and twin[0].weight is not model[0].weight
    counts = []
    x = torch.randn(6, 32)
    with torch.no_grad():
        out = torch.compile(twin, backend=_routing_backend(counts))(x)
    assert counts == [2]
    torch.testing.assert_close(out.double(), _ref(twin, x), rtol=1e-4, atol=1e-4)
    plain = pickle.loads(pickle.dumps(model))
    assert type(plain[0]) is torch.nn.Linear and plain[0].__dict__.get("_gemmtune_dispatcher") is None
    assert type(twin[0]) is type(model[0])  # a deep copy stays retired


def test_calls_a_converted_layer_would_not_trace_as_the_op_stay_torchs():
    """Autocast (in the graph), a weight replaced after retiring, and an unrelated model's Linear
    are left as torch's F.linear."""
    model = _model()
    _on_cublas(model, 5)
    gnn.retire(model)
    x = torch.randn(4, 32)

    def under_autocast(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model(x)
    counts = []
    with torch.no_grad():
        torch.compile(under_autocast, backend=_routing_backend(counts))(x)
    assert counts == [0]
    other = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 17))
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(other, backend=_routing_backend(counts))(x)
    assert counts == [0, 0]
    model[2].weight = torch.nn.Parameter(torch.randn(17, 48))
    torch._dynamo.reset()
    with torch.no_grad():
        out = torch.compile(model, backend=_routing_backend(counts))(x)
    assert counts == [0, 0, 1]
    torch.testing.assert_close(out.double(), _ref(model, x), rtol=1e-4, atol=1e-4)


def test_a_dtype_the_dispatcher_does_not_multiply_is_not_routed():
    model = _model()
    _on_cublas(model, 5)
    gnn.retire(model)
    model.double()  # new weight tensors (not registered) of another dtype
    counts = []
    x = torch.randn(4, 32, dtype=torch.float64)
    with torch.no_grad():
        out = torch.compile(model, backend=_routing_backend(counts))(x)
    assert counts == [0]
    torch.testing.assert_close(out, _ref(model, x))


def test_the_cache_key_follows_what_is_routed():
    """Inductor keys cached graphs by the pass's uuid: it must change when the set of routed weights
    does, so a graph compiled with routes is never served to a model without them."""
    compile_route.install()
    from torch._inductor import config
    p = config.pre_grad_custom_pass
    before = p.uuid()
    w = torch.randn(17, 48)
    d = gnn.recorded_dispatcher(_retired_layer())
    compile_route.register(w, d)
    during = p.uuid()
    compile_route.unregister(w)
    assert before != during and p.uuid() != during
    assert str(__import__("os").getpid()) in compile_route.state() or not len(compile_route._ROUTED)


def _retired_layer():
    model = _model()
    _on_cublas(model, 5)
    gnn.retire(model)
    return model[2]


def test_patching_a_retired_model_again_converts_it_on_its_recorded_dispatcher():
    model = _model()
    _on_cublas(model, 5)
    d = model[2].dispatcher
    gnn.retire(model)
    gemmtune.patch(model, tune_fn=_tune("aten"), progress=False)
    assert isinstance(model[2], gnn.Linear) and model[2].dispatcher is d and not gnn.retired(model[2])


def test_inductor_runs_the_routing_pass():
    """The real path: torch.compile with Inductor (on the CPU here) routes the retired layers."""
    model = _model()
    _on_cublas(model, 5)
    gnn.retire(model)
    before = compile_route.STATS["routed"]
    x = torch.randn(5, 32)
    with torch.no_grad(), compile_route.graphed():
        out = torch.compile(model)(x)
    assert compile_route.STATS["routed"] - before == 2
    torch.testing.assert_close(out.double(), _ref(model, x), rtol=1e-4, atol=1e-4)


def test_an_ungraphed_compile_leaves_retired_layers_to_inductor_and_a_graphed_one_routes():
    """A layer retires because its un-graphed step ran faster on torch's call than through the op;
    an un-graphed compile (torch.compile's default mode) pays the op's host time too, so it leaves
    the GEMM to Inductor, while mode="reduce-overhead" (Inductor's CUDA graphs: the configuration
    is on while it compiles, on the CPU too) routes. Both match fp64; each compile is keyed apart."""
    model = _model()
    _on_cublas(model, 5)
    gnn.retire(model)
    x = torch.randn(5, 32)
    compile_route.install()
    from torch._inductor import config
    keys = {}
    for mode in (None, "reduce-overhead"):
        torch._dynamo.reset()
        routed, left = compile_route.STATS["routed"], compile_route.STATS["ungraphed"]
        with torch.no_grad():
            out = torch.compile(model, **({"mode": mode} if mode else {}))(x)
        with config.patch(mode == "reduce-overhead" and {"triton.cudagraphs": True} or {}):
            keys[mode] = config.pre_grad_custom_pass.uuid()
        got = (compile_route.STATS["routed"] - routed, compile_route.STATS["ungraphed"] - left)
        assert got == ((0, 2) if mode is None else (2, 0)), (mode, got)
        torch.testing.assert_close(out.double(), _ref(model, x), rtol=1e-4, atol=1e-4)
    assert keys[None] != keys["reduce-overhead"]


def test_the_routing_policy_and_its_errors(monkeypatch):
    counts = []
    model = _model()
    _on_cublas(model, 5)
    gnn.retire(model)
    x = torch.randn(5, 32)
    assert compile_route.policy() == "graphs" and not compile_route.routes_now()
    with compile_route.graphed():
        assert compile_route.routes_now()
    assert not compile_route.routes_now()
    monkeypatch.setenv(compile_route.POLICY_ENV, "always")
    assert compile_route.routes_now()
    with torch.no_grad():
        torch.compile(model, backend=lambda gm, ex: (counts.append(compile_route.route(gm.graph)), gm.forward)[1])(x)
    assert counts == [2]
    monkeypatch.setenv(compile_route.POLICY_ENV, "sometimes")
    with pytest.raises(ValueError, match="GEMMTUNE_COMPILE_ROUTE='sometimes': give one of graphs, always, never"):
        compile_route.policy()
    other = _model()
    _on_cublas(other, 5)
    with pytest.raises(ValueError, match="GEMMTUNE_COMPILE_ROUTE='sometimes'"):  # at retire, before any compile
        gnn.retire(other)
    assert isinstance(other[0], gnn.Linear) and not gnn.retired(other[2])  # and before any layer changed
    monkeypatch.delenv(compile_route.POLICY_ENV)
    compile_route.set_policy("never")
    try:
        with compile_route.graphed():
            assert not compile_route.routes_now()
        with pytest.raises(ValueError, match="policy 'off'"):
            compile_route.set_policy("off")
    finally:
        compile_route.set_policy(None)
    assert compile_route.policy() == "graphs"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gpu_retired_layers_compile_to_their_tuned_kernel(dtype):
    """On a GPU, with Inductor: a retired model's compiled GEMMs are routed to the dispatcher (whose
    table names a Triton kernel), eager calls are torch's own forward, and both match fp64."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).cuda().to(dtype)
    gemmtune.patch(model, hints={"m": [64]}, tune_fn=_tune("triton_mm:BM64-BN64-BK32-S3-W4-G8"), progress=False)
    for layer, k in ((model[0], 512), (model[2], 1024)):
        layer._gemmtune_eager._set(layer, torch.randn(61, k, device="cuda", dtype=dtype), gnn._ATEN)
    assert gnn.retire(model) == ["0", "2"]
    x = torch.randn(61, 512, device="cuda", dtype=dtype)
    with torch.no_grad():
        ref = F.linear(F.gelu(F.linear(x.double(), model[0].weight.double(), model[0].bias.double())),
                       model[2].weight.double(), model[2].bias.double())
        before = compile_route.STATS["routed"]
        with compile_route.graphed():
            out = torch.compile(model)(x)
        eager = model(x)
    assert compile_route.STATS["routed"] - before == 2
    torch.testing.assert_close(out.double(), ref, rtol=3e-2, atol=3e-2)
    torch.testing.assert_close(eager.double(), ref, rtol=3e-2, atol=3e-2)


def test_converting_a_retired_layer_again_drops_its_route():
    model = _model()
    _on_cublas(model, 5)
    w = model[2].weight
    gnn.retire(model)
    assert w in compile_route._ROUTED
    gemmtune.patch(model, tune_fn=_tune("aten"), progress=False)
    assert w not in compile_route._ROUTED and isinstance(model[2], gnn.Linear)


def test_gating_a_model_whose_layers_all_retired_says_so(monkeypatch):
    """A later gate_eager (a decode step after patch's prompt pass) finds nothing left to gate: a
    warning says why and how to keep the layers gateable."""
    model = _model()
    _on_cublas(model, 5)
    gnn.retire(model)
    with pytest.warns(RuntimeWarning, match="retire=False"):
        assert gemmtune.gate_eager(model, {"decode": lambda: model(torch.randn(1, 32))}, force=True) == []


def test_dynamo_does_not_share_graphs_between_a_retired_model_and_a_plain_one():
    """The retired class is not torch's: a plain model of the same architecture compiled first does not
    hand its graph (no route) to the retired one, nor the retired one its routes to a plain one."""
    model = _model()
    _on_cublas(model, 5)
    gnn.retire(model)
    plain = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 17))
    counts = []
    backend = _routing_backend(counts)
    x = torch.randn(5, 32)
    with torch.no_grad():
        torch.compile(plain, backend=backend)(x)
        torch.compile(model, backend=backend)(x)
        torch.compile(torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(),
                                          torch.nn.Linear(48, 17)), backend=backend)(x)
    assert counts[:2] == [0, 2] and counts[2:] in ([], [0])


def test_a_retired_layer_given_a_cublas_only_dispatcher_is_left_as_torchs():
    """patch with a dispatcher that runs cuBLAS everywhere: the layer leaves retirement (no route,
    torch's own class) and is recorded as patch leaves such layers."""
    aten_only = {}
    gemmtune.patch(torch.nn.Sequential(torch.nn.Linear(48, 17)), dispatchers=aten_only, hints={"m": [8]},
                   tune_fn=_tune("aten"), progress=False)
    model = _model()
    _on_cublas(model, 5)
    w = model[2].weight
    gnn.retire(model)
    assert w in compile_route._ROUTED
    gemmtune.patch(model, dispatchers=aten_only, tune_missing=False, progress=False)
    assert type(model[2]) is torch.nn.Linear and not gnn.retired(model[2])
    assert gnn.recorded_dispatcher(model[2]) is next(iter(aten_only.values()))
    assert w not in compile_route._ROUTED
    assert isinstance(model[0], gnn.Linear)  # none given for its shape: converted again on its recorded one


def test_dynamic_shapes_are_routed_with_a_symbolic_m():
    """torch.compile(dynamic=True): one graph for every M, its GEMMs on the dispatcher (hints decide
    per call), each output the product's."""
    model = _model()
    _on_cublas(model, 5)
    gnn.retire(model)
    counts = []
    compiled = torch.compile(model, backend=_routing_backend(counts), dynamic=True)
    for m in (3, 11, 29):
        x = torch.randn(m, 32)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x).double(), _ref(model, x), rtol=1e-4, atol=1e-4)
    assert counts == [2]
