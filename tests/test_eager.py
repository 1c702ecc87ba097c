"""Patched layers in eager mode and under CUDA graphs: the per-shape eager path (the tuned kernel
or F.linear, whichever a back-to-back timing says is faster), and the rule that nothing is decided,
verified or timed inside a CUDA-graph capture.

CPU: the Triton interpreter (conftest), a stand-in for the capture check, and fake callables for
the eager timing. GPU: a real ``torch.cuda.graph`` capture of a patched model and
``torch.compile(mode="reduce-overhead")`` (test_eager_gpu_*).
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
import torch

from gemmtune.nn import recorded_dispatcher

import gemmtune
from gemmtune import dispatch
from gemmtune.dispatch import compile_mm
from gemmtune.nn import choose_eager, patch
from gemmtune.verify import compare

ON_GPU = torch.cuda.is_available()
TRITON = "triton_mm:BM16-BN16-BK16-S1-W2-G8"


@pytest.fixture(autouse=True)
def _grad_mode():
    was = torch.is_grad_enabled()
    yield
    torch.set_grad_enabled(was)


def _tune(winner):
    return lambda problems, **kw: {p.key: winner for p in problems}


def _model(winner, device="cpu", dtype=torch.float16, **kw):
    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16)).to(device, dtype)
    ref = [m.weight.detach().clone() for m in model if isinstance(m, torch.nn.Linear)]
    patch(model, hints={"m": [8]}, tune_fn=_tune(winner), progress=False, **kw)
    return model, ref


def test_choose_eager_keeps_the_faster_path_and_gives_ties_to_aten(monkeypatch):
    """The rule, on scripted (host, wall) seconds per call (real timings flake on a loaded CPU)."""
    from gemmtune import nn as gnn

    def scripted(tuned, aten):  # (host, wall) per call of each path
        monkeypatch.setattr(gnn, "_per_call", lambda fn, x, calls: tuned if fn is t_fn else aten)
        return choose_eager(t_fn, a_fn, torch.randn(4, 8), trials=3)

    t_fn, a_fn = (lambda x: None), (lambda x: None)
    assert scripted((1e-6, 1e-6), (1e-6, 2e-3))[0] == "tuned"            # faster, GPU-bound
    assert scripted((1e-6, 2e-3), (1e-6, 1e-6))[0] == "aten"             # slower
    assert scripted((1e-6, 1.0e-3), (1e-6, 1.02e-3))[0] == "aten"        # within 3%: the simpler path
    # Faster per call, but bound by its own host time (Python, launching): in a model whose
    # eager step is host-bound that time is paid in full, so aten stays.
    path, t_tuned, t_aten = scripted((1.5e-3, 1.5e-3), (1e-6, 2e-3))
    assert path == "aten" and (t_tuned, t_aten) == (1.5e-3, 2e-3)
    # The real timer on the CPU: host <= wall, both positive.
    host, wall = gnn._per_call(lambda x: None, torch.randn(2), 3)
    assert 0 <= host <= wall


def test_a_layer_times_at_most_eager_timed_max_shapes(monkeypatch):
    """Past EAGER_TIMED_MAX timed input shapes, a layer's new eager shapes run F.linear untimed
    (one warning), so a workload of ever-new shapes stops paying choose_eager per shape."""
    from gemmtune import nn as gnn

    model, _ = _model(TRITON)
    timed = []
    monkeypatch.setattr(gnn, "_timed", lambda x: True)
    monkeypatch.setattr(gnn, "choose_eager", lambda tuned, aten, x: timed.append(x.shape) or ("tuned", 1.0, 2.0))
    monkeypatch.setattr(gnn, "EAGER_TIMED_MAX", 3)
    lin = model[0]
    with torch.no_grad(), pytest.warns(RuntimeWarning, match="more than 3 input shapes"):
        for m in range(1, 6):
            model(torch.randn(m, 32, dtype=torch.float16))
    assert len(lin.eager_choices) == 3 and len(timed) == 6  # 3 shapes in each of the 2 layers
    paths = lin.eager_paths
    assert [paths[(torch.Size([m, 32]), torch.float16)] for m in range(1, 6)] == ["tuned"] * 3 + ["aten"] * 2
    calls = []
    real = torch.nn.functional.linear
    monkeypatch.setattr(torch.nn.functional, "linear", lambda *a: calls.append(1) or real(*a))
    with torch.no_grad():
        model(torch.randn(5, 32, dtype=torch.float16))
    assert len(calls) == 2 and len(timed) == 6  # F.linear in both layers, nothing timed again


def test_aten_decisions_call_f_linear_directly(monkeypatch):
    model, _ = _model("aten", convert_aten_layers=True)  # converted: its cached aten path
    x = torch.randn(5, 32, dtype=torch.float16)
    torch.set_grad_enabled(False)  # restored after the test by pytest's fixture below
    y = model(x)
    lin = model[0]
    assert set(lin.eager_paths.values()) == {"aten"} and not lin.eager_choices
    calls = []
    real = torch.nn.functional.linear
    monkeypatch.setattr(torch.nn.functional, "linear", lambda *a: calls.append(1) or real(*a))
    torch.testing.assert_close(model(x), y)
    assert len(calls) == 2  # both layers, straight to F.linear: the dispatcher is not called


def test_the_f_linear_path_reads_the_weight_and_bias_the_module_holds_now():
    """The cached F.linear path reads the weight and bias from the module's _parameters /
    _buffers (nn.Linear's own ``self.weight`` is a slower __getattr__ miss): whatever the layer
    holds at the call is used: a parameter replaced or updated in place, one lent by
    torch.func.functional_call, tensors held as buffers, a bias deleted and set as a plain
    attribute, a weight swapped into _parameters as a plain tensor, no bias at all."""
    torch.manual_seed(0)
    model, _ = _model("aten", convert_aten_layers=True)
    lin = model[0]
    x = torch.randn(5, 32, dtype=torch.float16)

    def check(layer):
        want = torch.nn.functional.linear(x.double(), layer.weight.double(),
                                          None if layer.bias is None else layer.bias.double())
        torch.testing.assert_close(layer(x).double(), want, rtol=2e-3, atol=2e-3)

    with torch.no_grad():
        lin(x)
        assert lin._gemmtune_paths[x.shape] == "aten"
        check(lin)
        lin.weight.mul_(-1.5)
        check(lin)
        lin.weight = torch.nn.Parameter(torch.randn(48, 32, dtype=torch.float16))
        check(lin)
        lent = {"weight": torch.randn(48, 32, dtype=torch.float16), "bias": torch.randn(48, dtype=torch.float16)}
        got = torch.func.functional_call(lin, lent, (x,))
        torch.testing.assert_close(got, torch.nn.functional.linear(x, lent["weight"], lent["bias"]))
        check(lin)  # its own again after the call
        w, b = lin.weight.detach().clone(), lin.bias.detach().clone()
        del lin.weight, lin.bias
        lin.register_buffer("weight", w)
        lin.register_buffer("bias", b + 1)
        check(lin)
        del lin.bias
        lin.bias = b - 1  # a plain attribute: neither _parameters nor _buffers
        assert "bias" in lin.__dict__
        check(lin)
        lin._parameters["weight"] = w * 2  # a plain tensor swapped in, as accelerate's offload hooks do
        del lin._buffers["weight"]
        check(lin)
    nobias, _ = _model("aten", convert_aten_layers=True)
    for m in nobias:
        if isinstance(m, torch.nn.Linear):
            m.bias = None
    with torch.no_grad():
        nobias[0](x)
        check(nobias[0])


def test_a_remembered_path_is_looked_up_by_shape_and_still_honours_autocast_and_dtype():
    """The forwards look a shape's eager path up before any other check (host time). An F.linear
    path is torch's own forward, right under autocast; a tuned path is taken only in the
    dispatcher's dtype: the same shape in another dtype (the model converted after patching) gets
    the dtype warning and F.linear, not the fp16 kernel."""
    torch.manual_seed(0)
    model, _ = _model("aten", convert_aten_layers=True)
    x = torch.randn(5, 32, dtype=torch.float16)
    with torch.no_grad():
        model(x)
        assert model[0]._gemmtune_paths[x.shape] == "aten"
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = model[0](x)
            want = torch.nn.functional.linear(x, model[0].weight, model[0].bias)
        assert y.dtype == torch.bfloat16
        torch.testing.assert_close(y, want)
    tuned, _ = _model(TRITON)
    lin = tuned[0]
    lin._gemmtune_paths[x.shape] = "tuned"  # as a first eager call in fp16 leaves it
    lin.float()
    x32 = x.float()
    with torch.no_grad(), pytest.warns(RuntimeWarning, match="differ from the dispatcher"):
        y = lin(x32)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, torch.nn.functional.linear(x32, lin.weight, lin.bias))


@pytest.mark.skipif(ON_GPU, reason="CPU tensors run the Triton interpreter only on a machine without a GPU "
                    "(conftest); on a GPU machine a CPU call falls back to F.linear")
def test_tuned_kernels_run_on_the_cpu_interpreter_without_timing():
    model, ref = _model(TRITON)
    x = torch.randn(3, 7, 32, dtype=torch.float16)  # leading batch dims flatten to M = 21
    with torch.no_grad():
        y = model(x)
    want = torch.relu(x.double() @ ref[0].double().T + model[0].bias.detach().double()) @ ref[1].double().T \
        + model[2].bias.detach().double()
    assert compare(y, want, 2e-3).ok
    assert set(model[0].eager_paths.values()) == {"tuned"} and not model[0].eager_choices


def test_grad_and_policy(monkeypatch):
    model, _ = _model("aten", dtype=torch.float32, convert_aten_layers=True)
    x = torch.randn(4, 32, requires_grad=True)
    model(x).sum().backward()  # autograd: the op path, not the eager cache
    assert not model[0].eager_paths and x.grad is not None
    with pytest.raises(ValueError, match="eager_policy must be one of"):
        patch(torch.nn.Linear(4, 4), eager_policy="fastest", hints={"m": [4]}, tune_fn=_tune("aten"))
    tuned_only, _ = _model(TRITON, eager_policy="tuned")
    assert tuned_only[0]._gemmtune_eager.policy == "tuned"


@pytest.mark.skipif(ON_GPU, reason="CPU tensors run the Triton interpreter only on a machine without a GPU "
                    "(conftest); on a GPU machine a CPU call falls back to F.linear")
def test_first_sight_inside_a_capture_runs_cublas_and_decides_later(monkeypatch):
    """Nothing may be verified (or synchronised) inside a CUDA-graph capture: a shape first seen
    there runs torch.mm, is not cached, and is decided at its next call outside the capture."""
    d = compile_mm(n=24, k=64, dtype="fp16", hints={"m": [8]}, tune_fn=_tune(TRITON), progress=False)
    a = torch.randn(9, 64, dtype=torch.float16)
    b = torch.randn(64, 24, dtype=torch.float16)
    monkeypatch.setattr(dispatch, "capturing", lambda t: True)
    verified = []
    monkeypatch.setattr(d, "_verify", lambda *a, **k: verified.append(1))
    with pytest.warns(RuntimeWarning, match="first seen inside a CUDA-graph capture"):
        y = d(a, b)
    torch.testing.assert_close(y, torch.mm(a, b))
    bias = torch.randn(24, dtype=torch.float16)
    torch.testing.assert_close(d(a, b, bias=bias), torch.mm(a, b) + bias)  # the epilogue too
    assert not verified and d.decision(m=9) is None and not d._fast
    monkeypatch.setattr(dispatch, "capturing", lambda t: False)
    monkeypatch.undo()
    d(a, b)
    assert d.decision(m=9).choice.id == TRITON


def test_linear_inside_a_capture_caches_no_eager_path(monkeypatch):
    model, _ = _model(TRITON)
    monkeypatch.setattr(dispatch, "capturing", lambda t: True)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore", RuntimeWarning)
        model(torch.randn(6, 32, dtype=torch.float16))
    assert not model[0].eager_paths


def test_conv1d_fuses_its_bias():
    transformers = pytest.importorskip("transformers")
    from transformers.pytorch_utils import Conv1D

    conv = Conv1D(48, 32).half()
    torch.nn.init.normal_(conv.bias)
    model = torch.nn.Sequential(conv)
    patch(model, hints={"m": [8]}, tune_fn=_tune(TRITON), progress=False)
    x = torch.randn(2, 5, 32, dtype=torch.float16)
    with torch.no_grad():
        y = model(x)
    want = x.double() @ conv.weight.detach().double() + conv.bias.detach().double()
    assert compare(y, want, 2e-3).ok and transformers is not None


def test_conv1d_f_linear_path_reads_what_the_module_holds_now():
    """A patched Conv1D on its cuBLAS path runs transformers' Conv1D.forward with its tensors read
    from _parameters (its class runs exactly that forward): the current weight and bias are used
    (updated in place, replaced, parametrized after patch), and a Conv1D subclass with a forward
    of its own keeps running it."""
    pytest.importorskip("transformers")
    from torch.nn.utils import parametrize
    from transformers.pytorch_utils import Conv1D

    def scaled_forward(self, x):
        return Conv1D.forward(self, x) * 2

    # A Conv1D subclass (named so: patch recognises Conv1D by name) with a forward of its own:
    # never replaced by the inline one.
    Scaled = type("Conv1D", (Conv1D,), {"forward": scaled_forward})

    x = torch.randn(2, 5, 32)

    def want(conv, scale=1.0):
        return (x.double() @ conv.weight.detach().double() + conv.bias.detach().double()) * scale

    for cls, scale in ((Conv1D, 1.0), (Scaled, 2.0)):
        torch.manual_seed(0)
        conv = cls(48, 32)
        torch.nn.init.normal_(conv.bias)
        patch(torch.nn.Sequential(conv), hints={"m": [10]}, tune_fn=_tune("aten"), progress=False,
              convert_aten_layers=True)
        assert type(conv)._gemmtune_hf_forward is (cls is Conv1D)
        with torch.no_grad():
            conv(x)
            assert conv._gemmtune_paths[x.shape] == "aten"
            torch.testing.assert_close(conv(x).double(), want(conv, scale), rtol=1e-5, atol=1e-5)
            conv.weight.mul_(-2.0)
            torch.testing.assert_close(conv(x).double(), want(conv, scale), rtol=1e-5, atol=1e-5)
            conv.bias = torch.nn.Parameter(torch.randn(48))
            torch.testing.assert_close(conv(x).double(), want(conv, scale), rtol=1e-5, atol=1e-5)
    parametrize.register_parametrization(conv, "weight", _Double())
    with torch.no_grad():
        torch.testing.assert_close(conv(x).double(), want(conv, 2.0), rtol=1e-5, atol=1e-5)  # conv.weight: the doubled one


class _Double(torch.nn.Module):
    def forward(self, w):
        return w * 2


@pytest.mark.parametrize("strict", [False, True])
def test_export_of_a_patched_model_is_torchs_own_and_loads_anywhere(tmp_path, strict):
    """torch.export of a patched model (Linear on a tuned kernel, and a Conv1D) records torch's own
    linear / addmm, not the gemmtune::mm op: that program could not be loaded by torch.export.load
    ("failed to resolve torch.ops.gemmtune.mm.default") in a process without gemmtune's op, held
    this process's dispatcher handle, and no AOTInductor / ExecuTorch runtime runs a Python op.
    Saved and loaded in a fresh interpreter with no gemmtune import, it computes the same."""
    layers = [torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16)]
    transformers = None
    try:
        import transformers
        from transformers.pytorch_utils import Conv1D
        layers.append(Conv1D(24, 16))
    except ImportError:
        pass
    torch.manual_seed(0)
    model = torch.nn.Sequential(*layers)
    patch(model, hints={"m": [8]}, tune_fn=_tune(TRITON), progress=False)
    assert isinstance(model[0], gemmtune.nn.Linear)
    x = torch.randn(8, 32)
    with torch.no_grad():
        want = model(x)
        ep = torch.export.export(model, (x,), strict=strict)
    targets = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    assert not any("gemmtune" in t for t in targets), targets
    torch.testing.assert_close(ep.module()(x), want, rtol=1e-4, atol=1e-4)
    path = tmp_path / "ep.pt2"
    torch.export.save(ep, path)
    torch.save({"x": x, "want": want}, tmp_path / "io.pt")
    code = (f"import torch, sys; ep = torch.export.load({str(path)!r}); io = torch.load({str(tmp_path / 'io.pt')!r}); "
            "torch.testing.assert_close(ep.module()(io['x']), io['want'], rtol=1e-4, atol=1e-4); "
            "assert 'gemmtune' not in sys.modules; print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]
    assert transformers is None or len(layers) == 4


def test_patched_layers_take_a_negated_view_as_torch_does():
    """``nn.Linear`` and ``Conv1D`` take a negated view (the ``.imag`` of a conjugated complex
    tensor) as its value; the dispatcher refuses one by name, and a patched layer raised that
    ValueError where torch's layer computes. The layers resolve it, on first sight of the shape
    and on its remembered tuned path, and stay on the tuned kernel for plain inputs."""
    transformers = pytest.importorskip("transformers")
    from transformers.pytorch_utils import Conv1D

    torch.manual_seed(5)
    conv = Conv1D(24, 32)
    torch.nn.init.normal_(conv.bias)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), conv)
    patch(model, hints={"m": [8]}, tune_fn=_tune(TRITON), progress=False)
    lin = model[0]
    x = torch.randn(3, 5, 32, dtype=torch.complex64).conj().imag
    assert x.is_neg() and transformers is not None
    plain = x.resolve_neg()
    want_lin = plain.double() @ lin.weight.detach().double().t() + lin.bias.detach().double()
    want_conv = plain.double() @ conv.weight.detach().double() + conv.bias.detach().double()
    with torch.no_grad():
        for _ in range(2):  # the first call decides the path, the second takes it
            assert compare(lin(x), want_lin, 1e-4).ok
            assert compare(conv(x), want_conv, 1e-4).ok
    assert set(lin.eager_paths.values()) == {"tuned"}
    with pytest.raises(ValueError, match="a is a negated view"):  # the dispatcher itself still refuses
        lin.dispatcher(x.reshape(15, 32), lin.weight.t())


# ------------------------------------------------------------------ GPU
@pytest.fixture
def gpu_model():
    """A patched bf16 model whose layers run a Triton kernel, and a 64-row input."""
    model, _ = _model("triton_mm:BM64-BN64-BK32-S3-W4-G8", device="cuda", dtype=torch.bfloat16)
    return model, torch.randn(64, 32, device="cuda", dtype=torch.bfloat16)


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
def test_eager_gpu_graph_capture_of_a_patched_model(gpu_model):
    model, x = gpu_model
    with torch.no_grad():
        want = model(x)  # decides (and verifies) outside the capture
        g = torch.cuda.CUDAGraph()
        static_x = x.clone()
        with torch.cuda.graph(g):
            static_y = model(static_x)
        static_x.copy_(torch.randn_like(x))
        g.replay()
        torch.cuda.synchronize()
        assert compare(static_y, model(static_x).double(), 2e-2).ok
        # A shape first seen inside a capture: cuBLAS, a warning, decided afterwards.
        x2 = torch.randn(33, 32, device="cuda", dtype=torch.bfloat16)
        g2 = torch.cuda.CUDAGraph()
        with pytest.warns(RuntimeWarning, match="inside a CUDA-graph capture"):
            with torch.cuda.graph(g2):
                y2 = model(x2)
        g2.replay()
        torch.cuda.synchronize()
        assert compare(y2, model(x2).double(), 2e-2).ok
    assert want is not None


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
def test_eager_gpu_reduce_overhead_compile_and_eager_choices(gpu_model):
    model, x = gpu_model
    with torch.no_grad():
        eager = model(x)
        # Eager: the layer timed both paths for this shape and recorded them.
        (choice, t_tuned, t_aten), = model[0].eager_choices.values()
        assert choice.startswith("triton_mm") and t_tuned > 0 and t_aten > 0
        compiled = torch.compile(model, mode="reduce-overhead", dynamic=False)
        for _ in range(3):
            y = compiled(x)
        torch.cuda.synchronize()
    assert compare(y, eager.double(), 2e-2).ok
    gemmtune.nn.dispatchers(model)  # still enumerable after compile


def test_all_aten_layers_compile_to_torchs_own_linear():
    """A layer whose every tuned hint chose cuBLAS is traced as F.linear (Inductor fuses around it),
    not as the opaque gemmtune::mm op; a layer with a Triton winner keeps the op."""
    aten_model, _ = _model("aten", dtype=torch.float32, convert_aten_layers=True)
    left_model, _ = _model("aten", dtype=torch.float32)  # left as torch's: nothing of gemmtune's to trace
    triton_model, _ = _model(TRITON, dtype=torch.float32)
    assert aten_model[0].dispatcher.all_aten and not triton_model[0].dispatcher.all_aten
    assert type(left_model[0]) is torch.nn.Linear
    for model, want_op in ((aten_model, False), (left_model, False), (triton_model, True)):
        ops = []

        def backend(gm, example_inputs, ops=ops):
            ops += [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
            return gm.forward
        torch._dynamo.reset()
        x = torch.randn(4, 32)
        with torch.no_grad():
            torch.compile(model, backend=backend)(x)
        assert any("gemmtune" in o for o in ops) == want_op, ops


def test_a_table_winner_over_all_aten_hints_keeps_the_op_under_compile(monkeypatch):
    """A layer patched with a table that names a Triton kernel for its shape, over hints that all
    chose cuBLAS: patch converts it (runs_as_torch) and eager calls run the table's kernel, but
    under torch.compile it traced as F.linear (the check read ``all_aten`` alone), so the table's
    winner never ran in a compiled graph (found on tiny GPT-NeoX, tests/test_model_zoo.py)."""
    from gemmtune import kernels
    from gemmtune.configs import Choice
    from gemmtune.problem import Problem
    from gemmtune.table import LookupTable, TableChoice, provenance

    key = Problem.from_sizes(4, 48, 32, "float32", layout_b="col").key
    tbl = LookupTable(provenance("t", "interp", "x", "x", "x", "by-hand"), {key: [TableChoice(Choice.parse(TRITON))]})
    model = torch.nn.Sequential(torch.nn.Linear(32, 48))
    patch(model, table=tbl, hints={"m": [8]}, tune_fn=_tune("aten"), progress=False)
    assert type(model[0]) is gemmtune.nn.Linear and model[0].dispatcher.all_aten
    fam = kernels.get("triton_mm")
    run, launched, ops = fam.run, [], []
    monkeypatch.setattr(fam, "run", lambda *a, **kw: launched.append(1) or run(*a, **kw))

    def backend(gm, example_inputs):
        ops.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward
    torch._dynamo.reset()
    x = torch.randn(4, 32)
    with torch.no_grad(), torch._dynamo.config.patch(error_on_recompile=True):
        compiled = torch.compile(model, backend=backend)
        y = compiled(x)
        # The check under compile must not read the decisions: dynamo guarded on their count, and
        # the first call's decision made the second recompile (traces_as_torch).
        again = compiled(x)
    torch._dynamo.reset()
    assert any("gemmtune" in o for o in ops), ops
    torch.testing.assert_close(y, torch.nn.functional.linear(x, model[0].weight, model[0].bias))
    torch.testing.assert_close(again, y)
    if gemmtune.interpreter_enabled():  # (on a GPU machine a CPU tensor's Triton choice runs cuBLAS)
        assert launched


def test_bench_model_reports_the_eager_paths():
    from gemmtune.benchmodel import eager_path_summary

    model, _ = _model("aten", convert_aten_layers=True)
    with torch.no_grad():
        model(torch.randn(3, 32, dtype=torch.float16))
    summary = eager_path_summary(model)
    assert summary == {"counts": {"aten": 2}, "timed": [], "left_as_torch": 0, "retired": 0}
    left, _ = _model("aten")
    with torch.no_grad():
        left(torch.randn(3, 32, dtype=torch.float16))
    assert eager_path_summary(left) == {"counts": {}, "timed": [], "left_as_torch": 2, "retired": 0}
    gemmtune.nn.retire(model)  # both converted layers' one shape is on cuBLAS
    assert eager_path_summary(model) == {"counts": {}, "timed": [], "left_as_torch": 0, "retired": 2}


# ------------------------------------------------------------------ all-aten layers stay torch's
def _by_n(winners: dict[int, str]):
    """A fake tuner whose winner depends on the layer's N (out_features)."""
    return lambda problems, **kw: {p.key: winners[p.n] for p in problems}


def test_all_aten_layers_are_left_as_torchs_own(capsys):
    """Issue 17: a layer whose every hint chose cuBLAS keeps its class and forward (no per-call
    Python of ours), and its dispatcher stays recorded for dispatchers() / save_patched."""
    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16))
    patch(model, hints={"m": [8]}, tune_fn=_tune("aten"), progress=True)
    assert "gemmtune.patch: left 2 layer(s) as torch's own" in capsys.readouterr().err
    for lin in (model[0], model[2]):
        assert type(lin) is torch.nn.Linear and "forward" not in vars(lin)
        assert not hasattr(lin, "_gemmtune_handle") and not hasattr(lin, "_gemmtune_eager")
        assert isinstance(recorded_dispatcher(lin), dispatch.Dispatcher) and recorded_dispatcher(lin).all_aten
    ds = gemmtune.nn.dispatchers(model)
    assert set(ds) == {(48, 32, "float32"), (16, 48, "float32")}
    assert ds[(48, 32, "float32")] is recorded_dispatcher(model[0])
    lin = model[0]
    for x in (torch.randn(32), torch.randn(5, 32), torch.randn(2, 3, 32)):
        with torch.no_grad():
            y = lin(x)
        assert torch.equal(y, torch.nn.functional.linear(x, lin.weight, lin.bias))
    y = lin(torch.randn(4, 32, requires_grad=True))  # autograd: torch's own, too
    assert y.grad_fn is not None
    # The dispatcher was never consulted: nothing decided, nothing cached.
    assert recorded_dispatcher(lin).n_decisions == 0 and not recorded_dispatcher(lin)._fast
    # Patching again reuses the recorded dispatcher (no tuning) and still leaves the layers.
    patch(model, tune_fn=lambda *a, **k: pytest.fail("tuned again"), progress=False)
    assert type(model[0]) is torch.nn.Linear and gemmtune.nn.dispatchers(model) == ds


