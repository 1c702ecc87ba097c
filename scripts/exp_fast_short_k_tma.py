"""Replay --fast with and without ``topk.with_short_k_persistent`` (up to two copy-free flattened
persistent_tma picks on an aligned problem with K <= 256 whose output fills a wave of 128x128
tiles) on a results store, CPU only:

    python scripts/exp_fast_short_k_tma.py STORE rows.json [--shipped h200] [SMS]

fast: --fast as shipped (the rule included); fast-noshort: without the rule's picks. With
``--shipped GPU`` every problem is ranked by the ranker shipped for that GPU and triton 3.6 (a
store of shapes it never saw: nothing is fitted); without, 5-fold cross-validation by shape
(``fast_replay.replay``). The rule only adds candidates, so no score can fall: what it costs is
the candidates, what it buys is the score on the problems it fires on.

Findings (session 49, 2026-11-30, CPU): below, in benchmarks/results/2026-11-30-h200-s49/README.md."""
import json
import sys

from gemmtune.device import DeviceInfo
from gemmtune.model import default_model
from gemmtune.model.topk import fast_extra, fast_parts
from fast_replay import print_policies, replay

args = sys.argv[1:]
shipped = None
if "--shipped" in args:
    i = args.index("--shipped")
    shipped = args[i + 1]
    del args[i:i + 2]
SMS = int(args[2]) if len(args) > 2 else 132
model = default_model(DeviceInfo.lookup(shipped), triton_version="3.6.0") if shipped else None
preferred_cache: dict = {}


def policies(others, keys, order, trust, problem):
    rules = {}
    # tma_preferred: the default space's ids (plan.select_fast's); the store holds what was measured
    first, more = fast_parts(others, keys, extra=fast_extra(trust), problem=problem, sms=SMS, added=rules,
                             tma_preferred=preferred_cache.setdefault(problem.key, _default_ids(problem)))
    with_rule = first + more
    without = [i for i in with_rule if i not in set(rules.get("short_k_tma", ()))]
    return {"fast": with_rule, "fast-noshort": without}


def _default_ids(problem):
    from gemmtune.tuning.plan import family_space
    dev = DeviceInfo.lookup(shipped or "h100")
    if problem.aligned_a and problem.aligned_b:
        return {c.id for c in family_space(problem, "persistent_tma", "default", dev)}
    return {c.padded().id for c in family_space(problem.padded(), "persistent_tma", "default", dev)}


rows = replay(args[0], policies, model=model)
json.dump(rows, open(args[1], "w"))
fired = [r for r in rows if r["pol"]["fast"][1] != r["pol"]["fast-noshort"][1]]
print_policies([("all", rows), ("rule fires", fired)], width=12)
print("rule fires on", len(fired), "of", len(rows))
for r in fired:
    print(f"  {r['key']}: {r['pol']['fast-noshort'][0] * 100:.1f}% -> {r['pol']['fast'][0] * 100:.1f}%")
