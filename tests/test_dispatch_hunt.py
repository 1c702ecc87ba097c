"""Dispatch hunt: the dispatcher, lookup tables and the Inductor export, on paths earlier hunts did
not walk. Each test failed before its fix (or is an xfail(strict) naming a defect left open).

CPU only: Triton kernels in the interpreter (conftest sets TRITON_INTERPRET=1), fp16/fp32."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import gemmtune.inductor_export as ie
from gemmtune.configs import Choice
from gemmtune.problem import Problem
from gemmtune.provenance import Provenance
from gemmtune.table import LookupTable, TableChoice

sys.path.insert(0, str(Path(__file__).parent))
from conftest import cpu_lookup_choices  # noqa: E402

NEEDS_INDUCTOR_LUT = pytest.mark.skipif(ie.unavailable_reason() is not None,
                                        reason=f"this torch cannot take a lookup table: {ie.unavailable_reason()}")


def _table(*problems: Problem) -> LookupTable:
    return LookupTable(Provenance.current("tuned").to_dict(),
                       {p.key: [TableChoice(Choice.parse("aten"))] for p in problems})


@NEEDS_INDUCTOR_LUT
def test_inductor_finds_the_export_of_a_product_with_a_size_1_dim(tmp_path):
    """A size-1 dim's stride is never read, so gemmtune gives (K, 1) and (1, K).t() one layout and
    one key, while Inductor's key holds the strides as they are. The export wrote only the
    contiguous tensor's: ``x @ W.T`` of an ``nn.Linear(K, 1)`` (a value head, B strides [1, K])
    and an M = 1 row taken from a column were never found."""
    from torch._inductor import config as icfg

    torch.manual_seed(0)
    calls = {
        "value head x @ W.T, N = 1": (torch.randn(8, 64), torch.randn(1, 64).t()),
        "M = 1 row of a column": (torch.randn(64, 1).t(), torch.randn(64, 24)),
    }
    problems = {name: Problem.from_tensors(a, b) for name, (a, b) in calls.items()}
    path = ie.export(_table(*problems.values()).save(tmp_path / "t.json"), tmp_path / "i.json")
    seen = {"keys": [], "lookups": []}
    old = icfg.force_disable_caches
    missed = {}
    try:
        ie.install(tmp_path / "i.json", choices=cpu_lookup_choices(seen, [ie.ATEN_MM]))
        icfg.force_disable_caches = True
        for name, (a, b) in calls.items():
            seen["keys"].clear()
            torch._dynamo.reset()
            got = torch.compile(lambda x, y: x @ y)(a, b)
            torch.testing.assert_close(got.double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)
            asked = [k for k in seen["keys"] if not k.startswith("cpu-test+")]
            assert asked, name
            if not set(asked) & set(path.table):
                missed[name] = (problems[name].key, asked)
    finally:
        ie.uninstall()
        icfg.force_disable_caches = old
        torch._dynamo.reset()
    assert not missed
    # The contiguous tensors' keys stay the first (inductor_key), as before.
    p = Problem.from_sizes(8, 1, 64, "fp32")
    assert ie.inductor_key(p) == "((torch.float32, [8, 64], [64, 1]), (torch.float32, [64, 1], [1, 1]))+mm"
    assert ie.inductor_keys(p)[1:] == ["((torch.float32, [8, 64], [64, 1]), (torch.float32, [64, 1], [1, 64]))+mm"]
    assert len(ie.inductor_keys(Problem.from_sizes(8, 24, 64, "fp32"))) == 1


# ----------------------------------------------------------------------------- saved dispatchers
TILE = "triton_mm:BM16-BN32-BK16-S1-W2-G8"


def _saved(tmp_path) -> tuple[Path, dict]:
    """A dispatcher (N=24, K=40, fp32, one Triton hint kernel) with one verified decision, saved."""
    import json

    import gemmtune

    mm = gemmtune.compile_mm(n=24, k=40, dtype="fp32", hints={"m": [16]},
                             tune_fn=lambda ps, **kw: {p.key: TILE for p in ps})
    a, b = torch.randn(20, 40), torch.randn(40, 24)
    torch.testing.assert_close(mm(a, b).double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)
    assert mm.decision(m=20).verified and mm.decision(m=20).choice.id == TILE
    path = mm.save(tmp_path / "mm.json")
    return path, json.loads(path.read_text())


@pytest.mark.parametrize("field, value, needle", [
    ("verified", "false", "verified"),   # bool("false") is True: the decision was taken as verified
    ("verified", 0.5, "verified"),
    ("source", "empty", "empty"),        # an 'empty' decision is never verified, whatever its choice
    ("source", "bogus", "source"),
])
def test_an_edited_decision_that_would_skip_verification_is_refused_by_name(tmp_path, field, value, needle):
    """``load`` read a decision's ``verified`` with ``bool()`` and its ``source`` unchecked: a hand edit
    to ``"verified": "false"`` (meaning: check it again) loaded as verified, and ``"source": "empty"``
    at a non-empty size made the first call skip verification for good (``_first_sight`` never
    re-verifies an empty product's decision), so its Triton kernel then ran unchecked."""
    import json

    from gemmtune.dispatch import load

    path, doc = _saved(tmp_path)
    (dec,) = [d for d in doc["decisions"] if d["sizes"]["m"] == 20]
    dec[field] = value
    if field == "source":
        dec["verified"] = False
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=needle) as info:
        load(path)
    assert str(path) in str(info.value)