@pytest.mark.skipif(ON_GPU, reason="CPU tensors run the Triton interpreter only on a machine without a GPU "
                    "(conftest); on a GPU machine a CPU call falls back to F.linear")
def test_mixed_model_converts_only_the_tuned_layer_and_the_opt_out_converts_both():
    def build():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16)).half()

    ref = build()
    x = torch.randn(6, 32, dtype=torch.float16)
    with torch.no_grad():
        want = ref[2](torch.relu(ref[0](x))).double()
    tune = _by_n({48: TRITON, 16: "aten"})
    for convert in (False, True):
        model = build()
        patch(model, hints={"m": [8]}, tune_fn=tune, progress=False, convert_aten_layers=convert)
        assert type(model[0]) is gemmtune.nn.Linear and not model[0].dispatcher.all_aten
        assert type(model[2]) is (gemmtune.nn.Linear if convert else torch.nn.Linear)
        assert (recorded_dispatcher(model[2]) is None) is convert
        assert set(gemmtune.nn.dispatchers(model)) == {(48, 32, "float16"), (16, 48, "float16")}
        with torch.no_grad():
            y = model(x)
        assert compare(y, want, 2e-3).ok
        assert set(model[0].eager_paths.values()) == {"tuned"}
    # Left as torch's, then converted by a second patch with the opt-out: the same dispatcher,
    # and the record moves to the converted layer's own attribute.
    model = build()
    patch(model, hints={"m": [8]}, tune_fn=tune, progress=False)
    d = recorded_dispatcher(model[2])
    patch(model, tune_fn=lambda *a, **k: pytest.fail("tuned again"), progress=False, convert_aten_layers=True)
    assert type(model[2]) is gemmtune.nn.Linear and model[2].dispatcher is d
    assert "_gemmtune_dispatcher" not in vars(model[2])


