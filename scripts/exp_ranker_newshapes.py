"""Does a collection teach the ranker a new class? CPU only. For the problems of a suite CSV
(the shapes just collected), compare `--fast`'s and the top-1's picks (fraction of the best measured
time, geomean; share at >= 90%) of (a) the shipped model, which never saw them, and (b) models
retrained with them, each problem held out once (fast_replay's 5-fold CV by shape); and the same
CV figures on every other problem of the store, to show what the rest lose or gain.

    python scripts/exp_ranker_newshapes.py STORE SUITE.csv [OLD_MODEL.json]
"""
import csv
import sys

import numpy as np

sys.path.insert(0, "scripts")
from fast_replay import replay  # noqa: E402

from gemmtune.device import DeviceInfo  # noqa: E402
from gemmtune.model import default_model, load_model  # noqa: E402
from gemmtune.model.topk import fast_pick  # noqa: E402


def summary(fr: np.ndarray) -> str:
    if not len(fr):
        return "none"
    return f"{np.exp(np.log(fr).mean()) * 100:6.2f}%  >=90%: {(fr >= 0.9).mean() * 100:5.1f}%  min {fr.min() * 100:5.1f}%"


def pick(others, keys, order, trust, problem) -> dict:
    """The model's top 1, and --fast's picks as session 18 made them (one next choice)."""
    return {"top1": [int(order[0])], "fast": fast_pick(others, keys)}


def main(store: str, suite: str, old: str | None = None) -> None:
    sizes = {(int(r["M"]), int(r["N"]), int(r["K"])) for r in csv.DictReader(open(suite))}
    rows = replay(store, pick)
    new = [r for r in rows if any(f"M{m}-N{n}-K{k}:" in r["key"] for m, n, k in sizes)]  # any dtype
    keys = {r["key"] for r in new}
    rest = [r for r in rows if r["key"] not in keys]
    for name, rs in (("new, retrained (CV)", new), ("others, retrained (CV)", rest)):
        for pol in ("top1", "fast"):
            fr = np.array([r["pol"][pol][0] for r in rs])
            print(f"{name:24s} {pol:5s} ({len(rs)}): {summary(fr)}")
    shipped = (load_model(old, DeviceInfo.lookup("h100"), triton_version="3.6.0", numpy_predict=True) if old
               else default_model("h100", triton_version="3.6.0", numpy_predict=True))
    got = [r for r in replay(store, pick, model=shipped) if r["key"] in keys]
    for pol in ("top1", "fast"):
        print(f"{'new, shipped model':24s} {pol:5s} ({len(got)}): {summary(np.array([r['pol'][pol][0] for r in got]))}")


if __name__ == "__main__":
    main(*sys.argv[1:])
