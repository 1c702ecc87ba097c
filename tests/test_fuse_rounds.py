"""gemmtune.fuse beyond a plain forward: usage sequences where the fused model must compute (or fail) as the
unfused one does. Each test compares a fused model with an unfused copy."""

from __future__ import annotations

import copy
import threading

import pytest
import torch

import gemmtune


class QKV(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(32, n) for n in (32, 16, 16))

    def forward(self, x):
        return torch.cat([self.q(x), self.k(x), self.v(x)], -1)


def _pair(setup=None):
    torch.manual_seed(0)
    m = QKV()
    if setup is not None:
        setup(m)
    f = copy.deepcopy(m)
    with torch.no_grad():
        assert len(gemmtune.fuse_linears(f, torch.randn(3, 32))) == 1
    return m, f


def _close(a, b):
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_weight_updated_in_place_between_siblings_is_seen():
    # a round begun by q is not served to k once k's weight changed (optimizer step, zero_, copy_)
    m, f = _pair()
    x = torch.randn(3, 32)
    with torch.no_grad():
        f.q(x)
        f.k.weight.zero_()
        m.k.weight.zero_()
        _close(f.k(x), m.k(x))


def test_weight_rebound_between_siblings_is_seen():
    m, f = _pair()
    x = torch.randn(3, 32)
    new = torch.randn(16, 32)
    with torch.no_grad():
        f.q(x)
        f.k.weight.data = new.clone()
        m.k.weight.data = new.clone()
        _close(f.k(x), m.k(x))


def test_input_data_rebound_between_siblings_is_seen():
    m, f = _pair()
    x, x2 = torch.randn(3, 32), torch.randn(3, 32)
    with torch.no_grad():
        f.q(x)
        x.data = x2  # no version bump on x
        _close(f.k(x), m.k(x2))


def test_a_round_begun_under_no_grad_is_not_served_with_grad():
    m, f = _pair()
    x = torch.randn(3, 32)
    with torch.no_grad():
        f.q(x)
    y = f.k(x)  # weights require grad: the unfused k's output has a grad_fn
    assert y.requires_grad
    y.sum().backward()
    assert f.k.weight.grad is not None


def test_input_requires_grad_set_between_siblings():
    m, f = _pair()
    f.requires_grad_(False)
    x = torch.randn(3, 32)
    f.q(x)
    x.requires_grad_()
    f.k(x).sum().backward()
    assert x.grad is not None


def test_a_round_begun_in_inference_mode_is_not_served_outside():
    m, f = _pair()
    x = torch.randn(3, 32)
    with torch.inference_mode():
        f.q(x)
    with torch.no_grad():
        y = f.k(x)
    assert not y.is_inference()
    y.add_(1)  # an inference tensor would refuse this outside inference mode


def test_a_round_begun_under_autocast_is_not_served_outside():
    m, f = _pair()
    x = torch.randn(3, 32)
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            f.q(x)
        assert f.k(x).dtype == m.k(x).dtype == torch.float32


def test_outputs_modified_in_place_with_autograd_through_the_input():
    # frozen weights, gradients w.r.t. the input (attribution, adversarial inputs): the fused path
    # runs with autograd; an in-place op on a member's output must work as on nn.Linear's
    m, f = _pair()
    for mod in (m, f):
        mod.requires_grad_(False)
    xa, xb = torch.randn(3, 32, requires_grad=True), torch.randn(3, 32)
    xb = xa.detach().clone().requires_grad_()
    outs = []
    for mod, x in ((m, xa), (f, xb)):
        q = mod.q(x)
        q.mul_(0.5)
        outs.append((q * mod.k(x).repeat(1, 2)).sum() + mod.v(x).sum())
    outs[0].backward()
    outs[1].backward()
    _close(outs[1], outs[0])
    _close(xb.grad, xa.grad)


def test_deepcopy_with_a_round_pending_under_autograd():
    m, f = _pair()
    f.requires_grad_(False)
    x = torch.randn(3, 32, requires_grad=True) * 1
    f.q(x)  # k and v not called (yet): the round holds non-leaf tensors
    g = copy.deepcopy(f)
    with torch.no_grad():
        y = torch.randn(3, 32)
        _close(g(y), m(y))


