"""A model end to end on the CPU: capture, one tuning call, patch (Linear and GPT-2's Conv1D),
save, load into a fresh model, same outputs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

from gemmtune.nn import recorded_dispatcher

import gemmtune
from gemmtune.modeltune import is_conv1d, layer_keys


class Conv1D(torch.nn.Module):
    """Shaped like transformers.pytorch_utils.Conv1D (nf, weight [nx, nf], bias [nf])."""

    def __init__(self, nf: int, nx: int):
        super().__init__()
        self.nf = nf
        self.weight = torch.nn.Parameter(torch.randn(nx, nf) / nx ** 0.5)
        self.bias = torch.nn.Parameter(torch.randn(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(size_out)


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = Conv1D(96, 32)
        self.up = torch.nn.Linear(96, 64)
        self.down = torch.nn.Linear(64, 32, bias=False)

    def forward(self, x):
        return self.down(torch.relu(self.up(self.c_attn(x))))


def fake_tuner(calls, winners=None):
    """Picks cuBLAS, or ``winners[n]`` for a layer of that N."""
    def tune(problems, **kw):
        calls.append([p.key for p in problems])
        return {p.key: (winners or {}).get(p.n, "aten") for p in problems}
    return tune


TRITON = "triton_mm:BM16-BN16-BK16-S1-W2-G8"


def test_layer_keys_and_conv1d_detection():
    m = Tiny()
    assert is_conv1d(m.c_attn) and not is_conv1d(m.up)
    assert layer_keys(m) == {(96, 32, "float32", "row"), (64, 96, "float32", "col"), (32, 64, "float32", "col")}


def test_one_tuning_call_for_every_layer_and_m():
    calls = []
    ds = gemmtune.tune_model(Tiny(), [(torch.randn(2, 3, 32),), (torch.randn(1, 1, 32),)], extra_m=(16,),
                             tune_fn=fake_tuner(calls))
    assert len(calls) == 1  # one worker start-up for the whole model
    assert len(calls[0]) == 3 * 3  # 3 layer shapes x M in {1, 6, 16}
    assert set(ds) == layer_keys(Tiny())
    assert ds[(96, 32, "float32", "row")].layout_b == "row"
    assert ds[(64, 96, "float32", "col")].hints == {"m": (1, 6, 16)}


def test_a_layer_of_one_output_or_one_input_gets_its_hints():
    """Linear(K, 1) (a router's shared-expert gate, a score head) multiplies by a B of one
    column, and Linear(1, N) by one of one row: both are row- and column-major at once, capture
    names them 'row' where the layer key says 'col'. tune_model dropped their hints, and patch
    then tuned them anew at default M values, outside the one tuning call (Qwen2-MoE's
    shared_expert_gate was left as torch's, silently)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1, 48), torch.nn.ReLU(), torch.nn.Linear(48, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 1))
    x = torch.randn(2, 7, 1)
    want = model(x)
    calls = []
    ds = gemmtune.tune_model(model, [(x,), (x[:, :1],)], tune_fn=fake_tuner(calls, {1: TRITON, 48: TRITON, 32: TRITON}))
    assert len(calls) == 1 and set(ds) == layer_keys(model)
    assert ds[(1, 32, "float32", "col")].hints == ds[(48, 1, "float32", "col")].hints == {"m": (2, 14)}
    gemmtune.patch(model, dispatchers=ds, tune_missing=False)
    assert all(type(model[i]) is gemmtune.nn.Linear for i in (0, 2, 4))
    torch.testing.assert_close(model(x), want, rtol=1e-5, atol=1e-5)


class WeightOnly(torch.nn.Module):
    """A Linear whose forward never runs: its weight is multiplied directly, as Mamba's mixer
    does with dt_proj."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(32, 64)
        self.dt = torch.nn.Linear(8, 64)

    def forward(self, x):
        return self.up(x) + (self.dt.weight @ x[..., :8].transpose(-1, -2)).transpose(-1, -2)


def test_patch_with_example_inputs_leaves_layers_that_did_not_run(monkeypatch):
    """patch(example_inputs=) tunes in ONE call what the passes ran. A layer whose forward none
    of them ran was tuned by a second compile_mm at default M values (a real tuning run: 137 s
    for Mamba's dt_proj in the interpreter); it is left as it is now, named in a warning."""
    torch.manual_seed(0)
    # frozen, as Mamba for inference: W @ x.T then runs as a bmm against W broadcast (no layer's GEMM)
    model = WeightOnly().requires_grad_(False)
    x = torch.randn(2, 5, 32)
    want = model(x)

    def no_second_tune(**kw):
        raise AssertionError(f"patch tuned a layer outside the one tuning call: {kw}")
    monkeypatch.setattr(gemmtune.nn, "compile_mm", no_second_tune)
    calls = []
    with pytest.warns(RuntimeWarning, match=r"1 layer\(s\) did not run in the example passes .*left as they were: dt"):
        gemmtune.patch(model, example_inputs=[(x,)], tune_fn=fake_tuner(calls, {64: TRITON}))
    assert len(calls) == 1
    assert type(model.up) is gemmtune.nn.Linear
    assert type(model.dt) is torch.nn.Linear and not hasattr(model.dt, "_gemmtune_dispatcher")
    torch.testing.assert_close(model(x), want, rtol=1e-5, atol=1e-5)


def test_patch_with_example_inputs_hands_back_every_dispatcher_it_made():
    """With tune_missing=True, a layer no pass ran is tuned in a second compile_mm: its dispatcher
    reaches the caller's ``dispatchers`` too (it went only into patch's own mapping before), so
    saving that mapping keeps every converted layer. (That compile_mm gets patch's tune_fn:
    test_model_hunt's tune_missing test.)"""
    model, ds = WeightOnly().requires_grad_(False), {}  # frozen: dt's product is a bmm, no layer's GEMM
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gemmtune.patch(model, example_inputs=[(torch.randn(2, 5, 32),)], dispatchers=ds, tune_missing=True,
                       tune_fn=fake_tuner([], {64: TRITON}))
    assert set(ds) == {(64, 32, "float32", "col"), (64, 8, "float32")}  # up (one call), dt (the second)
    assert type(model.dt) is gemmtune.nn.Linear and model.dt.dispatcher is ds[(64, 8, "float32")]


def test_patch_with_example_inputs_then_save_and_load(tmp_path):
    torch.manual_seed(0)
    model = Tiny()
    fresh = Tiny()
    fresh.load_state_dict(model.state_dict())
    x = torch.randn(3, 5, 32)
    want = model(x)
    converted = Tiny()
    converted.load_state_dict(model.state_dict())
    calls = []
    gemmtune.patch(model, example_inputs=[(x,)], tune_fn=fake_tuner(calls))
    assert len(calls) == 1
    # Every hint chose cuBLAS: every layer is left as torch's own, its dispatcher recorded on it.
    assert type(model.up) is torch.nn.Linear and type(model.c_attn) is Conv1D
    assert all(recorded_dispatcher(m).all_aten for m in (model.c_attn, model.up, model.down))
    torch.testing.assert_close(model(x), want, rtol=1e-5, atol=1e-5)
    gemmtune.patch(converted, example_inputs=[(x,)], tune_fn=fake_tuner([]), convert_aten_layers=True)
    assert type(converted.up).__name__ == "Linear" and type(converted.c_attn).__name__ == "GemmtuneConv1D"
    assert isinstance(converted.c_attn, Conv1D)  # still the class it was, for isinstance checks
    torch.testing.assert_close(converted(x), want, rtol=1e-5, atol=1e-5)

    saved = gemmtune.nn.dispatchers(model, with_layout=True)
    assert set(saved) == set(gemmtune.nn.dispatchers(converted, with_layout=True)) == layer_keys(Tiny())
    path = gemmtune.save_patched(tmp_path / "tiny.json", saved)
    assert sorted(p.name for p in (tmp_path / "tiny.d").glob("*.json")) == [
        "mm_n32_k64_float32_col.json", "mm_n64_k96_float32_col.json", "mm_n96_k32_float32_row.json"]
    gemmtune.load_patched(fresh, path)
    assert type(fresh.c_attn) is Conv1D and type(fresh.down) is torch.nn.Linear  # loaded: still torch's
    loaded = gemmtune.nn.dispatchers(fresh, with_layout=True)
    assert set(loaded) == set(saved) and all(d.all_aten for d in loaded.values())
    assert recorded_dispatcher(fresh.up) is loaded[(64, 96, "float32", "col")]
    torch.testing.assert_close(fresh(x), want, rtol=1e-5, atol=1e-5)
    # decisions came with the artifact: the loaded dispatchers tuned nothing
    assert all(d.n_decisions <= 1 for d in loaded.values())
    # The opt-out on load converts them.
    again = Tiny()
    again.load_state_dict(fresh.state_dict())
    gemmtune.load_patched(again, path, convert_aten_layers=True)
    assert type(again.c_attn).__name__ == "GemmtuneConv1D" and type(again.down) is gemmtune.nn.Linear
    torch.testing.assert_close(again(x), want, rtol=1e-5, atol=1e-5)


def test_save_and_load_a_mixed_model(tmp_path):
    """One layer shape tuned to a Triton kernel, the others to cuBLAS: only that layer is converted,
    and every dispatcher is saved and re-applied the same way."""
    torch.manual_seed(0)
    model = Tiny()
    fresh = Tiny()
    fresh.load_state_dict(model.state_dict())
    x = torch.randn(4, 32)
    want = model(x)
    gemmtune.patch(model, example_inputs=[(x,)], tune_fn=fake_tuner([], {64: TRITON}))
    assert type(model.up) is gemmtune.nn.Linear and not model.up.dispatcher.all_aten
    assert type(model.down) is torch.nn.Linear and type(model.c_attn) is Conv1D
    with torch.no_grad():
        torch.testing.assert_close(model(x), want, rtol=1e-4, atol=1e-4)
    path = gemmtune.save_patched(tmp_path / "mixed.json", gemmtune.nn.dispatchers(model, with_layout=True))
    gemmtune.load_patched(fresh, path)
    assert type(fresh.up) is gemmtune.nn.Linear and fresh.up.dispatcher.hint_choices[0].choice.id == TRITON
    assert type(fresh.down) is torch.nn.Linear and type(fresh.c_attn) is Conv1D
    assert set(gemmtune.nn.dispatchers(fresh, with_layout=True)) == layer_keys(Tiny())
    with torch.no_grad():
        torch.testing.assert_close(fresh(x), want, rtol=1e-4, atol=1e-4)


def test_save_patched_takes_the_keys_dispatchers_gives_and_refuses_names_load_would_refuse(tmp_path):
    """``save_patched(path, gemmtune.nn.dispatchers(model))`` (3-tuple keys, as the patch docstring
    shows) failed with "not enough values to unpack"; a name with a space or '+' saved, then
    load_patched refused its own layer files."""
    torch.manual_seed(0)
    model, fresh = Tiny(), Tiny()
    fresh.load_state_dict(model.state_dict())
    x = torch.randn(4, 32)
    gemmtune.patch(model, example_inputs=[(x,)], tune_fn=fake_tuner([], {64: TRITON}))
    path = gemmtune.save_patched(tmp_path / "plain.json", gemmtune.nn.dispatchers(model))
    gemmtune.load_patched(fresh, path)
    assert set(gemmtune.nn.dispatchers(fresh, with_layout=True)) == layer_keys(Tiny())
    for bad in ("my model.json", "llama+lora.json"):
        with pytest.raises(ValueError, match="cannot save a patched model as"):
            gemmtune.save_patched(tmp_path / bad, gemmtune.nn.dispatchers(model))
        assert not (tmp_path / bad).exists()
    with pytest.raises(ValueError, match="keyed"):
        gemmtune.save_patched(tmp_path / "k.json", {"up": model.up.dispatcher})


_CHILD = """
import sys, torch, gemmtune
model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16))
gemmtune.load_patched(model, sys.argv[1])
ds = gemmtune.nn.dispatchers(model)
name = lambda m: type(m).__module__ + "." + type(m).__qualname__
print(name(model[0]), name(model[2]), sorted(ds), type(model[2]).forward is torch.nn.Linear.forward)
"""


@pytest.mark.slow  # a fresh Python importing torch (~3-5 s)
def test_load_patched_in_a_new_process_leaves_all_aten_layers(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16))
    gemmtune.patch(model, example_inputs=[(torch.randn(4, 32),)], tune_fn=fake_tuner([], {48: TRITON}))
    path = gemmtune.save_patched(tmp_path / "m.json", gemmtune.nn.dispatchers(model, with_layout=True))
    env = dict(os.environ, TRITON_INTERPRET="1")
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(_CHILD), str(path)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == (
        "gemmtune.nn.Linear torch.nn.modules.linear.Linear [(16, 48, 'float32'), (48, 32, 'float32')] True")
    assert type(model[0]) is gemmtune.nn.Linear and type(model[2]) is torch.nn.Linear


def test_load_patched_leaves_unknown_layers_and_says_so(tmp_path):
    model = Tiny()
    ds = gemmtune.tune_model(model, [(torch.randn(2, 32),)], tune_fn=fake_tuner([]))
    ds.pop((32, 64, "float32", "col"))
    path = gemmtune.save_patched(tmp_path / "p.json", ds)
    fresh = Tiny()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        gemmtune.load_patched(fresh, path)
    assert type(fresh.down) is torch.nn.Linear
    assert any("load_patched: 1 layer(s) have no dispatcher of their shape and dtype in" in str(x.message)
               and "left as they were: down (N=32, K=64, float32)" in str(x.message) for x in w)
    assert {x.filename for x in w if "load_patched" in str(x.message)} == {__file__}  # the caller's line


def test_load_patched_into_a_float64_model_names_itself_in_its_warning(tmp_path):
    """load_patched into a fresh model of a dtype gemmtune does not multiply (float64) warned
    "gemmtune.patch left 3 Linear layer(s) as they were", naming a function the user never called."""
    ds = gemmtune.tune_model(Tiny(), [(torch.randn(2, 32),)], tune_fn=fake_tuner([]))
    path = gemmtune.save_patched(tmp_path / "p.json", ds)
    fresh = Tiny().double()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        gemmtune.load_patched(fresh, path)
    assert type(fresh.down) is torch.nn.Linear
    msgs = [str(x.message) for x in w]
    assert any(m.startswith("gemmtune.load_patched left 3 Linear layer(s) as they were") and "torch.float64" in m
               for m in msgs), msgs
    assert not any("gemmtune.patch" in m for m in msgs), msgs


def test_load_patched_into_another_dtype_names_the_artifacts_dtype(tmp_path):
    """An fp32 artifact loaded into an fp16 model matches no layer; the warning said "no dispatcher
    of their shape", pointing at the shapes, which do match."""
    ds = gemmtune.tune_model(Tiny(), [(torch.randn(2, 32),)], tune_fn=fake_tuner([]))
    path = gemmtune.save_patched(tmp_path / "p.json", ds)
    with pytest.warns(RuntimeWarning, match=r"shape and dtype in .*its dispatchers: float32\)"):
        gemmtune.load_patched(Tiny().half(), path)

def test_bad_artifacts_are_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="not a saved gemmtune patched model"):
        gemmtune.load_patched(Tiny(), bad)
    bad.write_text('{"format": "gemmtune-patched-model", "schema_version": 1, '
                   '"layers": [{"n": 1, "k": 1, "dtype": "float32", "layout_b": "col", "file": "../x.json"}]}')
    with pytest.raises(ValueError, match="relative path inside"):
        gemmtune.load_patched(Tiny(), bad)
    # A malformed index was a KeyError / TypeError / int() error that named neither file nor field.
    head = '{"format": "gemmtune-patched-model", "schema_version": 1, "layers": '
    for layers in ('{"a": 1}', '3', '[[1]]', '[{"n": 1, "k": 1, "dtype": "float32", "layout_b": "col"}]',
                   '[{"n": "x", "k": 1, "dtype": "float32", "layout_b": "col", "file": "x.json"}]'):
        bad.write_text(head + layers + "}")
        with pytest.raises(ValueError, match=f"{bad}: malformed 'layers'"):
            gemmtune.load_patched(Tiny(), bad)


class Router(torch.nn.Module):
    """An MoE router as Qwen2-MoE's TopKRouter is: its own weight, multiplied by F.linear in its
    own forward, so patch (which converts nn.Linear and Conv1D) cannot take it over."""

    def __init__(self, k: int, experts: int):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(experts, k))

    def forward(self, x):
        return torch.nn.functional.linear(x, self.weight).softmax(-1)


