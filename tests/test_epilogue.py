"""Fused epilogues, ``act(a @ b + bias) + residual``, against fp64 in every family.

Each Triton family applies the epilogue in its kernel (tiled.split_epilogue, in every split
mode's final store; DecomposeK in its sum kernel), aten with torch ops. Checked on odd shapes
(M = 1, primes, ragged K, odd N), x @ W.T (a transposed B), offset and strided residuals and
a strided bias, pad+ choices whose N is padded, an fp32 output, the dispatcher, the prepared
launch (on the CPU through a stand-in for Triton's compiled kernel) and ``gemmtune.nn.Linear``
(one launch for x @ W.T + b, eager and under torch.compile, autograd included).

CPU: the Triton interpreter (fp16/fp32; conftest sets it up). bf16 is wrong in the
interpreter: those cases, and the compiled prepared launch, run on a GPU only.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl  # noqa: F401 - the interpreter wants it visible to _no_fence
from torch.overrides import TorchFunctionMode

import gemmtune
from gemmtune import kernels
from gemmtune.configs import AtenConfig, Choice, DecomposeKConfig, SkinnyConfig, SplitKConfig, TileConfig
from gemmtune.dispatch import compile_mm
from gemmtune.epilogue import ACTIVATIONS, Epilogue, bind, reference
from gemmtune.kernels import skinny, tile_epilogue, tiled
from gemmtune.kernels.splitk import SplitKWorkspace
from gemmtune.verify import compare

from conftest import covering

# Relative Frobenius error by (input dtype, output dtype), as in test_kernels.py: fp32 with ieee
# dots and fp32 epilogue math sits near 1e-7; a 16-bit output is dominated by its own rounding.
# The largest element may be off by 10x this times rms(ref) (gemmtune.verify.compare).
TOL = {
    (torch.float32, torch.float32): 1e-5,
    (torch.float16, torch.float16): 1e-3,
    (torch.float16, torch.float32): 1e-4,
    (torch.bfloat16, torch.bfloat16): 8e-3,
    (torch.bfloat16, torch.float32): 1e-4,
}
ON_GPU = torch.cuda.is_available()
# gelu_tanh and silu take exp of -x (sigmoid forms): the interpreter's numpy warns where it
# overflows to inf, which is the intended result (a GPU gives it silently).
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
BF16 = pytest.param(torch.bfloat16, id="bf16", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not ON_GPU, reason="bf16 is wrong in the Triton interpreter; runs on a GPU")])
DTYPES = [pytest.param(torch.float16, id="fp16"), pytest.param(torch.float32, id="fp32"), BF16]

# One config per family and reduction: blocks larger than some dims below (masked edges),
# K-slices that end mid-block (ragged K).
CASES = [
    ("triton_mm", TileConfig(32, 32, 32, 2, 4, 8)),
    ("splitk", SplitKConfig(16, 32, 32, 2, 4, 8, 3, True)),
    ("splitk", SplitKConfig(16, 32, 32, 2, 4, 8, 3, False)),
    ("skinny", SkinnyConfig(4, 32, 64, 2, 1, 4, False, True)),          # CUDA-core product, split
    ("skinny", SkinnyConfig(16, 16, 32, 2, 2, 4, True, False)),         # tl.dot, atomic split
    ("skinny", SkinnyConfig(16, 16, 32, 1, 2, 4, True, False, 5)),      # stream-K over 5 programs
    ("aten", AtenConfig()),
]
# (bias, activation, residual): what issue 17 asks for, and relu once.
EPILOGUES = [(True, "none", False), (True, "gelu_tanh", False), (False, "silu", True),
             (True, "gelu_erf", True), (False, "relu", True)]
# (M, N, K, layout of B, layout of the residual and bias). M = 1 and 3 suit skinny's BLOCK_M.
# 'col' B is x @ W.T (W row-major); 'strided' puts the residual every other column of a wider
# buffer and the bias every other element (no unit stride); 'offset' starts both one element into
# their storage (not 16-byte aligned), with contiguous rows.
SHAPES = [(1, 37, 300, "col", "strided"), (3, 31, 257, "row", "offset")]


def _eid(e) -> str:
    return Epilogue(*e).id


def make_epilogue_tensors(m: int, n: int, layout: str, dtype, device, bias: bool = True, residual: bool = True):
    if layout == "strided":
        b = torch.randn(2 * n, dtype=dtype, device=device)[::2]
        r = torch.randn(m + 2, 2 * n + 3, dtype=dtype, device=device)[1:m + 1, 3::2]
    else:
        b = torch.randn(n + 1, dtype=dtype, device=device)[1:]
        r = torch.randn(m * n + 1, dtype=dtype, device=device)[1:].view(m, n)
    return (b if bias else None), (r if residual else None)


def check(out, a, b, bias=None, activation="none", residual=None, tol=None):
    ref = reference(torch.mm(a.double(), b.double()), None if bias is None else bias.double(), activation,
                    None if residual is None else residual.double())
    res = compare(out, ref, tol or TOL[(a.dtype, out.dtype)])
    assert res.ok, f"{tuple(a.shape)}x{tuple(b.shape)} {a.dtype}->{out.dtype} {activation}: {res.reason}"


def run_family(family, cfg, a, b, bias=None, activation="none", residual=None, out_dtype=None, **kw):
    """One family's run into a NaN-poisoned output, with the epilogue bound as the API does."""
    m, n = a.shape[0], b.shape[1]
    out = torch.full((m, n), float("nan"), dtype=out_dtype or a.dtype, device=a.device)
    epi = bind(m, n, out.dtype, a.device, bias=bias, activation=activation, residual=residual)
    kernels.get(family).run(a, b, out, cfg, epilogue=epi, **kw)
    return out


