"""bmm (batched products) as a problem op: key, validation, layouts and alignment, every family
serving or refusing it, the batched tiled kernel against fp64, the worker's inputs, the
dispatcher, the gemmtune::bmm op, gemmtune.nn's routing, capture, suites, the CLI, the
analytic model and the Inductor export.

What runs where. On a CPU the Triton kernels run in the interpreter (fp16 and fp32 only: its
bf16 tl.dot is wrong, kernels.tiled.UPCAST_BF16), on small ragged shapes so that the file stays
near a minute; ``aten`` is torch.bmm. On a GPU the same tests compile real kernels, and the
``gpu``-marked ones add bf16 and attention/MoE-sized shapes against torch.bmm.
"""

from __future__ import annotations

import math

import pytest
import torch

import gemmtune
from gemmtune import kernels
from gemmtune.bench.measure import WorkerState, make_inputs, measure
from gemmtune.bench.timing import Timing
from gemmtune.configs import Choice
from gemmtune.device import DeviceInfo
from gemmtune.problem import Problem
from gemmtune.verify import check, tolerance

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
H100 = DeviceInfo.lookup("h100")
TILE = "triton_mm:BM16-BN32-BK16-S2-W4-G8"
DTYPES = [pytest.param(torch.float16, id="fp16"), pytest.param(torch.float32, id="fp32")]


def triton_ok():
    if DEVICE == "cpu" and not gemmtune.interpreter_enabled():
        pytest.skip("Triton kernels on a CPU need TRITON_INTERPRET=1 (set by conftest without a GPU)")


def randn(*shape, dtype=torch.float16):
    return torch.randn(*shape, device=DEVICE, dtype=torch.float32).to(dtype)


def assert_matches(out, a, b, dtype):
    ref = torch.bmm(a.double(), b.double())
    p = Problem.from_tensors(a, b)
    res = check(out, a, b, p)
    assert out.shape == ref.shape and out.dtype == dtype
    assert res.ok, (p.key, res.reason)


class FakeTimer:
    """Times nothing: the worker path (verify, then time) without the interpreter's slow timing."""

    def measure(self, launch, n_sets):
        launch(0)
        return Timing(0.01, math.nan, 1, 0.0, False)


# ------------------------------------------------------------------ the problem and its key
def test_key_round_trip_and_other_keys_unchanged():
    p = Problem.from_sizes(128, 128, 64, "fp16", layout_b="col", op="bmm", batch=32)
    assert p.key == "bmm:B32-M128-N128-K64:fp16->fp16:row.a/col.a"
    assert Problem.from_key(p.key) == p and p.batch == 32 and p.out_shape == (32, 128, 128)
    bc = Problem.from_sizes(64, 1408, 4096, "bf16", layout_b="bcast_row", op="bmm", batch=8)
    assert bc.key == "bmm:B8-M64-N1408-K4096:bf16->bf16:row.a/bcast_row.a" and Problem.from_key(bc.key) == bc
    assert bc.broadcast_b and not bc.broadcast_a and bc.slice_layout_b == "row"
    # mm / addmm / scaled_mm keys are what they were (stores and tables depend on them)
    assert Problem.from_sizes(32, 32, 28672, "bf16").key == "mm:M32-N32-K28672:bf16->bf16:row.a/row.a"
    assert Problem.from_sizes(4, 8, 16, "fp16", op="addmm").key == "addmm:M4-N8-K16:fp16->fp16:row.a/row.a"
    assert Problem.from_sizes(16, 64, 64, "e4m3", layout_b="col", op="scaled_mm", scale="row").key == \
        "scaled_mm:M16-N64-K64:e4m3->bf16:row.a/col.a:row"
    # flops and bytes count every matrix; a broadcast operand's bytes once
    assert p.flops == 32 * 2 * 128 * 128 * 64
    plain = Problem.from_sizes(64, 1408, 4096, "bf16", op="bmm", batch=8)
    assert plain.min_bytes - bc.min_bytes == 7 * 4096 * 1408 * 2


@pytest.mark.parametrize("bad,match", [
    ("bmm:M4-N4-K4:fp16->fp16:row.a/row.a", "B<int>-M<int>"),
    ("bmm:B0-M4-N4-K4:fp16->fp16:row.a/row.a", "batch"),
    ("mm:M4-N4-K4:fp16->fp16:row.a/bcast_row.a", "broadcast operand is bmm's"),
    ("bmm:B1-M4-N4-K4:fp16->fp16:row.a/bcast_row.a", "not canonical"),  # one matrix broadcasts nothing
])
def test_bad_keys_say_what_is_wrong(bad, match):
    with pytest.raises(ValueError, match=match):
        Problem.from_key(bad)


def test_validation_errors_are_clear():
    with pytest.raises(ValueError, match="batch is bmm's"):
        Problem.from_sizes(4, 4, 4, batch=2)
    with pytest.raises(ValueError, match="batch must be an int >= 1"):
        Problem.from_sizes(4, 4, 4, op="bmm", batch=0)
    with pytest.raises(TypeError, match="need scales"):  # fp8 is scaled_mm's
        Problem.from_sizes(4, 4, 4, "e4m3", op="bmm", batch=2)
    a = randn(3, 5, 8)
    with pytest.raises(ValueError, match=r"batch sizes differ.*expand"):
        gemmtune.matmul(a, randn(2, 8, 4))
    with pytest.raises(ValueError, match="a must be 2-D, or both operands 3-D"):
        gemmtune.matmul(a, randn(8, 4))
    with pytest.raises(ValueError, match="bmm: b must be 3-D"):
        Problem.from_tensors(a, randn(8, 4))
    with pytest.raises(ValueError, match=r"inner dimensions differ.*a.shape\[2\]=8 != b.shape\[1\]=9"):
        gemmtune.matmul(a, randn(3, 9, 4))
    with pytest.raises(ValueError, match="no fused epilogue"):
        gemmtune.matmul(a, randn(3, 8, 4), bias=randn(4))
    with pytest.raises(ValueError, match="takes 2-D operands"):
        Problem.from_tensors(a, randn(3, 8, 4), op="addmm")


