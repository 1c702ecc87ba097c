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
import threading

import torch

from ..epilogue import EpilogueArgs
from ..precision import pads_b_kmajor
from .base import KernelFamily, check_out, missing, out_overlap  # noqa: F401 (out_overlap: public)
from .launch_args import on_other_gpu

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
                         "relaunch", "tile_epilogue", "tiled"})

_FAMILIES: dict[str, KernelFamily] = {}
# "loaded": the built-in families are being or have been registered (register's own _load() call,
# made while loading, returns at once); "ready": they all have been.
_state = {"loaded": False, "ready": False}
_spec_modules: dict = {}
# The first _load() of a process imports the family modules (seconds, the GIL released in
# between). Without the lock, other threads' first calls (a loaded model's first requests, served
# from several threads, deciding two layer shapes at once) saw "loaded" already set and the
# registry still empty: "unknown kernel family 'triton_mm'; known: " from the first call. They
# now wait for the loading thread. Reentrant: register() calls _load() inside the loading thread.
_LOAD_LOCK = threading.RLock()
# The Triton interpreter patches triton.language while a kernel runs: two threads
# interpreting at once corrupt each other (wrong results, "y >= grid_dim[1]"). Every interpreted
# launch holds this one lock: run_choice's (gemmtune.matmul, scaled_mm, measurements) and the
# dispatcher's (dispatch.common, around its cached launches and its first-sight checks).
# Reentrant, since those nest. A GPU launch never takes it.
_INTERP_LOCK = threading.RLock()


def _load() -> dict[str, KernelFamily]:
    """FAMILIES, the built-in families imported and registered on the first call."""
    if _state["ready"]:
        return _FAMILIES
    with _LOAD_LOCK:
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
            _state["ready"] = True
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
    return tuple(_FAMILIES) if _state["ready"] else BUILTIN


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


def validate_choice(choice, problem) -> None:
    """Raise (ValueError, TypeError) when ``choice`` cannot run ``problem``: its family's pure
    ``validate``, on the padded problem for a ``pad+`` choice (what the kernel then runs). Through
    ``spec``, so a check that fails imports no Triton."""
    if choice.pad and getattr(choice.config, "pdl", False):
        # pad+ copies B on every call (fp8's scaled_mm a K-contiguous one) in the kernel just
        # before the GEMM: a -pdl strip would load that B before the copy is done
        raise ValueError("pad+ with a -pdl config: the padded copy of B is written by the kernel just before "
                         "the GEMM, which a -pdl strip reads before waiting for it")
    spec(choice.family).validate(problem.padded() if choice.pad else problem, choice.config)


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


def _padded_operands(a: torch.Tensor, b: torch.Tensor, m: int, k_pad: int, n_pad: int, a_as_is: bool,
                     kmajor: bool = False):
    """(A, B) of a pad+ choice (2-D, or 3-D for bmm): B from ``padcache`` where it is a weight
    (padded once per version), A as it is where ``a_as_is``, and where both are copied per call,
    both in one launch where Triton copies either (``pad.zero_pad_pair``). ``kmajor`` (2-D):
    B's copy column-major (precision.pads_b_kmajor), and B as it is where it already is what
    that copy would make."""
    from . import padcache
    from .pad import zero_pad, zero_pad_pair

    if kmajor:
        k, n = b.shape
        if (k, n) == (k_pad, n_pad) and _unpadded_ok(b.t(), k_pad):
            bp = b
        else:
            bp = padcache.WEIGHTS.get(b, n_pad, k_pad, kmajor=True)
            if bp is None:
                bp = zero_pad(b.t(), n_pad, k_pad).t()
        return (a if a_as_is else zero_pad(a, m, k_pad)), bp
    bp = padcache.WEIGHTS.get(b, n_pad, k_pad)
    if bp is None and not a_as_is:
        return zero_pad_pair(a, m, k_pad, b, k_pad, n_pad)
    return (a if a_as_is else zero_pad(a, m, k_pad)), (bp if bp is not None else zero_pad(b, k_pad, n_pad))


def _into_out(fam, n: int, n_pad: int) -> bool:
    """Whether a pad+ choice of ``fam`` computes straight into the caller's output (on the view
    ``B[:, :N]`` of the padded copy), not into an (M, N') temporary cut down after: where N needed
    no padding, or the family reads through TMA descriptors (``TMA_EDGES``; see ``run_choice``)."""
    return n_pad == n or getattr(fam, "TMA_EDGES", False)


