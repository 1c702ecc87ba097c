"""Replay --fast with one more candidate where the output has few tiles: DecomposeK's split nearest
one program per SM (``decompose_k_spec.default_splits``' target), on a results store, 5-fold
cross-validation by shape (``fast_replay.replay``), CPU only:

    python scripts/exp_fast_dk_wave.py STORE.sqlite.gz rows.json [SMS]

fast: what --fast picks (``topk.fast_parts``, extra by trust); fast+wave<T>: plus that DecomposeK
choice where the one-wave split is at least T (so the output has at most SMS/T tiles) and --fast
picked no DecomposeK choice."""
import json
import math
import sys

from gemmtune.model.topk import fast_extra, fast_parts, wave_split
from fast_replay import print_policies, replay

SMS = int(sys.argv[3]) if len(sys.argv) > 3 else 132


def policies(others, keys, order, trust, problem):
    first, more = fast_parts(others, keys, extra=fast_extra(trust), problem=problem)
    base = first + more
    pol = {"fast": base}
    target = wave_split(problem, SMS)
    dks = [(abs(math.log2(c.config.split / target)), i) for i, c in enumerate(others)
           if c.family == "decompose_k" and not c.pad] if target > 0 else []
    has_dk = any(others[i].family == "decompose_k" for i in base)
    for t in (4, 8, 16, 32):
        add = [] if (not dks or has_dk or target < t) else [min(dks)[1]]
        pol[f"fast+wave{t}"] = base + add
    return pol


rows = replay(sys.argv[1], policies)
json.dump(rows, open(sys.argv[2], "w"))
print_policies([("all", rows)] + [(f"group:{g}", [r for r in rows if r["group"] == g])
                                  for g in sorted({r["group"] for r in rows})], width=12)
