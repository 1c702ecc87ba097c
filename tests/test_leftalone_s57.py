"""Session 57's fixes of defects earlier sessions noted and left alone: capture's addmm with a full
added matrix, the ``.dtype`` overloads, ``_addmm_activation``/``dot``/``addr``; ``from_sizes``'
key of a size-1 dim; an ``out`` that overlaps an input; a Decision's ``times_ms`` keys;
decompose_k's empty space's reason. Fresh random inputs; values checked against fp64."""

from __future__ import annotations

import torch

from gemmtune.capture import Capture
from gemmtune.shapes import load_csv


class _Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _captured(fn, *args):
    """(capture of ``fn(*args)``, its output under capture)."""
    model, got = _Fn(fn), []
    cap = Capture().run(model, fn=lambda: got.append(model(*args)))
    return cap, got[0]


def _recs(cap):
    return {(r.op, r.m, r.n, r.k): r for r in cap.records}


# ------------------------------------------------------------------ 1a: addmm's added input
def test_addmm_with_a_full_or_column_added_input_is_recorded_as_its_mm(tmp_path):
    a, b = torch.randn(12, 32), torch.randn(32, 48)
    c, col, bias = torch.randn(12, 48), torch.randn(12, 1), torch.randn(48)
    cap, out = _captured(lambda x, y: torch.addmm(c, x, y) + torch.addmm(col, x, y) + torch.addmm(bias, x, y)
                         + torch.addmm(bias[None], x, y), a, b)
    want = 4 * (a.double() @ b.double()) + c.double() + col.double() + 2 * bias.double()
    torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-4)
    recs = _recs(cap)
    assert set(recs) == {("mm", 12, 48, 32), ("addmm", 12, 48, 32)}
    mm = recs[("mm", 12, 48, 32)]
    assert mm.count == 2 and mm.tunable and "(12, 48) added input" in mm.note and "(12, 1)" in mm.note
    assert recs[("addmm", 12, 48, 32)].count == 2 and recs[("addmm", 12, 48, 32)].note == ""
    # the suite tune --suite reads: the full-matrix call is tuned as the mm it is, not as a bias addmm
    rows = load_csv(cap.write_suite(tmp_path / "s.csv"))
    assert sorted(s.problem.op for s in rows) == ["addmm", "mm"]


def test_addmm_with_beta_or_alpha_is_recorded_as_its_mm():
    a, b, bias = torch.randn(6, 16), torch.randn(16, 24), torch.randn(24)
    cap, out = _captured(lambda x, y: torch.addmm(bias, x, y, beta=0.5, alpha=2.0), a, b)
    torch.testing.assert_close(out.double(), 0.5 * bias.double() + 2 * a.double() @ b.double(),
                               rtol=1e-5, atol=1e-4)
    (r,) = cap.records
    assert (r.op, r.tunable) == ("mm", True) and "beta=0.5" in r.note


# ------------------------------------------------------------------ 1b: .dtype overloads
def test_dtype_overloads_are_recorded_as_not_tuned_naming_the_out_dtype():
    def fn():
        a = torch.randn(6, 16, dtype=torch.bfloat16, device="meta")
        b = torch.randn(16, 24, dtype=torch.bfloat16, device="meta")
        assert torch.mm(a, b, out_dtype=torch.float32).dtype == torch.float32
        torch.addmm(torch.randn(24, dtype=torch.bfloat16, device="meta"), a, b, out_dtype=torch.float32)
        torch.bmm(a[None].expand(3, 6, 16), b[None].expand(3, 16, 24), out_dtype=torch.float32)
    cap = Capture().run(torch.nn.Identity(), fn=fn)
    recs = _recs(cap)
    assert set(recs) == {("mm.dtype", 6, 24, 16), ("addmm.dtype", 6, 24, 16), ("bmm.dtype", 6, 24, 16)}
    for r in recs.values():
        assert not r.tunable and "out dtype float32" in r.note and r.dtype == "bfloat16"
    assert "mm.dtype/bfloat16" in cap.summary() and cap.problems() == []