# ------------------------------------------------------------------ the value
def test_epilogue_value_ids_and_constexprs():
    e = Epilogue(bias=True, activation="gelu_tanh", residual=True)
    assert e.id == "bias+gelu_tanh+res" and Epilogue.parse(e.id) == e and hash(e) == hash(Epilogue.parse(e.id))
    for bias in (False, True):
        for act in ACTIVATIONS:
            for res in (False, True):
                x = Epilogue(bias, act, res)
                assert Epilogue.parse(x.id) == x
    assert Epilogue().id == "none" and Epilogue().is_none and not Epilogue(residual=True).is_none
    assert Epilogue(True, "silu").constexprs() == {"HAS_BIAS": True, "ACT": ACTIVATIONS["silu"], "HAS_RES": False,
                                                        "SCALE": 0}  # scaled_mm's scales: off
    with pytest.raises(ValueError, match="unknown activation 'gelu'"):
        Epilogue(activation="gelu")
    for bad in ("", "bias+none", "res+bias", "bias+silu+relu", "bias+res+res"):
        with pytest.raises(ValueError):
            Epilogue.parse(bad)


# ------------------------------------------------------------------ every family vs fp64
# Every family case x epilogue in the fast lane, one (shape, dtype) each (rotating); the rest is slow.
@pytest.mark.parametrize("case,epi,shape,dtype", covering(
    (CASES, lambda c: Choice(*c).id), (EPILOGUES, _eid),
    (SHAPES, lambda s: "x".join(map(str, s[:3])) + f"-{s[3]}B-{s[4]}R"), DTYPES))
def test_family_epilogue_matches_fp64(case, epi, shape, dtype, operand, device):
    family, cfg = case
    m, n, k, layout_b, layout_r = shape
    has_bias, act, has_res = epi
    a, b = operand(m, k, "row", dtype), operand(k, n, layout_b, dtype)
    bias, res = make_epilogue_tensors(m, n, layout_r, dtype, device, has_bias, has_res)
    check(run_family(family, cfg, a, b, bias, act, res), a, b, bias, act, res)


# decompose_k runs splits that divide K; the epilogue is in its sum kernel, not on the partials.
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 37, 384, 3, "col", "strided"), (17, 31, 256, 2, "row", "offset")],
                         ids=lambda s: "{}x{}x{}-s{}-{}B-{}R".format(*s))
