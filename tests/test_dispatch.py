"""The dynamic-shape dispatcher: similarity ranking, every mode against fp64, caching,
threads, save/load in a fresh process, torch.compile without graph breaks, autograd
through a patched Linear, and clear errors for bad input.

Runs on the CPU through the Triton interpreter (conftest sets TRITON_INTERPRET=1). A
fake tuner (``FakeTune``) returns fixed winners so no test pays for real tuning,
except one small end-to-end run of ``gemmtune.tune``. Shapes stay small (N, K <= 64)
because the interpreter runs every program of the grid in Python; sizes are ragged
(M = 1, 5, 37, ...) so the masks matter.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest
import torch

import gemmtune
from gemmtune import kernels
from gemmtune.bench.timing import Timing
from gemmtune.configs import Choice
from gemmtune.dispatch import (DEFAULT_HINTS, Dispatcher, ProvenanceWarning, compile_mm, load,
                               rank_hints)
from gemmtune.nn import Linear, dispatchers, patch
from gemmtune.problem import Problem
from gemmtune.table import LookupTable, TableChoice, provenance
from gemmtune.verify import compare

SRC = Path(__file__).resolve().parents[1] / "src"

# Relative Frobenius error allowed against the fp64 reference (the largest element may be
# off by 10x this times rms(ref), gemmtune.verify.compare). fp32 with ieee dots sits
# near 1e-7; an fp16 output is dominated by its own rounding (2^-11 worst case, ~2e-4 rms).
TOL = {torch.float16: 2e-3, torch.float32: 1e-5}
DTYPES = [pytest.param(torch.float16, id="fp16"), pytest.param(torch.float32, id="fp32")]

N, K = 24, 64
HINTS = (8, 32, 128)
# One distinct, cheap-to-interpret kernel per hint, so a decision shows which hint won.
WINNERS = {
    8: "splitk:BM16-BN16-BK32-S1-W2-G8-SK2-det",
    32: "triton_mm:BM32-BN32-BK16-S1-W2-G8",
    128: "decompose_k:s4",
}


class FakeTune:
    """A tuner that returns fixed winners (by the hint's M) and counts its calls."""

    def __init__(self, winners=None, by=lambda p: p.m):
        self.winners = winners or WINNERS
        self.by = by
        self.calls = 0
        self.problems: list[Problem] = []

    def __call__(self, problems, **kwargs):
        self.calls += 1
        self.problems += list(problems)
        return {p.key: self.winners[self.by(p)] for p in problems}


class CountingTimer:
    """Times nothing: runs the launch once, returns scripted times in call order."""

    representative = False

    def __init__(self, times=None):
        self.times = list(times or [])
        self.calls = 0
        self._lock = threading.Lock()

    def measure(self, launch, n_sets):
        with self._lock:
            i = self.calls
            self.calls += 1
        launch(0)
        t = self.times[i] if i < len(self.times) else 1.0
        return Timing(t, t, 1, 0.0, False)


# Tests whose operands are CPU tensors and whose assertions need the hints' Triton kernels to run
# on them: on a GPU machine the interpreter is off (conftest), so every decision there falls back to
# cuBLAS. The GPU runs the dispatcher in test_gpu.py, test_epilogue.py and test_eager.py.
CPU_OPERANDS = pytest.mark.skipif(torch.cuda.is_available(), reason="CPU operands: the hints' Triton kernels "
                                  "run there only in the interpreter, which is off on a GPU machine")


def _dispatcher(mode="similarity", dtype=torch.float16, tune=None, **kw) -> Dispatcher:
    return compile_mm(n=N, k=K, dtype=dtype, hints={"m": list(HINTS)}, mode=mode,
                      tune_fn=tune or FakeTune(), **kw)


def _ab(m, n=N, k=K, dtype=torch.float16):
    return torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)


def _check(out, a, b):
    ref = a.double() @ b.double()
    res = compare(out, ref, TOL[a.dtype])
    assert res.ok, res.reason


# ----------------------------------------------------------------------------- similarity
@pytest.mark.parametrize("m, want", [
    (100, 64),      # log2 100 = 6.64: 0.64 from 64, 1.36 from 256
    (128, 256),     # exactly between 64 and 256: a tie, the larger hint wins
    (1024, 4096),   # 2 from 256 and 2 from 4096: tie, larger
    (1, 64), (0, 64), (2, 64),  # 0 and 1 both map to log2 = 0
    (300, 256), (10**6, 4096),
])
def test_rank_hints_one_dynamic_dim(m, want):
    hints = [(h, 4096, 4096) for h in DEFAULT_HINTS]
    assert hints[rank_hints((m, 4096, 4096), hints)[0]][0] == want


def test_rank_hints_ties_and_degenerate_dims():
    # Dims of 0 and 1 are both log2 = 0: M=0 is at distance 0 from hints 0 and 1; the
    # volume tie (both 0) is broken by the larger (M, N, K) tuple.
    assert rank_hints((0, 8, 8), [(0, 8, 8), (1, 8, 8), (2, 8, 8)]) == [1, 0, 2]
    assert rank_hints((1, 1, 8), [(2, 1, 8), (1, 0, 8)]) == [1, 0]
    # Two dynamic dims, all four hints at L1 distance 2: the largest volume wins.
    four = [(16, 16, 64), (16, 64, 64), (64, 16, 64), (64, 64, 64)]
    assert rank_hints((32, 32, 64), four)[0] == 3
    # Equal distance and equal volume: the larger (M, N, K) tuple, i.e. larger M first.
    assert rank_hints((32, 32, 64), [(16, 64, 64), (64, 16, 64)]) == [1, 0]
    assert rank_hints((32, 16, 64), four)[:2] == [2, 0]
    # 96 lies at log2(1.5) from both 64 and 144: float noise must not decide.
    assert rank_hints((96, 1, 1), [(64, 1, 1), (144, 1, 1)]) == [1, 0]


@CPU_OPERANDS
def test_similarity_dispatcher_follows_the_ranking():
    d = _dispatcher()
    for m, hint in [(1, 8), (5, 8), (16, 32), (17, 32), (64, 128), (63, 32), (500, 128)]:
        a, b = _ab(m)
        _check(d(a, b), a, b)
        dec = d.decision(m=m)
        assert (dec.source, dec.hint[0], dec.choice.id) == ("similarity", hint, WINNERS[hint]), m


# ----------------------------------------------------------------------------- every mode vs fp64
def _table_for(m: int, choice_id: str, dtype) -> LookupTable:
    t = LookupTable(provenance("test", "interp", "x", "x", "x", "by-hand"))
    key = Problem.from_sizes(m, N, K, dtype).key
    t.entries[key] = [TableChoice(Choice.parse(choice_id), 0.001)]
    return t


# Every mode in the fast lane in fp16; fp32 in the slow lane (the benchmark mode's is ~3 s).
@CPU_OPERANDS
@pytest.mark.parametrize("dtype", [DTYPES[0], pytest.param(*DTYPES[1].values, id=DTYPES[1].id, marks=pytest.mark.slow)])
@pytest.mark.parametrize("mode", ["similarity", "benchmark", "table"])
def test_every_mode_matches_fp64(mode, dtype):
    extra = {"timer": CountingTimer()} if mode == "benchmark" else {}
    if mode == "table":
        # An exact entry for M=37 with a kernel no hint chose.
        extra["table"] = _table_for(37, "triton_mm:BM16-BN16-BK16-S1-W2-G8", dtype)
    d = _dispatcher(mode, dtype, **extra)
    for m in (1, 37, 9, 130, 37):
        a, b = _ab(m, dtype=dtype)
        _check(d(a, b), a, b)
    if mode == "table":
        dec = d.decision(m=37)
        assert (dec.source, dec.choice.id) == ("table", "triton_mm:BM16-BN16-BK16-S1-W2-G8")
        assert d.decision(m=9).source == "similarity"
    if mode == "benchmark":
        assert {dec.source for dec in d.decisions.values()} == {"benchmark"}
    assert all(dec.verified for dec in d.decisions.values())


