"""pdl=True (gemmtune.pdl): each dispatcher whose winners include a one-slice GEMV strip gets a
twin serving the strip's -pdl config, which graphs compiled with Inductor's PDL on call in its
place (the op's decomposition, torch_ops.pdl_twin_handle); eager calls and other compiles keep the
plain strips. On the CPU interpreter (which runs a -pdl strip without PDL: the same arithmetic,
the peeled first K step) and Inductor's CPU backend; the GPU side (PDL launch, graph chains,
compute-sanitizer) is the gpu test below and test_skinny.py's."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch._inductor import config as iconfig

import gemmtune
from gemmtune.configs import Choice
from gemmtune.dispatch.common import _current_provenance
from gemmtune.pdl import attach_twins, pdl_twin, twin_dispatcher, twin_table
from gemmtune.problem import Problem
from gemmtune.table.types import LookupTable, TableChoice
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


def _decoder(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(131, 96), torch.nn.GELU(),
                               torch.nn.Linear(96, 37, bias=False)).requires_grad_(False)  # inference


def _strips_at_m1(calls):
    def tune(problems, **kw):
        calls.append(sorted(p.key for p in problems))
        return {p.key: STRIP if p.m == 1 else "aten" for p in problems}
    return tune


def _ids(ds) -> set:
    return {h.choice.id for d in ds for h in d.hint_choices}


def test_twin_table_twins_every_entry_at_its_keys_layout():
    col = Problem.from_sizes(1, 96, 256, "fp32", layout_b="col")
    row = Problem.from_sizes(1, 96, 256, "fp32", layout_b="row")
    t = LookupTable(_current_provenance("by-hand"), {
        col.key: [TableChoice(Choice.parse(STRIP), 0.01), TableChoice(Choice.parse("aten"), 0.02)],
        row.key: [TableChoice(Choice.parse(STRIP))], "not a key": [TableChoice(Choice.parse(STRIP))]})
    got = twin_table(t)
    assert [tc.choice.id for tc in got.entries[col.key]] == [TWIN, "aten"] and got.entries[col.key][0].device_ms == 0.01
    assert got.entries[row.key][0].choice.id == STRIP and got.entries["not a key"][0].choice.id == STRIP
    assert t.entries[col.key][0].choice.id == STRIP  # a new table


def test_twin_dispatcher_is_a_new_dispatcher_of_twins_that_matches_fp64():
    d = gemmtune.compile_mm(n=96, k=131, dtype="fp32", layout_b="col", hints={"m": [1, 8]},
                            tune_fn=_strips_at_m1([]))
    t = twin_dispatcher(d)
    assert t is not d and [h.choice.id for h in t.hint_choices] == [TWIN, "aten"]
    assert [h.choice.id for h in d.hint_choices] == [STRIP, "aten"]  # untouched
    a, b = torch.randn(1, 131), torch.randn(96, 131).t()
    torch.testing.assert_close(t(a, b), (a.double() @ b.double()).float(), rtol=1e-4, atol=1e-4)
    cublas = gemmtune.compile_mm(n=96, k=131, dtype="fp32", layout_b="col", hints={"m": [1]},
                                 tune_fn=lambda ps, **kw: {p.key: "aten" for p in ps})
    assert twin_dispatcher(cublas) is cublas and attach_twins([cublas]) == 0 and cublas.pdl_twin is None


def test_twin_dispatcher_before_hopper_warns_and_keeps_the_plain_strips(monkeypatch):
    d = gemmtune.compile_mm(n=96, k=131, dtype="fp32", layout_b="col", hints={"m": [1]}, tune_fn=_strips_at_m1([]))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 0))
    with pytest.warns(RuntimeWarning, match=r"pdl=True needs compute capability 9.0.*this GPU is 8.0"):
        assert twin_dispatcher(d) is d


def test_tune_model_pdl_attaches_twins_and_keeps_the_plain_strips_for_eager():
    model, calls = _decoder(), []
    x1 = torch.randn(1, 131)
    ds = gemmtune.tune_model(model, [(x1,), (torch.randn(8, 131),)], tune_fn=_strips_at_m1(calls), pdl=True)
    assert len(calls) == 1  # still one tuning call
    assert _ids(ds.values()) == {STRIP, "aten"}
    assert all(d.pdl_twin is not None for d in ds.values()) and _ids(d.pdl_twin for d in ds.values()) == {TWIN, "aten"}
    # registered already: a cached compiled graph names the twin's handle without lowering anything
    from gemmtune.torch_ops import REGISTRY, content_key
    assert all(content_key(d.pdl_twin) in REGISTRY for d in ds.values())
    want = model.double()(x1.double()).float()
    model.float()
    gemmtune.patch(model, dispatchers=ds, tune_missing=False, progress=False, eager_policy="tuned")
    torch.testing.assert_close(model(x1), want, rtol=1e-4, atol=1e-4)
    assert all(d.pdl_twin.n_decisions == 0 for d in ds.values())  # eager: the plain dispatchers


def test_patch_pdl_attaches_twins_on_every_path(tmp_path):
    x = torch.randn(1, 131)
    for kw in ({"example_inputs": [(x,)], "tune_fn": _strips_at_m1([])},
               {"hints": {"m": [1, 8]}, "tune_fn": _strips_at_m1([])}):
        model = _decoder()
        gemmtune.patch(model, pdl=True, progress=False, eager_policy="tuned", **kw)
        ds = gemmtune.nn.dispatchers(model).values()
        assert _ids(ds) >= {STRIP} and all(TWIN in _ids([d.pdl_twin]) for d in ds)
        torch.testing.assert_close(model(x), _decoder()(x), rtol=1e-4, atol=1e-4)
    # given dispatchers: nothing tuned again
    given, calls = gemmtune.tune_model(_decoder(), [(x,)], tune_fn=_strips_at_m1([])), []
    model = _decoder()
    gemmtune.patch(model, dispatchers={k[:3]: d for k, d in given.items()}, pdl=True, progress=False,
                   tune_fn=_strips_at_m1(calls))
    assert not calls and all(d.pdl_twin is not None for d in given.values())


def test_patch_pdl_warns_where_weights_require_grad():
    """-pdl strips read a weight tile before the kernel ahead of them ends: for inference only."""
    with pytest.warns(RuntimeWarning, match=r"patch\(pdl=True\): 2 parameter\(s\) of this model require grad"):
        gemmtune.patch(torch.nn.Sequential(torch.nn.Linear(131, 96)), tune_fn=_strips_at_m1([]), pdl=True,
                       progress=False, hints={"m": [1]})
    with pytest.warns(RuntimeWarning, match=r"tune_model\(pdl=True\): 2 parameter"):
        gemmtune.tune_model(torch.nn.Sequential(torch.nn.Linear(131, 96)), [(torch.randn(1, 131),)],
                            tune_fn=_strips_at_m1([]), pdl=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gemmtune.patch(_decoder(), tune_fn=_strips_at_m1([]), pdl=True, progress=False, hints={"m": [1]})


def test_load_patched_pdl_attaches_twins_to_the_saved_dispatchers(tmp_path):
    """Tune once and save without PDL; choose it where the model is served."""
    model, x = _decoder(), torch.randn(1, 131)
    gemmtune.patch(model, example_inputs=[(x,)], tune_fn=_strips_at_m1([]), progress=False)
    path = gemmtune.save_patched(tmp_path / "m.json", model)
    plain, twins = gemmtune.load_patched(_decoder(), path), gemmtune.load_patched(_decoder(), path, pdl=True)
    assert all(d.pdl_twin is None for d in gemmtune.nn.dispatchers(plain).values())
    ds = gemmtune.nn.dispatchers(twins).values()
    assert _ids(ds) == {STRIP} and _ids(d.pdl_twin for d in ds) == {TWIN}
    torch.testing.assert_close(twins(x), model(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("inductor_pdl", [True, False])
def test_compiled_graph_calls_the_twin_only_with_inductors_pdl_on(inductor_pdl):
    """torch.compile (Inductor, CPU backend): with Inductor's PDL on, the op's decomposition
    swaps each patched layer's handle for its twin's, so the compiled graph runs the -pdl strips;
    off, the plain ones; eager calls always the plain ones. Both match fp64."""
    model, x = _decoder(), torch.randn(1, 131)
    ref = _decoder().double()
    gemmtune.patch(model, example_inputs=[(x,)], tune_fn=_strips_at_m1([]), pdl=True, progress=False,
                   eager_policy="tuned")
    ds = list(gemmtune.nn.dispatchers(model).values())
    old = iconfig.triton.enable_pdl
    try:
        iconfig.triton.enable_pdl = inductor_pdl
        torch._dynamo.reset()
        with torch.no_grad(), iconfig.patch(fx_graph_cache=False):
            got = torch.compile(model, dynamic=False)(x)
    finally:
        iconfig.triton.enable_pdl = old
        torch._dynamo.reset()
    torch.testing.assert_close(got, ref(x.double()).float(), rtol=1e-4, atol=1e-4)
    twin_calls = [d.pdl_twin.n_decisions for d in ds]
    assert (all(twin_calls) if inductor_pdl else not any(twin_calls)), twin_calls
    before = [d.pdl_twin.n_decisions for d in ds]
    model(torch.randn(1, 131))
    assert [d.pdl_twin.n_decisions for d in ds] == before  # eager: the plain dispatchers


def test_a_cached_graphs_twin_handle_finds_its_twin_in_a_process_without_pdl():
    """Inductor's AOTAutograd cache keys a graph before the op's decomposition (and by the config,
    enable_pdl included): a process with the same dispatchers, Inductor's PDL on and no pdl=True
    can be handed a graph compiled by a pdl=True process, which names the twin's handle. The
    registry derives that twin from the registered dispatcher rather than fail on the handle."""
    from gemmtune.torch_ops import REGISTRY, content_key

    # sizes of this test's own: a handle is a content digest, shared by equal dispatchers
    model, x = torch.nn.Sequential(torch.nn.Linear(133, 91)).requires_grad_(False), torch.randn(1, 133)
    gemmtune.patch(model, example_inputs=[(x,)], tune_fn=_strips_at_m1([]), progress=False, eager_policy="tuned")
    (d,) = gemmtune.nn.dispatchers(model).values()
    assert d.pdl_twin is None
    h = content_key(twin_dispatcher(d))
    assert h not in REGISTRY
    a, b = torch.randn(1, 133), torch.randn(91, 133).t()
    got = torch.ops.gemmtune.mm(a, b, h)
    assert d.pdl_twin is not None and REGISTRY.get(h) is d.pdl_twin and _ids([d.pdl_twin]) == {TWIN}
    torch.testing.assert_close(got, (a.double() @ b.double()).float(), rtol=1e-4, atol=1e-4)
    with pytest.raises(KeyError, match="no gemmtune dispatcher is registered under handle 12345"):
        REGISTRY.get(12345)


def test_a_dispatchers_handle_says_whether_it_has_a_twin():
    """A graph lowered with Inductor's PDL on names the twin (the decomposition's swap). Inductor's
    caches key a graph by its text, handles included: so the handle of a dispatcher with a twin is
    not that of the same dispatcher without one, and a process without pdl=True is not handed the
    other's graph (nor one with pdl=True a graph that never swapped). Each patch path attaches the
    twins before its layers register the dispatchers."""
    from gemmtune.torch_ops import content_key

    def patched(pdl, **kw):
        model = torch.nn.Sequential(torch.nn.Linear(135, 89)).requires_grad_(False)
        gemmtune.patch(model, tune_fn=_strips_at_m1([]), progress=False, pdl=pdl, **kw)
        return model[0]._gemmtune_handle, next(iter(gemmtune.nn.dispatchers(model).values()))

    x = torch.randn(1, 135)
    h0, d0 = patched(False, example_inputs=[(x,)])
    h1, d1 = patched(True, example_inputs=[(x,)])
    assert d1.pdl_twin is not None and content_key(d0) != content_key(d1) and h0 != h1
    assert h1 == content_key(d1)  # registered after the twin was attached
    ds = gemmtune.tune_model(torch.nn.Sequential(torch.nn.Linear(135, 89)).requires_grad_(False), [(x,)],
                             tune_fn=_strips_at_m1([]))
    h2, d2 = patched(True, dispatchers={k[:3]: d for k, d in ds.items()})
    # (d1 has the same content and took the digest: d2 takes the next free int, DispatcherRegistry)
    assert d2.pdl_twin is not None and content_key(d2) < h2 < content_key(d2) + 8


def test_gemmtune_pdl_is_the_module():
    assert gemmtune.pdl.attach_twins is attach_twins and "pdl" in dir(gemmtune)


ON_HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9


@pytest.mark.gpu
@pytest.mark.skipif(not ON_HOPPER, reason="PDL needs a Hopper or later GPU")
def test_gpu_patch_pdl_saved_loaded_and_compiled_with_inductors_pdl_in_a_graph(tmp_path):
    """The product path on a GPU: patch(pdl=True), save_patched, load_patched(pdl=True); a step
    compiled with Inductor's PDL on (so its kernels launch ours early and ours theirs) runs the
    -pdl twins, captured in a CUDA graph and replayed with new inputs: fp64's result, and the
    eager model's (the plain strips)."""
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
    assert _ids(d.pdl_twin for d in gemmtune.nn.dispatchers(model).values()) == {strip + "-pdl"}
    path = gemmtune.save_patched(tmp_path / "m.json", model)
    fresh = gemmtune.load_patched(build(), path, pdl=True)
    ds = list(gemmtune.nn.dispatchers(fresh).values())
    assert _ids(ds) == {strip} and _ids(d.pdl_twin for d in ds) == {strip + "-pdl"}
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
        assert all(d.pdl_twin.n_decisions for d in ds)  # the graph ran the twins
    finally:
        iconfig.triton.enable_pdl = old
        torch._dynamo.reset()
