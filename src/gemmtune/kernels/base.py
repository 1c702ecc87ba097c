"""The KernelFamily protocol: what every kernel family module provides.

A family is one module (triton_mm.py, splitk.py, ...) registered in kernels/__init__.py.
The module itself is the family object: its module-level names are the protocol's
members, so ``kernels.get("splitk").plan(...)`` is ``kernels.splitk.plan(...)``.

``plan`` is the one source of a launch's arithmetic (grid, K-splits, workspace): the
launcher, the model's features (``features_row``) and data collection all read it.

    >>> from gemmtune import kernels
    >>> all(isinstance(f, KernelFamily) for f in kernels.FAMILIES.values())
    True
"""

from __future__ import annotations

import math
from typing import Any, Protocol, runtime_checkable

import torch


class Unsupported(ValueError):
    """A problem or choice Inductor's lookup table cannot express (the message says why).

    Re-exported as ``gemmtune.inductor_export.Unsupported``; it lives here so that the
    families can raise it from their ``inductor_export`` without importing the exporter."""


# The keys every family's plan() returns (families add their own after these).
PLAN_KEYS = ("grid", "tiles", "splits", "k_per_split", "workspace_bytes")


@runtime_checkable
class KernelFamily(Protocol):
    """One kernel family. A module satisfies it with module-level names:

    * ``NAME``: the family's name in choice ids (``splitk:BM64-...``);
    * ``CONFIG``: its frozen config dataclass (gemmtune.configs);
    * ``space(problem, device, kind) -> (kept, rejected)``: the configs for a problem,
      ``rejected`` as ``(config, reason)`` pairs; pure, runs on a CPU;
    * ``constraint(cfg, problem, device) -> reason | None``;
    * ``validate(problem, cfg)``: raises ValueError when the family cannot run ``cfg``;
    * ``plan(m, n, k, cfg, sms=None) -> dict``: the launch ``cfg`` makes at (M, N, K),
      at least ``PLAN_KEYS`` (``grid`` None for a library call; ``sms``: the GPU's SM
      count, for a grid that depends on it, persistent_tma's);
    * ``run(a, b, out, cfg, *, allow_tf32, workspace, epilogue)``: launch into ``out``, which must
      not overlap ``a`` or ``b`` (tiles are stored while other programs still read the operands:
      every family, cuBLAS's torch.mm included, returned garbage into an ``out`` that was ``a``).
      The raw launcher: ``kernels.run_choice`` and ``kernels.prepare_choice``, the entry points
      that take a caller's ``out``, refuse an overlapping one (``out_overlap``); gemmtune's own
      matmul, scaled_mm, the dispatchers and the tuner's timing loop, which allocate a fresh
      ``out``, skip it
      (``kernels.run_choice_unchecked``);
    * ``prepare(a, b, out, cfg, *, allow_tf32, workspace, epilogue)``: launch once and
      return ``(matches, launch)`` for cheap repeated launches, or None (no fast path);
    * ``features_row(facts, choice) -> tuple``: the choice's row of
      ``gemmtune.model.choices.ChoiceBatch`` after its ``fam`` column, on the problem whose
      ``facts`` (M, N, K, aligned A, aligned B) are given;
    * ``inductor_export(choice, problem, sm_count) -> dict``: Inductor's lookup-table config
      for the choice, or raises ``Unsupported`` with the reason.

    Optional: ``TMA_EDGES = True`` for a family whose ragged edges cost nothing (TMA boxes
    zero-filled past the matrix): its ``pad+`` choices then run on the real N of the padded copy
    and write in place (``kernels.run_choice``); absent means False.
    """

    NAME: str
    CONFIG: type

    def space(self, problem, device, kind: str = "default") -> tuple[list, list]: ...

    def constraint(self, cfg, problem, device) -> str | None: ...

    def validate(self, problem, cfg) -> None: ...

    def plan(self, m: int, n: int, k: int, cfg, sms: int | None = None) -> dict[str, Any]: ...

    def run(self, a, b, out, cfg, *, allow_tf32: bool = False, workspace=None, epilogue=None): ...

    def prepare(self, a, b, out, cfg, *, allow_tf32: bool = False, workspace=None, epilogue=None): ...

    def features_row(self, facts: tuple, choice) -> tuple: ...

    def inductor_export(self, choice, problem, sm_count: int | None) -> dict: ...