def test_conv1d_all_aten_stays_conv1d():
    transformers = pytest.importorskip("transformers")
    from transformers.pytorch_utils import Conv1D

    for convert in (False, True):
        torch.manual_seed(0)
        conv = Conv1D(48, 32)
        patch(torch.nn.Sequential(conv), hints={"m": [8]}, tune_fn=_tune("aten"), progress=False,
              convert_aten_layers=convert)
        assert (type(conv) is Conv1D) is not convert and isinstance(conv, Conv1D)
        x = torch.randn(2, 5, 32)
        with torch.no_grad():
            torch.testing.assert_close(conv(x), x @ conv.weight + conv.bias)
        d = conv.dispatcher if convert else recorded_dispatcher(conv)
        assert gemmtune.nn.dispatchers(torch.nn.Sequential(conv)) == {(48, 32, "float32", "row"): d}
    assert transformers is not None


def test_a_table_entry_naming_another_kernel_keeps_the_layer_converted():
    """mode='table' runs a table's exact entry (or its addmm winner) before the hints': an all-aten
    hint set does not make such a layer cuBLAS-only, so it is converted as before."""
    from gemmtune.configs import Choice
    from gemmtune.nn import runs_as_torch
    from gemmtune.problem import Problem
    from gemmtune.table import LookupTable, TableChoice, provenance

    def table(op, choice, n=48, k=32):
        key = Problem.from_sizes(3, n, k, "float32", layout_b="col", op=op).key
        return LookupTable(provenance("t", "interp", "x", "x", "x", "by-hand"),
                           {key: [TableChoice(Choice.parse(choice), 0.01)]})

    for tbl, left in ((table("mm", TRITON), False), (table("addmm", TRITON), False),
                      (table("mm", "aten"), True), (table("mm", TRITON, n=16, k=32), True)):
        lin = torch.nn.Linear(32, 48)
        patch(torch.nn.Sequential(lin), table=tbl, hints={"m": [8]}, tune_fn=_tune("aten"), progress=False)
        assert lin.dispatcher.all_aten if not left else recorded_dispatcher(lin).all_aten
        assert (type(lin) is torch.nn.Linear) is left, tbl.entries
        assert runs_as_torch(recorded_dispatcher(lin) if left else lin.dispatcher) is left
    # A decision (made, or loaded with the dispatcher) naming another kernel counts too.
    d = compile_mm(n=48, k=32, dtype="fp32", hints={"m": [8]}, layout_b="col", tune_fn=_tune("aten"),
                   progress=False)
    assert runs_as_torch(d)
    d._decisions[(3, 48, 32)] = dispatch.common.Decision(Choice.parse(TRITON), "table")
    assert not runs_as_torch(d)


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
def test_gpu_m1_layers_go_to_inductor_under_cdt_and_stay_tuned_otherwise(gpu_model):
    """torch_ops.gemv_to_inductor: a decode-shaped (M=1) call of a patched layer compiles to
    Inductor's own GEMV under coordinate-descent tuning, and to the tuned op without it or at
    M>1; all three agree with eager."""
    from torch._inductor.utils import run_and_get_code
    model, x = gpu_model
    one = x[:1].clone()
    with torch.no_grad():
        want1, want64 = model(one).double(), model(x).double()
        for cdt, inp, want, opaque in ((True, one, want1, False), (False, one, want1, True), (True, x, want64, True)):
            torch._dynamo.reset()
            fn = torch.compile(model, dynamic=False, options={"coordinate_descent_tuning": cdt})
            y, codes = run_and_get_code(fn, inp)
            assert compare(y, want, 2e-2).ok
            # A call of the op, not the source comments that name it in any generated code.
            assert ("= torch.ops.gemmtune.mm.default(" in "\n".join(codes)) == opaque, (cdt, inp.shape)
    torch._dynamo.reset()


