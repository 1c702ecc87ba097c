"""Bug hunt on the step gate (gemmtune.eager_gate), decode_step, and load_patched's gate: each
test failed before its fix (CPU; scripted step times, as tests/test_eager_gate.py drives them)."""

from __future__ import annotations

import pytest
import torch

import gemmtune
from gemmtune import eager_gate
from gemmtune import nn as gnn
from gemmtune.eager_gate import gate_eager

# (tests/ is on sys.path under pytest) The scripted step timer and the path reader are the gate's own tests'.
from test_eager_gate import TRITON, _paths, _timer, _tune  # noqa: E402


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16)).half()


def _model(**kw):
    model = _mlp()
    gemmtune.patch(model, hints={"m": [8]}, tune_fn=_tune(TRITON), progress=False, **kw)
    return model


def _tiny_llama():
    from gemmtune.benchmodel.models import build_model, parse_model
    return build_model(parse_model("tiny-llama"), torch.float32, "cpu")


def test_decode_step_of_several_tokens_is_the_same_step_every_call():
    """step_ids of 2 tokens: the cache was cropped by one token a call, so it grew a token a call
    (5, 6, 7...) and each call was another step, with other logits."""
    model = _tiny_llama()
    ids = torch.randint(0, model.get_input_embeddings().weight.shape[0], (2, 5))
    step = eager_gate.decode_step(model, ids, ids[:, -2:])
    with torch.no_grad():
        first = step()
        assert step.cache.get_seq_length() == 5
        again = step()
        assert step.cache.get_seq_length() == 5
    assert first.shape[:2] == (2, 2)
    torch.testing.assert_close(first, again)


def test_decode_step_refuses_step_ids_it_cannot_run_by_name():
    """A step of another batch, a 1-D step or an empty prompt raised deep inside attention on the
    step's first call (RuntimeError "Sizes of tensors must match..."), which gate_eager only
    reported as a failed step; now decode_step names the problem."""
    model = _tiny_llama()
    ids = torch.randint(0, model.get_input_embeddings().weight.shape[0], (2, 5))
    with pytest.raises(ValueError, match=r"step_ids .* prompt's batch \(2 x tokens.*got shape \(1, 1\)"):
        eager_gate.decode_step(model, ids, ids[:1, -1:])
    with pytest.raises(ValueError, match=r"step_ids .*got shape \(2,\)"):
        eager_gate.decode_step(model, ids, ids[:, -1])
    with pytest.raises(ValueError, match=r"at least one token per row, got input_ids of shape \(2, 0\)"):
        eager_gate.decode_step(model, ids[:, :0])


def test_load_patched_refuses_one_tensor_before_touching_the_model(tmp_path):
    """load_patched(example_inputs=x) with one tensor: the gate refused it only after the layers
    were converted, so the call raised and left the model patched."""
    path = tmp_path / "m.gemmtune.json"
    gemmtune.save_patched(path, gnn.dispatchers(_model(eager_gate=False), with_layout=True))
    fresh = _mlp()
    with pytest.raises(TypeError, match="not one Tensor"):
        gemmtune.load_patched(fresh, path, example_inputs=torch.randn(4, 32, dtype=torch.float16))
    assert type(fresh[0]) is torch.nn.Linear and type(fresh[2]) is torch.nn.Linear
    assert not any(k.startswith("_gemmtune") for m in fresh.modules() for k in m.__dict__)