def test_layouts_and_alignment_per_matrix():
    a = randn(4, 16, 32)
    assert Problem.from_tensors(a, randn(4, 32, 24)).key == "bmm:B4-M16-N24-K32:fp16->fp16:row.a/row.a"
    kt = randn(4, 24, 32).transpose(1, 2)  # q @ k.transpose(1, 2)
    assert Problem.from_tensors(a, kt).layout_b == "col"
    w = randn(1, 32, 24).expand(4, 32, 24)  # one matrix for every batch: stride 0
    assert Problem.from_tensors(a, w).layout_b == "bcast_row"
    assert Problem.from_tensors(a, randn(1, 24, 32).expand(4, 24, 32).transpose(1, 2)).layout_b == "bcast_col"
    # an aligned leading stride but an odd batch stride: every matrix but the first is unaligned
    odd = torch.randn(4 * 16 * 32 + 4, device=DEVICE).half().as_strided((4, 16, 32), (16 * 32 + 1, 32, 1))
    assert not Problem.from_tensors(odd, randn(4, 32, 24)).aligned_a
    # an offset view (a slice of a wider batch) keeps its real strides and alignment
    p = Problem.from_tensors(randn(4, 16, 40)[:, :, 8:], randn(4, 32, 24))
    assert (p.layout_a, p.aligned_a) == ("row", True)  # 16 B in, leading stride 80 B, batch stride 1280 B
    p = Problem.from_tensors(randn(4, 16, 37)[:, :, 5:], randn(4, 32, 24))
    assert (p.layout_a, p.aligned_a) == ("row", False)
    # batch 1: nothing broadcast, the batch stride does not matter
    one = Problem.from_tensors(randn(1, 16, 32), randn(1, 32, 24).expand(1, 32, 24))
    assert one.key == "bmm:B1-M16-N24-K32:fp16->fp16:row.a/row.a"


@pytest.mark.parametrize("layouts", [("row", "row"), ("col", "col"), ("strided", "bcast_col"),
                                     ("bcast_row", "row")], ids="-".join)
@pytest.mark.parametrize("aligned", [True, False], ids=["aligned", "unaligned"])
def test_worker_inputs_have_the_problems_layout(layouts, aligned):
    """make_inputs builds fresh random 3-D operands whose own Problem is the problem asked for."""
    p = Problem.from_sizes(24, 40, 32, "fp16", layout_a=layouts[0], layout_b=layouts[1], op="bmm", batch=3,
                           **({} if aligned else {"aligned_a": False, "aligned_b": False}))
    ((a, b),) = make_inputs(p, DEVICE, 1, seed=1)
    assert Problem.from_tensors(a, b) == p
    assert bool((a != 0).all()) and not torch.equal(a[0], a[1] if not p.broadcast_a else a[0] + 1)


# ------------------------------------------------------------------ families: serve or refuse
def test_every_family_serves_or_refuses_with_a_reason():
    p = Problem.from_sizes(256, 256, 1024, "bf16", layout_b="col", op="bmm", batch=16)
    serving = set()
    for fam in gemmtune.families():
        kept, rejected = gemmtune.space(p, fam, device=H100, with_rejected=True)
        if kept:
            serving.add(fam)
        else:
            assert rejected and all("does not serve bmm" in r for _, r in rejected), fam
            with pytest.raises(ValueError, match="does not serve bmm"):
                kernels.get(fam).validate(p, rejected[0][0].config)
    assert serving == {"triton_mm", "aten"}
    # the tiled space is mm's for one matrix (scaled and pruned the same way)
    mm = Problem.from_sizes(256, 256, 1024, "bf16", layout_b="col")
    assert [c.id for c in gemmtune.space(p, "triton_mm", device=H100)] == \
        [c.id for c in gemmtune.space(mm, "triton_mm", device=H100)]
    from gemmtune.tune import candidates

    ids = [c.id for c in candidates(p, gemmtune.families(), "default", H100)]
    assert ids[0] == "aten" and all(i.split(":")[0] in ("aten", "triton_mm") for i in ids)
    un = Problem.from_sizes(100, 100, 100, "bf16", op="bmm", batch=4, aligned_a=False)
    pads = [c.id for c in candidates(un, gemmtune.families(), "default", H100) if c.pad]
    assert "pad+aten" in pads and any(i.startswith("pad+triton_mm") for i in pads)
    assert un.padded().batch == 4 and un.padded().op == "bmm"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", ["plain", "transposed_b", "broadcast_b", "broadcast_a_col", "offset_view",
                                     "batch1", "strided"])