def _unpadded_ok(a: torch.Tensor, k_pad: int) -> bool:
    """Whether a pad+ choice can read A as it is: its K needs no padding and it already is what
    the copy would make (row-major, contiguous, 16-byte aligned). Where only N is odd (a vocabulary
    head: 2048 x 50257 x 4096 bf16 copied its 16 MB A for nothing) the copy is skipped."""
    return a.shape[-1] == k_pad and a.is_contiguous() and a.data_ptr() % 16 == 0


def may_refuse_operands(choice) -> bool:
    """Whether ``choice`` can refuse a call's operands once its problem runs: only a copy-free
    ``persistent_tma`` choice, as TMA needs 16-byte aligned bases and leading strides (a problem's
    layouts and alignment are what a decision checked; a later call of the same sizes may differ).
    A ``pad+`` choice copies whatever it gets."""
    return not choice.pad and choice.family == "persistent_tma"


def operands_reason(choice, a: torch.Tensor, b: torch.Tensor) -> str | None:
    """Why ``choice`` cannot read these very operands (None when it can; ``may_refuse_operands``)."""
    if not may_refuse_operands(choice) or a.dim() != 2:
        return None
    from .persistent import operands_reason as tma_reason
    return tma_reason(a, b)


def run_choice(choice, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, *,
               allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None) -> None:
    """Run one choice into ``out`` (shapes and ``epilogue`` already checked; M, N, K > 0).
    An ``out`` that overlaps the memory of ``a``, ``b`` or an epilogue tensor is refused with a
    ValueError naming the overlap (every family, torch.mm included, wrote garbage into it:
    base.out_overlap); ``run_choice_unchecked`` is this without the check, for a caller that
    allocated ``out`` itself."""
    check_out(out, a, b, epilogue)
    run_choice_unchecked(choice, a, b, out, allow_tf32=allow_tf32, workspace=workspace, epilogue=epilogue)


def run_choice_unchecked(choice, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, *,
                         allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None) -> None:
    """``run_choice`` into an ``out`` known to be fresh (gemmtune.matmul's, the tuner's timing
    loop's, a dispatcher's and scaled_mm's per-call output), where the overlap check's ~1.3 us a
    call buys nothing.

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

    Runs on the operands' GPU whichever device is current (Triton launches on the current one).
    A Triton family's kernel on tensors off the GPU runs in the CPU interpreter (or fails to
    launch), one at a time in the process (``_INTERP_LOCK``): gemmtune.matmul called from several
    threads returned wrong results and raised "x >= grid_dim[0]" without it.
    """
    if not a.is_cuda and choice.family in TRITON_FAMILIES:
        with _INTERP_LOCK:
            return _run_choice(choice, a, b, out, allow_tf32=allow_tf32, workspace=workspace, epilogue=epilogue)
    if on_other_gpu(a):
        with torch.cuda.device(a.device):
            return run_choice_unchecked(choice, a, b, out, allow_tf32=allow_tf32, workspace=workspace,
                                        epilogue=epilogue)
    _run_choice(choice, a, b, out, allow_tf32=allow_tf32, workspace=workspace, epilogue=epilogue)


def _run_choice(choice, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, *,
                allow_tf32: bool, workspace, epilogue: EpilogueArgs | None) -> None:
    """``run_choice`` on the current device, any lock it needs held."""
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
        # fp32 run as 3xTF32: B's copy K-major, the layout TF32 wgmma reads (precision.pads_b_kmajor
        # says what it gains; Problem.padded says the same). Not for cuBLAS (pad+aten): its SGEMM
        # gains nothing from a K-major B, and a transposed copy costs more than a straight one.
        kmajor = pads_b_kmajor(a.dtype, allow_tf32) and choice.family != "aten"
        ap, bp = _padded_operands(a, b, M, Kp, Np, _unpadded_ok(a, Kp), kmajor)
    if _into_out(fam, N, Np):
        fam.run(ap, bp[:, :N], out, choice.config, allow_tf32=allow_tf32, workspace=workspace,
                epilogue=epilogue)
        return
    tmp = torch.empty((M, Np), dtype=out.dtype, device=out.device)
    fam.run(ap, bp, tmp, choice.config, allow_tf32=allow_tf32, workspace=workspace,
            epilogue=None if epilogue is None else epilogue.padded(Np - N))
    out.copy_(tmp[:, :N])


