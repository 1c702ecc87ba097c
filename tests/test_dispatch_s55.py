"""Session 55: a saved dispatcher's decision times and reasons read strictly; the norm fold's check on
a non-finite input; ``rms_mm`` with a bias folding the addmm winner; a 2-D table lookup by the
call's own layouts. Each test failed before its fix.

CPU only: Triton kernels in the interpreter (conftest sets TRITON_INTERPRET=1), tiny shapes."""

from __future__ import annotations

import json
import math
import warnings

import pytest
import torch

import gemmtune
from gemmtune import normfold
from gemmtune.configs import Choice
from gemmtune.normfold import fold_reference
from gemmtune.problem import Problem, dtype_name
from gemmtune.provenance import Provenance
from gemmtune.table import LookupTable, TableChoice
from gemmtune.torch_ops import REGISTRY
from gemmtune.verify import compare

TILE = "triton_mm:BM16-BN32-BK16-S1-W2-G8"
FOLDS = "skinny:BM1-BN16-BK64-SK1-S1-W4-core-det-flat-sum"  # one-row -flat strip: folds at K = 64
NO_FOLD = "skinny:BM1-BN16-BK64-SK1-S1-W4-core-det"  # the 3-D strip: fold_misfit refuses it
K, EPS = 64, 1e-5


def _table(entries: dict) -> LookupTable:
    return LookupTable(Provenance.current("by-hand").to_dict(),
                       {p.key: [TableChoice(Choice.parse(c))] for p, c in entries.items()})


# ----------------------------------------------------------------------------- saved decisions
def _saved(tmp_path):
    """A dispatcher (N=24, K=40, fp32, cuBLAS hint) with one decision, saved; the file's JSON."""
    mm = gemmtune.compile_mm(n=24, k=40, dtype="fp32", hints={"m": [16]},
                             tune_fn=lambda ps, **kw: {p.key: "aten" for p in ps})
    mm(torch.randn(20, 40), torch.randn(40, 24))
    path = mm.save(tmp_path / "mm.json")
    return path, json.loads(path.read_text())


@pytest.mark.parametrize("field, value", [
    ("times_ms", {"aten": "fast"}),
    ("times_ms", {"aten": -0.5}),
    ("times_ms", {"aten": math.nan}),
    ("times_ms", {"aten": math.inf}),
    ("times_ms", {"aten": True}),
    ("times_ms", [0.1, 0.2]),   # dict() of it failed at the next save, naming no file
    ("times_ms", 0.1),
    ("reason", 5),
    ("reason", None),
    ("reason", ["a", "b"]),
], ids=["str-time", "negative", "nan", "inf", "bool", "list", "number", "int-reason", "null-reason", "list-reason"])
def test_an_edited_decision_time_or_reason_is_refused_naming_file_and_field(tmp_path, field, value):
    """``load`` took a decision's ``times_ms`` and ``reason`` as they were: a non-numeric, negative
    or NaN time (json reads NaN), a list, or a reason that is not text loaded without a word."""
    from gemmtune.dispatch import load

    path, doc = _saved(tmp_path)
    (dec,) = [d for d in doc["decisions"] if d["sizes"]["m"] == 20]
    dec[field] = value
    path.write_text(json.dumps(doc))  # (allow_nan: json writes NaN and Infinity, and reads them back)
    with pytest.raises(ValueError, match=field) as info:
        load(path)
    assert str(path) in str(info.value) and "decisions[" in str(info.value)


def test_a_saved_decision_with_sound_times_and_reason_loads_and_saves_again(tmp_path):
    from gemmtune.dispatch import load

    path, doc = _saved(tmp_path)
    for d in doc["decisions"]:
        d["times_ms"], d["reason"] = {"aten": 0.25, TILE: 0}, "kept"
    path.write_text(json.dumps(doc))
    mm = load(path)
    assert mm.decision(m=20).times_ms == {"aten": 0.25, TILE: 0.0} and mm.decision(m=20).reason == "kept"
    again = json.loads(mm.save(tmp_path / "again.json").read_text())
    assert [d["times_ms"] for d in again["decisions"]] == [d["times_ms"] for d in doc["decisions"]]


# ----------------------------------------------------------------------------- constructor decisions
def _by_hand(decisions):
    """A Dispatcher (M dynamic, N=24, K=40, fp32, a cuBLAS hint) built by hand with ``decisions``."""
    from gemmtune.dispatch.common import ATEN, HintChoice
    from gemmtune.dispatch.core import Dispatcher

    return Dispatcher(dims={"m": None, "n": 24, "k": 40}, dtype="fp32", hints={"m": [16]},
                      hint_choices=[HintChoice((16, 24, 40), ATEN)], decisions=decisions)


