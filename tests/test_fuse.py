"""gemmtune.fuse_linears: sibling nn.Linear layers (one input, several projections) as one GEMM.

Every test compares the fused model with the same model unfused (or with fp64), on fresh random
inputs, and checks the cases where the fused output must not be served: another input, the input
modified in place, a layer called twice, gradients, torch.compile, weights moved or rebound."""

from __future__ import annotations

import copy
import io
import json
import pickle

import pytest
import torch

import gemmtune
from gemmtune.fuse import FusedLinear

TRITON = "triton_mm:BM16-BN16-BK16-S1-W2-G8"


class Attn(torch.nn.Module):
    """q/k/v on one input, then an output projection on another; optional in-place or repeated calls."""

    def __init__(self, k=32, ns=(32, 16, 16), bias=True, dtype=torch.float32):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(k, n, bias=bias, dtype=dtype) for n in ns)
        self.o = torch.nn.Linear(ns[2], k, bias=bias, dtype=dtype)
        self.touch_between = False  # x.add_ between q and k (the fused output is stale then)
        self.k_on_other = False  # k on x * 2 (another tensor)

    def forward(self, x):
        q = self.q(x)
        if self.touch_between:
            x.add_(1.0)
        k = self.k(x * 2 if self.k_on_other else x)
        v = self.v(x)
        return self.o(torch.softmax(q[..., :k.shape[-1]] * k, -1) * v)


def _pair(**kw):
    torch.manual_seed(0)
    m = Attn(**kw)
    f = copy.deepcopy(m)
    groups = gemmtune.fuse_linears(f, torch.randn(2, 5, m.q.in_features, dtype=m.q.weight.dtype))
    return m, f, groups


def _close(a, b):
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_siblings_fused_outputs_match_fp64():
    m, f, groups = _pair()
    assert [g.members for g in groups] == [("q", "k", "v")] and groups[0].n == (32, 16, 16)
    assert all(type(x) is FusedLinear for x in (f.q, f.k, f.v)) and type(f.o) is torch.nn.Linear
    # the members' parameters are views into one tensor; nothing is added to parameters/state_dict
    fused = f.gemmtune_fused_q_k_v
    assert f.k.weight.data_ptr() == fused.weight.data_ptr() + 32 * 32 * 4
    assert sorted(f.state_dict()) == sorted(m.state_dict())
    assert sum(p.numel() for p in f.parameters()) == sum(p.numel() for p in m.parameters())
    for shape in [(1, 32), (7, 32), (3, 1, 32), (2, 13, 32)]:
        x = torch.randn(*shape)
        with torch.no_grad():
            want = m.double()(x.double()).float()
            m.float()
            _close(f(x), want)


def test_fused_path_runs_one_gemm_for_the_group():
    _, f, _ = _pair()
    calls = []
    f.gemmtune_fused_q_k_v.register_forward_pre_hook(lambda *_: calls.append(1))  # forward is called directly
    seen = []
    orig = f.gemmtune_fused_q_k_v.forward
    f.gemmtune_fused_q_k_v.forward = lambda x: seen.append(x.shape) or orig(x)
    with torch.no_grad():
        f(torch.randn(3, 32))
        f(torch.randn(4, 32))
    assert seen == [torch.Size([3, 32]), torch.Size([4, 32])]
    assert f.q._gemmtune_group.round is None  # each round let go of its input and outputs


@pytest.mark.parametrize("case", ["touch_between", "k_on_other"])
def test_a_changed_or_other_input_is_not_served_the_fused_output(case):
    m, f, _ = _pair()
    setattr(m, case, True)
    setattr(f, case, True)
    x = torch.randn(3, 32)
    with torch.no_grad():
        _close(f(x.clone()), m(x.clone()))


