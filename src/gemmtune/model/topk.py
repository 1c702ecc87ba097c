"""Uncertainty-aware top-k: benchmark more of the model's best where it is unsure.

``choose_k`` is a pure function of the model's ranking keys for one problem (lower =
faster, in ln-ms units: ``LearnedModel.rank_keys``, or ln of any model's estimated ms),
its trust in that problem (``LearnedModel.trust``: 0 far from its training domain) and
the training support of the families near the top (``LearnedModel.support``). k grows

* with the number of candidates the model cannot tell from its first one (keys within
  ``tie``, ln(1.05) by default: estimates 5% apart are within the model's error), and
* as trust or support fall (a reason starting 'unsure:'; 'spread:' for the first rule,
  'confident:' when neither widens k): ``k_min + ceil((1 - min(trust, support)) * (k_max - k_min))``,

bounded by ``[k_min, k_max]``. ``study`` replays fixed and adaptive k on measured data, and the
family-diverse selection (``diverse_pick``: each family's first choice, the best k of those).

Example::

    >>> choose_k([0.0, 0.5, 0.9], trust=1.0)
    (1, 'confident: 1 candidate(s) within 5% of the first, trust 1.00')
    >>> choose_k([0.0, 0.01, 0.02, 0.9], trust=1.0)[0]
    3
    >>> choose_k([0.0, 0.5, 0.9], trust=0.0)
    (8, 'unsure: trust 0.00 (min of trust and family support)')
"""

from __future__ import annotations

import math

import numpy as np

from .metrics import rank_keys

TIE = math.log(1.05)
K_MIN, K_MAX = 1, 8


def choose_k(keys, trust: float | None = None, k_min: int = K_MIN, k_max: int = K_MAX, *,
             tie: float = TIE, support: float | None = None) -> tuple[int, str]:
    """(k, why): how many of the model's best to benchmark for one problem; see the module."""
    if not (isinstance(k_min, int) and isinstance(k_max, int) and 1 <= k_min <= k_max):
        raise ValueError(f"need 1 <= k_min <= k_max, got k_min={k_min!r}, k_max={k_max!r}")
    k_arr = np.asarray(keys, dtype=np.float64)
    fin = np.sort(k_arr[np.isfinite(k_arr)])
    if not len(fin):
        return k_max, "no finite estimate"
    close = int(np.sum(fin <= fin[0] + tie))
    known = [v for v in (trust, support) if v is not None]
    conf = min(1.0, max(0.0, min(known))) if known else 1.0
    k_conf = k_min + math.ceil((1.0 - conf) * (k_max - k_min) - 1e-9)
    k = min(k_max, max(k_min, close, k_conf))
    pct = f"{math.expm1(tie):.0%}"
    if k_conf >= close and k_conf > k_min:
        return k, f"unsure: trust {conf:.2f} (min of trust and family support)"
    if close > k_min:
        return k, f"spread: {close} candidates within {pct} of the first" + (" (capped)" if close > k_max else "")
    return k, f"confident: {close} candidate(s) within {pct} of the first, trust {conf:.2f}"


def model_trust(model, problem) -> float | None:
    """The model's trust in its ranking of ``problem`` (LearnedModel.trust: 0 far from its
    training data), or None for a model that does not say (the analytic one; ``fast_extra``
    reads that as no trust, ``choose_k`` as no say)."""
    return float(model.trust(problem)[0]) if hasattr(model, "trust") else None


def model_k(model, problem, choices, k_min: int = K_MIN, k_max: int = K_MAX, *, tie: float = TIE):
    """(ranking keys, k, why) for ``choices`` of ``problem``: choose_k fed with what ``model``
    offers (trust and family support of a LearnedModel; an analytic model has neither)."""
    keys = rank_keys(model, problem, choices)
    trust = model_trust(model, problem)
    support = None
    if hasattr(model, "support") and len(choices):
        top = np.argsort(keys, kind="stable")[:max(3, k_min)]
        support = model.support([choices[i].family for i in top])[0]
    k, why = choose_k(keys, trust, k_min, k_max, tie=tie, support=support)
    return keys, k, why


def family_of(choice, pad_family: bool = True) -> str:
    """``choice``'s kernel family for ``diverse_pick``; ``pad_family``: a ``pad+`` choice is a
    family of its own ('pad+triton_mm'), else it counts as its kernel's family.

    >>> from gemmtune.configs import AtenConfig, Choice
    >>> family_of(Choice("aten", AtenConfig(), True)), family_of(Choice("aten", AtenConfig(), True), False)
    ('pad+aten', 'aten')
    """
    return ("pad+" if pad_family and choice.pad else "") + choice.family


def diverse_pick(families, keys, k_fam: int) -> list[int]:
    """Indices of the family-diverse selection: each family's first choice by ``keys`` (lower =
    faster; non-finite last, ties in the given order), the ``k_fam`` best of those leaders,
    best first. ``families[i]`` names choice i's family (``family_of``).

    >>> diverse_pick(["triton_mm", "triton_mm", "skinny", "splitk"], [0.0, 0.1, 0.2, 0.3], 2)
    [0, 2]
    """
    if not (isinstance(k_fam, int) and k_fam >= 1):
        raise ValueError(f"k_fam must be a positive int, got {k_fam!r}")
    k_arr = np.asarray(keys, dtype=np.float64)
    if len(k_arr) != len(families):
        raise ValueError(f"{len(k_arr)} keys for {len(families)} families")
    k_arr = np.where(np.isfinite(k_arr), k_arr, np.inf)
    seen, out = set(), []
    for i in np.argsort(k_arr, kind="stable"):
        if families[i] not in seen:
            seen.add(families[i])
            out.append(int(i))
            if len(out) == k_fam:
                break
    return out