def test_odd_layouts_and_linear_style_operands():
    d = compile_mm(n=N, k=K, dtype=torch.float32, hints={"m": list(HINTS)}, tune_fn=FakeTune(),
                   layout_b="col")
    w = torch.randn(N, K)
    for m in (3, 40):
        for a in (torch.randn(m, K), torch.randn(K, m).t(), torch.randn(m * K + 1)[1:].view(m, K)):
            _check(d(a, w.t()), a, w.t())


@CPU_OPERANDS
def test_benchmark_picks_the_fastest_verified_kernel(monkeypatch):
    # Candidates are timed in similarity order: for M=30 that is hint 32, 8, 128.
    timer = CountingTimer(times=[3.0, 1.0, 2.0])
    d = _dispatcher("benchmark", timer=timer)
    a, b = _ab(30)
    _check(d(a, b), a, b)
    dec = d.decision(m=30)
    assert dec.choice.id == WINNERS[8] and set(dec.times_ms) == set(WINNERS.values())
    # A kernel that returns wrong results is never chosen, however fast: break split-K.
    monkeypatch.setattr(kernels.get("splitk"), "run", lambda a, b, out, cfg, **kw: out.zero_())
    timer2 = CountingTimer(times=[3.0, 2.0])
    d2 = _dispatcher("benchmark", timer=timer2)
    a, b = _ab(9)  # similarity order: hint 8 (split-K, broken), 32, 128
    _check(d2(a, b), a, b)
    dec = d2.decision(m=9)
    assert dec.choice.id == WINNERS[128] and WINNERS[8] in dec.reason and timer2.calls == 2


@CPU_OPERANDS
def test_broken_or_invalid_hint_kernels_are_skipped(monkeypatch):
    monkeypatch.setattr(kernels.get("splitk"), "run", lambda a, b, out, cfg, **kw: out.zero_())
    d = _dispatcher()
    a, b = _ab(4)  # nearest is split-K (hint 8): it fails verification, hint 32 runs
    _check(d(a, b), a, b)
    dec = d.decision(m=4)
    assert dec.choice.id == WINNERS[32] and "relative error" in dec.reason
    # Dynamic K: decompose_k:s4 cannot run K=130 (not a multiple of 4); the next hint does.
    tune = FakeTune(by=lambda p: p.k)
    dk = compile_mm(m=16, n=N, dtype=torch.float32, hints={"k": [8, 32, 128]}, tune_fn=tune)
    a, b = torch.randn(16, 130), torch.randn(130, N)
    _check(dk(a, b), a, b)
    dec = dk.decision(k=130)
    assert dec.choice.id == WINNERS[32] and "does not divide" in dec.reason


def test_cpu_without_interpreter_falls_back_to_aten(monkeypatch):
    monkeypatch.setattr(gemmtune.dispatch, "interpreter_enabled", lambda: False)
    d = _dispatcher(dtype=torch.float32)
    a, b = _ab(7, dtype=torch.float32)
    _check(d(a, b), a, b)
    assert d.decision(m=7).source == "fallback" and d.decision(m=7).choice.id == "aten"


def test_empty_dims():
    d = compile_mm(n=N, dtype=torch.float32, hints={"m": [8], "k": [64]}, tune_fn=FakeTune())
    assert d(torch.randn(0, 64), torch.randn(64, N)).shape == (0, N)
    out = d(torch.randn(5, 0), torch.randn(0, N))
    assert out.shape == (5, N) and torch.equal(out, torch.zeros(5, N))


# ----------------------------------------------------------------------------- caching, threads
@CPU_OPERANDS
def test_decisions_are_cached():
    tune, timer = FakeTune(), CountingTimer()
    d = _dispatcher("benchmark", tune=tune, timer=timer)
    assert tune.calls == 1 and [p.m for p in tune.problems] == list(HINTS)
    shapes = [_ab(m) for m in (3, 50, 3, 50, 3)]
    for a, b in shapes:
        _check(d(a, b), a, b)
    assert d.n_decisions == 2 and timer.calls == 2 * len(WINNERS)
    for a, b in shapes:
        d(a, b)
    assert d.n_decisions == 2 and timer.calls == 2 * len(WINNERS) and tune.calls == 1


@CPU_OPERANDS
@pytest.mark.parametrize("mode", ["similarity", pytest.param("benchmark", marks=pytest.mark.slow)])
def test_threads_decide_each_shape_once(mode):
    timer = CountingTimer()
    d = _dispatcher(mode, dtype=torch.float32, timer=timer) if mode == "benchmark" else \
        _dispatcher(mode, dtype=torch.float32)
    ms = [2, 11, 19, 33, 70]
    inputs = {m: _ab(m, dtype=torch.float32) for m in ms}
    start, errors = threading.Barrier(4), []

    def worker(i):
        start.wait()
        for m in ms[i:] + ms[:i]:
            a, b = inputs[m]
            try:
                _check(d(a, b), a, b)
            except Exception as e:  # collected: an assert in a thread would be lost
                errors.append(f"M={m}: {e!r}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert d.n_decisions == len(ms) and sorted(s[0] for s in d.decisions) == ms
    if mode == "benchmark":
        assert timer.calls == len(ms) * len(WINNERS)


# ----------------------------------------------------------------------------- save / load
_CHILD = textwrap.dedent("""
    import json, sys, torch
    import gemmtune, gemmtune.tune
    def no_tuning(*a, **k):
        raise AssertionError("load must not tune")
    gemmtune.tune = gemmtune.tune.tune = no_tuning
    from gemmtune.dispatch import load
    from gemmtune.verify import check
    from gemmtune.problem import Problem
    d = load(sys.argv[1])
    out = {"mode": d.mode, "hints": {k: list(v) for k, v in d.hints.items()},
           "hint_choices": [h.choice.id for h in d.hint_choices],
           "decided": sorted(s[0] for s in d.decisions), "provenance": d.provenance,
           "table": sorted(d.table.entries) if d.table else None}
    torch.manual_seed(0)
    for m in out["decided"] + [90]:
        a, b = torch.randn(m, 64, dtype=torch.float16), torch.randn(64, 24, dtype=torch.float16)
        assert check(d(a, b), a, b, Problem.from_tensors(a, b)).ok, m
        out.setdefault("after", []).append(d.n_decisions)
    out["choice_90"] = d.decision(m=90).choice.id
    print(json.dumps(out))
""")


def _child_env() -> dict:
    env = dict(os.environ)
    env["TRITON_INTERPRET"] = "1"
    env["PYTHONPATH"] = str(SRC) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


@CPU_OPERANDS
@pytest.mark.slow  # a fresh Python importing torch (~3-5 s); in-process save/load tests stay fast
def test_save_load_round_trip_in_a_new_process(tmp_path):
    tune = FakeTune()
    d = _dispatcher("table", tune=tune, table=_table_for(37, "triton_mm:BM16-BN16-BK16-S1-W2-G8",
                                                         torch.float16))
    for m in (5, 37, 200):
        d(*_ab(m))
    path = d.save(tmp_path / "mm.json")
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    r = subprocess.run([sys.executable, str(script), str(path)], env=_child_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["mode"] == "table" and got["hints"] == {"m": list(HINTS)}
    assert got["hint_choices"] == [WINNERS[h] for h in HINTS]
    assert got["decided"] == [5, 37, 200] and got["provenance"] == d.provenance
    assert got["table"] == sorted(d.table.entries)
    # The three saved shapes ran with no new decision; only M=90, never seen, was decided
    # (by similarity: nearest hint 128), and nothing was tuned (the child asserts that).
    assert got["after"] == [0, 0, 0, 1] and got["choice_90"] == WINNERS[128]
    assert tune.calls == 1


def test_load_checks_provenance(tmp_path):
    d = _dispatcher()
    d(*_ab(5))
    path = d.save(tmp_path / "mm.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = load(path)  # same machine, same versions: no warning
    assert same.decision(m=5).verified
    for field, value, says in [("triton", "2.0.0", "triton 2.0.0"),
                               ("device_name", "NVIDIA A100-SXM4-80GB", "tuned on NVIDIA A100")]:
        doc = json.loads(path.read_text())
        doc["provenance"][field] = value
        other = tmp_path / f"other_{field}.json"
        other.write_text(json.dumps(doc))
        with pytest.warns(ProvenanceWarning, match=says):
            d2 = load(other)
        # Decisions survive but are re-verified on first use.
        assert not d2.decision(m=5).verified
        a, b = _ab(5)
        _check(d2(a, b), a, b)
        assert d2.decision(m=5).verified and d2.n_decisions == 1
        with pytest.raises(ValueError, match="tuned"):
            load(other, strict=True)
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="not a saved gemmtune dispatcher"):
        load(bad)


def test_with_the_real_tuner(tmp_path):
    """One end-to-end run of gemmtune.tune (aten + decompose_k only, two hints: ~2 s)."""
    d = compile_mm(n=16, k=256, dtype="fp32", hints={"m": [8, 64]}, families=["decompose_k"],
                   store=tmp_path / "r.sqlite")
    assert d.provenance["produced_by"] == "tuned" and len(d.hint_choices) == 2
    a, b = torch.randn(20, 256), torch.randn(256, 16)
    _check(d(a, b), a, b)


# ----------------------------------------------------------------------------- torch integration
def _model(dtype=torch.float32):
    return torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16)).to(dtype)


