"""The model hunt (CPU): the path a user takes after the README's first steps, as a demanding user
would. Covered: ``gemmtune.capture`` / ``gemmtune capture`` (during ``generate``, GPT-2's Conv1D,
tied weights, a module called twice, keyword and tensor inputs, the suite CSV fed back into
``tune --suite``, a model with no GEMM, a model on the CPU); ``patch(model, example_inputs=...)``,
``save_patched`` / ``load_patched`` in a fresh process (a layer renamed, a shape or dtype changed,
missing or truncated files, loading twice); ``gemmtune.nn.Linear`` (bias or none, odd sizes, 3-D and
non-contiguous inputs); ``fuse_linears`` with save and load; ``gemmtune bench-model``'s arguments on a
machine without a GPU. Each test is one defect found there, and failed before its fix.

CPU only: Triton kernels in the interpreter (conftest sets TRITON_INTERPRET=1), fp16/fp32."""

from __future__ import annotations

import pytest
import torch

import gemmtune

TRITON = "triton_mm:BM16-BN16-BK16-S1-W2-G8"
TOL = {torch.float32: 1e-5, torch.float16: 2e-3}


def _triton_everywhere(problems, **kw):
    """A tune_fn that picks one Triton tile for every problem (no worker, no timing)."""
    return {p.key: TRITON for p in problems}


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    """``got`` against the fp64 ``want``, at its dtype's tolerance relative to want's scale."""
    assert got.shape == want.shape
    err = (got.double() - want).abs().max().item()
    assert err <= TOL[got.dtype] * max(1.0, want.abs().max().item()), err


# Defect: a model with one float64 GEMM could not be captured (TypeError "unsupported dtype torch.float64").
def test_capture_records_a_float64_gemm_as_untunable():
    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Linear(16, 24)
            self.readout = torch.nn.Linear(24, 8).double()  # a double-precision readout

        def forward(self, x):
            return self.readout(self.body(x).double())

    cap = gemmtune.capture(Head(), torch.randn(5, 16))
    assert [(r.op, r.m, r.n, r.k, r.dtype, r.tunable) for r in cap.records] == [
        ("addmm", 5, 24, 16, "float32", True), ("addmm", 5, 8, 24, "float64", False)]
    assert "not tuned yet: 1 (addmm/float64)" in cap.summary()
    assert list(cap.hints()) == [(24, 16, "float32", "col")]


# Defect: capturing a patched model recorded none of its tuned layers' GEMMs, and the first call of a
# shape under the capture failed its fp64 check there, so the layer fell back to cuBLAS for good.
def test_capturing_a_patched_model_records_its_layers_and_keeps_their_kernels():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16, bias=False))
    ref = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16, bias=False))
    ref.load_state_dict(model.state_dict())
    x = torch.randn(4, 32)
    gemmtune.patch(model, example_inputs=[(x,)], tune_fn=_triton_everywhere)
    assert isinstance(model[0], gemmtune.nn.Linear)

    x = torch.randn(4, 32)
    cap = gemmtune.capture(model, x)
    assert sorted((r.op, r.m, r.n, r.k, r.layout_b, tuple(r.modules)) for r in cap.records) == [
        ("addmm", 4, 48, 32, "col", ("0",)), ("mm", 4, 16, 48, "col", ("2",))]
    assert not model[0].dispatcher.decisions  # nothing decided (or verified) under the capture
    with torch.no_grad():
        got = model(x)
    assert model[0].dispatcher.decision(m=4).choice.id == TRITON  # the tuned kernel, not a fallback
    assert model[2].dispatcher.decision(m=4).choice.id == TRITON
    _close(got, ref.double()(x.double()))


