"""Held-out problems per trust band of LearnedModel.trust, per variant: the domain guard that each
fold's training domain (data.domain_of) gives. Needs /tmp/pooled/{h100,h200}.pkl, which pooled.py
writes. No training: the model only carries the domain.

    PYTHONPATH=src python benchmarks/results/2026-11-26-pooled-ranker/trust.py
"""
import pickle

from gemmtune.device import DeviceInfo
from gemmtune.model import cv as cvmod
from gemmtune.model.data import Dataset, domain_of
from gemmtune.model.learned import LearnedModel


class _Scores:
    outputs = "score"


def load(gpu: str) -> Dataset:
    with open(f"/tmp/pooled/{gpu}.pkl", "rb") as f:
        return pickle.load(f)


for gpu, oth in (("h100", "h200"), ("h200", "h100")):
    target, other = load(gpu), load(oth)
    dev = DeviceInfo.lookup(target.context["device_name"])
    folds = cvmod.folds_by_group(target.shapes, cvmod.shape_groups(), 5, 0)
    for v in ("base", "b", "a"):
        below = zero = n = 0
        for fold in folds:
            tr = target.subset(target.shapes - fold)
            extra = [] if v == "base" else [g for g in other.groups if v == "a" or g.shape not in fold]
            m = LearnedModel(dev, "lgbm_rank", _Scores(), {"domain": domain_of(Dataset(tr.groups + extra))})
            for g in target.subset(fold).ranked().groups:
                w, _ = m.trust(g.problem)
                n += 1
                below += w < 1
                zero += w <= 0
        print(f"{gpu} {v}: scored {n}, trust < 1: {below}, trust 0: {zero}")
