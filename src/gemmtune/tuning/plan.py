"""What the tuner benchmarks for each problem: pure planning, no worker and no store.

``candidates`` lists a problem's choices (cuBLAS first, ``pad+`` variants for unaligned
operands); ``CandidatePlan`` turns them into what is benchmarked: a lookup-table entry's
choices, or the candidates of the chosen families, filtered by a ranking model to its top k
(``benchmark_space``) when asked. The one plan both ``tune`` and the cluster driver use.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Iterable, Sequence

from .. import kernels
from ..api import space as family_space
from ..configs import AtenConfig, Choice, fp8_device_reason, tile_of
from ..device import DeviceInfo
from ..precision import pads_b_kmajor_problem
from ..problem import Problem
from ..shapes import Shape
from ..table import LookupTable, required_choices

BENCHMARK_SPACES = ("SAME", "DEFAULT", "AUTO", "FAST")


# An aligned fp32 problem run as 3xTF32 with a row-major B also gets pad+ twins, whose copy of B is
# K-major (precision.pads_b_kmajor): where M is large enough for the copy to pay. On the H200
# (session 49, call 5) the product ran a third faster on a K-major B, and torch's transposed copy
# of a 4096x4096 fp32 B took 124 us: 1024x4096x4096 would run 408 + 124 = 532 us against 635
# copy-free, and M = 512 about breaks even. The tuner times both paths; this bounds the cost.
KMAJOR_TWINS_MIN_M = 512


def kmajor_twins(problem: Problem) -> bool:
    """Whether an aligned ``problem`` gets pad+ twins for a K-major copy of its row-major B
    (``KMAJOR_TWINS_MIN_M`` says where and why).

    >>> from gemmtune import precision
    >>> twins = [kmajor_twins(Problem.from_sizes(1024, 4096, 4096, "fp32", layout_b=lb)) for lb in ("row", "col")]
    >>> twins == [precision.fp32_precision() == "tf32x3", False]
    True
    """
    return (problem.layout_b == "row" and problem.m >= KMAJOR_TWINS_MIN_M and problem.aligned_a
            and problem.aligned_b and pads_b_kmajor_problem(problem))


def candidates(problem: Problem, families: Sequence[str], kind: str, device: DeviceInfo) -> list[Choice]:
    """Every choice of ``families`` for ``problem``, cuBLAS first (as the baseline, wherever ``device``
    can run the problem's operands).

    For unaligned problems each candidate also comes as its ``pad+`` variant.

    >>> p = Problem.from_sizes(64, 64, 4096, "bf16")
    >>> [c.id for c in candidates(p, ["decompose_k"], "default", DeviceInfo.lookup("h100"))][:3]
    ['aten', 'decompose_k:s2', 'decompose_k:s4']
    """
    # cuBLAS unless ``device`` cannot run the problem's operands at all (fp8 before sm_89: aten's
    # space refuses it with the reason, as every family's does): it was offered there all the same.
    baseline = fp8_device_reason(problem, device) is None
    out = [Choice("aten", AtenConfig())] if baseline else []
    for fam in families:
        if fam != "aten":
            out += family_space(problem, fam, kind, device)
    unaligned = not (problem.aligned_a and problem.aligned_b)
    if has_pad_twins(problem):
        # Unaligned operands: also try each family on zero-padded aligned copies; their
        # configs come from the padded problem they actually run (Problem.padded). scaled_mm
        # also where its K or N is not a multiple of 16 or its operands are not K-major: there
        # cuBLASLt (torch._scaled_mm) and TMA run only on the padded, K-major copies. fp32 run as
        # 3xTF32 with a row-major B: its copy K-major (kmajor_twins).
        padded = problem.padded()
        if baseline and (unaligned or problem.op == "scaled_mm"):
            # (not for kmajor_twins alone: cuBLAS's SGEMM gains nothing from a K-major B, so there
            # pad+aten would time cuBLAS plus a transposed copy of B)
            out.append(Choice("aten", AtenConfig(), True))
        for fam in families:
            if fam != "aten":
                out += [c.padded() for c in family_space(padded, fam, kind, device)]
    seen, unique = set(), []
    for c in out:
        if c.id not in seen:
            seen.add(c.id)
            unique.append(c)
    return unique


def has_pad_twins(problem: Problem) -> bool:
    """Whether ``candidates`` also offers each family on ``problem.padded()`` (``pad+`` choices)."""
    unaligned = not (problem.aligned_a and problem.aligned_b)
    return unaligned or (problem.op == "scaled_mm" and problem.padded() != problem) or kmajor_twins(problem)


def offered_nothing(problem: Problem, families: Sequence[str], kind: str, device: DeviceInfo) -> dict[str, str]:
    """Each of ``families`` (cuBLAS aside) that offers ``problem`` no candidate, neither on the problem
    nor on its padded copy, with why: how many of its configs its constraints rejected and the first
    reason. A tune naming ``--families persistent_tma`` on an unaligned shape used to time cuBLAS
    alone without a word; ``gemmtune space --show-rejected`` was the only place that said why.

    >>> h100 = DeviceInfo.lookup("h100")
    >>> offered_nothing(Problem.from_sizes(64, 64, 4096, "bf16"), ["decompose_k"], "default", h100)
    {}
    >>> why = offered_nothing(Problem.from_sizes(4096, 4096, 64, "bf16"), ["decompose_k", "skinny"], "default", h100)
    >>> why["skinny"].split(",")[0]
    '11 configs rejected'
    """
    out = {}
    padded = problem.padded() if has_pad_twins(problem) else None
    for fam in families:
        if fam == "aten":
            continue
        spec = kernels.spec(fam)
        kept, rejected = spec.space(problem, device, kind)
        if kept or (padded is not None and spec.space(padded, device, kind)[0]):
            continue
        reasons = [why for _, why in rejected]
        out[fam] = (f"{len(reasons)} config{'s' * (len(reasons) != 1)} rejected, e.g. {reasons[0]}" if reasons
                    else "its space lists no config for this problem")
    return out


def parse_benchmark_space(value, fast: bool = False) -> str | int:
    """'SAME', 'DEFAULT', 'AUTO', 'FAST' or a positive int k; ValueError for anything else.
    ``fast`` is 'FAST' (``select_fast``: the model's first choice of each of its two best families
    and its next best choice)
    and refuses any other benchmark_space.

    >>> parse_benchmark_space("auto"), parse_benchmark_space("5"), parse_benchmark_space("SAME", fast=True)
    ('AUTO', 5, 'FAST')
    """
    parsed = None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        parsed = value
    elif isinstance(value, str):
        v = value.strip().upper()
        parsed = v if v in BENCHMARK_SPACES else int(v) if v.isdigit() and int(v) >= 1 else None
    if parsed is None:
        raise ValueError(f"benchmark_space must be 'SAME', 'DEFAULT', 'AUTO', 'FAST' or a positive int k (the model's "
                         f"top k), got {value!r}")
    if fast:
        if parsed not in ("SAME", "FAST"):
            raise ValueError(f"fast=True benchmarks the model's first choice of each of its two best families "
                             f"and its next best choice (benchmark_space='FAST'); do not also pass benchmark_space={value!r}")
        return "FAST"
    return parsed


def as_shapes(problems: Iterable) -> list[Shape]:
    """``problems`` (Problems or Shapes) as Shapes; TypeError naming the first that is neither."""
    out = []
    for i, p in enumerate(problems):
        if isinstance(p, Shape):
            out.append(p)
        elif isinstance(p, Problem):
            out.append(Shape("api", f"{p.m}x{p.n}x{p.k}", p))
        else:
            raise TypeError(f"problems[{i}] must be a Problem or a Shape, not {type(p).__name__}")
    return out


def _split_baseline(cands: list[Choice]) -> tuple[list[Choice], list[Choice]]:
    base = [c for c in cands if c.family == "aten" and not c.pad]
    rest = [c for c in cands if not (c.family == "aten" and not c.pad)]
    return base, rest


def _split_twins(rest: list[Choice], model=None) -> tuple[list[Choice], dict]:
    """(the candidates the model ranks, {(family, config): the twin timed beside that pick}).

    A triton_static choice runs triton_mm's kernel with the same config, its sizes compiled in;
    on unaligned problems, the only ones it serves, neither twin is reliably the faster one:
    - H200 parity runs: static 10-20% ahead on 5 of 6 configs, 3.8x behind on one
      (benchmarks/results/2026-11-24-h200-parity-static);
    - the collected stores' 37 (H100) and 52 (H200) measured pairs: static ahead on 62% and 75%
      of them, from 0.52x to 2.58x (10th to 90th percentile, H100);
    - timing a picked triton_mm config's twin too would have gained 1.28x (H100) and 1.56x (H200)
      on those pairs, geomean, and timing a picked static config's twin 1.19x and 1.12x.

    So a pick of either brings the other along, measured, never substituted: one more candidate on
    an unaligned problem. A model trained on triton_static timings (``model.knows("triton_static")``)
    ranks both families; any other model cannot tell the two apart (same estimate: the analytic
    model, a learned model without triton_static rows, any object with only ``predict``), so
    ranking both would spend two of the k slots on one prediction: static is left out of the
    ranking and comes only as a picked triton_mm's twin."""
    knows = getattr(model, "knows", None)
    ranks_static = callable(knows) and knows("triton_static")
    unpadded = [c for c in rest if c.family in ("triton_mm", "triton_static") and not c.pad]
    # Keyed by the tile (configs.tile_of): a triton_static config also names its form.
    by_config = {(c.family, tile_of(c.config)): c for c in unpadded}
    twins = {}
    for (fam, cfg) in by_config:
        other = "triton_static" if fam == "triton_mm" else "triton_mm"
        if (other, cfg) in by_config and (ranks_static or fam == "triton_mm"):
            twins[(fam, cfg)] = by_config[(other, cfg)]
    if ranks_static or not twins:
        return rest, twins
    return [c for c in rest if not (c.family == "triton_static" and not c.pad)], twins


def _with_twins(picked: list[Choice], twins: dict, problem: Problem) -> list[Choice]:
    """``picked``, each copy-free triton_mm / triton_static pick's twin, and the other forms of
    the first such pick's triton_static config on ``problem`` (``static_forms``)."""
    ids = {c.id for c in picked}
    out = list(picked)
    for c in picked:
        twin = None if c.pad else twins.get((c.family, tile_of(c.config)))
        if twin is not None and twin.id not in ids:
            ids.add(twin.id)
            out.append(twin)
    for c in static_forms(picked, twins, problem):
        if c.id not in ids:
            ids.add(c.id)
            out.append(c)
    return out


# After a sweep of a whole space (Planned.refine), the fastest tile's other triton_static forms are
# timed when that tile ran within this fraction of the best time. gpt2_lmhead_m96 on the H200
# (benchmarks/results/2026-11-30-h200-s46, call 2): the default space's best, a carried static
# tile, ran 58.2 us; its indexed form, which only --fast timed, 49.6 us. The forms gained up to
# 3.7x over the carried form at one tile (session 45, call 6), so a tile half again slower than
# the best may still win with another form; beyond that, two compiles a shape are not spent.
FORM_REFINE_MARGIN = 0.5


def refine_forms(problem: Problem, cands: list[Choice], times: dict[str, float],
                 margin: float = FORM_REFINE_MARGIN) -> list[Choice]:
    """The triton_static forms, not among ``cands``, of the fastest copy-free triton_mm /
    triton_static choice that ``times`` (ms by choice id, the sweep's verified times) holds, when
    that choice ran within ``margin`` of the best time and triton_static serves the problem (a
    copy-free triton_static choice is among ``cands``); else none.

    >>> from gemmtune.configs import AtenConfig, TileConfig
    >>> p = Problem.from_sizes(96, 50257, 768, "bf16", aligned_b=False)
    >>> t = TileConfig(128, 128, 64, 3, 4)
    >>> cs = [Choice("aten", AtenConfig()), Choice("triton_mm", t), Choice("triton_static", t)]
    >>> ms = {"aten": 98.4, cs[1].id: 82.0, cs[2].id: 58.2}
    >>> [c.id for c in refine_forms(p, cs, ms)]
    ['triton_static:BM128-BN128-BK64-S3-W4-G8-IX', 'triton_static:BM128-BN128-BK64-S3-W4-G8-IXW']
    >>> refine_forms(p, cs, dict(ms, aten=30.0)), refine_forms(p, cs[:2], ms)  # too slow; no static
    ([], [])
    """
    from ..kernels.triton_static_spec import forms

    if not any(c.family == "triton_static" and not c.pad for c in cands):
        return []
    ok = {cid: ms for cid, ms in times.items() if ms is not None and math.isfinite(ms) and ms > 0}
    tiles = [(ok[c.id], c.id, c) for c in cands
             if c.family in ("triton_mm", "triton_static") and not c.pad and c.id in ok]
    if not tiles:
        return []
    ms, _, fastest = min(tiles)
    if ms > min(ok.values()) * (1.0 + margin):
        return []
    ids = {c.id for c in cands}
    out = [Choice("triton_static", f) for f in forms(problem, fastest.config)]
    return [c for c in out if c.id not in ids]


# How many of the picks' tiles also have their other triton_static forms timed (configs.
# STATIC_FORMS: up to 2 more compiles each, on unaligned problems only). The first tile pick only:
# each form compiles once per shape, and tuning time is what --fast is for.
FORM_PICKS = 1


def static_forms(picked: list[Choice], twins: dict, problem: Problem) -> list[Choice]:
    """The triton_static forms other than carried (kernels.triton_static_spec.forms) of the first
    FORM_PICKS copy-free triton_mm / triton_static picks whose static config is a candidate
    (a triton_static pick, or a triton_mm pick with a static twin). No single form is fastest
    everywhere (configs.STATIC_FORMS): at a config fixed against Inductor's template, on the H200,
    the best of the three ran 1.00-1.06x Inductor's time on 6 odd shapes where the carried form
    alone ran 1.00-3.87x (benchmarks/results/2026-11-30-h200-s45, call 6).

    >>> from gemmtune.configs import TileConfig
    >>> p = Problem.from_sizes(333, 4097, 1025, "bf16", aligned_b=False)
    >>> mm, st = Choice("triton_mm", TileConfig(64, 128, 64, 4, 4)), Choice("triton_static", TileConfig(64, 128, 64, 4, 4))
    >>> [c.id for c in static_forms([mm], {("triton_mm", mm.config): st}, p)]
    ['triton_static:BM64-BN128-BK64-S4-W4-G8-IX', 'triton_static:BM64-BN128-BK64-S4-W4-G8-IXW']
    >>> static_forms([mm], {}, p)
    []
    """
    from ..kernels.triton_static_spec import forms

    out: list[Choice] = []
    seen = 0
    for c in picked:
        if seen >= FORM_PICKS:
            break
        if c.pad or c.family not in ("triton_mm", "triton_static"):
            continue
        if c.family == "triton_mm" and (c.family, tile_of(c.config)) not in twins:
            continue
        seen += 1
        out += [Choice("triton_static", f) for f in forms(problem, c.config) if f.form != "carried"]
    return out


def _both_paths(ranked: list[Choice], k: int) -> list[Choice]:
    """The first ``k`` of ``ranked`` (the model's order), plus the best-ranked choice of the other
    path when the k are all ``pad+`` or all copy-free (an unaligned problem has both).

    Whether a zero-padded copy pays is the one decision on an unaligned problem that the
    collected data long could not teach: until 2026-11-26 the H100 store held no pad+
    persistent_tma row. On 8 unaligned shapes on an H100 (benchmarks/results/2026-11-26-h100-odd-
    twins) the best kernel was a pad+ choice on 4 and a copy-free one on 4, and the ranker's first
    choice took the wrong path on 3 of them, at 58-83% of the best; the other path's first choice
    costs one more candidate.

    >>> from gemmtune.configs import AtenConfig, DecomposeKConfig
    >>> a, p = Choice("aten", AtenConfig(), True), Choice("decompose_k", DecomposeKConfig(4))
    >>> [c.id for c in _both_paths([a, a, p], 1)], [c.id for c in _both_paths([p, a], 2)]
    (['pad+aten', 'decompose_k:s4'], ['decompose_k:s4', 'pad+aten'])
    """
    from ..model.topk import with_other_path  # pure numpy, as the rest of model.topk

    return [ranked[i] for i in with_other_path(ranked, range(len(ranked)), list(range(min(k, len(ranked)))))]


def select_by_model(problem: Problem, cands: list[Choice], k: int, model) -> list[Choice]:
    """cuBLAS (the baseline, when among ``cands``) plus the ``k`` other candidates the model
    ranks fastest; all of ``cands`` when they are no more than that. Ties and non-finite
    estimates keep the candidates' order (non-finite ones rank last). On an unaligned problem the
    k picks span both paths, pad+ and copy-free (``_both_paths``: one more candidate where they do
    not), and a picked triton_mm or triton_static config brings its twin of the other family along
    when there is one (``_split_twins``).

    Example::

        >>> class ByIndex:
        ...     def predict(self, problem, choices): return list(range(len(choices)))
        >>> p = Problem.from_sizes(64, 64, 4096, "bf16")
        >>> [c.id for c in select_by_model(p, candidates(p, ["decompose_k"], "default",
        ...      DeviceInfo.lookup("h100")), 2, ByIndex())]
        ['aten', 'decompose_k:s2', 'decompose_k:s4']
    """
    base, rest = _split_baseline(cands)
    rest, twins = _split_twins(rest, model)
    if len(rest) <= k:
        return cands
    est = [float(x) for x in model.predict(problem, rest)]
    if len(est) != len(rest):
        raise ValueError(f"{type(model).__name__}.predict returned {len(est)} estimates for {len(rest)} choices")
    order = sorted(range(len(rest)), key=lambda i: (est[i] if math.isfinite(est[i]) else math.inf, i))
    return base + _with_twins(_both_paths([rest[i] for i in order], k), twins, problem)


def select_adaptive(problem: Problem, cands: list[Choice], model) -> tuple[list[Choice], int, str]:
    """cuBLAS plus the model's k best others, k chosen by gemmtune.model.topk.choose_k from
    the model's ranking keys, its trust in ``problem`` and its families' training support.
    Returns (candidates, k, why)."""
    from ..model.topk import model_k  # pure numpy; the model object is still the one passed in

    base, rest = _split_baseline(cands)
    rest, twins = _split_twins(rest, model)
    if not rest:
        return cands, 0, "no candidate besides cuBLAS"
    keys, k, why = model_k(model, problem, rest)
    if len(keys) != len(rest):
        raise ValueError(f"{type(model).__name__} returned {len(keys)} ranking keys for {len(rest)} choices")
    order = sorted(range(len(rest)), key=lambda i: (keys[i] if math.isfinite(keys[i]) else math.inf, i))
    return base + _with_twins(_both_paths([rest[i] for i in order], k), twins, problem), min(k, len(rest)), why


# The 3xTF32 picks come from the default space's choices (x3_pool), not the whole
# exhaustive space: the analytic model's 3xTF32 charges were read from sweeps of the default
# space, and outside it they ranked unmeasured tiles first. On 12 fp32 shapes of seed 51 (H200,
# session 50, call 3) --fast's analytic picks over the exhaustive space were BM64-BN128-BK64 and
# BM64-BN64-BK64 tiles on 4 warps and its learned rankers' BK32 tiles, and it reached 91.7% of the
# best kernel, where the default space's BM128-BN128-BK64-S3-W8 was the best on 6 of the 12
# (1951x10240x3072: 1318 us against --fast's 1678).
def x3_pool(problem: Problem, cands: list[Choice], rest: list[Choice], device: DeviceInfo) -> list[int]:
    """Indices into ``rest`` that the analytic model's 3xTF32 picks are drawn from: the choices of
    the default space of ``cands``' families (the note above says why), or all of
    ``rest`` where none of them is there (a lookup table's own list, a family subset).

    >>> from gemmtune.device import DeviceInfo
    >>> dev, p = DeviceInfo.lookup("h200"), Problem.from_sizes(1024, 1024, 1024, "fp32", layout_b="col")
    >>> rest = [Choice.parse(c) for c in ("triton_mm:BM128-BN128-BK64-S3-W8-G1", "triton_mm:BM128-BN128-BK64-S3-W8-G8")]
    >>> x3_pool(p, rest, rest, dev)
    [1]
    """
    families = tuple(dict.fromkeys(c.family for c in cands))
    default_ids = {c.id for c in candidates(problem, families, "default", device)}
    return [i for i, c in enumerate(rest) if c.id in default_ids] or list(range(len(rest)))


def select_fast(problem: Problem, cands: list[Choice], model, device: DeviceInfo | None = None,
                ) -> tuple[list[Choice], int, str]:
    """cuBLAS plus the model's first choice of each of its two best families, the other path's
    first on an unaligned problem where those take one path only, the model's next best choice
    (``model.topk.fast_pick``), and their twins (``_split_twins``): what ``fast=True`` benchmarks.
    Returns (candidates, the number of picks besides cuBLAS and twins, why).

    One model's top 1 is often the right family with a near-miss config, or a near-miss family:
    on the H100 store's 405 problems, cross-validated, the first of its two best families reached
    98.4% of the best measured choice and this selection 99.2%, for one more candidate a problem
    (model.topk.FAST_FAMILIES, FAST_EXTRA). With ``device``, a CUDA-core pick (``topk.with_core``)
    prefers skinny's default core tiles."""
    from ..model.topk import (FAST_FAMILIES, core_pick_applies, family_of, fast_extra, fast_parts,
                              is_padded_cublas, model_trust, padded_tma_applies, rank_keys, short_k_tma_applies,
                              x3_pick_applies)

    base, rest = _split_baseline(cands)
    rest, twins = _split_twins(rest, model)
    if not rest:
        return cands, 0, "no candidate besides cuBLAS"
    keys = rank_keys(model, problem, rest)
    if len(keys) != len(rest):
        raise ValueError(f"{type(model).__name__} returned {len(keys)} ranking keys for {len(rest)} choices")
    trust = model_trust(model, problem)
    preferred = None
    if device is not None and core_pick_applies(problem):
        preferred = {c.id for c in family_space(problem, "skinny", "default", device)}
    sms = device.sm_count if device is not None else None
    tma_preferred = None
    if device is not None and padded_tma_applies(problem, sms):
        tma_preferred = {c.padded().id for c in family_space(problem.padded(), "persistent_tma", "default", device)}
    elif device is not None and short_k_tma_applies(problem, sms):
        tma_preferred = {c.id for c in family_space(problem, "persistent_tma", "default", device)}
    rules: dict = {}  # what with_core and with_wave_split added, if anything
    first, more = fast_parts(rest, keys, FAST_FAMILIES, fast_extra(trust), problem=problem, preferred=preferred,
                             sms=sms, added=rules, tma_preferred=tma_preferred)
    x3 = []
    if device is not None and x3_pick_applies(problem):
        from ..model.analytic import AnalyticModel
        # the analytic model's first of its two best families (and the other path's): topk.x3_pick_applies
        # says why; drawn from the default space's choices, whose 3xTF32 times sweeps measured, where
        # there are any (x3_pool)
        pool = x3_pool(problem, cands, rest, device)
        shown = [rest[i] for i in pool]
        x3_first, _ = fast_parts(shown, rank_keys(AnalyticModel(device), problem, shown), FAST_FAMILIES, 0)
        x3 = [pool[i] for i in x3_first if pool[i] not in first and pool[i] not in more][:FAST_FAMILIES]
    picked = [rest[i] for i in first + more + x3]
    added, wave = set(rules.get("core", ())), set(rules.get("wave", ()))
    tma, short_tma = set(rules.get("padded_tma", ())), set(rules.get("short_k_tma", ()))
    padded = {i for i in first if is_padded_cublas(rest[i])}  # topk.with_padded_cublas
    fams = sorted({family_of(rest[i]) for i in first if i not in added | wave | tma | short_tma | padded})
    next_ = f", and the model's next {len(more)}" if more else ""
    core_ = f", skinny's first {len(added)} CUDA-core choice(s) (topk.core_pick_applies)" if added else ""
    core_ += ", DecomposeK's one-wave split (topk.with_wave_split)" if wave else ""
    core_ += f", {len(tma)} flattened padded persistent TMA config(s) (topk.with_padded_persistent)" if tma else ""
    core_ += (f", {len(short_tma)} flattened persistent TMA config(s) for a short K (topk.with_short_k_persistent)"
              if short_tma else "")
    core_ += ", cuBLAS on padded copies" if padded else ""
    core_ += f", the analytic model's {len(x3)} 3xTF32 pick(s) (topk.x3_pick_applies)" if x3 else ""
    unsure = " (a model without trust: unsure)" if trust is None else f" (trust {trust:.2f})" if trust < 1 else ""
    return (base + _with_twins(picked, twins, problem), len(picked),
            f"fast: the first of {', '.join(fams)}{core_}{next_}{unsure}")


def load_ranker(model, dev: DeviceInfo, triton_version: str | None, numpy_predict: bool = False):
    """The model object that ranks candidates: ``model`` itself when it has ``predict``, the
    saved model at a path, or the default one for ``dev`` and this triton (``numpy_predict``:
    a LightGBM ranker predicts through numpy, lightgbm not imported; model.lgbm_text)."""
    from .. import model as models  # only the factory and the loader: no concrete model here

    if model is None:
        return models.default_model(dev, triton_version=triton_version, numpy_predict=numpy_predict)
    if isinstance(model, (str, os.PathLike)):
        return models.load_model(model, dev, triton_version=triton_version, numpy_predict=numpy_predict)
    return model


@dataclass(frozen=True)
class Planned:
    """What is benchmarked for one problem, and how many of the model's best (``k``, ``why``;
    None when no model filtered: every candidate, or a table entry's choices). ``refine``: the
    choices are a whole space, whose triton_static configs come in the carried form only; after
    the sweep the tuner times the other forms of its fastest tile (``refine_forms``)."""
    choices: list[Choice]
    k: int | None = None
    why: str | None = None
    refine: bool = False


def _whole(picked: list[Choice], cands: list[Choice]) -> bool:
    """Whether a model's selection ``picked`` kept every candidate (a k as large as the space):
    then, as for a whole space planned without a model, the sweep is refined (Planned.refine).
    select_by_model returns the space as it is there, with no pick whose forms it could add."""
    return {c.id for c in cands} <= {c.id for c in picked}


def is_deterministic(choice: Choice) -> bool:
    """Whether ``choice`` gives the same bits on every call: not when partial sums meet through
    fp32 atomics, whose order changes from call to call (split-K and skinny ``-atomic`` with
    more than one split, and skinny's stream-K). Measured on the H200: a split-K ``-atomic``
    config gave other bits on 13 of 19 calls (scripts/determinism_check.py), its ``-det`` twin
    on none. cuBLAS, decompose_k (a bmm, then a sum) and the single-pass tiled kernels are."""
    cfg = choice.config
    if getattr(cfg, "stream_k", 0):
        return False
    if getattr(cfg, "split_k", 1) > 1 and getattr(cfg, "deterministic", True) is False:
        return False
    return True


@dataclass(frozen=True)
class CandidatePlan:
    """The per-problem plan of one run: ``plan(problem)`` -> ``Planned``.

    ``bspace``: a parsed benchmark_space (parse_benchmark_space); ``ranker`` an object with
    ``predict(problem, choices)`` (None: nothing is filtered); ``table`` a lookup
    table whose entries fix a problem's choices; ``deterministic``: only choices that give the
    same bits on every call (``is_deterministic``), table entries' included.

    >>> plan = CandidatePlan(("decompose_k",), "default", DeviceInfo.lookup("h100"))
    >>> [c.id for c in plan(Problem.from_sizes(64, 64, 4096, "bf16")).choices][:2]
    ['aten', 'decompose_k:s2']
    """
    families: tuple[str, ...]
    space: str
    device: DeviceInfo
    table: LookupTable | None = None
    bspace: str | int = "SAME"
    ranker: object = None
    deterministic: bool = False

    def __call__(self, problem: Problem) -> Planned:
        keep = is_deterministic if self.deterministic else (lambda c: True)
        listed = [c for c in required_choices(self.table, problem) if keep(c)]
        if listed:
            return Planned(listed)
        cands = [c for c in candidates(problem, self.families, self.space, self.device) if keep(c)]
        if self.bspace == "SAME" or self.ranker is None:
            return Planned(cands, refine=True)
        if self.bspace == "AUTO":
            picked, k, why = select_adaptive(problem, cands, self.ranker)
            return Planned(picked, k, why, _whole(picked, cands))
        if self.bspace == "FAST":
            picked, k, why = select_fast(problem, cands, self.ranker, self.device)
            return Planned(picked, k, why, _whole(picked, cands))
        k = self.bspace if isinstance(self.bspace, int) else \
            len([c for c in candidates(problem, self.families, "default", self.device) if keep(c)]) - 1
        picked = select_by_model(problem, cands, k, self.ranker)
        return Planned(picked, k, "fixed", _whole(picked, cands))

    def compiles_at_most(self, problem: Problem) -> int | None:
        """How many candidates of ``problem`` may need compiling, before they are listed."""
        extra = None
        if self.bspace == "FAST" and self.ranker is not None:
            from ..model.topk import fast_extra, model_trust
            extra = fast_extra(model_trust(self.ranker, problem))
        return compiles_at_most(self.table, problem, self.bspace, extra, self.device.sm_count,
                                "triton_static" in self.families)


def compiles_at_most(lut: LookupTable | None, problem: Problem, bspace: str | int,
                     fast_extra: int | None = None, sms: int | None = None, forms: bool = True) -> int | None:
    """How many candidates of ``problem`` tune may compile, before its candidates are listed:
    a table entry's Triton choices, else k when only the model's k best are benchmarked (2(k + 1)
    on an unaligned problem: the other path's first choice and twins), else None (its whole
    search space). ``sms``: the GPU's SMs, for --fast's DecomposeK one-wave pick (not counted
    without). ``forms``: whether triton_static is tuned, whose other forms of the first tile pick
    are timed too (static_forms)."""
    listed = required_choices(lut, problem)
    if listed:
        return sum(c.needs_compile for c in listed)
    # On an unaligned problem the picks may gain the other path's first choice (_both_paths), and
    # each triton_mm / triton_static pick its twin (_split_twins).
    # And the first tile pick its other triton_static forms (static_forms).
    def most(k: int) -> int:
        from ..configs import STATIC_FORMS
        if problem.aligned_a and problem.aligned_b and not kmajor_twins(problem):
            return k
        return 2 * (k + 1) + (FORM_PICKS * (len(STATIC_FORMS) - 1) if forms else 0)
    if bspace == "AUTO":
        from ..model.topk import K_MAX
        return most(K_MAX)
    if bspace == "FAST":
        from ..model.topk import (FAST_EXTRA, FAST_FAMILIES, PADDED_TMA_PICKS, SHORT_K_TMA_PICKS, WAVE_MIN_SPLIT,
                                  core_picks, padded_tma_applies, short_k_tma_applies, wave_split, x3_pick_applies)
        # fast_extra: how many next choices the ranker adds for this problem (topk.fast_extra: up to
        # FAST_UNSURE_EXTRA more where it is unsure). Unknown (before the ranker is loaded: the tuner
        # sizes its compile pool with this), the count of a problem it trusts: an unsure one's 1-2
        # more compile on the benchmark worker's precompile threads, which a pool would not speed up.
        # A decode problem core_pick_applies to may add up to core_picks of skinny's CUDA-core tiles (topk.with_core).
        # A problem of few output tiles may add DecomposeK's one-wave split (topk.with_wave_split),
        # an unaligned one of many the padded persistent TMA kernel (topk.with_padded_persistent), an
        # aligned one of many with a short K the copy-free one (topk.with_short_k_persistent),
        # an fp32 one run as 3xTF32 the analytic model's first of two families (topk.x3_pick_applies).
        return most(FAST_FAMILIES + (fast_extra if fast_extra is not None else FAST_EXTRA)
                    + core_picks(problem)
                    + (sms is not None and wave_split(problem, sms) >= WAVE_MIN_SPLIT)
                    + PADDED_TMA_PICKS * padded_tma_applies(problem, sms)
                    + SHORT_K_TMA_PICKS * short_k_tma_applies(problem, sms)
                    + FAST_FAMILIES * x3_pick_applies(problem))
    return most(bspace) if isinstance(bspace, int) else None


def plan_candidates(problem: Problem, families: Sequence[str], space: str, dev: DeviceInfo,
                    lut: LookupTable | None, bspace: str | int, ranker) -> tuple[list[Choice], tuple | None]:
    """``CandidatePlan(...)(problem)`` as (candidates, (k, why) or None): the older spelling."""
    p = CandidatePlan(tuple(families), space, dev, lut, bspace, ranker)(problem)
    return p.choices, (None if p.k is None and p.why is None else (p.k, p.why))
