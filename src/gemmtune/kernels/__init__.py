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

The family modules import Triton (0.3-0.4 s with the kernels, on the 2-core CPU machine), which
the tuner's parent process, planning and ranking candidates, never runs: ``spec(name)`` is a
built-in family's pure part (its ``*_spec`` module: ``NAME``, ``CONFIG``, ``space``,
``constraint``, ``validate``, ``plan``, ``features_row``, the same objects the family
re-exports), imported without Triton. ``FAMILIES``, ``get`` and the family submodules
(``kernels.splitk``) are imported on first use.
"""

import importlib

import torch

from ..epilogue import EpilogueArgs
from .base import KernelFamily, missing

TRITON_FAMILIES = ("triton_mm", "triton_static", "splitk", "skinny", "persistent_tma", "decompose_k")
# The built-in families in registration order (FAMILIES' order): each one's module, and the
# module of its pure part.
BUILTIN = ("triton_mm", "triton_static", "splitk", "skinny", "persistent_tma", "decompose_k", "aten")
_MODULES = {"triton_mm": "triton_mm", "triton_static": "triton_static", "splitk": "splitk", "skinny": "skinny",
            "persistent_tma": "persistent", "decompose_k": "decompose_k", "aten": "aten"}
_SPECS = {"triton_mm": "triton_mm_spec", "triton_static": "triton_static_spec", "splitk": "splitk_spec",
          "skinny": "skinny_spec", "persistent_tma": "persistent_spec", "decompose_k": "decompose_k_spec",
          "aten": "aten"}  # aten.py imports no Triton
# This package's modules, for ``kernels.<module>`` before anything imported it.
_SUBMODULES = frozenset({*_MODULES.values(), *_SPECS.values(), "base", "launch_args", "pad", "padcache",
                         "tile_epilogue", "tiled"})

_FAMILIES: dict[str, KernelFamily] = {}
_state = {"loaded": False}
_spec_modules: dict = {}


def _load() -> dict[str, KernelFamily]:
    """FAMILIES, the built-in families imported and registered on the first call."""
    if not _state["loaded"]:
        _state["loaded"] = True
        try:
            for name in BUILTIN:
                register(importlib.import_module(f"{__name__}.{_MODULES[name]}"))
        except BaseException:
            _state["loaded"] = False
            _FAMILIES.clear()
            raise
        globals()["FAMILIES"] = _FAMILIES
    return _FAMILIES


def __getattr__(name: str):
    if name == "FAMILIES":
        return _load()
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register(family: KernelFamily) -> KernelFamily:
    """Add ``family`` to FAMILIES (a new family is its module plus one call here)."""
    families = _load()
    if not isinstance(family, KernelFamily):
        raise TypeError(f"{getattr(family, '__name__', family)!r} is not a KernelFamily "
                        f"(missing: {', '.join(missing(family))})")
    if family.NAME in families and families[family.NAME] is not family:
        raise ValueError(f"kernel family {family.NAME!r} is registered already")
    families[family.NAME] = family
    return family


def family_names() -> tuple[str, ...]:
    """The registered families' names, in FAMILIES' order, without importing them: the built-in
    ones until a family module is imported (``get``, ``FAMILIES``)."""
    return tuple(_FAMILIES) if _state["loaded"] else BUILTIN


def spec(name: str):
    """Family ``name``'s pure part, without Triton: for a built-in family its ``*_spec`` module
    (whose functions the family module re-exports), for one registered later the family itself.
    ValueError for an unknown name, as ``get``."""
    mod = _spec_modules.get(name)
    if mod is None:
        if name not in _SPECS:
            return get(name)
        mod = _spec_modules[name] = importlib.import_module(f"{__name__}.{_SPECS[name]}")
    return mod


def get(name: str) -> KernelFamily:
    try:
        return _load()[name]
    except KeyError:
        raise ValueError(f"unknown kernel family {name!r}; known: {', '.join(_FAMILIES)}") from None


def padded_sizes(m: int, n: int, k: int, elsize: int) -> tuple[int, int, int]:
    """(M, N', K') with N and K rounded up to whole 16-byte vectors."""
    per = max(1, 16 // elsize)
    return m, -(-n // per) * per, -(-k // per) * per


def _run_padded_bmm(fam, choice, a, b, out, *, allow_tf32, workspace) -> None:
    """``pad+`` for bmm: the same padding as mm's, matrix by matrix (Problem.padded)."""
    Bt, M, K = a.shape
    N = b.shape[-1]
    _, Np, Kp = padded_sizes(M, N, K, a.element_size())
    ap, bp = _padded_operands(a, b, M, Kp, Np, False)
    if Np == N:
        fam.run(ap, bp, out, choice.config, allow_tf32=allow_tf32, workspace=workspace)
        return
    tmp = torch.empty((Bt, M, Np), dtype=out.dtype, device=out.device)
    fam.run(ap, bp, tmp, choice.config, allow_tf32=allow_tf32, workspace=workspace)
    out.copy_(tmp[..., :N])


