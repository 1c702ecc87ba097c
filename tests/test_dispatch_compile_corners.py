"""Silent wrong results in the dispatch and torch.compile paths, found by session 45's CPU hunt;
each test failed before its fix:
- a fused member's weight replaced by a new Parameter after torch.compile was never seen by the
  compiled graph (fuse.FusedLinear.register_parameter now re-fuses at once);
- a fused member called twice on one input gave two views of the same columns under Inductor
  (fuse_compile._plan leaves the repeat unmerged);
- a dispatcher's output dtype under autocast depended on the shape's choice (the aten closure
  runs with autocast off, as the other choices do)."""

from __future__ import annotations

import copy

import pytest
import torch

import gemmtune


class _Block(torch.nn.Module):
    def __init__(self, bias=True):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(16, n, bias=bias) for n in (16, 8, 8))

    def forward(self, x):
        return torch.cat([self.q(x), self.k(x), self.v(x)], -1)


@pytest.fixture
def _fresh_inductor():
    from torch._inductor import config
    with config.patch(pre_grad_custom_pass=None, fx_graph_cache=False):
        torch._dynamo.reset()
        yield
        torch._dynamo.reset()


def test_compiled_fused_group_sees_member_parameter_registered_after_compile(_fresh_inductor):
    """``layer.weight = nn.Parameter(t)`` on a fused member after ``torch.compile``: the member
    adopts the new parameter (FusedLinear.register_parameter -> _Group.adopt) but nothing re-fuses
    the group, and the compiled graph (no recompile) keeps computing the member's slice from the
    old fused tensor: silently the old weights (and every later in-place update of the new one is
    missed too). Eager re-fuses at the next call; load_state_dict(assign=True) re-fuses at load
    time for exactly this reason (fuse.FusedLinear._load_from_state_dict)."""
    torch.manual_seed(0)
    m = _Block()
    f = copy.deepcopy(m)
    x = torch.randn(3, 16)
    with torch.no_grad():
        gemmtune.fuse_linears(f, x)
        cf = torch.compile(f, dynamic=True)
        torch.testing.assert_close(cf(x), m(x))
        new = torch.randn(8, 16)
        for mod in (m, f):
            mod.k.weight = torch.nn.Parameter(new.clone())
        torch.testing.assert_close(cf(x), m(x))  # got: k's slice from the old weight (max diff ~7)


class _Twice(_Block):
    """Fused as q/k/v (each called once), then run with k called twice on the same input and the
    first k output modified in place after the group's last member."""

    twice = False

    def forward(self, x):
        if not self.twice:
            return super().forward(x)
        a, b, c, v = self.q(x), self.k(x), self.k(x), self.v(x)
        b.mul_(2)
        return torch.cat([a, b, c, v], -1)


def test_compiled_member_called_twice_outputs_do_not_alias(_fresh_inductor):
    """Under Inductor the pre-grad pass (fuse_compile.merge) puts both calls of k in one set and
    gives each ``torch.narrow(rows, -1, start, size)`` of the same columns: the two outputs alias,
    so ``b.mul_(2)`` (after the last member, where _plan looks for no writes) doubles ``c`` too.
    Unfused (and eager fused: the second call computes its own) they are distinct tensors."""
    torch.manual_seed(0)
    m = _Twice()
    f = copy.deepcopy(m)
    x = torch.randn(3, 16)
    with torch.no_grad():
        gemmtune.fuse_linears(f, x)
        m.twice = f.twice = True
        torch.testing.assert_close(f(x), m(x))  # eager: right
        torch.testing.assert_close(torch.compile(f, dynamic=True)(x), m(x))  # got: c doubled (max diff ~1.3)


def test_dispatcher_output_dtype_under_autocast_does_not_depend_on_the_choice():
    """compile_mm's doc: "Outputs have the inputs' dtype". Under ``torch.autocast('cpu', bf16)`` an
    fp32 dispatcher returned bf16 (autocast's rounding) for the shapes whose choice is aten (the
    cached closure is ``torch.mm`` itself, dispatch/launch.py ``_build_run``, which autocast casts)
    and fp32 for the shapes on a Triton kernel, for a call with an epilogue (kernels.aten.run,
    ``out=``) and under torch.compile: the result's dtype and precision changed with M."""
    if not gemmtune.interpreter_enabled():
        pytest.skip("needs the Triton interpreter (CPU tensors)")
    tri = "triton_mm:BM16-BN16-BK16-S1-W2-G8"
    mm = gemmtune.compile_mm(n=8, k=16, dtype="fp32", hints={"m": [2, 32]},
                             tune_fn=lambda ps, **kw: {p.key: ("aten" if p.m == 2 else tri) for p in ps})
    torch.manual_seed(0)
    b = torch.randn(16, 8)
    got = {}
    with torch.autocast("cpu", torch.bfloat16):
        for m in (1, 40):
            got[m] = mm(torch.randn(m, 16), b).dtype
    assert mm.decision(m=1).choice.family == "aten" and mm.decision(m=40).choice.family == "triton_mm"
    assert got == {1: torch.float32, 40: torch.float32}  # got {1: torch.bfloat16, 40: torch.float32}