def test_a_layer_called_twice_on_one_input_is_not_grouped_and_runs_right():
    class Twice(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 4), torch.nn.Linear(8, 4)

        def forward(self, x):
            return self.a(x) + self.a(x) * self.b(x)
    m = Twice()
    assert gemmtune.fuse_linears(m, torch.randn(2, 8)) == []
    assert type(m.a) is torch.nn.Linear and not any("gemmtune_fused" in n for n, _ in m.named_modules())

    # grouped from a pass that called each once; a later forward calling one twice recomputes
    class Later(Twice):
        twice = False

        def forward(self, x):
            y = self.a(x) * self.b(x)
            return y + self.a(x) if self.twice else y
    m = Later()
    f = copy.deepcopy(m)
    assert len(gemmtune.fuse_linears(f, torch.randn(2, 8))) == 1
    m.twice = f.twice = True
    x = torch.randn(3, 8)
    with torch.no_grad():
        _close(f(x), m(x))


def test_unfusable_siblings_are_left_alone():
    class Mixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 4)
            self.b = torch.nn.Linear(8, 4, bias=False)  # bias on one only
            self.c = torch.nn.Linear(8, 4, dtype=torch.float64)  # another dtype
            self.d = torch.nn.Linear(8, 4)
            self.e = torch.nn.Linear(8, 4)
            self.e.weight = self.d.weight  # tied: one parameter, two layers

        def forward(self, x):
            return self.a(x) + self.b(x) + self.c(x.double()).float() + self.d(x) + self.e(x)
    m = Mixed()
    assert gemmtune.fuse_linears(m, torch.randn(2, 8)) == []


def test_gradients_reach_the_members_weights():
    m, f, _ = _pair()
    x = torch.randn(3, 32)
    m(x).square().sum().backward()
    f(x).square().sum().backward()  # weights need gradients: each member runs its own F.linear
    for a, b in zip(m.parameters(), f.parameters()):
        _close(b.grad, a.grad)
    # frozen weights with gradients on: the fused path, and the input still gets its gradient
    for mod in (m, f):
        mod.requires_grad_(False)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    m(xa).sum().backward()
    f(xb).sum().backward()
    _close(xb.grad, xa.grad)


def test_weights_moved_rebound_or_loaded_are_followed():
    m, f, _ = _pair()
    x = torch.randn(3, 32)
    with torch.no_grad():
        f.double()  # every parameter and buffer replaced: re-fused on the next call
        m.double()
        _close(f(x.double()), m(x.double()))
        assert f.k.weight.data_ptr() == f.gemmtune_fused_q_k_v.weight.data_ptr() + 32 * 32 * 8
        new = torch.randn(16, 32, dtype=torch.float64)
        f.v.weight.data = new.clone()
        m.v.weight.data = new.clone()
        _close(f(x.double()), m(x.double()))
        sd = {k: torch.randn_like(v) for k, v in m.state_dict().items()}
        m.load_state_dict(sd)
        f.load_state_dict(sd)  # copied into the views: the fused tensor holds the new values
        _close(f(x.double()), m(x.double()))
        f.q.weight.mul_(0.5)  # an in-place update (an optimizer step) is seen too
        m.q.weight.mul_(0.5)
        _close(f(x.double()), m(x.double()))


def test_copies_pickles_and_unfuse():
    m, f, _ = _pair()
    x = torch.randn(3, 32)
    with torch.no_grad():
        want = m(x)
        for g in (copy.deepcopy(f), pickle.loads(pickle.dumps(f))):
            # (deepcopy clones each Parameter on its own: the copy is re-fused on its first call)
            _close(g(x), want)
            assert g.k.weight.data_ptr() == g.gemmtune_fused_q_k_v.weight.data_ptr() + 32 * 32 * 4
        buf = io.BytesIO()
        torch.save(f.state_dict(), buf)
        m2 = Attn()
        m2.load_state_dict(torch.load(io.BytesIO(buf.getvalue())))
        _close(m2(x), want)
        assert gemmtune.unfuse(f) == 1
        assert type(f.q) is torch.nn.Linear and not hasattr(f, "gemmtune_fused_q_k_v")
        f.q.weight.zero_()  # its own memory again
        assert f.k.weight.abs().sum() > 0
        assert gemmtune.unfuse(f) == 0