def test_a_saved_decision_marked_unverified_is_verified_again_on_load(tmp_path):
    """The honest edit, JSON false, is still taken: the decision is checked at its first call."""
    import json

    from gemmtune.dispatch import load

    path, doc = _saved(tmp_path)
    for d in doc["decisions"]:
        d["verified"] = False
    path.write_text(json.dumps(doc))
    mm = load(path)
    assert not mm.decision(m=20).verified
    a, b = torch.randn(20, 40), torch.randn(40, 24)
    torch.testing.assert_close(mm(a, b).double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)
    assert mm.decision(m=20).verified and mm.decision(m=20).choice.id == TILE


# ----------------------------------------------------------------------------- keys of size-1 dims
def _contiguous_operands(m: int, n: int, k: int, la: str, lb: str, dtype):
    a = torch.randn(m, k, dtype=dtype) if la == "row" else torch.randn(k, m, dtype=dtype).t()
    b = torch.randn(k, n, dtype=dtype) if lb == "row" else torch.randn(n, k, dtype=dtype).t()
    return a, b


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_from_sizes_keys_a_problem_as_its_contiguous_tensors_do(dtype):
    """``Problem.from_sizes`` (what capture, compile_mm's hints and a dispatcher's table lookups key
    by) gives alignment "as contiguous tensors would have", and ``from_tensors`` (what
    ``Problem.from_tensors(a, b)`` + ``tune`` keys by) ignores the leading stride of a single row
    or column, which is never read. At M = 1 (a decode step) with K*itemsize not a multiple of 16
    the two keyed one product 'row.a' and 'row.u': the table of one was never found by the other,
    and the tuner measured a 2-byte-offset copy (from_sizes' 'u') where every real call is aligned."""
    torch.manual_seed(0)
    for m, n, k in [(1, 24, 100), (1, 24, 99), (3, 24, 1), (8, 1, 100), (1, 1, 7), (5, 7, 9), (16, 24, 40)]:
        for la in ("row", "col"):
            for lb in ("row", "col"):
                a, b = _contiguous_operands(m, n, k, la, lb, dtype)
                seen = Problem.from_tensors(a, b)
                assert Problem.from_sizes(m, n, k, dtype, layout_a=seen.layout_a,
                                          layout_b=seen.layout_b).key == seen.key, (m, n, k, la, lb)
                # a bmm of such matrices, each operand a batch of them or one broadcast (stride 0)
                for bcast_a, bcast_b in ((False, False), (True, False), (False, True)):
                    aa = a.unsqueeze(0).expand(3, m, k) if bcast_a else torch.stack([a, a, a])
                    bb = b.unsqueeze(0).expand(3, k, n) if bcast_b else torch.stack([b, b, b])
                    if not bcast_a and la == "col":
                        aa = aa.transpose(1, 2).contiguous().transpose(1, 2)
                    if not bcast_b and lb == "col":
                        bb = bb.transpose(1, 2).contiguous().transpose(1, 2)
                    seen = Problem.from_tensors(aa, bb)
                    assert Problem.from_sizes(m, n, k, dtype, layout_a=seen.layout_a, layout_b=seen.layout_b,
                                              op="bmm", batch=3).key == seen.key, (m, n, k, la, lb, bcast_a, bcast_b)