def _patched(tune=None):
    torch.manual_seed(1)
    ref = _model()
    model = _model()
    model.load_state_dict(ref.state_dict())
    tune = tune or FakeTune({8: "triton_mm:BM16-BN16-BK16-S1-W2-G8", 64: "triton_mm:BM32-BN32-BK16-S1-W2-G8"})
    patch(model, hints={"m": [8, 64]}, tune_fn=tune)
    return model, ref


def test_patch_is_a_drop_in():
    tune = FakeTune({8: "triton_mm:BM16-BN16-BK16-S1-W2-G8", 64: "triton_mm:BM32-BN32-BK16-S1-W2-G8"})
    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.Linear(48, 48), torch.nn.Linear(48, 48))
    keys = list(model.state_dict())
    first = model[0]
    patch(model, hints={"m": [8, 64]}, tune_fn=tune)
    assert list(model.state_dict()) == keys and model[0] is first
    assert all(isinstance(m, Linear) and isinstance(m, torch.nn.Linear) for m in model)
    # Layers 1 and 2 share one (48 -> 48) dispatcher: two distinct shapes, tuned once each.
    assert tune.calls == 2 and model[1].dispatcher is model[2].dispatcher
    assert set(dispatchers(model)) == {(48, 32, "float32"), (48, 48, "float32")}
    ref = torch.nn.Linear(32, 48)
    ref.load_state_dict(first.state_dict())
    for x in (torch.randn(32), torch.randn(5, 32), torch.randn(2, 3, 32)):
        y = first(x)
        assert y.shape == ref(x).shape
        torch.testing.assert_close(y, ref(x), rtol=1e-5, atol=1e-5)
    # Built directly (tunes in the constructor), and patched with a table (mode 'table').
    lin = Linear(32, 48, hints={"m": [8, 64]}, tune_fn=tune)
    assert lin.dispatcher.layout_b == "col" and tune.calls == 3
    other = torch.nn.Sequential(torch.nn.Linear(32, 24))
    patch(other, table=LookupTable(provenance("t", "interp", "x", "x", "x", "by-hand")),
          hints={"m": [8, 64]}, tune_fn=tune)
    assert other[0].dispatcher.mode == "table"
    x = torch.randn(4, 32)
    torch.testing.assert_close(other[0](x), x @ other[0].weight.t() + other[0].bias)


def test_autograd_matches_nn_linear():
    model, ref = _patched()
    x = torch.randn(3, 7, 32)
    g = torch.randn(3, 7, 16)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    (model(xa) * g).sum().backward()
    (ref(xb) * g).sum().backward()
    torch.testing.assert_close(xa.grad, xb.grad, rtol=1e-5, atol=1e-5)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-5, msg=name)


def _compiled_run(backend):
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    model, ref = _patched()
    cnt = CompileCounterWithBackend(backend)
    cm = torch.compile(model, backend=cnt, dynamic=True, fullgraph=True)
    for bsz, seq in [(2, 3), (3, 5), (4, 6)]:  # M = bsz*seq: a product of symbols
        x = torch.randn(bsz, seq, 32)
        torch.testing.assert_close(cm(x), ref(x), rtol=1e-5, atol=1e-5)
    return cnt, model


def test_torch_compile_dynamic_no_graph_breaks():
    """aot_eager: traces the custom op (fake kernel, symbolic sizes) and runs the dispatcher."""
    cnt, model = _compiled_run("aot_eager")
    assert cnt.frame_count == 1, "recompiled: the dims should have stayed symbolic"
    code = cnt.graphs[0].code
    assert code.count("torch.ops.gemmtune.mm") == 2 and "SymInt" in code
    explained = torch._dynamo.explain(model)(torch.randn(2, 3, 32))
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    # Backward through the compiled graph (autograd registered on the op).
    torch._dynamo.reset()
    x = torch.randn(2, 5, 32, requires_grad=True)
    torch.compile(model, backend="aot_eager", dynamic=True, fullgraph=True)(x).sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape


