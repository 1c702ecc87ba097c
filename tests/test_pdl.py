"""pdl=True: the tuner's GEMV strip winners served by their -pdl twins (gemmtune.pdl), on the CPU
interpreter (which runs a -pdl strip without PDL: the same arithmetic, the peeled first K step).
The GPU side (PDL launch, graph chains, compute-sanitizer) is in test_skinny.py's gpu tests."""
from __future__ import annotations

import warnings

import pytest
import torch

import gemmtune
from gemmtune.configs import Choice
from gemmtune.pdl import pdl_twin, twin_result, with_pdl
from gemmtune.problem import Problem
from gemmtune.store.rows import RunContext
from gemmtune.table.types import LookupTable, TableChoice
from gemmtune.tuning.results import ShapeResult, TuneResult
from gemmtune.verify import compare

STRIP = "skinny:BM1-BN2-BK128-SK1-S1-W4-core-det"
TWIN = STRIP + "-pdl"


@pytest.mark.parametrize("cid, layout_b, want", [
    (STRIP, "col", TWIN),
    (TWIN, "col", TWIN),                                         # already a twin
    (STRIP, "row", STRIP),                                       # waits before its first load: no gain
    ("skinny:BM1-BN2-BK128-SK2-S1-W4-core-det", "col", "skinny:BM1-BN2-BK128-SK2-S1-W4-core-det"),  # a split
    ("skinny:BM16-BN64-BK64-SK1-S3-W4-dot-det", "col", "skinny:BM16-BN64-BK64-SK1-S3-W4-dot-det"),   # tl.dot
    ("pad+" + STRIP, "col", "pad+" + STRIP),                      # validate refuses pad+ with -pdl
    ("aten", "col", "aten"),
    ("triton_mm:BM64-BN64-BK32-S3-W4-G8", "col", "triton_mm:BM64-BN64-BK32-S3-W4-G8"),
])
def test_pdl_twin_only_for_one_slice_core_strips_on_a_k_contiguous_weight(cid, layout_b, want):
    assert pdl_twin(cid, layout_b).id == want
    assert pdl_twin(Choice.parse(cid), layout_b) == Choice.parse(want)


def _result(cap: str) -> TuneResult:
    gemv = Problem.from_sizes(1, 96, 256, "fp32", layout_b="col")
    wide = Problem.from_sizes(64, 96, 256, "fp32", layout_b="col")
    shapes = [ShapeResult("gemv", "g", gemv, STRIP, 0.01, 0.02, 3, 0),
              ShapeResult("wide", "g", wide, "aten", 0.02, 0.02, 3, 0),
              ShapeResult("none", "g", wide, None, None, None, 3, 3)]
    table = LookupTable({"produced_by": "tuned"}, {
        gemv.key: [TableChoice(Choice.parse(STRIP), 0.01), TableChoice(Choice.parse("aten"), 0.02)],
        wide.key: [TableChoice(Choice.parse("aten"), 0.02)],
        "other": [TableChoice(Choice.parse(STRIP), 0.01)]})  # not this run's: left as it is
    return TuneResult(shapes, RunContext("NVIDIA H200", cap, "2.11", "3.6", "0.1"), False, 0.0, 3, 0, table=table)


def test_twin_result_replaces_winners_and_the_tables_entries_of_this_runs_shapes():
    r = _result("9.0")
    t = twin_result(r, [s.problem for s in r.shapes])
    assert [s.best for s in t.shapes] == [TWIN, "aten", None]
    assert [s.best for s in r.shapes] == [STRIP, "aten", None]  # the tuner's own result is not changed
    gemv = r.shapes[0].problem.key
    assert [tc.choice.id for tc in t.table.entries[gemv]] == [TWIN, "aten"]
    assert t.table.entries[gemv][0].device_ms == 0.01
    assert t.table.entries["other"][0].choice.id == STRIP
    assert r.table.entries[gemv][0].choice.id == STRIP


def test_twin_result_on_a_gpu_before_hopper_warns_and_serves_the_plain_strips():
    r = _result("8.0")
    with pytest.warns(RuntimeWarning, match=r"pdl=True needs compute capability 9.0.*this GPU is 8.0"):
        t = twin_result(r, [s.problem for s in r.shapes])
    assert t is r