@pytest.mark.parametrize("epi", EPILOGUES, ids=_eid)
def test_decompose_k_epilogue_matches_fp64(epi, shape, dtype, operand, device):
    m, n, k, split, layout_b, layout_r = shape
    has_bias, act, has_res = epi
    a, b = operand(m, k, "row", dtype), operand(k, n, layout_b, dtype)
    bias, res = make_epilogue_tensors(m, n, layout_r, dtype, device, has_bias, has_res)
    check(run_family("decompose_k", DecomposeKConfig(split), a, b, bias, act, res), a, b, bias, act, res)


def test_activations_saturate_cleanly(operand):
    """Large pre-activations (|x| up to ~1500): exp overflows to inf inside the sigmoid forms of
    gelu_tanh and silu, which must give -0 and x there, not NaN."""
    a, b = operand(5, 64, dtype=torch.float32) * 8, operand(64, 33, "col", torch.float32) * 8
    for act in ("gelu_tanh", "gelu_erf", "silu", "relu"):
        out = run_family("triton_mm", TileConfig(16, 16, 32, 1, 2, 8), a, b, activation=act)
        check(out, a, b, activation=act)


# decompose_k: K = 259 pads to 264, which 4 divides.
@pytest.mark.parametrize("choice", ["pad+triton_mm:BM32-BN32-BK32-S2-W4-G8",
                                    "pad+splitk:BM16-BN16-BK64-S2-W4-G8-SK4-det",
                                    "pad+skinny:BM4-BN32-BK64-SK2-S1-W4-core-det",
                                    "pad+decompose_k:s4", "pad+aten"])
def test_padded_choices_see_the_real_n(choice, operand, device):
    """pad+ computes on N = 21 padded to 24 and cuts the output back: bias and residual are of
    the real N (padded alongside), and nothing is read past them."""
    m, n, k = 3, 21, 259
    a, b = operand(m, k, "offset"), operand(k, n, "strided")
    bias, res = make_epilogue_tensors(m, n, "strided", a.dtype, device)
    bias_before, res_before = bias.clone(), res.clone()
    out = gemmtune.matmul(a, b, choice=choice, bias=bias, activation="gelu_tanh", residual=res)
    check(out, a, b, bias, "gelu_tanh", res)
    assert torch.equal(bias, bias_before) and torch.equal(res, res_before)


@pytest.mark.parametrize("choice", ["triton_mm:BM32-BN32-BK32-S2-W4-G8", "splitk:BM16-BN16-BK64-S2-W4-G8-SK4-atomic",
                                    "decompose_k:s2", "aten"])
def test_fp32_output_with_16bit_inputs(choice, operand, device):
    """The epilogue's tensors have the output's dtype; with an fp32 output there is no
    16-bit rounding left to hide a lost fp32 epilogue."""
    m, n, k = 7, 29, 256
    a, b = operand(m, k), operand(k, n, "col")
    bias, res = make_epilogue_tensors(m, n, "offset", torch.float32, device)
    out = gemmtune.matmul(a, b, choice=choice, out_dtype=torch.float32, bias=bias, activation="silu", residual=res)
    assert out.dtype == torch.float32
    check(out, a, b, bias, "silu", res)


def test_matmul_default_choice_and_empty_k(operand, device):
    a, b = operand(16, 4096), operand(4096, 16)  # the default choice is split-K here
    bias, res = make_epilogue_tensors(16, 16, "strided", a.dtype, device)
    check(gemmtune.matmul(a, b, bias=bias, activation="gelu_erf", residual=res), a, b, bias, "gelu_erf", res)
    # K = 0: the product is zero and the epilogue still applies: act(bias) + residual.
    a0, b0 = operand(4, 0), operand(0, 16)
    for choice in ("aten", "triton_mm:BM32-BN32-BK32-S2-W4-G8"):
        out = gemmtune.matmul(a0, b0, choice=choice, bias=bias, activation="relu", residual=res[:4])
        torch.testing.assert_close(out, (bias.relu() + res[:4]))