def test_gemv_handback_min_bytes_keeps_small_m1_ops_tuned(monkeypatch):
    """GEMMTUNE_GEMV_HANDBACK_MIN_BYTES: an M=1 op under coordinate descent goes back to
    Inductor only where B holds at least that many bytes; unset, every one unless the graph holds
    a merged fused group (note_graph_fused, the measured rule); a bad value warns and counts as
    unset."""
    from torch._inductor import config

    from gemmtune import torch_ops
    monkeypatch.setattr(torch_ops, "GEMV_DEVICES", ("meta",))
    a = torch.empty(1, 2048, device="meta", dtype=torch.float16)
    small = torch.empty(2048, 2048, device="meta", dtype=torch.float16)  # 8 MiB
    big = torch.empty(2048, 32768, device="meta", dtype=torch.float16)  # 128 MiB
    with config.patch(coordinate_descent_tuning=True):
        monkeypatch.delenv(torch_ops.GEMV_HANDBACK_ENV, raising=False)
        torch_ops.note_graph_fused(False)
        assert torch_ops.gemv_to_inductor(a, small) and torch_ops.gemv_to_inductor(a, big)
        # Merged groups in the graph of one tracing context: its M=1 ops stay; another graph's
        # (another context, or none: a graph pass run by hand) are handed back.
        from torch._guards import TracingContext, tracing
        with tracing(TracingContext(None)):
            torch_ops.note_graph_fused(True)
            assert not torch_ops.gemv_to_inductor(a, small) and not torch_ops.gemv_to_inductor(a, big)
            monkeypatch.setenv(torch_ops.GEMV_HANDBACK_ENV, "0")  # the variable wins over the graph
            assert torch_ops.gemv_to_inductor(a, small)
            monkeypatch.delenv(torch_ops.GEMV_HANDBACK_ENV)
        with tracing(TracingContext(None)):
            assert torch_ops.gemv_to_inductor(a, small)
        assert torch_ops.gemv_to_inductor(a, small)
        torch_ops.note_graph_fused(True)  # outside any context: recorded for no graph
        assert torch_ops.gemv_to_inductor(a, small)
        monkeypatch.setenv(torch_ops.GEMV_HANDBACK_ENV, str(64 << 20))
        assert not torch_ops.gemv_to_inductor(a, small) and torch_ops.gemv_to_inductor(a, big)
        monkeypatch.setenv(torch_ops.GEMV_HANDBACK_ENV, "inf")
        assert not torch_ops.gemv_to_inductor(a, big)
        assert not torch_ops.gemv_to_inductor(torch.empty(2, 2048, device="meta", dtype=torch.float16), small)
        monkeypatch.setenv(torch_ops.GEMV_HANDBACK_ENV, "lots")
        with pytest.warns(RuntimeWarning, match="not a byte count"):
            assert torch_ops.gemv_to_inductor(a, small)
    with config.patch(coordinate_descent_tuning=False):
        monkeypatch.delenv(torch_ops.GEMV_HANDBACK_ENV, raising=False)
        assert not torch_ops.gemv_to_inductor(a, big)