def _bad_decisions():
    from gemmtune.dispatch.common import ATEN, Decision

    at20 = (20, 24, 40)
    return [
        ("times_ms", {at20: Decision(ATEN, "benchmark", times_ms={"aten": math.nan})}),
        ("times_ms", {at20: Decision(ATEN, "benchmark", times_ms={"aten": -0.5})}),
        ("times_ms", {at20: Decision(ATEN, "benchmark", times_ms={"aten": "fast"})}),
        ("times_ms", {at20: Decision(ATEN, "benchmark", times_ms=[0.1, 0.2])}),
        ("reason", {at20: Decision(ATEN, "benchmark", reason=5)}),
        ("verified", {at20: Decision(ATEN, "benchmark", verified="false")}),
        ("source", {at20: Decision(ATEN, "guessed")}),
        ("source", {at20: Decision(ATEN, "empty")}),          # 'empty' at a size with no 0
        ("source", {(0, 24, 40): Decision(ATEN, "benchmark")}),  # a size of 0 that is not 'empty'
        ("hint", {at20: Decision(ATEN, "similarity", hint=(16, "x", 40))}),
        ("choice", {at20: Decision("nope:BM1", "benchmark")}),    # no Choice: an unknown id, unparsed
        ("choice", {at20: Decision("aten", "benchmark")}),
        ("Decision entries", {at20: "aten"}),
        ("keyed", {(20.5, 24, 40): Decision(ATEN, "benchmark")}),  # an m that is no int
        ("keyed", {(-20, 24, 40): Decision(ATEN, "benchmark")}),
        ("keyed", {(True, 24, 40): Decision(ATEN, "benchmark")}),
    ]


@pytest.mark.parametrize("case", range(len(_bad_decisions())))
def test_a_constructors_bad_decision_is_refused_naming_the_field(case):
    """The constructor checked a decision's key and choice only: a NaN or negative time, a source or
    reason of any type, "verified": "false" were taken as given (``load`` refused them in a file), and
    a choice that was no Choice was a TypeError. Now each is a ValueError naming the field, from the
    validator ``load`` uses (core.check_decision)."""
    field, decisions = _bad_decisions()[case]
    with pytest.raises(ValueError, match=field):
        _by_hand(decisions)


def test_a_constructors_sound_decisions_are_kept_and_run():
    from gemmtune.dispatch.common import ATEN, Decision

    mm = _by_hand({(20, 24, 40): Decision(ATEN, "benchmark", (16, 24, 40), True, {"aten": 0.25, TILE: 0}, "kept"),
                   (0, 24, 40): Decision(ATEN, "empty", verified=True)})
    assert mm.decision(m=20).times_ms == {"aten": 0.25, TILE: 0.0} and mm.decision(m=20).reason == "kept"
    a, b = torch.randn(20, 40), torch.randn(40, 24)
    torch.testing.assert_close(mm(a, b), a @ b)


# ----------------------------------------------------------------------------- the norm fold
def _patched(n: int, dtype, mm_choice: str, addmm_choice: str | None = None, bias: bool = False):
    """A patched Linear [n, K] whose M = 1 mm choice (and addmm choice: calls with a bias) are
    these, by table."""
    lin = torch.nn.Linear(K, n, bias=bias).to(dtype).requires_grad_(False)
    m = torch.nn.Sequential(lin)
    entries = {Problem.from_sizes(1, n, K, dtype_name(dtype), layout_b="col"): mm_choice}
    if addmm_choice is not None:
        entries[Problem.from_sizes(1, n, K, dtype_name(dtype), layout_b="col", op="addmm")] = addmm_choice
    gemmtune.patch(m, _table(entries), hints={"m": [1]}, tune_fn=lambda ps, **kw: {p.key: mm_choice for p in ps})
    return m[0]


def _kinds(d) -> list[str]:
    """What each decided rms_mm shape of ``d`` runs: 'folded' or 'plain' (norm in torch, then d)."""
    return ["folded" if getattr(fn, "__name__", "") == "folded" else "plain"
            for fn in d.__dict__.get("_gemmtune_norm_runs", {}).values()]


