"""A dispatcher's cached call, met with other views of a shape it has run: every result against
fp64.

The hot path caches one launch per (shapes, dtypes, devices, negation bits); strides, offsets and
alignment are not in that key, so each family's cached launch must notice operands that do not fit
what it was prepared for (``Direct.matches``, the persistent launch's ``matches``, ``_or_cublas``)
or not depend on them. Hypothesis draws a family's choice, the sizes, the layout of each call's
operands (contiguous, transposed, offset by one element, a column slice of a wider matrix, every
other row) and the epilogue, and runs three calls on one dispatcher: the first decides and verifies,
the later ones take the cached launch with operands laid out differently. A session's differential
fuzz of 366 such calls found nothing; this keeps the property under test.

On the CPU in Triton's interpreter (conftest sets TRITON_INTERPRET=1), fp16 and fp32 (bf16 is wrong
there); on a GPU (``-m gpu``) with the real kernels and their prepared launches, bf16 too.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

import gemmtune
from gemmtune.api import interpreter_enabled
from gemmtune.epilogue import reference as epilogue_reference
from gemmtune.problem import Problem
from gemmtune.verify import TOLERANCE, compare

ON_GPU = torch.cuda.is_available()
FAMILIES = ("triton_mm", "triton_static", "splitk", "skinny", "decompose_k", "aten")
CPU = pytest.mark.skipif(ON_GPU or not interpreter_enabled(), reason="the CPU case runs the Triton interpreter")
GPU = [pytest.mark.gpu, pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")]
# persistent_tma only on the GPU: TMA descriptors need an sm 9.0+ device (the interpreter has none).
CASES = ([pytest.param(f, "cpu", marks=CPU, id=f"{f}-cpu") for f in FAMILIES]
         + [pytest.param(f, "cuda", marks=GPU, id=f"{f}-cuda") for f in (*FAMILIES, "persistent_tma")])

A_VIEWS = ("contiguous", "transposed", "offset", "column_slice", "every_other_row")
B_VIEWS = ("weight_t", "contiguous", "weight_t_offset", "column_slice")
DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


def _a(m: int, k: int, view: str, **kw) -> torch.Tensor:
    if view == "contiguous":
        return torch.randn(m, k, **kw)
    if view == "transposed":
        return torch.randn(k, m, **kw).t()
    if view == "offset":  # a data pointer 1 element past an allocation's start
        return torch.randn(m * k + 1, **kw)[1:].view(m, k)
    if view == "column_slice":  # the middle columns of a wider matrix: an odd leading stride
        return torch.randn(m, k + 3, **kw)[:, 2:k + 2]
    return torch.randn(2 * m, k, **kw)[::2]  # every other row


def _b(n: int, k: int, view: str, **kw) -> torch.Tensor:
    """B (K x N)."""
    if view == "weight_t":  # x @ W.t(), W (N x K) row-major: the Linear case
        return torch.randn(n, k, **kw).t()
    if view == "contiguous":
        return torch.randn(k, n, **kw)
    if view == "weight_t_offset":
        return torch.randn(n * k + 3, **kw)[3:].view(n, k).t()
    return torch.randn(k, n + 5, **kw)[:, :n]


def _choice(family: str, m: int, n: int, k: int, dtype: str, layout_b: str) -> str | None:
    """The first choice of ``family``'s default space at the hint, if it has one."""
    got = gemmtune.space(Problem.from_sizes(m, n, k, dtype, layout_b=layout_b), family, device="h100")
    return got[0].id if got else None


calls = st.fixed_dictionaries({
    "m": st.sampled_from([1, 2, 7, 16, 33]),
    "a": st.sampled_from(A_VIEWS),
    "b": st.sampled_from(B_VIEWS),
    "bias": st.booleans(),
    "activation": st.sampled_from(["none", "none", "relu", "gelu_tanh", "silu"]),
    "residual": st.booleans(),
})


@pytest.mark.parametrize("family,device", CASES)
# No shrinking: each example runs kernels in the interpreter, and shrinking a failure re-ran them
# for many minutes. The failing example is printed as drawn; the assertion names its call.
@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck),
          phases=(Phase.explicit, Phase.reuse, Phase.generate))
@given(pad=st.booleans(), dt_pick=st.integers(0, 2),
       n=st.sampled_from([1, 3, 17, 32, 37]), k=st.sampled_from([1, 5, 16, 31, 97, 256]),
       layout_b=st.sampled_from(["col", "row"]), hint=st.sampled_from([1, 4, 16]),
       seq=st.lists(calls, min_size=3, max_size=3), seed=st.integers(0, 2**16))