@pytest.mark.parametrize("choice", [TILE, "aten", "pad+" + TILE, "pad+aten"])
def test_bmm_against_fp64(choice, variant, dtype):
    if "triton" in choice:
        triton_ok()
    bt, m, n, k = 3, 19, 23, 37  # primes, a ragged K (EVEN_K off)
    a, b = randn(bt, m, k, dtype=dtype), randn(bt, k, n, dtype=dtype)
    if variant == "transposed_b":
        b = randn(bt, n, k, dtype=dtype).transpose(1, 2)
    elif variant == "broadcast_b":
        b = randn(1, k, n, dtype=dtype).expand(bt, k, n)
    elif variant == "broadcast_a_col":
        a = randn(1, k, m, dtype=dtype).transpose(1, 2).expand(bt, m, k)
    elif variant == "offset_view":
        a = randn(bt + 1, m, k + 5, dtype=dtype)[1:, :, 5:]
    elif variant == "batch1":
        a, b = a[:1], b[:1]
    elif variant == "strided":
        b = randn(bt, k, 2 * n, dtype=dtype)[:, :, ::2]
    out = gemmtune.matmul(a, b, choice=choice)
    assert_matches(out, a, b, dtype)


@pytest.mark.parametrize("tile", ["triton_mm:BM32-BN16-BK32-S1-W2-G1", "triton_mm:BM16-BN16-BK64-S3-W2-G4"])
def test_tiles_and_fp32_out(tile):
    triton_ok()
    a, b = randn(2, 33, 64), randn(2, 64, 17)  # EVEN_K on, M past one block, N below one
    assert_matches(gemmtune.matmul(a, b, choice=tile), a, b, torch.float16)
    out = gemmtune.matmul(a, b, choice=tile, out_dtype=torch.float32)
    assert out.dtype == torch.float32 and check(out, a, b, Problem.from_tensors(a, b, "fp32")).ok
    assert check(gemmtune.matmul(a, b, choice="aten", out_dtype="fp32"), a, b, Problem.from_tensors(a, b, "fp32")).ok


def test_batched_launch_args():
    from gemmtune.kernels import tiled

    a, b = randn(5, 40, 96), randn(1, 96, 24).expand(5, 96, 24)
    c = torch.empty(5, 40, 24, dtype=a.dtype, device=DEVICE)
    grid, args, consts = tiled._tiled_args(a, b, c, block_m=16, block_n=32, block_k=32, group_m=8, k_per_split=96)
    assert grid == (3 * 1, 1, 5) and consts["BATCHED"]
    names = tiled._tiled_mm_kernel.arg_names
    strides = dict(zip(names, args))
    assert (strides["stride_ab"], strides["stride_bb"], strides["stride_cb"]) == (40 * 96, 0, 40 * 24)
    grid2, args2, consts2 = tiled._tiled_args(a[0], b[0], c[0], block_m=16, block_n=32, block_k=32, group_m=8,
                                              k_per_split=96)
    assert grid2 == (3, 1) and not consts2["BATCHED"]
    # everything about one matrix is the same as the plain mm's; the batch strides' divisors are stated
    batch_only = ("BATCHED", "AB_DIV", "BB_DIV", "CB_DIV")
    assert {k: v for k, v in consts.items() if k not in batch_only} == \
        {k: v for k, v in consts2.items() if k not in batch_only}
    assert (consts["AB_DIV"], consts["BB_DIV"], consts["CB_DIV"]) == (16, 16, 16)  # 3840, 0 (broadcast), 960
    odd = torch.empty(5 * 3848, dtype=a.dtype, device=DEVICE).as_strided((5, 40, 96), (3848, 96, 1))  # 8 x 481
    assert tiled._tiled_args(odd, b, c, block_m=16, block_n=32, block_k=32, group_m=8, k_per_split=96)[2]["AB_DIV"] == 8
    assert (consts2["AB_DIV"], consts2["BB_DIV"], consts2["CB_DIV"]) == (1, 1, 1)
    with pytest.raises(ValueError, match="one K-slice and no epilogue"):
        tiled._tiled_args(a, b, c, block_m=16, block_n=32, block_k=32, group_m=8, k_per_split=32, split_mode=1)


def test_worker_verifies_and_refuses():
    p = Problem.from_sizes(20, 24, 48, "fp16", layout_b="bcast_col", op="bmm", batch=3)
    state = WorkerState(timer=FakeTimer(), device=DEVICE)
    choices = ["aten", "pad+aten"] + ([TILE, "pad+" + TILE] if DEVICE == "cuda" or gemmtune.interpreter_enabled()
                                      else [])
    for c in choices:
        r = measure(p, c, FakeTimer(), state=state)
        assert r.ok and r.rel_err < tolerance(p), (c, r.reason)
    for c in ("splitk:BM32-BN32-BK128-S4-W4-G8-SK2-det", "decompose_k:s2",
              "skinny:BM16-BN64-BK256-SK1-S4-W4-dot-det", "persistent_tma:BM64-BN64-BK64-S3-W4-G8"):
        r = measure(p, c, FakeTimer(), state=state)
        assert r.status == "unsupported" and "does not serve bmm" in r.reason, c


def test_a_wrong_batch_is_caught_by_the_worker(monkeypatch):
    """A kernel that computes only the first matrix (or reuses it) fails the fp64 check."""
    from gemmtune.kernels import aten

    def first_only(a, b, out, cfg, **kw):
        out.copy_(torch.bmm(a[:1], b[:1]).expand_as(out))
    monkeypatch.setattr(aten, "run", first_only)
    p = Problem.from_sizes(8, 8, 16, "fp32", op="bmm", batch=2)
    r = measure(p, "aten", FakeTimer(), state=WorkerState(timer=FakeTimer(), device=DEVICE))
    assert r.status == "wrong"