def test_plain_mm_keeps_its_specialisation(operand):
    """Without an epilogue the kernel's new constexprs are all off and its bias/residual slots
    hold the output pointer: no new compiled variant for a plain mm (and on a GPU the
    constexpr-false branches vanish: an sm_90 build of a plain mm had the same instructions
    as before epilogues, only the parameter list grew)."""
    a, b = operand(40, 96), operand(96, 24, "col")
    c = torch.empty(40, 24, dtype=a.dtype, device=a.device)
    kw = dict(block_m=16, block_n=32, block_k=32, group_m=8, k_per_split=96)
    _, args, consts = tiled._tiled_args(a, b, c, **kw)
    assert (consts["HAS_BIAS"], consts["ACT"], consts["HAS_RES"], consts["RN_UNIT"]) == (False, 0, False, False)
    assert all(args[i] is c for i in (5, 6, 7, 8)) and args[-3:] == (0, 0, 0)  # bias, residual, scales
    assert consts["SCALE"] == 0
    # The parameters are the pointers, the other runtime args, then the constexprs: what a
    # prepared launch (tiled.direct) relies on.
    names = tiled._tiled_mm_kernel.arg_names
    assert names[:tiled.N_POINTERS] == ["a_ptr", "b_ptr", "c_ptr", "ws_ptr", "lock_ptr", "bias_ptr", "res_ptr",
                                        "sa_ptr", "sb_ptr"]
    assert len(names) == len(args) + len(consts) and set(names[len(args):]) == set(consts)
    p, sargs, sconsts = skinny._args(a[:4], b, c[:4], SkinnyConfig(4, 32, 64), None, None, False)
    snames = skinny._skinny_kernel.arg_names
    assert snames[:tiled.N_POINTERS] == names[:tiled.N_POINTERS]
    assert len(snames) == len(sargs) + len(sconsts) and set(snames[len(sargs):]) == set(sconsts)


# ------------------------------------------------------------------ clear errors
def test_bad_epilogues_give_clear_errors(operand):
    a, b = operand(5, 64), operand(64, 24)
    ok_bias, ok_res = torch.randn(24, dtype=a.dtype), torch.randn(5, 24, dtype=a.dtype)
    with pytest.raises(ValueError, match=r"bias must have shape \(N,\) = \(24,\), got \(25,\)"):
        gemmtune.matmul(a, b, bias=torch.randn(25, dtype=a.dtype))
    with pytest.raises(ValueError, match=r"bias must have shape .* got \(1, 24\)"):
        gemmtune.matmul(a, b, bias=ok_bias[None])
    with pytest.raises(TypeError, match="bias must have the output's dtype torch.float16, got torch.float32"):
        gemmtune.matmul(a, b, bias=ok_bias.float())
    with pytest.raises(ValueError, match="bias must be on the output's device"):
        gemmtune.matmul(a, b, bias=ok_bias.to("meta"))
    with pytest.raises(TypeError, match="bias must be a torch.Tensor or None, not list"):
        gemmtune.matmul(a, b, bias=[0.0] * 24)
    with pytest.raises(ValueError, match=r"residual must have shape \(M, N\) = \(5, 24\), got \(24, 5\)"):
        gemmtune.matmul(a, b, residual=ok_res.t())
    with pytest.raises(TypeError, match="residual must have the output's dtype"):
        gemmtune.matmul(a, b, residual=ok_res.double())
    with pytest.raises(ValueError, match="unknown activation 'gelu'; known: none, gelu_tanh"):
        gemmtune.matmul(a, b, activation="gelu")
    with pytest.raises(ValueError, match="unknown activation"):
        gemmtune.matmul(a, b, activation=None)
    # The dispatcher checks the same way, on the first call of each kind of epilogue.
    d = compile_mm(n=24, k=64, dtype="fp16", hints={"m": [8]},
                   tune_fn=lambda ps, **kw: {p.key: "triton_mm:BM16-BN16-BK32-S1-W2-G8" for p in ps})
    with pytest.raises(ValueError, match="bias must have shape"):
        d(a, b, bias=torch.randn(23, dtype=a.dtype))
    with pytest.raises(ValueError, match="residual must have shape"):
        d(a, b, residual=torch.randn(4, 24, dtype=a.dtype))
    with pytest.raises(ValueError, match="unknown activation"):
        d(a, b, activation="tanh")
    with pytest.raises(ValueError, match="unknown activation"):
        d(a, b, activation=["relu"])
    assert d.n_decisions == 0  # errors decide nothing


