"""Shape capture: the GEMMs a model runs, with layouts, counts, modules and M ranges, written as a
suite that loads back into the same problems."""

from __future__ import annotations

import pytest
import torch

import gemmtune
from gemmtune.capture import Capture, cache_kwarg
from gemmtune.shapes import load_csv


class Conv1D(torch.nn.Module):
    """HF transformers' GPT-2 Conv1D: x @ W + b with W stored [in, out]."""

    def __init__(self, nx: int, nf: int):
        super().__init__()
        self.nf = nf  # as transformers' has it (modeltune.is_conv1d: a layer patch converts)
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
    assert (bmm.batch, bmm.m, bmm.layout_b, bmm.tunable) == (2, 5, "col", True)  # h @ h.transpose(-1, -2)
    assert bmm.problem().key == "bmm:B2-M5-N5-K48:fp32->fp32:row.a/col.a"
    assert "not tuned yet" not in cap.summary() and bmm.problem() in cap.problems()


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
    assert text[0].startswith("group,name,M,N,K,dtype,layout_a,layout_b,op,batch,count,m_min,m_max,modules")
    row = next(line for line in text if line.startswith("captured,up_addmm_m7,"))
    assert row.endswith(",addmm,1,2,1,28,up")
    bmm = next(line for line in text if line.startswith("captured,model_bmm_b4_m7,"))
    assert bmm.startswith("captured,model_bmm_b4_m7,7,7,48,float32,row,col,bmm,4,")
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


class EncDec(torch.nn.Module):
    """Two keyword-only inputs, like an HF encoder-decoder's input_ids and decoder_input_ids."""

    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Linear(16, 24)
        self.dec = torch.nn.Linear(16, 40)

    def forward(self, *, src, tgt):
        return self.enc(src).sum() + self.dec(tgt).sum()


def test_an_example_input_may_be_a_dict_of_keyword_arguments_or_one_tensor():
    """An encoder-decoder takes its inputs by name: a dict is passed as keyword arguments (it
    was unpacked as a tuple, passing its key names). A lone tensor is the model's one argument:
    unpacked as a tuple it became one argument per row, a pass at the wrong M (or a confusing
    error); a tensor or a dict given as ``inputs`` itself is refused for the same reason."""
    model = EncDec()
    cap = gemmtune.capture(model, inputs=[dict(src=torch.randn(2, 5, 16), tgt=torch.randn(2, 3, 16))])
    assert sorted((r.n, r.m) for r in cap.records) == [(24, 10), (40, 6)]
    lin = torch.nn.Linear(16, 24)
    cap = gemmtune.capture(lin, inputs=[torch.randn(1, 7, 16), (torch.randn(3, 16),)])
    assert sorted(r.m for r in cap.records) == [3, 7]
    for bad in (torch.randn(4, 16), {"input": torch.randn(4, 16)}):
        with pytest.raises(TypeError, match="list of example inputs"):
            gemmtune.capture(lin, inputs=bad)
    with pytest.raises(TypeError, match="tuple of positional arguments"):
        gemmtune.capture(lin, inputs=[7])


def test_a_frozen_linear_on_a_transposed_input_gives_its_layer_hints():
    """``F.linear`` on a 3-D input that cannot be viewed as 2-D (a transposed activation, as
    Mamba's out_proj takes) runs a bmm against the weight broadcast over the batch when the
    weight needs no gradient. hints() counted no bmm, so the layer had no hints: tune_model
    left it out (or, alone, found no patchable GEMM) and patch tuned it anew at default M values."""
    lin = torch.nn.Linear(32, 48).requires_grad_(False)
    x = torch.randn(5, 3, 32).transpose(0, 1)  # (3, 5, 32), batch-major view of a time-major tensor
    cap = gemmtune.capture(lin, x)
    (rec,) = cap.records
    assert (rec.op, rec.batch, rec.m, rec.layout_b) == ("bmm", 3, 5, "bcast_col")  # what torch ran
    assert cap.hints() == {(48, 32, "float32", "col"): [15]}  # the M a patched layer runs: 3 x 5
    # attention's bmm (both operands batched) is no layer's GEMM: no hints of its own
    assert set(gemmtune.capture(Block(), torch.randn(4, 7, 48)).hints()) == {
        (96, 48, "float32", "col"), (48, 96, "float32", "col"), (80, 48, "float32", "row")}


