"""triton_static's K-loop forms (configs.StaticConfig.form: carried, indexed, indexed_wrap).

Each form against fp64 on fresh random operands (interpreter fp16/fp32, or a GPU): M = 1, primes,
ragged K, an odd N both wider and narrower than the block along a row-major B (where
indexed_wrap wraps rather than masks), transposed and offset operands, a fused epilogue. Then the
id, the tables' params and Inductor's export; the planner timing the first tile pick's other
forms, and counting them in its compile bound; the training data leaving them out."""

from __future__ import annotations

import pytest
import torch

import gemmtune
from gemmtune import kernels
from gemmtune.configs import STATIC_FORMS, Choice, StaticConfig, TileConfig
from gemmtune.device import DeviceInfo
from gemmtune.kernels.launch_args import edge_masks
from gemmtune.kernels.triton_static_spec import forms
from gemmtune.problem import Problem
from gemmtune.verify import compare

H100 = DeviceInfo.lookup("h100")
TOL = {torch.float16: 1e-3, torch.float32: 1e-5}
TILE = TileConfig(16, 32, 16, 2, 4, 8)


@pytest.mark.parametrize("form", STATIC_FORMS)
@pytest.mark.parametrize("shape", [(1, 67, 40), (17, 67, 257), (45, 19, 33), (3, 97, 16), (31, 64, 129)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("layouts", [("row", "row"), ("offset", "offset"), ("col", "row"), ("row", "col")],
                         ids=lambda t: "-".join(t))
def test_each_form_matches_fp64(form, shape, layouts, operand):
    m, n, k = shape
    for dtype in (torch.float16, torch.float32):
        a, b = operand(m, k, layouts[0], dtype), operand(k, n, layouts[1], dtype)
        out = torch.full((m, n), float("nan"), dtype=dtype, device=a.device)
        kernels.get("triton_static").run(a, b, out, StaticConfig(*TILE.params().values(), form=form))
        res = compare(out, a.double() @ b.double(), TOL[dtype])
        assert res.ok, (form, dtype, res.reason)


@pytest.mark.parametrize("form", ["indexed", "indexed_wrap"])
def test_a_form_with_bias_relu_and_residual_matches_fp64(form, operand):
    a, b = operand(23, 41, "offset", torch.float16), operand(41, 67, "row", torch.float16)
    bias = torch.randn(67, dtype=torch.float16, device=a.device)
    res = torch.randn(23, 67, dtype=torch.float16, device=a.device)
    cid = f"triton_static:{TILE.id}{'-IX' if form == 'indexed' else '-IXW'}"
    out = gemmtune.matmul(a, b, choice=cid, bias=bias, activation="relu", residual=res)
    want = torch.relu(a.double() @ b.double() + bias.double()) + res.double()
    assert compare(out, want, TOL[torch.float16]).ok


def test_indexed_wrap_wraps_only_an_odd_n_of_at_least_one_block():
    # row-major B (n_contiguous): 'auto' masks an odd N; auto_wrap_odd wraps it where N >= BLOCK_N
    assert edge_masks(300, 20001, 128, 128, "auto", n_contiguous=True) == (False, True)
    assert edge_masks(300, 20001, 128, 128, "auto_wrap_odd", n_contiguous=True) == (False, False)
    assert edge_masks(300, 97, 128, 128, "auto_wrap_odd", n_contiguous=True) == (False, True)
    assert edge_masks(300, 20000, 128, 128, "auto_wrap_odd", n_contiguous=True) == (False, False)
    with pytest.raises(ValueError, match="auto_wrap_odd"):
        edge_masks(1, 1, 16, 16, "wrapped")


def test_forms_lists_only_those_that_compile_differently():
    t = TileConfig(64, 128, 64, 4, 4)
    odd_row = Problem.from_sizes(333, 4097, 1025, "bf16")
    assert [c.form for c in forms(odd_row, t)] == list(STATIC_FORMS)
    assert [c.form for c in forms(odd_row.with_sizes(n=4096), t)] == ["carried", "indexed"]
    assert [c.form for c in forms(odd_row.with_sizes(n=97), t)] == ["carried", "indexed"]  # N < BLOCK_N
    col = Problem.from_sizes(333, 4097, 1025, "bf16", layout_b="col")
    assert [c.form for c in forms(col, t)] == ["carried", "indexed"]
    assert {c.tile for c in forms(odd_row, StaticConfig(64, 128, 64, 4, 4, 8, "indexed"))} == {t}


def test_ids_params_and_export():
    for form, suffix in zip(STATIC_FORMS, ("", "-IX", "-IXW")):
        c = Choice("triton_static", StaticConfig(64, 128, 64, 4, 4, 8, form))
        assert c.id == f"triton_static:BM64-BN128-BK64-S4-W4-G8{suffix}"
        assert Choice.parse(c.id) == c
        assert Choice.from_params("triton_static", c.config.params()) == c
    # a table written before forms existed (six tile fields) reads as the carried form
    old = Choice.from_params("triton_static", TileConfig(64, 128, 64, 4, 4, 8).params())
    assert old.config.form == "carried" and "form" not in old.config.params()
    assert Choice("triton_static", TileConfig(64, 128, 64, 4, 4, 8)) == old
    with pytest.raises(ValueError, match="form 'unrolled'"):
        StaticConfig(64, 128, 64, 4, 4, 8, "unrolled")
    with pytest.raises(ValueError, match=r"\[-IX\|-IXW\]"):
        Choice.parse("triton_static:BM64-BN128-BK64-S4-W4-G8-IY")
    with pytest.raises(ValueError, match="forms are triton_static's"):
        Choice.parse("triton_mm:BM64-BN128-BK64-S4-W4-G8-IX")
    with pytest.raises(TypeError, match="triton_mm takes a TileConfig"):
        Choice("triton_mm", StaticConfig(64, 128, 64, 4, 4, 8))
    # Inductor's template has one form: every form exports as the tile's triton::mm entry
    p = Problem.from_sizes(333, 4097, 1025, "bf16", aligned_b=False)
    ixw = Choice.parse("triton_static:BM64-BN128-BK64-S4-W4-G8-IXW")
    mm = Choice("triton_mm", TileConfig(64, 128, 64, 4, 4, 8))
    assert kernels.get("triton_static").inductor_export(ixw, p) == kernels.get("triton_mm").inductor_export(mm, p)


class ByIndex:
    def predict(self, problem, choices):
        return list(range(len(choices)))


@pytest.mark.parametrize("bspace", [1, 3, "FAST"])
def test_the_planner_times_the_first_tile_picks_other_forms_within_its_compile_bound(bspace):
    from gemmtune.tuning.plan import CandidatePlan

    plan = CandidatePlan(("triton_mm", "triton_static"), "default", H100, bspace=bspace, ranker=ByIndex())
    odd = Problem.from_sizes(333, 4097, 1025, "bf16")  # unaligned B rows, odd N along them
    got = plan(odd).choices
    tiles = [c for c in got if c.family in ("triton_mm", "triton_static") and not c.pad]
    first = tiles[0]
    others = [c for c in got if c.family == "triton_static" and c.config.form != "carried"]
    want = [f.form for f in forms(odd, first.config) if f.form != "carried"]
    assert [c.config.form for c in others] == want and {c.config.tile for c in others} == \
        {first.config if isinstance(first.config, TileConfig) else first.config.tile}
    assert len({c.id for c in got}) == len(got)
    assert sum(c.needs_compile for c in got) <= plan.compiles_at_most(odd)
    # an aligned problem has no triton_static candidate, so no forms
    aligned = Problem.from_sizes(256, 4096, 1024, "bf16")
    assert not any(c.family == "triton_static" for c in plan(aligned).choices)
    # without triton_static among the families, a triton_mm pick brings no forms either
    mm_only = CandidatePlan(("triton_mm",), "default", H100, bspace=bspace, ranker=ByIndex())
    assert not any(c.family == "triton_static" for c in mm_only(odd).choices)


def test_training_data_leaves_the_other_forms_out(tmp_path):
    from gemmtune.model.data import load_dataset
    from gemmtune.store import ResultRow, ResultStore, RunContext

    ctx = RunContext("NVIDIA H200", "9.0", "2.11.0", "3.6.0", "0.1.0")
    key = "mm:M333-N4097-K1025:bf16->bf16:row.a/row.u"
    ids = ["aten", "triton_mm:BM64-BN128-BK64-S4-W4-G8", "triton_static:BM64-BN128-BK64-S4-W4-G8",
           "triton_static:BM64-BN128-BK64-S4-W4-G8-IX", "triton_static:BM64-BN128-BK64-S4-W4-G8-IXW"]
    with ResultStore(tmp_path / "s.sqlite") as st:
        for i, cid in enumerate(ids):
            st.record(ctx, ResultRow(problem_key=key, choice_id=cid, family=cid.partition(":")[0], status="ok",
                                     device_ms=0.05 + 0.01 * i, eager_ms=0.1, rel_err=0.0, m=333, n=4097, k=1025,
                                     dtype="bfloat16", out_dtype="bfloat16", layout="row/row", aligned=False))
    data = load_dataset(tmp_path / "s.sqlite")
    from gemmtune.model.data import _other_static_form
    assert _other_static_form("pad+triton_static:BM64-BN128-BK64-S4-W4-G8-IX")
    assert [c.id for c in data.groups[0].choices] == sorted(ids[:3])
    assert any("2 rows of triton_static's indexed forms" in n for n in data.notes)


GPU_ROWS = [  # (M, N, K, dtype, tile): odd shapes and the tiles session 45 timed them with
    (333, 4097, 1025, torch.bfloat16, "BM64-BN128-BK64-S4-W4-G8"),
    (300, 20001, 512, torch.float16, "BM128-BN128-BK64-S3-W4-G8"),
    (96, 50257, 768, torch.bfloat16, "BM64-BN128-BK64-S4-W4-G8"),
    (1, 50257, 768, torch.bfloat16, "BM16-BN128-BK64-S4-W4-G8"),
    (1021, 2053, 509, torch.bfloat16, "BM128-BN64-BK32-S4-W8-G8"),
]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("row", GPU_ROWS, ids=lambda r: f"{r[0]}x{r[1]}x{r[2]}")
def test_forms_on_gpu_through_matmul_and_a_dispatchers_prepared_launch(row):
    """Each form in bf16/fp16 at real odd sizes, row-major B (the wrap applies) and an offset
    A, on fresh operands each call; then behind a dispatcher, whose second call at a shape takes
    the prepared launch (kernels.tiled.prepare_direct) with the form's constexprs frozen in."""
    from gemmtune.dispatch import compile_mm
    from gemmtune.verify import check

    from conftest import make_operand

    m, n, k, dtype, tile = row
    for suffix in ("", "-IX", "-IXW"):
        choice = Choice.parse(f"triton_static:{tile}{suffix}")
        d = compile_mm(n=n, k=k, dtype=dtype, hints={"m": [m]}, tune_fn=lambda ps, **kw: {p.key: choice for p in ps})
        for layout in ("row", "offset"):
            for _ in range(3):
                a, b = make_operand(m, k, layout, dtype, "cuda"), make_operand(k, n, "row", dtype, "cuda")
                res = check(gemmtune.matmul(a, b, choice=choice), a, b, Problem.from_tensors(a, b))
                assert res.ok, (choice.id, layout, res.reason)
                res = check(d(a, b), a, b, Problem.from_tensors(a, b))
                assert res.ok, (choice.id, layout, "dispatcher", res.reason)
        assert d.decision(m=m).choice == choice


@pytest.mark.parametrize("n, layout_b, edge, indexed, want", [
    (67, "row", "auto_wrap_odd", True, True),     # indexed_wrap on an odd N: B's rows 2-byte aligned
    (67, "offset", "auto_wrap_odd", True, True),  # an offset view: its data pointer not 16-byte aligned
    (67, "row", "auto", True, False),             # the odd N masked (the indexed form)
    (67, "row", "auto_wrap_odd", False, False),   # the carried loop
    (64, "row", "auto_wrap_odd", True, False),    # an even N: its rows take cp.async
    (67, "col", "auto_wrap_odd", True, False),    # a K-major B
])
def test_b_is_prefetched_only_where_its_loads_cannot_be_async(n, layout_b, edge, indexed, want, operand):
    """PREFETCH_B (tiled.py: B's next K tile held in registers) is on exactly where the indexed loop
    wraps an odd N along a row-major B, whose scalar loads Triton cannot pipeline; test_each_form_matches_fp64
    runs that path (indexed_wrap, N = 67 and 97) against fp64."""
    from gemmtune.kernels.tiled import _tiled_args, tile_kwargs

    a, b = operand(17, 40, "row", torch.float16), operand(40, n, layout_b, torch.float16)
    c = torch.empty(17, n, dtype=torch.float16, device=a.device)
    kw = {**tile_kwargs(TILE, False), "k_per_split": 40}
    kw.pop("num_stages"), kw.pop("num_warps")
    _, _, consts = _tiled_args(a, b, c, **kw, edge=edge, indexed_k=indexed)
    assert consts["PREFETCH_B"] is want