# ------------------------------------------------------------------ dispatcher
def _dispatcher(winners, dtype="fp16", **kw):
    return compile_mm(n=24, k=64, dtype=dtype, hints={"m": sorted(winners)},
                      tune_fn=lambda ps, **_: {p.key: winners[p.m] for p in ps}, **kw)


def test_dispatcher_fuses_with_the_decided_kernel(operand, device):
    """The decision is the shape's; plain and fused calls share it (verified once, plain)."""
    d = _dispatcher({1: "skinny:BM4-BN32-BK64-SK2-S1-W4-core-det", 8: "splitk:BM16-BN16-BK32-S1-W2-G8-SK2-atomic",
                     32: "triton_mm:BM32-BN32-BK16-S1-W2-G8", 128: "decompose_k:s4"})
    verified = []
    real_verify = d._verify
    d._verify = lambda c, p, dev: verified.append(c.id) or real_verify(c, p, dev)
    for m in (1, 7, 37, 130):
        a, b = operand(m, 64), operand(64, 24, "col")
        bias, res = make_epilogue_tensors(m, 24, "strided", a.dtype, device)
        for _ in range(2):  # first sight, then the cached closure
            check(d(a, b, bias=bias, activation="gelu_tanh", residual=res), a, b, bias, "gelu_tanh", res)
            check(d(a, b), a, b)
            check(d(a, b, bias=bias), a, b, bias)
        # A new bias (same shape) and a residual of other strides reuse the cached closure correctly.
        bias2, res2 = make_epilogue_tensors(m, 24, "offset", a.dtype, device)
        check(d(a, b, bias=bias2, activation="gelu_tanh", residual=res2), a, b, bias2, "gelu_tanh", res2)
    assert d.n_decisions == 4 and len(verified) == 4
    assert {d.decision(m=m).choice.family for m in (1, 7, 37, 130)} == {"skinny", "splitk", "triton_mm",
                                                                        "decompose_k"}
    # aten (the fallback, or a decided choice) fuses with torch ops.
    d = _dispatcher({8: "aten"})
    a, b = operand(5, 64), operand(64, 24)
    bias, res = make_epilogue_tensors(5, 24, "offset", a.dtype, device)
    check(d(a, b, bias=bias, activation="silu", residual=res), a, b, bias, "silu", res)
    a0 = operand(0, 64)
    assert d(a0, b, bias=bias, activation="silu").shape == (0, 24)


def test_warmup_builds_the_fused_closures(operand, device):
    """warmup(epilogues=...) leaves nothing to build on a fused call's first sight (which would
    prepare a launch, and synchronize, inside a CUDA-graph capture)."""
    d = _dispatcher({8: "triton_mm:BM16-BN16-BK32-S1-W2-G8"})
    d.warmup(m=[5, 9], epilogues=["bias", Epilogue(True, "silu", True)])
    assert d.n_decisions == 2 and len(d._fast_fused) == 4
    a, b = operand(5, 64), operand(64, 24)
    bias = torch.randn(24, dtype=a.dtype, device=device)
    before = dict(d._fast_fused)
    check(d(a, b, bias=bias), a, b, bias)
    assert d._fast_fused == before
    with pytest.raises(ValueError, match="bad epilogue id"):
        d.warmup(m=[5], epilogues=["bias+bias"])


# ------------------------------------------------------------------ prepared launch
class _FakeCompiled:
    """Stands in for Triton's compiled kernel on the CPU: ``kernel[grid](*every arg, in order)``,
    as tiled.Direct calls it, runs the interpreted kernel with those positional args."""

    def __init__(self, fn, options):
        self.fn, self.options = fn, options

    def __getitem__(self, grid):
        return lambda *args: self.fn[grid](*args, **self.options)


