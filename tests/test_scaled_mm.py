"""scaled_mm (fp8 operands, fp32 scales) as a problem op: key, scales, reference, spaces,
every family against fp64 on the dequantized operands, tuning, table and export.

What runs where. On a CPU: the problem, key, scale checks, reference math, spaces and
constraints always; torch._scaled_mm (the aten family) where this CPU build has a kernel for it
(torch 2.13's has); the Triton families in Triton's interpreter where it runs an fp8 tl.dot
(triton 3.9's does: ``_interpreter_fp8_reason`` probes it, and the tests skip with its reason
where it does not). On a GPU the same tests compile real kernels (fp8 wgmma on Hopper), and the
``gpu``-marked ones add the LLM-sized shapes, persistent_tma (sm 9.0+) and cuBLASLt's layouts.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import pytest
import torch

import gemmtune
from gemmtune import kernels
from gemmtune.bench.measure import WorkerState, measure
from gemmtune.bench.timing import Timing
from gemmtune.configs import Choice
from gemmtune.device import DeviceInfo
from gemmtune.epilogue import Epilogue
from gemmtune.inductor_export import Unsupported, check_problem, convert
from gemmtune.problem import Problem
from gemmtune.scaled import bind_scales, make_scales, reference, scale_mode
from gemmtune.table import LookupTable, TableChoice, provenance
from gemmtune.verify import TOLERANCE, check, compare, tolerance

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
H100 = DeviceInfo.lookup("h100")
HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9


@functools.cache
def _scaled_mm_reason() -> str | None:
    """Why torch._scaled_mm cannot run here (None when it can)."""
    a = torch.ones(16, 32, device=DEVICE).to(E4M3)
    b = torch.ones(16, 32, device=DEVICE).to(E4M3).t()
    one = torch.ones((), device=DEVICE)
    try:
        torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)
    except Exception as e:  # noqa: BLE001 - any failure is the reason
        return f"torch {torch.__version__} on {DEVICE} has no torch._scaled_mm: {type(e).__name__}: {e}"[:300]
    return None


@functools.cache
def _interpreter_fp8_reason() -> str | None:
    """Why the Triton kernels cannot run fp8 here (None when they can): on a CPU, the interpreter
    must run an fp8 tl.dot (a 32x32x32 e4m3 product against fp64)."""
    if DEVICE == "cuda":
        return None if torch.cuda.get_device_capability()[0] >= 9 or torch.cuda.get_device_capability() >= (8, 9) \
            else "fp8 tensor cores need sm 8.9+"
    if not gemmtune.interpreter_enabled():
        return "no GPU and no Triton interpreter (TRITON_INTERPRET=1)"
    try:
        a = torch.randn(32, 32).to(E4M3)
        b = torch.randn(32, 32).to(E4M3).t()
        out = gemmtune.scaled_mm(a, b, torch.ones(()), torch.ones(()), out_dtype=torch.float32,
                                 choice="triton_mm:BM32-BN32-BK32-S1-W4-G8")
    except Exception as e:  # noqa: BLE001
        return f"the Triton interpreter cannot run an fp8 tl.dot: {type(e).__name__}: {e}"[:300]
    if not torch.allclose(out.double(), a.double() @ b.double()):
        return "the Triton interpreter's fp8 tl.dot is wrong (32x32x32 e4m3 against fp64)"
    return None


def needs_aten():
    reason = _scaled_mm_reason()
    if reason:
        pytest.skip(reason)


def needs_rowwise_aten(scale: str):
    """Row-wise scales through torch._scaled_mm on the CPU need torch 2.13's CPU kernel (2.11, the
    GPU machine's torch, has per-tensor only; kernels.aten then says so by name)."""
    from gemmtune.kernels.aten import cpu_rowwise_scaled_mm
    if scale == "row" and DEVICE == "cpu" and not cpu_rowwise_scaled_mm():
        pytest.skip(f"torch {torch.__version__}'s CPU _scaled_mm has per-tensor scales only")


def needs_triton_fp8():
    reason = _interpreter_fp8_reason()
    if reason:
        pytest.skip(reason)


class OneShot:
    """A timer that runs the launch once (the interpreter's wall time says nothing anyway)."""

    representative = False

    def measure(self, launch, n_sets):
        launch(0)
        return Timing(1.0, 1.0, 1, 0.0, False)


