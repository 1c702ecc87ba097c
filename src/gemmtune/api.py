"""The public entry points: matmul, families, space, default_choice."""

from __future__ import annotations

import torch

from . import epilogue as epi_mod
from .autograd import differentiable, needs_grad, torch_product, transformed
from . import kernels
from .device import DeviceInfo, current_or
from .problem import Problem, _layout_of, check_operands, dtype_name
from .configs import Choice, SplitKConfig, cdiv, next_pow2

SPACE_KINDS = ("default", "exhaustive")


def interpreter_enabled() -> bool:
    """True when Triton kernels run in the CPU interpreter (TRITON_INTERPRET=1 at import)."""
    from .kernels.tiled import _tiled_mm_kernel  # imports Triton: not at this module's import

    return type(_tiled_mm_kernel).__name__ == "InterpretedFunction"


_CPU_NOTED = False


def _note_cpu_fallback(choice: Choice) -> None:
    global _CPU_NOTED
    if not _CPU_NOTED:
        _CPU_NOTED = True
        import warnings
        warnings.warn(f"gemmtune.matmul: CPU tensors and no Triton interpreter, so the default choice "
                      f"({choice.id}) runs as aten (torch.mm); set TRITON_INTERPRET=1 before importing "
                      "gemmtune to run Triton kernels on the CPU", RuntimeWarning, stacklevel=3)


def families() -> list[str]:
    """Names of the kernel families, e.g. ``['triton_mm', 'splitk', 'decompose_k', 'aten']``."""
    return list(kernels.FAMILIES)


def space(problem: Problem, family: str, kind: str = "default",
          device: DeviceInfo | str | None = None, *, with_rejected: bool = False):
    """The candidate choices of ``family`` for ``problem``.

    ``device`` is a DeviceInfo, a built-in GPU name ('h100', 'h200', 'a100'), or None
    for the visible GPU (the built-in H100 on a machine without one). With
    ``with_rejected=True`` it returns ``(choices, [(choice, reason), ...])``.

    Example::

        >>> import gemmtune
        >>> p = gemmtune.Problem.from_sizes(32, 32, 28672, "bf16")
        >>> [c.id for c in gemmtune.space(p, "decompose_k", device="h100")][:2]
        ['decompose_k:s32', 'decompose_k:s56']
    """
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a gemmtune.Problem (e.g. Problem.from_sizes(m, n, k, 'bf16')), "
                        f"not {type(problem).__name__}")
    if kind not in SPACE_KINDS:
        raise ValueError(f"space kind must be one of {SPACE_KINDS}, got {kind!r}")
    dev = _device(device)
    fam = kernels.spec(family)  # the family's pure part: listing a space imports no Triton
    kept, rejected = fam.space(problem, dev, kind)
    choices = [Choice(family, c) for c in kept]
    if with_rejected:
        return choices, [(Choice(family, c), r) for c, r in rejected]
    return choices


def _device(device) -> DeviceInfo:
    """``device`` (a DeviceInfo, a built-in GPU name, or None: the visible GPU, else the H100) as a
    DeviceInfo; a TypeError naming anything else (an int failed inside the name's regex search)."""
    if isinstance(device, DeviceInfo):
        return device
    if device is not None and not isinstance(device, str):
        raise TypeError(f"device must be a DeviceInfo, a built-in GPU name ('h100', 'h200', 'a100') or None, "
                        f"not {type(device).__name__}")
    return current_or(device)


