"""The step gate (gemmtune.eager_gate): a patched model's tuned eager paths kept only where the
whole un-graphed step is faster with them than with cuBLAS on every layer.

CPU: scripted step times (a fake timer that reads which layers are on the tuned path) for the
rule, and the real timer once, where the Triton interpreter's tuned step is far slower than
F.linear's, so the gate must put every layer back on cuBLAS.
"""

from __future__ import annotations

import pickle

import pytest
import torch

import gemmtune
from gemmtune import eager_gate
from gemmtune import nn as gnn
from gemmtune.eager_gate import choose, gate_eager

# Wide tiles: few interpreter programs a launch (one per layer of _model); which Triton winner runs is
# not what these tests check.
TRITON = "triton_mm:BM16-BN64-BK64-S1-W2-G8"


def _tune(winner):
    return lambda problems, **kw: {p.key: winner for p in problems}


def _model(policy="measure", **kw):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16)).half()
    gemmtune.patch(model, hints={"m": [8]}, tune_fn=_tune(TRITON), progress=False, eager_policy=policy, **kw)
    return model


def _scripted_layers(monkeypatch, savings, aten_s=1.0):
    """Layer i's first-call timing says tuned = savings[i] x cuBLAS's time (both timed, 'tuned'
    kept), as nn.choose_eager would on a GPU. ``aten_s``: cuBLAS's seconds a call, on the scale of
    the scripted step times (a gain the layers cannot make is not kept: eager_gate.SLACK)."""
    monkeypatch.setattr(gnn, "_timed", lambda x: True)
    it = iter(savings * 8)

    def fake(tuned, aten, x):
        return "tuned", next(it) * aten_s, aten_s
    monkeypatch.setattr(gnn, "choose_eager", fake)


def _timer(model, cost):
    """A step time from which layers run tuned: ``cost(first_tuned, second_tuned)`` seconds."""
    def timer(fn, reps, sync=None):
        fn()
        on = [any(p is gnn._TUNED for p in model[i]._gemmtune_paths.values()) for i in (0, 2)]
        return cost(*on)
    return timer


def _paths(model, m):
    """Both layers' eager paths at M = m (their inputs are m x 32 and m x 48)."""
    return [model[0]._gemmtune_paths[torch.Size((m, 32))], model[2]._gemmtune_paths[torch.Size((m, 48))]]


def test_choose_keeps_the_fastest_candidate_below_the_margin():
    assert choose({"tuned": 0.90, "strong": 0.95, "aten": 1.0}) == "tuned"
    assert choose({"tuned": 0.95, "strong": 0.90, "aten": 1.0}) == "strong"
    assert choose({"tuned": 0.90, "strong": 0.90, "aten": 1.0}) == "strong"  # a tie: fewer tuned shapes
    assert choose({"tuned": 0.99, "strong": 0.985, "aten": 1.0}) == "aten"   # within the margin
    assert choose({"tuned": 1.20, "aten": 1.0}) == "aten"
    assert choose({"tuned": float("nan"), "aten": 1.0}) == "aten"
    assert choose({"tuned": 0.97, "aten": 1.0}, margin=0.95) == "aten"


@pytest.mark.parametrize("cost, kept, paths", [
    # the whole step slower with the tuned kernels (host-bound): every shape back on cuBLAS
    (lambda a, b: 1.0 + 0.2 * a + 0.2 * b, "aten", ["aten", "aten"]),
    # the first layer's strong win survives, the second's small one costs: only the strong one
    (lambda a, b: 1.0 - 0.2 * a + 0.1 * b, "strong", ["tuned", "aten"]),
    # both win in the step: all kept
    (lambda a, b: 1.0 - 0.1 * a - 0.1 * b, "tuned", ["tuned", "tuned"]),
    # a 1% win: within the margin, cuBLAS (no Python of ours)
    (lambda a, b: 1.0 - 0.005 * a - 0.005 * b, "aten", ["aten", "aten"]),
])
def test_the_gate_keeps_what_the_step_time_says(monkeypatch, cost, kept, paths):
    model = _model()
    _scripted_layers(monkeypatch, [0.5, 0.95])  # the first layer a strong saving, the second a small one
    x = torch.randn(8, 32, dtype=torch.float16)
    res = gate_eager(model, {"prefill": lambda: model(x)}, force=True, timer=_timer(model, cost), rounds=3)
    assert [r.step for r in res] == ["prefill"]
    r = res[0]
    assert r.kept == kept and r.tuned_shapes == 2
    assert r.kept_shapes == paths.count("tuned")
    assert set(r.ratio) == {"tuned", "strong", "aten"} and r.ratio["aten"] == 1.0
    assert _paths(model, 8) == paths
    assert model._gemmtune_gate == [r.as_dict()]