def test_torch_save_of_a_patched_model_writes_plain_torch_layers(tmp_path):
    """A Dispatcher cannot be pickled, and torch.save truncates its file before pickling, so
    torch.save(model) of a patched model used to destroy a checkpoint already at that path. Now
    converted layers pickle as their torch class and recorded dispatchers as None: the file
    loads without gemmtune state and gives the same outputs. deepcopy keeps the layers converted."""
    import copy

    def build():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16)).half()

    model = build()
    path = tmp_path / "ckpt.pt"
    torch.save(model, path)
    size_before = path.stat().st_size
    patch(model, hints={"m": [8]}, tune_fn=_by_n({48: TRITON, 16: "aten"}), progress=False)
    assert type(model[0]) is gemmtune.nn.Linear and recorded_dispatcher(model[2]) is not None
    torch.save(model, path)  # raised TypeError after truncating the file
    assert path.stat().st_size >= size_before // 2
    loaded = torch.load(path, weights_only=False)
    assert [type(m) for m in loaded] == [torch.nn.Linear, torch.nn.ReLU, torch.nn.Linear]
    # no gemmtune state: a recorded dispatcher (a layer left as torch's) comes back as None
    assert all(v is None for m in loaded for k, v in vars(m).items() if k.startswith("_gemmtune") or k == "dispatcher")
    assert all(recorded_dispatcher(m) is None for m in loaded)
    x = torch.randn(6, 32, dtype=torch.float16)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), build()(x))
    twin = copy.deepcopy(model)  # still converted, dispatchers shared
    assert type(twin[0]) is gemmtune.nn.Linear and twin[0].dispatcher is model[0].dispatcher
    assert recorded_dispatcher(twin[2]) is recorded_dispatcher(model[2])
    assert twin[0].weight is not model[0].weight and torch.equal(twin[0].weight, model[0].weight)
    assert type(copy.copy(model[0])) is gemmtune.nn.Linear