class Routed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj, self.gate = torch.nn.Linear(32, 32), Router(32, 8)

    def forward(self, x):
        return self.proj(x) * self.gate(x).sum(-1, keepdim=True)


def test_gemms_outside_the_layers_patch_converts_are_named_in_one_warning():
    """A router's own F.linear is captured and tunable, but no layer patch converts runs it: the
    user is told which GEMM stays torch's, where, and at which size; a model of plain layers hears
    nothing."""
    with pytest.warns(RuntimeWarning, match=r"1 GEMM shape\(s\) ran outside .* mm 6x8x32 float32 in gate\. "):
        ds = gemmtune.tune_model(Routed(), [(torch.randn(2, 3, 32),)], tune_fn=fake_tuner([]))
    assert set(ds) == {(32, 32, "float32", "col")}  # the Linear is tuned; the router is not a layer
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gemmtune.tune_model(Tiny(), [(torch.randn(2, 3, 32),)], tune_fn=fake_tuner([]))


def test_no_patchable_gemm_is_an_error():
    with pytest.raises(ValueError, match="no patchable GEMM"):
        gemmtune.tune_model(torch.nn.ReLU(), [(torch.randn(3),)], tune_fn=fake_tuner([]))


@pytest.mark.slow
def test_real_tuning_call_in_the_interpreter(tmp_path):
    """The real tuner, once, over every layer (fp16 in the interpreter, cuBLAS and triton_mm)."""
    model = Tiny().half()
    x = torch.randn(4, 32, dtype=torch.float16)
    want = model(x)
    gemmtune.patch(model, example_inputs=[(x,)], families=["aten", "triton_mm"], space="default",
                   store=str(tmp_path / "s.sqlite"), progress=False, fast=True)
    got = model(x)
    assert (got.float() - want.float()).norm() / want.float().norm() < 2e-3


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU operands run the interpreter only on a machine without a GPU")
def test_patch_tunes_in_process_with_the_real_tuner(tmp_path, monkeypatch):
    """patch(model, example_inputs=..., in_process=True): the keyword reaches the one real tune call,
    which measures in this process (no worker pool is made); the patched model matches the original."""
    import gemmtune.tuning.tuner as tuner_mod

    def no_pool(*a, **k):
        raise AssertionError("in_process must not start a worker pool")
    monkeypatch.setattr(tuner_mod, "WorkerPool", no_pool)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 24), torch.nn.ReLU(), torch.nn.Linear(24, 16))
    x = torch.randn(5, 32)
    with torch.no_grad():
        want = model(x)
    gemmtune.patch(model, example_inputs=[(x,)], in_process=True, families=["triton_mm", "aten"],
                   store=tmp_path / "s.sqlite", progress=False)
    with torch.no_grad():
        torch.testing.assert_close(model(x), want, rtol=1e-4, atol=1e-4)
    assert (tmp_path / "s.sqlite").exists()