def test_a_dispatcher_called_under_torch_compile_is_one_op_node():
    """A Dispatcher called directly inside a compiled function (mm, fused epilogue, bmm, autograd)
    traces as the gemmtune::mm / gemmtune::bmm op: no graph break, one graph for every M, and the
    shape decided at run time, not in the trace. Traced through, its cached-call key broke the
    graph (``Tensor.is_neg``) two to five times per call and its first sight ran under dynamo."""
    from torch._dynamo.testing import CompileCounterWithBackend
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    d = _dispatcher(dtype=torch.float32)
    bias = torch.randn(N)
    b = torch.randn(K, N)
    for fn, ref in ((lambda a, b: d(a, b) * 2, lambda a, b: 2 * (a.double() @ b.double())),
                    (lambda a, b: d(a, b, bias=bias, activation="relu"),
                     lambda a, b: torch.relu(a.double() @ b.double() + bias.double()))):
        torch._dynamo.reset()
        counters.clear()
        cnt = CompileCounterWithBackend("aot_eager")
        cf = torch.compile(fn, backend=cnt, dynamic=True, fullgraph=True)
        for m in (5, 9, 40):
            a = torch.randn(m, K)
            torch.testing.assert_close(cf(a, b).double(), ref(a, b), rtol=1e-4, atol=1e-4)
        assert cnt.frame_count == 1 and not counters["graph_break"], dict(counters["graph_break"])
        assert "torch.ops.gemmtune.mm" in cnt.graphs[0].code
    assert {(5, N, K), (9, N, K), (40, N, K)} <= set(d.decisions)  # decided at run time
    # Autograd through the op.
    torch._dynamo.reset()
    a = torch.randn(7, K, requires_grad=True)
    torch.compile(lambda a, b: d(a, b), backend="aot_eager", dynamic=True, fullgraph=True)(a, b).sum().backward()
    torch.testing.assert_close(a.grad, torch.ones(7, N) @ b.t())
    # 3-D operands: gemmtune::bmm.
    torch._dynamo.reset()
    cnt = CompileCounterWithBackend("aot_eager")
    x, y = torch.randn(3, 6, K), torch.randn(3, K, N)
    out = torch.compile(lambda x, y: d(x, y), backend=cnt, dynamic=True, fullgraph=True)(x, y)
    torch.testing.assert_close(out, torch.bmm(x, y), rtol=1e-4, atol=1e-4)
    assert "torch.ops.gemmtune.bmm" in cnt.graphs[0].code
    torch._dynamo.reset()


@pytest.mark.slow
def test_torch_compile_inductor():
    """The default backend. Inductor's CPU codegen needs a C++ compiler."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler
        get_cpp_compiler()
    except Exception as e:
        pytest.skip(f"inductor CPU codegen needs a C++ compiler: {type(e).__name__}: {e}")
    cnt, _ = _compiled_run("inductor")
    assert cnt.frame_count == 1


# ----------------------------------------------------------------------------- bad input
def test_bad_inputs_give_clear_errors():
    d = _dispatcher(dtype=torch.float32)
    a, b = _ab(5, dtype=torch.float32)
    d(a, b)
    with pytest.raises(ValueError, match=r"k: .*static K=64, got K=63"):
        d(torch.randn(5, 63), torch.randn(63, N))
    with pytest.raises(ValueError, match=r"n: .*static N=24, got N=25"):
        d(a, torch.randn(K, 25))
    with pytest.raises(TypeError, match=r"dtype: .*float32, got torch.float16"):
        d(a.half(), b.half())
    with pytest.raises(TypeError, match="same dtype"):
        d(a, b.half())
    with pytest.raises(ValueError, match="2-D"):
        d(a.unsqueeze(0), b)
    with pytest.raises(ValueError, match="inner dimensions"):
        d(a, torch.randn(K + 1, N))
    with pytest.raises(TypeError, match="torch.Tensor"):
        d(a.tolist(), b)
    assert d.n_decisions == 1  # errors decide nothing


def test_meta_operands_of_a_shape_seen_on_the_cpu_are_refused_by_name():
    """The cached-call key held ``get_device()``, -1 for the CPU and the meta device alike: meta
    operands (or a meta bias) of a shape first run on the CPU took its closure and failed deep in
    the Triton interpreter ("Cannot copy out of meta tensor"), or ran cuBLAS on meta."""
    torch.manual_seed(0)
    d = _dispatcher(dtype=torch.float32)
    a, b = _ab(5, dtype=torch.float32)
    bias = torch.randn(N)
    _check(d(a, b), a, b)
    d(a, b, bias=bias)
    am, bm, biasm = (t.to("meta") for t in (a, b, bias))
    with pytest.raises(ValueError, match="not meta"):
        d(am, bm)
    with pytest.raises(ValueError, match="same device, got meta and cpu"):
        d(am, b)
    with pytest.raises(ValueError, match="same device, got cpu and meta"):
        d(a, bm)
    with pytest.raises(ValueError, match="bias must be on the output's device cpu, got meta"):
        d(a, b, bias=biasm)
    with pytest.raises(ValueError, match="residual must be on the output's device cpu, got meta"):
        d(a, b, residual=torch.randn(5, N, device="meta"))
    _check(d(a, b), a, b)  # the CPU's closure still serves the CPU


def test_bad_compile_arguments():
    tune = FakeTune()
    with pytest.raises(ValueError, match=r"hints given for \['n'\]"):
        compile_mm(n=N, k=K, dtype="fp16", hints={"m": [8], "n": [8]}, tune_fn=tune)
    with pytest.raises(ValueError, match=r"\['n'\] need hints"):
        compile_mm(k=K, dtype="fp16", hints={"m": [8]}, tune_fn=tune)
    with pytest.raises(ValueError, match="positive ints"):
        compile_mm(n=N, k=K, dtype="fp16", hints={"m": [0, 8]}, tune_fn=tune)
    with pytest.raises(ValueError, match="mode must be"):
        compile_mm(n=N, k=K, dtype="fp16", mode="fastest", tune_fn=tune)
    with pytest.raises(ValueError, match="only used by mode='table'"):
        compile_mm(n=N, k=K, dtype="fp16", table=_table_for(8, "aten", torch.float16), tune_fn=tune)
    with pytest.raises(TypeError, match="unsupported dtype"):
        compile_mm(n=N, k=K, dtype=torch.float64, tune_fn=tune)
    assert tune.calls == 0
    d = compile_mm(n=N, k=K, dtype="fp16", hints={"m": [8]}, tune_fn=FakeTune())
    with pytest.raises(ValueError, match="N=out_features=48"):
        Linear.from_linear(torch.nn.Linear(K, 48).half(), d)
    with pytest.raises(TypeError, match="dtype"):
        Linear.from_linear(torch.nn.Linear(K, N), d)
    with pytest.raises(TypeError, match="pickled"):
        pickle.dumps(d)


def test_bad_table_file_warns_once_and_falls_back(tmp_path):
    """The dispatch path never fails on a bad table: one warning, then the hint kernels."""
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.warns(Warning, match="bad.json"):
        mm = gemmtune.compile_mm(n=32, k=64, dtype="fp16", hints={"m": [16, 64]}, mode="table",
                                 table=bad, tune_fn=lambda problems, **kw: {p: "aten" for p in problems})
    a, b = torch.randn(20, 64, dtype=torch.float16), torch.randn(64, 32, dtype=torch.float16)
    out = mm(a, b)
    ref = torch.mm(a.double(), b.double())
    assert float((out.double() - ref).norm() / ref.norm()) < 2e-3


# ----------------------------------------------------------------------------- kernel binaries
def _fake_cache(root: Path, names) -> list[Path]:
    """Directories shaped like Triton's cache entries (binary, metadata, group, lock)."""
    out = []
    for n in names:
        d = root / n
        d.mkdir(parents=True)
        (d / "_tiled_mm_kernel.cubin").write_bytes(os.urandom(64))
        (d / "_tiled_mm_kernel.json").write_text('{"name": "_tiled_mm_kernel"}')
        (d / "__grp___tiled_mm_kernel.json").write_text("{}")
        (d / "lock").write_text("")
        out.append(d)
    return out


