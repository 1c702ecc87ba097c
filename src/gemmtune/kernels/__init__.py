"""Kernel families. Each module holds one family: its launcher, its config space, its plan.

A family module satisfies ``kernels.base.KernelFamily``: ``NAME``, ``CONFIG`` (its config
dataclass), ``space(problem, device, kind) -> (kept, rejected)``, ``constraint(cfg, problem,
device) -> reason | None``, ``validate(problem, cfg)`` (raises ValueError when the family
cannot run the config at all), ``plan(m, n, k, cfg, sms=None) -> dict`` (grid, splits,
workspace: the one source of that arithmetic), ``run(a, b, out, cfg, *, allow_tf32,
workspace, epilogue)``, where ``epilogue`` is None or a checked
``gemmtune.epilogue.EpilogueArgs`` (bias, activation, residual fused into the store),
``prepare`` (same arguments; a prepared launch or None), ``features_row`` (the model's
ChoiceBatch row) and ``inductor_export`` (Inductor's lookup-table config, or
``base.Unsupported``). ``register`` checks a family against the protocol and adds it.
"""

import torch

from ..epilogue import EpilogueArgs
from . import aten, decompose_k, padcache, persistent, skinny, splitk, triton_mm, triton_static
from .base import KernelFamily, missing
from .pad import zero_pad

FAMILIES: dict[str, KernelFamily] = {}


def register(family: KernelFamily) -> KernelFamily:
    """Add ``family`` to FAMILIES (a new family is its module plus one call here)."""
    if not isinstance(family, KernelFamily):
        raise TypeError(f"{getattr(family, '__name__', family)!r} is not a KernelFamily "
                        f"(missing: {', '.join(missing(family))})")
    if family.NAME in FAMILIES and FAMILIES[family.NAME] is not family:
        raise ValueError(f"kernel family {family.NAME!r} is registered already")
    FAMILIES[family.NAME] = family
    return family


for _family in (triton_mm, triton_static, splitk, skinny, persistent, decompose_k, aten):
    register(_family)
TRITON_FAMILIES = ("triton_mm", "triton_static", "splitk", "skinny", "persistent_tma", "decompose_k")


def get(name: str) -> KernelFamily:
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown kernel family {name!r}; known: {', '.join(FAMILIES)}") from None


def padded_sizes(m: int, n: int, k: int, elsize: int) -> tuple[int, int, int]:
    """(M, N', K') with N and K rounded up to whole 16-byte vectors."""
    per = max(1, 16 // elsize)
    return m, -(-n // per) * per, -(-k // per) * per


def _run_padded_bmm(fam, choice, a, b, out, *, allow_tf32, workspace) -> None:
    """``pad+`` for bmm: the same padding as mm's, matrix by matrix (Problem.padded)."""
    Bt, M, K = a.shape
    N = b.shape[-1]
    _, Np, Kp = padded_sizes(M, N, K, a.element_size())
    ap = zero_pad(a, M, Kp)
    bp = padcache.WEIGHTS.get(b, Np, Kp)  # a (batched or broadcast) weight: once per version
    if bp is None:
        bp = zero_pad(b, Kp, Np)
    if Np == N:
        fam.run(ap, bp, out, choice.config, allow_tf32=allow_tf32, workspace=workspace)
        return
    tmp = torch.empty((Bt, M, Np), dtype=out.dtype, device=out.device)
    fam.run(ap, bp, tmp, choice.config, allow_tf32=allow_tf32, workspace=workspace)
    out.copy_(tmp[..., :N])


def run_choice(choice, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, *,
               allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None) -> None:
    """Run one choice into ``out`` (shapes and ``epilogue`` already checked; M, N, K > 0).

    ``pad+`` choices run on zero-padded row-major copies: K and N rounded up to
    whole 16-byte vectors, so every row starts aligned and no vector straddles a
    ragged edge (as Inductor's pad_mm does). Zero columns of A meet zero rows of
    B, so the product is unchanged. A B that is an ``nn.Parameter`` (or a view of one, as
    ``W.t()`` in a Linear layer) is padded once per parameter version (``padcache``).
    3-D operands (bmm) are padded matrix by matrix, a broadcast one once (``zero_pad``).

    Where N was padded, pointer-based kernels compute the padded N into a temporary (the bias
    and residual padded with it) that is cut off when copying out: computing the real, odd N
    instead masks B's contiguous dim, which costs Triton its 16-byte vectors (H200, 2026-11-24:
    with that change ``--fast``'s pad+triton_mm pick on 4095^3 lost to cuBLAS's 918 us, where
    it had run at 2.89x). A family that reads through TMA descriptors (``TMA_EDGES``: boxes
    past the edge arrive zero-filled, no mask) runs on the view ``B[:, :N]`` of the padded
    copy and writes straight into ``out``, saving the temporary and the copy.
    """
    fam = get(choice.family)
    if not choice.pad:
        fam.run(a, b, out, choice.config, allow_tf32=allow_tf32, workspace=workspace, epilogue=epilogue)
        return
    if a.dim() == 3:  # bmm (no epilogue)
        _run_padded_bmm(fam, choice, a, b, out, allow_tf32=allow_tf32, workspace=workspace)
        return
    M, K = a.shape
    N = b.shape[1]
    _, Np, Kp = padded_sizes(M, N, K, a.element_size())
    ap = zero_pad(a, M, Kp)
    if epilogue is not None and epilogue.spec.scale != "none":
        # fp8 (scaled_mm): B padded into a K-major (column-major) copy, the layout cuBLASLt's fp8
        # GEMM and wgmma's fp8 operands need (Problem.padded says the same).
        bp = zero_pad(b.t(), Np, Kp).t()
    else:  # a weight is padded once per version (padcache)
        bp = padcache.WEIGHTS.get(b, Np, Kp)
    if bp is None:
        bp = zero_pad(b, Kp, Np)
    if Np == N or getattr(fam, "TMA_EDGES", False):
        fam.run(ap, bp[:, :N], out, choice.config, allow_tf32=allow_tf32, workspace=workspace,
                epilogue=epilogue)
        return
    tmp = torch.empty((M, Np), dtype=out.dtype, device=out.device)
    fam.run(ap, bp, tmp, choice.config, allow_tf32=allow_tf32, workspace=workspace,
            epilogue=None if epilogue is None else epilogue.padded(Np - N))
    out.copy_(tmp[:, :N])