def test_load_patched_onto_a_patched_model_applies_the_loaded_dispatchers(tmp_path):
    """A layer converted (or left as torch's) by an earlier patch kept its old dispatcher when
    ``load_patched`` brought other ones: they were silently ignored. The loaded ones now win."""
    torch.manual_seed(0)
    saved_model, model = Tiny(), Tiny()
    model.load_state_dict(saved_model.state_dict())
    x = torch.randn(4, 32)
    want = saved_model(x)
    gemmtune.patch(saved_model, example_inputs=[(x,)], tune_fn=fake_tuner([], {64: TRITON}))
    path = gemmtune.save_patched(tmp_path / "triton.json", gemmtune.nn.dispatchers(saved_model))
    gemmtune.patch(model, example_inputs=[(x,)], tune_fn=fake_tuner([], {}))  # every layer on cuBLAS
    assert type(model.up) is torch.nn.Linear and recorded_dispatcher(model.up).all_aten
    gemmtune.load_patched(model, path)
    assert type(model.up) is gemmtune.nn.Linear and model.up.dispatcher.hint_choices[0].choice.id == TRITON
    old = model.up.dispatcher
    gemmtune.load_patched(model, path)  # a second load: new dispatcher objects, applied again
    assert model.up.dispatcher is not old and not model.up.eager_paths
    with torch.no_grad():
        torch.testing.assert_close(model(x), want, rtol=1e-4, atol=1e-4)