def _padded_operands(a: torch.Tensor, b: torch.Tensor, m: int, k_pad: int, n_pad: int, a_as_is: bool):
    """(A, B) of a pad+ choice (2-D, or 3-D for bmm): B from ``padcache`` where it is a weight
    (padded once per version), A as it is where ``a_as_is``, and where both are copied per call,
    both in one launch where Triton copies either (``pad.zero_pad_pair``)."""
    from . import padcache
    from .pad import zero_pad, zero_pad_pair

    bp = padcache.WEIGHTS.get(b, n_pad, k_pad)
    if bp is None and not a_as_is:
        return zero_pad_pair(a, m, k_pad, b, k_pad, n_pad)
    return (a if a_as_is else zero_pad(a, m, k_pad)), (bp if bp is not None else zero_pad(b, k_pad, n_pad))


def _unpadded_ok(a: torch.Tensor, k_pad: int) -> bool:
    """Whether a pad+ choice can read A as it is: its K needs no padding and it already is what
    the copy would make (row-major, contiguous, 16-byte aligned). Where only N is odd (a vocabulary
    head: 2048 x 50257 x 4096 bf16 copied its 16 MB A for nothing) the copy is skipped."""
    return a.shape[-1] == k_pad and a.is_contiguous() and a.data_ptr() % 16 == 0


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
    copy and writes straight into ``out``, saving the temporary and the copy. cuBLAS (``aten``)
    keeps the temporary: into an output whose leading dimension is not 16-byte aligned it runs
    its slow kernels (H100, 2026-11-27, benchmarks/results/2026-11-27-h100-s17: 4095^3 bf16
    1090 us written directly, 268 us through the temporary and the copy).
    """
    fam = get(choice.family)
    if not choice.pad:
        fam.run(a, b, out, choice.config, allow_tf32=allow_tf32, workspace=workspace, epilogue=epilogue)
        return
    if a.dim() == 3:  # bmm (no epilogue)
        _run_padded_bmm(fam, choice, a, b, out, allow_tf32=allow_tf32, workspace=workspace)
        return
    from .pad import zero_pad

    M, K = a.shape
    N = b.shape[1]
    _, Np, Kp = padded_sizes(M, N, K, a.element_size())
    if epilogue is not None and epilogue.spec.scale != "none":
        # fp8 (scaled_mm): B padded into a K-major (column-major) copy, the layout cuBLASLt's fp8
        # GEMM and wgmma's fp8 operands need (Problem.padded says the same).
        ap, bp = zero_pad(a, M, Kp), zero_pad(b.t(), Np, Kp).t()
    else:  # where only N is odd, A is read as it is (_unpadded_ok)
        ap, bp = _padded_operands(a, b, M, Kp, Np, _unpadded_ok(a, Kp))
    if Np == N or getattr(fam, "TMA_EDGES", False):
        fam.run(ap, bp[:, :N], out, choice.config, allow_tf32=allow_tf32, workspace=workspace,
                epilogue=epilogue)
        return
    tmp = torch.empty((M, Np), dtype=out.dtype, device=out.device)
    fam.run(ap, bp, tmp, choice.config, allow_tf32=allow_tf32, workspace=workspace,
            epilogue=None if epilogue is None else epilogue.padded(Np - N))
    out.copy_(tmp[:, :N])