def prepare_choice(choice, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, *,
                   allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None):
    """Run ``choice`` once into ``out`` and return ``(matches(a, b), launch(a, b, out))``, both
    taking the ``epilogue`` as a keyword, a launch for repeated calls at this problem that skips
    Triton's per-call argument binding; or None where there is none (the interpreter, aten, a
    family without one). ``launch`` is only valid where ``matches``. A ``pad+`` choice gets its
    copies and its family's launch prepared (``_prepare_padded``), others their family's
    ``prepare``. An ``out`` that overlaps an input is refused, as by ``run_choice``."""
    check_out(out, a, b, epilogue)
    fam = get(choice.family)
    if not choice.pad:
        return fam.prepare(a, b, out, choice.config, allow_tf32=allow_tf32, workspace=workspace, epilogue=epilogue)
    return _prepare_padded(fam, choice, a, b, out, allow_tf32=allow_tf32, workspace=workspace, epilogue=epilogue)


def _recording(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether autograd records a product of ``a`` and ``b`` (the generic path then pads with F.pad)."""
    return (a.requires_grad or b.requires_grad) and torch.is_grad_enabled()


def _prepare_padded(fam, choice, a, b, out, *, allow_tf32, workspace, epilogue):
    """``prepare_choice`` for a 2-D ``pad+`` choice: what ``run_choice`` does, with the per-call pad
    copies relaunched compiled (``pad.prepare_copies``, also where the generic path would copy with
    torch: a relaunch costs less host time than one aten op) and the family's own prepared launch
    on the padded operands where it has one. B comes from ``padcache`` on every call, as in
    ``run_choice``; a call where it stops (or starts) coming from there, inside a CUDA-graph capture
    for instance, takes ``run_choice``. Generic launches of these choices cost 2.1-5.4x cuBLAS's
    eager time per call (H100, session 23, benchmarks/results/2026-11-27-h100-s23 section 5)."""
    from . import padcache
    from .launch_args import operands_key
    from .pad import prepare_copies

    if a.dim() != 2 or not a.is_cuda or _recording(a, b) or (epilogue is not None and epilogue.spec.scale != "none") \
            or pads_b_kmajor(a.dtype, allow_tf32):  # K-major B copies: run_choice's own path
        return None
    M, K = a.shape
    N = b.shape[1]
    _, Np, Kp = padded_sizes(M, N, K, a.element_size())
    a_as_is = _unpadded_ok(a, Kp)
    cached = padcache.WEIGHTS.get(b, Np, Kp)
    specs = ([] if a_as_is else [(a, M, Kp)]) + ([] if cached is not None else [(b, Kp, Np)])
    copies, made = (None, []) if not specs else (prepare_copies(*specs) or (None, None))
    if made is None:
        return None
    ap = a if a_as_is else made[0]
    bp = cached if cached is not None else made[-1]
    into_out = _into_out(fam, N, Np)
    cfg, kw = choice.config, {"allow_tf32": allow_tf32, "workspace": workspace}
    wide = (M, Np)

    def padded_epilogue(e):
        return e if into_out or e is None else e.padded(Np - N)
    target = out if into_out else torch.empty(wide, dtype=out.dtype, device=out.device)
    bv, e = bp[:, :N] if into_out else bp, padded_epilogue(epilogue)
    inner = fam.prepare(ap, bv, target, cfg, epilogue=e, **kw)
    if inner is None:  # aten, or a family without a prepared launch: its ordinary run
        fam.run(ap, bv, target, cfg, epilogue=e, **kw)
    if not into_out:
        out.copy_(target[:, :N])
    key, is_cached = operands_key(a, b, epilogue), cached is not None
    empty, dt = torch.empty, out.dtype

    def matches(a, b, epilogue=None):
        return operands_key(a, b, epilogue) == key and not _recording(a, b)

    def launch(a, b, c, epilogue=None):
        bp = padcache.WEIGHTS.get(b, Np, Kp)
        if (bp is not None) != is_cached or c.stride() != (N, 1):
            run_choice(choice, a, b, c, epilogue=epilogue, **kw)
            return
        ap = a
        if copies is not None:
            made = copies(*([] if a_as_is else [a]), *([] if is_cached else [b]))
            ap = a if a_as_is else made[0]
            bp = bp if is_cached else made[-1]
        e = padded_epilogue(epilogue)
        if into_out:
            bv, dst = bp[:, :N], c
        else:
            bv, dst = bp, empty(wide, dtype=dt, device=c.device)
        if inner is not None and inner[0](ap, bv, epilogue=e):
            inner[1](ap, bv, dst, epilogue=e)
        else:
            fam.run(ap, bv, dst, cfg, epilogue=e, **kw)
        if not into_out:
            c.copy_(dst[:, :N])
    return matches, launch