def test_member_called_with_the_keyword_input():
    m, f = _pair()
    x = torch.randn(3, 32)
    with torch.no_grad():
        _close(f.q(input=x), m.q(input=x))


def test_one_member_converted_to_another_dtype_leaves_the_others_alone():
    m, f = _pair()
    f.v.double()
    m.v.double()
    x = torch.randn(3, 32)
    with torch.no_grad():
        _close(f.q(x), m.q(x))
        _close(f.k(x), m.k(x))
        _close(f.v(x.double()), m.v(x.double()))
    assert f.q.weight.dtype == f.k.weight.dtype == torch.float32


def test_parameter_replaced_by_one_of_another_shape():
    m, f = _pair()
    w, b = torch.randn(48, 32), torch.randn(48)
    for mod in (m, f):
        mod.q.weight = torch.nn.Parameter(w.clone())
        mod.q.bias = torch.nn.Parameter(b.clone())
    x = torch.randn(3, 32)
    with torch.no_grad():
        _close(f(x), m(x))
    assert f.q.weight.shape == (48, 32)  # the user's parameter is not cut to the old size


def test_bias_removed_from_one_member():
    m, f = _pair()
    m.q.bias = None
    f.q.bias = None
    x = torch.randn(3, 32)
    with torch.no_grad():
        _close(f(x), m(x))


def test_weight_shape_not_matching_out_features_at_fusion():
    def setup(mod):  # weight replaced without updating out_features (model surgery)
        mod.q.weight = torch.nn.Parameter(torch.randn(40, 32))
        mod.q.bias = torch.nn.Parameter(torch.randn(40))
    m, f = _pair(setup)
    x = torch.randn(3, 32)
    with torch.no_grad():
        _close(f(x), m(x))
    assert f.q.weight.shape == (40, 32)


@pytest.mark.parametrize("how", ["prune", "weight_norm"])
def test_pruned_or_parametrized_member(how):
    m, f = _pair()
    for mod in (m, f):
        if how == "prune":
            import torch.nn.utils.prune as prune
            prune.l1_unstructured(mod.q, "weight", 0.5)
        else:
            torch.nn.utils.parametrizations.weight_norm(mod.q)
    x = torch.randn(3, 32)
    with torch.no_grad():
        _close(f(x), m(x))


def test_vmap_over_stacked_parameters():
    from torch.func import functional_call, stack_module_state, vmap
    m, f = _pair()
    x = torch.randn(3, 32)
    outs = []
    for mod in (m, f):
        params, bufs = stack_module_state([mod, copy.deepcopy(mod)])
        with torch.no_grad():
            outs.append(vmap(lambda p, b, x: functional_call(mod, (p, b), (x,)), in_dims=(0, 0, None))(params, bufs, x))
    _close(outs[1], outs[0])


def test_torch_func_transforms_run_the_members_unfused():
    """vmap's inputs have no storage (the fused path read its data pointer and raised) and jvp's
    tangent must reach every member's output."""
    from torch.func import jvp, vmap

    m, f = _pair()
    xb, x, t = torch.randn(4, 3, 32), torch.randn(3, 32), torch.randn(3, 32)
    with torch.no_grad():
        _close(vmap(f)(xb), vmap(m)(xb))
        got, want = jvp(f, (x,), (t,)), jvp(m, (x,), (t,))
    _close(got[0], want[0])
    _close(got[1], want[1])


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=["coo", "csr"])
def test_a_sparse_input_runs_each_members_own_linear(layout):
    # nn.Linear takes a sparse input; the fused round read its data pointer and raised "Cannot
    # access data pointer of Tensor that doesn't have storage"
    import warnings
    m, f = _pair()
    x = torch.randn(5, 32)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CSR support is in beta
        _close(f(x.to_sparse(layout=layout)), m(x))
        _close(f(x), m(x))  # the dense input after it: fused again


