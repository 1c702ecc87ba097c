"""The fusion hunt (CPU): ``gemmtune.fuse_linears`` / ``unfuse`` as a demanding user drives them, each
fused model compared with an unfused copy (in float64 where values are compared). Each test is one
defect found there, and failed before its fix."""

from __future__ import annotations

import copy

import pytest
import torch

import gemmtune
from gemmtune.fuse import FusedLinear


def _close(a, b):
    torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


class ListHeads(torch.nn.Module):
    """Output heads kept in a ModuleList and run by iterating it (MusicGen's ``lm_heads``, Medusa
    heads): siblings whose parent is the container itself."""

    def __init__(self):
        super().__init__()
        self.heads = torch.nn.ModuleList([torch.nn.Linear(16, 8) for _ in range(3)])

    def forward(self, x):
        return torch.stack([h(x) for h in self.heads], 1)


class DictHeads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = torch.nn.ModuleDict({"a": torch.nn.Linear(16, 4), "b": torch.nn.Linear(16, 6)})

    def forward(self, x):
        return {name: h(x) for name, h in self.heads.items()}


@pytest.mark.parametrize("how", ["inputs", "groups"])
@pytest.mark.parametrize("cls", [ListHeads, DictHeads])
def test_siblings_in_a_module_list_or_dict_leave_the_container_as_it_was(cls, how):
    # The fused layer was registered beside the first member, i.e. inside the ModuleList: iterating
    # it then also ran the fused layer (stack: "stack expects each tensor to be equal size"; a cat
    # of the heads got a silently wider output), len(heads) grew, heads[-1] was the fused layer, and
    # a ModuleDict's items() gained a key.
    torch.manual_seed(0)
    m = cls().double()
    f = copy.deepcopy(m)
    x = torch.randn(3, 16, dtype=torch.float64)
    with torch.no_grad():
        if how == "inputs":
            groups = gemmtune.fuse_linears(f, x)
        else:
            groups = gemmtune.fuse_linears(f, groups=[["heads." + n for n, _ in f.heads.named_children()]])
        assert len(groups) == 1 and type(next(iter(f.heads.children()))) is FusedLinear
        assert groups[0].fused.startswith("gemmtune_fused_heads_")  # in the module holding the container
        assert list(f.heads.named_children()) == [(n, c) for n, c in f.heads.named_children() if type(c) is FusedLinear]
        assert len(f.heads) == len(m.heads)
        got, want = f(x), m(x)
        if isinstance(want, dict):
            assert list(got) == list(want)
        for a, b in (zip(got.values(), want.values()) if isinstance(want, dict) else [(got, want)]):
            _close(a, b)
        assert sorted(f.state_dict()) == sorted(m.state_dict())
        # the fused layer is found by its name, and unfuse removes it
        assert isinstance(f.get_submodule(groups[0].fused), torch.nn.Linear)
        assert gemmtune.unfuse(f) == 1
        assert [n for n, _ in f.named_modules()] == [n for n, _ in m.named_modules()]
        got = f(x)
        for a, b in (zip(got.values(), want.values()) if isinstance(want, dict) else [(got, want)]):
            _close(a, b)


class QKV(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(16, n) for n in (16, 16, 8))

    def forward(self, x):
        return torch.cat([self.q(x), self.k(x), self.v(x)], -1)


def _pair():
    torch.manual_seed(0)
    m = QKV().double()
    f = copy.deepcopy(m)
    with torch.no_grad():
        assert len(gemmtune.fuse_linears(f, torch.randn(3, 16, dtype=torch.float64))) == 1
    return m, f


def test_members_tied_to_each_other_after_fusing_follow_the_shared_weight():
    # k.weight = q.weight after fusing (one Parameter in two members): the re-fuse copied it into
    # both slices of the fused tensor and bound the parameter to the second, so q's slice of the
    # fused GEMM was a stale copy: an update of the shared weight (optimizer step, load, mul_) was
    # missed by q, a silently wrong output.
    m, f = _pair()
    x = torch.randn(3, 16, dtype=torch.float64)
    with torch.no_grad():
        for mod in (m, f):
            mod.k.weight = mod.q.weight
            mod.k.bias = mod.q.bias
        _close(f(x), m(x))
        for mod in (m, f):
            mod.q.weight.mul_(2)
            mod.k.bias.add_(1)
        _close(f(x), m(x))
        assert f.k.weight is f.q.weight