# --fast benchmarks the model's first choice of each of its FAST_FAMILIES best families and its
# FAST_EXTRA best choices beyond those (cuBLAS besides). Replayed on the H100 store, each problem
# held out once (5-fold cross-validation, ``gemmtune train --policies``, 2026-11-26):
# - 294 problems: the model's top 1 reached 96.6% of the best measured choice (geomean), its top 2
#   98.2%, the first of its 2 best families 98.4%, at 2, 3 and 3 candidates a problem;
# - 405 problems (session 15; benchmarks/results/2026-11-26-h100-s15-fast-next): the first of its 2
#   best families 98.44% (>= 97% of the best on 89.6% of problems) at 3.27 candidates; with its
#   next best choice 99.19% (93.6%) at 4.27; a third family instead 98.56% at 4.12. On the 31
#   problems the model does not trust (analytic ties), 96.17% -> 98.06%; splitk 94.85% -> 97.16%.
FAST_FAMILIES = 2
FAST_EXTRA = 1
# ...and up to FAST_UNSURE_EXTRA more where the model does not trust its ranking (``fast_extra``:
# LearnedModel.trust below 1, a problem far from its training data, of a layout or dtype it never
# saw). Replayed on the H100 store's 489 problems (session 19, each held out once, the folds of
# fast_replay.py): on the 103 it trusts less than fully, --fast went from 96.72% to 98.73% of the best
# at 4.21 -> 5.69 candidates (16 at trust 0: 95.56% -> 98.76%); over all 489, 98.59% -> 99.02% at
# 4.27 -> 4.58. Up to 4 more gained 0.03 points for 1.1 more candidates on those 103.
# The analytic model alone (a GPU or a triton MAJOR.MINOR no learned model was shipped for, e.g.
# the newest triton) knows no data at all and counts as trust 0: on the same 489 problems its
# --fast reached 96.96% of the best at 4.28 candidates with 1 next choice, 97.94% at 6.28 with 3.
FAST_UNSURE_EXTRA = 2


def fast_extra(trust: float | None) -> int:
    """How many of the model's next best choices --fast adds to its families' first ones:
    FAST_EXTRA, plus up to FAST_UNSURE_EXTRA as the model's trust in the problem falls from 1 to 0
    (``None``: a model that does not say, as the analytic one, which knows no data: as trust 0).

    >>> fast_extra(1.0), fast_extra(0.6), fast_extra(0.0), fast_extra(None)
    (1, 2, 3, 3)
    """
    if trust is None:
        return FAST_EXTRA + FAST_UNSURE_EXTRA
    return FAST_EXTRA + math.ceil((1.0 - min(max(float(trust), 0.0), 1.0)) * FAST_UNSURE_EXTRA - 1e-9)


def diversity_family(choice) -> str:
    """The family ``fast_pick`` spreads over: ``family_of`` with pad+ a family of its own, and
    triton_static counted as triton_mm (the same kernel body with its sizes compiled in: a pick of
    either brings the other along as its twin, tuning.plan._split_twins).

    >>> from gemmtune.configs import Choice
    >>> diversity_family(Choice.parse("triton_static:BM64-BN64-BK32-S3-W4-G8"))
    'triton_mm'
    """
    fam = family_of(choice)
    return fam.replace("triton_static", "triton_mm")


def fast_pick(choices, keys, k_fam: int = FAST_FAMILIES, extra: int = FAST_EXTRA) -> list[int]:
    """Indices of what --fast benchmarks besides cuBLAS: the model's first choice of each of its
    ``k_fam`` best families (``diverse_pick`` over ``diversity_family``), best first; when those
    all take one path of an unaligned problem (all ``pad+`` or all copy-free) while the other path
    has choices, that path's best-ranked one too (``tuning.plan._both_paths``: which path wins is
    the one decision the collected data long could not teach); then the model's ``extra`` best
    choices not picked yet, most often a second config of its first family (a near-miss config is
    what a family's first choice most often loses to: see FAST_EXTRA).

    >>> from gemmtune.configs import Choice
    >>> cs = [Choice.parse(c) for c in ("triton_mm:BM64-BN64-BK32-S3-W4-G8", "triton_mm:BM64-BN64-BK64-S3-W4-G8",
    ...                                  "splitk:BM64-BN64-BK32-S3-W4-G8-SK4-det", "pad+aten")]
    >>> fast_pick(cs, [0.0, 0.1, 0.2, 0.3]), fast_pick(cs, [0.0, 0.1, 0.2, 0.3], extra=0)
    ([0, 2, 3, 1], [0, 2, 3])
    """
    picked, more = fast_parts(choices, keys, k_fam, extra)
    return picked + more


def fast_parts(choices, keys, k_fam: int = FAST_FAMILIES, extra: int = FAST_EXTRA,
               problem=None, preferred=None, sms: int | None = None,
               added: dict | None = None, tma_preferred=None) -> tuple[list[int], list[int]]:
    """``fast_pick``'s two parts: (the families' first choices with the other path's, and on an
    decode ``problem`` that ``core_pick_applies`` to, skinny's best-ranked CUDA-core choice
    (``with_core``), and with the GPU's ``sms`` DecomposeK's one-wave split where the output has
    few tiles (``with_wave_split``); the model's
    ``extra`` next best choices), so that a caller can tell them apart without ranking twice.
    ``added``, a dict when given, receives what each rule added to the first part: ``"core"``
    (``with_core``), ``"wave"`` (``with_wave_split``), ``"padded_tma"`` (``with_padded_persistent``),
    ``"short_k_tma"`` (``with_short_k_persistent``; ``tma_preferred`` serves both TMA rules),
    ``"padded"`` (``with_padded_cublas``).

    >>> from gemmtune.configs import Choice
    >>> cs = [Choice.parse(c) for c in ("triton_mm:BM64-BN64-BK32-S3-W4-G8", "triton_mm:BM64-BN64-BK64-S3-W4-G8")]
    >>> fast_parts(cs, [0.0, 0.1])
    ([0], [1])
    """
    if not (isinstance(extra, int) and extra >= 0):
        raise ValueError(f"extra must be an int >= 0, got {extra!r}")
    k_arr = np.asarray(keys, dtype=np.float64)
    order = np.argsort(np.where(np.isfinite(k_arr), k_arr, np.inf), kind="stable")
    picked = with_other_path(choices, order, diverse_pick([diversity_family(c) for c in choices], keys, k_fam))
    rules = []
    if problem is not None:
        rules.append(("core", lambda p: with_core(choices, order, p, problem, preferred)))
        if sms:
            rules.append(("wave", lambda p: with_wave_split(choices, p, problem, sms)))
            rules.append(("padded_tma", lambda p: with_padded_persistent(choices, order, p, problem, sms,
                                                                         tma_preferred)))
            rules.append(("short_k_tma", lambda p: with_short_k_persistent(choices, order, p, problem, sms,
                                                                           tma_preferred)))
    rules.append(("padded", lambda p: with_padded_cublas(choices, p)))
    for name, rule in rules:
        grown = rule(picked)  # each rule appends to the picks it is given
        if added is not None:
            added[name] = grown[len(picked):]
        picked = grown
    taken = set(picked)
    return picked, [int(i) for i in order if int(i) not in taken][:extra]