class _FakeJit:
    """The kernel as prepare sees it: a launch runs the interpreter and returns a _FakeCompiled."""

    def __init__(self, fn):
        self.fn, self.arg_names = fn, fn.arg_names

    def __getitem__(self, grid):
        def launch(*args, num_warps, num_stages, **consts):
            self.fn[grid](*args, num_warps=num_warps, num_stages=num_stages, **consts)
            return _FakeCompiled(self.fn, {"num_warps": num_warps, "num_stages": num_stages})
        return launch


@triton.jit
def _no_fence(x):
    pass


@pytest.mark.skipif(ON_GPU, reason="the GPU runs the real prepared launch (test_gpu_dispatcher_prepared_epilogue)")
@pytest.mark.parametrize("case", [("triton_mm", TileConfig(16, 16, 32, 1, 2, 4)),
                                  ("splitk", SplitKConfig(16, 16, 32, 1, 2, 4, 3, True)),
                                  ("splitk", SplitKConfig(16, 16, 32, 1, 2, 4, 3, False)),
                                  ("skinny", SkinnyConfig(8, 16, 32, 1, 1, 4, False, True)),
                                  ("skinny", SkinnyConfig(16, 16, 32, 2, 2, 4, True, False))],
                         ids=lambda c: Choice(*c).id)
def test_prepared_launch_passes_the_epilogue(case, operand, device, monkeypatch):
    """prepare -> (matches, launch) with an epilogue: fresh operands, bias and residual go to
    the frozen argument list in the right slots; other residual strides or no epilogue do not
    match (they take the ordinary launch)."""
    family, cfg = case
    monkeypatch.setattr(tiled, "_INTERPRETED", False)
    monkeypatch.setattr(tile_epilogue, "_gpu_fence", _no_fence)  # inline PTX: the interpreter cannot run it
    monkeypatch.setattr(tiled, "_tiled_mm_kernel", _FakeJit(tiled._tiled_mm_kernel))
    monkeypatch.setattr(skinny, "_INTERPRETED", False)
    monkeypatch.setattr(skinny, "_skinny_kernel", _FakeJit(skinny._skinny_kernel))
    m, n, k = 5, 21, 100
    dt = torch.float32
    ws = SplitKWorkspace()

    def inputs():
        a, b = operand(m, k, dtype=dt), operand(k, n, "col", dt)
        bias, res = make_epilogue_tensors(m, n, "strided", dt, device)
        return a, b, bias, res, bind(m, n, dt, a.device, bias=bias, activation="silu", residual=res)

    a, b, bias, res, e = inputs()
    out = torch.full((m, n), float("nan"), dtype=dt, device=device)
    matches, launch = kernels.get(family).prepare(a, b, out, cfg, workspace=ws, epilogue=e)
    check(out, a, b, bias, "silu", res)
    a2, b2, bias2, res2, e2 = inputs()
    assert matches(a2, b2, epilogue=e2)
    out2 = torch.full((m, n), float("nan"), dtype=dt, device=device)
    launch(a2, b2, out2, epilogue=e2)
    check(out2, a2, b2, bias2, "silu", res2)
    assert not matches(a2, b2)  # compiled with the epilogue: a plain call takes the ordinary launch
    assert not matches(a2, b2, epilogue=bind(m, n, dt, a.device, bias=bias2, activation="silu",
                                             residual=res2.contiguous()))
    assert not matches(a2, b2, epilogue=bind(m, n, dt, a.device, bias=bias2, activation="relu", residual=res2))


# ------------------------------------------------------------------ nn.Linear: one launch
def _linear(dtype=torch.float32, winner="triton_mm:BM16-BN16-BK16-S1-W2-G8", device="cpu"):
    torch.manual_seed(3)
    ref = torch.nn.Linear(32, 24).to(dtype=dtype, device=device)
    lin = torch.nn.Linear(32, 24).to(dtype=dtype, device=device)
    lin.load_state_dict(ref.state_dict())
    gemmtune.patch(lin, hints={"m": [8, 64]}, tune_fn=lambda ps, **kw: {p.key: winner for p in ps})
    return lin, ref


