"""A/B of two tuning stores made on one GPU in one device call (scripts/sessions/gpu_s9_call3.sh): per
problem, the best split-K and skinny times and cuBLAS's (aten), each store's families against its
own cuBLAS row, so the two runs compare as ratios, not as absolute times.

    python3 scripts/splitk_ab.py NEW.sqlite OLD.sqlite [--json OUT.json]
"""
import argparse
import json
import math

from gemmtune.store import ResultStore


def best_by_family(path):
    store = ResultStore(path)
    out = {}
    for _, r in store.rows(status="ok"):
        fam = r.family.removeprefix("pad+")
        cur = out.setdefault(r.problem_key, {})
        if r.device_ms is not None and (fam not in cur or r.device_ms < cur[fam][0]):
            cur[fam] = (r.device_ms, r.choice_id)
    store.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("new")
    ap.add_argument("old")
    ap.add_argument("--json")
    args = ap.parse_args()
    new, old = best_by_family(args.new), best_by_family(args.old)
    rows, logs = [], []
    print(f"{'problem':44} {'fam':7} {'new us':>8} {'x cuBLAS':>8} {'old us':>8} {'x cuBLAS':>8}  new/old (vs own cuBLAS)")
    for key in sorted(new):
        for fam in ("splitk", "skinny"):
            if fam not in new[key] or key not in old or fam not in old[key]:
                continue
            n_ms, n_id = new[key][fam]
            o_ms, o_id = old[key][fam]
            n_x = new[key]["aten"][0] / n_ms
            o_x = old[key]["aten"][0] / o_ms
            rows.append({"problem": key, "family": fam, "new_ms": n_ms, "new_choice": n_id, "new_x_cublas": n_x,
                         "old_ms": o_ms, "old_choice": o_id, "old_x_cublas": o_x})
            logs.append(math.log(n_x / o_x))
            print(f"{key[:44]:44} {fam:7} {n_ms * 1e3:8.2f} {n_x:8.3f} {o_ms * 1e3:8.2f} {o_x:8.3f}  {n_x / o_x:.3f}")
    if logs:
        print(f"geomean new/old (each against its own run's cuBLAS): {math.exp(sum(logs) / len(logs)):.3f} over {len(logs)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
