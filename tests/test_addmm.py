"""addmm (a @ b + bias) as a problem op: key, verification, tuning, table, export, dispatch.

Shapes are tiny and odd (N = 24, K = 40: not a multiple of the tiles) so the Triton
interpreter runs them in seconds; the reference is fp64 with the bias added there.
"""

from __future__ import annotations

import json

import pytest
import torch

from conftest import cpu_lookup_choices
import gemmtune
import gemmtune.inductor_export as ie
from gemmtune.bench import faults
from gemmtune.bench.runner import WorkerState, handle, make_bias
from gemmtune.bench.timing import Timing
from gemmtune.configs import Choice
from gemmtune.dispatch import compile_mm
from gemmtune.inductor_export import convert, inductor_key
from gemmtune.problem import Problem
from gemmtune.table import LookupTable, TableChoice, provenance
from gemmtune.table import load as load_table
from gemmtune.verify import TOLERANCE, check, compare, reference

DTYPES = [pytest.param("float16", id="fp16"), pytest.param("float32", id="fp32")]
TRITON = "triton_mm:BM16-BN16-BK16-S1-W2-G8"  # cheap in the interpreter, ragged at N=24, K=40


class OneShot:
    """A timer that runs the launch once (the interpreter's wall time says nothing anyway)."""

    representative = False

    def measure(self, launch, n_sets):
        launch(0)
        return Timing(1.0, 1.0, 1, 0.0, False)


# ------------------------------------------------------------------ the key
def test_addmm_key_round_trip_and_mm_keys_unchanged():
    p = Problem.from_sizes(8, 24, 40, "fp16", layout_b="col", op="addmm")
    assert p.key == "addmm:M8-N24-K40:fp16->fp16:row.a/col.a"
    assert Problem.from_key(p.key) == p
    mm = Problem.from_key("mm:M8-N24-K40:fp16->fp16:row.a/col.a")
    assert mm.op == "mm" and mm == Problem.from_sizes(8, 24, 40, "fp16", layout_b="col")
    assert mm != p and mm.key != p.key
    t = Problem.from_tensors(torch.randn(8, 40), torch.randn(40, 24), op="addmm")
    assert t.key == "addmm:M8-N24-K40:fp32->fp32:row.a/row.a"
    assert t.padded().op == "addmm" and t.with_sizes(m=3).op == "addmm"
    assert p.min_bytes == mm.min_bytes + 24 * 2  # the bias: N elements of the output's dtype
    for bad in ("bmm:M8-N24-K40:fp16->fp16:row.a/row.a", "Addmm:M8-N24-K40:fp16->fp16:row.a/row.a"):
        with pytest.raises(ValueError, match="malformed problem key"):
            Problem.from_key(bad)
    with pytest.raises(ValueError, match="op must be one of"):
        Problem(4, 4, 4, op="linear")


def test_reference_and_check_take_the_bias():
    a, b = torch.randn(5, 40, dtype=torch.float16), torch.randn(40, 24, dtype=torch.float16)
    p = Problem.from_tensors(a, b, op="addmm")
    bias = make_bias(p, "cpu", seed=3)
    assert bias.shape == (24,) and bias.dtype == torch.float16
    want = a.double() @ b.double() + bias.double()
    assert torch.equal(reference(a, b, bias), want)
    assert check(want.half(), a, b, p, bias).ok
    # Without the bias the product is far off: the bias is scaled to the product's size.
    assert not check((a.double() @ b.double()).half(), a, b, p, bias).ok
    with pytest.raises(ValueError, match="bias is needed"):
        check(want.half(), a, b, p)
    assert make_bias(Problem.from_sizes(5, 24, 40, "fp16"), "cpu", 0) is None


def test_a_dropped_bias_fails_at_large_k_too():
    """Why the bias is scaled: a unit bias under a sqrt(K)-sized product would hide in bf16's
    tolerance from K ~ 10^4 on; scaled, dropping it is off by ~70% at any K."""
    p = Problem.from_sizes(2, 16, 16384, "bf16", op="addmm")
    bias = make_bias(p, "cpu", seed=0).double()
    prod = torch.randn(2, 16, dtype=torch.float64) * 128  # rms sqrt(K), as the product has
    res = compare(prod, prod + bias, TOLERANCE[("bfloat16", "bfloat16")])
    assert not res.ok and res.rel_err > 0.3


# ------------------------------------------------------------------ the worker's verification
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("choice", [TRITON, "aten", "splitk:BM16-BN16-BK16-S1-W2-G8-SK2-det"])
def test_runner_fuses_and_verifies_the_bias(dtype, choice, monkeypatch):
    addmm = Problem.from_sizes(9, 24, 40, dtype, layout_b="col", op="addmm")
    state = WorkerState(timer=OneShot(), device="cpu")
    task = {"problem": addmm.key, "choice": choice, "seed": 1}
    res = handle("bench", task, state)
    assert res["status"] == "ok", res
    assert res["rel_err"] < TOLERANCE[(addmm.dtype, addmm.dtype)]
    # A kernel that leaves the bias out is wrong for addmm, and only for addmm.
    monkeypatch.setattr(faults, "_FAULTS", {choice: "drop_bias"})
    res = faults.handle("bench", task, WorkerState(timer=OneShot(), device="cpu"))
    assert res["status"] == "wrong" and res["rel_err"] > 0.1, res
    mm = {**task, "problem": Problem.from_sizes(9, 24, 40, dtype, layout_b="col").key}
    assert faults.handle("bench", mm, WorkerState(timer=OneShot(), device="cpu"))["status"] == "ok"