def test_two_threads_refusing_one_group_leave_it_consistent():
    """The first calls of a copied (or moved, or reloaded) model from two threads both re-fuse its
    groups. Forced interleaving: the first thread stops after binding the fused weight, before the
    members', while the second re-fuses the whole group. The first then bound the members to its
    tensor and recorded the second's as the fused one; ``_intact`` accepted that, and every later
    in-place update of a member's weight went unseen by the fused GEMM (wrong outputs, every call)."""
    m, f0 = _pair()
    f = copy.deepcopy(f0)  # a copy re-fuses at its first call
    g = f.q._gemmtune_group
    stopped, other_done = threading.Event(), threading.Event()

    class Pausing(torch.nn.Linear):
        def __setattr__(self, name, value):
            super().__setattr__(name, value)
            if name == "weight" and threading.current_thread().name == "first-refuse":
                stopped.set()
                # Fixed, the other thread waits for this re-fuse to end (the lock): time out then.
                other_done.wait(2)

    g.fused.__class__ = Pausing
    errors = []

    def first():
        try:
            with torch.no_grad():
                f(torch.randn(3, 32))
        except Exception as e:  # (an assert in a thread would be lost)
            errors.append(repr(e))

    t = threading.Thread(target=first, name="first-refuse", daemon=True)
    t.start()
    assert stopped.wait(30)
    with torch.no_grad():
        f(torch.randn(3, 32))  # this thread's first call re-fuses too
    other_done.set()
    t.join(30)
    assert not t.is_alive() and not errors
    g.fused.__class__ = torch.nn.Linear
    x = torch.randn(3, 32)
    with torch.no_grad():
        f.k.weight.mul_(2.0)
        m.k.weight.mul_(2.0)
        _close(f(x), m(x))
    assert all(p.untyped_storage().data_ptr() == g.fused.weight.untyped_storage().data_ptr()
               for p in (f.q.weight, f.k.weight, f.v.weight))


def test_two_threads_calling_one_member_on_one_input_get_outputs_of_their_own(monkeypatch):
    """Two threads calling a member on the very same input tensor, its round pending. Forced
    interleaving: both pass the round's checks before either takes the slice. Both were served the
    round's slice, one tensor object: an in-place op by one caller on its output (as on any
    F.linear output) changed the other's."""
    from gemmtune import fuse

    m, f = _pair()
    x = torch.randn(3, 32)
    with torch.no_grad():
        f.q(x)  # a round on x begins: k's slice is pending
    checked_a, checked_b = threading.Event(), threading.Event()
    served = fuse._Group._served

    def checked_by_both(self, i, r):
        ok = served(self, i, r)
        if threading.current_thread().name == "first-take":
            checked_a.set()
            assert checked_b.wait(30)
        else:
            checked_b.set()
        return ok
    monkeypatch.setattr(fuse._Group, "_served", checked_by_both)
    outs, errors = {}, []

    def call(name):
        try:
            with torch.no_grad():
                outs[name] = f.k(x)
        except Exception as e:  # (an assert in a thread would be lost)
            errors.append(repr(e))

    t = threading.Thread(target=call, args=("a",), name="first-take", daemon=True)
    t.start()
    assert checked_a.wait(30)
    call("b")
    t.join(30)
    assert not t.is_alive() and not errors
    with torch.no_grad():
        want = m.k(x)
    assert outs["a"] is not outs["b"]
    outs["b"].mul_(0)  # a caller scales its own output in place
    _close(outs["a"], want)


