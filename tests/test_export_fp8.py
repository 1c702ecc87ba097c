"""The Inductor export of scaled_mm (fp8) entries: the keys tuned_scaled_mm looks up, the template
configs each family maps to, what is skipped and why, and that mm/addmm/bmm exports are unchanged.

On the CPU, torch 2.13's Inductor lowers torch._scaled_mm through tuned_scaled_mm under
max-autotune (its only CPU choice is aten's _scaled_mm): the compile tests record every key it
builds (conftest.cpu_lookup_choices) and check it is one of ours, ask Inductor's own parser for our
configs of every template id, and run an exported aten entry. The Triton templates (triton::mm
with the scaling epilogue, the device-TMA template) are not offered on a CPU: their rendering is
checked on a GPU by scripts/check_inductor_fp8_lut.py.
"""

from __future__ import annotations

import re

import pytest
import torch

import gemmtune.inductor_export as ie
from gemmtune.configs import Choice
from gemmtune.kernels import persistent
from gemmtune.problem import Problem
from gemmtune.table import LookupTable, TableChoice, provenance

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
PROV = provenance("NVIDIA H200", "9.0", "x", "x", "x", "by-hand")  # a known GPU: 132 SMs
MATS = "(torch.float8_e4m3fn, [64, 128], [128, 1]), (torch.float8_e4m3fn, [128, 96], [1, 128])"


def _p(scale="tensor", bias=False, out="bf16", m=64, n=96, k=128, a="e4m3", **kw):
    return Problem.from_sizes(m, n, k, a, out, layout_b=kw.pop("layout_b", "col"), op="scaled_mm",
                              scale=scale, bias=bias, **kw)


def _table(entries: dict) -> LookupTable:
    return LookupTable(PROV, {p.key: [TableChoice(Choice.parse(c)) for c in cs] for p, cs in entries.items()})


# ------------------------------------------------------------------ keys
def test_tensor_wise_keys_are_the_three_scale_shapes():
    keys = ie.inductor_keys(_p())
    assert keys == [
        f"({MATS}, (torch.float32, [], []), (torch.float32, [], []))+scaled_mm",
        f"({MATS}, (torch.float32, [1], [1]), (torch.float32, [1], [1]))+scaled_mm",
        f"({MATS}, (torch.float32, [1, 1], [1, 1]), (torch.float32, [1, 1], [1, 1]))+scaled_mm",
    ]
    assert ie.inductor_key(_p()) == keys[0]
    # The bias (N,) of the output's dtype, as passed, after the scales.
    kb = ie.inductor_keys(_p(bias=True, out="fp32"))
    assert kb[0] == f"({MATS}, (torch.float32, [], []), (torch.float32, [], []), (torch.float32, [96], [1]))+scaled_mm"
    assert ie.inductor_key(_p(), "sm90").startswith("sm90+((torch.float8_e4m3fn, [64, 128]")


def test_row_wise_keys_take_either_stride_of_the_size_one_dim():
    keys = ie.inductor_keys(_p("row", bias=True))
    bias = "(torch.bfloat16, [96], [1])"
    assert keys == [
        f"({MATS}, (torch.float32, [64, 1], [1, 1]), (torch.float32, [1, 96], [96, 1]), {bias})+scaled_mm",
        f"({MATS}, (torch.float32, [64, 1], [1, 1]), (torch.float32, [1, 96], [1, 1]), {bias})+scaled_mm",
        f"({MATS}, (torch.float32, [64, 1], [1, 64]), (torch.float32, [1, 96], [96, 1]), {bias})+scaled_mm",
        f"({MATS}, (torch.float32, [64, 1], [1, 64]), (torch.float32, [1, 96], [1, 1]), {bias})+scaled_mm",
    ]
    # M = 1: the two strides of (1, 1) are one; e5m2 A names its own dtype.
    one = ie.inductor_keys(_p("row", m=1, a="e5m2"))
    assert len(one) == 2 and all(k.startswith("((torch.float8_e5m2, [1, 128], [128, 1])") for k in one)