def test_a_step_gain_the_layers_cannot_make_is_not_kept(monkeypatch):
    """The step ran 20% faster with the tuned paths, but the layers' own timings saved 1 ms a call
    on a 1 s step: noise, so cuBLAS is kept and the verdict says which candidate was implausible."""
    model = _model()
    _scripted_layers(monkeypatch, [0.5, 0.5], aten_s=2e-3)
    x = torch.randn(8, 32, dtype=torch.float16)
    res = gate_eager(model, {"prefill": lambda: model(x)}, force=True,
                     timer=_timer(model, lambda a, b: 1.0 - 0.1 * a - 0.1 * b), rounds=3)
    r = res[0]
    assert r.kept == "aten" and r.ratio["tuned"] < 0.9 and r.implausible == ["tuned"]
    assert r.saved_ms == {"tuned": pytest.approx(2.0)}
    assert _paths(model, 8) == ["aten", "aten"]


def test_only_the_steps_new_shapes_are_gated(monkeypatch):
    """A shape an earlier step decided keeps its path: each step is gated over the shapes it met
    first (a prefill's and a decode step's apart)."""
    model = _model()
    _scripted_layers(monkeypatch, [0.5, 0.5])
    big, small = torch.randn(8, 32, dtype=torch.float16), torch.randn(2, 32, dtype=torch.float16)
    slow = _timer(model, lambda a, b: 1.0 + 0.3 * (a or b))
    fast = _timer(model, lambda a, b: 1.0 - 0.3 * (a and b))
    res = gate_eager(model, {"a": lambda: model(big)}, force=True, timer=fast, rounds=1)
    # both savings strong: 'strong' is 'tuned' here, not timed twice
    assert res[0].kept == "tuned" and set(res[0].ratio) == {"tuned", "aten"}
    assert _paths(model, 8) == ["tuned", "tuned"]
    res = gate_eager(model, {"a again": lambda: model(big), "b": lambda: model(small)}, force=True, timer=slow,
                     rounds=1)
    assert [(r.step, r.kept, r.tuned_shapes) for r in res] == [("a again", "none tuned", 0), ("b", "aten", 2)]
    assert _paths(model, 8) == ["tuned", "tuned"] and _paths(model, 2) == ["aten", "aten"]


def test_real_timer_puts_an_interpreted_step_back_on_cublas():
    """The real timer on the CPU: the tuned kernels run in the Triton interpreter, orders of
    magnitude slower than F.linear, so the gate must keep cuBLAS; the later calls then run
    F.linear, the outputs are unchanged, and the model still pickles without gemmtune state."""
    model = _model()
    x = torch.randn(5, 32, dtype=torch.float16)
    with torch.no_grad():
        ref = torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(x, model[0].weight, model[0].bias)),
                                         model[2].weight, model[2].bias)
    res = gate_eager(model, [(x,)], force=True, rounds=1, min_round_s=0.0)
    assert res[0].step == "pass0" and res[0].kept == "aten" and res[0].ratio["tuned"] > 1.5
    assert _paths(model, 5) == ["aten", "aten"]
    with torch.no_grad():
        torch.testing.assert_close(model(x), ref, rtol=2e-3, atol=2e-3)
    assert isinstance(pickle.loads(pickle.dumps(model))._gemmtune_gate, list)


