"""Each shape's candidates: a seeded sample of the exhaustive triton_mm and split-K spaces (or of
a fixed pool of them, so that shapes share compiled kernels), every DecomposeK split, cuBLAS,
pad+ variants for unaligned shapes, and a few configs of each family the shipped model was
trained without (``NEW_FAMILIES``, and their pad+ variants on unaligned shapes: their candidates
are ranked by the analytic estimate alone until their timings are collected). The configs come from the families' own lists
(``raw_configs``) and scaling (``scaled``): nothing of their spaces is copied here."""

from __future__ import annotations

import functools
import zlib

import numpy as np

from .. import kernels
from ..configs import AtenConfig, Choice
from ..problem import Problem

# The pool sampler's fixed subsets of the exhaustive spaces (raw configs, before scaling).
POOL_SIZES = {"triton_mm": 256, "splitk": 128}
POOL_SEED = 20261123
SAMPLERS = ("random", "pool")
# Families that came after the collected data (2026-11-23): skinny (decode), persistent_tma
# (Hopper TMA) and triton_static (sizes compiled in; unaligned problems only). Sampled from the
# problem's own exhaustive space (empty where the family does not serve the problem).
NEW_FAMILIES = ("skinny", "persistent_tma", "triton_static")


@functools.lru_cache(maxsize=None)
def exhaustive_raw(family: str) -> tuple:
    """The unscaled configs of a family's exhaustive space (its ``raw_configs('exhaustive')``)."""
    return tuple(kernels.get(family).raw_configs("exhaustive"))


@functools.lru_cache(maxsize=None)
def pool_raw(family: str) -> tuple:
    """A fixed, seeded subset of the family's unscaled exhaustive configs (``POOL_SIZES``).

    Why: the compiled kernel depends on the config, not on the shape, so shapes that draw
    from one pool share most compiles (Triton's cache), while per-shape draws from the
    whole space compile almost every candidate anew. Counted on the plan's remaining bf16
    shapes: 16,629 candidates needed 9,754 distinct compiles when drawn from the whole
    space, and 8,785 compiles for 40,610 candidates drawn from a 160/80 pool; compiling,
    not timing, was the bottleneck of the fifth collection call (155 s of its 299 s)."""
    raw = exhaustive_raw(family)
    rng = np.random.default_rng(POOL_SEED)
    return tuple(raw[i] for i in sorted(rng.choice(len(raw), size=min(POOL_SIZES[family], len(raw)),
                                                   replace=False)))


def sample_space(problem: Problem, family: str, device, n: int, rng, sampler: str = "random") -> list:
    """n distinct valid configs of the family's exhaustive space (``sampler='random'``) or
    of its fixed pool (``'pool'``, see ``pool_raw``), drawn at random: raw configs in
    random order, scaled to the problem and pruned as the space does, until n are kept
    (much cheaper than building the whole space for every shape)."""
    if n <= 0:
        return []
    fam = kernels.get(family)
    raw = exhaustive_raw(family) if sampler == "random" else pool_raw(family)
    kept, seen = [], set()
    for i in rng.permutation(len(raw)):
        c = raw[i]
        c = fam.scaled(c, problem)
        if c in seen:
            continue
        seen.add(c)
        if fam.constraint(c, problem, device) is None:
            kept.append(Choice(family, c))
            if len(kept) == n:
                break
    return kept


def sample_new(problem: Problem, family: str, device, n: int, rng) -> list:
    """n configs drawn at random from ``family``'s exhaustive space for ``problem`` (all of it
    when smaller; none where the family does not serve the problem)."""
    from ..api import space

    if n <= 0:
        return []
    return _draw(space(problem, family, "exhaustive", device), n, rng)


def _draw(cands: list, n: int, rng) -> list:
    """n of ``cands`` drawn at random by ``rng``, in their order (all of them when fewer)."""
    if len(cands) <= n:
        return cands
    return [cands[i] for i in sorted(rng.choice(len(cands), size=n, replace=False))]