def test_mm_addmm_bmm_keys_are_unchanged():
    mm = Problem.from_sizes(64, 96, 128, "bf16", layout_b="col")
    assert ie.inductor_keys(mm) == [ie.inductor_key(mm)] == [
        "((torch.bfloat16, [64, 128], [128, 1]), (torch.bfloat16, [128, 96], [1, 128]))+mm"]
    ad = Problem.from_sizes(64, 96, 128, "bf16", layout_b="col", op="addmm")
    assert ie.inductor_keys(ad, "sm90") == ["sm90+((torch.bfloat16, [64, 96], [0, 1]), (torch.bfloat16, [64, 128], "
                                            "[128, 1]), (torch.bfloat16, [128, 96], [1, 128]))+alpha=1&beta=1+addmm"]
    bm = Problem.from_sizes(64, 96, 128, "bf16", layout_b="col", op="bmm", batch=4)
    assert ie.inductor_keys(bm) == ["((torch.bfloat16, [4, 64, 128], [8192, 128, 1]), "
                                    "(torch.bfloat16, [4, 128, 96], [12288, 1, 128]))+bmm"]
    t = _table({mm: ["triton_mm:BM64-BN64-BK32-S3-W4-G8", "aten"], ad: ["triton_mm:BM64-BN64-BK32-S3-W4-G8"]})
    r = ie.convert(t)
    assert r.table[ie.inductor_key(mm)] == [
        {"template_id": "triton::mm", "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_stages": 3,
         "num_warps": 4, "EVEN_K": True, "USE_FAST_ACCUM": False, "ACC_TYPE": "tl.float32"},
        {"template_id": "aten::mm"}]
    assert len(r.table) == 2 and not r.skipped


# ------------------------------------------------------------------ configs and skips
def test_each_family_maps_to_tuned_scaled_mm_templates():
    p = _p("row")
    r = ie.convert(_table({p: ["triton_mm:BM64-BN128-BK128-S3-W4-G8", "persistent_tma:BM128-BN128-BK64-S3-W8-G4",
                               "aten"]}))
    keys = ie.inductor_keys(p)
    assert sorted(r.table) == sorted(keys) and len(keys) == 4
    tm, tma, at = r.table[keys[0]]
    assert tm == {"template_id": "triton::mm", "BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8,
                  "num_stages": 3, "num_warps": 4, "EVEN_K": True, "USE_FAST_ACCUM": False, "ACC_TYPE": "tl.float32"}
    assert tma == {"template_id": "triton::scaled_mm_device_tma_epilogue_scaling", "BLOCK_M": 128, "BLOCK_N": 128,
                   "BLOCK_K": 64, "GROUP_M": 4, "num_stages": 3, "num_warps": 8, "EVEN_K": True,
                   "USE_FAST_ACCUM": False, "ACC_TYPE": "tl.float32", "NUM_SMS": 132, "TMA_SIZE": 128,
                   "TMA_EXPERIMENTAL_API": False, "SCALE_RECIPE_A": 1, "SCALE_RECIPE_B": 1}
    assert at == {"template_id": "aten::_scaled_mm"}
    assert all(r.table[k] == r.table[keys[0]] for k in keys) and r.table[keys[0]] is not r.table[keys[1]]
    assert not r.skipped
    assert any("enable_persistent_tma_matmul" in n for n in r.notes)
    # Tensor-wise: recipe 0; so is row-wise with one-element scales (M = N = 1).
    q = _p("tensor")
    tq = ie.convert(_table({q: ["persistent_tma:BM128-BN128-BK64-S3-W8-G4"]})).table
    assert {c["SCALE_RECIPE_A"] for v in tq.values() for c in v} == {0}
    assert persistent.scale_recipe(_p("row", m=1, n=1)) == 0 and persistent.scale_recipe(_p("row", m=1)) == 1


def _inductor_or_skip():
    if ie.unavailable_reason() is not None:
        pytest.skip(ie.unavailable_reason())