def test_binaries_bundle_and_restore(tmp_path, monkeypatch):
    from gemmtune import binaries

    dirs = _fake_cache(tmp_path / "src-cache", ["AAAA", "BBBB"])
    names = binaries.bundle(tmp_path / "mm.json.kernels", dirs)
    assert names == ["AAAA", "BBBB"]
    assert sorted(f.name for f in (tmp_path / "mm.json.kernels" / "AAAA").iterdir()) == [
        "__grp___tiled_mm_kernel.json", "_tiled_mm_kernel.cubin", "_tiled_mm_kernel.json"]  # no lock
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "new-cache"))
    assert binaries.cache_dir() == tmp_path / "new-cache"
    n, note = binaries.restore(tmp_path / "mm.json.kernels")
    assert n == 2 and "2 kernel binaries restored" in note
    assert (tmp_path / "new-cache" / "BBBB" / "_tiled_mm_kernel.cubin").read_bytes() == (
        dirs[1] / "_tiled_mm_kernel.cubin").read_bytes()
    assert binaries.restore(tmp_path / "mm.json.kernels")[0] == 0  # already there: untouched
    n, note = binaries.restore(tmp_path / "missing")
    assert n == 0 and "compile on first launch" in note
    # A re-bundle replaces the folder as a whole.
    assert binaries.bundle(tmp_path / "mm.json.kernels", dirs[:1]) == ["AAAA"]
    assert not (tmp_path / "mm.json.kernels" / "BBBB").exists()


def test_loaded_dirs_include_the_launcher_modules(tmp_path, monkeypatch):
    """The C launcher and driver modules Triton built for a kernel travel with it."""
    import types

    from gemmtune import binaries

    cache = tmp_path / "cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    kdir, ldir, udir = _fake_cache(cache, ["KERN", "LAUNCH", "UTILS"])
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    def ext_module(path):  # a builtin function's __self__ is its extension module
        return types.SimpleNamespace(__self__=types.SimpleNamespace(__file__=str(path)))

    launcher = types.SimpleNamespace(launch=ext_module(ldir / "__triton_launcher.so"))
    kernel = types.SimpleNamespace(metadata_group={"k.cubin": str(kdir / "_tiled_mm_kernel.cubin")},
                                   run=launcher)
    stray = types.SimpleNamespace(metadata_group={}, run=types.SimpleNamespace(
        launch=ext_module(outside / "__triton_launcher.so")))  # not in the cache: left out
    fn = types.SimpleNamespace(device_caches={0: ({"a": kernel, "b": stray},)})
    monkeypatch.setattr(binaries, "_jit_functions", lambda: [fn])
    monkeypatch.setattr(binaries, "_driver_utils", lambda: types.SimpleNamespace(
        load_binary=ext_module(udir / "cuda_utils.so")))
    assert binaries.loaded_dirs() == sorted([kdir, ldir, udir])
    # No kernel launched in this process: nothing to bundle, not even the driver module.
    monkeypatch.setattr(binaries, "_jit_functions", lambda: [])
    assert binaries.loaded_dirs() == []


@CPU_OPERANDS
def test_load_restores_binaries_and_rejects_bad_fields(tmp_path, monkeypatch):
    from gemmtune import binaries

    d = _dispatcher()
    d(*_ab(5))
    path = d.save(tmp_path / "mm.json")
    assert "binaries" not in json.loads(path.read_text())  # interpreter: nothing compiled to save
    assert "no kernel binaries" in load(path).binaries_note
    binaries.bundle(tmp_path / "mm.json.kernels", _fake_cache(tmp_path / "c", ["CCCC"]))
    doc = json.loads(path.read_text())
    doc["binaries"] = {"dir": "mm.json.kernels", "kernels": ["CCCC"]}
    path.write_text(json.dumps(doc))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    assert "1 kernel binaries restored" in load(path).binaries_note
    assert (tmp_path / "cache" / "CCCC" / "_tiled_mm_kernel.cubin").is_file()
    for bad, says in [("not a dict", "malformed 'binaries'"), ({"dir": "x", "kernels": [3]}, "malformed"),
                      ({"dir": "../elsewhere", "kernels": []}, "plain folder names"),
                      ({"dir": "mm.json.kernels", "kernels": [".."]}, "plain folder names")]:
        doc["binaries"] = bad
        path.write_text(json.dumps(doc))
        with pytest.raises(ValueError, match=says):
            load(path)
    # Other malformed fields were a KeyError / AttributeError / bare int() or parse error that did
    # not name the file.
    doc.pop("binaries")
    good = json.loads(json.dumps(doc))
    for field, value in [("provenance", None), ("provenance", "DELETE"), ("hint_choices", [{"sizes": {"m": "x"}}]),
                         ("hint_choices", [{"sizes": None, "choice": "nope:x"}]), ("mode", "nope")]:
        bad = json.loads(json.dumps(good))
        if value == "DELETE":
            del bad[field]
        else:
            bad[field] = value
        path.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=f"{path}: malformed dispatcher file"):
            load(path)
    # Values of the right kind but no sizes loaded without complaint and failed at the first call.
    dyn = next(d for d in ("m", "n", "k") if good["dims"][d] is None)
    static = next(d for d in ("m", "n", "k") if good["dims"][d] is not None)
    h0 = good["hint_choices"][0]
    for edit, says in [(lambda b: b["dims"].__setitem__(static, "x"), f"dims: {static} must be an int >= 0"),
                       (lambda b: b["dims"].__setitem__(static, -4), f"dims: {static} must be an int >= 0"),
                       (lambda b: b["hints"].__setitem__(dyn, ["a"]), f"hints: {dyn} must list int sizes"),
                       (lambda b: b["hints"].__setitem__(dyn, []), f"hints: {dyn} must list int sizes"),
                       (lambda b: b["hint_choices"].__setitem__(0, {**h0, "device_ms": "fast"}), "device_ms"),
                       (lambda b: b["hint_choices"].__setitem__(0, {**h0, "device_ms": -1.0}), "device_ms")]:
        bad = json.loads(json.dumps(good))
        edit(bad)
        path.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=f"{path}: malformed dispatcher file.*{says}"):
            load(path)


def test_patch_says_which_layer_it_tunes_when_progress_is_on(capsys):
    model = torch.nn.Sequential(torch.nn.Linear(16, 24), torch.nn.Linear(24, 16))
    fake = lambda ps, **kw: {p.key: "aten" for p in ps}  # noqa: E731
    gemmtune.patch(model, hints={"m": [4]}, tune_fn=fake, progress=True)
    err = capsys.readouterr().err
    assert "gemmtune.patch: tuning 0 (N=24, K=16, float32; M hints [4])" in err and "tuning 1 (N=16" in err
    model = torch.nn.Sequential(torch.nn.Linear(16, 24))
    gemmtune.patch(model, hints={"m": [4]}, tune_fn=fake, progress=False)
    assert capsys.readouterr().err == ""


def test_compile_mm_progress_defaults_to_interactive(monkeypatch):
    import gemmtune.dispatch as dispatch
    seen = []

    def fake(ps, **kw):
        seen.append(kw["progress"])
        return {p.key: "aten" for p in ps}
    monkeypatch.setattr(dispatch, "interactive", lambda: True)
    gemmtune.compile_mm(n=8, k=8, dtype="fp32", hints={"m": [2]}, tune_fn=fake)
    monkeypatch.setattr(dispatch, "interactive", lambda: False)
    gemmtune.compile_mm(n=8, k=8, dtype="fp32", hints={"m": [2]}, tune_fn=fake)
    assert seen == [True, False]


def test_a_cpu_tuned_dispatcher_loads_on_the_cpu_without_a_provenance_warning():
    from gemmtune.dispatch import provenance_mismatches
    base = {"triton": "3.9.0", "torch": "2.13.0"}
    interp = dict(base, device_name="cpu (Triton interpreter)", capability="interp")
    plain = dict(base, device_name="cpu", capability="cpu")
    assert provenance_mismatches(interp, plain) == [] and provenance_mismatches(plain, interp) == []
    gpu = dict(base, device_name="NVIDIA H200", capability="9.0")
    assert provenance_mismatches(interp, gpu) and provenance_mismatches(gpu, plain)