# ------------------------------------------------------------------ gemmtune capture (the CLI)
class _Attention(torch.nn.Module):
    """A projection, then SDPA over 2 heads: one Linear GEMM, and attention's own products."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)

    def forward(self, x):
        q, k, v = self.qkv(x).view(x.shape[0], x.shape[1], 3, 2, 8).permute(2, 0, 3, 1, 4)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_attention_products_on_meta_are_left_out_and_counted():
    """On meta, SDPA takes torch's math path (no fused kernel there) and its bmm products were
    recorded as problems to tune (GPT-2: 14 problems on meta, 10 on the CPU). They are left out
    on meta, and counted; where the math path really runs (the CPU told to use it) they stay."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    x = torch.randn(2, 5, 16)
    with torch.device("meta"):
        meta = gemmtune.capture(_Attention(), torch.empty(2, 5, 16))
    assert [r.op for r in meta.records] == ["addmm"] and meta.meta_attention_calls > 0
    assert "calls inside attention on meta left out" in meta.summary()
    with sdpa_kernel(SDPBackend.MATH):
        real = gemmtune.capture(_Attention(), x)
    assert {r.op for r in real.records} >= {"addmm", "bmm"} and real.meta_attention_calls == 0
    assert real.records[0].m == meta.records[0].m == 10  # the same projection, read the same way