# ------------------------------------------------------------------ 1c: _addmm_activation, dot, addr
def test_addmm_activation_is_its_addmm_with_the_activation_noted():
    a, b, bias = torch.randn(8, 16), torch.randn(16, 24), torch.randn(24)
    cap, out = _captured(lambda x, y: torch.ops.aten._addmm_activation(bias, x, y, use_gelu=True), a, b)
    torch.testing.assert_close(out.double(), torch.nn.functional.gelu(a.double() @ b.double() + bias.double()),
                               rtol=1e-5, atol=1e-4)
    (r,) = cap.records
    assert (r.op, r.m, r.n, r.k, r.tunable) == ("addmm", 8, 24, 16, True) and "gelu" in r.note
    c = torch.randn(8, 24)
    cap, _ = _captured(lambda x, y: torch.ops.aten._addmm_activation(c, x, y), a, b)
    (r,) = cap.records
    assert r.op == "mm" and "relu" in r.note


def test_dot_vdot_addr_are_recorded_as_not_tuned():
    v, w, u, c = torch.randn(40), torch.randn(40), torch.randn(12), torch.randn(12, 40)
    cap, out = _captured(lambda x, y: torch.dot(x, y) + torch.vdot(x, y) + torch.addr(c, u, y).sum(), v, w)
    want = 2 * (v.double() @ w.double()) + (c.double() + u.double()[:, None] * w.double()[None]).sum()
    torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-3)
    recs = _recs(cap)
    assert set(recs) == {("dot", 1, 1, 40), ("vdot", 1, 1, 40), ("addr", 12, 40, 1)}
    assert not any(r.tunable for r in recs.values()) and all("not a GEMM" in r.note for r in recs.values())


# ------------------------------------------------------------------ 2: from_sizes' key of a size-1 dim
def _fresh(rows, cols, lay, dtype, batch=0):
    """A fresh contiguous operand of ``lay`` ('col': a transposed one); 3-D when ``batch``."""
    if not batch:
        return torch.randn(rows, cols, dtype=dtype) if lay == "row" else torch.randn(cols, rows, dtype=dtype).t()
    one = lay.removeprefix("bcast_")
    if lay.startswith("bcast_"):
        return _fresh(rows, cols, one, dtype).expand(batch, rows, cols)
    return torch.randn(batch, rows, cols, dtype=dtype) if one == "row" else \
        torch.randn(batch, cols, rows, dtype=dtype).transpose(1, 2)


def test_from_sizes_keys_a_size_one_dim_as_the_tensors_do():
    from gemmtune.problem import Problem

    assert Problem.from_sizes(8, 8, 1, "fp32", layout_a="col").key == \
        Problem.from_tensors(torch.randn(1, 8).t(), torch.randn(1, 8)).key == "mm:M8-N8-K1:fp32->fp32:row.u/row.a"
    sizes = [(8, 8, 1), (1, 8, 8), (8, 1, 8), (1, 1, 8), (1, 8, 1), (8, 1, 1), (1, 1, 1), (1, 24, 8), (3, 5, 7)]
    for dt in (torch.float32, torch.bfloat16):
        for m, n, k in sizes:
            for la in ("row", "col"):
                for lb in ("row", "col"):
                    want = Problem.from_tensors(_fresh(m, k, la, dt), _fresh(k, n, lb, dt)).key
                    assert Problem.from_sizes(m, n, k, dt, layout_a=la, layout_b=lb).key == want, (m, n, k, la, lb)
            for batch in (1, 3):
                for la in ("row", "col", "bcast_row", "bcast_col"):
                    for lb in ("row", "bcast_col"):
                        a, b = _fresh(m, k, la, dt, batch), _fresh(k, n, lb, dt, batch)
                        want = Problem.from_tensors(a, b, op="bmm").key
                        got = Problem.from_sizes(m, n, k, dt, layout_a=la, layout_b=lb, op="bmm", batch=batch).key
                        assert got == want, (batch, m, n, k, la, lb)
    # an old key (a table or store written before) still reads back as it was written
    old = "mm:M1-N1-K960:bf16->bf16:col.u/col.a"
    assert Problem.from_key(old).key == old


# ------------------------------------------------------------------ 3: an out that overlaps an input
_CHOICES = ("aten", "triton_mm:BM16-BN16-BK16-S1-W2-G8", "splitk:BM16-BN16-BK16-S1-W2-G8-SK2-det",
            "decompose_k:s2", "pad+triton_mm:BM16-BN16-BK16-S1-W2-G1")


