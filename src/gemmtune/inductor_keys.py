"""The keys under which Inductor's lookup table (torch._inductor.lookup_table) looks a problem
up: the inputs' dtypes, shapes and strides as Inductor's tuned_mm / tuned_addmm / tuned_bmm /
tuned_scaled_mm see them, and which problems a key can name exactly (``check_problem``).
gemmtune.inductor_export writes its configs under these keys and re-exports every name here."""

from __future__ import annotations

from .kernels.base import Unsupported
from .problem import Problem, operand_layout

OP_NAME = "mm"
ADDMM_SCALARS = "alpha=1&beta=1"  # tuned_addmm's MMKernelInputs scalars, sorted and joined as its key does
SCALED_MM_OP = "scaled_mm"  # tuned_scaled_mm's op name (its key's last part)
_TORCH_DTYPES = {"float16": "torch.float16", "bfloat16": "torch.bfloat16", "float32": "torch.float32",
                 "float8_e4m3fn": "torch.float8_e4m3fn", "float8_e5m2": "torch.float8_e5m2"}


def _strides(problem: Problem) -> tuple[list[int], list[int]]:
    m, n, k = problem.m, problem.n, problem.k
    sa = [k, 1] if problem.slice_layout_a == "row" else [1, m]
    sb = [n, 1] if problem.slice_layout_b == "row" else [1, k]
    if problem.op == "bmm":  # a batch of contiguous (or contiguous-then-transposed) matrices
        sa, sb = [m * k, *sa], [k * n, *sb]
    return sa, sb


def _operand_variants(rows: int, cols: int, layout: str, primary: list[int]) -> list[list[int]]:
    """The 2-D strides Inductor may see for one operand that gemmtune calls ``layout``: ``primary``
    (``_strides``'), then a contiguous (``[cols, 1]``) or transposed-contiguous (``[1, rows]``)
    tensor's strides that ``operand_layout`` reads as the same layout. Only a size-1 dim adds one:
    its stride is never read, so gemmtune gives both tensors one layout (and one key), while
    Inductor's key holds the strides as they are. ``x @ W.T`` of an ``nn.Linear(K, 1)`` (a value
    or reward head, N = 1) passes B with strides [1, K], and the export wrote only [1, 1] (a
    contiguous (K, 1)'s): Inductor never found the entry (tests/test_dispatch_hunt.py)."""
    out = [primary]
    for s in ([cols, 1], [1, rows]):
        if s not in out and operand_layout(rows, cols, tuple(s)) == layout:
            out.append(s)
    return out


def _stride_variants(problem: Problem) -> list[tuple[list[int], list[int]]]:
    """Every (A strides, B strides) pair of ``_operand_variants``, ``_strides``' pair first."""
    m, n, k = problem.m, problem.n, problem.k
    sa, sb = _strides(problem)
    if problem.op == "bmm":
        sa, sb = sa[1:], sb[1:]
    va = _operand_variants(m, k, problem.slice_layout_a, sa)
    vb = _operand_variants(k, n, problem.slice_layout_b, sb)
    out = [(a, b) for a in va for b in vb]
    if problem.op == "bmm":  # a batch of such matrices, each after the other
        out = [([m * k, *a], [k * n, *b]) for a, b in out]
    return out


def _mat_key(dt_a: str, dt_b: str, problem: Problem, strides: tuple | None = None) -> str:
    """The two operands' part of a 2-D key; ``strides``: (A's, B's), default ``_strides``'."""
    sa, sb = strides if strides is not None else _strides(problem)
    return (f"({dt_a}, [{problem.m}, {problem.k}], [{sa[0]}, {sa[1]}]), "
            f"({dt_b}, [{problem.k}, {problem.n}], [{sb[0]}, {sb[1]}])")