def _operands(m, n, k, a_dtype=E4M3, b_layout="col", seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(a_dtype).to(DEVICE)
    if b_layout == "col":
        b = torch.randn(n, k, generator=g).to(E4M3).to(DEVICE).t()
    else:
        b = torch.randn(k, n, generator=g).to(E4M3).to(DEVICE)
    return a, b


def _scales(m, n, mode, seed=1):
    g = torch.Generator().manual_seed(seed)
    if mode == "tensor":
        return (torch.exp(0.5 * torch.randn((), generator=g)).to(DEVICE),
                torch.exp(0.5 * torch.randn((), generator=g)).to(DEVICE))
    return (torch.exp(0.5 * torch.randn(m, 1, generator=g)).to(DEVICE),
            torch.exp(0.5 * torch.randn(1, n, generator=g)).to(DEVICE))


# ------------------------------------------------------------------ the problem and its key
def test_key_round_trip_and_mm_addmm_keys_unchanged():
    p = Problem.from_sizes(16, 4096, 4096, "e4m3", "bf16", layout_b="col", op="scaled_mm", scale="row")
    assert p.key == "scaled_mm:M16-N4096-K4096:e4m3->bf16:row.a/col.a:row"
    assert Problem.from_key(p.key) == p
    q = Problem.from_sizes(7, 24, 40, "e5m2", "fp32", layout_b="col", op="scaled_mm", scale="tensor", bias=True)
    assert q.key == "scaled_mm:M7-N24-K40:e5m2->fp32:row.u/col.u:tensor+bias"
    assert Problem.from_key(q.key) == q and q.dtype_b == "float8_e4m3fn" and q.torch_dtype_b == E4M3
    # fp8 is one byte: a row of K = 40 is not 16-byte aligned, K = 48 is.
    assert Problem.from_sizes(7, 24, 48, "e4m3", op="scaled_mm", scale="row").aligned_a
    # The default output of a scaled product is bf16 (not the inputs' fp8).
    assert Problem.from_sizes(1, 16, 16, "e4m3", op="scaled_mm", scale="row").out_dtype == "bfloat16"
    # mm and addmm keys read exactly as before.
    assert Problem.from_sizes(32, 32, 28672, "bf16").key == "mm:M32-N32-K28672:bf16->bf16:row.a/row.a"
    assert Problem.from_sizes(8, 24, 40, "fp16", layout_b="col", op="addmm").key == \
        "addmm:M8-N24-K40:fp16->fp16:row.a/col.a"
    # min_bytes: one byte per operand element, the output, the bias and the scales.
    assert q.min_bytes == 7 * 40 + 40 * 24 + 4 * (7 + 1) * 24 + 8
    # pad+ runs a K-major B for fp8: the layout cuBLASLt and wgmma want.
    pp = Problem.from_sizes(7, 24, 40, "e4m3", layout_b="row", op="scaled_mm", scale="row").padded()
    assert (pp.n, pp.k, pp.layout_a, pp.layout_b, pp.aligned_a, pp.aligned_b) == (32, 48, "row", "col", True, True)


@pytest.mark.parametrize("bad, match", [
    ("scaled_mm:M1-N16-K16:e4m3->bf16:row.a/col.a", "5 ':'-separated parts"),
    ("mm:M1-N16-K16:bf16->bf16:row.a/col.a:row", "5 ':'-separated parts"),
    ("scaled_mm:M1-N16-K16:e4m3->fp16:row.a/col.a:row", "out_dtype must be one of"),
    ("scaled_mm:M1-N16-K16:e4m3->bf16:row.a/col.a:col", "scale in"),
    ("scaled_mm:M1-N16-K16:e4m3->bf16:row.a/col.a:row+bais", "<mode>\\+bias"),
    ("scaled_mm:M1-N16-K16:bf16->bf16:row.a/col.a:row", "multiplies fp8"),
    ("mm:M1-N16-K16:e4m3->e4m3:row.a/col.a", "need scales"),
    ("scaled_mm:M1-N16-K16:fp8->bf16:row.a/col.a:row", "not canonical"),
])
def test_bad_keys_say_what_is_wrong(bad, match):
    with pytest.raises(ValueError, match=match):
        Problem.from_key(bad)


def test_problem_and_operand_checks():
    with pytest.raises(ValueError, match="scaled_mm's"):
        Problem(4, 4, 4, "bf16", scale="row")
    with pytest.raises(ValueError, match="scaled_mm's"):
        Problem(4, 4, 4, "bf16", op="addmm", bias=True)
    with pytest.raises(TypeError, match="need scales"):
        Problem.from_tensors(torch.ones(4, 4).to(E4M3), torch.ones(4, 4).to(E4M3))
    with pytest.raises(TypeError, match="e5m2 x e5m2"):
        Problem.from_tensors(torch.ones(4, 4).to(E5M2), torch.ones(4, 4).to(E5M2), op="scaled_mm", scale="row")
    p = Problem.from_tensors(torch.ones(4, 32).to(E5M2), torch.ones(8, 32).to(E4M3).t(), "fp32",
                             op="scaled_mm", scale="tensor")
    assert p.key == "scaled_mm:M4-N8-K32:e5m2->fp32:row.a/col.a:tensor"


# ------------------------------------------------------------------ scales
def test_bind_scales_accepts_torch_shapes_and_flattens():
    d = torch.device("cpu")
    for sa, sb in ((torch.ones(()), torch.ones(1)), (torch.ones(1, 1), torch.ones(1, 1))):
        e = bind_scales(5, 8, sa, sb, device=d, out_dtype=torch.bfloat16)
        assert e.spec == Epilogue(scale="tensor") and e.scale_a.shape == (1,) and e.scale_b.shape == (1,)
    e = bind_scales(5, 8, torch.ones(5, 1), torch.ones(1, 8), device=d, out_dtype=torch.bfloat16,
                    bias=torch.zeros(8, dtype=torch.bfloat16))
    assert e.spec == Epilogue(bias=True, scale="row") and e.scale_a.shape == (5,) and e.scale_b.shape == (8,)
    assert e.spec.id == "scale.row+bias" and Epilogue.parse("scale.row+bias") == e.spec
    assert Epilogue.parse("scale.tensor") == Epilogue(scale="tensor")
    assert scale_mode(1, 1, torch.ones(1, 1), torch.ones(1, 1)) == "tensor"
    # A padded pad+ output widens the row-wise scale_b with it (zeros in the cut-off columns).
    assert e.padded(3).scale_b.shape == (11,) and e.padded(3).scale_a is e.scale_a


@pytest.mark.parametrize("sa, sb, err, match", [
    (torch.ones(5, 1), torch.ones(8, 1), ValueError, r"scale_b must have shape \(1, 8\) or \(8,\)"),
    (torch.ones(1, 5), torch.ones(1, 8), ValueError, r"scale_a must have shape \(5, 1\) or \(5,\)"),
    (torch.ones(5, 1, dtype=torch.float64), torch.ones(1, 8), TypeError, "scale_a must be float32"),
    (torch.ones(()), torch.ones((), dtype=torch.bfloat16), TypeError, "scale_b must be float32"),
    (torch.ones(5, 1), 2.0, TypeError, "scale_b must be a torch.Tensor"),
    (torch.tensor([1.0, math.nan, 1, 1, 1]), torch.ones(8), ValueError, "scale_a holds 1 NaN or infinite"),
    (torch.ones(()), torch.tensor(math.inf), ValueError, "scale_b holds 1 NaN or infinite"),
])
def test_bad_scales_get_a_clear_error(sa, sb, err, match):
    with pytest.raises(err, match=match):
        bind_scales(5, 8, sa, sb, device=torch.device("cpu"), out_dtype=torch.bfloat16)
    # The public entry says the same before any kernel runs.
    a, b = torch.ones(5, 32).to(E4M3), torch.ones(8, 32).to(E4M3).t()
    with pytest.raises(err, match=match):
        gemmtune.scaled_mm(a, b, sa, sb, choice="aten")


def test_bad_bias_and_out_dtype():
    a, b = torch.ones(5, 32).to(E4M3), torch.ones(8, 32).to(E4M3).t()
    one = torch.ones(())
    with pytest.raises(TypeError, match="bias must have the output's dtype"):
        gemmtune.scaled_mm(a, b, one, one, bias=torch.zeros(8), choice="aten")
    with pytest.raises(ValueError, match=r"bias must have shape \(N,\)"):
        gemmtune.scaled_mm(a, b, one, one, bias=torch.zeros(5, dtype=torch.bfloat16), choice="aten")
    with pytest.raises(TypeError, match="out_dtype must be one of"):
        gemmtune.scaled_mm(a, b, one, one, out_dtype=torch.float16, choice="aten")


def test_make_scales_are_distinct_and_flat():
    row = Problem.from_sizes(6, 24, 48, "e4m3", layout_b="col", op="scaled_mm", scale="row")
    sa, sb = make_scales(row, "cpu", 0)
    assert sa.shape == (6,) and sb.shape == (24,) and sa.dtype == sb.dtype == torch.float32
    assert len(set(sa.tolist())) == 6 and (sa != 1).all() and torch.isfinite(sb).all()
    ta, tb = make_scales(dataclasses.replace(row, scale="tensor"), "cpu", 0)
    assert ta.shape == tb.shape == (1,)


# ------------------------------------------------------------------ reference and tolerance
def test_reference_is_the_dequantized_product():
    a, b = _operands(6, 24, 48)
    sa, sb = _scales(6, 24, "row")
    bias = torch.randn(24, device=DEVICE).to(torch.bfloat16)
    want = (a.double() * sa.double()) @ (b.double() * sb.double()) + bias.double()
    assert torch.equal(reference(a, b, sa, sb, bias), want)
    assert torch.equal(reference(a, b, sa.reshape(-1), sb.reshape(-1), bias), want)  # flat, as bound
    ta, tb = _scales(6, 24, "tensor")
    assert torch.allclose(reference(a, b, ta, tb), (a.double() @ b.double()) * float(ta) * float(tb))
    p = Problem.from_tensors(a, b, "bf16", op="scaled_mm", scale="row", bias=True)
    assert check(want.to(torch.bfloat16), a, b, p, bias, scales=(sa, sb)).ok
    # A dropped scale, swapped row scales or a dropped bias fail the check.
    assert not check(reference(a, b, torch.ones(6, 1, device=DEVICE), sb, bias).bfloat16(), a, b, p, bias,
                     scales=(sa, sb)).ok
    assert not check(reference(a, b, sa.flip(0), sb, bias).bfloat16(), a, b, p, bias, scales=(sa, sb)).ok
    assert not check(reference(a, b, sa, sb).bfloat16(), a, b, p, bias, scales=(sa, sb)).ok
    with pytest.raises(ValueError, match="scales=.* are needed"):
        check(want, a, b, p, bias)
    with pytest.raises(ValueError, match="a bias is needed"):
        check(want, a, b, p, scales=(sa, sb))


def test_fp8_tolerances_exist_and_match_the_output_rounding():
    for dt in ("e4m3", "e5m2"):
        for out, tol in (("bf16", 1e-2), ("fp32", 5e-3)):
            p = Problem.from_sizes(4, 16, 32, dt, out, layout_b="col", op="scaled_mm", scale="tensor")
            assert tolerance(p) == tol
    # A bf16-rounded exact product passes with room; an fp8-rounded one (the quantization error
    # the dequantized reference excludes) would not.
    a, b = _operands(64, 64, 256)
    ref = a.double() @ b.double()
    assert compare(ref.bfloat16(), ref, TOLERANCE[("float8_e4m3fn", "bfloat16")]).rel_err < 3e-3
    assert not compare(ref.to(E4M3), ref, TOLERANCE[("float8_e4m3fn", "bfloat16")]).ok


# ------------------------------------------------------------------ spaces and constraints
def test_fp8_spaces_have_block_k_32_or_more_and_reasons():
    p = Problem.from_sizes(16, 4096, 4096, "e4m3", layout_b="col", op="scaled_mm", scale="row")
    for fam in ("triton_mm", "splitk", "persistent_tma", "skinny"):
        kept, rejected = gemmtune.space(p, fam, device=H100, with_rejected=True)
        assert kept, fam
        assert all(c.config.block_k >= 32 for c in kept), fam
    bf16 = Problem.from_sizes(16, 4096, 4096, "bf16", layout_b="col")
    # The default fp8 tiles are the 16-bit ones with BLOCK_K doubled.
    bks = {c.config.block_k for c in gemmtune.space(p, "triton_mm", device=H100)}
    assert max(bks) == 2 * max(c.config.block_k for c in gemmtune.space(bf16, "triton_mm", device=H100))
    # The exhaustive space's 16-deep tiles are deepened to 32 (scale_tile); a 16-deep tile is refused.
    assert min(c.config.block_k for c in gemmtune.space(p, "triton_mm", "exhaustive", device=H100)) == 32
    from gemmtune.configs import TileConfig, tile_constraint
    assert "fp8 wgmma consumes K = 32" in tile_constraint(TileConfig(64, 64, 16, 3, 4), p, H100)
    assert tile_constraint(TileConfig(64, 64, 16, 3, 4), bf16, H100) is None
    # persistent_tma: fp8 needs K-major operands; a row-major B is left to pad+.
    rowb = Problem.from_sizes(16, 4096, 4096, "e4m3", layout_b="row", op="scaled_mm", scale="row")
    _, rej = gemmtune.space(rowb, "persistent_tma", device=H100, with_rejected=True)
    assert rej and all("K-major" in r for _, r in rej)


@pytest.mark.parametrize("choice", [
    "triton_mm:BM32-BN32-BK16-S1-W4-G8",
    "pad+triton_mm:BM32-BN32-BK16-S1-W4-G8",
    "splitk:BM16-BN16-BK16-S1-W2-G8-SK2-det",
    "skinny:BM16-BN16-BK16-SK2-S1-W4-dot-atomic",
    "persistent_tma:BM16-BN32-BK16-S2-W4-G8",
    "decompose_k:s16",  # K/split = 16: its parts' tile (decompose_k.tile_for) is 16 deep
])
@pytest.mark.parametrize("dtype", ["e4m3", "e5m2"])
def test_explicit_fp8_choice_with_block_k_under_32_is_refused(choice, dtype, tmp_path):
    """The spaces prune fp8 tiles with BLOCK_K < 32 (configs.block_k_reason: Hopper's fp8 wgmma
    consumes K = 32 per instruction), but an explicit choice, or a table's, with BK16 was accepted
    and run. Refused now by the same rule, naming it; the same choice on bf16 still runs, and the
    CUDA-core skinny path (no wgmma) may stay 16 deep."""
    from gemmtune.table import TableError, load

    p = Problem.from_sizes(16, 64, 256, dtype, layout_b="col", op="scaled_mm", scale="tensor")
    c = Choice.parse(choice)
    with pytest.raises(ValueError, match=r"BLOCK_K=16 < 32: float8_e\w+ operands need BLOCK_K >= 32") as e:
        kernels.validate_choice(c, p)
    from gemmtune.configs import block_k_reason
    assert block_k_reason(16, p) in str(e.value)
    # The space's reason is the same rule's (decompose_k's space refuses parts under 128 first).
    if not c.pad and c.family != "decompose_k":
        assert block_k_reason(16, p) in (kernels.spec(c.family).constraint(c.config, p, H100) or "")
    a, b = _operands(16, 64, 256, E5M2 if dtype == "e5m2" else E4M3)
    sa, sb = _scales(16, 64, "tensor")
    with pytest.raises(ValueError, match="fp8 wgmma consumes K = 32"):
        gemmtune.scaled_mm(a, b, sa, sb, choice=choice)
    # A table naming it is refused on load, naming the entry.
    path = tmp_path / "t.json"
    path.write_text(LookupTable(provenance("t", "i", "x", "x", "x", "by-hand"),
                                {p.key: [TableChoice(c, 0.01)]}).dumps())
    with pytest.raises(TableError, match="BLOCK_K >= 32"):
        load(path)
    kernels.validate_choice(c, Problem.from_sizes(16, 64, 256, "bf16", layout_b="col"))
    kernels.validate_choice(Choice.parse("skinny:BM8-BN16-BK16-SK1-S1-W4-core-det"), p)


@pytest.mark.parametrize("key, why", [
    ("scaled_mm:M16-N64-K64:e4m3->bf16:row.a/col.a:row", None),
    ("scaled_mm:M16-N64-K64:e4m3->fp32:row.a/col.a:tensor+bias", None),
    ("scaled_mm:M16-N64-K64:e4m3->bf16:row.a/row.a:row", "A row-major and B column-major"),
    ("scaled_mm:M16-N64-K64:e4m3->bf16:col.a/col.a:row", "A row-major and B column-major"),
    ("scaled_mm:M16-N24-K64:e4m3->bf16:row.a/col.a:row", "K and N multiples of 16"),
    ("scaled_mm:M16-N64-K40:e4m3->bf16:row.u/col.u:tensor", "K and N multiples of 16"),
    ("scaled_mm:M16-N64-K64:e4m3->fp32:row.a/col.a:row", "row-wise scaling writes bf16 only"),
])
def test_aten_constraint_names_torch_scaled_mm_rules(key, why):
    p = Problem.from_key(key)
    reason = kernels.aten.constraint(kernels.aten.CONFIG(), p, H100)
    assert reason is None if why is None else why in reason
    # pad+aten runs on the padded K-major copy: only the out_dtype rule stays.
    assert (kernels.aten.constraint(kernels.aten.CONFIG(), p.padded(), H100) is None) == (
        why is None or "bf16 only" not in why)


def test_tuner_offers_pad_variants_where_cublaslt_cannot_take_the_layout():
    from gemmtune.tune import candidates

    p = Problem.from_sizes(16, 64, 64, "e4m3", layout_b="row", op="scaled_mm", scale="tensor")
    ids = [c.id for c in candidates(p, ["triton_mm", "persistent_tma"], "default", H100)]
    assert ids[0] == "aten" and "pad+aten" in ids and any(i.startswith("pad+persistent_tma") for i in ids)
    tn = Problem.from_sizes(16, 64, 64, "e4m3", layout_b="col", op="scaled_mm", scale="tensor")
    assert not any(c.pad for c in candidates(tn, ["triton_mm"], "default", H100))


def test_analytic_model_gives_fp8_twice_the_math_rate():
    from gemmtune.model.analytic import AnalyticModel

    am = AnalyticModel(H100)
    big = dict(m=8192, n=8192, k=8192, layout_b="col")
    p8 = Problem.from_sizes(big["m"], big["n"], big["k"], "e4m3", layout_b="col", op="scaled_mm", scale="tensor")
    p16 = Problem.from_sizes(big["m"], big["n"], big["k"], "bf16", layout_b="col")
    aten = [Choice.parse("aten")]
    t8, t16 = am.predict(p8, aten)[0], am.predict(p16, aten)[0]
    assert 0.4 < t8 / t16 < 0.6


def test_inductor_export_of_scaled_mm():
    """Exported under tuned_scaled_mm's keys (tests/test_export_fp8.py has the details); a layout
    torch._scaled_mm does not take is skipped with the reason."""
    p = Problem.from_sizes(64, 64, 64, "e4m3", layout_b="col", op="scaled_mm", scale="row")
    check_problem(p)
    t = LookupTable(provenance("test", "interp", "x", "x", "x", "by-hand"),
                    {p.key: [TableChoice(Choice.parse("triton_mm:BM64-BN64-BK64-S3-W4-G8"), 0.01)]})
    r = convert(t)
    assert len(r.table) == 4 and not r.skipped
    assert all(v[0]["template_id"] == "triton::mm" for v in r.table.values())
    q = Problem.from_sizes(64, 64, 64, "e4m3", layout_b="row", op="scaled_mm", scale="row")
    with pytest.raises(Unsupported, match="B column-major only"):
        check_problem(q)


# ------------------------------------------------------------------ aten: torch._scaled_mm
@pytest.mark.parametrize("mode", ["tensor", "row"])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
def test_aten_runs_torch_scaled_mm(mode, out_dtype, with_bias):
    needs_aten()
    m, n, k = 5, 32, 64
    a, b = _operands(m, n, k)
    sa, sb = _scales(m, n, mode)
    bias = torch.randn(n, device=DEVICE).to(out_dtype) * 8 if with_bias else None
    p = Problem.from_tensors(a, b, out_dtype, op="scaled_mm", scale=mode, bias=with_bias)
    why = kernels.aten.scaled_reason(p)
    if why:
        with pytest.raises(ValueError, match="bf16 only"):
            gemmtune.scaled_mm(a, b, sa, sb, bias, out_dtype, choice="aten")
        return
    if mode == "row" and DEVICE == "cpu" and not kernels.aten.cpu_rowwise_scaled_mm():
        with pytest.raises(ValueError, match="CPU _scaled_mm takes per-tensor scales only"):
            gemmtune.scaled_mm(a, b, sa, sb, bias, out_dtype, choice="aten")  # (torch 2.11 asserted inside)
        return
    out = gemmtune.scaled_mm(a, b, sa, sb, bias, out_dtype, choice="aten")
    assert out.dtype == out_dtype
    res = check(out, a, b, p, bias, scales=(sa, sb))
    assert res.ok, res.reason


def test_default_choice_and_table_lookup():
    needs_aten()
    needs_rowwise_aten("row")
    a, b = _operands(4, 32, 64)
    sa, sb = _scales(4, 32, "row")
    p = Problem.from_tensors(a, b, "bf16", op="scaled_mm", scale="row")
    assert gemmtune.scaled.default_choice(p).id == "aten"
    assert gemmtune.scaled.default_choice(p.with_sizes(n=24)).family == "triton_mm"  # N % 16: not cuBLASLt's
    out = gemmtune.scaled_mm(a, b, sa, sb, table=LookupTable(provenance("t", "i", "x", "x", "x", "by-hand"), {
        p.key: [TableChoice(Choice.parse("aten"), 0.01)]}))
    assert check(out, a, b, p, scales=(sa, sb)).ok


# ------------------------------------------------------------------ the Triton families
FAMILY_CHOICES = [
    "triton_mm:BM16-BN32-BK32-S1-W2-G8",
    "splitk:BM16-BN16-BK32-S1-W2-G8-SK2-det",
    "skinny:BM16-BN16-BK32-SK2-S1-W4-dot-atomic",
    "skinny:BM8-BN16-BK32-SK1-S1-W4-core-det",
    "persistent_tma:BM16-BN32-BK32-S2-W4-G8",
    "decompose_k:s2",
    "pad+triton_mm:BM16-BN32-BK32-S1-W2-G8",
    "pad+aten",
]


@pytest.mark.parametrize("choice", FAMILY_CHOICES)
@pytest.mark.parametrize("key", [
    "scaled_mm:M9-N48-K256:e4m3->bf16:row.a/col.a:row+bias",
    "scaled_mm:M1-N40-K256:e5m2->fp32:row.a/col.a:tensor",
    "scaled_mm:M7-N37-K264:e4m3->bf16:row.u/col.u:tensor+bias",  # odd N, K not a multiple of 16
])
def test_worker_verifies_each_family_against_fp64(key, choice):
    needs_triton_fp8()
    p = Problem.from_key(key)
    c = Choice.parse(choice)
    if c.family == "aten":
        needs_aten()
        needs_rowwise_aten(p.scale)
    if c.family == "persistent_tma" and DEVICE == "cuda" and not HOPPER:
        pytest.skip("TMA needs an sm 9.0+ GPU")
    fam = kernels.get(c.family)
    target = p.padded() if c.pad else p
    cfg_reason = fam.constraint(c.config, target, H100)
    res = measure(p, c, OneShot(), state=WorkerState(timer=OneShot(), device=DEVICE))
    if cfg_reason and c.family in ("aten", "persistent_tma", "decompose_k"):
        # The families whose constraint is the problem's own (not a tuning filter) refuse it, or
        # (decompose_k, whose split must divide K) report it unsupported.
        assert res.status.value in ("unsupported", "error", "ok"), res
        if res.status.value != "ok":
            return
    assert res.status.value == "ok", res
    assert res.rel_err < tolerance(p)


def test_a_dropped_scale_is_caught_by_the_worker(monkeypatch):
    """A kernel that ignores the scales (runs with the epilogue switched off) fails verification."""
    needs_triton_fp8()
    from gemmtune.bench import faults

    p = Problem.from_key("scaled_mm:M9-N48-K256:e4m3->bf16:row.a/col.a:row")
    choice = "triton_mm:BM16-BN32-BK32-S1-W2-G8"
    monkeypatch.setattr(faults, "_FAULTS", {choice: "drop_bias"})  # runs with epilogue=None
    res = faults.handle("bench", {"problem": p.key, "choice": choice, "seed": 1},
                        WorkerState(timer=OneShot(), device=DEVICE))
    assert res["status"] == "wrong", res


@pytest.mark.parametrize("mode", ["tensor", "row"])
def test_public_entry_runs_triton_with_bias_and_odd_shapes(mode):
    needs_triton_fp8()
    for m, n, k in ((1, 24, 40), (13, 37, 72)):
        a, b = _operands(m, n, k, b_layout="row")
        sa, sb = _scales(m, n, mode)
        bias = (torch.randn(n, device=DEVICE) * 8).to(torch.bfloat16)
        out = gemmtune.scaled_mm(a, b, sa, sb, bias, choice="triton_mm:BM16-BN32-BK32-S1-W2-G8")
        p = Problem.from_tensors(a, b, "bf16", op="scaled_mm", scale=mode, bias=True)
        res = check(out, a, b, p, bias, scales=(sa, sb))
        assert res.ok, (m, n, k, res.reason)


# ------------------------------------------------------------------ tune -> store -> table
def test_tune_cli_op_scaled_mm_store_and_table(tmp_path):
    needs_aten()
    needs_rowwise_aten("row")
    from gemmtune.cli import main
    from gemmtune.store import ResultStore
    from gemmtune.table import load as load_table

    store, out = tmp_path / "s.sqlite", tmp_path / "t.json"
    rc = main(["tune", "--shape", "9x32x64", "--op", "scaled_mm", "--scale", "row", "--bias", "--families", "aten",
               "--store", str(store), "--out", str(out), "--quiet"])
    assert rc == 0
    key = "scaled_mm:M9-N32-K64:e4m3->bf16:row.a/col.a:row+bias"
    with ResultStore(store) as db:
        assert {row.problem_key: row.status for _, row in db.rows()} == {key: "ok"}
    assert [tc.choice.id for tc in load_table(out).choices(Problem.from_key(key))] == ["aten"]
    # A suite row with op scaled_mm reads its scale, out_dtype and B layout (default col).
    suite = tmp_path / "suite.csv"
    suite.write_text("group,name,M,N,K,dtype,op,scale,out_dtype\nfp8,x,9,32,64,e4m3,scaled_mm,tensor,fp32\n")
    from gemmtune.shapes import load_csv
    (s,) = load_csv(suite)
    assert s.problem.key == "scaled_mm:M9-N32-K64:e4m3->fp32:row.a/col.a:tensor"
    assert main(["tune", "--shape", "9x32x64", "--scale", "row", "--quiet"]) == 2  # scaled_mm's flag on mm


def test_public_suite_has_the_fp8_group():
    from gemmtune.shapes import preset

    fp8 = [s.problem for s in preset("public") if s.group == "fp8"]
    assert fp8 and all(p.op == "scaled_mm" and p.dtype == "float8_e4m3fn" for p in fp8)
    assert {p.scale for p in fp8} == {"tensor", "row"}
    assert any(p.m <= 32 for p in fp8) and any(p.m >= 512 for p in fp8)  # decode and prefill
    assert all(kernels.aten.scaled_reason(p) is None for p in fp8)  # cuBLASLt takes every one


# ------------------------------------------------------------------ GPU
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("key", [
    "scaled_mm:M16-N6144-K4096:e4m3->bf16:row.a/col.a:row",
    "scaled_mm:M1-N4096-K4096:e4m3->bf16:row.a/col.a:tensor+bias",
    "scaled_mm:M512-N4096-K4096:e5m2->fp32:row.a/col.a:tensor",
    "scaled_mm:M333-N4097-K1025:e4m3->bf16:row.u/col.u:row+bias",
    "scaled_mm:M64-N512-K1024:e4m3->bf16:row.a/row.a:row",
])
def test_gpu_default_spaces_verify(key):
    """Every default-space candidate of every family on a real GPU: fresh random inputs,
    verified against fp64 (wrong results would show as 'wrong')."""
    from gemmtune.tune import candidates

    p = Problem.from_key(key)
    dev = DeviceInfo.from_torch()
    state = WorkerState(timer=OneShot(), device="cuda")
    statuses = {}
    for c in candidates(p, list(kernels.TRITON_FAMILIES), "default", dev)[:60]:
        r = measure(p, c, OneShot(), state=state)
        statuses[c.id] = (r.status.value, r.reason[:200])
        assert r.status.value != "wrong", (c.id, r)
    assert any(s == "ok" for s, _ in statuses.values()), statuses


@pytest.mark.gpu
@pytest.mark.skipif(not HOPPER, reason="fp8 TMA and cuBLASLt's fp8 need an sm 9.0+ GPU")
def test_gpu_persistent_tma_and_cublaslt_agree():
    a, b = _operands(256, 512, 1024)
    sa, sb = _scales(256, 512, "row")
    p = Problem.from_tensors(a, b, "bf16", op="scaled_mm", scale="row")
    for choice in ("aten", "persistent_tma:BM128-BN128-BK128-S3-W8-G8", "triton_mm:BM64-BN128-BK128-S3-W4-G8"):
        out = gemmtune.scaled_mm(a, b, sa, sb, choice=choice)
        res = check(out, a, b, p, scales=(sa, sb))
        assert res.ok, (choice, res.reason)


@pytest.mark.gpu
@pytest.mark.skipif(not HOPPER or torch.cuda.device_count() < 2, reason="needs 2 sm 9.0+ GPUs")
def test_gpu_scaled_mm_runs_on_the_operands_gpu():
    """Operands on cuda:1 while cuda:0 is current: every family runs there (kernels.run_choice
    switches device; Triton launches on the current one), right against fp64, and cuda:0 stays current."""
    a, b = _operands(77, 520, 1024)
    sa, sb = _scales(77, 520, "row")
    p = Problem.from_tensors(a, b, "bf16", op="scaled_mm", scale="row")
    a, b, sa, sb = (t.to("cuda:1") for t in (a, b, sa, sb))
    for choice in ("pad+aten", "persistent_tma:BM128-BN128-BK128-S3-W8-G8", "triton_mm:BM64-BN128-BK128-S3-W4-G8"):
        out = gemmtune.scaled_mm(a, b, sa, sb, choice=choice)
        assert out.device == a.device and torch.cuda.current_device() == 0
        res = check(out, a, b, p, scales=(sa, sb))
        assert res.ok, (choice, res.reason)


def test_max_element_check_allows_one_output_ulp_on_heavy_tailed_outputs():
    """Row x column scales put single outputs at ~100x rms: the correctly rounded bf16 output of
    such a product passes (each element may miss by one bf16 ulp at its own size), and one wrong
    element among them still fails."""
    gen = torch.Generator().manual_seed(7)
    m, n = 512, 640
    sa = torch.exp(0.5 * torch.randn(m, 1, generator=gen, dtype=torch.float64)) ** 3
    sb = torch.exp(0.5 * torch.randn(1, n, generator=gen, dtype=torch.float64)) ** 3
    ref = torch.randn(m, n, generator=gen, dtype=torch.float64) * sa * sb
    rms = float(ref.pow(2).mean().sqrt())
    assert float(ref.abs().max()) > 50 * rms  # the heavy tail this is about
    out = ref.to(torch.bfloat16)
    old_max = float((out.double() - ref).abs().max()) / rms
    assert old_max > 0.1  # a plain max-element bound at 10 x tol x rms rejects the exact cast
    assert compare(out, ref, 1e-2).ok
    bad = out.clone()
    i = int(ref.abs().argmin())
    bad.view(-1)[i] += 0.5 * rms  # one wrong element of ordinary size
    chk = compare(bad, ref, 1e-2)
    assert not chk.ok and "largest element" in chk.reason


def test_a_table_path_is_read_once_per_version_of_its_file(tmp_path, monkeypatch):
    """scaled_mm(table=path) read and parsed the file on every call: now once, until the file
    changes on disk (its mtime_ns or size); a LookupTable object is used as it is."""
    import os

    from gemmtune.table import io as table_io

    a, b = _operands(16, 32, 64)
    sa, sb = _scales(16, 32, "tensor")
    p = Problem.from_tensors(a, b, "bf16", op="scaled_mm", scale="tensor")
    prov = provenance("t", "i", "x", "x", "x", "by-hand")
    reads, ran = [], []
    real_loads = table_io.loads  # what parses a file that table.load read
    monkeypatch.setattr(table_io, "loads", lambda text, path="<table>": reads.append(path) or real_loads(text, path))

    def fake_run(choice, a, b, out, **kw):  # which choice the table picked; no kernel needed for that
        ran.append(choice.id)
        out.zero_()

    monkeypatch.setattr(kernels, "run_choice_unchecked", fake_run)
    path = tmp_path / "t.json"
    LookupTable(prov, {p.key: [TableChoice(Choice.parse("aten"), 0.01)]}).save(path)
    reads.clear()  # (save validates its text through loads too)
    for _ in range(3):
        gemmtune.scaled_mm(a, b, sa, sb, table=path)
        gemmtune.scaled_mm(a, b, sa, sb, table=str(path))
    assert len(reads) == 1 and ran == ["aten"] * 6
    # Rewritten: read again, and its new choice runs.
    st = path.stat()
    LookupTable(prov, {p.key: [TableChoice(Choice.parse("pad+aten"), 0.02)]}).save(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # another mtime even on a coarse clock
    del reads[1:]
    gemmtune.scaled_mm(a, b, sa, sb, table=path)
    gemmtune.scaled_mm(a, b, sa, sb, table=path)
    assert len(reads) == 2 and ran[6:] == ["pad+aten"] * 2
    # An object is used as it is, never read.
    gemmtune.scaled_mm(a, b, sa, sb, table=LookupTable(prov, {p.key: [TableChoice(Choice.parse("aten"), 0.01)]}))
    assert len(reads) == 2 and ran[-1] == "aten"
    # A missing file still says so, naming it.
    with pytest.raises(ValueError, match="missing.json: cannot read"):
        gemmtune.scaled_mm(a, b, sa, sb, table=tmp_path / "missing.json")