def test_the_gate_runs_only_where_it_should(monkeypatch):
    x = torch.randn(4, 32, dtype=torch.float16)
    model = _model()
    calls = []
    assert gate_eager(model, {"s": lambda: calls.append(1)}) == [] and not calls  # CPU: nothing timed
    tuned_only = _model(policy="tuned")
    assert gate_eager(tuned_only, {"s": lambda: tuned_only(x)}, force=True) == []  # eager_policy="tuned"
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        gate_eager(model, {"s": lambda: None}, rounds=0)
    with pytest.raises(TypeError, match=r"steps\['s'\] must be a callable"):
        gate_eager(model, {"s": x})
    with pytest.raises(TypeError, match="not one Tensor"):
        gate_eager(model, x)


def test_patch_with_example_inputs_gates_each_pass(monkeypatch):
    """patch(example_inputs=...) runs the gate over its passes (on a GPU; here made to think it is
    on one), and eager_gate=False or eager_policy="tuned" leaves the layers' own choices."""
    seen = []
    real = eager_gate.gate_eager

    def spy(model, steps, **kw):
        seen.append(len(steps))
        return real(model, steps, timer=_timer(model, lambda a, b: 1.0 + a + b), rounds=1, **kw)
    monkeypatch.setattr(eager_gate, "gate_eager", spy)
    monkeypatch.setattr(eager_gate, "_on_gpu", lambda model: True)
    x1, x2 = torch.randn(3, 32, dtype=torch.float16), torch.randn(7, 32, dtype=torch.float16)

    def patched(**kw):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16)).half()
        gemmtune.patch(model, example_inputs=(p for p in [(x1,), (x2,)]), tune_fn=_tune(TRITON), progress=False,
                       **kw)
        return model

    model = patched(retire=False)
    assert seen == [2]  # one gate, both passes (a generator, read once for the capture and the gate)
    assert [r["kept"] for r in model._gemmtune_gate] == ["aten", "aten"]
    assert _paths(model, 3) == _paths(model, 7) == ["aten", "aten"]
    # by default the layers then on cuBLAS for every shape go back to torch's class (nn.retire)
    model = patched()
    assert seen == [2, 2] and [r["kept"] for r in model._gemmtune_gate] == ["aten", "aten"]
    assert all(isinstance(model[i], torch.nn.Linear) and not isinstance(model[i], gnn.Linear) for i in (0, 2))
    assert gnn.retired(model[0]) and gnn.retired(model[2]) and len(gnn.dispatchers(model)) == 2
    for kw in ({"eager_gate": False}, {"eager_policy": "tuned"}):
        model = patched(**kw)
        assert seen == [2, 2] and "_gemmtune_gate" not in model.__dict__
        assert isinstance(model[0], gnn.Linear)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_patch_gates_real_steps_and_stays_correct():
    """On a GPU, patch(example_inputs=...) times each pass as a step, records a verdict per pass,
    and whatever it keeps computes the same product (fp64 reference)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).cuda().half()
    xs = [torch.randn(m, 512, device="cuda", dtype=torch.float16) for m in (7, 256)]
    with torch.no_grad():
        refs = [model.double()(x.double()) for x in xs]
        model.half()
    gemmtune.patch(model, example_inputs=[(x,) for x in xs], tune_fn=_tune("triton_mm:BM64-BN64-BK32-S3-W4-G8"),
                   progress=False)
    gate = model._gemmtune_gate
    assert [g["step"] for g in gate] == ["pass0", "pass1"]
    for g in gate:
        assert g["kept"] in ("tuned", "strong", "aten", "none tuned")
        if g["kept"] != "none tuned":
            assert g["rounds"] == eager_gate.ROUNDS and 1 <= g["reps"] <= eager_gate.MAX_REPS
            assert all(r > 0 for r in g["ratio"].values()) and g["kept_shapes"] <= g["tuned_shapes"]
    with torch.no_grad():
        for x, ref in zip(xs, refs):
            torch.testing.assert_close(model(x).double(), ref, rtol=2e-2, atol=2e-2)


def test_load_patched_with_example_inputs_gates_the_loaded_model(tmp_path, monkeypatch):
    """Eager choices are not saved: load_patched(example_inputs=...) re-runs the gate in the new
    process (made here to think it is on a GPU, with a timer that finds the tuned step slower)."""
    model = _model(eager_gate=False)
    path = tmp_path / "m.gemmtune.json"
    gemmtune.save_patched(path, gnn.dispatchers(model, with_layout=True))
    monkeypatch.setattr(eager_gate, "_on_gpu", lambda model: True)
    fresh = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16)).half()
    monkeypatch.setattr(eager_gate, "step_seconds", _timer(fresh, lambda a, b: 1.0 + a + b))
    x = torch.randn(4, 32, dtype=torch.float16)
    gemmtune.load_patched(fresh, path, example_inputs=[(x,)])
    assert [(g["step"], g["kept"], g["tuned_shapes"]) for g in fresh._gemmtune_gate] == [("pass0", "aten", 2)]
    # both on cuBLAS for their one shape: given back to torch (nn.retire), dispatchers recorded
    assert not isinstance(fresh[0], gnn.Linear) and gnn.retired(fresh[0]) and gnn.retired(fresh[2])
    assert fresh[0]._gemmtune_dispatcher.eager["paths"] == {(torch.Size((4, 32)), torch.float16): "aten"}
    plain = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16)).half()
    gemmtune.load_patched(plain, path)  # no example inputs: no gate, the layers decide alone
    assert "_gemmtune_gate" not in plain.__dict__


def test_a_step_that_fails_when_run_again_keeps_the_layers_choices(monkeypatch):
    """A step that cannot be repeated (a StaticCache full after the repeats) must not make patch
    raise after its tuning: a warning names the step and the error, its layers keep the paths each
    chose alone, and the next step is still gated."""
    model = _model()
    x, y = torch.randn(8, 32, dtype=torch.float16), torch.randn(2, 32, dtype=torch.float16)
    calls = []

    def once():
        calls.append(1)
        if len(calls) > 2:
            raise IndexError("the cache is full")
        return model(x)
    timer = _timer(model, lambda a, b: 1.0 + a + b)
    with pytest.warns(RuntimeWarning, match=r"step 'once' raised IndexError: the cache is full when run again"):
        res = gate_eager(model, {"once": once, "again": lambda: model(y)}, force=True, timer=timer, rounds=1)
    assert [(r.step, r.kept, r.tuned_shapes, r.kept_shapes) for r in res] == [("once", "failed", 2, 2),
                                                                               ("again", "aten", 2, 0)]
    assert "IndexError" in res[0].error
    assert _paths(model, 8) == ["tuned", "tuned"] and _paths(model, 2) == ["aten", "aten"]


def test_the_real_timer_waits_for_the_models_gpus_before_and_after(monkeypatch):
    """The timer waits for the GPUs the step runs on before and after its repeats (a model split
    over GPUs queues work on each: _sync_all waits for every device its tensors are on, none for a
    CPU model)."""
    synced = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: synced.append(d))
    eager_gate._sync_all(torch.nn.Linear(4, 4))()
    assert synced == []  # a CPU model: no device to wait for
    calls = []
    assert eager_gate.step_seconds(lambda: calls.append(1), 3, sync=lambda: synced.append("all")) >= 0
    assert calls == [1, 1, 1] and synced == ["all", "all"]


def test_decode_step_repeats_one_step_and_is_gated(monkeypatch):
    """decode_step: one HF decode step on a KV cache filled once, cropped back after each call, so
    every call runs the same shapes on the same cache length; gate_eager gates it like any step."""
    from gemmtune.benchmodel.models import build_model, parse_model

    model = build_model(parse_model("tiny-llama"), torch.float32, "cpu")
    # (TRITON's wide tiles: the interpreter runs the step ~10 times; BN16-BK16 tiles made ~4x the
    # programs and ~4x the K iterations, 114 s of CI)
    gemmtune.patch(model, hints={"m": [2]}, tune_fn=_tune(TRITON), progress=False)
    ids = torch.randint(0, model.get_input_embeddings().weight.shape[0], (2, 5))
    step = eager_gate.decode_step(model, ids)  # fills the cache: the prompt's shapes are decided here
    layers = [m for m in model.modules() if "_gemmtune_eager" in m.__dict__]

    def slower_when_tuned(fn, reps, sync=None):
        fn()
        return 1.0 + sum(p is gnn._TUNED for m in layers for p in m._gemmtune_paths.values()
                         if p is not None) * 0.1
    res = gate_eager(model, {"decode": step}, force=True, rounds=1, timer=slower_when_tuned)
    # the decode shapes (M = 2) are the step's own: every converted layer's, put back on cuBLAS
    assert [(r.kept, r.tuned_shapes) for r in res] == [("aten", len(layers))]
    with torch.no_grad():
        first, again = step(), step()
    assert first.shape[:2] == (2, 1)
    torch.testing.assert_close(first, again)  # the same step: the cache was cropped back
    with pytest.raises(ValueError, match="2-D tensor of token ids"):
        eager_gate.decode_step(model, ids[0])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_decode_step_is_gated_with_the_real_timer():
    """A tiny HF model on the GPU, a Triton winner everywhere: the decode step is timed for real,
    a verdict recorded, and the gated step still computes eager's logits."""
    from gemmtune.benchmodel.models import build_model, parse_model

    model = build_model(parse_model("tiny-llama"), torch.float16, "cuda")
    ref = build_model(parse_model("tiny-llama"), torch.float16, "cuda")  # same seed: same weights
    ids = torch.randint(0, model.get_input_embeddings().weight.shape[0], (2, 7), device="cuda")
    gemmtune.patch(model, example_inputs=[dict(input_ids=ids)], tune_fn=_tune("triton_mm:BM16-BN64-BK64-S3-W4-G8"),
                   hints={"m": [2, 14]}, progress=False, retire=False)  # a later step to gate (retire says why)
    res = gate_eager(model, {"decode": eager_gate.decode_step(model, ids)}, retire=True)
    assert len(res) == 1 and res[0].kept in ("tuned", "strong", "aten", "none tuned")
    with torch.no_grad():
        got, want = eager_gate.decode_step(model, ids)(), eager_gate.decode_step(ref, ids)()
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)