@pytest.mark.parametrize("choice, template, source", [
    ("triton_mm:BM64-BN128-BK128-S3-W4-G8", "triton::mm", "triton_mm"),
    ("persistent_tma:BM128-BN128-BK64-S3-W8-G4", "triton::scaled_mm_device_tma_epilogue_scaling",
     "triton_epilogue_scaled_mm"),
])
def test_scaled_configs_carry_every_kwarg_the_template_reads(choice, template, source):
    """torch 2.11's lookup renders a template with the table's config alone (2.13 merges it over its
    heuristic's first config): ours must hold every option the template source reads (ALLOW_TF32
    and the epilogue come with Inductor's extra kwargs, INDEX_DTYPE from Inductor itself) and every
    one Inductor's scaled heuristic converts a config into."""
    _inductor_or_skip()
    import sympy
    from pathlib import Path

    import torch._inductor as ti
    from torch._inductor.graph import GraphLowering
    from torch._inductor.runtime.triton_compat import Config
    from torch._inductor.template_heuristics.registry import get_template_heuristic
    from torch._inductor.virtualized import V

    (cfg,) = ie.convert(_table({_p("row"): [choice]})).table[ie.inductor_keys(_p("row"))[0]]
    assert cfg["template_id"] == template
    src = (Path(ti.__file__).parent / "kernel" / "templates" / f"{source}.py.jinja").read_text()
    reads = set(re.findall(r"\b[A-Z][A-Z_0-9]{2,}\b", src)) - {"INDEX_DTYPE", "SCALE_RECIPE", "ALLOW_TF32"}
    assert reads and reads <= set(cfg), reads - set(cfg)
    with V.set_graph_handler(GraphLowering(torch.fx.symbolic_trace(lambda x: x + 1))):
        h = get_template_heuristic(template, "cuda", "scaled_mm")
        kw = h._convert_config_to_template_kwargs(Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}, num_stages=3,
                                                         num_warps=4), sympy.Integer(64), sympy.Integer(96),
                                                  sympy.Integer(128), torch.bfloat16)
    assert set(kw) <= set(cfg), set(kw) - set(cfg)


@pytest.mark.parametrize("problem, choice, why", [
    (_p(bias=True), "persistent_tma:BM128-BN128-BK64-S3-W8-G4", "only without a bias"),
    (_p(), "persistent_tma:BM128-BN128-BK32-S3-W2-G4", "num_warps != 2"),
    (_p(k=16, n=96), "triton_mm:BM32-BN32-BK32-S2-W4-G4", "K = 16 <= 16"),
    (_p(), "triton_mm:BM64-BN64-BK16-S3-W4-G8", "BLOCK_K >= 32"),
    (_p(), "pad+triton_mm:BM64-BN64-BK64-S3-W4-G8", "pad_mm.py\\) does not pad _scaled_mm"),
    (_p(), "pad+aten", "no pad variant"),
    (_p(), "decompose_k:s4", "tuned_scaled_mm offers no decompose_k"),
    (_p(), "splitk:BM64-BN64-BK64-S3-W4-G8-SK4-det", "no fused split-K"),
    (_p(m=8), "skinny:BM16-BN64-BK256-SK4-S4-W4-dot-det", "no Inductor template"),
])
def test_choices_inductor_cannot_take_are_skipped_with_the_reason(problem, choice, why):
    r = ie.convert(_table({problem: [choice, "aten"]}))
    assert [s.choice for s in r.skipped] == [choice]
    assert re.search(why, r.skipped[0].reason), r.skipped[0].reason
    assert r.table and all(v == [{"template_id": "aten::_scaled_mm"}] for v in r.table.values())