def test_an_interrupted_gate_puts_the_step_back_and_keeps_earlier_verdicts():
    """Ctrl-C while a step's candidates are timed: its shapes were left on the candidate being
    timed (here cuBLAS everywhere) and the verdict of the step gated before it was lost."""
    model = _model()
    a, b = torch.randn(8, 32, dtype=torch.float16), torch.randn(3, 32, dtype=torch.float16)
    fast = _timer(model, lambda x, y: 1.0 - 0.2 * x - 0.2 * y)
    calls = []

    def timer(fn, reps, sync=None):
        calls.append(1)
        on = model[0]._gemmtune_paths.get(torch.Size((3, 32))) is not gnn._ATEN
        if len(calls) > 3 and not on:  # step "b", its all-cuBLAS candidate being timed
            raise KeyboardInterrupt
        return fast(fn, reps)
    with pytest.raises(KeyboardInterrupt):
        gate_eager(model, {"a": lambda: model(a), "b": lambda: model(b)}, force=True, timer=timer, rounds=1)
    assert _paths(model, 8) == ["tuned", "tuned"]   # step "a": its verdict applied
    assert _paths(model, 3) == ["tuned", "tuned"]   # step "b": back on its layers' own choices
    assert [(g["step"], g["kept"]) for g in model._gemmtune_gate] == [("a", "tuned")]


def test_a_step_that_raises_on_its_first_call_is_not_said_to_have_raised_when_run_again():
    model = _model()

    def broken():
        raise TypeError("a typo in the step")
    with pytest.warns(RuntimeWarning, match=r"step 'broken' raised TypeError: a typo in the step on its first call"):
        res = gate_eager(model, {"broken": broken}, force=True, timer=_timer(model, lambda x, y: 1.0), rounds=1)
    assert [(r.kept, r.tuned_shapes) for r in res] == [("failed", 0)]


def test_a_capture_with_an_empty_batch_writes_a_suite_tune_can_read(tmp_path):
    """A pass of batch 0 beside a real one: its M = 0 GEMMs were written as suite rows, and
    ``gemmtune tune --suite`` refused the whole file ("M must be >= 1"); problems() listed them."""
    from gemmtune import shapes

    mlp = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    cap = gemmtune.capture(mlp, inputs=[(torch.randn(0, 64),), (torch.randn(4, 64),)])
    assert [p.m for p in cap.problems()] == [4, 4]
    rows = shapes.load_csv(cap.write_suite(tmp_path / "suite.csv"))
    assert sorted((s.problem.m, s.problem.n, s.problem.k) for s in rows) == [(4, 64, 256), (4, 256, 64)]


def test_load_patched_onto_a_gated_model_drops_the_verdicts_of_the_tables_it_replaces(tmp_path, monkeypatch):
    """load_patched onto a model gated by patch(example_inputs=...): its layers got the loaded
    dispatchers and fresh eager-path tables (the M = 8 shape undecided again), but
    model._gemmtune_gate still said pass0's step was kept on cuBLAS."""
    path = tmp_path / "m.gemmtune.json"
    gemmtune.save_patched(path, gnn.dispatchers(_model(eager_gate=False), with_layout=True))
    model = _mlp()
    monkeypatch.setattr(eager_gate, "_on_gpu", lambda model: True)
    monkeypatch.setattr(eager_gate, "step_seconds", _timer(model, lambda a, b: 1.0 + a + b))
    x = torch.randn(8, 32, dtype=torch.float16)
    gemmtune.patch(model, example_inputs=[(x,)], tune_fn=_tune(TRITON), progress=False)
    assert [(g["step"], g["kept"]) for g in model._gemmtune_gate] == [("pass0", "aten")]
    gemmtune.load_patched(model, path)
    assert model[0]._gemmtune_paths == {}  # the tables were replaced: the shape is undecided
    assert "_gemmtune_gate" not in model.__dict__
    gemmtune.load_patched(model, path, example_inputs=[(x,)])  # gated again: its own verdicts
    assert [(g["step"], g["kept"]) for g in model._gemmtune_gate] == [("pass0", "aten")]


@pytest.mark.parametrize("kw, what", [(dict(seq=0), "seq"), (dict(batch=0), "batch"),
                                      (dict(decode_steps=-1), "decode_steps")])
def test_capture_causal_lm_refuses_empty_sizes_by_name(kw, what):
    """batch or seq 0 raised RuntimeError from inside attention ("cannot reshape tensor of 0
    elements"); decode_steps=-1 returned an empty capture (0 passes) with no word."""
    from gemmtune.capture import capture_causal_lm

    with pytest.raises(ValueError, match=rf"capture_causal_lm: {what} must be an int >= \d, got -?\d"):
        capture_causal_lm(_tiny_llama(), **kw)