class InPlaceAdapter(QKV):
    """Frozen projections whose outputs a trainable tensor updates in place (``result += lora(x)``,
    a learnt scale): the unfused layers allow it, as any F.linear output."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.randn(16))

    def forward(self, x):
        q = self.q(x)
        q += self.scale
        k = self.k(x)
        k.mul_(self.scale)
        return torch.cat([q, k, self.v(x)], -1)


def test_outputs_of_frozen_members_updated_in_place_by_a_trainable_tensor():
    # With grad mode on, frozen weights and an input needing no gradient, the round's slices were
    # split_with_sizes outputs: views of a multi-output op, which autograd refuses to modify in
    # place with a tensor that needs a gradient ("This view is the output of a function that returns
    # multiple views..."), where the unfused model trains.
    torch.manual_seed(0)
    m = InPlaceAdapter().double()
    for lin in (m.q, m.k, m.v):
        lin.requires_grad_(False)
    f = copy.deepcopy(m)
    x = torch.randn(3, 16, dtype=torch.float64)
    with torch.no_grad():
        assert len(gemmtune.fuse_linears(f, x)) == 1
    got, want = f(x), m(x)
    _close(got, want)
    got.pow(2).sum().backward()
    want.pow(2).sum().backward()
    _close(f.scale.grad, m.scale.grad)


def test_share_memory_is_kept_by_the_next_call():
    # model.share_memory() moves the fused tensor's storage (members' views and all) into shared
    # memory: the views stayed views, but at new addresses, which the group took for weights
    # replaced, so the next call re-fused them into a new private tensor: the sharing was silently
    # undone (each worker process of a shared model then held a copy of its own).
    m, f = _pair()
    f.share_memory()
    g = f.q._gemmtune_group
    w = g.fused.weight
    x = torch.randn(3, 16, dtype=torch.float64)
    with torch.no_grad():
        _close(f(x), m(x))
    assert g.fused.weight is w and w.is_shared()
    assert all(p.is_shared() for p in f.parameters())
    assert f.k.weight.data_ptr() == w.data_ptr() + 16 * 16 * 8
    with torch.no_grad():  # and the views are followed: an update of a member reaches the fused GEMM
        for mod in (m, f):
            mod.k.weight.mul_(3)
        _close(f(x), m(x))


@pytest.mark.parametrize("fn", [gemmtune.unfuse, gemmtune.fuse.fused_names])
def test_unfuse_and_fused_names_of_a_non_module_say_so(fn):
    # fuse_linears says "model must be a torch.nn.Module"; unfuse and fused_names raised
    # AttributeError from inside ("'dict' object has no attribute 'modules'"), e.g. given a
    # state_dict or the list fuse_linears returns.
    with pytest.raises(TypeError, match="torch.nn.Module"):
        fn({"q.weight": torch.zeros(2, 2)})


@pytest.mark.parametrize("how", ["inputs", "fn"])
def test_the_same_example_tensor_in_two_passes_still_finds_the_siblings(how):
    # The calls were grouped by input tensor over all passes: one tensor given twice
    # (inputs=[(x,)] * 2, or fn running the model twice on one input, as a warm-up then a run)
    # made q, k and v each "called twice on one input", and nothing was fused, silently.
    m, _ = _pair()
    f = QKV().double()
    x = torch.randn(3, 16, dtype=torch.float64)
    with torch.no_grad():
        if how == "inputs":
            groups = gemmtune.fuse_linears(f, inputs=[(x,), (x,)])
        else:
            groups = gemmtune.fuse_linears(f, fn=lambda: (f(x), f(x)))
    assert [g.members for g in groups] == [("q", "k", "v")]
    f.load_state_dict(m.state_dict())
    with torch.no_grad():
        _close(f(x), m(x))


def test_a_shared_model_sent_to_another_process_keeps_sharing_its_weights():
    # torch.multiprocessing pickles a shared model's tensors as handles to their shared memory: the
    # copy's members are still views of its fused tensor. The copy's group (its record dropped by
    # __getstate__) re-fused them at its first call into a private tensor, so the worker no longer
    # saw the shared weights (an update made by the parent was missed: a silently stale model).
    # Pickled and loaded in this process, as a worker would load it.
    import pickle
    from multiprocessing.reduction import ForkingPickler

    import torch.multiprocessing  # noqa: F401  (registers the shared-memory reductions)

    m, f = _pair()
    f.share_memory()
    worker = pickle.loads(ForkingPickler.dumps(f))
    x = torch.randn(3, 16, dtype=torch.float64)
    with torch.no_grad():
        _close(worker(x), m(x))
        for mod in (m, f):
            mod.k.weight.mul_(3)  # the parent updates the shared weights
        _close(worker(x), m(x))
    assert all(p.is_shared() for p in worker.parameters())


def test_a_member_whose_weight_a_hook_computes_is_left_out_and_its_siblings_fuse():
    # torch.nn.utils.spectral_norm (and the old weight_norm) keep a plain nn.Linear whose weight is
    # no parameter but a tensor a forward pre-hook computes anew at each call. Grouped with its
    # siblings, the group could never run fused (the member's weight is never the view it was
    # made), so every call of every member ran unfused, through the re-fuse lock, and the fused
    # tensor held a copy of the computed weight for nothing. It is left out; its siblings fuse.
    torch.manual_seed(0)
    m = QKV().double()
    torch.nn.utils.spectral_norm(m.q)
    m.eval()  # (no power iteration: the computed weight is the same at each call)
    f = copy.deepcopy(m)
    x = torch.randn(3, 16, dtype=torch.float64)
    with torch.no_grad():
        want = m(x)
        groups = gemmtune.fuse_linears(f, x)
        assert [g.members for g in groups] == [("k", "v")]
        calls = []
        f.get_submodule(groups[0].fused).register_forward_pre_hook(lambda *_: calls.append(1))
        _close(f(x), want)
    assert calls == [1]  # k and v from one GEMM


def test_a_bare_container_model_is_warned_that_it_holds_the_fused_layer():
    # A model that is itself a ModuleList has no module above to hold the fused layer: it goes in
    # the container (as before), and iterating the model then yields it too. That was silent.
    heads = torch.nn.ModuleList([torch.nn.Linear(16, 8) for _ in range(2)])
    x = torch.randn(3, 16)
    with torch.no_grad(), pytest.warns(RuntimeWarning, match="ModuleList, which holds the fused layer"):
        gemmtune.fuse_linears(heads, fn=lambda: [h(x) for h in heads])
    assert len(heads) == 3  # (what the warning is about)
