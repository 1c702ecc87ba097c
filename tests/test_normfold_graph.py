"""gemmtune.normfold: the RMSNorm chains of transformers' models in Inductor's pre-grad graph
(CPU; the graph is read, not compiled into kernels)."""

from __future__ import annotations

import pytest
import torch

import gemmtune
from gemmtune import fuse_compile
from gemmtune.normfold import only_read_by, rms_norm_input

tf = pytest.importorskip("transformers")


def _pre_grad_graph(model, ids, look):
    """``look(graph)`` on the first pre-grad graph Inductor gives its custom passes for
    ``model(ids)``, before gemmtune's pass merges the fused groups (it runs after a pass configured
    before it, and changes the graph in place); what ``look`` returned."""
    from torch._inductor import config
    from torch._inductor.custom_graph_pass import CustomGraphPass

    seen = []

    class Spy(CustomGraphPass):
        def __call__(self, graph):
            if not seen:
                seen.append(look(graph))

        def uuid(self):
            return None  # no cache: the pass must run

    torch._dynamo.reset()
    with config.patch(pre_grad_custom_pass=Spy(), fx_graph_cache=False), torch.no_grad():
        torch.compile(model, backend="inductor")(ids)
    torch._dynamo.reset()
    return seen[0]


def _tiny(cls, cfg_cls, **kw):
    cfg = cfg_cls(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, **kw)
    torch.manual_seed(0)
    return cls(cfg).eval()


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_the_norm_before_each_fused_group_is_found(arch):
    cls, cfg_cls = {"llama": (tf.LlamaForCausalLM, tf.LlamaConfig), "qwen2": (tf.Qwen2ForCausalLM, tf.Qwen2Config)}[arch]
    m = _tiny(cls, cfg_cls, rms_norm_eps=1e-5)
    ids = torch.randint(0, 128, (1, 4))
    gemmtune.fuse_linears(m, ids)

    def look(g):
        groups = {}
        for n in g.nodes:
            if fuse_compile._is_member(n):
                groups.setdefault(n.args[0], []).append(n)
        return [(rms_norm_input(x), only_read_by(x, members), len(members)) for x, members in groups.items()]
    found = _pre_grad_graph(m, ids, look)
    assert sorted(n for _, _, n in found) == [2, 3]  # gate/up and q/k/v of the one layer
    for match, only, _ in found:
        assert match is not None and match.eps == 1e-5 and only
        assert match.weight.op in ("placeholder", "get_attr") and "layernorm" in match.weight.name


def test_other_norms_and_a_second_reader_are_not_matched():
    # Gemma's RMSNorm multiplies by (1 + weight) in fp32: another chain
    m = _tiny(tf.GemmaForCausalLM, tf.GemmaConfig, head_dim=16)
    ids = torch.randint(0, 128, (1, 4))
    gemmtune.fuse_linears(m, ids)
    found = _pre_grad_graph(m, ids, lambda g: [rms_norm_input(n.args[0]) for n in g.nodes if fuse_compile._is_member(n)])
    assert found and all(x is None for x in found)

    class Reads(torch.nn.Module):  # the chain, with y read by something else too or not
        def __init__(self, second: bool):
            super().__init__()
            self.w, self.second = torch.nn.Parameter(torch.randn(16)), second

        def forward(self, x):
            h = x.to(torch.float32)
            var = h.pow(2).mean(-1, keepdim=True)
            y = h * torch.rsqrt(var + 1e-6)
            out = self.w * y.to(x.dtype)
            return out @ out.t() + (y.sum() if self.second else 0)

    for second, found in ((False, True), (True, False)):
        gm = torch.fx.symbolic_trace(Reads(second))
        out = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target.__name__ == "mul"
                   and any(a.op == "get_attr" for a in n.args if isinstance(a, torch.fx.Node)))
        match = rms_norm_input(out)
        assert (match is not None) is found
        if found:
            assert match.eps == 1e-6 and match.x.op == "placeholder" and match.weight.target == "w"


STRIP = "skinny:BM1-BN16-BK64-SK1-S1-W4-core-det-flat-sum"  # a one-row strip that folds (K = 64); BN16: few programs