def test_a_model_fused_while_another_thread_calls_it(monkeypatch):
    """``fuse_linears`` (``load_patched`` of a fused artifact) onto a model other threads are
    serving. Forced interleaving: the fusing thread stops as it gives a member its group while the
    model is called. The member's class was switched first, so the call ran FusedLinear.forward
    with no group: AttributeError '_gemmtune_group'."""
    torch.manual_seed(0)
    m = QKV()
    f = copy.deepcopy(m)
    x = torch.randn(3, 32)
    paused, go, errors = threading.Event(), threading.Event(), []
    setattr_ = torch.nn.Module.__setattr__

    def setattr_slowly(self, name, value):
        if name == "_gemmtune_group" and threading.current_thread().name == "fuser" and not paused.is_set():
            paused.set()
            assert go.wait(30)
        setattr_(self, name, value)
    monkeypatch.setattr(torch.nn.Module, "__setattr__", setattr_slowly)

    def fuser():
        try:
            gemmtune.fuse_linears(f, groups=[["q", "k", "v"]])
        except Exception as e:  # (an assert in a thread would be lost)
            errors.append(repr(e))

    t = threading.Thread(target=fuser, name="fuser", daemon=True)
    t.start()
    try:
        assert paused.wait(30)
        with torch.no_grad():
            _close(f(x), m(x))
    finally:
        go.set()
        t.join(30)
    assert not t.is_alive() and not errors
    monkeypatch.undo()
    assert type(f.q) is gemmtune.fuse.FusedLinear
    with torch.no_grad():
        _close(f(x), m(x))


class _PhiAttn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k = torch.nn.Linear(32, 16), torch.nn.Linear(32, 16)


class _PhiMlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 64)


class _PhiBlock(torch.nn.Module):
    """Phi's parallel block in small: q/k (attention) and fc1 (MLP) read one input, one group."""

    def __init__(self):
        super().__init__()
        self.attn, self.mlp = _PhiAttn(), _PhiMlp()

    def forward(self, x):
        return torch.cat([self.attn.q(x), self.attn.k(x), self.mlp.fc1(x)], -1)


def test_unfuse_of_a_module_holding_part_of_a_group_leaves_it_fused_and_says_so():
    # Phi's q/k/v (attention) and fc1 (MLP) read one input and fuse into one group, its fused layer
    # under the attention. unfuse(model.mlp) unfused q/k/v too and left that fused layer behind,
    # holding a copy of every member's weights.
    import warnings

    torch.manual_seed(0)
    m = _PhiBlock()
    f = copy.deepcopy(m)
    x = torch.randn(3, 32)
    with torch.no_grad():
        groups = gemmtune.fuse_linears(f, x)
        assert len(groups) == 1 and len(groups[0].members) == 3
        with pytest.warns(RuntimeWarning, match="left 1 fused group"):
            assert gemmtune.unfuse(f.mlp) == 0
        assert type(f.attn.q) is not torch.nn.Linear and type(f.mlp.fc1) is not torch.nn.Linear
        _close(f(x), m(x))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert gemmtune.unfuse(f) == 1
        assert not any("gemmtune_fused" in n for n, _ in f.named_modules())
        assert {type(f.attn.q), type(f.attn.k), type(f.mlp.fc1)} == {torch.nn.Linear}
        _close(f(x), m(x))


def _fp64(x, params):
    """QKV's output, in fp64, with the weights and biases named in ``params``."""
    return torch.cat([torch.nn.functional.linear(x.double(), params[f"{n}.weight"].double(), params[f"{n}.bias"].double())
                      for n in "qkv"], -1)


def test_functional_call_with_other_weights_leaves_the_model_as_it_was():
    """torch.func.functional_call puts other tensors in the members' parameter slots for one call
    (writing ``_parameters`` directly) and puts the model's own back after it. The group took them
    for weights moved and re-fused onto them: it copied them into a new fused tensor, rebound the
    caller's parameters into it (their memory no longer their own), and the fused layer kept
    computing with them after the call (a compiled graph reads it; the next eager call re-fused
    again, one more copy)."""
    from torch.func import functional_call

    m, f = _pair()
    other = QKV()  # other values (drawn after _pair's seed)
    g = f.q._gemmtune_group
    fused_w = g.fused.weight
    own = {k: v.detach().clone() for k, v in f.state_dict().items()}
    x = torch.randn(3, 32)
    for params in (dict(other.named_parameters()),
                   {k: torch.nn.Parameter(torch.randn_like(v)) for k, v in m.named_parameters()},
                   {k: torch.randn_like(v) for k, v in m.named_parameters()}):  # plain tensors
        values = {k: v.detach().clone() for k, v in params.items()}
        ptrs = {k: v.data_ptr() for k, v in params.items()}
        with torch.no_grad():
            got = functional_call(f, params, (x,))
        torch.testing.assert_close(got.double(), _fp64(x, values), rtol=1e-5, atol=1e-5)
        # the caller's tensors untouched, in values and in memory
        assert {k: v.data_ptr() for k, v in params.items()} == ptrs
        assert all(torch.equal(params[k], values[k]) for k in params)
        # the model as it was: its parameters, still views of the one fused tensor, which holds them
        assert g.fused.weight is fused_w and g._intact()
        assert all(torch.equal(v, own[k]) for k, v in f.state_dict().items())
        with torch.no_grad():
            _close(g.fused(x), m(x))  # what a compiled graph of the model computes
            _close(f(x), m(x))
        assert g.fused.weight is fused_w  # and no re-fuse (copy) at the next call either