# ------------------------------------------------------------------ dispatcher, op, nn
def test_dispatcher_routes_3d_calls_to_bmm(tmp_path):
    from gemmtune.dispatch import compile_bmm, load, lookup
    from gemmtune.table import LookupTable, TableChoice, provenance

    a, b = randn(3, 20, 33, dtype=torch.float32), randn(3, 33, 17, dtype=torch.float32)
    d = lookup(None, dtype="fp32")  # no table: cuBLAS (torch.bmm)
    torch.testing.assert_close(d(a, b), torch.bmm(a, b))
    assert d.decision(20, 17, 33, batch=3).choice.id == "aten"
    if DEVICE == "cpu" and not gemmtune.interpreter_enabled():
        return
    p = Problem.from_tensors(a, b)
    t = LookupTable(provenance("t", "interp", "x", "x", "x", "by-hand"), {p.key: [TableChoice(Choice.parse(TILE), 1e-3)]})
    d = lookup(t, dtype="fp32")
    assert_matches(d(a, b), a, b, torch.float32)
    dec = d.decision(20, 17, 33, batch=3)
    assert (dec.choice.id, dec.source, dec.verified) == (TILE, "table", True)
    assert_matches(d(a, b), a, b, torch.float32)  # the cached path
    assert d.n_decisions == 1
    torch.testing.assert_close(d(a[0], b[0]), a[0] @ b[0])  # 2-D calls stay mm's
    # tuned hints: a bmm dispatcher tunes bmm problems; a tuned mm kernel serves bmm calls too
    seen = []

    def tune_fn(ps, **kw):
        seen.extend(p.key for p in ps)
        return {p.key: TILE for p in ps}
    bm = compile_bmm(batch=8, n=17, k=33, dtype="fp32", hints={"m": [8, 32]}, tune_fn=tune_fn)
    assert seen == ["bmm:B8-M8-N17-K33:fp32->fp32:row.u/row.u", "bmm:B8-M32-N17-K33:fp32->fp32:row.u/row.u"]
    assert_matches(bm(a, b), a, b, torch.float32)
    assert bm.decision(m=20, batch=3).source == "similarity"
    # split-K hint kernels refuse a bmm: the next candidate (cuBLAS) serves, saying why
    sk = compile_bmm(batch=8, n=17, k=512, dtype="fp32", hints={"m": [8]},
                     tune_fn=lambda ps, **kw: {p.key: "splitk:BM16-BN16-BK32-S2-W2-G8-SK2-det" for p in ps})
    a2, b2 = randn(2, 5, 512, dtype=torch.float32), randn(2, 512, 17, dtype=torch.float32)
    torch.testing.assert_close(sk(a2, b2), torch.bmm(a2, b2), rtol=1e-4, atol=1e-3)
    assert sk.decision(m=5, batch=2).choice.id == "aten" and "does not serve bmm" in sk.decision(m=5, batch=2).reason
    # save / load keeps bmm decisions by (batch, M, N, K)
    path = d.save(tmp_path / "d.json", binaries=False)
    assert load(path).decisions[(3, 20, 17, 33)].choice.id == TILE


@pytest.mark.parametrize("choice", [None, "aten", TILE])
def test_an_empty_batch_gives_an_empty_output_as_torch_bmm_does(choice):
    a, b = randn(0, 5, 7, dtype=torch.float16), randn(0, 7, 3, dtype=torch.float16)
    out = gemmtune.matmul(a, b, choice=choice)
    assert (out.shape, out.dtype) == (torch.bmm(a, b).shape, torch.float16)
    assert gemmtune.matmul(a, b, out_dtype=torch.float32).dtype == torch.float32
    a.requires_grad_()
    gemmtune.matmul(a, b).sum().backward()  # a grad_fn as torch.bmm's
    assert a.grad.shape == a.shape
    with pytest.raises(ValueError, match="takes no fused epilogue"):
        gemmtune.matmul(a.detach(), b, activation="relu")
    with pytest.raises(TypeError, match="out_dtype"):
        gemmtune.matmul(a.detach(), b, out_dtype=torch.bfloat16)


def test_custom_op_autograd_and_compile():
    from gemmtune.nn import BMM

    m = BMM(None, dtype="fp32")
    a = randn(2, 3, 4, dtype=torch.float32).requires_grad_()
    b = randn(1, 4, 5, dtype=torch.float32).expand(2, 4, 5).requires_grad_()
    out = m(a, b)
    out.sum().backward()
    ra, rb = a.detach().requires_grad_(), b.detach().requires_grad_()
    torch.bmm(ra, rb).sum().backward()
    torch.testing.assert_close(a.grad, ra.grad)
    torch.testing.assert_close(b.grad, rb.grad)
    f = torch.compile(lambda x, y: m(x, y) * 2, dynamic=True, fullgraph=True)
    x, y = randn(3, 5, 4, dtype=torch.float32), randn(3, 4, 7, dtype=torch.float32)
    torch.testing.assert_close(f(x, y), 2 * torch.bmm(x, y))
    with pytest.raises(Exception, match="batch sizes differ"):
        torch.ops.gemmtune.bmm(x, y[:2], m.handle)


def test_route_bmm_takes_3d_products_only():
    a, b = randn(2, 3, 4, dtype=torch.float32), randn(2, 4, 5, dtype=torch.float32)
    with gemmtune.nn.route_bmm(None, dtype="fp32") as r:
        outs = [a @ b, torch.bmm(a, b), torch.matmul(a, b), a.bmm(b)]
        a[0] @ b[0]                  # 2-D: torch's
        torch.matmul(a, b[:1])       # broadcasting batch sizes: torch's
        a.half() @ b.half()          # another dtype: torch's
    assert r.routed == 4
    for o in outs:
        torch.testing.assert_close(o, torch.bmm(a, b))
    with pytest.raises(ValueError, match="needs dtype"):
        gemmtune.nn.route_bmm(None)


