"""A model end to end on the CPU: capture, one tuning call, patch (Linear and GPT-2's Conv1D),
save, load into a fresh model, same outputs."""

from __future__ import annotations

import warnings

import pytest
import torch

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


def fake_tuner(calls):
    def tune(problems, **kw):
        calls.append([p.key for p in problems])
        return {p.key: "aten" for p in problems}
    return tune


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


def test_patch_with_example_inputs_then_save_and_load(tmp_path):
    torch.manual_seed(0)
    model = Tiny()
    fresh = Tiny()
    fresh.load_state_dict(model.state_dict())
    x = torch.randn(3, 5, 32)
    want = model(x)
    calls = []
    gemmtune.patch(model, example_inputs=[(x,)], tune_fn=fake_tuner(calls))
    assert len(calls) == 1
    assert type(model.up).__name__ == "Linear" and type(model.c_attn).__name__ == "GemmtuneConv1D"
    assert isinstance(model.c_attn, Conv1D)  # still the class it was, for isinstance checks
    torch.testing.assert_close(model(x), want, rtol=1e-5, atol=1e-5)

    path = gemmtune.save_patched(tmp_path / "tiny.json", gemmtune.nn.dispatchers(model, with_layout=True))
    assert sorted(p.name for p in (tmp_path / "tiny.d").glob("*.json")) == [
        "mm_n32_k64_float32_col.json", "mm_n64_k96_float32_col.json", "mm_n96_k32_float32_row.json"]
    gemmtune.load_patched(fresh, path)
    assert type(fresh.c_attn).__name__ == "GemmtuneConv1D" and type(fresh.down).__name__ == "Linear"
    torch.testing.assert_close(fresh(x), want, rtol=1e-5, atol=1e-5)
    # decisions came with the artifact: the loaded dispatchers tuned nothing
    assert all(d.n_decisions <= 1 for d in gemmtune.nn.dispatchers(fresh).values())


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
    assert any("left as they were: down" in str(x.message) for x in w)


def test_bad_artifacts_are_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="not a saved gemmtune patched model"):
        gemmtune.load_patched(Tiny(), bad)
    bad.write_text('{"format": "gemmtune-patched-model", "schema_version": 1, '
                   '"layers": [{"n": 1, "k": 1, "dtype": "float32", "layout_b": "col", "file": "../x.json"}]}')
    with pytest.raises(ValueError, match="relative path inside"):
        gemmtune.load_patched(Tiny(), bad)


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