MEMBERS = ("NAME", "CONFIG", "space", "constraint", "validate", "plan", "run", "prepare", "features_row",
           "inductor_export")


def bmm_reason(name: str, problem, why: str) -> str | None:
    """Why family ``name`` refuses ``problem`` when it is a bmm (``why``: what is in the way);
    None for other ops. The families that cannot serve bmm call this from ``constraint`` (so
    their whole space is rejected with the reason) and ``validate`` (so an explicit choice is
    refused, as UNSUPPORTED in a measurement)."""
    if getattr(problem, "op", "mm") != "bmm":
        return None
    return f"{name} does not serve bmm: {why}; triton_mm, aten and their pad+ variants do"


# The largest element offset an int32 index holds.
INT32_MAX = 2**31 - 1


def workspace_reason(name: str, numel: int, what: str) -> str | None:
    """Why family ``name`` cannot run a launch whose fp32 scratch ``what`` holds ``numel`` elements
    (None when it can). The kernels index that scratch in int32 whatever their INDEX_64 says (the
    split-K partials at ``(pid_k * tiles + tile) * BLOCK_M * BLOCK_N``, decompose_k's at
    ``pid_k * M * N`` and in its sum kernel): past 2**31 elements the offsets wrap, and the launch
    writes outside the buffer (wrong results, or an illegal address that ends the CUDA context).
    The spaces never reach this (their workspace is capped at 256 MiB); an explicit choice on a
    large problem did, and so did a dispatcher serving a small hint's split at a large M."""
    if numel - 1 <= INT32_MAX:
        return None
    return (f"{name}: its fp32 {what} of {numel} elements are indexed in int32 by the kernel, which holds "
            f"at most 2**31; use fewer splits, a family without a workspace (triton_mm, aten), or a smaller problem")


def missing(family) -> list[str]:
    """The KernelFamily members ``family`` lacks (empty: it satisfies the protocol)."""
    return [m for m in MEMBERS if not hasattr(family, m)]


def tile_row(facts: tuple, choice, cfg, splits: int = 1, det: int = 0, k_len: int | None = None,
             group_m: int | None = None) -> tuple:
    """A ChoiceBatch row (less ``fam``) for a tiled config: pad, the tile, GROUP_M, the K split,
    the reduction mode, the problem and the K extent one program reduces."""
    m, n, k, al_a, al_b = facts
    return (choice.pad, cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_stages, cfg.num_warps,
            cfg.group_m if group_m is None else group_m, splits, det, m, n, k,
            k if k_len is None else k_len, al_a, al_b)


def _byte_span(t: torch.Tensor) -> tuple[int, int]:
    """[first, last + 1) bytes a non-empty strided tensor's elements occupy."""
    lo = hi = 0
    for size, st in zip(t.shape, t.stride()):
        if st > 0:
            hi += (size - 1) * st
        else:
            lo += (size - 1) * st
    es, base = t.element_size(), t.data_ptr()
    return base + lo * es, base + (hi + 1) * es


def _byte_grid(t: torch.Tensor) -> int:
    """The gcd, in bytes, of ``t``'s strides over its dims longer than 1: every element starts at
    ``data_ptr()`` plus a multiple of it (0 for a single element)."""
    g = 0
    for size, st in zip(t.shape, t.stride()):
        if size > 1:
            g = math.gcd(g, abs(st) * t.element_size())
    return g


def _lattice_apart(x: torch.Tensor, y: torch.Tensor) -> bool:
    """True when no element of ``x`` can share a byte with one of ``y``, whatever their extents:
    an element of x starts at x.data_ptr() + i * gx and one of y at y.data_ptr() + j * gy
    (``_byte_grid``), so the gap between two starts is the pointers' difference modulo
    g = gcd(gx, gy); two elements share a byte only if that gap v lies in (-y's element size,
    x's element size). Interleaved views (``buf[:, ::2]`` and ``buf[:, 1::2]``) are apart."""
    g = math.gcd(_byte_grid(x), _byte_grid(y))
    d = x.data_ptr() - y.data_ptr()
    for v in range(1 - y.element_size(), x.element_size()):
        if (v - d == 0) if g == 0 else (v - d) % g == 0:
            return False
    return True