# skinny's CUDA-core variants (no tl.dot: each lane sums its own products) are a tenth of its
# exhaustive space at M <= 16, so ``new``'s random draw of 12 measured about one per shape: the H100
# store held 3 fp32 decode problems with a core row, and --fast ranked the dot variants first on
# fp32 2x3072x12288, where the default space found a core kernel 1.34x cuBLAS and the dot ones lost
# (benchmarks/results/2026-11-27-h100-s20, call 2). ``core`` draws that many more of them.
def sample_core(problem: Problem, device, n: int, rng) -> list:
    """n of skinny's CUDA-core configs for ``problem`` (M <= skinny_spec.CORE_MAX_M, the only
    M its space has them at; all when fewer)."""
    from ..api import space
    from ..kernels.skinny_spec import CORE_MAX_M

    if n <= 0 or problem.m > CORE_MAX_M:
        return []
    return _draw([c for c in space(problem, "skinny", "exhaustive", device) if not c.config.dot], n, rng)


def sample_choices(problem: Problem, device, *, mm: int, splitk: int, pad: int, sampler: str = "random",
                   new: int = 0, core: int = 0) -> list:
    """A seeded (by problem key) random sample of the exhaustive spaces (or of their fixed
    pools: ``sampler='pool'``), cuBLAS first; ``new`` configs of each of ``NEW_FAMILIES``, then
    ``core`` of skinny's CUDA-core configs where it has them (M <= 16), last (each drawn from a seeded
    stream of its own, so the rest of the sample is the same with or without them; a config
    drawn twice is measured once)."""
    from ..api import space

    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {', '.join(SAMPLERS)}, not {sampler!r}")
    rng = np.random.default_rng(zlib.crc32(problem.key.encode()))
    out = [Choice("aten", AtenConfig())]
    out += sample_space(problem, "triton_mm", device, mm, rng, sampler)
    out += sample_space(problem, "splitk", device, splitk, rng, sampler)
    out += space(problem, "decompose_k", "exhaustive", device)[:12]
    if not (problem.aligned_a and problem.aligned_b):
        padded = problem.padded()
        out.append(Choice("aten", AtenConfig(), True))
        pool = [c.padded() for fam in ("triton_mm", "splitk", "decompose_k")
                for c in space(padded, fam, "default", device)]
        out += [pool[i] for i in sorted(rng.choice(len(pool), size=min(pad, len(pool)), replace=False))]
    if new > 0:
        rng_new = np.random.default_rng(zlib.crc32(("new:" + problem.key).encode()))
        for fam in NEW_FAMILIES:
            out += sample_new(problem, fam, device, new, rng_new)
        if not (problem.aligned_a and problem.aligned_b):
            # Their pad+ variants too, from a stream of their own (the samples above stay as they
            # were). Until 2026-11-26 the store held no pad+persistent_tma row, and the H100 ranker
            # put pad+aten first on unaligned shapes where pad+persistent_tma won by 1.15x
            # (benchmarks/results/2026-11-26-h100-odd-twins).
            padded = problem.padded()
            rng_pad = np.random.default_rng(zlib.crc32(("new-pad:" + problem.key).encode()))
            for fam in NEW_FAMILIES:
                out += [c.padded() for c in sample_new(padded, fam, device, new, rng_pad)]
    if core > 0:
        seen = {c.id for c in out}
        rng_core = np.random.default_rng(zlib.crc32(("core:" + problem.key).encode()))
        out += [c for c in sample_core(problem, device, core, rng_core) if c.id not in seen]
    return out


def shape_choices(problem: Problem, device, have, *, mm: int, splitk: int, pad: int, sampler: str,
                  new: int = 0, core: int = 0) -> list:
    """The candidates a shape is measured with: a shape the store already holds rows of
    keeps the sampler it was started with (the one whose sample holds more of them; the
    first 35,892 rows were all drawn by 'random'), so that finished shapes stay finished
    and a half-measured one is completed, not re-sampled; a new shape gets ``sampler``."""
    kw = {"mm": mm, "splitk": splitk, "pad": pad, "new": new, "core": core}
    if not have:
        return sample_choices(problem, device, sampler=sampler, **kw)
    best, hits = None, -1
    # ``sampler`` first, so that it wins a tie: a shape holding only rows both samples share (its
    # cuBLAS row, a call cut short after it) went to whichever of SAMPLERS came first ('random').
    for name in sorted(SAMPLERS, key=lambda x: x != sampler):
        cands = sample_choices(problem, device, sampler=name, **kw)
        n = sum(c.id in have for c in cands)
        if n > hits:
            best, hits = cands, n
    return best