# ------------------------------------------------------------------ capture, suites, CLI
class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96, bias=False)
        self.gate = torch.nn.Parameter(torch.randn(1, 16, 8))

    def forward(self, x):  # x: (batch, seq, 32); 2 heads of 16
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, 2, 16).permute(2, 0, 3, 1, 4).reshape(3, b * 2, s, 16)
        p = torch.softmax(q @ k.transpose(1, 2), -1)    # bmm: B col-major
        o = torch.bmm(p, v)                             # bmm: row-major
        return o @ self.gate.expand(b * 2, 16, 8)       # bmm: one matrix broadcast over the batch


def test_capture_records_bmm_and_the_suite_reads_it_back(tmp_path):
    from gemmtune.shapes import load_csv

    cap = gemmtune.capture(Attention(), inputs=[(torch.randn(3, 5, 32),), (torch.randn(3, 9, 32),)])
    bmm = [r for r in cap.records if r.op == "bmm"]
    assert {(r.batch, r.m, r.n, r.k, r.layout_b) for r in bmm} >= {
        (6, 5, 5, 16, "col"), (6, 5, 16, 5, "row"), (6, 5, 8, 16, "bcast_row"), (6, 9, 9, 16, "col")}
    assert all(r.tunable for r in bmm)
    assert set(cap.hints()) == {(96, 32, "float32", "col")}  # hints stay the layers' (mm/addmm)
    path = cap.write_suite(tmp_path / "suite.csv")
    text = path.read_text().splitlines()
    assert text[0].split(",")[:10] == ["group", "name", "M", "N", "K", "dtype", "layout_a", "layout_b", "op", "batch"]
    assert any(line.startswith("captured,model_bmm_b6_m5_3,5,8,16,float32,row,bcast_row,bmm,6,1,5,9,") for line in text)
    assert [s.problem for s in load_csv(path)] == cap.problems()
    assert "bmm:B6-M5-N8-K16:fp32->fp32:row.a/bcast_row.a" in {p.key for p in cap.problems()}


def test_suite_rows_and_shape_strings(tmp_path):
    from gemmtune.shapes import load_csv, load_suite, parse_shape, preset, with_preset_groups

    bad = tmp_path / "bad.csv"
    bad.write_text("group,name,M,N,K,dtype,op\ng,x,4,4,4,fp16,bmm\n")
    with pytest.raises(ValueError, match="bad.csv:2: .*needs its batch column"):
        load_csv(bad)
    bad.write_text("group,name,M,N,K,dtype,op,batch\ng,x,4,4,4,fp16,mm,2\n")
    with pytest.raises(ValueError, match="batch 2 is bmm's"):
        load_csv(bad)
    assert parse_shape("32x128x128x64:fp16", op="bmm").problem.key == "bmm:B32-M128-N128-K64:fp16->fp16:row.a/row.a"
    with pytest.raises(ValueError, match="BxMxNxK"):
        parse_shape("128x128x64", op="bmm")
    shapes = preset("bmm")
    assert 12 <= len(shapes) <= 16 and {s.group for s in shapes} == {"bmm"}
    ps = [s.problem for s in shapes]
    assert all(p.op == "bmm" and p.dtype == "bfloat16" for p in ps)
    assert any(p.layout_b == "col" and p.m == p.n for p in ps)   # attention QK^T
    assert any(s.name.startswith("moe") for s in shapes) and any(s.name.startswith("attn") for s in shapes)
    assert {p.batch for p in ps} >= {8, 32, 256} and max(p.m for p in ps) == 2048
    assert load_suite("bmm") == shapes
    public = preset("public")
    assert [s for s in with_preset_groups(public, ["bmm"]) if s.group == "bmm"] == shapes
    assert with_preset_groups(public, ["decode"]) == public


def test_tune_cli_op_bmm_store_and_table(tmp_path):
    from gemmtune.cli import main
    from gemmtune.store import ResultStore
    from gemmtune.table import load as load_table

    fams = "triton_mm,aten,splitk" if DEVICE == "cuda" or gemmtune.interpreter_enabled() else "aten"
    store, out = tmp_path / "s.sqlite", tmp_path / "t.json"
    assert main(["tune", "--op", "bmm", "--shape", "2x9x24x32:fp16", "--families", fams, "--store", str(store),
                 "--out", str(out), "--quiet"]) == 0
    key = "bmm:B2-M9-N24-K32:fp16->fp16:row.a/row.a"
    with ResultStore(store) as db:
        rows = [row for _, row in db.rows()]
    assert {r.problem_key for r in rows} == {key} and all(r.status == "ok" for r in rows)
    assert {r.family for r in rows} == set(fams.split(",")) - {"splitk"}  # split-K refuses: no candidates
    assert load_table(out).choices(Problem.from_key(key))
    assert main(["tune", "--op", "bmm", "--quiet"]) == 2  # no bmm shapes given: says so


# ------------------------------------------------------------------ model, export
def test_analytic_model_and_features_scale_with_the_batch():
    import numpy as np

    from gemmtune.model.analytic import AnalyticModel
    from gemmtune.model.features import FEATURE_NAMES, featurize

    am = AnalyticModel(H100)
    one = Problem.from_sizes(512, 512, 64, "bf16", layout_b="col", op="bmm", batch=1)
    many = one.with_sizes(batch=64)
    choices = [Choice.parse("aten"), Choice.parse("triton_mm:BM64-BN64-BK64-S3-W4-G8")]
    t1, t64 = am.predict(one, choices), am.predict(many, choices)
    assert all(3 < y / x < 64 for x, y in zip(t1, t64))  # one matrix is mostly launch time
    X = featurize(many, gemmtune.space(many, "triton_mm", device=H100) + choices, H100)
    assert X.shape[1] == len(FEATURE_NAMES) and np.isfinite(X).all()
    programs = FEATURE_NAMES.index("log2_programs")
    X1 = featurize(one, choices[1:], H100)
    assert featurize(many, choices[1:], H100)[0, programs] == X1[0, programs] + 6  # 64x the programs