# skinny's two ways to sum at decode: tl.dot (tensor cores, where the dtype has them) or each lane
# on its own (CUDA cores, "-core"). An fp32 problem without TF32 has no tensor-core path, and there
# the learned rankers have almost no core timings to go by (the collection's random draw measured
# about one core config a shape: 3 of the H100 store's fp32 decode problems have any). On fp32
# 2x3072x12288, H100, both rankers put dot variants first and --fast kept cuBLAS at 75-80% of the best,
# where the default space found a core kernel at 1.26-1.34x cuBLAS (benchmarks/results/
# 2026-11-27-h100-s20, calls 2 and 8); on the store's fp32 2x2048x2048 core ran 14.5 us, dot 42.3.
# So --fast times the best-ranked core config there too: one more candidate.
# The same holds for bf16/fp16 at M <= 8 where B's rows are unaligned (a row-major B with an odd N:
# GPT-2's and BERT's vocabulary heads at decode), where the dot path loads B one element at a time.
# On 1x50257x768 bf16 the core kernel was the default space's best on both GPUs, and --fast on an
# H200 missed it with either ranker: core 26.2 us, --fast's skinny dot pick 29.2, a candidate
# ranker's triton_static 30.2 (benchmarks/results/2026-11-27-h200-s21, call 2).
CORE_PICK_HALF_MAX_M = 8
# With skinny's default space given (``with_core``'s ``preferred``), up to this many of its core
# tiles, in the model's order. The default space holds 1-5 of them at M <= 8, and on the H200 the
# best of those differed by shape (BN32-BK128 at 1x50257x768 bf16, BN16-BK256 split 2 at fp32
# 2x3072x12288). Timing up to 3 of them took --fast from 93.8% to 99.6% of the best on 8 fp32-decode
# and odd-head shapes, beside the ranker's first core choice of the whole space, for 1.7 s more
# tuning in all (benchmarks/results/2026-11-27-h200-s21, call 4).
CORE_PICKS = 3
# A Linear at decode (bf16/fp16, M <= GEMV_MAX_M, B K-contiguous): skinny's default GEMV tiles
# (skinny_spec._DEFAULT_GEMV, narrow CUDA-core strips) beat cuBLAS by 1.04-1.31x on 4 of 5 such
# layers of 0.5-3B models in an H100 sweep, where every earlier skinny tile lost
# (benchmarks/results/2026-11-27-h100-s26, call 3). No ranker has timings of them, so --fast times
# all of them (at most GEMV_PICKS) there: 4 more candidates of a few microseconds each. Up to M = 4:
# on 4x1024x3072 the default space's GEMV tile ran 1.28x cuBLAS, --fast's narrow dot strip 1.16x
# (call 6); at M = 8 and 16 the default space picked a dot strip.
# fp32 without TF32 too (no tensor-core path there): on 1x11008x6912 fp32 (H100, session 27's random
# suite) the default space's GEMV tile BN4-BK512 ran 1.09x cuBLAS, --fast's core pick (BN32-BK128,
# the ranker's first of the general core tiles) 1.05x (benchmarks/results/2026-11-28-h100-s27).
# At M = 1 on 16-bit operands those tiles are the four one-row -flat strips
# (skinny_spec._DEFAULT_ONE_ROW), all timed: on 18 such layers of 0.4-8B models --fast reached
# 99.9% of the best kernel, 1.37x cuBLAS, in 12.1 s (H200, benchmarks/results/2026-11-29-h200-s40,
# call 4). The rankers have no feature for the layout, so a strip and its -flat twin would tie.
# On a layer of N >= 64 SMs the default space adds two wider one-row strips
# (skinny_spec._WIDE_ONE_ROW: 0.995 of the best strip there, against 0.960 without), so there
# --fast times six: on 10 such layers of 0.1-7B models 1.09x cuBLAS, 99.7% of the best kernel, in
# 7.9 s (H200, benchmarks/results/2026-11-30-h200-s41, call 4).
GEMV_MAX_M = 4
GEMV_PICKS = 6


def gemv_pick_applies(problem) -> bool:
    """Whether ``with_core`` times skinny's GEMV tiles for ``problem``: a bf16 / fp16 / fp32 (no
    TF32) mm / addmm at M <= GEMV_MAX_M with a K-contiguous B (``x @ W.T``).

    >>> from gemmtune.problem import Problem
    >>> [gemv_pick_applies(Problem.from_sizes(m, 2048, 2048, "bf16", layout_b="col")) for m in (1, 4, 5)]
    [True, True, False]
    >>> gemv_pick_applies(Problem.from_sizes(1, 2048, 2048, "bf16"))  # row-major B: N-contiguous
    False
    >>> gemv_pick_applies(Problem.from_sizes(1, 2048, 2048, "fp32", layout_b="col"))
    True
    """
    return _linear_at_decode(problem, 1, GEMV_MAX_M, fp32=True)