def test_run_choice_refuses_an_out_that_overlaps_an_input():
    import pytest

    from gemmtune import kernels
    from gemmtune.configs import Choice
    from gemmtune.epilogue import bind

    n = 32
    for cid in _CHOICES:
        choice = Choice.parse(cid)
        a, b = torch.randn(n, n), torch.randn(n, n)
        for out, name in ((a, "a"), (b, "b"), (a.t(), "a")):
            keep = out.clone()
            with pytest.raises(ValueError, match=f"out overlaps {name}'s memory"):
                kernels.run_choice(choice, a, b, out)
            assert torch.equal(out, keep)  # refused before anything ran
        # a partial overlap: out is the lower rows of a buffer whose upper rows hold a
        buf = torch.randn(n + 8, n)
        with pytest.raises(ValueError, match="overlaps a's memory"):
            kernels.run_choice(choice, buf[:n], b, buf[8:])
        with pytest.raises(ValueError, match="overlaps b's memory"):
            kernels.prepare_choice(choice, a, b, b)
        # a residual that is out
        out = torch.randn(n, n)
        with pytest.raises(ValueError, match="overlaps residual's memory"):
            kernels.run_choice(choice, a, b, out, epilogue=bind(n, n, torch.float32, a.device, residual=out))
        # disjoint halves of one storage are fine, and right
        buf = torch.randn(3 * n, n)
        a, b, out = buf[:n], buf[n:2 * n], buf[2 * n:]
        want = a.double() @ b.double()
        kernels.run_choice(choice, a, b, out)
        torch.testing.assert_close(out.double(), want, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------ 4: a decision's times_ms keys
_BAD_KEYS = ["cublas", "triton_mm:BM12", " aten", "aten:x", ""]


def _saved_dispatcher(tmp_path):
    import json

    import gemmtune

    mm = gemmtune.compile_mm(n=24, k=40, dtype="fp32", hints={"m": [16]},
                             tune_fn=lambda ps, **kw: {p.key: "aten" for p in ps})
    a, b = torch.randn(20, 40), torch.randn(40, 24)
    torch.testing.assert_close(mm(a, b).double(), a.double() @ b.double(), rtol=1e-5, atol=1e-4)
    path = mm.save(tmp_path / "mm.json")
    return path, json.loads(path.read_text())


def test_a_saved_decisions_times_ms_key_that_is_no_choice_id_is_refused(tmp_path):
    import json

    import pytest

    from gemmtune.dispatch import load

    path, doc = _saved_dispatcher(tmp_path)
    (dec,) = [d for d in doc["decisions"] if d["sizes"]["m"] == 20]
    for key in _BAD_KEYS:
        dec["times_ms"] = {"aten": 0.5, key: 0.25}
        path.write_text(json.dumps(doc))
        with pytest.raises(ValueError, match="times_ms") as info:
            load(path)
        assert str(path) in str(info.value) and "decisions[" in str(info.value) and repr(key) in str(info.value)
    dec["times_ms"] = {"aten": 0.5, "triton_mm:BM16-BN32-BK16-S1-W2-G8": 0.25}  # sound ids load
    path.write_text(json.dumps(doc))
    assert load(path).decision(m=20).times_ms == dec["times_ms"]


def test_a_constructor_decisions_times_ms_key_that_is_no_choice_id_is_refused():
    import pytest

    from gemmtune.dispatch.common import ATEN, Decision, HintChoice
    from gemmtune.dispatch.core import Dispatcher

    for key in _BAD_KEYS:
        with pytest.raises(ValueError, match="times_ms"):
            Dispatcher(dims={"m": None, "n": 24, "k": 40}, dtype="fp32", hints={"m": [16]},
                       hint_choices=[HintChoice((16, 24, 40), ATEN)],
                       decisions={(20, 24, 40): Decision(ATEN, "benchmark", times_ms={key: 0.1})})


# ------------------------------------------------------------------ 5: decompose_k's empty space
def test_decompose_k_empty_space_names_why_a_bmm_the_bmm_reason_first():
    """A K with no split already gave one rejected config with the reason (session 56's 9b40d141);
    a bmm with such a K led with the K, though no K would do: it now gives the bmm reason, the one
    it gives at a K that has splits and the one splitk gives."""
    import gemmtune
    from gemmtune.problem import Problem

    for k in (127, 1009, 100):
        p = Problem.from_sizes(32, 32, k, "bf16")
        kept, rejected = gemmtune.space(p, "decompose_k", device="h100", with_rejected=True)
        assert kept == [] and len(rejected) == 1 and f"K={k} has no divisor split" in rejected[0][1]
        bmm = Problem.from_sizes(32, 32, k, "bf16", op="bmm", batch=4)
        for fam in ("decompose_k", "splitk"):
            kept, rejected = gemmtune.space(bmm, fam, device="h100", with_rejected=True)
            assert kept == [] and rejected and all(r.startswith(f"{fam} does not serve bmm") for _, r in rejected)