def _rows(t: torch.Tensor) -> tuple[int, int, int] | None:
    """``t``'s bytes as runs that repeat: (pitch, first byte, run length), every run starting at the
    first byte plus a multiple of the pitch (pitch 0: one run only), or None where ``t`` is not such
    a pattern (more than two dims that move, no contiguous dim, or rows that overlap each other).
    Dims of size 1 or stride 0 add no address and are left out."""
    es = t.element_size()
    dims = [(n, abs(st)) for n, st in zip(t.shape, t.stride()) if n > 1 and st != 0]
    lo = _byte_span(t)[0]
    if not dims:
        return 0, lo, es
    if len(dims) == 1:
        n, st = dims[0]
        return (0, lo, n * es) if st == 1 else (st * es, lo, es)
    if len(dims) == 2:
        (n0, s0), (n1, s1) = dims
        if s1 != 1:
            (n0, s0), (n1, s1) = (n1, s1), (n0, s0)
        if s1 == 1 and s0 >= n1:
            return s0 * es, lo, n1 * es
    return None


def _rows_apart(x: torch.Tensor, y: torch.Tensor) -> bool:
    """True when no byte of ``x`` is one of ``y``'s, both being runs that repeat (``_rows``): row-
    interleaved views of one buffer (``buf[0::2]`` and ``buf[1::2]``), or column blocks side by side
    (``buf[:, :k]`` and ``buf[:, k:]``). Each pattern is taken as repeating for ever, a superset of
    its bytes: a run of x starts at fx + i * px and one of y at fy + j * py, so the gap between two
    starts takes every value congruent to fy - fx modulo g = gcd(px, py), and two runs meet only if a
    gap lies in (-y's run, x's run). A single run (pitch 0) repeats with the other's pitch, which is a
    superset too."""
    rx, ry = _rows(x), _rows(y)
    if rx is None or ry is None:
        return False
    (px, fx, lx), (py, fy, ly) = rx, ry
    g = math.gcd(px, py)
    if g == 0:  # two single runs
        return fx + lx <= fy or fy + ly <= fx
    d = (fy - fx) % g  # y's run starts d bytes past one of x's, on a circle of g bytes
    return lx <= d and d + ly <= g


def out_overlap(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, epilogue=None) -> str | None:
    """Why ``out`` cannot take this product (None when it can): it overlaps the memory of ``a``,
    ``b`` or an epilogue's bias, residual or scale. Cheap, no copy: a tensor in another storage whose
    bytes do not meet ``out``'s storage is passed at once (~1.3 us a call with fresh tensors on the
    2-core CPU machine); within one storage the views' byte ranges [first, last] are compared, and
    views whose ranges meet are still passed where their elements' start addresses never come within
    an element of each other (``_lattice_apart``: interleaved views, ``x[:, ::2]`` and ``x[:, 1::2]``,
    which this refused before session 58) or whose rows never meet (``_rows_apart``: ``x[::2]`` and
    ``x[1::2]``, ``x[:, :k]`` and ``x[:, k:]``, refused before session 59). Meta tensors and tensors
    without storage are passed."""
    if out.is_meta or out.numel() == 0:
        return None
    try:
        so = out.untyped_storage()
        o0 = so.data_ptr()
        o1 = o0 + so.nbytes()
        named = [("a", a), ("b", b)]
        if epilogue is not None:
            named += [("bias", epilogue.bias), ("residual", epilogue.residual),
                      ("scale_a", epilogue.scale_a), ("scale_b", epilogue.scale_b)]
        span = None
        for name, t in named:
            if t is None or t.numel() == 0 or t.device != out.device:
                continue
            st = t.untyped_storage()
            s0 = st.data_ptr()
            if s0 != o0 and (s0 >= o1 or s0 + st.nbytes() <= o0):
                continue  # another allocation
            span = span or _byte_span(out)
            t0, t1 = _byte_span(t)
            if t0 < span[1] and span[0] < t1 and not (_lattice_apart(out, t) or _rows_apart(out, t)):
                return (f"out overlaps {name}'s memory (out bytes [{span[0]:#x}, {span[1]:#x}), {name} bytes "
                        f"[{t0:#x}, {t1:#x})): every kernel, torch.mm's included, writes tiles of out while "
                        f"others still read {name}; pass an out that shares no memory with the inputs")
    except (RuntimeError, NotImplementedError):  # a tensor without storage (a functional or fake one)
        return None
    return None


def check_out(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, epilogue=None) -> None:
    """Raise ValueError when ``out`` overlaps an input (``out_overlap`` says which)."""
    why = out_overlap(out, a, b, epilogue)
    if why is not None:
        raise ValueError(why)