def test_tuning_an_already_patched_model_says_so():
    model = torch.nn.Sequential(torch.nn.Linear(32, 16))
    x = torch.randn(4, 32)
    gemmtune.patch(model, example_inputs=[(x,)], tune_fn=fake_tuner([], {16: TRITON}))
    with pytest.raises(ValueError, match="1 layer\\(s\\) of this model are already patched"):
        gemmtune.patch(model, example_inputs=[(x,)], tune_fn=fake_tuner([]))


def test_layers_of_a_size_zero_are_left_to_torch():
    """Linear(0, n) (and an empty batch) made tune_model say "no patchable GEMM ran ... 1 tunable
    problems, 1 layer shapes", a message that contradicted itself: such a GEMM has nothing to tune.
    Alone, a one-line error that says so; beside other layers, those are tuned and it stays torch's."""
    calls = []
    with pytest.raises(ValueError, match=r"only GEMMs with a size 0 ran .*N=8 K=0"):
        gemmtune.tune_model(torch.nn.Sequential(torch.nn.Linear(0, 8)), [(torch.randn(4, 0),)],
                            tune_fn=fake_tuner(calls))
    with pytest.raises(ValueError, match=r"M=0 N=8 K=4"):
        gemmtune.tune_model(torch.nn.Sequential(torch.nn.Linear(4, 8)), [(torch.randn(0, 4),)],
                            tune_fn=fake_tuner(calls))
    model = torch.nn.Sequential(torch.nn.Linear(0, 8), torch.nn.Linear(8, 16))
    ds = gemmtune.tune_model(model, [(torch.randn(4, 0),)], tune_fn=fake_tuner(calls))
    assert list(ds) == [(16, 8, "float32", "col")] and calls[-1]  # one tuning call, the 8->16 layer in it