# ------------------------------------------- M=1 under coordinate-descent tuning goes to Inductor
def _traced(fn, *args, cdt: bool, mode: str = "fake"):
    from torch._inductor import config as iconfig
    from torch._inductor import decomposition as idecomp
    from torch.fx.experimental.proxy_tensor import make_fx
    from gemmtune import torch_ops
    assert torch_ops.register_inductor_gemv()
    op = torch.ops.gemmtune.mm.default
    with iconfig.patch(coordinate_descent_tuning=cdt):
        return make_fx(fn, decomposition_table={op: idecomp.decompositions[op]}, tracing_mode=mode)(*args).code


@pytest.mark.parametrize("activation", ["none", "relu", "silu", "gelu_tanh", "gelu_erf"])
def test_m1_op_is_lowered_to_torch_mm_only_under_cdt_on_a_gpu_device(monkeypatch, activation):
    from gemmtune import torch_ops
    monkeypatch.setattr(torch_ops, "GEMV_DEVICES", ("cuda", "cpu"))  # Inductor's rule, exercised on the CPU

    def f(a, b, bias, res):
        return torch.ops.gemmtune.mm(a, b, 987654, bias, activation, res)
    b, bias = torch.randn(37, 29, dtype=torch.float64), torch.randn(29, dtype=torch.float64)
    one = (torch.randn(1, 37, dtype=torch.float64), b, bias, torch.randn(1, 29, dtype=torch.float64))
    code = _traced(f, *one, cdt=True)
    assert "gemmtune" not in code and "aten.mm" in code, code
    assert "gemmtune.mm" in _traced(f, *one, cdt=False)  # no cdt: Inductor would send it to cuBLAS
    four = (torch.randn(4, 37, dtype=torch.float64), b, bias, torch.randn(4, 29, dtype=torch.float64))
    assert "gemmtune.mm" in _traced(f, *four, cdt=True)  # not a GEMV: the tuned kernel stays
    # A dynamic M is never statically 1: it stays the op, and nothing specialises it.
    three = (torch.randn(3, 37, dtype=torch.float64), b, bias, torch.randn(3, 29, dtype=torch.float64))
    assert "gemmtune.mm" in _traced(f, *three, cdt=True, mode="symbolic")
    # The lowered graph computes the op's result (fp64 against the epilogue's reference).
    from torch._inductor import config as iconfig
    from gemmtune.epilogue import reference
    with iconfig.patch(coordinate_descent_tuning=True):
        got = torch_ops._gemv_decomposition(one[0], b, 987654, bias, activation, one[3])
    torch.testing.assert_close(got, reference(one[0] @ b, bias, activation, one[3]), rtol=1e-12, atol=1e-12)


def test_m1_op_stays_opaque_on_the_cpu_even_under_cdt():
    a, b = torch.randn(1, 16), torch.randn(16, 8)
    assert "gemmtune.mm" in _traced(lambda a, b: torch.ops.gemmtune.mm(a, b, 987654), a, b, cdt=True)


# ------------------------------------ a static size that expects cuBLAS goes to Inductor as torch.mm
TRITON_SMALL = "triton_mm:BM16-BN16-BK16-S1-W2-G8"


def _mixed_dispatcher():
    """n=24, k=40, fp32: the tuned kernel at M=8, cuBLAS at M=64."""
    return compile_mm(n=24, k=40, dtype="fp32",
                      hints={"m": [8, 64]}, tune_fn=lambda ps, **kw: {p.key: (TRITON_SMALL if p.m == 8 else "aten")
                                                                      for p in ps})


def test_expected_choice_is_the_decision_then_the_table_then_the_nearest_hint():
    d = _mixed_dispatcher()
    assert d.expected_choice(8).id == TRITON_SMALL and d.expected_choice(7).id == TRITON_SMALL
    assert d.expected_choice(64).id == "aten" and d.expected_choice(500).id == "aten"
    d._decisions[(500, 24, 40)] = gemmtune.dispatch.common.Decision(Choice.parse(TRITON_SMALL), "table")
    assert d.expected_choice(500).id == TRITON_SMALL  # a decision made wins over the hints
    d.mode = "benchmark"  # the first call of a new size times the hints' choices: none is expected
    assert d.expected_choice(64) is None and d.expected_choice(500).id == TRITON_SMALL


def test_an_op_expecting_cublas_at_its_static_size_is_lowered_to_torch_mm():
    from gemmtune import torch_ops
    d = _mixed_dispatcher()
    h = torch_ops.REGISTRY.register(d)
    try:
        def f(a, b, bias):
            return torch.ops.gemmtune.mm(a, b, h, bias, "relu")
        dt = d.torch_dtype
        b, bias = torch.randn(40, 24, dtype=dt), torch.randn(24, dtype=dt)
        a64, a8 = torch.randn(64, 40, dtype=dt), torch.randn(8, 40, dtype=dt)
        for cdt in (False, True):
            code = _traced(f, a64, b, bias, cdt=cdt)
            assert "gemmtune" not in code and "aten.mm" in code, code
            assert "gemmtune.mm" in _traced(f, a8, b, bias, cdt=cdt)  # the tuned kernel stays
        # A dynamic M is never handed back: nothing specialises it.
        assert "gemmtune.mm" in _traced(f, a64, b, bias, cdt=False, mode="symbolic")
        got = torch_ops._gemv_decomposition(a64, b, h, bias, "relu")
        torch.testing.assert_close(got, torch.relu(a64 @ b + bias))
    finally:
        torch_ops.REGISTRY.unregister(h)
    # An unknown handle (a graph outliving its dispatcher) keeps the op.
    assert not torch_ops.aten_to_inductor(torch.randn(64, 40), torch.randn(40, 24), 987654)


def test_a_call_with_a_bias_is_handed_back_by_the_tables_addmm_winner():
    """A call with a bias runs the table's addmm winner for its size where the table has one
    (Dispatcher._addmm_choice), whatever the size's mm choice: expected_choice(bias=True) says so,
    and the cuBLAS hand-back under torch.compile follows it. Before, it read the mm choice only:
    a size whose mm choice is cuBLAS but whose addmm winner is a Triton kernel was handed back to
    Inductor (the winner lost), and the reverse kept a cuBLAS addmm behind the op's Python."""
    from gemmtune import torch_ops

    def table(n, k, winners):
        ents = {Problem.from_sizes(m, n, k, "float32", op=op).key: [TableChoice(Choice.parse(c), 0.01)]
                for (m, op), c in winners.items()}
        return LookupTable(provenance("t", "interp", "x", "x", "x", "by-hand"), ents)

    tbl = table(24, 40, {(64, "mm"): "aten", (64, "addmm"): TRITON_SMALL,
                         (8, "mm"): TRITON_SMALL, (8, "addmm"): "aten"})
    d = compile_mm(n=24, k=40, dtype="fp32", mode="table", table=tbl, hints={"m": [8, 64]},
                   tune_fn=lambda ps, **kw: {p.key: "aten" for p in ps})
    assert d.expected_choice(64).id == "aten" and d.expected_choice(64, bias=True).id == TRITON_SMALL
    assert d.expected_choice(8).id == TRITON_SMALL and d.expected_choice(8, bias=True).id == "aten"
    assert d.expected_choice(9, bias=True).id == d.expected_choice(9).id  # no addmm entry: the mm rules
    h = torch_ops.REGISTRY.register(d)
    try:
        def f(a, b, bias):
            return torch.ops.gemmtune.mm(a, b, h, bias)

        def g(a, b):
            return torch.ops.gemmtune.mm(a, b, h)
        b, bias = torch.randn(40, 24), torch.randn(24)
        a64, a8 = torch.randn(64, 40), torch.randn(8, 40)
        assert "gemmtune.mm" in _traced(f, a64, b, bias, cdt=False)  # the Triton addmm winner stays
        assert "gemmtune" not in _traced(g, a64, b, cdt=False)       # no bias: the mm choice, cuBLAS
        assert "gemmtune" not in _traced(f, a8, b, bias, cdt=False)  # the addmm winner is cuBLAS
        assert "gemmtune.mm" in _traced(g, a8, b, cdt=False)
        # Decided at a first call with a bias, the decision is what is expected.
        with torch.no_grad():
            torch.testing.assert_close(d(a64, b, bias=bias), a64 @ b + bias, rtol=1e-4, atol=1e-4)
        assert d.addmm_decisions[(64, 24, 40)].choice.id == TRITON_SMALL
        assert d.expected_choice(64, bias=True).id == TRITON_SMALL
    finally:
        torch_ops.REGISTRY.unregister(h)


