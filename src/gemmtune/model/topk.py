"""Uncertainty-aware top-k: benchmark more of the model's best where it is unsure.

``choose_k`` is a pure function of the model's ranking keys for one problem (lower =
faster, in ln-ms units: ``LearnedModel.rank_keys``, or ln of any model's estimated ms),
its trust in that problem (``LearnedModel.trust``: 0 far from its training domain) and
the training support of the families near the top (``LearnedModel.support``). k grows

* with the number of candidates the model cannot tell from its first one (keys within
  ``tie``, ln(1.05) by default: estimates 5% apart are within the model's error), and
* as trust or support fall (a reason starting 'unsure:'; 'spread:' for the first rule,
  'confident:' when neither widens k): ``k_min + ceil((1 - min(trust, support)) * (k_max - k_min))``,

bounded by ``[k_min, k_max]``. ``study`` replays fixed and adaptive k on measured data.

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


def model_k(model, problem, choices, k_min: int = K_MIN, k_max: int = K_MAX, *, tie: float = TIE):
    """(ranking keys, k, why) for ``choices`` of ``problem``: choose_k fed with what ``model``
    offers (trust and family support of a LearnedModel; an analytic model has neither)."""
    keys = rank_keys(model, problem, choices)
    trust = model.trust(problem)[0] if hasattr(model, "trust") else None
    support = None
    if hasattr(model, "support") and len(choices):
        top = np.argsort(keys, kind="stable")[:max(3, k_min)]
        support = model.support([choices[i].family for i in top])[0]
    k, why = choose_k(keys, trust, k_min, k_max, tie=tie, support=support)
    return keys, k, why


def study(model, data, ks=(1, 3, 5), k_min: int = K_MIN, k_max: int = K_MAX, tie: float = TIE) -> dict:
    """Replay the tuner's model top-k on measured problems (``data``: a Dataset): cuBLAS
    plus the model's k best other choices, fixed k in ``ks`` and adaptive (choose_k).

    Per policy: ``best_fraction`` (time of the best measured choice / time of the best
    benchmarked one; 1.0 = found it) mean, geometric mean, 10th percentile and minimum,
    ``at_least_97pct`` (share of problems at >= 97%), ``candidates`` (total benchmarked,
    cuBLAS included) and their mean; adaptive also its k histogram and reasons.
    """
    pols = {f"k={k}": [] for k in ks}
    pols["adaptive"] = []
    ks_chosen, reasons = [], {}
    for g in data.groups:
        base = np.array([c.family == "aten" and not c.pad for c in g.choices])
        rest = np.flatnonzero(~base)
        if not len(rest):
            continue
        keys, k_ad, why = model_k(model, g.problem, [g.choices[i] for i in rest], k_min, k_max, tie=tie)
        order = rest[np.argsort(keys, kind="stable")]
        best = g.times_ms.min()
        floor = g.times_ms[base].min() if base.any() else np.inf
        for name, k in [(f"k={k}", k) for k in ks] + [("adaptive", k_ad)]:
            got = min(floor, g.times_ms[order[:k]].min())
            pols[name].append((best / got, int(base.sum()) + min(k, len(rest))))
        ks_chosen.append(k_ad)
        reasons[why.split(":")[0]] = reasons.get(why.split(":")[0], 0) + 1
    out = {}
    for name, rows in pols.items():
        if not rows:
            continue
        f = np.array([r[0] for r in rows])
        n = np.array([r[1] for r in rows])
        out[name] = {"problems": len(rows), "best_fraction_mean": float(f.mean()),
                     "best_fraction_geomean": float(np.exp(np.log(f).mean())),
                     "best_fraction_p10": float(np.percentile(f, 10)), "best_fraction_min": float(f.min()),
                     "at_least_97pct": float((f >= 0.97 - 1e-12).mean()),
                     "candidates": int(n.sum()), "candidates_mean": float(n.mean())}
    if ks_chosen:
        hist = np.bincount(ks_chosen)
        out["adaptive"]["k_histogram"] = {str(i): int(c) for i, c in enumerate(hist) if c}
        out["adaptive"]["reasons"] = reasons
        out["adaptive"]["settings"] = {"k_min": k_min, "k_max": k_max, "tie": tie}
    return out