def test_a_table_tuned_from_decode_tensors_is_found_by_a_table_dispatcher():
    """README's path: ``Problem.from_tensors(x, w)`` tuned into a table; a table-mode dispatcher at
    that M = 1 size looked the entry up under from_sizes' other key, missed it and ran its hint
    kernel (here cuBLAS) instead, without a word."""
    from gemmtune.dispatch import lookup

    torch.manual_seed(0)
    x, w = torch.randn(1, 100, dtype=torch.float16), torch.randn(24, 100, dtype=torch.float16)
    p = Problem.from_tensors(x, w.t())
    table = LookupTable(Provenance.current("tuned").to_dict(),
                        {p.key: [TableChoice(Choice.parse("triton_mm:BM16-BN32-BK16-S1-W2-G8"))]})
    mm = lookup(table, dtype="fp16", layout_b="col")
    got = mm(x, w.t())
    want = x.double() @ w.double().t()
    assert (got.double() - want).abs().max().item() <= 1e-2 * max(1.0, want.abs().max().item())
    assert mm.decision(m=1, n=24, k=100).source == "table"


# ----------------------------------------------------------------------------- compile_mm's hints
@pytest.mark.parametrize("make", [lambda: (m for m in [4, 64]), lambda: iter([64, 4]), lambda: range(4, 65, 60),
                                  lambda: __import__("numpy").array([4, 64])],
                         ids=["generator", "iterator", "range", "numpy"])