def test_parameters_rebound_through_the_module_are_refused():
    """A parameter the member registers itself (``layer.weight = Parameter(t)``) or gets from
    ``model.to()`` as a new object (here to the meta device and back with to_empty) is the model's
    own: the group is re-fused onto it, as after ``weight.data = t``."""
    m, f = _pair()
    g = f.q._gemmtune_group
    x = torch.randn(3, 32)
    new = torch.randn(16, 32)
    for mod in (m, f):
        mod.k.weight = torch.nn.Parameter(new.clone())
    with torch.no_grad():
        _close(f(x), m(x))
    assert f.k.weight.data_ptr() == g.fused.weight.data_ptr() + 32 * 32 * 4
    q_weight = f.q.weight
    f.to("meta")  # meta and CPU tensors cannot share a TensorImpl: new Parameter objects
    f.to_empty(device="cpu")
    assert f.q.weight is not q_weight
    f.load_state_dict(m.state_dict())
    with torch.no_grad():
        _close(f(x), m(x))
    assert f.k.weight.data_ptr() == g.fused.weight.data_ptr() + 32 * 32 * 4


@pytest.mark.parametrize("swap", [False, True], ids=["assign", "assign_swap"])
def test_load_state_dict_assign_refuses_once(monkeypatch, swap):
    """load_state_dict(assign=True) rebinds each member's parameters; the group was re-fused at
    each member's load, a full copy of the group's weights per member. Once now, after the last
    member the load reaches, with the members a load with strict=False leaves out as they were."""
    from gemmtune.fuse import _Group

    m, f = _pair()
    refuses = []
    refuse = _Group.refuse
    monkeypatch.setattr(_Group, "refuse", lambda self: refuses.append(self) or refuse(self))
    monkeypatch.setattr(torch.__future__, "_swap_module_params_on_conversion", swap)  # set_..._conversion's flag
    g = f.q._gemmtune_group
    x = torch.randn(3, 32)
    sd = {k: torch.randn_like(v) for k, v in m.state_dict().items()}
    f.load_state_dict({k: v.clone() for k, v in sd.items()}, assign=True)
    assert refuses == [g]
    with torch.no_grad():
        torch.testing.assert_close(f(x).double(), _fp64(x, sd), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(g.fused(x).double(), _fp64(x, sd), rtol=1e-5, atol=1e-5)
    assert refuses == [g]
    # k left out of the load: q and v loaded, k as it was, one re-fuse
    refuses.clear()
    part = {k: torch.randn_like(v) for k, v in sd.items() if not k.startswith("k.")}
    missing = f.load_state_dict({k: v.clone() for k, v in part.items()}, assign=True, strict=False).missing_keys
    assert sorted(missing) == ["k.bias", "k.weight"] and refuses == [g]
    with torch.no_grad():
        torch.testing.assert_close(f(x).double(), _fp64(x, {**sd, **part}), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(g.fused(x).double(), _fp64(x, {**sd, **part}), rtol=1e-5, atol=1e-5)
    assert refuses == [g]


@pytest.mark.parametrize("root", ["block", "wrapper", "attn", "member"])
def test_load_of_a_module_holding_part_of_a_group_refuses_once_it_is_loaded(monkeypatch, root):
    """A load_state_dict(assign=True) into a module that holds only some members (Phi's attention
    block: q and k, not the MLP's fc1) re-fuses once those are loaded: the fused tensor, which a
    compiled graph reads, holds the new weights when the load returns. Loads from the block, from a
    module above the fused model, and into one member too; each re-fuses once."""
    from gemmtune.fuse import _Group

    torch.manual_seed(0)
    m = _PhiBlock()
    f = copy.deepcopy(m)
    x = torch.randn(3, 32)
    with torch.no_grad():
        (group,) = gemmtune.fuse_linears(f, x)
    g = f.attn.q._gemmtune_group
    refuses = []
    refuse = _Group.refuse
    monkeypatch.setattr(_Group, "refuse", lambda self: refuses.append(self) or refuse(self))
    wrapper = torch.nn.ModuleDict({"inner": f})
    target = {"block": f, "wrapper": wrapper, "attn": f.attn, "member": f.attn.k}[root]
    keep = {"block": ("attn.", "mlp."), "wrapper": ("inner.attn.", "inner.mlp."), "attn": ("q.", "k."),
            "member": ("weight", "bias")}[root]
    sd = {k: torch.randn_like(v) for k, v in target.state_dict().items() if k.startswith(keep)}
    target.load_state_dict({k: v.clone() for k, v in sd.items()}, assign=True)
    assert refuses == [g]
    with torch.no_grad():
        # the fused layer (a compiled graph's operand) computes with what was loaded
        want = torch.cat([torch.nn.functional.linear(x.double(), mod.weight.double(), mod.bias.double())
                          for mod in (f.attn.q, f.attn.k, f.mlp.fc1)], -1)
        torch.testing.assert_close(g.fused(x).double(), want, rtol=1e-5, atol=1e-5)
        for name, t in sd.items():  # the members hold the loaded values
            torch.testing.assert_close(target.get_parameter(name), t)
        _close(f(x).double(), want)
    assert refuses == [g] and list(group.members) == ["attn.q", "attn.k", "mlp.fc1"]


@pytest.mark.parametrize("how", ["backward", "grad", "retain_graph"])
def test_a_backward_through_one_member_before_its_siblings_are_called(how):
    # Frozen weights, gradients w.r.t. the input: the round's slices share the fused GEMM's
    # autograd node. A backward through q's output alone freed that node's saved tensors, and k,
    # served the round's slice after it, raised "Trying to backward through the graph a second
    # time" at its own first backward, which unfused runs (each call its own graph).
    m, f = _pair()
    for mod in (m, f):
        mod.requires_grad_(False)
    xa = torch.randn(3, 32, requires_grad=True)
    xb = xa.detach().clone().requires_grad_()
    for mod, x in ((m, xa), (f, xb)):
        for name in ("q", "k", "v"):
            y = getattr(mod, name)(x)
            if how == "grad":
                (g,) = torch.autograd.grad(y.square().sum(), x)
                x.grad = g if x.grad is None else x.grad + g
            else:
                y.square().sum().backward(retain_graph=how == "retain_graph")
    _close(xb.grad, xa.grad)


def test_a_weight_modified_in_place_between_forward_and_backward_raises_as_unfused():
    # Frozen weights, gradients w.r.t. the input: the fused GEMM saved the fused weight, whose
    # version counter an in-place update of a member's parameter does not bump (each parameter
    # has its own). The input's gradient was computed with the new weights, silently, where
    # nn.Linear raises torch's "modified by an inplace operation".
    m, f = _pair()
    for mod in (m, f):
        mod.requires_grad_(False)
        x = torch.randn(3, 32, requires_grad=True)
        y = mod(x)
        with torch.no_grad():
            mod.k.weight.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.square().sum().backward()
    # A member not served from the round (its slice in no graph) may change: unfused, its weight
    # was never saved, and the gradient is right.
    xa = torch.randn(3, 32, requires_grad=True)
    xb = xa.detach().clone().requires_grad_()
    ya, yb = m.q(xa), f.q(xb)
    with torch.no_grad():
        m.k.weight.add_(1)
        f.k.weight.add_(1)
    ya.square().sum().backward()
    yb.square().sum().backward()
    _close(xb.grad, xa.grad)