def _linear_at_decode(problem, lo: int, hi: int, fp32: bool = False) -> bool:
    """A bf16/fp16 (with ``fp32``, also fp32 without TF32) mm / addmm with lo <= M <= hi and a
    K-contiguous B: the Linear at decode that skinny's GEMV and narrow dot strips serve."""
    from ..kernels.skinny_spec import gemv_layout
    dtypes = ("bfloat16", "float16", "float32") if fp32 else ("bfloat16", "float16")
    return (problem.op in ("mm", "addmm") and problem.dtype in dtypes
            and not (problem.dtype == "float32" and problem.allow_tf32)
            and lo <= problem.m <= hi and gemv_layout(problem))


# From M = 3 up to NARROW_DOT_MAX_M rows, the same layers' best skinny tile was a 16-wide dot
# strip on 2 warps (skinny_spec._DEFAULT_DOT's last two), which no ranker has timings of either:
# best of 355 configs on 16x2048x2048 (6.07 us, cuBLAS 6.44; call 3), and the default space's pick
# at 1.05x cuBLAS on 8x2048x2048 and 1.11x on 16x2048x8192, where --fast kept cuBLAS or a 4-warp
# strip (call 4, benchmarks/results/2026-11-27-h100-s26). --fast times them there: 2 candidates.
NARROW_DOT_MIN_M = 3
NARROW_DOT_MAX_M = 16
NARROW_DOT_PICKS = 2


def narrow_dot_pick_applies(problem) -> bool:
    """Whether ``with_core`` times skinny's 16-wide dot strips for ``problem``: as
    ``gemv_pick_applies``, at NARROW_DOT_MIN_M <= M <= NARROW_DOT_MAX_M (at M = 3 and 4 beside the
    GEMV tiles).

    >>> from gemmtune.problem import Problem
    >>> [narrow_dot_pick_applies(Problem.from_sizes(m, 2048, 2048, "bf16", layout_b="col")) for m in (2, 3, 16, 17)]
    [False, True, True, False]
    """
    return _linear_at_decode(problem, NARROW_DOT_MIN_M, NARROW_DOT_MAX_M)


def is_narrow_dot(choice) -> bool:
    """A copy-free skinny tl.dot choice with a 16-wide strip on 2 warps."""
    return (choice.family == "skinny" and not choice.pad and getattr(choice.config, "dot", False) is True
            and choice.config.block_n == 16 and choice.config.num_warps == 2)


def is_gemv_tile(choice) -> bool:
    """A skinny CUDA-core choice with a strip of at most 4 columns (skinny_spec._DEFAULT_GEMV), or
    a one-row ``-flat`` strip of any width (skinny_spec.one_row_tiles)."""
    return is_cuda_core(choice) and (choice.config.block_n <= 4 or bool(getattr(choice.config, "flat", False)))


def core_picks(problem) -> int:
    """How many core or strip tiles ``with_core`` may add for ``problem`` (0 where it adds none)."""
    strips = GEMV_PICKS * gemv_pick_applies(problem) + NARROW_DOT_PICKS * narrow_dot_pick_applies(problem)
    if strips and problem.dtype == "float32":
        return strips + CORE_PICKS  # fp32's general core tiles as well (with_core)
    return strips or (CORE_PICKS if core_pick_applies(problem) else 0)


def core_pick_applies(problem) -> bool:
    """Whether ``with_core`` may add a pick for ``problem``: fp32 without TF32, at an M skinny has
    CUDA-core configs for (skinny_spec.CORE_MAX_M); bf16/fp16 with an unaligned B at M up to
    CORE_PICK_HALF_MAX_M; and where ``gemv_pick_applies``.

    >>> from gemmtune.problem import Problem
    >>> [core_pick_applies(Problem.from_sizes(m, 50257, 768, "bf16")) for m in (1, 8, 9)]
    [True, True, False]
    >>> core_pick_applies(Problem.from_sizes(1, 50304, 768, "bf16"))  # an aligned row-major B
    False
    >>> core_pick_applies(Problem.from_sizes(1, 50257, 768, "bf16", layout_b="col"))  # a Linear: GEMV tiles
    True
    """
    from ..kernels.skinny_spec import CORE_MAX_M
    if problem.op not in ("mm", "addmm"):  # skinny serves no bmm or scaled_mm
        return False
    if problem.dtype == "float32":
        return not problem.allow_tf32 and problem.m <= CORE_MAX_M
    return (problem.dtype in ("bfloat16", "float16") and not problem.aligned_b
            and problem.m <= CORE_PICK_HALF_MAX_M) or gemv_pick_applies(problem) or narrow_dot_pick_applies(problem)


def x3_pick_applies(problem) -> bool:
    """An fp32 problem with TF32 off whose Triton kernels run 3xTF32 (gemmtune.precision): the
    learned rankers were trained on IEEE fp32 timings (CUDA-core FMA), where tensor-core tiles
    lose, so ``select_fast`` also times the analytic model's picks, which know the 3xTF32 rate.
    On the H200 (session 48, call 3, 11 fp32 shapes) --fast with the rankers alone kept cuBLAS on
    512x4096x4096 (351 us) and 4096^3 (2740 us), where the default space's 3xTF32 tiles ran 193
    and 2439 us: 91.6% of the best kernel.

    >>> from gemmtune.problem import Problem
    >>> [x3_pick_applies(Problem.from_sizes(512, 4096, 4096, d)) for d in ("fp32", "bf16")]
    [True, False]
    """
    from ..precision import runs_3xtf32
    return problem.op in ("mm", "addmm", "bmm") and runs_3xtf32(problem)


def is_cuda_core(choice) -> bool:
    """A copy-free skinny choice on its CUDA-core path (``-core``: no tl.dot)."""
    return choice.family == "skinny" and not choice.pad and getattr(choice.config, "dot", True) is False


def is_padded_cublas(choice) -> bool:
    """``pad+aten``: cuBLAS on padded copies of the operands."""
    return choice.family == "aten" and choice.pad