def test_problems_inductor_cannot_key_are_skipped():
    col_a = _p("row", layout_a="col")
    row_b = _p("row", layout_b="row")
    nogpu = LookupTable(provenance("some GPU", "9.0", "x", "x", "x", "by-hand"),
                        {_p().key: [TableChoice(Choice.parse("persistent_tma:BM128-BN128-BK64-S3-W8-G4"))]})
    r = ie.convert(_table({col_a: ["aten"], row_b: ["aten"]}))
    assert r.table == {}
    assert sorted(s.key for s in r.skipped) == sorted([col_a.key, row_b.key])
    assert all("row-major and B column-major only" in s.reason for s in r.skipped)
    rn = ie.convert(nogpu)
    assert rn.table == {} and any("SM count" in s.reason for s in rn.skipped)


def test_bf16_and_fp32_outputs_without_a_bias_share_one_key():
    bf, f32 = _p("row"), _p("row", out="fp32")
    r = ie.convert(_table({bf: ["triton_mm:BM64-BN64-BK64-S3-W4-G8"], f32: ["aten"]}))
    assert set(r.table) == set(ie.inductor_keys(bf)) == set(ie.inductor_keys(f32))
    assert all(v[0]["template_id"] == "triton::mm" for v in r.table.values())
    (s,) = r.skipped
    assert s.key == f32.key and s.choice is None and bf.key in s.reason and "out_dtype" in s.reason
    # With a bias its dtype is in the key: both are exported (tensor-wise: aten's validate refuses
    # row-wise scaling to fp32, which torch._scaled_mm does not write, and the export now checks it).
    # (A tile: aten::_scaled_mm is no choice for a bias and an fp32 output, CUDA's refuses it.)
    tile = "triton_mm:BM64-BN64-BK64-S3-W4-G8"
    rb = ie.convert(_table({_p("tensor", bias=True): [tile], _p("tensor", bias=True, out="fp32"): [tile]}))
    assert len(rb.table) == 6 and not rb.skipped
    # Row-wise M = N = 1 scales are (1, 1), as tensor-wise (1, 1) ones: that key goes to the first
    # problem in key order (row), the tensor-wise problem keeps its () and (1,) keys.
    row1, ten1 = _p("row", m=1, n=1), _p("tensor", m=1, n=1)
    # (Two tiles: aten is no choice for N = 1, torch._scaled_mm needs N a multiple of 16, and the
    # export now checks each choice against its problem as load does.)
    r1 = ie.convert(_table({row1: ["triton_mm:BM32-BN32-BK64-S2-W4-G1"], ten1: ["triton_mm:BM16-BN16-BK64-S2-W4-G1"]}))
    assert set(r1.table) == set(ie.inductor_keys(row1)) | set(ie.inductor_keys(ten1)) and not r1.skipped
    assert len(ie.inductor_keys(row1)) == 1 and ie.inductor_keys(row1)[0] == ie.inductor_keys(ten1)[2]
    assert r1.table[ie.inductor_keys(ten1)[2]][0]["BLOCK_M"] == 32
    assert r1.table[ie.inductor_keys(ten1)[0]][0]["BLOCK_M"] == 16
    assert any(row1.key in n for n in r1.notes)


def test_export_writes_every_key(tmp_path):
    p = _p("tensor", bias=True)
    r = ie.export(_table({p: ["triton_mm:BM64-BN64-BK64-S3-W4-G8"]}), tmp_path / "i.json", force=True)
    assert set(ie.read_inductor_table(tmp_path / "i.json")) == set(ie.inductor_keys(p)) == set(r.table)


# ------------------------------------------------------------------ what Inductor itself asks for (CPU)
def _scales(variant, m, n):
    if variant == "row_t":  # scale_b as the transpose of a weight's (N, 1) amax: strides (1, 1)
        return torch.rand(m, 1) + 0.5, (torch.rand(n, 1) + 0.5).t()
    if variant == "row":
        return torch.rand(m, 1) + 0.5, torch.rand(1, n) + 0.5
    shape = {"t0": (), "t1": (1,), "t11": (1, 1)}[variant]
    return torch.rand(shape) + 0.5, torch.rand(shape) + 0.5