def test_a_group_pickled_before_its_rest_list_existed_loads_and_serves():
    """A fused model saved (torch.save / pickle) by a gemmtune whose groups had no ``rest`` list
    (the members a round still serves, added 2026-11-29) loads, and its rounds serve members."""
    m, f, _ = _pair()
    x = torch.randn(3, 32)
    g = f.q._gemmtune_group
    state = g.__getstate__()
    del state["rest"]
    old = type(g).__new__(type(g))
    old.__setstate__(state)
    assert old.rest == [frozenset({1, 2}), frozenset({0, 2}), frozenset({0, 1})]
    f.q._gemmtune_group = f.k._gemmtune_group = f.v._gemmtune_group = old
    with torch.no_grad():
        _close(f(x), m(x))
        q = f.q(x)
        assert old.round is not None and old.round.pending == {1, 2}
        k = f.k(x)
        assert k.data_ptr() == q.data_ptr() + 32 * 4  # k's slice of the round's one output
        assert old.round.pending == {2}


def test_a_member_parametrized_after_fusing_runs_and_unfuses_keeping_its_parametrization():
    from torch.nn.utils import parametrize

    class Twice(torch.nn.Module):
        def forward(self, w):
            return w * 2
    m, f, _ = _pair()
    for mod in (m, f):
        parametrize.register_parametrization(mod.k, "weight", Twice())
    x = torch.randn(3, 32)
    with torch.no_grad():
        _close(f(x), m(x))  # k's weight is computed: the group runs unfused
        assert gemmtune.unfuse(f) == 1
        assert not isinstance(f.k, FusedLinear) and isinstance(f.k, torch.nn.Linear)
        assert parametrize.is_parametrized(f.k, "weight")
        _close(f(x), m(x))
        # its original is a tensor of its own again, not a view into the fused weight
        f.q.weight.zero_()
        assert f.k.parametrizations.weight.original.untyped_storage().data_ptr() != \
            f.q.weight.untyped_storage().data_ptr()
        _close(f.k.weight, m.k.weight)
    assert sorted(f.state_dict()) == sorted(m.state_dict())
    parametrize.remove_parametrizations(f.k, "weight")
    assert type(f.k) is torch.nn.Linear


def test_under_torch_compile_and_inference_mode():
    m, f, _ = _pair()
    x = torch.randn(3, 32)
    with torch.no_grad():
        want = m(x)
        _close(torch.compile(f, backend="eager")(x), want)  # unfused while traced
    with torch.inference_mode():
        _close(f(x), want)
        xi = torch.randn(3, 32)
        _close(f(xi), m(xi))


def test_views_and_odd_inputs():
    m, f, _ = _pair()
    with torch.no_grad():
        base = torch.randn(40, 70)
        for x in (base[3:10, 5:37], base.t()[:32].t()[:9], torch.randn(32, 1).t(), torch.randn(1, 1, 32)):
            _close(f(x), m(x))


def test_fusing_needs_inputs_and_a_module():
    with pytest.raises(ValueError, match="example inputs"):
        gemmtune.fuse_linears(Attn())
    with pytest.raises(TypeError, match="torch.nn.Module"):
        gemmtune.fuse_linears(lambda x: x, torch.randn(2, 32))


def test_tune_and_patch_see_the_fused_layer():
    from test_modeltune import fake_tuner

    m, f, _ = _pair(bias=False)
    calls = []
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        ds = gemmtune.tune_model(f, [(x,)], tune_fn=fake_tuner(calls, {64: TRITON}))
        assert (64, 32, "float32", "col") in ds  # the fused shape: 32 + 16 + 16 outputs
        assert not any(k[0] == 16 and k[1] == 32 for k in ds)  # k/v are not layers of their own now
        gemmtune.patch(f, dispatchers=ds, tune_missing=False)
        assert hasattr(f.gemmtune_fused_q_k_v, "_gemmtune_handle")  # on the Triton kernel
        y = torch.randn(2, 5, 32)
        _close(f(y), m(y))