def with_core(choices, order, picked: list[int], problem, preferred=None) -> list[int]:
    """``picked`` plus, where ``core_pick_applies``, the first index of ``order`` that is a skinny
    CUDA-core choice (``is_cuda_core``), where none is picked and ``choices`` has one. With
    ``preferred`` (choice ids: skinny's default space, whose core tiles come from sweeps), the first
    CORE_PICKS core choices among those instead, if any is in ``choices``: the rankers have few core
    timings, and on an H200 their first core choice of the whole space ran 50.7 us on fp32
    2x3072x12288 where the default space's best core tile ran 42.3 (benchmarks/results/
    2026-11-27-h200-s21, call 3).

    >>> from gemmtune.configs import Choice
    >>> from gemmtune.problem import Problem
    >>> cs = [Choice.parse(c) for c in ("skinny:BM2-BN64-BK64-SK8-S3-W2-dot-det", "skinny:BM2-BN32-BK128-SK4-S1-W4-core-det")]
    >>> with_core(cs, [0, 1], [0], Problem.from_sizes(2, 3072, 12288, "fp32"))
    [0, 1]
    >>> with_core(cs, [0, 1], [0], Problem.from_sizes(2, 3072, 12288, "bf16"))
    [0]
    >>> with_core(cs, [1, 0], [1], Problem.from_sizes(2, 3072, 12288, "fp32"), preferred={"x"})
    [1]

    A core choice already picked (the ranker's first of skinny's whole space) does not stand in for
    the preferred ones: on 1x30522x768 bf16 (H200, benchmarks/results/2026-11-27-h200-s22, call 3)
    --fast's one core pick, BK64, lost to cuBLAS (30.6 us) where the default space's BK128 core tile
    ran 17.2 us, and with it picked no default tile was timed.
    """
    if not core_pick_applies(problem):
        return list(picked)
    gemv, narrow = gemv_pick_applies(problem), narrow_dot_pick_applies(problem)
    if gemv or narrow:  # the GEMV tiles and / or the narrow dot strips, which no ranker has timings of
        liked = []
        for applies, want, most in ((gemv, is_gemv_tile, GEMV_PICKS), (narrow, is_narrow_dot, NARROW_DOT_PICKS)):
            if applies:
                tiles = [int(i) for i in order if want(choices[int(i)])
                         and (not preferred or choices[int(i)].id in preferred)]
                liked += tiles[:most if preferred else 1]
        if problem.dtype != "float32":  # fp32 times its general core tiles too, as below
            return list(picked) + [i for i in dict.fromkeys(liked) if i not in picked]
        picked = list(picked) + [i for i in dict.fromkeys(liked) if i not in picked]
    cores = [int(i) for i in order if is_cuda_core(choices[int(i)])]
    liked = [i for i in cores if preferred and choices[i].id in preferred and i not in picked][:CORE_PICKS]
    if liked:
        return list(picked) + [i for i in liked if i not in picked]
    if any(is_cuda_core(choices[i]) for i in picked):
        return list(picked)
    return list(picked) + cores[:1]


# DecomposeK's one-wave pick (``with_wave_split``) where the one-wave split is at least this: an
# output of at most SMs / 16 tiles (8 on an H100).
WAVE_MIN_SPLIT = 16


def with_wave_split(choices, picked: list[int], problem, sms: int) -> list[int]:
    """``picked`` plus, where the output has so few tiles that DecomposeK's one-wave split
    (``decompose_k_spec.default_splits``' target: SMs / output tiles) is at least WAVE_MIN_SPLIT and
    nothing picked is a DecomposeK choice, the copy-free DecomposeK choice whose split is nearest it
    (in log2). The rankers learned DecomposeK from rows timed before its sum was spread over the
    GPU (session 23), and rank its long splits low where they now win: on 24x24x57344 (H100,
    session 24) the default space's s112 ran at 1.61x cuBLAS, --fast's pick at 1.48x. Replayed on
    the H100 store (DecomposeK's small-M x N rows measured again; 497 problems, cross-validated),
    --fast went from 98.62% to 98.68% of the best (splitk group 96.54% to 96.73%, random 98.14% to
    98.48%, no group lower) for 0.03 more candidates a problem
    (benchmarks/results/2026-11-27-h100-s24/README.md, section 6).

    >>> from gemmtune.configs import Choice
    >>> from gemmtune.problem import Problem
    >>> cs = [Choice.parse(c) for c in ("splitk:BM32-BN32-BK128-S4-W4-G8-SK64-atomic", "decompose_k:s16",
    ...                                  "decompose_k:s128", "decompose_k:s224")]
    >>> with_wave_split(cs, [0], Problem.from_sizes(32, 32, 28672, "bf16"), 132)
    [0, 2]
    >>> with_wave_split(cs, [0, 1], Problem.from_sizes(32, 32, 28672, "bf16"), 132)  # one picked already
    [0, 1]
    >>> with_wave_split(cs, [0], Problem.from_sizes(512, 512, 28672, "bf16"), 132)  # 16 tiles: target 8
    [0]
    """
    target = wave_split(problem, sms)
    if target < WAVE_MIN_SPLIT or any(choices[i].family == "decompose_k" for i in picked):
        return list(picked)
    near = [(abs(math.log2(c.config.split / target)), i) for i, c in enumerate(choices)
            if c.family == "decompose_k" and not c.pad]
    return list(picked) + ([min(near)[1]] if near else [])


def wave_split(problem, sms: int) -> float:
    """DecomposeK's one-wave split of an mm ``problem`` on a GPU of ``sms`` SMs
    (``decompose_k_spec.wave_split``); 0 for another op.

    >>> from gemmtune.problem import Problem
    >>> wave_split(Problem.from_sizes(32, 32, 28672, "bf16"), 132), wave_split(Problem.from_sizes(8, 8, 100, "bf16"), 132)
    (132.0, 0.0)
    """
    from ..kernels.decompose_k_spec import wave_split as split_for_one_wave

    return split_for_one_wave(problem.m, problem.n, problem.k, sms) if problem.op == "mm" else 0.0