def test_an_op_with_an_argument_on_another_device_raises_instead_of_returning_garbage():
    """A call's backend kernel is picked from all its tensor arguments, Meta before CPU: CPU operands
    with a B, bias or residual left on ``meta`` ran the ops' fake kernels as their kernels and returned
    uninitialised memory, with no error: directly, and from a dispatcher called under
    torch.compile(dynamic=True) with a meta bias. Eager, the dispatcher refuses it by name."""
    from gemmtune import torch_ops
    torch.manual_seed(0)
    d = _mixed_dispatcher()
    h = torch_ops.REGISTRY.register(d)
    a, b, bias, res = torch.randn(5, 40), torch.randn(40, 24), torch.randn(24), torch.randn(5, 24)
    meta = {"b": b.to("meta"), "bias": bias.to("meta"), "residual": res.to("meta")}
    try:
        calls = {
            "mm b": lambda: torch.ops.gemmtune.mm(a, meta["b"], h),
            "mm bias": lambda: torch.ops.gemmtune.mm(a, b, h, meta["bias"]),
            "mm residual": lambda: torch.ops.gemmtune.mm(a, b, h, bias, "none", meta["residual"]),
            "bmm b": lambda: torch.ops.gemmtune.bmm(a[None], meta["b"][None], h),
            "matmul b": lambda: torch.ops.gemmtune.matmul(a, meta["b"]),
            "matmul bias": lambda: torch.ops.gemmtune.matmul(a, b, None, None, False, meta["bias"]),
            "compiled bias": lambda: torch.compile(lambda a, b, c: d(a, b, bias=c), backend="aot_eager",
                                                   dynamic=True)(a, b, meta["bias"]),
        }
        for what, call in calls.items():
            torch._dynamo.reset()
            with pytest.raises(RuntimeError, match=r"must be on a's device cpu, got meta"):
                call()
        # All on meta is a meta call: its shape, as before.
        assert torch.ops.gemmtune.mm(a.to("meta"), meta["b"], h, meta["bias"]).shape == (5, 24)
        torch.testing.assert_close(torch.ops.gemmtune.mm(a, b, h, bias), a @ b + bias, rtol=1e-5, atol=1e-5)
    finally:
        torch_ops.REGISTRY.unregister(h)
        torch._dynamo.reset()


def test_an_epilogue_of_another_dtype_is_refused_where_the_op_goes_to_inductor_too():
    """Eager (and compiled with a dynamic M) an fp64 bias or an fp16 residual of an fp32 dispatcher
    raises TypeError; compiled at a static size expecting cuBLAS the op went to Inductor as torch.mm
    + bias, which promoted: an fp64 output from an fp32 product, or the fp16 residual taken, no
    error. The op's fake kernel checks the epilogue's dtype as the dispatcher does."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler
        get_cpp_compiler()
    except Exception as e:
        pytest.skip(f"inductor CPU codegen needs a C++ compiler: {type(e).__name__}: {e}")
    d = _mixed_dispatcher()
    a64, b = torch.randn(64, 40), torch.randn(40, 24)
    for bias, res in ((torch.randn(24, dtype=torch.float64), None),
                      (None, torch.randn(64, 24, dtype=torch.float16))):
        with pytest.raises(TypeError, match="must have the output's dtype"):
            d(a64, b, bias=bias, residual=res)
        for dynamic in (False, True):
            torch._dynamo.reset()
            f = torch.compile(lambda a, b, c, r: d(a, b, bias=c, residual=r), dynamic=dynamic)
            with pytest.raises(RuntimeError, match=r"gemmtune::mm: \w+ must have the output's dtype torch.float32"):
                f(a64, b, bias, res)
    torch._dynamo.reset()
    bias = torch.randn(24)  # the output's dtype: handed back, as before
    got = torch.compile(lambda a, b, c: d(a, b, bias=c), dynamic=False)(a64, b, bias)
    torch.testing.assert_close(got, a64 @ b + bias, rtol=1e-5, atol=1e-5)
    assert (64, 24, 40) not in d.decisions  # (Inductor's own GEMM ran it, not the dispatcher)
    torch._dynamo.reset()


def test_handles_are_digests_of_what_the_hand_back_reads():
    """The same dispatcher content gives the same handle in every process (Inductor's caches are
    reused across runs); another choice another handle; two dispatchers of one content in one
    process distinct handles."""
    from gemmtune import torch_ops

    def make(winner):
        return compile_mm(n=24, k=16, dtype="fp32", hints={"m": [8]},
                          tune_fn=lambda ps, **kw: {p.key: winner for p in ps})
    a, b, c = make("aten"), make("aten"), make(TRITON_SMALL)
    assert torch_ops.content_key(a) == torch_ops.content_key(b) != torch_ops.content_key(c)
    reg = torch_ops.DispatcherRegistry()
    ha, hb, hc = reg.register(a), reg.register(b), reg.register(c)
    assert ha == torch_ops.content_key(a) and hb == ha + 1 and hc == torch_ops.content_key(c)
    assert reg.register(a) == ha and reg.get(hb) is b
    code = ("import gemmtune\nfrom gemmtune import torch_ops\n"
            "d = gemmtune.compile_mm(n=24, k=16, dtype='fp32', hints={'m': [8]}, "
            "tune_fn=lambda ps, **kw: {p.key: 'aten' for p in ps})\nprint(torch_ops.REGISTRY.register(d))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert int(r.stdout.split()[-1]) == torch_ops.content_key(a)


_CACHED_COMPILE = textwrap.dedent("""
    import sys, torch
    from gemmtune import patch
    from torch._inductor.utils import run_and_get_code
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 48))
    # At M=8 the choice named first; the other at M=64 (so that neither dispatcher is all cuBLAS).
    at8, at64 = sys.argv[1], sys.argv[2]
    patch(model, hints={"m": [8, 64]}, tune_fn=lambda problems, **kw: {p.key: at8 if p.m == 8 else at64
                                                                       for p in problems}, progress=False)
    with torch.no_grad():
        _, codes = run_and_get_code(torch.compile(model, dynamic=False), torch.randn(8, 32))
    print("OPS", "\\n".join(codes).count("= torch.ops.gemmtune.mm.default("))