# ------------------------------------------------------------------ GPU: real kernels, bf16
GPU_SHAPES = [  # (batch, M, N, K, layout_b): attention QK^T, an MoE expert GEMM (B broadcast or not), odd
    (32, 128, 128, 64, "col"), (8, 256, 1408, 2048, "row"), (4, 64, 4096, 1408, "bcast_row"), (7, 77, 130, 72, "row"),
]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gpu_bf16_default_space_verifies(shape):
    """Every default triton_mm config (and pad+ where unaligned) of a bf16 bmm compiles and
    matches fp64, as torch.bmm does."""
    from gemmtune.bench.measure import verify
    from gemmtune.tune import candidates

    bt, m, n, k, lay = shape
    p = Problem.from_sizes(m, n, k, "bf16", layout_b=lay, op="bmm", batch=bt)
    state = WorkerState(timer=FakeTimer(), device="cuda")
    bad = []
    for c in candidates(p, ["triton_mm", "aten"], "default", DeviceInfo.from_torch()):
        r, _ = verify(p, c, state)
        if not r.ok and r.status != "compile_error":
            bad.append(f"{c.id}: {r.status} {r.reason}")
    assert not bad, bad


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("variant", ["plain", "transposed", "broadcast", "offset"])
def test_gpu_bf16_matches_torch_bmm(variant):
    bt, m, n, k = 6, 200, 136, 264
    a = torch.randn(bt, m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(bt, k, n, device="cuda", dtype=torch.bfloat16)
    if variant == "transposed":
        b = torch.randn(bt, n, k, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    elif variant == "broadcast":
        b = b[:1].expand(bt, k, n)
    elif variant == "offset":
        a = torch.randn(bt, m, k + 8, device="cuda", dtype=torch.bfloat16)[:, :, 8:]
    for choice in ("triton_mm:BM64-BN64-BK32-S3-W4-G8", "triton_mm:BM128-BN128-BK64-S3-W8-G8",
                   "pad+triton_mm:BM64-BN64-BK64-S3-W4-G8"):
        out = gemmtune.matmul(a, b, choice=choice)
        ref = torch.bmm(a, b)
        assert check(out, a, b, Problem.from_tensors(a, b)).ok
        assert float((out.float() - ref.float()).norm() / ref.float().norm()) < 1e-2


def test_inductor_export_of_bmm():
    import gemmtune.inductor_export as ie
    from gemmtune.table import LookupTable, TableChoice, provenance

    p = Problem.from_sizes(64, 96, 128, "bf16", layout_b="col", op="bmm", batch=4)
    assert ie.inductor_key(p) == ("((torch.bfloat16, [4, 64, 128], [8192, 128, 1]), "
                                  "(torch.bfloat16, [4, 128, 96], [12288, 1, 128]))+bmm")
    bc = Problem.from_sizes(64, 96, 128, "bf16", layout_b="bcast_row", op="bmm", batch=4)
    t = LookupTable(provenance("test", "interp", "x", "x", "x", "by-hand"), {
        p.key: [TableChoice(Choice.parse("triton_mm:BM32-BN32-BK64-S2-W4-G4")), TableChoice(Choice.parse("pad+aten")),
                TableChoice(Choice.parse("aten"))],
        bc.key: [TableChoice(Choice.parse("aten"))]})
    r = ie.convert(t)
    (configs,) = r.table.values()
    assert [c["template_id"] for c in configs] == ["triton::bmm", "aten::bmm"]
    assert configs[0]["BLOCK_K"] == 64 and configs[0]["ALLOW_TF32"] is False and configs[0]["EVEN_K"] is True
    assert any("broadcast over the batch" in s.reason for s in r.skipped)
    assert any(s.choice == "pad+aten" for s in r.skipped)


@pytest.mark.slow  # a max-autotune compile on the CPU
def test_inductor_asks_for_our_bmm_key_on_cpu(tmp_path):
    """torch.compile(max-autotune) of torch.bmm on the CPU: Inductor's tuned_bmm asks for exactly
    our key, and its own parser returns our triton::bmm config."""
    import gemmtune.inductor_export as ie
    from conftest import cpu_lookup_choices
    from gemmtune.table import LookupTable, TableChoice, provenance

    if ie.unavailable_reason() is not None:
        pytest.skip(ie.unavailable_reason())
    from torch._inductor import config as icfg

    p = Problem.from_sizes(64, 96, 128, "bf16", layout_b="col", op="bmm", batch=4)
    t = LookupTable(provenance("test", "interp", "x", "x", "x", "by-hand"),
                    {p.key: [TableChoice(Choice.parse("triton_mm:BM32-BN32-BK64-S2-W4-G4"))]})
    exported = ie.export(t.save(tmp_path / "t.json"), tmp_path / "inductor.json")
    seen = {"keys": [], "lookups": []}
    lookup = cpu_lookup_choices(seen, [ie.TRITON_BMM])
    a = torch.randn(4, 64, 128, dtype=torch.bfloat16)
    b = torch.randn(4, 96, 128, dtype=torch.bfloat16).transpose(1, 2)
    # ATen's bmm as the CPU's only backend: tuned_bmm asks the lookup table the same (through the
    # ATen choice's get_template_configs), but no C++ GEMM template is generated, compiled and
    # benchmarked against it (~25 s of g++ on the CI machine, nothing this test looks at).
    old = icfg.force_disable_caches, icfg.max_autotune, icfg.max_autotune_gemm_backends
    try:
        ie.install(tmp_path / "inductor.json", choices=lookup)
        icfg.force_disable_caches, icfg.max_autotune, icfg.max_autotune_gemm_backends = True, True, "ATEN"
        torch._dynamo.reset()
        y = torch.compile(torch.bmm)(a, b)
    finally:
        ie.uninstall()
        icfg.force_disable_caches, icfg.max_autotune, icfg.max_autotune_gemm_backends = old
        torch._dynamo.reset()
    key = ie.inductor_key(p)
    assert key in seen["keys"] and list(exported.table) == [key]
    want = {k: v for k, v in exported.table[key][0].items() if k != "template_id"}
    assert {ie.TRITON_BMM: [want]} in seen["lookups"]
    torch.testing.assert_close(y, torch.bmm(a, b))


_IR_SCRIPT = r'''
import json, re, sys, torch, triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from gemmtune.kernels import tiled

def build(a, b, c):
    grid, args, consts = tiled._tiled_args(a, b, c, block_m=128, block_n=128, block_k=64, group_m=8,
                                           k_per_split=a.shape[-1])
    names = tiled._tiled_mm_kernel.arg_names
    sig, attrs = {}, {}
    for i, (nm, v) in enumerate(zip(names, args)):
        if isinstance(v, torch.Tensor):  # every pointer 16-byte aligned, as Triton would see them
            sig[nm], attrs[(i,)] = "*bf16", [["tt.divisibility", 16]]
        elif v == 1:
            sig[nm], consts[nm] = "constexpr", 1
        else:  # Triton's integer specialisation: multiples of 16 only
            sig[nm] = "i32"
            if v % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    sig.update((nm, "constexpr") for nm in names[len(args):])
    src = ASTSource(tiled._tiled_mm_kernel, sig, {(names.index(k),): v for k, v in consts.items()}, attrs)
    ck = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": 3})
    return {"async": len(re.findall("async_copy_global_to_local", ck.asm["ttgir"])),
            "scalar_loads": len(re.findall(r"ld\.global", ck.asm["ptx"])),
            "wgmma": len(re.findall(r"wgmma\.mma_async", ck.asm["ptx"]))}

m, n, k, bt = 512, 512, 64, 4
bf = torch.bfloat16
out = {"mm": build(torch.empty(m, k, dtype=bf), torch.empty(n, k, dtype=bf).t(), torch.empty(m, n, dtype=bf))}
# A's batch stride 8 x odd elements (16-byte steps, not 16 elements), B broadcast (stride 0)
a = torch.empty(bt * (m * k + 8), dtype=bf).as_strided((bt, m, k), (m * k + 8, k, 1))
b = torch.empty(1, n, k, dtype=bf).transpose(1, 2).expand(bt, k, n)
out["bmm"] = build(a, b, torch.empty(bt, m, n, dtype=bf))
print(json.dumps(out))
'''


@pytest.mark.slow  # an offline sm_90 compile (~7 s; no GPU needed)
def test_batched_kernel_pipelines_like_mm_on_sm90(tmp_path):
    """Compiled for sm_90 without a GPU (Triton's bundled ptxas): the batched kernel keeps mm's
    cp.async pipeline and wgmma when a batch stride is a multiple of 8 elements but not of 16 (the
    batch_divisor hint; without it every load of A went scalar) and when B is broadcast."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = os.pathsep.join([str(__import__("pathlib").Path(gemmtune.__file__).parents[1]),
                                         env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", _IR_SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        if "ptxas" in r.stderr or "backend" in r.stderr.lower() or "GPUTarget" in r.stderr:
            pytest.skip(f"this triton cannot compile for sm_90 offline: {r.stderr.strip().splitlines()[-1]}")
        raise AssertionError(r.stderr[-3000:])
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["mm"]["async"] > 0 and got["mm"]["wgmma"] > 0
    assert got["bmm"]["async"] == got["mm"]["async"] and got["bmm"]["wgmma"] == got["mm"]["wgmma"]
    assert got["bmm"]["scalar_loads"] == 0, got


def test_a_batch_over_one_grid_runs_in_several_launches(monkeypatch):
    """CUDA's grid axis 2 holds 65,535 programs: a larger batch runs in chunks (here the limit is
    set to 2, so that 5 matrices take 3 launches in the interpreter)."""
    triton_ok()
    from gemmtune.kernels import tiled

    launches = []
    real = tiled._launch
    monkeypatch.setattr(tiled, "MAX_GRID_Z", 2)
    monkeypatch.setattr(tiled, "_launch", lambda fn, grid, args, kw: (launches.append(grid), real(fn, grid, args, kw))[1])
    a, b = randn(5, 17, 40), randn(1, 40, 24).expand(5, 40, 24)
    for choice in (TILE, "pad+" + TILE):
        launches.clear()
        assert_matches(gemmtune.matmul(a, b, choice=choice), a, b, torch.float16)
        assert [g[2] for g in launches] == [2, 2, 1]


def test_dispatcher_benchmark_mode_times_the_hint_kernels_on_a_bmm():
    triton_ok()
    from gemmtune.dispatch import compile_bmm

    d = compile_bmm(batch=4, n=24, k=32, dtype="fp16", hints={"m": [8, 32]}, mode="benchmark", timer=FakeTimer(),
                    tune_fn=lambda ps, **kw: {ps[0].key: TILE, ps[1].key: "aten"})
    a, b = randn(3, 20, 32), randn(3, 32, 24).transpose(1, 2).contiguous().transpose(1, 2)
    assert_matches(d(a, b), a, b, torch.float16)
    dec = d.decision(m=20, batch=3)
    assert dec.source == "benchmark" and set(dec.times_ms) == {TILE, "aten"} and dec.verified


def test_route_bmm_leaves_products_of_other_static_sizes_to_torch():
    """A bmm whose K (or M, N) is not the dispatcher's static size is "every other call": it runs
    as usual. It used to reach the dispatcher and raise (attention with another head size)."""
    import gemmtune
    from gemmtune.nn import route_bmm
    bd = gemmtune.compile_bmm(batch=2, k=4, dtype="fp32", hints={"m": [3], "n": [5]},
                              tune_fn=lambda ps, **kw: {p.key: "aten" for p in ps})
    a, b = torch.randn(2, 3, 8), torch.randn(2, 8, 5)
    with route_bmm(bd) as r:
        y = torch.bmm(a, b)
        torch.bmm(torch.randn(2, 3, 4), torch.randn(2, 4, 5))
    torch.testing.assert_close(y, a @ b)
    assert r.routed == 1


def test_route_bmm_leaves_sparse_and_negated_operands_to_torch():
    """torch.bmm takes a sparse A and a negated view (the .imag of a conjugated complex tensor);
    inside ``route_bmm`` such a call reached the dispatcher, which refuses both by name, so a bmm
    that ran outside the mode raised inside it ("a is a torch.sparse_coo tensor", "a is a
    negated view"). They are "every other call": torch's, as usual."""
    from gemmtune.nn import route_bmm
    torch.manual_seed(0)
    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    neg = torch.randn(2, 3, 4, dtype=torch.complex64).conj().imag
    assert neg.is_neg()
    with route_bmm(None, dtype="fp32") as r:
        ys = torch.bmm(a.to_sparse(), b)
        yn = torch.bmm(neg, b)
        yb = neg.resolve_neg() @ neg.transpose(1, 2)
    torch.testing.assert_close(ys, torch.bmm(a, b))
    torch.testing.assert_close(yn, torch.bmm(neg.resolve_neg(), b))
    torch.testing.assert_close(yb, torch.bmm(neg.resolve_neg(), neg.resolve_neg().transpose(1, 2)))
    assert r.routed == 0


def test_space_names_what_it_takes():
    import gemmtune
    with pytest.raises(TypeError, match="problem must be a gemmtune.Problem"):
        gemmtune.space((64, 64, 64), "triton_mm")


def test_route_bmm_routes_under_torch_compile_dynamic():
    """A compiled function called inside ``route_bmm`` (or entering it) traces the mode: the bmm
    it takes is the gemmtune::bmm op, with dynamic=True as with static shapes, and a bmm of
    another K runs as usual. Under dynamic=True the sizes are symbols, and ``_takes``'s
    ``static in (None, size)`` compared them by identity in the trace: nothing was routed."""
    from torch._dynamo.testing import CompileCounterWithBackend

    from gemmtune.dispatch import compile_bmm
    torch.manual_seed(0)
    d = compile_bmm(batch=3, n=12, k=20, dtype="fp32", hints={"m": [8]},
                    tune_fn=lambda ps, **kw: {p.key: "triton_mm:BM16-BN16-BK16-S1-W2-G8" for p in ps})
    x, y = torch.randn(3, 9, 20), torch.randn(3, 20, 12)
    other = (torch.randn(3, 9, 21), torch.randn(3, 21, 12))  # K=21: not the dispatcher's
    for dynamic in (True, False):
        torch._dynamo.reset()
        cnt = CompileCounterWithBackend("aot_eager")
        f = torch.compile(lambda x, y, u, v: (x @ y) * 2 + torch.bmm(u, v), backend=cnt, dynamic=dynamic)
        with gemmtune.nn.route_bmm(d) as r:
            out = f(x, y, *other)
        torch.testing.assert_close(out, 2 * torch.bmm(x, y) + torch.bmm(*other), rtol=1e-4, atol=1e-4)
        code = cnt.graphs[0].code
        assert code.count("torch.ops.gemmtune.bmm") == 1 and "torch.bmm" in code, (dynamic, code)
        assert r.routed >= 1

        def inside(x, y):
            with gemmtune.nn.route_bmm(d):
                return torch.bmm(x, y) + 1
        torch._dynamo.reset()
        cnt = CompileCounterWithBackend("aot_eager")
        torch.testing.assert_close(torch.compile(inside, backend=cnt, dynamic=dynamic)(x, y), torch.bmm(x, y) + 1,
                                   rtol=1e-4, atol=1e-4)
        assert "torch.ops.gemmtune.bmm" in cnt.graphs[0].code, (dynamic, cnt.graphs[0].code)
    torch._dynamo.reset()


def test_bmm_module_refuses_what_torch_bmm_refuses():
    """nn.BMM ran 2-D operands as an mm (the dispatcher takes both), where torch.bmm raises:
    a drop-in accepted calls torch refuses."""
    from gemmtune.nn import BMM

    m = BMM(None, dtype="fp32")
    a, b = randn(3, 4, dtype=torch.float32), randn(4, 5, dtype=torch.float32)
    with pytest.raises(RuntimeError, match="3D"):
        torch.bmm(a, b)
    with pytest.raises(RuntimeError, match="3-D operands as torch.bmm does, got 2-D and 2-D"):
        m(a, b)
    with pytest.raises(RuntimeError, match="got 3-D and 2-D"):
        m(a.unsqueeze(0), b)
    torch.testing.assert_close(m(a.unsqueeze(0), b.unsqueeze(0)), torch.bmm(a.unsqueeze(0), b.unsqueeze(0)))