def test_twin_result_of_a_mapping_keyed_by_problem_or_key():
    ps = [Problem.from_sizes(1, 96, 256, "fp32", layout_b="col"), Problem.from_sizes(1, 96, 256, "fp32", layout_b="row")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # off a GPU: no capability to refuse
        got = twin_result({ps[0]: STRIP, ps[1].key: STRIP}, ps)
    assert got == {ps[0]: TWIN, ps[1].key: STRIP}


def _decoder(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(131, 96), torch.nn.GELU(),
                               torch.nn.Linear(96, 37, bias=False)).requires_grad_(False)  # inference


def _strips_at_m1(calls):
    def tune(problems, **kw):
        calls.append(sorted(p.key for p in problems))
        return {p.key: STRIP if p.m == 1 else "aten" for p in problems}
    return tune


def test_tune_model_pdl_serves_twins_that_match_fp64():
    model = _decoder()
    calls = []
    x1, x8 = torch.randn(1, 131), torch.randn(8, 131)
    ds = gemmtune.tune_model(model, [(x1,), (x8,)], tune_fn=_strips_at_m1(calls), pdl=True)
    assert len(calls) == 1  # still one tuning call
    served = {h.choice.id for d in ds.values() for h in d.hint_choices}
    assert served == {TWIN, "aten"}
    want = model.double()(x1.double()).float()
    model.float()
    gemmtune.patch(model, dispatchers=ds, tune_missing=False, progress=False, eager_policy="tuned")
    got = model(x1)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_patch_pdl_wraps_the_tuner_of_both_paths():
    for example in (True, False):
        model, calls = _decoder(1), []
        ref = _decoder(1)
        x = torch.randn(1, 131)
        kw = {"example_inputs": [(x,)]} if example else {"hints": {"m": [1, 8]}}
        gemmtune.patch(model, tune_fn=_strips_at_m1(calls), pdl=True, progress=False, eager_policy="tuned", **kw)
        assert calls
        served = {h.choice.id for d in gemmtune.nn.dispatchers(model).values() for h in d.hint_choices}
        assert TWIN in served and STRIP not in served
        torch.testing.assert_close(model(x), ref(x), rtol=1e-4, atol=1e-4)


def test_patch_pdl_warns_where_weights_require_grad():
    """-pdl strips read a weight tile before the kernel ahead of them ends: for inference only."""
    model = torch.nn.Sequential(torch.nn.Linear(131, 96))
    with pytest.warns(RuntimeWarning, match=r"patch\(pdl=True\): 2 parameter\(s\) of this model require grad"):
        gemmtune.patch(model, tune_fn=_strips_at_m1([]), pdl=True, progress=False, hints={"m": [1]})
    with pytest.warns(RuntimeWarning, match=r"tune_model\(pdl=True\): 2 parameter"):
        gemmtune.tune_model(torch.nn.Sequential(torch.nn.Linear(131, 96)), [(torch.randn(1, 131),)],
                            tune_fn=_strips_at_m1([]), pdl=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gemmtune.patch(_decoder(), tune_fn=_strips_at_m1([]), pdl=True, progress=False, hints={"m": [1]})


def test_twin_dispatcher_is_a_new_dispatcher_of_twins_that_matches_fp64():
    from gemmtune.pdl import twin_dispatcher

    d = gemmtune.compile_mm(n=96, k=131, dtype="fp32", layout_b="col", hints={"m": [1, 8]},
                            tune_fn=_strips_at_m1([]))
    t = twin_dispatcher(d)
    assert t is not d
    assert [h.choice.id for h in t.hint_choices] == [TWIN, "aten"]
    assert [h.choice.id for h in d.hint_choices] == [STRIP, "aten"]  # untouched
    a, b = torch.randn(1, 131), torch.randn(96, 131).t()
    torch.testing.assert_close(t(a, b), (a.double() @ b.double()).float(), rtol=1e-4, atol=1e-4)
    cublas = gemmtune.compile_mm(n=96, k=131, dtype="fp32", layout_b="col", hints={"m": [1]},
                                 tune_fn=lambda ps, **kw: {p.key: "aten" for p in ps})
    assert twin_dispatcher(cublas) is cublas  # nothing to twin


def test_load_patched_pdl_serves_the_saved_strips_as_twins(tmp_path):
    """Tune once and save without PDL; choose it where the model is served."""
    model, x = _decoder(), torch.randn(1, 131)
    gemmtune.patch(model, example_inputs=[(x,)], tune_fn=_strips_at_m1([]), progress=False)
    path = gemmtune.save_patched(tmp_path / "m.json", model)

    def served(m):
        return {h.choice.id for d in gemmtune.nn.dispatchers(m).values() for h in d.hint_choices}

    assert served(model) == {STRIP}
    plain, twins = gemmtune.load_patched(_decoder(), path), gemmtune.load_patched(_decoder(), path, pdl=True)
    assert served(plain) == {STRIP} and served(twins) == {TWIN}
    torch.testing.assert_close(twins(x), model(x), rtol=1e-5, atol=1e-5)


def test_patch_pdl_twins_given_dispatchers_and_leaves_them_as_they_were():
    model, calls = _decoder(), []
    ds = gemmtune.tune_model(_decoder(), [(torch.randn(1, 131),)], tune_fn=_strips_at_m1(calls))
    given = {key[:3]: d for key, d in ds.items()}
    mine = dict(given)
    gemmtune.patch(model, dispatchers=mine, pdl=True, progress=False, eager_policy="tuned")
    assert len(calls) == 1  # nothing tuned again
    assert mine == given and {h.choice.id for d in mine.values() for h in d.hint_choices} == {STRIP}
    assert {h.choice.id for d in gemmtune.nn.dispatchers(model).values() for h in d.hint_choices} == {TWIN}
    x = torch.randn(1, 131)
    torch.testing.assert_close(model(x), _decoder()(x), rtol=1e-4, atol=1e-4)


def test_patch_pdl_twins_a_given_tables_own_entries():
    """In table mode a shape no hint covers is served from the table's own entry: a GEMV strip
    there is twinned as well; the caller's table is left as it was."""
    from gemmtune.dispatch.common import _current_provenance

    p3 = Problem.from_sizes(3, 96, 131, "fp32", layout_b="col")
    table = LookupTable(_current_provenance("by-hand"), {p3.key: [TableChoice(Choice.parse(STRIP))]})
    model = _decoder()
    gemmtune.patch(model, table, tune_fn=_strips_at_m1([]), pdl=True, progress=False, hints={"m": [1]},
                   eager_policy="tuned")
    d = next(d for (n, k, _), d in gemmtune.nn.dispatchers(model).items() if (n, k) == (96, 131))
    assert d.expected_choice(m=3).id == TWIN and d.expected_choice(m=1).id == TWIN
    assert table.entries[p3.key][0].choice.id == STRIP
    x = torch.randn(3, 131)
    torch.testing.assert_close(model(x), _decoder()(x), rtol=1e-4, atol=1e-4)


def test_gemmtune_pdl_is_the_module():
    assert gemmtune.pdl.with_pdl is with_pdl and "pdl" in dir(gemmtune)


def test_with_pdl_passes_the_tuners_keywords_through():
    seen = {}

    def tune(problems, **kw):
        seen.update(kw)
        return {p.key: STRIP for p in problems}

    p = Problem.from_sizes(1, 96, 256, "fp32", layout_b="col")
    assert with_pdl(tune)(iter([p]), fast=True, progress=False) == {p.key: TWIN}
    assert seen == {"fast": True, "progress": False}


ON_HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9


@pytest.mark.gpu
@pytest.mark.skipif(not ON_HOPPER, reason="PDL needs a Hopper or later GPU")
def test_gpu_patch_pdl_saved_loaded_and_compiled_with_inductors_pdl_in_a_graph(tmp_path):
    """The product path on a GPU: patch(pdl=True) serves -pdl strips; save_patched/load_patched
    keep them; a compiled step (Inductor's PDL on, so its kernels launch ours early and ours
    theirs) captured in a CUDA graph and replayed with new inputs matches fp64."""
    from torch._inductor import config as iconfig

    strip = "skinny:BM1-BN4-BK1024-SK1-S1-W4-core-det"

    def tune(problems, **kw):
        return {p.key: strip if p.m == 1 else "aten" for p in problems}

    def build():
        torch.manual_seed(3)
        return torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.SiLU(), torch.nn.Linear(4096, 1000),
                                   torch.nn.LayerNorm(1000), torch.nn.Linear(1000, 2053)
                                   ).cuda().to(torch.bfloat16).requires_grad_(False)

    model, ref = build(), build().double()
    x = torch.randn(1, 2048, device="cuda", dtype=torch.bfloat16)
    gemmtune.patch(model, example_inputs=[(x,)], tune_fn=tune, pdl=True, progress=False)
    served = {h.choice.id for d in gemmtune.nn.dispatchers(model).values() for h in d.hint_choices}
    assert served == {strip + "-pdl"}
    path = gemmtune.save_patched(tmp_path / "m.json", model)
    fresh = gemmtune.load_patched(build(), path)
    assert {h.choice.id for d in gemmtune.nn.dispatchers(fresh).values() for h in d.hint_choices} == served
    old = iconfig.triton.enable_pdl
    iconfig.triton.enable_pdl = True
    try:
        torch._dynamo.reset()
        step = torch.compile(fresh, dynamic=False)
        with torch.no_grad():
            static = x.clone()
            for _ in range(2):
                step(static)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                out = step(static)
            for _ in range(3):
                new = torch.randn_like(x)
                static.copy_(new)
                g.replay()
                torch.cuda.synchronize()
                want = ref(new.double())
                res = compare(out, want, 3e-2)
                assert res.ok, res
                torch.testing.assert_close(out.float(), model(new).float(), rtol=2e-2, atol=2e-2)
    finally:
        iconfig.triton.enable_pdl = old
        torch._dynamo.reset()