# HF architectures: q/k/v and gate/up found and fused (Phi's parallel block: q/k/v and fc1 read one
# input), prefill and decode logits as unfused; one of them then tuned and patched on Triton.
FUSED = {"mistral": {"q_proj+k_proj+v_proj", "gate_proj+up_proj"}, "qwen3": {"q_proj+k_proj+v_proj", "gate_proj+up_proj"},
         "phi": {"q_proj+k_proj+v_proj+fc1"}, "gemma": {"q_proj+k_proj+v_proj", "gate_proj+up_proj"},
         "gpt_neox": set(), "gpt2": set(),
         # q/k/v without a bias and the parallel MLP's fc_in with one: q/k/v fused, fc_in alone
         "gptj": {"q_proj+k_proj+v_proj"}}


@pytest.mark.parametrize("model_type", sorted(FUSED))
def test_hf_models_fused_match_unfused(model_type):
    pytest.importorskip("transformers")
    from test_hf_archs import prefill_then_step, tiny

    model = tiny(model_type)
    ids, step = torch.randint(0, 512, (2, 8)), torch.randint(0, 512, (2, 1))
    f = copy.deepcopy(model)
    with torch.no_grad():
        want = prefill_then_step(model, ids, step)
        groups = gemmtune.fuse_linears(f, fn=lambda: prefill_then_step(f, ids, step))
        got = prefill_then_step(f, ids, step)
    kinds = {"+".join(n.rpartition(".")[2] for n in g.members) for g in groups}
    assert kinds == FUSED[model_type]
    assert len(groups) == len(FUSED[model_type]) * model.config.num_hidden_layers
    assert sorted(f.state_dict()) == sorted(model.state_dict())
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    if model_type == "mistral":
        from test_hf_archs import all_triton
        with torch.no_grad():
            ds = gemmtune.tune_model(f, fn=lambda: prefill_then_step(f, ids, step), tune_fn=all_triton)
            gemmtune.patch(f, dispatchers=ds, tune_missing=False)
            got = prefill_then_step(f, ids, step)
        assert sum(hasattr(m, "_gemmtune_handle") for m in f.modules()) == 4 * 2 + 1  # per layer: 2 fused, o, down; the head
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


ON_GPU = torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
def test_gpu_fused_model_in_a_cuda_graph_and_moved_weights_inside_one():
    torch.manual_seed(0)
    m = Attn(k=256, ns=(256, 64, 64), dtype=torch.bfloat16).cuda()
    f = copy.deepcopy(m)
    x = torch.randn(4, 256, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        assert len(gemmtune.fuse_linears(f, x)) == 1
        want64 = m.double()(x.double())
        m.bfloat16()
        static_x = x.clone()
        f(static_x)  # warm-up outside the capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_y = f(static_x)
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(static_y.double(), want64, rtol=2e-2, atol=2e-2)
        x2 = torch.randn_like(x)
        static_x.copy_(x2)
        g.replay()
        torch.testing.assert_close(static_y, m(x2), rtol=1e-2, atol=1e-2)
        # weights rebound: inside a capture the layers run unfused (no allocation there), and after
        # it the group is re-fused
        new = torch.randn_like(f.v.weight)
        f.v.weight.data = new.clone()
        m.v.weight.data = new.clone()
        g2 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g2):
            y2 = f(static_x)
        g2.replay()
        torch.testing.assert_close(y2, m(x2), rtol=1e-2, atol=1e-2)
        torch.testing.assert_close(f(x2), m(x2), rtol=1e-2, atol=1e-2)
        assert f.v.weight.data_ptr() == f.gemmtune_fused_q_k_v.weight.data_ptr() + 320 * 256 * 2


def test_a_saved_patched_fused_model_loads_onto_a_fresh_fused_one(tmp_path):
    """save_patched keeps the fused layer's dispatcher; a new instance fused the same way takes it
    with load_patched (no tuning) and computes what the unfused model does."""
    from test_modeltune import fake_tuner

    m, f, _ = _pair(bias=False)
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        ds = gemmtune.tune_model(f, [(x,)], tune_fn=fake_tuner([], {64: TRITON}))
        gemmtune.patch(f, dispatchers=ds, tune_missing=False)
        gemmtune.save_patched(tmp_path / "fused.json", gemmtune.nn.dispatchers(f, with_layout=True))
        fresh = copy.deepcopy(m)
        gemmtune.fuse_linears(fresh, x)
        gemmtune.load_patched(fresh, tmp_path / "fused.json")
        assert hasattr(fresh.gemmtune_fused_q_k_v, "_gemmtune_handle")
        y = torch.randn(3, 32)
        _close(fresh(y), m(y))