def scale_variants(problem: Problem) -> list[tuple[tuple, tuple]]:
    """The (shape, strides) pairs of scale_a and scale_b that a torch._scaled_mm call posing this
    scaled_mm problem may pass, each pair one key of Inductor's tuned_scaled_mm.

    Its key holds the scale tensors as passed. Tensor-wise: (), (1,) or (1, 1), the same shape for
    both (Inductor's scaled templates assert it: BaseScaledMMConfigMixin). Row-wise: scale_a (M, 1)
    and scale_b (1, N), each with either stride that torch calls contiguous: (M, 1) has (1, 1) as
    made (``x.amax(-1, keepdim=True)``) or (1, M) as a transposed (1, M); (1, N) has (N, 1) as made
    or (1, 1) as the transpose of a weight's (N, 1) (``w_scale.t()``). The first pair is the common
    one (``inductor_key``)."""
    if problem.scale == "tensor":
        return [(((), ()), ((), ())), (((1,), (1,)), ((1,), (1,))), (((1, 1), (1, 1)), ((1, 1), (1, 1)))]
    m, n = problem.m, problem.n
    out = []
    for sa in ((1, 1), (1, m)):
        for sb in ((n, 1), (1, 1)):
            v = (((m, 1), sa), ((1, n), sb))
            if v not in out:  # M = 1 or N = 1: the two strides are one
                out.append(v)
    return out


def inductor_keys(problem: Problem, device_key: str | None = None) -> list[str]:
    """Every key under which Inductor may look ``problem`` up: for mm, addmm and bmm one per
    ``_stride_variants`` pair (one, unless an operand has a size-1 dim); for
    scaled_mm one per ``scale_variants`` pair (with the bias when the problem has one). The
    first is ``inductor_key``'s.

    Example::

        >>> from gemmtune.problem import Problem
        >>> p = Problem.from_sizes(64, 96, 128, "e4m3", layout_b="col", op="scaled_mm", scale="tensor")
        >>> inductor_keys(p)[0]
        '((torch.float8_e4m3fn, [64, 128], [128, 1]), (torch.float8_e4m3fn, [128, 96], [1, 128]), (torch.float32, [], []), (torch.float32, [], []))+scaled_mm'
    """
    check_problem(problem)
    pre = [device_key] if device_key else []
    if problem.op != "scaled_mm":
        return ["+".join(pre + [key]) for key in _inductor_keys(problem)]
    # tuned_scaled_mm (torch 2.13 torch/_inductor/kernel/mm.py): MMKernelInputs([mat_a, mat_b,
    # scale_a, scale_b] + [bias] if a bias), no scalars, op "scaled_mm"; the bias (N,) of the
    # output's dtype as passed (its Triton heuristics unsqueeze it and () scales after the lookup).
    mats = _mat_key(_TORCH_DTYPES[problem.dtype], _TORCH_DTYPES[problem.dtype_b], problem)
    bias = f", ({_TORCH_DTYPES[problem.out_dtype]}, [{problem.n}], [1])" if problem.bias else ""
    keys = []
    for (sh_a, st_a), (sh_b, st_b) in scale_variants(problem):
        scales = f"(torch.float32, {list(sh_a)}, {list(st_a)}), (torch.float32, {list(sh_b)}, {list(st_b)})"
        keys.append("+".join(pre + [f"({mats}, {scales}{bias})", SCALED_MM_OP]))
    return keys


def inductor_key(problem: Problem, device_key: str | None = None) -> str:
    """Inductor's lookup key for ``problem`` (contiguous / transposed-contiguous inputs; for
    scaled_mm the first of ``inductor_keys``: () scales tensor-wise, contiguous (M, 1)/(1, N)
    row-wise).

    Example::

        >>> from gemmtune.problem import Problem
        >>> inductor_key(Problem.from_sizes(64, 96, 128, "bf16", layout_b="col"))
        '((torch.bfloat16, [64, 128], [128, 1]), (torch.bfloat16, [128, 96], [1, 128]))+mm'
    """
    return inductor_keys(problem, device_key)[0]


def _inductor_key(problem: Problem) -> str:
    """The first of ``_inductor_keys`` (contiguous / transposed-contiguous operands)."""
    return _inductor_keys(problem)[0]


def _inductor_keys(problem: Problem) -> list[str]:
    """An mm, addmm or bmm problem's keys, one per ``_stride_variants`` pair (addmm: and per
    ``_bias_strides``)."""
    return [_one_key(problem, sa, sb, bias) for bias in _bias_strides(problem)
            for sa, sb in _stride_variants(problem)]


