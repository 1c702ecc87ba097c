"""Make tests/data/model_sample.csv.gz: a SYNTHETIC training set for the learned model's tests.

    python tests/data/make_model_sample.py            # rewrites tests/data/model_sample.csv.gz

Nothing here was measured. The times come from ``toy_gpu_ms`` below, a documented
ground-truth function that is deliberately NOT the analytic model: other rates and
latencies, a different occupancy rule, and quirks the analytic model does not know
(BLOCK_K=16 and 2-warp big tiles are slow, GROUP_M=1 re-reads operands, 5 stages
of a large tile thrash), plus 4% log-normal noise. It lets the tests check that
training, the split by shape and the ranking metrics work end to end and that the
model learns something, not that it is accurate on a real GPU.

The file has the columns of ``ResultStore.export`` (so ``gemmtune train --store``
reads it like any store export); its device is named "NVIDIA H100 80GB HBM3
(synthetic)" so that no real H100 ever trusts a model trained on it. Public-suite
shapes are never generated.
"""

from __future__ import annotations

import gzip
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))

from gemmtune.device import DeviceInfo  # noqa: E402
from gemmtune.model.features import ATEN, DECOMPOSE_K, SPLITK, batch  # noqa: E402
from gemmtune.model.learned import public_shapes  # noqa: E402
from gemmtune.problem import Problem, element_size  # noqa: E402
from gemmtune.store import ResultRow, ResultStore, RunContext  # noqa: E402
from gemmtune.tune import candidates  # noqa: E402

OUT = HERE / "model_sample.csv.gz"
DEVICE_NAME = "NVIDIA H100 80GB HBM3 (synthetic)"
CONTEXT = RunContext(DEVICE_NAME, "9.0", "synthetic", "3.9.0", "0.1.0")
N_SHAPES = 90
CHOICES_PER_SHAPE = 45
SEED = 20261122


def toy_gpu_ms(problem: Problem, choices, rng: np.random.Generator) -> np.ndarray:
    """The synthetic ground truth: device ms of each choice on a made-up H100-like GPU."""
    b = batch(problem, choices)
    f = np.float64
    es = element_size(problem.dtype)
    M, N, K = b.m.astype(f), b.n.astype(f), b.k.astype(f)
    bm, bn, bk = (np.maximum(x, 16).astype(f) for x in (b.block_m, b.block_n, b.block_k))
    stages, warps, split = np.maximum(b.stages, 1), np.maximum(b.warps, 1), np.maximum(b.split, 1).astype(f)
    tiles = np.ceil(M / bm) * np.ceil(N / bn)
    programs = tiles * split
    smem = stages * (bm + bn) * bk * es
    occ = np.clip(np.floor(200e3 / smem), 1, 4)
    waves = np.ceil(programs / (132 * occ))
    steps = np.ceil(np.maximum(b.k_len, 1) / bk)
    math_s = 2 * bm * bn * bk / (5.0e12 * np.where(bm >= 64, 0.75, 0.4))
    feed_s = (bm + bn) * bk * es / 80e9
    lat_s = 0.7e-6 / np.maximum(1, stages - 1)
    step_s = np.maximum(np.maximum(math_s, feed_s) * occ, lat_s)
    t = 4e-6 + waves * steps * step_s
    splitk = (b.fam == SPLITK) & (split > 1)
    t += np.where(splitk & (b.det == 1), split * 0.1e-6, 0.0)
    t += np.where(splitk & (b.det == 0), programs * bm * bn * 4 / 1.5e12, 0.0)
    t += np.where(b.fam == DECOMPOSE_K, 4e-6 + split * M * N * 4 / 3e12, 0.0)
    quirk = np.ones(len(b))
    quirk *= np.where(bk == 16, 1.4, 1.0)
    quirk *= np.where((warps == 2) & (bm * bn >= 64 * 64), 1.5, 1.0)
    quirk *= np.where((b.group_m == 1) & (tiles > 132), 1.15, 1.0)
    quirk *= np.where((stages == 5) & (smem > 150e3), 1.3, 1.0)
    t *= quirk
    unaligned = (b.aligned_a == 0) | (b.aligned_b == 0)
    t *= np.where(unaligned & (b.fam != ATEN), 3.0, 1.0)
    flops = 2 * M * N * K
    aten = 4e-6 + np.maximum(flops / 700e12, (M * K + K * N + M * N) * es / 2.9e12)
    t = np.where(b.fam == ATEN, aten * np.where(unaligned, 5.0, 1.0), t)
    t += np.where(b.pad == 1, 8e-6 + 2 * (M * K + K * N) * es / 1.5e12, 0.0)
    noise = np.exp(rng.normal(0.0, 0.04, len(b)))
    return t * noise * 1e3


def shapes(rng: np.random.Generator) -> list[Problem]:
    public = public_shapes()
    out, seen = [], set()
    while len(out) < N_SHAPES:
        m = int(round(math.exp(rng.uniform(0, math.log(8192)))))
        n = int(round(math.exp(rng.uniform(math.log(64), math.log(16384)))))
        k = int(round(math.exp(rng.uniform(math.log(128), math.log(32768)))))
        if rng.random() < 0.7:  # mostly aligned sizes, as models have
            n, k = max(16, n // 16 * 16), max(128, k // 16 * 16)
        dtype = "bf16" if rng.random() < 0.6 else "fp16"
        if (m, n, k) in public or (m, n, k) in seen:
            continue
        seen.add((m, n, k))
        out.append(Problem.from_sizes(m, n, k, dtype))
    return out


def main() -> None:
    rng = np.random.default_rng(SEED)
    dev = DeviceInfo.lookup("h100")
    rows = []
    for p in shapes(rng):
        cands = candidates(p, ["triton_mm", "splitk", "decompose_k", "aten"], "exhaustive", dev)
        keep = [cands[0]] + [cands[i] for i in sorted(rng.choice(np.arange(1, len(cands)),
                                                                 size=min(CHOICES_PER_SHAPE, len(cands) - 1),
                                                                 replace=False))]
        times = toy_gpu_ms(p, keep, rng)
        for c, ms in zip(keep, times):
            rows.append(ResultRow(problem_key=p.key, choice_id=c.id, family=c.family, status="ok",
                                  device_ms=float(ms), eager_ms=None, rel_err=0.0,
                                  reason="synthetic: toy_gpu_ms in tests/data/make_model_sample.py",
                                  m=p.m, n=p.n, k=p.k, dtype=p.dtype, out_dtype=p.out_dtype,
                                  layout=f"{p.layout_a}/{p.layout_b}", aligned=p.aligned_a and p.aligned_b,
                                  params_json="{}", repeats=1, spread=0.0, created_at=1.0))
    with tempfile.TemporaryDirectory() as d:
        with ResultStore(Path(d) / "s.sqlite") as st:
            st.record_many(CONTEXT, rows)
            st.export(Path(d) / "s.csv")
        data = (Path(d) / "s.csv").read_bytes()
    with open(OUT, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as gz:
        gz.write(data)
    print(f"{OUT}: {len(rows)} rows, {N_SHAPES} shapes, {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main()