class FakeEarly:
    """Stands in for gemmtune_entry.spawn.Prestarted: records whether it was closed."""

    def __init__(self, log):
        self.log = log
        log.append("started")

    def close(self):
        self.log.append("closed")


def test_the_tuning_calls_worker_starts_before_the_example_passes_and_is_always_closed(monkeypatch):
    """tune_model starts gemmtune.tune's benchmark worker before its capture (the tuner waits for
    it before anything else: 5.8 s of an 11.8 s tuning on an H200), hands it to the one tuning call
    as ``prestarted``, and closes it after (a no-op for one the pool adopted), also when the
    capture fails. Not where the call has its own pool, with a tune_fn that does not ask for it,
    or with no GPU."""
    import gemmtune_entry.spawn as spawn

    log = []
    # the benchmark worker and a compile worker, as gemmtune_entry.spawn.prestart gives them
    monkeypatch.setattr(spawn, "prestart", lambda argv: [FakeEarly(log), FakeEarly(log)] if argv == ["tune"] else [])
    monkeypatch.setattr(gemmtune.modeltune, "_has_gpu", lambda: True)
    seen = []

    class Probe(Tiny):
        def forward(self, x):
            log.append("forward")
            return super().forward(x)

    def tune_fn(problems, **kw):  # as bench-model's: its keywords go on to gemmtune.tune
        seen.append(kw.get("prestarted"))
        log.append("tune")
        return {p.key: "aten" for p in problems}

    ds = gemmtune.tune_model(Probe(), [(torch.randn(2, 32),)], tune_fn=tune_fn, prestart=True, progress=False)
    assert ds and log == ["started", "started", "forward", "tune", "closed", "closed"], log
    assert len(seen[0]) == 2 and all(isinstance(w, FakeEarly) for w in seen[0])

    class Broken(Tiny):
        def forward(self, x):
            raise RuntimeError("boom in the example pass")

    log.clear()
    with pytest.raises(RuntimeError, match="boom"):
        gemmtune.tune_model(Broken(), [(torch.randn(2, 32),)], tune_fn=tune_fn, prestart=True)
    assert log == ["started", "started", "closed", "closed"], log
    # none: a tune_fn of its own (the default with one), its own pool, prestart=False, no GPU
    for kw in ({}, {"prestart": True, "in_process": True}, {"prestart": True, "server": "/tmp/s"},
               {"prestart": True, "workers": 2}, {"prestart": False}):
        log.clear()
        seen.clear()
        gemmtune.tune_model(Probe(), [(torch.randn(2, 32),)], tune_fn=tune_fn, **kw)
        assert "started" not in log and seen == [None], (kw, log)
    monkeypatch.setattr(gemmtune.modeltune, "_has_gpu", lambda: False)
    log.clear()
    gemmtune.tune_model(Probe(), [(torch.randn(2, 32),)], tune_fn=tune_fn, prestart=True)
    assert "started" not in log
    # tune_fn None: gemmtune.tune's own call asks for it by default
    assert gemmtune.modeltune.early_workers(None, None, {}) == []  # no GPU here
    monkeypatch.setattr(gemmtune.modeltune, "_has_gpu", lambda: True)
    assert [type(w) for w in gemmtune.modeltune.early_workers(None, None, {})] == [FakeEarly, FakeEarly]
    assert gemmtune.modeltune.early_workers(None, None, {"cluster": "local:2"}) == []


def test_early_workers_are_real_workers_as_prestart_starts_them(monkeypatch):
    """Not a stand-in this time: ``gemmtune_entry.spawn.prestart`` as tune_model calls it gives a
    list, the benchmark worker first and its niced compile workers after, and each closes (session
    44's GPU run of bench-model crashed where tune_model took that list for one worker). The CPU
    machine has no GPU: CUDA_VISIBLE_DEVICES names one, so the workers start (and only import torch)."""
    from gemmtune.tuning.executor import COMPILE_NICE
    monkeypatch.setattr(gemmtune.modeltune, "_has_gpu", lambda: True)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)  # two compile workers
    ws = gemmtune.modeltune.early_workers(None, None, {})
    try:
        assert [w.nice for w in ws] == [0, COMPILE_NICE, COMPILE_NICE] and all(w.gpu == "0" for w in ws)
    finally:
        for w in ws:
            w.close()
    assert all(w.proc.poll() is not None for w in ws)