def test_patched_layers_leave_autocast_to_torch():
    """Under torch.autocast the input and weight are still fp32, so the dtype check never fired and
    a patched layer ran its fp32 kernel where torch's would run bf16: it now runs F.linear, which
    autocast casts, on every path (the eager path table included)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 48))
    patch(model, hints={"m": [8]}, tune_fn=_by_n({48: TRITON}), progress=False)
    assert type(model[0]) is gemmtune.nn.Linear
    x = torch.randn(6, 32)
    with torch.no_grad():
        model(x)  # caches this shape's eager path
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = model(x)
            want = torch.nn.functional.linear(x, model[0].weight, model[0].bias)
    assert y.dtype == torch.bfloat16 == want.dtype
    torch.testing.assert_close(y, want)


def test_patched_layers_on_the_meta_device_run_torchs_forward_and_0d_input_gets_torchs_error():
    """A patched model moved to (or built on) the meta device: every patched layer raised
    "unknown device type for autocast" (torch.is_autocast_enabled('meta')); torch's own layers
    give the output's shape there, and now the patched ones do too. A 0-D input raised an
    IndexError from flatten; it gets F.linear's own error now."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16)).half()
    patch(model, hints={"m": [8]}, tune_fn=_tune(TRITON), progress=False)
    assert type(model[0]) is gemmtune.nn.Linear
    x = torch.randn(2, 3, 32, dtype=torch.float16)
    with torch.no_grad():
        y = model(x)  # caches this shape's eager path on the CPU
        h = torch.relu(torch.nn.functional.linear(x.double(), model[0].weight.double(), model[0].bias.double()))
        ref = torch.nn.functional.linear(h.half().double(), model[2].weight.double(), model[2].bias.double())
    assert compare(y, ref, 2e-3).ok
    with pytest.raises(RuntimeError, match="at least 1D"):
        model[0](torch.tensor(1.0, dtype=torch.float16))
    model.to("meta")
    for xm in (x.to("meta"), torch.empty(7, 32, dtype=torch.float16, device="meta")):
        ym = model(xm)
        assert ym.device.type == "meta" and ym.shape == (*xm.shape[:-1], 16) and ym.dtype == torch.float16


def test_patched_conv1d_on_the_meta_device_runs_torchs_forward():
    pytest.importorskip("transformers")
    from transformers.pytorch_utils import Conv1D

    conv = Conv1D(48, 32).half()
    model = torch.nn.Sequential(conv)
    patch(model, hints={"m": [8]}, tune_fn=_tune(TRITON), progress=False)
    x = torch.randn(2, 5, 32, dtype=torch.float16)
    with torch.no_grad():
        model(x)
    model.to("meta")
    ym = model(x.to("meta"))
    assert ym.device.type == "meta" and ym.shape == (2, 5, 48)
