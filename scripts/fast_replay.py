"""The replay harness of the --fast selection experiments (exp_fast_variants.py,
exp_fast_decode_family.py), CPU only: every problem of a results store held out once (5-fold
cross-validation by shape, the folds and model of ``gemmtune train --policies``), each policy's
picks scored against the problem's best measured choice.

``replay(store, policies)``: ``policies(others, keys, order, trust, problem)`` returns
{name: indices into ``others``} (the candidates besides cuBLAS, ``keys`` the model's ranking keys,
``order`` their argsort); each pick list gets its twins (``topk.twin_indices``) and is scored as
(best time / the best of cuBLAS and the picks, candidates timed with cuBLAS). Returns one row per
problem: key, shape, group, trust, m and ``pol`` = {name: (fraction, candidates)}.
``policy_line`` / ``print_policies``: the experiments' one-line summary of a policy over rows.

``model``: a fixed model that ranks every problem instead (nothing is fitted or held out: the
analytic model, or a shipped ranker scored on problems it never saw); its trust is None when it
states none."""
import time

import numpy as np

from gemmtune.model import cv as cvmod
from gemmtune.model.data import load_dataset
from gemmtune.model.topk import model_trust, rank_keys, twin_indices


def replay(store: str, policies, model=None) -> list[dict]:
    data = load_dataset(store)
    groups = cvmod.shape_groups()
    dev = cvmod._device_for(data, "h100")
    fixed = model
    rows, t0 = [], time.time()
    for i, fold in enumerate(cvmod.folds_by_group(data.shapes, groups, 5, 0)):
        model = fixed or cvmod.fit(data.subset(data.shapes - fold), kind="lgbm_rank", seed=0, device=dev)[0]
        for g in data.subset(fold).ranked(cvmod.MIN_RANKED_CHOICES).groups:
            base = np.array([c.family == "aten" and not c.pad for c in g.choices])
            rest = np.flatnonzero(~base)
            if not len(rest):
                continue
            others = [g.choices[j] for j in rest]
            keys = rank_keys(model, g.problem, others)
            trust = model_trust(model, g.problem)
            best = g.times_ms.min()
            floor = g.times_ms[base].min() if base.any() else np.inf

            def frac(idx):
                idx = rest[np.asarray(idx, dtype=int)] if len(idx) else np.array([], dtype=int)
                return float(best / min(floor, g.times_ms[idx].min() if len(idx) else np.inf)), int(base.sum()) + len(idx)
            order = np.argsort(np.where(np.isfinite(keys), keys, np.inf), kind="stable")
            picks = policies(others, keys, order, trust, g.problem)
            rows.append({"key": g.problem.key, "shape": g.shape, "group": groups.get(g.shape, "?"), "trust": trust,
                         "m": g.problem.m, "pol": {name: frac(twin_indices(others, p)) for name, p in picks.items()}})
        print("fold", i, round(time.time() - t0), flush=True)
    return rows


def policy_line(rows: list[dict], name: str, share: str = ">=97") -> str:
    """One policy over ``rows``: geomean fraction of the best, the worst, the share at or above 97%,
    and the mean candidates timed."""
    f = np.array([r["pol"][name][0] for r in rows])
    n = np.array([r["pol"][name][1] for r in rows])
    return (f"{np.exp(np.log(f).mean()) * 100:6.2f}% min {f.min() * 100:5.1f} {share} {(f >= 0.97).mean() * 100:5.1f}% "
            f"cand {n.mean():.2f}")


def print_policies(subsets, width: int = 10, share: str = ">=97") -> None:
    """For each non-empty (title, rows) of ``subsets``, a header and one ``policy_line`` per policy."""
    for title, rows in subsets:
        if not rows:
            continue
        print(f"== {title} ({len(rows)})")
        for name in rows[0]["pol"]:
            print(f"  {name:{width}s} {policy_line(rows, name, share)}")