def default_choice(problem: Problem, device: DeviceInfo | str | None = None) -> Choice:
    """A sensible untuned choice: fused split-K where the output is small and K long
    (one tile per SM otherwise idles most of the GPU), cuBLAS everywhere else. ``device`` as in
    ``space``: a DeviceInfo, a built-in GPU name, or None."""
    if not isinstance(problem, Problem):  # (was AttributeError: 'str' object has no attribute 'm')
        raise TypeError(f"problem must be a gemmtune.Problem (e.g. Problem.from_sizes(m, n, k, 'bf16')), "
                        f"not {type(problem).__name__}")
    # A name ('h100', as space() takes) raised AttributeError: 'str' object has no attribute 'sm_count'.
    dev = _device(device)
    m, n, k = problem.m, problem.n, problem.k
    if problem.op == "bmm":
        return Choice("aten", kernels.aten.CONFIG())  # torch.bmm; split-K serves no bmm
    if m * n <= 256 * 256 and k >= 2048 and k >= 8 * max(m, n):
        bm = max(16, min(64, next_pow2(m)))
        bn = max(16, min(64, next_pow2(n)))
        tiles = cdiv(m, bm) * cdiv(n, bn)
        split = 2
        # Aim at about one wave of programs, keeping each K-slice >= 256 long.
        while split * 2 * tiles <= dev.sm_count and k // (split * 2) >= 256:
            split *= 2
        bk = max(16, min(128, next_pow2(k // split)))
        return Choice("splitk", SplitKConfig(bm, bn, bk, 4, 4, 8, split, True))
    return Choice("aten", kernels.aten.CONFIG())


def _resolve_choice(choice, problem: Problem, a: torch.Tensor) -> Choice:
    """``matmul``'s ``choice`` (None: the default heuristic) as a Choice that can run ``problem`` on
    ``a``'s device, or a TypeError/ValueError saying why not."""
    if choice is None:
        choice = default_choice(problem)
        if choice.family in kernels.TRITON_FAMILIES and a.device.type == "cpu" and not interpreter_enabled():
            _note_cpu_fallback(choice)
            choice = Choice("aten", kernels.aten.CONFIG())
    return checked_choice(choice, problem, a, "choice='aten'")


def checked_choice(choice, problem: Problem, a: torch.Tensor, cpu_alternative: str) -> Choice:
    """``choice`` (a Choice or a choice id string) parsed and validated for ``problem`` on ``a``'s
    device, or a TypeError/ValueError saying why not; ``cpu_alternative`` names what to use instead
    of a Triton choice on a CPU without the interpreter. matmul's and scaled_mm's one check."""
    if isinstance(choice, str):
        choice = Choice.parse(choice)
    elif not isinstance(choice, Choice):
        raise TypeError(f"choice must be a Choice, a choice id string or None, not {type(choice).__name__}")
    kernels.validate_choice(choice, problem)
    if choice.family in kernels.TRITON_FAMILIES:
        if a.device.type == "cpu" and not interpreter_enabled():
            raise ValueError(
                f"{choice.family} needs CUDA tensors; these are on the CPU. Move them to a GPU, "
                "set TRITON_INTERPRET=1 before importing gemmtune to run Triton on the CPU "
                f"(slow, for testing), or use {cpu_alternative}")
        if a.device.type not in ("cpu", "cuda"):  # (meta: failed deep in the interpreter, "no data!")
            raise ValueError(f"{choice.family} runs on CUDA devices, not {a.device.type}")
    return choice


def _empty_batch(a: torch.Tensor, b: torch.Tensor, out_dtype, choice) -> torch.Tensor:
    """A bmm of batch 0: torch.bmm's answer, an empty (0, M, N) output; there is no kernel to
    run, and no Problem (whose batch is at least 1). The checks are those of a batch of one, the
    choice's included: before, any ``choice`` (a typo, a family that refuses every bmm, not even a
    string) passed at batch 0 and raised only once the batch was not empty."""
    one = Problem.from_sizes(a.shape[1], b.shape[2], a.shape[2], a.dtype, out_dtype, op="bmm",
                             layout_a=_layout_of(a), layout_b=_layout_of(b))
    _resolve_choice(choice, one, a)
    if needs_grad(a, b):  # an empty product that still has a grad_fn, as torch.bmm's has
        return torch.bmm(a, b).to(one.torch_out_dtype)
    return torch.empty((0, one.m, one.n), dtype=one.torch_out_dtype, device=a.device)


def matmul(a: torch.Tensor, b: torch.Tensor, *, choice: Choice | str | None = None,
           out_dtype: torch.dtype | str | None = None, allow_tf32: bool = False,
           workspace=None, bias: torch.Tensor | None = None, activation: str = "none",
           residual: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b`` with one chosen kernel, or the default heuristic when ``choice`` is None.

    ``choice`` is a Choice or its id, e.g. ``"triton_mm:BM64-BN64-BK32-S3-W4-G8"``,
    ``"splitk:BM32-BN32-BK128-S4-W4-G8-SK16-det"``, ``"decompose_k:s8"`` or ``"aten"``;
    a ``pad+`` prefix (``"pad+aten"``) copies unaligned operands to aligned buffers first.
    ``out_dtype`` is the inputs' dtype (default) or float32. For float32 inputs,
    ``allow_tf32=True`` lets the Triton kernels use tf32 tensor-core math. ``workspace``: a
    ``gemmtune.kernels.splitk.SplitKWorkspace`` the split-K and skinny kernels reuse across
    calls (None: a fresh one per call).

    CPU tensors: Triton kernels run there only in its interpreter (``TRITON_INTERPRET=1``
    set before importing gemmtune; slow, for testing). Without it, the default heuristic
    (``choice=None``) falls back to ``aten`` (torch.mm) with a one-time warning, and an
    explicit Triton choice raises a ValueError that says so.

    Fused epilogue: ``act(a @ b + bias) + residual``, applied in fp32 to the accumulator
    before the output is rounded and stored, in the same kernel (gemmtune.epilogue); ``aten``
    adds the bias in torch.addmm and applies the rest on the rounded output (kernels.aten.run).
    ``bias``: shape (N,), added to every row; ``activation``: 'none', 'gelu_tanh',
    'gelu_erf', 'silu' or 'relu'; ``residual``: shape (M, N), any strides. Both tensors
    have the output's dtype and device.

    3-D operands (batch, M, K) @ (batch, K, N) make a bmm (``torch.bmm``'s product, one output
    (batch, M, N)): triton_mm choices run the batched tiled kernel, ``aten`` runs torch.bmm, and
    ``pad+`` either on padded copies; the other families refuse it, saying why. Each operand
    may be any strided view (a transposed ``k.transpose(1, 2)``, an offset slice) or one matrix
    broadcast over the batch (``w.expand(B, K, N)``: batch stride 0, read once). A bmm takes
    no fused epilogue. The default choice for a bmm is ``aten``.

    Differentiable: with grad mode on and an operand that requires grad, the result has a
    ``grad_fn`` whatever the kernel; the backward runs torch's products (gemmtune.autograd).
    Under forward-mode AD (``torch.autograd.forward_ad``) or a ``torch.func`` transform (``vmap``,
    ``grad``, ``jvp``) the product runs as torch's own ops instead of ``choice`` (a kernel would drop
    the tangents; gemmtune.autograd.transformed).

    Example (CUDA tensors: skipped where doctests run, on a CPU)::

        >>> import torch, gemmtune
        >>> a = torch.randn(32, 4096, device="cuda", dtype=torch.bfloat16)  # needs a GPU  # doctest: +SKIP
        >>> b = torch.randn(4096, 32, device="cuda", dtype=torch.bfloat16)  # needs a GPU  # doctest: +SKIP
        >>> c = gemmtune.matmul(a, b, choice="decompose_k:s8")              # needs a GPU  # doctest: +SKIP
        >>> bias = torch.randn(32, device="cuda", dtype=torch.bfloat16)     # needs a GPU  # doctest: +SKIP
        >>> h = gemmtune.matmul(a, b, bias=bias, activation="gelu_tanh", residual=c)  # needs a GPU  # doctest: +SKIP

    Under torch.compile the call traces as the ``gemmtune::matmul`` op (gemmtune.torch_ops): one
    opaque node, the kernel launched at run time (``workspace`` is not passed: each call gets a
    fresh one). Traced through, the Triton launch failed in the CPU interpreter and broke the graph.
    """
    if torch.compiler.is_compiling():
        from .torch_ops import traced_matmul
        return traced_matmul(a, b, choice, out_dtype, allow_tf32, bias, activation, residual)
    check_operands(a, b)
    if a.dim() == 3:  # a bmm
        if bias is not None or residual is not None or activation != "none":
            raise ValueError("a bmm (3-D operands) takes no fused epilogue (bias, activation, residual): "
                             "apply it to the output, or multiply 2-D operands")
    if workspace is not None:
        from .kernels.splitk import SplitKWorkspace
        if not isinstance(workspace, SplitKWorkspace):  # split-K raised AttributeError on .partials
            raise TypeError(f"workspace must be a gemmtune.kernels.splitk.SplitKWorkspace or None, "
                            f"not {type(workspace).__name__}")
    if a.dim() == 3 and a.shape[0] == 0:
        return _empty_batch(a, b, out_dtype, choice)
    if transformed():
        # Forward-mode AD or a torch.func transform: torch's own ops, after the same checks (no data
        # pointer read: a transform's operands have none). A kernel dropped a dual operand's tangent.
        bmm = a.dim() == 3
        problem = Problem.from_sizes(a.shape[-2], b.shape[-1], a.shape[-1], a.dtype, out_dtype,
                                     op="bmm" if bmm else "mm", batch=a.shape[0] if bmm else 1)
        if not bmm:
            epi_mod.bind(problem.m, problem.n, problem.torch_out_dtype, a.device, bias=bias,
                         activation=activation, residual=residual)
        return torch_product(a, b, bias, activation, residual, problem.torch_out_dtype)
    problem = Problem._from_checked(a, b, out_dtype, allow_tf32=allow_tf32, op="bmm" if a.dim() == 3 else "mm")
    if problem.op == "bmm":
        epilogue = None
    else:
        epilogue = epi_mod.bind(problem.m, problem.n, problem.torch_out_dtype, a.device, bias=bias,
                                activation=activation, residual=residual)
    choice = _resolve_choice(choice, problem, a)

    def run() -> torch.Tensor:
        out = torch.empty(problem.out_shape, dtype=problem.torch_out_dtype, device=a.device)
        if problem.m == 0 or problem.n == 0:
            return out
        if problem.k == 0:
            return epi_mod.apply_(out.zero_(), epilogue)
        kernels.run_choice_unchecked(choice, a, b, out, allow_tf32=problem.allow_tf32, workspace=workspace,
                           epilogue=epilogue)
        return out

    if needs_grad(a, b, bias, residual):  # whichever kernel runs, the result has a grad_fn
        return differentiable(run, a, b, bias, activation, residual)
    return run()


__all__ = ["matmul", "families", "space", "default_choice", "interpreter_enabled", "dtype_name"]