""")


@CPU_OPERANDS
@pytest.mark.slow
def test_inductors_disk_caches_never_give_a_graph_another_processs_hand_back(tmp_path):
    """Two processes compile the same patched layer, whose dispatcher expects cuBLAS in the first
    (handed back to Inductor as torch.mm) and a Triton kernel in the second (the op kept), sharing
    Inductor's on-disk caches. With handles counted from 0 in each process the graphs were the same
    text, and the second loaded the first's compiled graph from the cache: cuBLAS, not its kernel."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler
        get_cpp_compiler()
    except Exception as e:
        pytest.skip(f"inductor CPU codegen needs a C++ compiler: {type(e).__name__}: {e}")
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), TRITON_INTERPRET="1",
               TORCHINDUCTOR_FX_GRAPH_CACHE="1", TORCHINDUCTOR_AUTOGRAD_CACHE="1")

    def ops(at8: str, at64: str) -> int:
        r = subprocess.run([sys.executable, "-c", _CACHED_COMPILE, at8, at64], env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        return int(r.stdout.split("OPS")[-1])
    assert ops("aten", TRITON_SMALL) == 0  # handed back
    assert ops(TRITON_SMALL, "aten") == 1  # the op kept, whatever the cache holds


@CPU_OPERANDS
@pytest.mark.slow
def test_inductor_compiles_a_cublas_sized_patched_layer_to_its_own_mm():
    """In Inductor's real pipeline: at the M whose hint chose cuBLAS the generated code has no
    call of the op; at the tuned kernel's M it keeps it."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler
        get_cpp_compiler()
    except Exception as e:
        pytest.skip(f"inductor CPU codegen needs a C++ compiler: {type(e).__name__}: {e}")
    from torch._inductor.utils import run_and_get_code
    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16))
    patch(model, hints={"m": [8, 64]}, tune_fn=lambda problems, **kw: {p.key: (TRITON_SMALL if p.m == 8 else "aten")
                                                                       for p in problems}, progress=False)
    try:
        with torch.no_grad():
            for m, calls in ((64, 0), (8, 2)):
                x = torch.randn(m, 32)
                want = model(x)
                torch._dynamo.reset()
                y, codes = run_and_get_code(torch.compile(model, dynamic=False), x)
                assert "\n".join(codes).count("= torch.ops.gemmtune.mm.default(") == calls, m
                torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)
    finally:
        torch._dynamo.reset()


@CPU_OPERANDS
@pytest.mark.slow
def test_inductor_compiles_an_m1_patched_layer_to_its_own_mm_under_cdt(monkeypatch):
    """The decomposition in Inductor's real pipeline (the CPU test above traces it with make_fx):
    the generated code calls the op only without cdt. The CPU stands in for a GPU device."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler
        get_cpp_compiler()
    except Exception as e:
        pytest.skip(f"inductor CPU codegen needs a C++ compiler: {type(e).__name__}: {e}")
    from torch._inductor.utils import run_and_get_code
    from gemmtune import torch_ops
    monkeypatch.setattr(torch_ops, "GEMV_DEVICES", ("cuda", "cpu"))
    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16))
    patch(model, hints={"m": [8]}, tune_fn=lambda problems, **kw: {p.key: "triton_mm:BM16-BN16-BK16-S1-W2-G8"
                                                                    for p in problems}, progress=False)
    x = torch.randn(1, 32)
    try:
        with torch.no_grad():
            want = model(x)
            for cdt, calls in ((True, 0), (False, 2)):
                torch._dynamo.reset()
                y, codes = run_and_get_code(torch.compile(model, dynamic=False,
                                                          options={"coordinate_descent_tuning": cdt}), x)
                assert "\n".join(codes).count("= torch.ops.gemmtune.mm.default(") == calls, cdt
                torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)
    finally:
        torch._dynamo.reset()


def test_a_cached_gpu_call_runs_on_its_operands_device_whatever_device_is_current(monkeypatch):
    """dispatch.launch.on_device: a closure built for cuda:1 switches to cuda:1 only when another
    device is current (Triton launches on the current device's stream), and calls straight
    through when cuda:1 already is. The GPU half is test_gpu's 2-GPU test."""
    import contextlib

    from gemmtune.dispatch import launch

    switched, current = [], [0]

    @contextlib.contextmanager
    def device(idx):
        switched.append(idx)
        before, current[0] = current[0], idx
        try:
            yield
        finally:
            current[0] = before

    monkeypatch.setattr(torch.cuda, "device", device)
    seen = []
    run = launch.on_device(lambda a, b: seen.append(current[0]) or (a, b), torch.device("cuda", 1),
                           current=lambda: current[0])
    assert run("a", "b") == ("a", "b")
    assert (seen, switched, current[0]) == ([1], [1], 0)
    current[0] = 1
    assert run("a", "b") == ("a", "b")
    assert (seen, switched) == ([1, 1], [1]), "no switch where the device is already current"
    assert run.__wrapped__("x", "y") == ("x", "y")


def test_a_table_from_another_gpu_or_triton_warns_on_the_dispatch_path_and_is_untrusted(tmp_path):
    """lookup / compile_mm(mode='table') / patch(table=...) read tables as the tuner does: one made
    on another GPU or Triton MAJOR.MINOR warns and is marked untrusted (README: 'loads with a
    warning'); they read it silently before. Its choices are still used."""
    import gemmtune.dispatch as gd
    from gemmtune.table import LookupTable, TableChoice, TableWarning, provenance
    p = Problem.from_sizes(8, 8, 8, "fp32")
    t = LookupTable(provenance("NVIDIA H100 80GB HBM3", "9.0", "2.11.0", "0.1.0", "0.1"),
                    {p.key: [TableChoice(Choice.parse("aten"), 0.01)]})
    path = tmp_path / "t.json"
    t.save(path)
    with pytest.warns(TableWarning, match="NVIDIA H100 80GB HBM3"):
        d = gd.lookup(path, dtype="fp32")
    assert d.table.trusted is False and d.table.best(p) == Choice.parse("aten")
    with pytest.warns(TableWarning, match="triton '0.1.0'"):
        d = gemmtune.compile_mm(n=8, k=8, dtype="fp32", hints={"m": [8]}, mode="table", table=path,
                                tune_fn=lambda ps, **kw: {q.key: "aten" for q in ps})


def test_warmup_and_lookups_name_sizes_the_dispatcher_cannot_take():
    """``warmup`` with a negative, fractional or bare (not listed) size raised from torch.randn
    ("Trying to create tensor with negative dimension", "received an invalid combination of
    arguments"); ``expected_choice`` of a static dim's other size named a kernel for a call that
    raises."""
    d = _dispatcher(tune=lambda ps, **kw: {p.key: "aten" for p in ps})
    for bad in ([-3], [2.5], [True], 5, "8"):
        with pytest.raises(ValueError, match=r"warmup: m must be a list of int sizes >= 0"):
            d.warmup(m=bad)
    assert not d.decisions
    d.warmup(m=[0, 3])
    assert set(d.decisions) == {(0, N, K), (3, N, K)}
    for kw in ({"n": N + 1}, {"k": K - 1}):
        dim = next(iter(kw))
        with pytest.raises(ValueError, match=f"static {dim.upper()}={N if dim == 'n' else K}"):
            d.expected_choice(m=3, **kw)
        with pytest.raises(ValueError, match=f"static {dim.upper()}="):
            d.decision(m=3, **kw)
    assert d.expected_choice(m=3, n=N, k=K) == d.decision(m=3).choice
