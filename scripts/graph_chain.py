"""CUDA graphs of a chain of kernels, one per variant, replayed interleaved: what the PDL chain
experiments (exp_pdl.py, exp_pdl_skinny.py) time. A graph is what a decode step is replayed as,
and PDL edges are kept inside it."""
from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from typing import Callable

import torch


@dataclass
class MlpChain:
    """The chain experiments' weights: ``layers`` GEMMs on Llama-3.2-1B's MLP shapes, hidden ->
    inter, then inter -> hidden, alternating (``shapes``: (N, K); weights N x K, scaled by
    1/sqrt(K)), drawn from ``g`` (seed 0), which the caller draws its input from next. A dry run
    is CPU-sized (64 -> 256, 2 layers) in ``dry_dtype``. LAYERS, REPLAYS and ROUNDS (env) as in
    the scripts' docstrings."""
    layers: int
    replays: int
    rounds: int
    dev: str
    dt: torch.dtype
    hidden: int
    shapes: list
    weights: list
    g: torch.Generator


def mlp_chain(dry_run: bool, dry_dtype: torch.dtype) -> MlpChain:
    layers = int(os.environ.get("LAYERS", "2" if dry_run else "32"))
    replays, rounds = int(os.environ.get("REPLAYS", "30")), int(os.environ.get("ROUNDS", "7"))
    dev, dt = ("cpu", dry_dtype) if dry_run else ("cuda", torch.bfloat16)
    # INTER: the MLP's width (Llama-3.2-1B's 8192; 16384 is its gate_up fused, a wide layer)
    hidden, inter = (64, 256) if dry_run else (2048, int(os.environ.get("INTER", "8192")))
    g = torch.Generator(device="cpu").manual_seed(0)
    shapes = [(inter, hidden) if i % 2 == 0 else (hidden, inter) for i in range(layers)]  # (N, K)
    weights = [(torch.randn(n, k, generator=g) / k ** 0.5).to(dev, dt) for n, k in shapes]
    return MlpChain(layers, replays, rounds, dev, dt, hidden, shapes, weights, g)


def check_against_plain(res: dict, variants, run: Callable[[str], torch.Tensor], ref: torch.Tensor) -> None:
    """Each variant's chain output ``run(v)`` against ``ref`` (plain's), within 5e-2 (bf16 over
    a chain of GEMMs), recorded as ``res['rel_err_vs_plain']``."""
    for v in variants:
        rel = res.setdefault("rel_err_vs_plain", {})[v] = rel_err(run(v), ref)
        assert rel < 5e-2, (v, rel)


def capture(variants, run: Callable[[str], None], warmup: int = 3) -> dict:
    """One CUDA graph per variant of ``run(variant)``, after ``warmup`` eager runs on a side
    stream (as torch.cuda.graph wants), each replayed once (its outputs are then the graph's)."""
    graphs = {}
    for v in variants:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(warmup):
                run(v)
        torch.cuda.current_stream().wait_stream(s)
        gr = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gr):
            run(v)
        graphs[v] = gr
    for gr in graphs.values():
        gr.replay()
    torch.cuda.synchronize()
    return graphs


def time_interleaved(graphs: dict, rounds: int, replays: int) -> tuple[dict, dict]:
    """(median µs per replay, every round's µs) per variant: ``rounds`` rounds, each timing
    ``replays`` back-to-back replays of every graph in turn (CUDA events)."""
    times = {v: [] for v in graphs}
    for _ in range(rounds):
        for v, gr in graphs.items():
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(replays):
                gr.replay()
            e1.record()
            torch.cuda.synchronize()
            times[v].append(e0.elapsed_time(e1) * 1e3 / replays)
    return {v: statistics.median(t) for v, t in times.items()}, times


NOMINAL_HBM = 4.8e12  # B/s, H200 (the README's floor convention)


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    """max |got - ref| / max |ref|, in fp64."""
    return ((got.double() - ref.double()).abs().max() / ref.double().abs().max()).item()


def measure(res: dict, variants, run: Callable[[str], None], output: Callable[[str], torch.Tensor],
            ref: torch.Tensor, rounds: int, replays: int) -> None:
    """Each variant's chain ``run(v)`` captured (``capture``), its graph's ``output(v)`` checked
    against ``ref`` (within 5e-2: bf16 over a chain of GEMMs), timed interleaved, and printed
    against ``plain`` and ``cublas``. Fills ``res``: graph_rel_err_vs_plain, floor_us (its
    weight_bytes at the nominal HBM bandwidth), us_per_replay, spread, rounds_us."""
    graphs = capture(variants, run)
    for v in variants:  # after a replay: PDL edges inside a graph must keep the order
        rel = res.setdefault("graph_rel_err_vs_plain", {})[v] = rel_err(output(v), ref)
        assert rel < 5e-2, (v, rel)
    med, times = time_interleaved(graphs, rounds, replays)
    floor_us = res["floor_us"] = res["weight_bytes"] / NOMINAL_HBM * 1e6
    res["us_per_replay"] = med
    res["spread"] = max((max(t) - min(t)) / statistics.median(t) for t in times.values())
    res["rounds_us"] = times
    for v in variants:
        us = med[v]
        print(f"{v:13s} {us:9.1f} us/replay  x plain {med['plain'] / us:.3f}  x cublas {med['cublas'] / us:.3f}  "
              f"weights at {floor_us / us:.0%} of the HBM floor", flush=True)