# The persistent TMA kernel's tile for the padded-path rule (``with_padded_persistent``), and how
# many of its flattened configs the rule times.
PADDED_TMA_TILE = 128
PADDED_TMA_PICKS = 2


def padded_tma_applies(problem, sms: int | None) -> bool:
    """Whether ``with_padded_persistent`` may add picks for ``problem`` on a GPU of ``sms`` SMs:
    an unaligned operand, and an output of at least ``sms`` PADDED_TMA_TILE-square tiles.

    >>> from gemmtune.problem import Problem
    >>> [padded_tma_applies(Problem.from_sizes(*s, "bf16"), 132) for s in ((1021, 5003, 509), (1024, 5120, 512))]
    [True, False]
    """
    if not sms or (problem.aligned_a and problem.aligned_b):
        return False
    return _fills_a_wave(problem, sms)


def _fills_a_wave(problem, sms: int) -> bool:
    """An output of at least ``sms`` PADDED_TMA_TILE-square tiles (both persistent TMA rules')."""
    return -(-problem.m // PADDED_TMA_TILE) * -(-problem.n // PADDED_TMA_TILE) >= sms


def _with_best_ranked(choices, order, picked: list[int], want, preferred, limit: int) -> list[int]:
    """``picked`` plus the best-ranked in ``order`` of the choices ``want`` accepts (among
    ``preferred`` ids when any is there), until ``limit`` of them are picked (both persistent TMA
    rules' selection)."""
    ranked = [int(i) for i in order if want(choices[int(i)])]
    liked = [i for i in ranked if preferred and choices[i].id in preferred] or ranked
    have = sum(want(choices[i]) for i in picked)
    add = [i for i in liked if i not in picked][:max(0, limit - have)]
    return list(picked) + add


def with_padded_persistent(choices, order, picked: list[int], problem, sms: int, preferred=None) -> list[int]:
    """``picked`` plus up to PADDED_TMA_PICKS ``pad+persistent_tma`` choices with the tile and K
    loops flattened (``-F``), the best-ranked in ``order`` (among ``preferred`` ids, the default
    space's, when any is there; any pad+persistent_tma where no flattened one is), where
    ``choices`` has them (an unaligned problem on a Hopper GPU) and the output fills at least one
    wave of PADDED_TMA_TILE-square tiles (``padded_tma_applies``). On six such shapes (H100,
    session 27: three of its random suites, three new) the default space's best was a flattened
    pad+persistent_tma, 2-20% faster than --fast's pick: 1021x5003x509 with a column-major A
    23.9 us against 28.2 for the ranker's best plain (unflattened) one, 3001x3001x89 19.2 against
    triton_static's 22.9, 1531x4097x777 36.3 against pad+aten's 41.3; the ranker's single best
    flattened config fixed the first only (benchmarks/results/2026-11-28-h100-s27).

    >>> from gemmtune.configs import Choice
    >>> from gemmtune.problem import Problem
    >>> cs = [Choice.parse(c) for c in ("pad+aten", "pad+persistent_tma:BM128-BN128-BK64-S4-W4-G8",
    ...                                  "pad+persistent_tma:BM128-BN128-BK64-S4-W8-G8-F",
    ...                                  "pad+persistent_tma:BM128-BN256-BK32-S5-W8-G8-F",
    ...                                  "pad+persistent_tma:BM128-BN128-BK64-S5-W4-G8-F")]
    >>> odd = Problem.from_sizes(1021, 5003, 509, "bf16")
    >>> with_padded_persistent(cs, [0, 1, 3, 2, 4], [0, 1], odd, 132)  # the ranker's two best flattened
    [0, 1, 3, 2]
    >>> with_padded_persistent(cs, [0, 1, 3, 2, 4], [0, 1], odd, 132, preferred={cs[2].id, cs[4].id})
    [0, 1, 2, 4]
    >>> with_padded_persistent(cs[:2], [0, 1], [0], odd, 132)  # no flattened one to take
    [0, 1]
    >>> with_padded_persistent(cs, [0, 2, 1], [0], Problem.from_sizes(333, 4097, 1025, "bf16"), 132)  # 99 tiles
    [0]
    """
    def padded_tma(c, flat=None):
        return c.family == "persistent_tma" and c.pad and (flat is None or c.config.flatten is flat)
    if not padded_tma_applies(problem, sms):
        return list(picked)
    flat = True if any(padded_tma(c, True) for c in choices) else None
    return _with_best_ranked(choices, order, picked, lambda c: padded_tma(c, flat), preferred, PADDED_TMA_PICKS)


# The flattened persistent TMA kernel on an aligned problem whose K is short and whose output
# fills a wave of PADDED_TMA_TILE-square tiles: there C's write is most of the bytes, and a
# flattened loop (tile and K loops fused: the next tile's TMA loads overlap this tile's TMA
# store) streams it best. On ten random such shapes (H200, session 49, call 2: scripts/
# random_suite.py --seed 49, smallk group; K 16-192, bf16, fp16 and fp32) a flattened persistent
# config was the default space's best on 6, 3-51% ahead of the best triton_mm (K 48-192), and 5-6%
# behind it at K = 16; the shipped H200 ranker, with few timings of flattened configs at short K,
# ranked them low (top-1 regret 38% mean on those shapes), and --fast missed the best kernel by up
# to 16% (3245x4864x128 bf16: 14.7 us against 12.4).
SHORT_K_TMA_MAX_K = 256
SHORT_K_TMA_PICKS = 2


def short_k_tma_applies(problem, sms: int | None) -> bool:
    """Whether ``with_short_k_persistent`` may add picks for ``problem`` on a GPU of ``sms`` SMs:
    an aligned mm or addmm with K <= SHORT_K_TMA_MAX_K and an output of at least ``sms``
    PADDED_TMA_TILE-square tiles (an unaligned one is ``padded_tma_applies``'s).

    >>> from gemmtune.problem import Problem
    >>> [short_k_tma_applies(Problem.from_sizes(*s, "bf16"), 132) for s in ((3245, 4864, 128), (3245, 4864, 512), (512, 512, 64))]
    [True, False, False]
    """
    if not sms or not (problem.aligned_a and problem.aligned_b) or problem.op not in ("mm", "addmm"):
        return False
    return problem.k <= SHORT_K_TMA_MAX_K and _fills_a_wave(problem, sms)


def with_short_k_persistent(choices, order, picked: list[int], problem, sms: int, preferred=None) -> list[int]:
    """``picked`` plus up to SHORT_K_TMA_PICKS copy-free flattened ``persistent_tma`` choices
    (``-F``), the best-ranked in ``order`` (among ``preferred`` ids, the default space's, when any
    is there), where ``short_k_tma_applies`` (the comment above it says why). Picks already
    among ``picked`` count towards the two.

    >>> from gemmtune.configs import Choice
    >>> from gemmtune.problem import Problem
    >>> cs = [Choice.parse(c) for c in ("triton_mm:BM128-BN128-BK64-S3-W4-G8", "persistent_tma:BM128-BN128-BK64-S3-W8-G8",
    ...                                  "persistent_tma:BM128-BN128-BK64-S3-W8-G8-F", "persistent_tma:BM128-BN256-BK64-S3-W8-G8-F",
    ...                                  "persistent_tma:BM128-BN128-BK128-S3-W4-G8-F")]
    >>> short = Problem.from_sizes(3245, 4864, 128, "bf16")
    >>> with_short_k_persistent(cs, [0, 1, 4, 3, 2], [0], short, 132)  # the ranker's two best flattened
    [0, 4, 3]
    >>> with_short_k_persistent(cs, [0, 1, 4, 3, 2], [0], short, 132, preferred={cs[2].id, cs[3].id})
    [0, 3, 2]
    >>> with_short_k_persistent(cs, [0, 4, 3], [0, 4], short, 132)  # one picked already
    [0, 4, 3]
    >>> with_short_k_persistent(cs, [0, 4], [0], Problem.from_sizes(3245, 4864, 4096, "bf16"), 132)  # K not short
    [0]
    """
    def flat_tma(c):
        return c.family == "persistent_tma" and not c.pad and c.config.flatten
    if not short_k_tma_applies(problem, sms):
        return list(picked)
    return _with_best_ranked(choices, order, picked, flat_tma, preferred, SHORT_K_TMA_PICKS)


def with_padded_cublas(choices, picked: list[int]) -> list[int]:
    """``picked`` plus ``pad+aten`` where ``choices`` has it (an unaligned problem) and it is not
    picked: cuBLAS on the padded copies is to the padded path what cuBLAS is to the problem, a
    baseline timed whatever the ranker says. It compiles nothing (the copies are torch ops), and
    costs one timing. On 6000x100x2048 fp16 (a tall problem with an unaligned N, a class the
    stores lacked; H200, benchmarks/results/2026-11-27-h200-s22, call 4) it was the best kernel,
    18.2 us against --fast's pad+persistent_tma at 24.3 (cuBLAS 41.7), ranked 77th by the ranker.
    Replayed on the stores' unaligned problems (310 H200, 164 H100) it changed no outcome.

    >>> from gemmtune.configs import Choice
    >>> cs = [Choice.parse(c) for c in ("pad+persistent_tma:BM64-BN128-BK128-S4-W4-G8", "pad+aten")]
    >>> with_padded_cublas(cs, [0]), with_padded_cublas(cs, [1, 0]), with_padded_cublas(cs[:1], [0])
    ([0, 1], [1, 0], [0])
    """
    extra = [i for i, c in enumerate(choices) if is_padded_cublas(c) and i not in picked]
    return list(picked) + extra[:1]


def with_other_path(choices, order, picked: list[int]) -> list[int]:
    """``picked`` (indices into ``choices``) plus, when they all take one path of an unaligned
    problem (all ``pad+`` or all copy-free), the first index of ``order`` on the other path, if
    ``choices`` has one: the rule of tuning.plan._both_paths and of ``fast_pick``.

    >>> from gemmtune.configs import Choice
    >>> cs = [Choice.parse(c) for c in ("aten", "pad+aten", "pad+decompose_k:s2")]
    >>> with_other_path(cs, [2, 1, 0], [0]), with_other_path(cs, [2, 1, 0], [0, 1])
    ([0, 2], [0, 1])
    """
    out = list(picked)
    pads = {choices[i].pad for i in out}
    if len(pads) == 1:
        other = next((int(i) for i in order if choices[i].pad not in pads), None)
        if other is not None:
            out.append(other)
    return out


def twin_indices(choices, picked: list[int]) -> list[int]:
    """``picked`` plus, for each copy-free triton_mm / triton_static pick, the index of its twin
    (the same config in the other family) among ``choices`` when there is one: the replay's
    spelling of tuning.plan._with_twins.

    >>> from gemmtune.configs import Choice
    >>> cs = [Choice.parse("triton_mm:BM64-BN64-BK32-S3-W4-G8"), Choice.parse("triton_static:BM64-BN64-BK32-S3-W4-G8")]
    >>> twin_indices(cs, [0]), twin_indices(cs[:1], [0])
    ([0, 1], [0])
    """
    from ..configs import tile_of

    tiled = ("triton_mm", "triton_static")
    # Keyed by the tile: a triton_static config also names its K loop's form (StaticConfig); the
    # twin of a triton_mm tile is its carried form, the one the spaces list.
    where = {(c.family, tile_of(c.config)): i for i, c in enumerate(choices)
             if not c.pad and c.family in tiled and getattr(c.config, "form", "carried") == "carried"}
    out = list(picked)
    for i in picked:
        c = choices[i]
        if c.pad or c.family not in tiled:
            continue
        twin = where.get(("triton_static" if c.family == "triton_mm" else "triton_mm", tile_of(c.config)))
        if twin is not None and twin not in out:
            out.append(twin)
    return out


def policy_names(ks=(1, 3, 5), diverse=()) -> list[str]:
    """The policy names ``study`` replays: 'k=K' (fixed top k), 'adaptive', 'fast' (``fast_pick`` and twins), and per ``diverse``
    entry k_fam 'diverse=K' (pad+ a family of its own) and 'diverse=K,nopad' (pad+ counted as
    its kernel's family); with ``diverse`` also 'oracle-family', no policy but a bound: the
    model's first choice of the family that holds the problem's best measured choice.

    >>> policy_names((1,), (2,))
    ['k=1', 'adaptive', 'fast', 'diverse=2', 'diverse=2,nopad', 'oracle-family']
    """
    return [f"k={k}" for k in ks] + ["adaptive", "fast"] + [f"diverse={k}{s}" for k in diverse for s in ("", ",nopad")] \
        + (["oracle-family"] if diverse else [])


def study_rows(model, data, ks=(1, 3, 5), k_min: int = K_MIN, k_max: int = K_MAX, tie: float = TIE,
               diverse=()) -> list[dict]:
    """Per measured problem of ``data`` (a Dataset) with a choice besides cuBLAS: its ``key``,
    ``shape``, the families it has measured (``families``), ``best_family`` / ``top1_family``
    (``family_of`` the best measured choice / the model's first besides cuBLAS), the adaptive
    ``k`` and ``why``, and ``policies``: name (``policy_names``) -> (best fraction, candidates benchmarked, cuBLAS
    included). best fraction = time of the best measured choice / time of the best one the
    policy benchmarks (always cuBLAS plus its picks); 1.0 = it found the best."""
    out = []
    for g in data.groups:
        base = np.array([c.family == "aten" and not c.pad for c in g.choices])
        rest = np.flatnonzero(~base)
        if not len(rest):
            continue
        others = [g.choices[i] for i in rest]
        keys, k_ad, why = model_k(model, g.problem, others, k_min, k_max, tie=tie)
        ranked = np.argsort(keys, kind="stable")
        order = rest[ranked]
        best = g.times_ms.min()
        floor = g.times_ms[base].min() if base.any() else np.inf
        picks = {f"k={k}": order[:k] for k in ks}
        picks["adaptive"] = order[:k_ad]
        extra = fast_extra(model_trust(model, g.problem))  # as the tuner
        first, more = fast_parts(others, keys, extra=extra, problem=g.problem)
        picks["fast"] = rest[twin_indices(others, first + more)]
        fams = [family_of(c) for c in others]
        for k in diverse:
            for suffix, pad in (("", True), (",nopad", False)):
                picks[f"diverse={k}{suffix}"] = rest[diverse_pick([family_of(c, pad) for c in others], keys, k)]
        best_fam = family_of(g.choices[int(np.argmin(g.times_ms))])
        if diverse:  # not a policy: the bound of any that picks one family's first choice
            picks["oracle-family"] = order[np.array([fams[j] == best_fam for j in ranked])][:1]
        pol = {name: (float(best / min(floor, g.times_ms[idx].min() if len(idx) else np.inf)),
                      int(base.sum()) + len(idx)) for name, idx in picks.items()}
        out.append({"key": g.problem.key, "shape": g.shape, "families": sorted({c.family for c in g.choices}),
                    "best_family": best_fam, "top1_family": fams[int(ranked[0])],
                    "k": int(k_ad), "why": why, "policies": pol})
    return out


def summarize_policies(rows: list[dict]) -> dict:
    """Per policy of ``study_rows``' rows: ``best_fraction`` mean, geometric mean, 10th
    percentile and minimum, ``at_least_97pct`` / ``at_least_90pct`` (share of problems at or
    above), ``candidates`` (total benchmarked, cuBLAS included) and their mean; 'adaptive' also
    its k histogram and reasons."""
    out = {}
    names = list(rows[0]["policies"]) if rows else []
    for name in names:
        f = np.array([r["policies"][name][0] for r in rows])
        n = np.array([r["policies"][name][1] for r in rows])
        out[name] = {"problems": len(rows), "best_fraction_mean": float(f.mean()),
                     "best_fraction_geomean": float(np.exp(np.log(f).mean())),
                     "best_fraction_p10": float(np.percentile(f, 10)), "best_fraction_min": float(f.min()),
                     "at_least_97pct": float((f >= 0.97 - 1e-12).mean()),
                     "at_least_90pct": float((f >= 0.90 - 1e-12).mean()),
                     "candidates": int(n.sum()), "candidates_mean": float(n.mean())}
    if rows and "adaptive" in out:
        hist = np.bincount([r["k"] for r in rows])
        reasons: dict = {}
        for r in rows:
            w = r["why"].split(":")[0]
            reasons[w] = reasons.get(w, 0) + 1
        out["adaptive"]["k_histogram"] = {str(i): int(c) for i, c in enumerate(hist) if c}
        out["adaptive"]["reasons"] = reasons
    return out


def study(model, data, ks=(1, 3, 5), k_min: int = K_MIN, k_max: int = K_MAX, tie: float = TIE,
          diverse=()) -> dict:
    """Replay the tuner's model top-k on measured problems (``data``: a Dataset): cuBLAS
    plus the model's k best other choices, fixed k in ``ks`` and adaptive (choose_k), and
    with ``diverse`` the family-diverse selections (``diverse_pick``; see ``study_rows``).

    Per policy (``summarize_policies``): ``best_fraction`` (time of the best measured choice /
    time of the best benchmarked one; 1.0 = found it) mean, geometric mean, 10th percentile and
    minimum, ``at_least_97pct`` (share of problems at >= 97%), ``candidates`` (total
    benchmarked, cuBLAS included) and their mean; adaptive also its k histogram and reasons.
    """
    out = summarize_policies(study_rows(model, data, ks, k_min, k_max, tie, diverse))
    if "adaptive" in out:
        out["adaptive"]["settings"] = {"k_min": k_min, "k_max": k_max, "tie": tie}
    return out
