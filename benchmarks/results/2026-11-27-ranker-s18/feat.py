import numpy as np, math
from gemmtune.model import features as F, training as T, learned as L
from gemmtune.model.choices import batch, ATEN
from gemmtune.model.analytic import AnalyticModel

_orig = F.featurize
def make(extra):
    def featurize(problem, choices, device, *, analytic=None, choice_batch=None):
        b = choice_batch if choice_batch is not None else batch(problem, choices)
        am = analytic if analytic is not None else AnalyticModel(device)
        X = _orig(problem, choices, device, analytic=am, choice_batch=b)
        names = F_NAMES0
        col = {n: X[:, i] for i, n in enumerate(names)}
        parts = am.breakdown(problem, b)
        es = 4.0 if problem.dtype == "float32" else 2.0
        fp32 = problem.dtype == "float32"
        if fp32 and not problem.allow_tf32:
            peak = am.peak32
        else:
            peak = am.peak16 * (0.5 if fp32 else 1.0)
        floor = max(problem.flops / peak, problem.min_bytes / am.mem_bw)
        lf = math.log2(floor * 1e6)
        aten_us = float(am.predict_ms(problem, ["aten"])[0]) * 1e3
        la = math.log2(aten_us)
        out = []
        for e in extra:
            if e == "rel_floor":
                out.append(col["log2_analytic_us"] - lf)
            elif e == "rel_sm":
                out.append(col["log2_analytic_sm_us"] - lf)
            elif e == "rel_dram":
                out.append(col["log2_analytic_dram_us"] - lf)
            elif e == "rel_extra":
                out.append(col["log2_analytic_extra_us"] - lf)
            elif e == "rel_aten":
                out.append(col["log2_analytic_us"] - la)
            elif e == "floor_compute":  # problem: compute-bound share
                out.append(np.full(len(b), math.log2(problem.flops / peak) - math.log2(problem.min_bytes / am.mem_bw)))
            elif e == "last_wave":
                w = parts["waves"]; fr = w - np.floor(w)
                out.append(np.where(fr == 0, 1.0, fr))
            elif e == "log2_waves":
                out.append(np.log2(np.maximum(parts["waves"], 1e-3)))
            elif e == "tile_m_frac":  # share of M the tile covers (log)
                out.append(np.log2(np.maximum(b.block_m, 1)) - math.log2(max(problem.m, 1)))
            elif e == "tile_n_frac":
                out.append(np.log2(np.maximum(b.block_n, 1)) - math.log2(max(problem.n, 1)))
            elif e == "tile_k_frac":
                out.append(np.log2(np.maximum(b.block_k * np.maximum(b.split, 1), 1)) - math.log2(max(problem.k, 1)))
            elif e == "progs_per_sm":
                out.append(np.log2(np.maximum(parts["programs"], 1) / am.sm_count))
            else:
                raise ValueError(e)
        if not out:
            return X
        return np.concatenate([X, np.stack(out, 1)], 1)
    return featurize

F_NAMES0 = F.FEATURE_NAMES
def install(extra):
    names = F_NAMES0 + tuple(extra)
    f = make(extra)
    for mod in (T, L):
        if hasattr(mod, "featurize"): mod.featurize = f
        if hasattr(mod, "FEATURE_NAMES"): mod.FEATURE_NAMES = names