def _bias_strides(problem: Problem) -> list[list[int]]:
    """The strides of addmm's bias as tuned_addmm keys its Triton templates: the bias (N,) expanded
    to (M, N), a view of strides [0, 1]. With N = 1 Inductor (torch 2.13, mm_args' expand) realizes
    the expansion of the (1,) bias into a contiguous (M, 1) buffer, strides [1, 1]: the [0, 1] key
    was never asked for (F.linear of a value head with a bias, tests/test_inductor_export_hunt.py).
    [0, 1] is kept after it for a torch that keeps the view. Other ops: one (unused) entry."""
    if problem.op != "addmm":
        return [[0, 1]]
    return [[1, 1], [0, 1]] if problem.n == 1 else [[0, 1]]


def _one_key(problem: Problem, sa: list[int], sb: list[int], bias: list[int] | None = None) -> str:
    dt = _TORCH_DTYPES[problem.dtype]
    if problem.op == "bmm":
        bt = problem.batch
        mats = (f"({dt}, [{bt}, {problem.m}, {problem.k}], {sa}), "
                f"({dt}, [{bt}, {problem.k}, {problem.n}], {sb})")
        return "+".join([f"({mats})", "bmm"])
    mats = _mat_key(dt, dt, problem, (sa, sb))
    if problem.op == "addmm":
        # The bias as tuned_addmm's Triton templates see it: expanded to the output's shape.
        bias = [0, 1] if bias is None else bias
        inputs = f"(({dt}, [{problem.m}, {problem.n}], {bias}), {mats})"
        return "+".join([inputs, ADDMM_SCALARS, "addmm"])
    return "+".join([f"({mats})", OP_NAME])


def check_problem(problem: Problem) -> None:
    """Raise Unsupported when Inductor's key cannot name ``problem`` exactly."""
    if problem.op not in ("mm", "addmm", "bmm", "scaled_mm"):
        raise Unsupported(f"op {problem.op!r}: only mm, addmm, bmm and scaled_mm are exported")
    if problem.op == "scaled_mm" and (problem.slice_layout_a, problem.slice_layout_b) != ("row", "col"):
        raise Unsupported(f"scaled_mm with A {problem.layout_a} and B {problem.layout_b}: torch._scaled_mm "
                          "takes A row-major and B column-major only (Inductor's tuned_scaled_mm checks "
                          "it, check_supported_striding), so no compiled call poses this problem")
    if problem.broadcast_a or problem.broadcast_b:
        raise Unsupported("bmm with an operand broadcast over the batch (stride 0): whether Inductor's "
                          "tuned_bmm sees the expanded view or a copy depends on the graph; not exported")
    if problem.out_dtype != problem.dtype and problem.op != "scaled_mm":
        raise Unsupported(f"out_dtype {problem.out_dtype} differs from the inputs' {problem.dtype}: "
                          "Inductor sends mm with out_dtype to aten, not to its templates")
    if problem.allow_tf32:
        raise Unsupported("tf32: Inductor's key has no tf32 flag (it follows "
                          "torch.backends.cuda.matmul.fp32_precision)")
    if "strided" in (problem.slice_layout_a, problem.slice_layout_b):
        raise Unsupported("a strided operand: the gemmtune key does not record its strides")
    if min(problem.m, problem.n, problem.k) == 0:
        raise Unsupported("an empty matrix: Inductor runs no template for it")
    # Inductor's decompositions (torch 2.13 torch/_inductor/decomposition.py) replace these with a
    # broadcast multiply before tuned_mm / tuned_addmm / tuned_bmm run, so no lookup ever asks for
    # their keys: bmm with K = 1 on every device, mm / addmm with K = 1 and M, N > 1 on the GPU.
    if problem.k == 1 and (problem.op == "bmm" or (problem.op in ("mm", "addmm") and problem.m > 1 and problem.n > 1)):
        raise Unsupported(f"K = 1: Inductor decomposes this {problem.op} into a broadcast multiply "
                          "(torch/_inductor/decomposition.py) and never looks it up")
    contiguous = Problem.from_sizes(problem.m, problem.n, problem.k, problem.dtype, problem.out_dtype,
                                    layout_a=problem.layout_a, layout_b=problem.layout_b, op=problem.op,
                                    batch=problem.batch, scale=problem.scale, bias=problem.bias)
    if (contiguous.aligned_a, contiguous.aligned_b) != (problem.aligned_a, problem.aligned_b):
        raise Unsupported("operand alignment differs from a contiguous tensor's (an offset data "
                          "pointer): Inductor's key cannot tell the two apart")
