"""Replay --fast with and without ``topk.with_padded_persistent`` (the best-ranked pad+persistent_tma
choice where an unaligned output fills a wave of 128x128 tiles) on a results store, 5-fold
cross-validation by shape (``fast_replay.replay``), CPU only:

    python scripts/exp_fast_pad_tma.py STORE.sqlite.gz rows.json [SMS]

fast-tma: --fast without the rule; fast: --fast as shipped (the rule included; SMS given)."""
import json
import sys

from gemmtune.model.topk import fast_extra, fast_parts
from fast_replay import print_policies, replay

SMS = int(sys.argv[3]) if len(sys.argv) > 3 else 132


def policies(others, keys, order, trust, problem):
    rules = {}
    first, more = fast_parts(others, keys, extra=fast_extra(trust), problem=problem, sms=SMS, added=rules)
    with_rule = first + more
    without = [i for i in with_rule if i not in set(rules.get("padded_tma", ()))]
    return {"fast": with_rule, "fast-tma": without}


rows = replay(sys.argv[1], policies)
json.dump(rows, open(sys.argv[2], "w"))
print_policies([("all", rows)] + [(f"group:{g}", [r for r in rows if r["group"] == g])
                                  for g in sorted({r["group"] for r in rows})], width=12)
print("rule applies:", sum(1 for r in rows if r["pol"]["fast"][1] != r["pol"]["fast-tma"][1]), "of", len(rows))
