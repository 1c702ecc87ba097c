"""Host time of one converted layer's call on its F.linear path against torch's nn.Linear, CPU,
through ``Module.__call__`` (issue 17: an un-graphed decode step at batch 1 is bound by it).

    python scripts/diag_linear_host.py [--rounds 31] [--features 64] [--dtype float32] [--device cuda]

On a GPU (``--device cuda``) each timed block ends with a synchronize, so a block is the host's time
wherever the host is the bound (Linear(64)'s kernels take a few microseconds each).

113 layers (Llama-1B's count) of Linear(F, F), called in turn on one [1, 1, F] input (the rank a
transformers model calls them with), interleaved rounds, in one process:
  torch      torch's own nn.Linear
  gemmtune   patched (every decision cuBLAS, convert_aten_layers=True): the memoized F.linear path
  no_check   as gemmtune without the compile check first (what ``_is_compiling()`` costs; not safe
             to ship: the memo is eager state, see Linear.forward)
  floor      a forward that is only F.linear on the weight and bias from _parameters (no memo,
             no check): the least a Python forward can cost
Prints the median microseconds a call and each variant minus torch, paired by round.
Then a Llama of 16 layers (hidden F) decoding at batch 1, plain deep copy against patched; with
``--paired-steps N`` also single steps of each in turn (plain, patched, patched with its layers cut to
F.linear, plain with its layers only re-classed), each minus plain step by step.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time
import warnings

import torch
import torch.nn.functional as F

import gemmtune
from gemmtune import nn as gnn

LAYERS = 113


def _aten(problems, **kw):
    return {p.key: "aten" for p in problems}


class _NoCheck(gnn.Linear):
    def forward(self, x):
        if self._gemmtune_paths.get(x.shape) is gnn._ATEN:
            ps = self._parameters
            return F.linear(x, ps["weight"], ps["bias"])
        return super().forward(x)


class _Floor(gnn.Linear):
    def forward(self, x):
        ps = self._parameters
        return F.linear(x, ps["weight"], ps["bias"])


def _report(res: dict, per: int, unit: str) -> None:
    for k, v in res.items():
        v = [t / per for t in v]
        d = sorted((a - b) / per for a, b in zip(res[k], res["torch" if "torch" in res else "plain"]))
        s = sorted(v)
        print(f"  {k:9s} {statistics.median(v):8.3f} {unit} (quartiles {s[len(s) // 4]:.3f}-{s[3 * len(s) // 4]:.3f}); "
              f"minus the first, paired: {statistics.median(d):+.3f} (quartiles {d[len(d) // 4]:+.3f} to "
              f"{d[3 * len(d) // 4]:+.3f})")


def _sync(dev: str) -> None:
    if dev == "cuda":
        torch.cuda.synchronize()


def layers(f: int, dt: torch.dtype, rounds: int, dev: str = "cpu") -> None:
    torch.manual_seed(0)
    base = torch.nn.Sequential(*[torch.nn.Linear(f, f, dtype=dt, device=dev) for _ in range(LAYERS)])
    pat = copy.deepcopy(base)
    gemmtune.patch(pat, hints={"m": [1]}, progress=False, convert_aten_layers=True, tune_fn=_aten)
    x = torch.randn(1, 1, f, dtype=dt, device=dev)
    variants = {"torch": list(base), "gemmtune": list(pat)}
    for name, cls in (("no_check", _NoCheck), ("floor", _Floor)):
        m = copy.deepcopy(pat)
        for layer in m:
            layer.__class__ = cls
        variants[name] = list(m)
    res: dict[str, list[float]] = {k: [] for k in variants}
    with torch.no_grad():
        for ls in variants.values():
            for layer in ls:
                layer(x)
        assert all(layer._gemmtune_paths[x.shape] == "aten" for layer in pat)
        for _ in range(rounds):
            for k, ls in variants.items():
                _sync(dev)
                t = time.perf_counter_ns()
                for _ in range(100):
                    for layer in ls:
                        layer(x)
                _sync(dev)
                res[k].append((time.perf_counter_ns() - t) / 1e3)
    print(f"{LAYERS} Linear({f}, {f}) {dt} on {dev}, input [1, 1, {f}], {rounds} rounds of 100 passes:")
    _report(res, 100 * LAYERS, "us a call")


def plain_and_patched(f: int, dt: torch.dtype, dev: str):
    """A 16-layer Llama of hidden ``f`` (random weights), its decode-b1 phase, and two deep copies:
    {"plain": torch's, "patched": every layer converted, every decision cuBLAS}."""
    import transformers as tf

    from gemmtune.benchmodel.phases import causal_phase
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=512, hidden_size=f, intermediate_size=2 * f, num_hidden_layers=16,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=f // 4, tie_word_embeddings=True)
    model = tf.AutoModelForCausalLM.from_config(cfg, dtype=dt).to(dev).eval()
    ph = causal_phase("decode_b1", 512, dev)
    fns = {"plain": copy.deepcopy(model), "patched": copy.deepcopy(model)}
    gemmtune.patch(fns["patched"], hints={"m": [1]}, progress=False, convert_aten_layers=True, tune_fn=_aten)
    return ph, fns


def llama(f: int, dt: torch.dtype, rounds: int, dev: str = "cpu", paired: int = 0) -> None:
    ph, fns = plain_and_patched(f, dt, dev)
    n = sum(1 for m in fns["patched"].modules() if isinstance(m, gnn.Linear))
    res: dict[str, list[float]] = {k: [] for k in fns}
    with torch.no_grad():
        for m in fns.values():
            for _ in range(3):
                ph.run(m)
        for _ in range(rounds):
            for k, m in fns.items():
                _sync(dev)
                t = time.perf_counter_ns()
                for _ in range(50):
                    ph.run(m)
                _sync(dev)
                res[k].append((time.perf_counter_ns() - t) / 1e3)
    print(f"Llama, 16 layers, hidden {f}, {dt} on {dev}, decode b1 ({n} converted layers), {rounds} rounds of 50 steps:")
    _report(res, 50, "us a step")
    if paired:
        # Where a patched step's extra time is: the patched model with every converted layer's
        # forward cut to F.linear alone (_Floor), and a plain model whose layers only changed class.
        floor, sub = copy.deepcopy(fns["patched"]), copy.deepcopy(fns["plain"])
        for m in floor.modules():
            if isinstance(m, gnn.Linear):
                m.__class__ = _Floor
        for m in sub.modules():
            if type(m) is torch.nn.Linear:
                m.__class__ = _Sub
        with torch.no_grad():
            for m in (floor, sub):
                ph.run(m)
        _paired_steps({**fns, "patched_floor": floor, "plain_subclass": sub}, ph, paired, dev)


def _paired_steps(fns: dict, ph, steps: int, dev: str) -> None:
    """One step of each model in turn, the order rotating, ``steps`` times: a host-bound step drifts
    by +-10% between rounds of 50 (session 58), but neighbouring steps share the drift, so each
    model's difference from the first, step by step, resolves a 1% gap that rounds cannot."""
    import random

    names = list(fns)
    times: dict[str, list[float]] = {k: [] for k in names}
    with torch.no_grad():
        for i in range(steps):
            r = i % len(names)
            for k in names[r:] + names[:r]:
                _sync(dev)
                t0 = time.perf_counter_ns()
                ph.run(fns[k])
                _sync(dev)
                times[k].append((time.perf_counter_ns() - t0) / 1e3)
    base = names[0]
    rng = random.Random(0)
    print(f"paired single steps ({steps} of each, order rotating), minus {base} ({statistics.median(times[base]):.1f} us):")
    for k in names[1:]:
        diffs = [a - b for a, b in zip(times[k], times[base])]
        # A bootstrap of the median paired difference: its 2.5-97.5% range.
        boots = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(400))
        print(f"  {k:14s} {statistics.median(times[k]):10.1f} us a step; minus {base}: median "
              f"{statistics.median(diffs):+8.1f} us (95% bootstrap {boots[10]:+.1f} to {boots[389]:+.1f})")


class _Sub(torch.nn.Linear):
    """nn.Linear's own forward under another class (what a class swap alone costs)."""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--no-model", action="store_true")
    ap.add_argument("--no-layers", action="store_true")
    ap.add_argument("--paired-steps", type=int, default=0, help="then this many single steps of each model in turn "
                    "(order alternating), for the paired per-step difference")
    ap.add_argument("--threads", type=int, default=1, help="torch's intra-op threads (1: the host's own time, "
                    "not a shared machine's thread contention)")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    dt = getattr(torch, a.dtype)
    torch.set_num_threads(a.threads)
    if not a.no_layers:
        layers(a.features, dt, a.rounds, a.device)
    if not a.no_model:
        llama(a.features, dt, a.rounds, a.device, a.paired_steps)


if __name__ == "__main__":
    main()