class _TorchCalls(TorchFunctionMode):
    """Records the torch functions and Tensor methods called in its block (``+`` included)."""

    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("dtype", [pytest.param(torch.float16, id="fp16"), pytest.param(torch.float32, id="fp32")])
def test_linear_with_bias_is_one_launch(dtype, monkeypatch, device):
    # On the test device: CPU tensors on a GPU machine run aten (Triton there needs the interpreter).
    lin, ref = _linear(dtype, device=device)
    x = torch.randn(3, 7, 32, dtype=dtype, device=device)
    lin(x)  # first sight: decides and verifies (launches of its own)
    launches = []
    real = tiled._launch
    monkeypatch.setattr(tiled, "_launch", lambda fn, *args: launches.append(fn) or real(fn, *args))
    with torch.no_grad(), _TorchCalls() as seen:
        y = lin(x)
    adds = [n for n in seen.names if "add" in n]
    # A GPU serves cached calls through the prepared launch, past tiled._launch (counted in
    # test_gpu_dispatcher_prepared_epilogue); there only the absence of a separate add is checked.
    n_launch = 1 if ON_GPU else len(launches)
    assert n_launch == 1 and not adds, f"{len(launches)} launches and {adds} for x @ W.T + b"
    tol = 2e-3 if dtype == torch.float16 else 1e-5
    torch.testing.assert_close(y, F.linear(x, ref.weight, ref.bias), rtol=tol, atol=tol)
    # Through the custom op (autograd on): still one launch, and the gradients of F.linear.
    launches.clear()
    xa = x.clone().requires_grad_()
    with _TorchCalls() as seen:
        ya = lin(xa)
    assert (ON_GPU or len(launches) == 1) and not [n for n in seen.names if "add" in n], seen.names
    if dtype == torch.float32:
        g = torch.randn_like(ya)
        (ya * g).sum().backward()
        xb = x.clone().requires_grad_()
        (ref(xb) * g).sum().backward()
        torch.testing.assert_close(xa.grad, xb.grad, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(lin.bias.grad, ref.bias.grad, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(lin.weight.grad, ref.weight.grad, rtol=1e-5, atol=1e-5)


def test_linear_under_torch_compile_passes_the_bias_to_the_op():
    """torch.compile(dynamic=True): the bias is an argument of the gemmtune::mm node, and the
    graph has no add of its own (Inductor could not have fused one into the opaque op)."""
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    lin, ref = _linear()
    cnt = CompileCounterWithBackend("aot_eager")
    cl = torch.compile(lin, backend=cnt, dynamic=True, fullgraph=True)
    for m in (3, 5, 9):
        x = torch.randn(m, 32)
        torch.testing.assert_close(cl(x), F.linear(x, ref.weight, ref.bias), rtol=1e-5, atol=1e-5)
    assert cnt.frame_count == 1
    code = cnt.graphs[0].code
    mm_lines = [ln for ln in code.splitlines() if "torch.ops.gemmtune.mm" in ln]
    assert len(mm_lines) == 1 and "bias" in mm_lines[0], code
    assert " + " not in code and "add" not in code, code
    x = torch.randn(4, 32, requires_grad=True)
    cl(x).sum().backward()
    torch.testing.assert_close(lin.bias.grad, torch.full((24,), 4.0))


@pytest.mark.parametrize("activation", ["gelu_tanh", "gelu_erf", "silu", "relu"])
def test_op_autograd_through_activation_and_residual(activation):
    """torch_ops.linear with an activation and a residual: values and every gradient (x, W,
    bias, residual) match torch's own ops, eagerly and compiled (aot_eager)."""
    from gemmtune.torch_ops import linear

    lin, _ = _linear()
    h = lin._gemmtune_handle
    w, bias = lin.weight.detach().clone(), lin.bias.detach().clone()
    x, res = torch.randn(6, 32), torch.randn(6, 24)
    act = {"gelu_tanh": lambda z: F.gelu(z, approximate="tanh"), "gelu_erf": F.gelu, "silu": F.silu,
           "relu": F.relu}[activation]

    def grads(fn):
        leaves = [t.clone().requires_grad_() for t in (x, w, bias, res)]
        y = fn(*leaves)
        g = torch.linspace(-1, 1, y.numel()).view_as(y)
        (y * g).sum().backward()
        return [y.detach()] + [t.grad for t in leaves]

    want = grads(lambda x, w, b, r: act(F.linear(x, w, b)) + r)
    eager = grads(lambda x, w, b, r: linear(x, w, b, h, activation, r))
    torch._dynamo.reset()
    compiled = grads(torch.compile(lambda x, w, b, r: linear(x, w, b, h, activation, r), backend="aot_eager",
                                   dynamic=True, fullgraph=True))
    for got in (eager, compiled):
        for name, g, wv in zip(("y", "x", "w", "bias", "residual"), got, want):
            torch.testing.assert_close(g, wv, rtol=1e-5, atol=1e-5, msg=name)


# ------------------------------------------------------------------ GPU only
@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
@pytest.mark.parametrize("choice_id", ["triton_mm:BM64-BN64-BK64-S3-W4-G8", "splitk:BM32-BN32-BK128-S3-W4-G8-SK8-det",
                                       "splitk:BM32-BN32-BK128-S3-W4-G8-SK8-atomic",
                                       "skinny:BM16-BN64-BK256-SK4-S4-W4-dot-det"])
def test_gpu_dispatcher_prepared_epilogue(choice_id, recwarn):
    """bf16 on a GPU: cached fused calls launch the compiled kernel directly, checked against fp64;
    other residual strides fall back to the ordinary launch, still right."""
    choice = Choice.parse(choice_id)
    d = compile_mm(n=768, k=4096, dtype="bf16", hints={"m": [16]}, layout_b="col",
                   tune_fn=lambda ps, **kw: {p.key: choice for p in ps})
    for m in (16, 1, 13):
        a = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(768, 4096, device="cuda", dtype=torch.bfloat16).t()
        for layout in ("offset", "strided", "offset"):
            bias, res = make_epilogue_tensors(m, 768, layout, torch.bfloat16, "cuda")
            for _ in range(2):
                out = d(a, b, bias=bias, activation="gelu_tanh", residual=res)
                check(out, a, b, bias, "gelu_tanh", res)
    assert not [w for w in recwarn.list if "prepared launch" in str(w.message)]
    a = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
    key = next(k for k in d._fast_fused if k[0] == a.shape)
    assert "matches" in d._fast_fused[key].__wrapped__.__code__.co_freevars  # inside its device guard


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("choice", ["triton_mm:BM128-BN128-BK64-S3-W8-G8", "splitk:BM64-BN64-BK64-S3-W4-G8-SK4-atomic",
                                    "decompose_k:s4", "skinny:BM16-BN128-BK128-SK2-S4-W4-dot-det", "aten",
                                    "pad+triton_mm:BM64-BN64-BK64-S3-W4-G8"])
def test_gpu_llm_shapes(choice, dtype):
    """Decode and prefill-ish sizes of an MLP up-projection with a GELU and a residual."""
    for m in ((1, 13, 64) if "skinny" in choice else (1, 77, 333)):
        n, k = 4097 if "pad+" in choice else 4096, 1024
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(n, k, device="cuda", dtype=dtype).t()
        bias, res = make_epilogue_tensors(m, n, "offset", dtype, "cuda")
        out = gemmtune.matmul(a, b, choice=choice, bias=bias, activation="gelu_tanh", residual=res)
        check(out, a, b, bias, "gelu_tanh", res)


def test_same_device_reads_an_index_less_device_as_the_current_one():
    from gemmtune.epilogue import _same_device
    cpu = torch.device("cpu")
    assert _same_device(cpu, torch.device("cpu"))
    assert not _same_device(cpu, torch.device("meta"))
    if torch.cuda.is_available():
        cur = torch.cuda.current_device()
        assert _same_device(torch.device("cuda"), torch.device(f"cuda:{cur}"))
        assert _same_device(torch.device(f"cuda:{cur}"), torch.device("cuda"))
        assert not _same_device(torch.device("cuda"), cpu)