def test_cached_calls_on_other_views_match_fp64(family, device, pad, dt_pick, n, k, layout_b, hint, seq, seed):
    dts = (torch.float32, torch.float16, torch.bfloat16 if device == "cuda" else torch.float16)
    dt = dts[dt_pick]
    dtype = DTYPES[dt]
    kw = {"dtype": dt, "device": device}
    cid = _choice(family, hint, n, k, dtype, layout_b)
    assume(cid is not None)
    if pad and family != "aten":
        cid = "pad+" + cid
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a choice that cannot run a shape falls back, saying so
        d = gemmtune.compile_mm(n=n, k=k, dtype=dtype, layout_b=layout_b, hints={"m": [hint]},
                                tune_fn=lambda problems, **_: {p.key: cid for p in problems}, progress=False)
        for i, call in enumerate([dict(seq[0], m=hint)] + seq[1:]):  # the first at the hint's M
            a, b = _a(call["m"], k, call["a"], **kw), _b(n, k, call["b"], **kw)
            epi = {}
            if call["bias"]:
                epi["bias"] = torch.randn(n, **kw)
            if call["activation"] != "none":
                epi["activation"] = call["activation"]
            if call["residual"]:
                epi["residual"] = torch.randn(call["m"], n, **kw)
            out = d(a, b, **epi)
            want = epilogue_reference(a.double() @ b.double(), epi.get("bias"), epi.get("activation", "none"),
                                      epi.get("residual"))
            res = compare(out, want, TOLERANCE[(dtype, dtype)])  # the tuner's own per-dtype bound
            assert res.ok, (f"call {i} of {cid}: m={call['m']} n={n} k={k} {dt} a {call['a']} "
                            f"{tuple(a.stride())} b {call['b']} {tuple(b.stride())} {sorted(epi)}: {res.reason}")


def _batched(b: int, rows: int, cols: int, view: str, **kw) -> torch.Tensor:
    """A (b x rows x cols) operand laid out as ``view``."""
    if view == "contiguous":
        return torch.randn(b, rows, cols, **kw)
    if view == "transposed":  # each matrix column-major
        return torch.randn(b, cols, rows, **kw).transpose(1, 2)
    if view == "heads_first":  # (rows, b, cols) permuted: attention's heads after a reshape
        return torch.randn(rows, b, cols, **kw).permute(1, 0, 2)
    if view == "offset":
        return torch.randn(b * rows * cols + 1, **kw)[1:].view(b, rows, cols)
    return torch.randn(1, rows, cols, **kw).expand(b, rows, cols)  # one matrix broadcast (stride 0)


BMM_VIEWS = ("contiguous", "transposed", "heads_first", "offset", "broadcast")
BMM_CASES = ([pytest.param(f, "cpu", marks=CPU, id=f"{f}-cpu") for f in ("triton_mm", "aten")]
             + [pytest.param(f, "cuda", marks=GPU, id=f"{f}-cuda") for f in ("triton_mm", "aten")])


@pytest.mark.parametrize("family,device", BMM_CASES)
@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck),
          phases=(Phase.explicit, Phase.reuse, Phase.generate))
@given(pad=st.booleans(), fp16=st.booleans(), batch=st.sampled_from([1, 2, 3]),
       n=st.sampled_from([1, 8, 17]), k=st.sampled_from([1, 16, 33]), hint=st.sampled_from([1, 4, 16]),
       seq=st.lists(st.tuples(st.sampled_from([1, 4, 7, 16]), st.sampled_from(BMM_VIEWS),
                              st.sampled_from(BMM_VIEWS)), min_size=3, max_size=3),
       seed=st.integers(0, 2**16))
def test_cached_bmm_calls_on_other_views_match_fp64(family, device, pad, fp16, batch, n, k, hint, seq, seed):
    """The same property for a bmm dispatcher (``compile_bmm``): its cache key holds the batch and
    shapes, and each call's operands come with other batch and matrix strides."""
    dt = torch.float16 if fp16 else torch.float32
    dtype = DTYPES[dt]
    kw = {"dtype": dt, "device": device}
    got = gemmtune.space(Problem.from_sizes(hint, n, k, dtype, op="bmm", batch=batch), family, device="h100")
    assume(bool(got))
    cid = ("pad+" if pad and family != "aten" else "") + got[0].id
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = gemmtune.compile_bmm(batch=batch, n=n, k=k, dtype=dtype, hints={"m": [hint]},
                                 tune_fn=lambda problems, **_: {p.key: cid for p in problems}, progress=False)
        for i, (m, va, vb) in enumerate([(hint, *seq[0][1:])] + seq[1:]):
            a, b = _batched(batch, m, k, va, **kw), _batched(batch, k, n, vb, **kw)
            res = compare(d(a, b), torch.bmm(a.double(), b.double()), TOLERANCE[(dtype, dtype)])
            assert res.ok, (f"call {i} of {cid}: batch={batch} m={m} n={n} k={k} {dt} a {va} {tuple(a.stride())} "
                            f"b {vb} {tuple(b.stride())}: {res.reason}")