def _strip_table(model):
    """Every nn.Linear shape of ``model`` (the fused ones included) at M = 1 on STRIP."""
    from gemmtune.configs import Choice
    from gemmtune.problem import Problem
    from gemmtune.provenance import Provenance
    from gemmtune.table import LookupTable, TableChoice

    shapes = {tuple(m.weight.shape) for m in model.modules() if type(m) is torch.nn.Linear}
    return LookupTable(Provenance.current("by-hand").to_dict(),
                       {Problem.from_sizes(1, n, k, "fp32", layout_b="col").key: [TableChoice(Choice.parse(STRIP))]
                        for n, k in shapes})


# qwen2: q/k/v with biases (the fold's epilogue), and patched with pdl=True and compiled with
# Inductor's PDL on: the folded strips are then the twins' -pdl configs (rms_pdl_decomposition)
@pytest.mark.parametrize("arch, pdl", [("llama", False), ("qwen2", True)])
def test_a_compiled_decode_step_folds_each_groups_norm_and_keeps_eagers_logits(arch, pdl, monkeypatch):
    """GEMMTUNE_FOLD_NORMS=1: at M = 1 the merged q/k/v and gate/up GEMMs take the norm's input and
    compute the norm in the strip (skinny.run with norm_weight), no norm left in the graph before
    them; the residual sum before gate/up's norm is o_proj's epilogue (fuse_compile._take_residual:
    q/k/v's norm reads the embeddings, no sum); the logits as eager's. With Inductor's PDL on and
    twins attached, the folded strips run as -pdl configs, and without, as the plain ones."""
    from torch._inductor import config

    from gemmtune.kernels import skinny

    cls, cfg_cls = {"llama": (tf.LlamaForCausalLM, tf.LlamaConfig), "qwen2": (tf.Qwen2ForCausalLM, tf.Qwen2Config)}[arch]
    m = _tiny(cls, cfg_cls, rms_norm_eps=1e-5)
    ids = torch.randint(0, 128, (1, 1))  # one token, no cache: every GEMM at M = 1
    with torch.no_grad():
        want = m(ids).logits
        gemmtune.fuse_linears(m, ids)
        m.requires_grad_(False)  # (pdl=True: for inference)
        # (the twins serve -pdl twins of the hint winners: STRIP's, where pdl is on)
        gemmtune.patch(m, _strip_table(m), hints={"m": [1]}, pdl=pdl,
                       tune_fn=lambda ps, **kw: {p.key: STRIP if pdl else "aten" for p in ps})
    folds, pdls = [], set()
    run = skinny.run

    def counting(a, b, out, cfg, **kw):
        if kw.get("norm_weight") is not None:
            folds.append((a.shape[0], out.shape[1], a.shape[1]))
            pdls.add(cfg.pdl)
        return run(a, b, out, cfg, **kw)
    monkeypatch.setattr(skinny, "run", counting)
    monkeypatch.setenv("GEMMTUNE_FOLD_NORMS", "1")
    before = fuse_compile.STATS["folded"]
    residuals = fuse_compile.STATS["residuals"]
    torch._dynamo.reset()
    with config.patch({"fx_graph_cache": False, "triton.enable_pdl": pdl}), torch.no_grad():
        compiled = torch.compile(m, backend="inductor", dynamic=False)
        got = compiled(ids).logits
        once = fuse_compile.STATS["folded"] - before
        again = compiled(ids).logits
    torch._dynamo.reset()
    assert once == 2 and fuse_compile.STATS["folded"] - before == 2  # q/k/v and gate/up, one compile
    assert fuse_compile.STATS["residuals"] - residuals == 1
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(again, want, rtol=1e-4, atol=1e-4)
    # each group's first call checks the fold against fp64, then every call folds
    assert sorted(set(folds)) == [(1, 128, 64), (1, 256, 64)] and len(folds) >= 4
    assert pdls == {pdl}


def test_the_fold_setting_keys_inductors_caches_and_the_op_exists_with_gemmtune_mm(monkeypatch):
    """A graph compiled with the fold names gemmtune::rms_mm: the op is defined wherever
    gemmtune::mm is (torch_ops), and the pass's cache key differs between the two settings, so
    Inductor's on-disk caches never give one setting's graph to the other."""
    import subprocess
    import sys

    code = "import gemmtune.torch_ops, torch; print(torch.ops.gemmtune.rms_mm.default.name())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "gemmtune::rms_mm", out.stderr[-2000:]
    p = fuse_compile._pass_class()(None)
    monkeypatch.setenv("GEMMTUNE_FOLD_NORMS", "0")
    off = p.uuid()
    monkeypatch.setenv("GEMMTUNE_FOLD_NORMS", "1")
    assert p.uuid() != off