# (scale variant, bias, out dtype, which of inductor_keys(problem) Inductor must build)
@pytest.mark.parametrize("variant, with_bias, out_dtype, nth", [
    ("t0", False, torch.bfloat16, 0),
    ("row_t", True, torch.bfloat16, 1),
    pytest.param("t1", True, torch.bfloat16, 1, marks=pytest.mark.slow),
    pytest.param("t11", False, torch.float32, 2, marks=pytest.mark.slow),
    pytest.param("row", False, torch.bfloat16, 0, marks=pytest.mark.slow),
    pytest.param("row", True, torch.bfloat16, 0, marks=pytest.mark.slow),
])
def test_inductor_asks_for_our_scaled_mm_key_on_cpu(tmp_path, variant, with_bias, out_dtype, nth):
    """torch.compile(max-autotune) of torch._scaled_mm on the CPU: tuned_scaled_mm builds exactly
    our key for those scales, Inductor's parser returns our config for every template id we write,
    and the exported aten entry runs (its call has no out_dtype kwarg, which a lookup miss would
    pass) and matches eager."""
    from conftest import cpu_lookup_choices
    from torch._inductor.utils import run_and_get_code

    _inductor_or_skip()
    from torch._inductor import config as icfg

    m, n, k = 64, 96, 128
    a = torch.randn(m, k).to(E4M3)
    b = torch.randn(n, k).to(E4M3).t()
    sa, sb = _scales(variant, m, n)
    bias = torch.randn(n, dtype=out_dtype) if with_bias else None
    from gemmtune.kernels.aten import cpu_rowwise_scaled_mm
    if variant.startswith("row") and not cpu_rowwise_scaled_mm():
        # torch 2.11's CPU _scaled_mm stops at an internal assert on row-wise scales (per-tensor
        # only); 2.13's takes them, and there all six cases run.
        pytest.skip(f"torch {torch.__version__}'s CPU _scaled_mm has per-tensor scales only (2.13 adds row-wise)")
    try:
        ref = torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=out_dtype)
    except Exception as e:  # noqa: BLE001 - this CPU build's _scaled_mm: nothing to compile
        pytest.skip(f"torch {torch.__version__}'s _scaled_mm on this CPU: {type(e).__name__}: {e}"[:200])
    p = _p("row" if variant.startswith("row") else "tensor", bias=with_bias,
           out="bf16" if out_dtype == torch.bfloat16 else "fp32")
    t = _table({p: ["triton_mm:BM64-BN64-BK64-S3-W4-G8", "aten"]})
    exported = ie.export(t.save(tmp_path / "t.json"), tmp_path / "inductor.json")
    seen = {"keys": [], "lookups": []}
    lookup = cpu_lookup_choices(seen, [ie.TRITON_MM, ie.ATEN_SCALED_MM, ie.SCALED_TMA])
    old = icfg.force_disable_caches, icfg.max_autotune
    try:
        ie.install(tmp_path / "inductor.json", choices=lookup)
        icfg.force_disable_caches, icfg.max_autotune = True, True
        torch._dynamo.reset()
        y, code = run_and_get_code(torch.compile(
            lambda a, b, sa, sb, bias: torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=out_dtype)),
            a, b, sa, sb, bias)
    finally:
        ie.uninstall()
        icfg.force_disable_caches, icfg.max_autotune = old
        torch._dynamo.reset()
    asked = {k for k in seen["keys"] if not k.startswith("cpu-test+")}
    assert len(asked) == 1, asked
    (key,) = asked
    assert key == ie.inductor_keys(p)[nth] and key in exported.table
    want = {i: [{k: v for k, v in c.items() if k != "template_id"}] for c in exported.table[key]
            for i in [c["template_id"]]}
    assert want in seen["lookups"]
    calls = [ln.strip() for ln in "".join(code).splitlines() if "extern_kernels._scaled_mm(" in ln]
    assert len(calls) == 1 and "out_dtype" not in calls[0] and "out=" in calls[0], calls
    assert y.dtype == out_dtype
    torch.testing.assert_close(y, ref)
