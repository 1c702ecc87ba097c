"""Worker and tuner traces summarised (``GEMMTUNE_WORKER_TRACE=DIR``: one ``worker-<pid>.jsonl`` a
worker process, ``tuner-<pid>.jsonl`` for the tuner; ``gemmtune report --trace DIR``).

Per DIR: the tuner's steps (planning, measuring, waiting for compiles), the benchmark worker's
timeline (its ready time as 0, its prewarm, then each problem in the order it came: when its first
request began, how many requests, their seconds summed by step, and the worker's idle time before
it: waiting on the tuner or on compiles), and each compile worker's ready time and compile seconds.
What it answers: where a tune's seconds go, e.g. why its first shape takes longer than the rest
(session 44 on an H200: the compile workers' start-up, cuBLAS's first use, the lookahead planning).
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from pathlib import Path


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _complete(rec, tuner: bool) -> bool:
    """Whether ``rec`` holds what ``summarise`` reads of it: a start time and an op; on a worker's
    line its seconds too (bench.worker._trace writes them on every line; a ready line's are the
    write's own, and only its start time is read), a problem name and steps of the right types. A
    line without its seconds ended the summary with KeyError 's'."""
    if not isinstance(rec, dict) or not _number(rec.get("t0")) or not isinstance(rec.get("op"), str):
        return False
    if tuner:
        return True
    steps = rec.get("steps")
    return ((rec["op"] == "ready" and "s" not in rec or _number(rec.get("s")))
            and (rec.get("problem") is None or isinstance(rec["problem"], str))
            and (steps is None or isinstance(steps, dict) and all(_number(v) for v in steps.values())))


def _lines(f: Path) -> tuple[list[dict], int]:
    """A trace file's records, and how many lines were skipped: one that does not parse (a worker
    killed while writing its last one, which is what a crash-proof tuner expects of its workers),
    or a record without what the summary reads of it (``_complete``)."""
    out, bad = [], 0
    tuner = f.name.startswith("tuner-")
    for x in f.read_text().splitlines():
        if not x.strip():
            continue
        try:
            rec = json.loads(x)
        except json.JSONDecodeError:
            bad += 1
            continue
        if _complete(rec, tuner):
            out.append(rec)
        else:
            bad += 1
    return out, bad


def load(d: Path) -> tuple[dict[str, list[dict]], dict[str, int]]:
    """Each trace file's records by file name (files with none left out), and per file the number
    of lines skipped (``_lines``; files with none left out)."""
    files = {f.name: _lines(f) for f in sorted(d.glob("*.jsonl"))}
    return ({name: recs for name, (recs, _) in files.items() if recs},
            {name: bad for name, (_, bad) in files.items() if bad})


def summarise(d: Path) -> list[str]:
    workers, skipped = load(d)
    tuners = {n: ls for n, ls in workers.items() if n.startswith("tuner-")}
    for n in tuners:
        workers.pop(n)
    bench = [(n, ls) for n, ls in workers.items() if any(x["op"] in ("bench", "runoff") for x in ls)]
    compilers = [(n, ls) for n, ls in workers.items() if all(x["op"] not in ("bench", "runoff") for x in ls)]
    out = [f"== {d}: {len(bench)} benchmark worker(s), {len(compilers)} other(s)"]
    if skipped:
        # said, not silently dropped: the times below leave those lines out
        out.append(f"   skipped {sum(skipped.values())} line(s) that do not parse or lack a field the summary reads: "
                   + ", ".join(f"{n} {k}" for n, k in skipped.items()))
    for name, ls in bench:
        t_ready = next((x["t0"] for x in ls if x["op"] == "ready"), ls[0]["t0"])
        out.append(f"-- {name} (times from its ready line)")
        for x in ls:
            if x["op"] in ("ready", "info", "prewarm", "warm", "precompile"):
                out.append(f"   {x['op']:10s} at {x['t0'] - t_ready:7.3f} s, "
                           + (f"{x['s']:.3f} s" if "s" in x else "- s"))
        order, per = [], defaultdict(list)
        for x in ls:
            if x["op"] in ("bench", "runoff", "precompile", "compile") and x.get("problem"):
                if x["problem"] not in per:
                    order.append(x["problem"])
                per[x["problem"]].append(x)
        end = None
        for p in order:
            xs = per[p]
            first = xs[0]["t0"] - t_ready
            idle = 0.0
            prev = end
            for x in xs:
                if prev is not None:
                    idle += max(0.0, x["t0"] - prev)
                prev = x["t0"] + x["s"]
            end = prev
            steps = defaultdict(float)
            for x in xs:
                for k, v in (x.get("steps") or {}).items():
                    steps[k] += v
            busy = sum(x["s"] for x in xs)
            slow = max(xs, key=lambda x: x["s"])
            out.append(f"   {p[:48]:48s} from {first:7.3f} s: {len(xs):3d} requests, busy {busy:6.3f} s, idle before/between "
                       f"{idle:6.3f} s; " + ", ".join(f"{k} {v:.3f}" for k, v in steps.items())
                       + f"; slowest {slow['op']} {str(slow.get('choice'))[:40]} {slow['s']:.3f} s")
    ref0 = next((x["t0"] for _, ls in bench for x in ls if x["op"] == "ready"), None)
    for name, ls in tuners.items():
        ref = ref0 if ref0 is not None else ls[0]["t0"]
        out.append(f"-- {name} (times from the benchmark worker's ready line)")
        for x in ls:
            facts = {k: v for k, v in x.items() if k not in ("t0", "op")}
            out.append(f"   {x['op']:18s} at {x['t0'] - ref:7.3f} s {facts if facts else ''}")
    for name, ls in compilers:
        t_ready = next((x["t0"] for x in ls if x["op"] == "ready"), None)
        comp = [x for x in ls if x["op"] == "compile"]
        ref = bench[0][1][0]["t0"] if bench else (t_ready or 0.0)
        out.append(f"-- {name}: ready at {((t_ready or ref) - ref):7.3f} s after the benchmark worker's; "
                   f"{len(comp)} compiles, {sum(x['s'] for x in comp):.3f} s"
                   + (f", the first at {comp[0]['t0'] - ref:.3f} s ({comp[0]['s']:.3f} s)" if comp else ""))
    return out


def check_dir(d: Path) -> None:
    """ValueError naming the problem where ``d`` holds no trace."""
    if not d.is_dir():
        raise ValueError(f"{d}: no such directory (set GEMMTUNE_WORKER_TRACE={d} for a tune, then read it)")
    if not any(d.glob("*.jsonl")):
        raise ValueError(f"{d}: no worker-*.jsonl or tuner-*.jsonl trace files in it")


def main(argv: list[str]) -> int:
    """``python -m gemmtune.report.trace DIR [DIR ...]`` (also scripts/worker_trace.py)."""
    if not argv:
        print(__doc__)
        return 2
    for a in argv:
        try:
            check_dir(Path(a))
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print("\n".join(summarise(Path(a))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