def test_a_non_finite_input_does_not_give_up_the_fold_for_good():
    """The fold's one fp64 check ran on the first call whatever it held: on a NaN (or inf) input both
    the fold and the reference are NaN, the check failed, and the fold was off for that shape for
    good, with a warning blaming the kernel. Such a call now runs unfused and decides nothing; the
    next finite call checks the fold and takes it."""
    torch.manual_seed(0)
    dtype = torch.float32
    lin = _patched(24, dtype, FOLDS)
    d = REGISTRY.get(lin._gemmtune_handle)
    g, b = torch.rand(K, dtype=dtype) + 0.5, lin.weight.t()
    for bad in (math.nan, math.inf):
        x = torch.randn(1, K, dtype=dtype)
        x[0, 3] = bad
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no "the norm fold ... is not used"
            got = torch.ops.gemmtune.rms_mm(x, g, EPS, b, lin._gemmtune_handle)
        assert got.shape == (1, 24) and not torch.isfinite(got).all()
        assert _kinds(d) == []  # nothing decided on it
    x = torch.randn(1, K, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = torch.ops.gemmtune.rms_mm(x, g, EPS, b, lin._gemmtune_handle)
    assert compare(got, fold_reference(x, g, EPS, b), 1e-5).ok
    assert _kinds(d) == ["folded"]


@pytest.mark.parametrize("mm_choice, addmm_choice, want", [
    (FOLDS, "aten", "plain"),       # a skinny mm winner folded in place of the cuBLAS addmm winner
    (NO_FOLD, FOLDS, "folded"),     # a folding addmm winner was never folded
])
def test_rms_mm_with_a_bias_folds_the_addmm_winner_not_the_mm_one(mm_choice, addmm_choice, want):
    """A call with a bias runs the table's addmm winner (Dispatcher._addmm_choice; gemmtune.nn.Linear
    with a bias, through the dispatcher's fused call). ``rms_mm`` decided whether to fold from the
    size's mm decision, so its kernel was the mm winner's even where the addmm winner differs."""
    torch.manual_seed(0)
    dtype = torch.float32
    lin = _patched(24, dtype, mm_choice, addmm_choice, bias=True)
    d = REGISTRY.get(lin._gemmtune_handle)
    x, g, b = torch.randn(1, K, dtype=dtype), torch.rand(K, dtype=dtype) + 0.5, lin.weight.t()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = normfold.run(d, x, g, EPS, b, lin.bias)
    assert compare(got, fold_reference(x, g, EPS, b, lin.bias), 1e-5).ok
    assert d.addmm_decisions[(1, 24, K)].choice.id == addmm_choice  # the addmm winner was decided...
    assert d.decision(1, 24, K).choice.id == mm_choice
    assert _kinds(d) == [want]  # ...and it is what decides the fold


# ----------------------------------------------------------------------------- 2-D table layouts
def _table_dispatcher(entries: dict):
    """A table-mode dispatcher declared row-major (N=24, K=40, fp32), cuBLAS its hint kernel."""
    return gemmtune.compile_mm(n=24, k=40, dtype="fp32", hints={"m": [8]}, mode="table", table=_table(entries),
                               tune_fn=lambda ps, **kw: {p.key: "aten" for p in ps})


def _close(got, a, b, bias=None):
    want = a.double() @ b.double() + (0 if bias is None else bias.double())
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


def test_a_2d_call_is_served_its_own_layouts_table_entry():
    """A 2-D call looked the table up under the declared layouts' key only (a bmm's own layouts were
    tried since session 53): ``x @ W.t()`` (B column-major) on a row-major dispatcher missed its
    tuned entry, mm and addmm both, and ran cuBLAS without a word."""
    torch.manual_seed(0)
    m, n, k = 8, 24, 40
    d = _table_dispatcher({Problem.from_sizes(m, n, k, "fp32", layout_b="col"): TILE,
                           Problem.from_sizes(m, n, k, "fp32", layout_b="col", op="addmm"): TILE})
    a, w, bias = torch.randn(m, k), torch.randn(n, k), torch.randn(n)
    _close(d(a, w.t()), a, w.t())
    assert (d.decision(m).source, d.decision(m).choice.id) == ("table", TILE)
    _close(d(a, w.t(), bias=bias), a, w.t(), bias)
    assert d.addmm_decisions[(m, n, k)].choice.id == TILE
    # A decision is per size: a row-major B of that size runs the same kernel, whose launch reads
    # the strides it is given (no wrong result, as before for a declared-layout decision).
    b = w.t().contiguous()
    _close(d(a, b), a, b)
    _close(d(a, b, bias=bias), a, b, bias)


def test_a_2d_call_is_never_served_another_layouts_entry():
    """Only the call's own layouts' key and the declared one are looked up: an entry of a third
    layout (A column-major here) is never a candidate, for mm or addmm, and the entry a call's own
    layout holds comes before the declared layouts'."""
    torch.manual_seed(0)
    m, n, k = 8, 24, 40
    other = "triton_mm:BM16-BN16-BK16-S1-W2-G8"
    d = _table_dispatcher({Problem.from_sizes(m, n, k, "fp32", layout_a="col"): TILE,
                           Problem.from_sizes(m, n, k, "fp32", layout_a="col", op="addmm"): TILE,
                           Problem.from_sizes(m, n, k, "fp32", layout_b="col"): other})
    a, b, bias = torch.randn(m, k), torch.randn(k, n), torch.randn(n)
    _close(d(a, b), a, b)  # row / row: the declared key (compile_mm's cuBLAS), not A col's entry
    assert d.decision(m).choice.id == "aten"
    _close(d(a, b, bias=bias), a, b, bias)
    assert (m, n, k) not in d.addmm_decisions
    # A column-major B of another size: its own entry, not the declared layouts' (cuBLAS)
    d2 = _table_dispatcher({Problem.from_sizes(4, n, k, "fp32"): "aten",
                            Problem.from_sizes(4, n, k, "fp32", layout_b="col"): other})
    a4, w = torch.randn(4, k), torch.randn(n, k)
    _close(d2(a4, w.t()), a4, w.t())
    assert d2.decision(4).choice.id == other
