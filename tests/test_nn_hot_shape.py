"""A patched layer's hot shape (``nn._hot``): the one input shape whose F.linear path its forward tests
before reading its path table, set only where that path is final. CPU; the Triton kernels run in the
interpreter (fp16)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import gemmtune
from gemmtune import nn as gnn
from gemmtune.eager_gate import gate_eager

TRITON = "triton_mm:BM16-BN64-BK64-S1-W2-G8"


def _tune(winner):
    return lambda problems, **kw: {p.key: winner for p in problems}


class _Counting(dict):
    """A path table that records each ``get``."""

    def __init__(self, *a):
        super().__init__(*a)
        self.reads = []

    def get(self, key, default=None):
        self.reads.append(key)
        return super().get(key, default)


def _one(winner, dtype=torch.float32, **kw):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 48)).to(dtype)
    gemmtune.patch(model, hints={"m": [8]}, tune_fn=_tune(winner), progress=False, convert_aten_layers=True, **kw)
    return model, model[0]


def test_a_cublas_shape_becomes_hot_and_its_calls_skip_the_table():
    model, lin = _one("aten")
    assert isinstance(lin, gnn.Linear) and lin._gemmtune_hot == gnn._NO_SHAPE
    x, y = torch.randn(5, 32), torch.randn(2, 3, 32)
    with torch.no_grad():
        model(x)
        assert lin._gemmtune_hot == x.shape and lin._gemmtune_paths[x.shape] == "aten"
        lin._gemmtune_paths = table = _Counting(lin._gemmtune_paths)
        for _ in range(3):
            torch.testing.assert_close(model(x), F.linear(x, lin.weight, lin.bias), rtol=0, atol=0)
        assert table.reads == []
        # another shape: read from the table (a miss: decided, then the new hot shape)
        torch.testing.assert_close(model(y), F.linear(y, lin.weight, lin.bias), rtol=0, atol=0)
        assert table.reads == [y.shape] and lin._gemmtune_hot == y.shape
        model(x)  # the older shape: still cuBLAS's, through the table
        assert table.reads == [y.shape, x.shape] and table[x.shape] == "aten"


def test_a_shape_on_the_tuned_path_never_becomes_hot():
    model, lin = _one(TRITON, torch.float16)
    x = torch.randn(8, 32, dtype=torch.float16)
    with torch.no_grad():
        out = model(x)
        out2 = model(x)
    assert lin._gemmtune_paths[x.shape] == "tuned" and lin._gemmtune_hot == gnn._NO_SHAPE
    ref = (x.double() @ lin.weight.double().T + lin.bias.double())
    torch.testing.assert_close(out.double(), ref, rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(out2, out, rtol=0, atol=0)


def test_a_deep_copy_keeps_the_hot_shape_and_a_new_table_forgets_it():
    model, lin = _one("aten")
    x = torch.randn(4, 32)
    with torch.no_grad():
        model(x)
    twin = copy.deepcopy(model)
    assert twin[0]._gemmtune_hot == x.shape and twin[0]._gemmtune_paths is not lin._gemmtune_paths
    # the same dispatchers given again with another eager policy: a new path table, nothing hot
    gemmtune.patch(model, dispatchers={(48, 32, "float32", "col"): lin.dispatcher}, eager_policy="tuned", progress=False)
    assert lin._gemmtune_eager.policy == "tuned" and lin._gemmtune_paths == {} and lin._gemmtune_hot == gnn._NO_SHAPE


def _gated(monkeypatch, cost):
    """Two fp16 layers whose first calls keep the tuned path (timed as on a GPU: savings 0.5 and 0.95),
    then the step gate with a scripted step time ``cost(first_tuned, second_tuned)``; each timed step
    also records every layer's hot shape."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16)).half()
    gemmtune.patch(model, hints={"m": [8]}, tune_fn=_tune(TRITON), progress=False)
    monkeypatch.setattr(gnn, "_timed", lambda x: True)
    it = iter([0.5, 0.95] * 8)
    # per-call seconds on the scale of the scripted step times (a gain beyond the layers' is not kept)
    monkeypatch.setattr(gnn, "choose_eager", lambda tuned, aten, x: ("tuned", next(it) * 1.0, 1.0))
    hot_while_timed = []

    def timer(fn, reps, sync=None):
        fn()
        hot_while_timed.append([model[i]._gemmtune_hot for i in (0, 2)])
        on = [any(p is gnn._TUNED for p in model[i]._gemmtune_paths.values()) for i in (0, 2)]
        return cost(*on)

    x = torch.randn(8, 32, dtype=torch.float16)
    res = gate_eager(model, {"step": lambda: model(x)}, force=True, timer=timer, rounds=2)
    return model, res[0], hot_while_timed


@pytest.mark.parametrize("cost, kept, hot", [
    (lambda a, b: 1.0 + 0.2 * a + 0.2 * b, "aten", [True, True]),      # host-bound: both back on cuBLAS
    (lambda a, b: 1.0 - 0.2 * a + 0.1 * b, "strong", [False, True]),   # the first keeps its kernel
    (lambda a, b: 1.0 - 0.1 * a - 0.1 * b, "tuned", [False, False]),
])
def test_the_gates_verdict_and_only_it_makes_a_shape_hot(monkeypatch, cost, kept, hot):
    model, r, hot_while_timed = _gated(monkeypatch, cost)
    assert r.kept == kept
    # while the candidates were timed the gate moved these shapes between paths: none was hot
    assert hot_while_timed and all(h == [gnn._NO_SHAPE, gnn._NO_SHAPE] for h in hot_while_timed)
    shapes = [torch.Size((8, 32)), torch.Size((8, 48))]
    assert [model[i]._gemmtune_hot == s for i, s in zip((0, 2), shapes)] == hot
    # a hot shape's path is F.linear's in the table too, and the output is F.linear's
    for i, s, h in zip((0, 2), shapes, hot):
        assert (model[i]._gemmtune_paths[s] == "aten") == h
    x = torch.randn(8, 32, dtype=torch.float16)
    with torch.no_grad():
        ref = (torch.relu(x.double() @ model[0].weight.double().T + model[0].bias.double())
               @ model[2].weight.double().T + model[2].bias.double())
        torch.testing.assert_close(model(x).double(), ref, rtol=5e-3, atol=5e-3)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("winner", ["aten", "triton_mm:BM16-BN64-BK64-S3-W4-G8"])
def test_gpu_a_layers_timed_choice_sets_hot_only_for_cublas(winner):
    """On a GPU the first eager call of a tuned shape is timed (choose_eager): whichever path it keeps,
    the shape is hot exactly when that path is F.linear's, and every later call matches fp64."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4096, 1024)).to("cuda", torch.bfloat16)
    gemmtune.patch(model, hints={"m": [1, 16]}, tune_fn=_tune(winner), progress=False, convert_aten_layers=True,
                   eager_gate=False)
    lin = model[0]
    for shape in [(1, 1, 4096), (3, 4096), (16, 4096)]:
        x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
        ref = x.double() @ lin.weight.double().T + lin.bias.double()
        with torch.no_grad():
            outs = [model(x) for _ in range(3)]
        path = lin._gemmtune_paths[x.shape]
        assert (lin._gemmtune_hot == x.shape) == (path == "aten"), (shape, path, lin._gemmtune_hot)
        for out in outs:
            torch.testing.assert_close(out.double(), ref, rtol=2e-2, atol=2e-2)