# Defect: patch(example_inputs=..., tune_missing=True) tuned the layers no pass ran with the real tuner over
# every family into ./gemmtune.sqlite, ignoring the tune_fn, families, store and fast it was given.
def test_tune_missing_tunes_the_layers_no_pass_ran_with_the_calls_own_options(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    calls = []

    def tuner(problems, **kw):
        calls.append(({(p.n, p.k) for p in problems}, kw))
        return {p.key: TRITON for p in problems}

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.used = torch.nn.Linear(16, 24)
            self.head = torch.nn.Linear(24, 40)  # no example pass runs it

        def forward(self, x):
            return self.used(x)

    torch.manual_seed(0)
    model = Model()
    store = tmp_path / "mine.sqlite"
    gemmtune.patch(model, example_inputs=[(torch.randn(3, 16),)], tune_missing=True, tune_fn=tuner,
                   families=["triton_mm"], store=str(store), fast=True, progress=False)
    assert [c[0] for c in calls] == [{(24, 16)}, {(40, 24)}]  # one call for the passes, one for the head
    for _, kw in calls:
        assert kw["families"] == ["triton_mm"] and kw["store"] == str(store) and kw["fast"] is True, kw
    assert not (tmp_path / "gemmtune.sqlite").exists()
    assert isinstance(model.head, gemmtune.nn.Linear)
    x = torch.randn(5, 24)
    with torch.no_grad():
        got = model.head(x)
    assert model.head.dispatcher.decision(m=5).choice.id == TRITON
    _close(got, torch.nn.functional.linear(x.double(), model.head.weight.double(), model.head.bias.double()))


# Defect: gemmtune.nn.Linear took a dispatcher tuned for a row-major B (compile_mm's default layout), whose
# choices and table entries are another problem's than x @ W.T ('col'): its table's Linear entries were never
# found, and cuBLAS ran for every shape without a word. (A Conv1D refused the other way round already.)
def test_a_linear_refuses_a_dispatcher_of_another_b_layout():
    from gemmtune.configs import Choice
    from gemmtune.dispatch import compile_mm
    from gemmtune.problem import Problem
    from gemmtune.table import LookupTable, TableChoice, provenance

    n, k = 40, 24
    table = LookupTable(provenance("test", "interp", "x", "x", "x", "by-hand"), {
        Problem.from_sizes(5, n, k, "fp32", layout_b="col", op=op).key: [TableChoice(Choice.parse(TRITON), 0.001)]
        for op in ("mm", "addmm")})  # what tuning a captured Linear's suite gives

    def on(**layout):
        return compile_mm(n=n, k=k, dtype="fp32", hints={"m": [8]}, mode="table", table=table,
                          tune_fn=lambda ps, **kw: {p.key: "aten" for p in ps}, **layout)

    torch.manual_seed(0)
    with pytest.raises(ValueError, match="layout_b='col'"):
        gemmtune.nn.Linear(k, n, dispatcher=on())
    with pytest.raises(ValueError, match="layout_b='col'"):
        gemmtune.nn.Linear.from_linear(torch.nn.Linear(k, n), on(layout_b="row"))
    lin = gemmtune.nn.Linear(k, n, dispatcher=on(layout_b="col"))  # as its docstring says
    x = torch.randn(5, k)
    with torch.no_grad():
        got = lin(x)
    assert lin.dispatcher.addmm_decisions[(5, n, k)].choice.id == TRITON  # the table's kernel, not cuBLAS
    _close(got, torch.nn.functional.linear(x.double(), lin.weight.double(), lin.bias.double()))


# Defect: bench-model's --phases "" / --modes "" (an unset shell variable) ran every default phase or mode,
# and a name given twice ran twice, the second result replacing the first: both now a one-line error.
@pytest.mark.parametrize("argv, msg", [
    (["--phases", ""], "--phases '': an empty name"),
    (["--modes", ""], "--modes '': an empty name"),
    (["--modes", "eager,eager"], "--modes names eager more than once"),
    (["--phases", "decode_b1,decode_b1"], "--phases names decode_b1 more than once"),
    (["--models", "tiny-llama,tiny-llama"], "--models names tiny-llama more than once"),
])
def test_bench_model_refuses_empty_and_repeated_names(tmp_path, capsys, monkeypatch, argv, msg):
    from gemmtune import benchmodel
    from gemmtune.cli import main

    ran = []
    monkeypatch.setattr(benchmodel, "run", lambda *a, **kw: ran.append((a, kw)) or {"models": []})
    base = {"--models": "tiny-llama", "--phases": "decode_b1", "--modes": "eager"}
    base.update(dict(zip(argv[::2], argv[1::2])))
    rc = main(["bench-model", *[x for kv in base.items() for x in kv], "--dtype", "float32",
               "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and not ran, (rc, ran)
    assert err.count("\n") == 1 and err.startswith("gemmtune bench-model: error: ") and msg in err, err