def test_compile_mm_takes_hints_from_any_iterable_of_sizes(make):
    """A generator of hints was used up by compile_mm's check, so it tuned no problem and raised
    "a dispatcher needs at least one hint choice" for the two hints given; a numpy array raised
    numpy's "truth value of an array ... is ambiguous"."""
    import gemmtune

    tuned = []

    def tune_fn(ps, **kw):
        tuned.extend(p.m for p in ps)
        return {p.key: "aten" for p in ps}

    mm = gemmtune.compile_mm(n=24, k=40, dtype="fp32", hints={"m": make()}, tune_fn=tune_fn)
    assert mm.hints == {"m": (4, 64)} and sorted(tuned) == [4, 64]
    assert all(type(h) is int for h in mm.hints["m"])
    a, b = torch.randn(9, 40), torch.randn(40, 24)
    torch.testing.assert_close(mm(a, b).double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad", [4, "64", [], [0, 4], [4.0], [True], None])
def test_compile_mm_refuses_hints_that_are_not_sizes_by_name(bad):
    import gemmtune

    with pytest.raises(ValueError, match=r"hints\['m'\] must be a non-empty list of positive ints"):
        gemmtune.compile_mm(n=24, k=40, dtype="fp32", hints={"m": bad},
                            tune_fn=lambda ps, **kw: {p.key: "aten" for p in ps})


# ----------------------------------------------------------------------------- Inductor, dynamic K
@NEEDS_INDUCTOR_LUT
def test_an_installed_table_gives_no_config_to_a_graph_whose_k_is_symbolic(tmp_path, monkeypatch):
    """Inductor keys its lookup by the size *hints* of a dynamic graph: a graph compiled with K
    marked dynamic (hint 128) found the entry exported for K = 128 and took its configs, whose
    ``EVEN_K: True`` (K % BLOCK_K == 0) and ``decompose_k`` split (K % 2 == 0) hold at 128 only;
    the graph then runs every K (100 here), where an unmasked K loop reads past the operands (a
    GPU's silent wrong result; Inductor's own heuristic leaves EVEN_K off for a symbolic K). The
    handler ``install`` sets gives such a graph no config: Inductor tunes it as without a table.
    A static graph still gets the entry. (fp32 tiles export only when tuned with IEEE products:
    gemmtune.precision; the table here stands for one.)"""
    from torch._inductor import config as icfg

    from gemmtune import precision
    monkeypatch.setattr(precision, "_FP32_ON_DEVICE", ["ieee"])
    from torch._inductor.lookup_table import LookupTableChoices
    from torch._inductor.virtualized import V

    # Inductor's lookup is CUDA-only: let it read the table on the CPU too (as conftest's
    # cpu_lookup_choices does), at the class that install's handler is or derives from.
    monkeypatch.setattr(LookupTableChoices, "_get_lookup_table", lambda self: icfg.lookup_table.table or {})
    monkeypatch.setattr(LookupTableChoices, "_get_device_key", staticmethod(lambda device: "cpu-test"))
    p = Problem.from_sizes(64, 96, 128, "fp32")
    table = LookupTable(Provenance.current("tuned").to_dict(),
                        {p.key: [TableChoice(Choice.parse("triton_mm:BM32-BN32-BK64-S2-W4-G4")),
                                 TableChoice(Choice.parse("decompose_k:s2"))]})
    table.save(tmp_path / "t.json")
    old = icfg.force_disable_caches, icfg.max_autotune
    got = {}
    try:
        for name, dynamic_k in (("static", False), ("dynamic K", True)):
            ie.install(tmp_path / "t.json")
            handler, asked = V.choices, []
            lookup = handler.lookup_template_configs

            def recording(kernel_inputs, op_name, template_uids, template_hash_map=None, lookup=lookup, asked=asked):
                # also ask for the templates a GPU offers (the CPU offers only aten::mm)
                asked.append(lookup(kernel_inputs, op_name, [ie.TRITON_MM, ie.DECOMPOSE_K], template_hash_map))
                return lookup(kernel_inputs, op_name, template_uids, template_hash_map)

            monkeypatch.setattr(handler, "lookup_template_configs", recording, raising=False)
            icfg.force_disable_caches, icfg.max_autotune = True, True
            torch._dynamo.reset()
            a, b = torch.randn(64, 128), torch.randn(128, 96)
            if dynamic_k:
                torch._dynamo.mark_dynamic(a, 1)
                torch._dynamo.mark_dynamic(b, 0)
            f = torch.compile(lambda x, y: x @ y)
            torch.testing.assert_close(f(a, b), a @ b)
            if dynamic_k:
                a, b = torch.randn(64, 100), torch.randn(100, 96)   # the same graph, K = 100
                torch.testing.assert_close(f(a, b), a @ b)
            got[name] = asked
    finally:
        ie.uninstall()
        icfg.force_disable_caches, icfg.max_autotune = old
        torch._dynamo.reset()
    assert any(r.get(ie.TRITON_MM) and r[ie.TRITON_MM][0]["EVEN_K"] for r in got["static"]), got["static"]
    assert got["dynamic K"] and not any(r for r in got["dynamic K"]), got["dynamic K"]


# ----------------------------------------------------------------------------- warming a bmm dispatcher
def _bmm_dispatcher():
    import gemmtune

    return gemmtune.compile_bmm(batch=4, n=24, k=40, dtype="fp32", hints={"m": [8, 32]},
                                tune_fn=lambda ps, **kw: {p.key: TILE for p in ps})


def test_warmup_of_a_bmm_dispatcher_decides_its_bmm_shapes(tmp_path):
    """``warmup`` (what to call before a CUDA-graph capture, and what ``save`` runs to bundle the
    kernels) made 2-D operands whatever the dispatcher: a ``compile_bmm`` dispatcher decided mm
    shapes it is not called with, and its bmm shapes stayed undecided (in a capture: cuBLAS, with
    a warning; in the bundle: no batched kernels). It now warms bmm calls at the batch
    compile_bmm tuned (kept by save / load), or at the batches given."""
    from gemmtune.dispatch import load

    torch.manual_seed(0)
    d = _bmm_dispatcher()
    d.warmup()
    assert sorted(d.decisions) == [(4, 8, 24, 40), (4, 32, 24, 40)]
    assert all(dec.verified and dec.choice.id == TILE for dec in d.decisions.values())
    d.warmup(batch=[2], m=[5])
    assert (2, 5, 24, 40) in d.decisions
    d.warmup(batch=(), m=[5])   # 2-D calls, asked for
    assert (5, 24, 40) in d.decisions
    a, b = torch.randn(4, 8, 40), torch.randn(4, 40, 24)
    torch.testing.assert_close(d(a, b).double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)
    again = load(d.save(tmp_path / "bmm.json", binaries=False))
    assert again.batch == 4
    fresh = load(_bmm_dispatcher().save(tmp_path / "fresh.json", binaries=False))
    fresh.warmup()
    assert sorted(fresh.decisions) == [(4, 8, 24, 40), (4, 32, 24, 40)]
    with pytest.raises(ValueError, match="batch"):
        d.warmup(batch=[0.5])
    with pytest.raises(ValueError, match="epilogue"):
        d.warmup(epilogues=["bias"])


def test_warmup_of_an_mm_dispatcher_still_decides_mm_shapes():
    import gemmtune

    d = gemmtune.compile_mm(n=24, k=40, dtype="fp32", hints={"m": [8]}, tune_fn=lambda ps, **kw: {p.key: TILE for p in ps})
    assert d.batch is None
    d.warmup(m=[3], epilogues=["bias"])
    assert sorted(d.decisions) == [(3, 24, 40)]


@pytest.mark.parametrize("batch", [None, 2])
def test_a_decision_made_where_triton_runs_is_not_launched_on_a_cpu_without_it(monkeypatch, batch):
    """A dispatcher saved in an interpreter process (or decided on a GPU) and called on CPU tensors
    without the interpreter: its saved shapes launched Triton there ("0 active drivers") while a
    new shape ran cuBLAS. Such a call now gets its own decision; the saved one is kept."""
    import gemmtune
    from gemmtune import kernels
    from gemmtune.dispatch import Decision, Dispatcher, HintChoice

    tile = Choice.parse("triton_mm:BM32-BN32-BK16-S1-W2-G8")
    sizes = (40, 24, 64) if batch is None else (batch, 40, 24, 64)
    d = Dispatcher(dims={"n": 24, "k": 64}, dtype="fp32", hints={"m": [32]},
                   hint_choices=[HintChoice((32, 24, 64), tile)],
                   decisions={sizes: Decision(tile, "similarity", (32, 24, 64), verified=True)})
    monkeypatch.setattr(gemmtune.dispatch, "interpreter_enabled", lambda: False)

    def no_driver(*args, **kwargs):  # what Triton does with CPU tensors and no interpreter
        raise RuntimeError("0 active drivers ([]). There should only be one.")
    monkeypatch.setattr(kernels.get("triton_mm"), "run", no_driver)
    lead = () if batch is None else (batch,)
    a, b = torch.randn(*lead, 40, 64), torch.randn(*lead, 64, 24)
    out = d(a, b)
    torch.testing.assert_close(out.double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)
    assert d.decisions[sizes].choice == tile  # kept for where it was made