# ------------------------------------------------------------------ tune -> store -> table -> export
def test_tune_cli_op_addmm_store_table_and_export(tmp_path):
    from gemmtune.cli import main
    from gemmtune.store import ResultStore

    store, out = tmp_path / "s.sqlite", tmp_path / "t.json"
    suite = tmp_path / "suite.csv"
    # One row addmm by its op column, one mm row taking --op's default.
    suite.write_text("group,name,M,N,K,dtype,layout_a,layout_b,op\n"
                     "g,lin,9,24,40,fp16,row,col,addmm\n"
                     "g,plain,9,24,40,fp16,row,col,\n")
    rc = main(["tune", "--suite", str(suite), "--families", "aten", "--store", str(store), "--out", str(out),
               "--quiet"])
    assert rc == 0
    addmm = Problem.from_sizes(9, 24, 40, "fp16", layout_b="col", op="addmm")
    mm = Problem.from_sizes(9, 24, 40, "fp16", layout_b="col")
    with ResultStore(store) as db:
        keys = {row.problem_key: row.status for _, row in db.rows()}
    assert keys == {addmm.key: "ok", mm.key: "ok"}
    table = load_table(out)  # validated on load, addmm key included
    assert [tc.choice.id for tc in table.choices(addmm)] == ["aten"]
    # --op addmm applies to --shape (a row-major B here: another problem).
    rc = main(["tune", "--shape", "9x24x40:fp16", "--op", "addmm", "--families", "aten", "--store", str(store),
               "--out", str(tmp_path / "t2.json"), "--quiet"])
    assert rc == 0
    assert list(load_table(tmp_path / "t2.json").entries) == ["addmm:M9-N24-K40:fp16->fp16:row.a/row.a"]


def test_inductor_export_of_addmm():
    p = Problem.from_sizes(64, 96, 128, "bf16", layout_b="col", op="addmm")
    assert inductor_key(p) == (
        "((torch.bfloat16, [64, 96], [0, 1]), (torch.bfloat16, [64, 128], [128, 1]), "
        "(torch.bfloat16, [128, 96], [1, 128]))+alpha=1&beta=1+addmm")
    assert inductor_key(p, "sm90").startswith("sm90+((torch.bfloat16, [64, 96], [0, 1])")
    mm = Problem.from_sizes(64, 96, 128, "bf16", layout_b="col")
    t = LookupTable(provenance("test", "interp", "x", "x", "x", "by-hand"), {
        p.key: [TableChoice(Choice.parse("triton_mm:BM64-BN32-BK32-S3-W4-G8"), 0.01),
                TableChoice(Choice.parse("aten"), 0.02), TableChoice(Choice.parse("decompose_k:s4"), 0.03)],
        mm.key: [TableChoice(Choice.parse("aten"), 0.02)],
        Problem.from_sizes(8, 8, 64, "bf16", op="addmm").key: [TableChoice(Choice.parse("aten"), 0.02)],
    })
    r = convert(t)
    assert r.table[inductor_key(p)] == [{
        "template_id": "triton::mm", "BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8,
        "num_stages": 3, "num_warps": 4, "EVEN_K": True, "USE_FAST_ACCUM": False, "ACC_TYPE": "tl.float32"}]
    assert r.table[inductor_key(mm)] == [{"template_id": "aten::mm"}]
    assert len(r.table) == 2
    why = {(s.key, s.choice): s.reason for s in r.skipped}
    assert "another key" in why[(p.key, "aten")]
    assert "no decompose_k template" in why[(p.key, "decompose_k:s4")]
    assert "no choice Inductor can express" in why[("addmm:M8-N8-K64:bf16->bf16:row.a/row.a", None)]


# ------------------------------------------------------------------ dispatch and nn.Linear
N, K = 24, 40


def _fixed(winner: str):
    return lambda problems, **kw: {p.key: winner for p in problems}


def _table(m: int, choices: list[str], dtype="float16", op="addmm") -> LookupTable:
    p = Problem.from_sizes(m, N, K, dtype, layout_b="col", op=op)
    return LookupTable(provenance("test", "interp", "x", "x", "x", "by-hand"),
                       {p.key: [TableChoice(Choice.parse(c), 0.001) for c in choices]})