def test_bad_rounds_and_reps_are_refused_not_blamed_on_the_step():
    """rounds=2.5 passed the ``rounds < 1`` check and raised TypeError inside the timing loop,
    which the gate reported as the step failing ("raised TypeError ... when run again"), with a
    warning, on every step; step_seconds(fn, 0) divided by zero."""
    model = _model()
    x = torch.randn(8, 32, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"rounds must be >= 1 \(an int\), got 2.5"):
        gate_eager(model, {"s": lambda: model(x)}, force=True, timer=_timer(model, lambda a, b: 1.0), rounds=2.5)
    assert torch.Size((8, 32)) not in model[0]._gemmtune_paths  # refused before the step ran
    with pytest.raises(ValueError, match=r"step_seconds: reps must be an int >= 1, got 0"):
        eager_gate.step_seconds(lambda: None, 0)


def test_patch_again_with_the_same_dispatchers_applies_the_new_eager_policy():
    """patch(model, dispatchers=ds, eager_policy="tuned") on a model patched with "measure" and
    those dispatchers kept "measure" without a word: its layers were still timed and gated."""
    ds = {}
    model = _mlp()
    gemmtune.patch(model, dispatchers=ds, hints={"m": [8]}, tune_fn=_tune(TRITON), progress=False)
    assert model[0]._gemmtune_eager.policy == "measure"
    gemmtune.patch(model, dispatchers=ds, progress=False, eager_policy="tuned")
    assert [model[i]._gemmtune_eager.policy for i in (0, 2)] == ["tuned", "tuned"]
    assert eager_gate._layers(model) == []  # no layer left for the gate
    assert model[0]._gemmtune_paths is model[0]._gemmtune_eager.by_shape


def test_a_timer_that_reads_zero_keeps_cublas_instead_of_raising():
    """A timer= that reads 0 s for a fast step: the ratio divided by zero after the timing, so
    ZeroDivisionError escaped with the layers left on the last candidate timed, no verdict kept."""
    model = _model()
    x = torch.randn(8, 32, dtype=torch.float16)
    res = gate_eager(model, {"s": lambda: model(x)}, force=True, timer=_timer(model, lambda a, b: 0.0), rounds=2)
    assert [(r.kept, r.tuned_shapes, r.kept_shapes) for r in res] == [("aten", 2, 0)]
    assert _paths(model, 8) == ["aten", "aten"]
    assert [g["kept"] for g in model._gemmtune_gate] == ["aten"]


def test_decode_step_refuses_ids_on_another_device_by_name():
    """ids on another device than the model raised torch's device error from inside the prompt's
    pass; decode_step names both devices (the meta device stands in for a GPU here)."""
    model = _tiny_llama()
    ids = torch.randint(0, model.get_input_embeddings().weight.shape[0], (1, 4))
    with pytest.raises(ValueError, match=r"input_ids are on meta, the model's input embeddings on cpu"):
        eager_gate.decode_step(model, ids.to("meta"))
    with pytest.raises(ValueError, match=r"step_ids are on meta"):
        eager_gate.decode_step(model, ids, ids[:, -1:].to("meta"))


def test_a_capture_json_refuses_to_overwrite_a_results_store(tmp_path):
    """Capture.write_json wrote with write_text: a results store at the path was overwritten (and
    an interrupted write lost the capture it replaced); it writes atomically now, as write_suite,
    which refuses a store by name."""
    from gemmtune.store import ResultStore

    store = tmp_path / "results.sqlite"
    ResultStore(store).close()
    before = store.read_bytes()
    cap = gemmtune.capture(torch.nn.Linear(8, 4), inputs=[(torch.randn(2, 8),)])
    with pytest.raises(ValueError, match="SQLite file"):
        cap.write_json(store)
    assert store.read_bytes() == before
    out = cap.write_json(tmp_path / "cap.json")
    assert '"records"' in out.read_text()
