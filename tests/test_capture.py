"""Shape capture: the GEMMs a model runs, with layouts, counts, modules and M ranges, written as a
suite that loads back into the same problems."""

from __future__ import annotations

import pytest
import torch

import gemmtune
from gemmtune.capture import Capture
from gemmtune.shapes import load_csv


class Conv1D(torch.nn.Module):
    """HF transformers' GPT-2 Conv1D: x @ W + b with W stored [in, out]."""

    def __init__(self, nx: int, nf: int):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(nx, nf))
        self.bias = torch.nn.Parameter(torch.randn(nf))

    def forward(self, x):
        shape = x.shape[:-1] + (self.weight.shape[1],)
        return torch.addmm(self.bias, x.view(-1, x.shape[-1]), self.weight).view(shape)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(48, 96)
        self.down = torch.nn.Linear(96, 48, bias=False)
        self.conv = Conv1D(48, 80)

    def forward(self, x):  # x: [batch, seq, 48]
        h = self.down(torch.relu(self.up(x)))
        att = torch.matmul(h, h.transpose(-1, -2))  # a batched GEMM: bmm
        return self.conv(h) + att.sum()


def test_records_ops_layouts_modules_and_counts():
    model = Block()
    cap = gemmtune.capture(model, torch.randn(2, 5, 48))
    by = {(r.op, r.n, r.k): r for r in cap.records}
    up = by[("addmm", 96, 48)]
    assert (up.m, up.layout_a, up.layout_b, up.modules, up.count) == (10, "row", "col", ["up"], 1)
    down = by[("mm", 48, 96)]
    assert down.layout_b == "col" and down.modules == ["down"]
    conv = by[("addmm", 80, 48)]
    assert conv.layout_b == "row" and conv.modules == ["conv"]  # W [in, out]: a row-major B
    bmm = by[("bmm", 5, 48)]
    assert (bmm.batch, bmm.m, bmm.tunable) == (2, 5, False)
    assert "not tuned yet: 1 (bmm/float32)" in cap.summary()


def test_several_inputs_give_m_ranges_and_hints(tmp_path):
    model = Block()
    cap = gemmtune.capture(model, inputs=[(torch.randn(1, 1, 48),), (torch.randn(1, 7, 48),),
                                          (torch.randn(4, 7, 48),), (torch.randn(1, 7, 48),)])
    assert cap.passes == 4
    assert cap.hints()[(96, 48, "float32", "col")] == [1, 7, 28]
    m7 = next(r for r in cap.records if r.op == "addmm" and r.n == 96 and r.m == 7)
    assert m7.count == 2  # seen in two passes
    path = cap.write_suite(tmp_path / "suite.csv")
    shapes = load_csv(path)
    assert [s.problem for s in shapes] == cap.problems()
    assert {s.problem.layout_b for s in shapes} == {"row", "col"}
    text = path.read_text().splitlines()
    assert text[0].startswith("group,name,M,N,K,dtype,layout_a,layout_b,op,count,m_min,m_max,modules")
    row = next(line for line in text if line.startswith("captured,up_addmm_m7,"))
    assert row.endswith(",addmm,2,1,28,up")
    js = cap.write_json(tmp_path / "cap.json").read_text()
    assert '"op": "bmm"' in js


def test_fn_capture_and_nothing_left_behind():
    model = torch.nn.Linear(16, 24)
    hooks_before = len(model._forward_pre_hooks)
    cap = Capture().run(model, fn=lambda: model(torch.randn(3, 16)))
    assert [(r.op, r.m, r.n, r.k) for r in cap.records] == [("addmm", 3, 24, 16)]
    assert len(model._forward_pre_hooks) == hooks_before
    assert torch.is_grad_enabled()


def test_hooks_removed_when_the_model_raises():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8))
    with pytest.raises(RuntimeError):
        gemmtune.capture(model, torch.randn(3, 9))  # wrong in_features
    assert not model[0]._forward_pre_hooks and not model[0]._forward_hooks


def test_capture_needs_inputs():
    with pytest.raises(ValueError, match="example inputs"):
        gemmtune.capture(torch.nn.Linear(2, 2))