@pytest.mark.parametrize("dtype", DTYPES)
def test_dispatcher_runs_the_addmm_winner_for_bias_calls(dtype):
    dt = getattr(torch, dtype)
    mm = compile_mm(n=N, k=K, dtype=dtype, hints={"m": [16]}, mode="table", layout_b="col",
                    tune_fn=_fixed("aten"), table=_table(9, [TRITON], dtype))
    a, w = torch.randn(9, K, dtype=dt), torch.randn(N, K, dtype=dt)
    bias = torch.randn(N, dtype=dt)
    out = mm(a, w.t(), bias=bias)
    res = compare(out, reference(a, w.t(), bias), TOLERANCE[(dtype, dtype)])
    assert res.ok, res.reason
    assert mm.decision(m=9).choice.id == "aten"  # the plain product's decision is unchanged
    dec = mm.addmm_decisions[(9, N, K)]
    assert (dec.choice.id, dec.source, dec.verified) == (TRITON, "table", True)
    # Another M has no addmm entry: the mm kernel with the bias fused, no addmm decision.
    a7 = torch.randn(7, K, dtype=dt)
    assert compare(mm(a7, w.t(), bias=bias), reference(a7, w.t(), bias), TOLERANCE[(dtype, dtype)]).ok
    assert set(mm.addmm_decisions) == {(9, N, K)}


def test_a_wrong_addmm_entry_falls_back_to_the_mm_kernel():
    # decompose_k:s16 cannot run K=40 (not a multiple of 16): rejected, with a warning.
    mm = compile_mm(n=N, k=K, dtype="fp16", hints={"m": [16]}, mode="table", layout_b="col",
                    tune_fn=_fixed("aten"), table=_table(9, ["decompose_k:s16"]))
    a, w, bias = torch.randn(9, K, dtype=torch.half), torch.randn(N, K, dtype=torch.half), torch.randn(N).half()
    with pytest.warns(RuntimeWarning, match="calls with a bias use the shape's mm kernel"):
        out = mm(a, w.t(), bias=bias)
    assert compare(out, reference(a, w.t(), bias), TOLERANCE[("float16", "float16")]).ok
    assert mm.addmm_decisions == {}


def test_nn_linear_uses_the_addmm_winner():
    lin = torch.nn.Linear(K, N).half()
    mm = compile_mm(n=N, k=K, dtype="fp16", hints={"m": [16]}, mode="table", layout_b="col",
                    tune_fn=_fixed("aten"), table=_table(9, [TRITON]))
    gemmtune.nn.Linear.from_linear(lin, mm)
    x = torch.randn(9, K, dtype=torch.half)
    y = lin(x)
    ref = reference(x, lin.weight.detach().t(), lin.bias.detach())
    assert compare(y.detach(), ref, TOLERANCE[("float16", "float16")]).ok
    assert mm.addmm_decisions[(9, N, K)].choice.id == TRITON
    json.dumps(mm.to_json())  # the table (addmm entry included) saves with the dispatcher


@pytest.mark.slow  # a max-autotune compile (~11 s on 2 cores); test_table's Inductor lookup check stays fast
@pytest.mark.skipif(ie.unavailable_reason() is not None, reason="this torch has no Inductor lookup table")
def test_inductor_asks_for_our_addmm_key_on_cpu(tmp_path):
    """torch.compile(max-autotune) of F.linear on the CPU: Inductor's tuned_addmm asks for
    exactly our key for its Triton templates, and its own parser returns our triton::mm config."""
    from torch._inductor import config as icfg

    p = Problem.from_sizes(64, 96, 128, "bf16", layout_b="col", op="addmm")
    cfg = "triton_mm:BM32-BN32-BK64-S2-W4-G4"
    t = LookupTable(provenance("test", "interp", "x", "x", "x", "by-hand"), {p.key: [TableChoice(Choice.parse(cfg))]})
    exported = ie.export(t.save(tmp_path / "t.json"), tmp_path / "inductor.json")
    seen = {"keys": [], "lookups": []}

    # The CPU offers no Triton template: ask Inductor's parser for triton::mm anyway.
    lookup = cpu_lookup_choices(seen, [ie.TRITON_MM])

    x, w = torch.randn(64, 128, dtype=torch.bfloat16), torch.randn(96, 128, dtype=torch.bfloat16)
    bias = torch.randn(96, dtype=torch.bfloat16)
    old = icfg.force_disable_caches, icfg.max_autotune
    try:
        ie.install(tmp_path / "inductor.json", choices=lookup)
        icfg.force_disable_caches, icfg.max_autotune = True, True
        torch._dynamo.reset()
        y = torch.compile(torch.nn.functional.linear)(x, w, bias)
    finally:
        ie.uninstall()
        icfg.force_disable_caches, icfg.max_autotune = old
        torch._dynamo.reset()
    key = ie.inductor_key(p)
    assert key in seen["keys"] and list(exported.table) == [key]
    want = {k: v for k, v in exported.table[key][0].items() if k != "template_id"}
    assert {"triton::mm": [want]} in seen["lookups"]
    torch.testing.assert_close(y, torch.nn.functional.linear(x, w, bias))