def test_refused_under_inference_mode_keeps_normal_parameters_and_subclasses_run_unfused():
    m, f, _ = _pair()
    f.double()
    m.double()
    x = torch.randn(3, 32, dtype=torch.float64)
    with torch.inference_mode():
        _close(f(x), m(x))  # re-fused here, after .double()
    assert not f.q.weight.is_inference() and not f.gemmtune_fused_q_k_v.weight.is_inference()
    f(x).sum().backward()  # the parameters still take part in autograd

    class Marked(torch.Tensor):
        pass
    xs = x.as_subclass(Marked)
    seen = []
    f.gemmtune_fused_q_k_v.register_forward_pre_hook(lambda *_: seen.append(1))
    with torch.no_grad():
        _close(torch.Tensor(f(xs)), m(x))  # each member's own F.linear
        assert not seen
        f(x)
        assert seen  # a plain tensor takes the fused path


def test_patch_with_fuse_fuses_then_tunes_the_fused_shapes():
    from test_modeltune import fake_tuner

    torch.manual_seed(0)
    m = Attn(bias=False)
    f = copy.deepcopy(m)
    calls = []
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        # a generator of passes: read once, for the fusion and the tuning both
        gemmtune.patch(f, example_inputs=(p for p in [(x,)]), fuse=True, tune_fn=fake_tuner(calls, {64: TRITON}))
        assert len(calls) == 1 and (64, 32, "float32") in gemmtune.nn.dispatchers(f)
        assert hasattr(f.gemmtune_fused_q_k_v, "_gemmtune_handle") and type(f.q) is FusedLinear
        y = torch.randn(3, 32)
        _close(f(y), m(y))
    with pytest.raises(ValueError, match="needs example_inputs"):
        gemmtune.patch(Attn(), fuse=True)


def test_fusing_a_patched_model_says_to_fuse_first():
    from test_modeltune import fake_tuner

    m = Attn(bias=False)
    x = torch.randn(2, 32)
    with torch.no_grad():
        gemmtune.patch(m, example_inputs=[(x,)], tune_fn=fake_tuner([], {32: TRITON, 16: TRITON}))
        with pytest.warns(RuntimeWarning, match="fuse first, then patch"):
            assert gemmtune.fuse_linears(m, x) == []