def test_verdicts_of_later_calls_are_kept_beside_earlier_ones(monkeypatch):
    """patch's passes, then a decode step gated by hand: model._gemmtune_gate keeps both, and a
    step gated again under the same name replaces its old verdict."""
    model = _model()
    timer = _timer(model, lambda a, b: 1.0 + a + b)
    a, b = torch.randn(8, 32, dtype=torch.float16), torch.randn(3, 32, dtype=torch.float16)
    gate_eager(model, {"pass0": lambda: model(a)}, force=True, timer=timer, rounds=1)
    gate_eager(model, {"decode": lambda: model(b)}, force=True, timer=timer, rounds=1)
    assert [(g["step"], g["kept"]) for g in model._gemmtune_gate] == [("pass0", "aten"), ("decode", "aten")]
    gate_eager(model, {"pass0": lambda: model(a)}, force=True, timer=timer, rounds=1)
    assert [(g["step"], g["kept"]) for g in model._gemmtune_gate] == [("decode", "aten"), ("pass0", "none tuned")]


def test_the_report_says_which_gain_was_beyond_the_layers():
    from gemmtune.benchmodel.report import _gate_line

    line = _gate_line([{"step": "decode_b16", "kept": "aten", "kept_shapes": 0, "tuned_shapes": 1,
                        "ratio": {"tuned": 0.911, "aten": 1.0}, "implausible": ["tuned"]}], "eager_patch", 4.6)
    assert "decode_b16: kept **aten**" in line and "tuned not kept: a step gain beyond 2× its layers' own savings" in line
    plain = _gate_line([{"step": "s", "kept": "aten", "kept_shapes": 0, "tuned_shapes": 1,
                         "ratio": {"tuned": 1.1, "aten": 1.0}}], "eager_patch", 1.0)  # a verdict recorded before
    assert "not kept" not in plain