def test_cli_capture_tiny_hf_model_end_to_end(tmp_path, capsys):
    """A tiny GPT-2 (random weights, no download) on the CPU: one prefill and two decode steps,
    written as a suite the suite loader (and so gemmtune tune --suite) reads back."""
    pytest.importorskip("transformers")
    from gemmtune.cli import main

    csv_path, js = tmp_path / "shapes.csv", tmp_path / "shapes.json"
    rc = main(["capture", "--model", "tiny-gpt2", "--batch", "2", "--seq", "5", "--decode-steps", "2",
               "--dtype", "fp16", "--device", "cpu", "--out", str(csv_path), "--json", str(js)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "pass 1/3 (prefill, M = 10)" in err and "pass 3/3 (decode step 2/2, M = 2)" in err
    assert f"{csv_path}: 10 problems" in out
    shapes = load_csv(csv_path)
    assert {s.group for s in shapes} == {"tiny-gpt2"}
    ops = {(s.problem.op, s.problem.n, s.problem.k, s.problem.layout_b) for s in shapes}
    # GPT-2's Conv1D layers are addmm with a row-major weight; the tied lm_head is mm on W.T.
    assert ops == {("addmm", 192, 64, "row"), ("addmm", 64, 64, "row"), ("addmm", 256, 64, "row"),
                   ("addmm", 64, 256, "row"), ("mm", 512, 64, "col")}
    assert {s.problem.m for s in shapes} == {10, 2}
    assert all(s.problem.dtype == "float16" for s in shapes)
    rows = csv_path.read_text().splitlines()
    assert all(line.split(",")[11:13] == ["2", "10"] for line in rows[1:])  # m_min, m_max per layer
    assert '"op": "addmm"' in js.read_text()


def test_cli_capture_takes_bench_models_entries_and_meta_gives_the_cpus_suite(tmp_path, capsys):
    """``--model`` took presets and module:function only; ``config:PATH``, ``dir:PATH`` and
    ``hf:MODEL_TYPE`` (what bench-model takes) were read as module:function ("cannot import
    config"). A config on meta (no memory, no arithmetic) writes the suite the CPU writes."""
    pytest.importorskip("transformers")
    import json

    from gemmtune.benchmodel.models import _config
    from gemmtune.cli import main

    cfg = _config("tiny-llama").to_dict()
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    out = {}
    for dev in ("meta", "cpu"):
        path = tmp_path / f"{dev}.csv"
        rc = main(["capture", "--model", f"config:{tmp_path}", "--device", dev, "--seq", "8", "--out", str(path), "-q"])
        assert rc == 0, capsys.readouterr().err
        out[dev] = path.read_text()
    assert out["meta"] == out["cpu"] and len(load_csv(tmp_path / "meta.csv")) >= 5
    # dir: on meta reads the folder's config, not its weights (here not weights at all); on the
    # CPU the broken file is one line naming it (SafetensorError was a traceback).
    (tmp_path / "model.safetensors").write_bytes(b"not weights")
    rc = main(["capture", "--model", f"dir:{tmp_path}", "--device", "meta", "--seq", "8", "--out", str(tmp_path / "d.csv"),
               "-q"])
    assert rc == 0 and (tmp_path / "d.csv").read_text() == out["meta"].replace(f"config:{tmp_path}", f"dir:{tmp_path}")
    capsys.readouterr()
    rc = main(["capture", "--model", f"dir:{tmp_path}", "--device", "cpu", "--out", str(tmp_path / "d.csv"), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and f"cannot build dir:{tmp_path}: SafetensorError" in err and err.count("\n") == 1, err
    for argv, msg in [(["--model", "hf:nosuch_model_type"], "knows no model_type 'nosuch_model_type'"),
                      (["--model", "config:" + str(tmp_path / "none.json")], "does not exist"),
                      (["--model", "minilm"], "capture runs causal LMs")]:
        rc = main(["capture", *argv, "--device", "meta", "--out", str(tmp_path / "x.csv")])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and msg in err, (argv, err)


def test_cli_capture_runs_a_text_encoder_as_one_forward(tmp_path, capsys):
    """A BERT config (as bench-model takes one) is one forward of --batch x --seq tokens: its Linear
    layers at M = batch x seq as addmm, the pooler's at M = batch; the same suite on meta as on the
    CPU; --decode-steps refused (an encoder has no decode step) and T5 (neither a causal LM nor a
    text encoder) named in one line each."""
    pytest.importorskip("transformers")
    import transformers as tf

    from gemmtune.cli import main

    tf.BertConfig(vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  max_position_embeddings=32).save_pretrained(tmp_path / "bert")
    out = {}
    for dev in ("meta", "cpu"):
        path = tmp_path / f"{dev}.csv"
        rc = main(["capture", "--model", f"config:{tmp_path / 'bert'}", "--device", dev, "--batch", "3", "--seq", "7",
                   "--out", str(path), "-q"])
        assert rc == 0, capsys.readouterr().err
        out[dev] = path.read_text()
    assert out["meta"] == out["cpu"]
    rows = {(s.problem.m, s.problem.n, s.problem.k, s.problem.op) for s in load_csv(tmp_path / "cpu.csv")}
    assert rows == {(21, 64, 64, "addmm"), (21, 96, 64, "addmm"), (21, 64, 96, "addmm"), (3, 64, 64, "addmm")}, rows
    tf.T5Config(vocab_size=512, d_model=32, d_ff=64, num_layers=1, num_heads=2).save_pretrained(tmp_path / "t5")
    for argv, msg in [([f"config:{tmp_path / 'bert'}", "--decode-steps", "2"], "a text encoder, which runs no decode"),
                      ([f"config:{tmp_path / 'bert'}", "--seq", "40"], "--seq 40 needs 40 positions, the config declares 32"),
                      ([f"config:{tmp_path / 't5'}"], "neither a causal LM")]:
        rc = main(["capture", "--model", *argv, "--device", "meta", "--out", str(tmp_path / "x.csv")])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and msg in err, (argv, err)


def test_cli_capture_checks_the_positions_it_runs_not_bench_models(tmp_path, capsys):
    """A config of 32 positions was refused for ``--seq 8`` by bench-model's greedy check ("under the
    48 positions of the greedy-decoding check"), which capture does not run; and a prefill past a
    learned position table (GPT-2's n_positions) was an IndexError traceback on the CPU and, on
    meta, a suite of a model that cannot run it. Capture needs --seq + --decode-steps positions."""
    pytest.importorskip("transformers")
    import transformers as tf

    from gemmtune.cli import main

    tf.GPT2Config(vocab_size=512, n_embd=32, n_layer=1, n_head=2, n_positions=32, bos_token_id=0,
                  eos_token_id=0).save_pretrained(tmp_path / "gpt2")
    out = tmp_path / "s.csv"
    rc = main(["capture", "--model", f"config:{tmp_path / 'gpt2'}", "--device", "cpu", "--seq", "8", "--out", str(out),
               "-q"])
    assert rc == 0 and out.exists(), capsys.readouterr().err
    out.unlink()
    for dev, argv in [("cpu", ["--seq", "40"]), ("meta", ["--seq", "32"])]:  # 32 + 1 decode step: 33
        rc = main(["capture", "--model", f"config:{tmp_path / 'gpt2'}", "--device", dev, *argv, "--out", str(out)])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and "positions, the config declares 32" in err, (dev, err)
        assert not out.exists()
    # A BERT config is captured as a text encoder (one forward, test_cli_capture_runs_a_text_encoder_...)


def test_cli_capture_refuses_a_model_that_does_not_fit_before_building_it(tmp_path, capsys, monkeypatch):
    """A model whose fp32 weights exceed the device's free memory was built anyway and killed by the
    OOM killer with no message (Qwen3's default config on the 24 GiB CPU machine: 44.9 GiB); now
    one line says so and points at --device meta, which gives the same suite with no memory."""
    pytest.importorskip("transformers")
    import importlib

    from gemmtune.cli import main

    capture_cli = importlib.import_module("gemmtune.cli.capture")
    monkeypatch.setattr(capture_cli, "_available_bytes", lambda device: 1 << 10)  # 1 KiB free
    rc = main(["capture", "--model", "tiny-llama", "--device", "cpu", "--out", str(tmp_path / "s.csv")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "GiB in fp32 while it is built" in err and "--device meta" in err, err
    assert not (tmp_path / "s.csv").exists()
    rc = main(["capture", "--model", "tiny-llama", "--device", "meta", "--out", str(tmp_path / "s.csv"), "-q"])
    assert rc == 0 and (tmp_path / "s.csv").exists()  # meta needs none


def test_cli_capture_out_and_json_naming_one_file_is_refused(tmp_path, capsys):
    """``capture --out X --json X`` wrote the suite CSV, then the JSON over it, and said that X held
    the suite for ``tune --suite X`` (which then failed on the JSON). One line, rc 2, before the capture."""
    from gemmtune.cli import main

    path = tmp_path / "s.csv"
    rc = main(["capture", "--model", "tiny-llama", "--device", "meta", "--out", str(path), "--json", str(path), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "one file" in err and err.count("\n") == 1, err
    assert not path.exists()


def test_cli_capture_of_a_preset_prints_no_library_noise(tmp_path, capsys):
    """Every preset capture (and bench-model decode step) printed transformers' FutureWarning that
    `past_key_values` goes in 5.40 (with the source line), and tiny-gpt2 two config warnings (its
    bos/eos ids 50256 outside its 512 words). The cache goes by the keyword the model's forward
    takes, and tiny-gpt2's ids lie in its vocabulary."""
    pytest.importorskip("transformers")
    import warnings

    from gemmtune.benchmodel.models import _config
    from gemmtune.cli import main

    for name in ("tiny-gpt2", "tiny-llama"):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            rc = main(["capture", "--model", name, "--seq", "4", "--device", "cpu", "-q",
                       "--out", str(tmp_path / f"{name}.csv")])
        assert rc == 0, capsys.readouterr().err
        assert not [w for w in seen if "past_key_values" in str(w.message)], [str(w.message) for w in seen]
    cfg = _config("tiny-gpt2")
    assert 0 <= cfg.bos_token_id < cfg.vocab_size and 0 <= cfg.eos_token_id < cfg.vocab_size


def test_cli_capture_module_function(tmp_path, capsys, monkeypatch):
    from gemmtune.cli import main

    (tmp_path / "gt_capture_factory.py").write_text(
        "import torch\n"
        "def build():\n"
        "    torch.manual_seed(0)\n"
        "    model = torch.nn.Sequential(torch.nn.Linear(16, 24), torch.nn.ReLU(), torch.nn.Linear(24, 8, bias=False))\n"
        "    return model, [(torch.randn(3, 16),), (torch.randn(7, 16),)]\n"
        "def bad():\n"
        "    return 42\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    rc = main(["capture", "--model", "gt_capture_factory:build", "--out", "s.csv", "-q"])
    out, err = capsys.readouterr()
    assert rc == 0 and err == "", err
    shapes = load_csv(tmp_path / "s.csv")
    assert sorted((s.problem.op, s.problem.m, s.problem.n) for s in shapes) == [
        ("addmm", 3, 24), ("addmm", 7, 24), ("mm", 3, 8), ("mm", 7, 8)]
    assert {s.group for s in shapes} == {"captured"}
    for argv, msg in [
        (["--model", "gt_capture_factory:bad"], "must return (model, example_inputs), got int"),
        (["--model", "gt_capture_factory:nope"], "has no function nope"),
        (["--model", "no_such_module_xyz:build"], "cannot import no_such_module_xyz"),
        (["--model", "gt_capture_factory:build", "--seq", "8"], "apply to the preset models"),
        (["--model", "gpt5"], "unknown model 'gpt5'; presets: llama-1b"),
        (["--model", "gt_capture_factory:build", "--out", "no/such/dir/s.csv"], "directory"),
    ]:
        rc = main(["capture", *argv])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and err.startswith("gemmtune capture: error: "), (argv, err)
        assert msg in err, (argv, err)


def test_inputs_may_be_a_generator():
    """``inputs`` is iterated once: a generator of passes gives every pass."""
    cap = gemmtune.capture(torch.nn.Linear(8, 4), inputs=((torch.randn(n, 8),) for n in (2, 3)))
    assert cap.passes == 2 and [r.m for r in cap.records] == [2, 3]


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_cli_capture_fuse_records_the_fused_shapes(tmp_path, capsys, device):
    """--fuse: q/k/v and gate/up captured as one GEMM each (tiny-llama: 64 + 32 + 32 and 128 + 128
    outputs), named after the fused layer; the same suite on meta as on the CPU."""
    pytest.importorskip("transformers")
    from gemmtune.cli import main

    path = tmp_path / "f.csv"
    rc = main(["capture", "--model", "tiny-llama", "--device", device, "--fuse", "--out", str(path)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "fused 4 group(s) of sibling layers: q_proj+k_proj+v_proj x2, gate_proj+up_proj x2" in err
    shapes = load_csv(path)
    # (the Linear layers' products: transformers 5.17 also runs the rotary embedding's K = 1
    # product as a GEMM, which capture records under the rotary module's name)
    linears = {(s.problem.n, s.problem.k) for s in shapes if "rotary" not in s.name}
    assert linears == {(128, 64), (64, 64), (256, 64), (64, 128), (512, 64)}
    assert any("gemmtune_fused_q_proj_k_proj_v_proj" in s.name for s in shapes)


def test_cli_capture_a_user_models_failing_forward_is_one_line(tmp_path, capsys, monkeypatch):
    """A config:/dir:/hf: model whose forward raises during the capture (a Mamba fed transformers'
    DynamicCache raised IndexError in cache_utils) is one line naming the exception and where it
    was raised, exit status 2; a named preset's failure is gemmtune's bug and keeps its traceback."""
    pytest.importorskip("transformers")
    import importlib
    import json

    from gemmtune.benchmodel.models import _config
    from gemmtune.cli import main

    (tmp_path / "config.json").write_text(json.dumps(_config("tiny-llama").to_dict()))

    def failing(*a, **kw):
        raise IndexError("list index out of range")
    # the module (gemmtune.capture is also the function), whose capture_causal_lm the CLI imports per call
    monkeypatch.setattr(importlib.import_module("gemmtune.capture"), "capture_causal_lm", failing)
    rc = main(["capture", "--model", f"config:{tmp_path}", "--device", "cpu", "--seq", "8",
               "--out", str(tmp_path / "x.csv"), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert "its forward failed during the capture (IndexError: list index out of range, raised at " in err
    assert "tests/test_capture.py:" in err and not (tmp_path / "x.csv").exists()
    with pytest.raises(IndexError):
        main(["capture", "--model", "tiny-llama", "--device", "cpu", "--seq", "8", "--out", str(tmp_path / "y.csv"), "-q"])


def test_capture_causal_lm_runs_a_state_space_model():
    """capture's KV cache is built from the model's config where transformers' DynamicCache takes
    one (capture.new_cache): a Mamba's forward raised IndexError on an empty DynamicCache, and now
    its prefill and decode step are captured, the step at M = 1. An attention model's cache is
    the same either way (its step's logits equal)."""
    tf = pytest.importorskip("transformers")
    import inspect
    import sys
    from pathlib import Path

    from gemmtune.capture import capture_causal_lm, new_cache
    if "config" not in inspect.signature(tf.DynamicCache.__init__).parameters:
        pytest.skip("this transformers' DynamicCache takes no config")
    sys.path.insert(0, str(Path(__file__).parent))
    from test_hf_archs import tiny

    cap = capture_causal_lm(tiny("mamba"), batch=1, seq=6, decode_steps=2)
    ms = {r.m for r in cap.records if r.tunable}
    assert 6 in ms and 1 in ms, cap.summary()
    names = {n.rpartition(".")[2] for r in cap.records for n in r.modules}
    assert {"in_proj", "out_proj", "lm_head"} <= names, names
    llama = tiny("llama")
    ids, step = torch.randint(0, 512, (1, 8)), torch.randint(0, 512, (1, 1))
    got = []
    with torch.no_grad():
        for cache in (new_cache(llama), tf.DynamicCache()):
            kw = {cache_kwarg(llama): cache}  # (`cache` from transformers 5.2x, before it past_key_values)
            llama(input_ids=ids, use_cache=True, **kw)
            got.append(llama(input_ids=step, use_cache=True, **kw).logits)
    torch.testing.assert_close(got[0], got[1])