def test_fusing_again_leaves_a_fused_layer_alone():
    """A second fuse_linears whose pass calls a layer the first did not, on a fused group's input:
    the fused layer (a plain nn.Linear, its weight a buffer) is not a member of a new group. It
    had been: the new group's re-fuse rebound the buffer's data, the old members' weights no
    longer views of what the fused layer reads, and an in-place update of them was not seen."""
    class Extra(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.extra = (torch.nn.Linear(32, n) for n in (32, 16, 8))
            self.use_extra = False

        def forward(self, x):
            y = self.q(x).sum(-1) + self.k(x).sum(-1)
            return y + self.extra(x).sum(-1) if self.use_extra else y
    torch.manual_seed(0)
    m = Extra()
    f = copy.deepcopy(m)
    x = torch.randn(3, 32)
    with torch.no_grad():
        assert [g.members for g in gemmtune.fuse_linears(f, x)] == [("q", "k")]
        m.use_extra = f.use_extra = True
        assert gemmtune.fuse_linears(f, x) == []
        assert type(f.gemmtune_fused_q_k) is torch.nn.Linear
        for mod in (m, f):
            mod.q.weight.mul_(2)  # in place (an optimizer step, load_state_dict)
        _close(f(x), m(x))
        with pytest.raises(ValueError, match="fused layer"):
            gemmtune.fuse_linears(f, groups=[("gemmtune_fused_q_k", "extra")])


def test_groups_by_name_without_a_forward_pass():
    m, f, groups = _pair()
    fresh = copy.deepcopy(m)
    made = gemmtune.fuse_linears(fresh, groups=[g.members for g in groups])
    assert made == groups and gemmtune.fuse.fused_names(fresh) == [("q", "k", "v")]
    assert gemmtune.fuse_linears(fresh, groups=[("q", "k", "v")]) == []  # fused already, as named
    x = torch.randn(3, 32)
    with torch.no_grad():
        _close(fresh(x), m(x))
    bad = [([("q", "nope")], "no layer 'nope'"), ([("q",)], "two or more"), ([("q", "q")], "two or more"),
           ([("q", "o")], "cannot share one GEMM"), (["qk"], "sequence of layer names"),
           ([("q", "k"), ("k", "v")], "in another group of the list"), ([("q", "k"), ("q", "k")], "another group")]
    for spec, needle in bad:
        with pytest.raises((ValueError, TypeError), match=needle):
            gemmtune.fuse_linears(copy.deepcopy(m), groups=spec)
    with pytest.raises(ValueError, match="a FusedLinear, not a plain"):
        gemmtune.fuse_linears(fresh, groups=[("k", "v")])  # members of another group
    with pytest.raises(ValueError, match="not both"):
        gemmtune.fuse_linears(copy.deepcopy(m), x, groups=[("q", "k")])


def test_save_patched_records_the_groups_and_load_patched_refuses_them(tmp_path):
    from test_modeltune import fake_tuner

    m, f, _ = _pair(bias=False)
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        gemmtune.patch(f, dispatchers=gemmtune.tune_model(f, [(x,)], tune_fn=fake_tuner([], {64: TRITON})),
                       tune_missing=False)
        path = gemmtune.save_patched(tmp_path / "p.json", f)
        assert json.loads(path.read_text())["fused"] == [["q", "k", "v"]]
        fresh = copy.deepcopy(m)
        gemmtune.load_patched(fresh, path)
        assert gemmtune.fuse.fused_names(fresh) == [("q", "k", "v")]
        assert fresh.gemmtune_fused_q_k_v.dispatcher.hint_choices[0].choice.id == TRITON
        _close(fresh(x), m(x))
        other = torch.nn.ModuleDict({"q": torch.nn.Linear(32, 32), "k": torch.nn.Linear(16, 16)})
        with pytest.raises(ValueError, match="cannot re-fuse this model as saved"):
            gemmtune.load_patched(other, path)
    with pytest.raises(ValueError, match="no patched layer"):
        gemmtune.save_patched(tmp_path / "q.json", copy.deepcopy(m))


def test_save_and_load_patched_see_through_a_torch_compile_wrapper(tmp_path):
    """``model = torch.compile(model)`` wraps it in an OptimizedModule whose layers are named
    ``_orig_mod.q``...: save_patched of the wrapper recorded the groups under those names, which a
    fresh model has not ("cannot re-fuse this model as saved: ... no layer '_orig_mod.q'"), and
    load_patched into a compiled fresh model could not find the saved ``q``. Both unwrap it."""
    from test_modeltune import fake_tuner

    m, f, _ = _pair(bias=False)
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        gemmtune.patch(f, dispatchers=gemmtune.tune_model(f, [(x,)], tune_fn=fake_tuner([], {64: TRITON})),
                       tune_missing=False)
        path = gemmtune.save_patched(tmp_path / "p.json", torch.compile(f, backend="eager"))
        assert json.loads(path.read_text())["fused"] == [["q", "k", "v"]]
        fresh = copy.deepcopy(m)
        gemmtune.load_patched(fresh, path)
        assert gemmtune.fuse.fused_names(fresh) == [("q", "k", "v")]
        compiled = torch.compile(copy.deepcopy(m), backend="eager")
        assert gemmtune.load_patched(compiled, path) is compiled
        assert gemmtune.fuse.fused_names(compiled._orig_mod) == [("q", "k", "v")]
        assert isinstance(compiled._orig_mod.gemmtune_fused_q_k_v, gemmtune.nn.Linear)
        _close(compiled(x), m(x))
