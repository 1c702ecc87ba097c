"""A phase (prefill, one decode step on a KV cache, embedding) and the checks of a mode's output:
greedy decoding against eager's tokens, relative error against fp32."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..capture import cache_kwarg
from .models import PHASES

GREEDY_STEPS = 32

COSINE_MIN = 0.999

@dataclass
class Phase:
    """The callable a phase times, its example inputs (for capture) and a result to check;
    ``state(model)``: what a call reads besides its closure (a decode step's KV cache), which a
    CUDA-graph mode keeps alive with its graph (graphs.capture)."""
    name: str
    run: Callable[[torch.nn.Module], torch.Tensor]
    example: Callable[[torch.nn.Module], None]
    state: Callable[[torch.nn.Module], object] | None = None


def _ids(batch: int, seq: int, vocab: int, device: str, seed: int) -> torch.Tensor:
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randint(0, vocab, (batch, seq), generator=g).to(device)


def causal_phase(name: str, vocab: int, device: str, seed: int = 1) -> Phase:
    kind, batch, seq = PHASES[name]
    ids = _ids(batch, seq, vocab, device, seed)
    if kind == "prefill":
        def run(model):
            return model(input_ids=ids, use_cache=False).logits
        return Phase(name, run, run)

    from transformers import DynamicCache
    step = _ids(batch, 1, vocab, device, seed + 1)
    caches: dict[int, object] = {}
    kwargs: dict[int, str] = {}  # read once per model: a signature lookup is host time in a timed step

    def run(model):
        cache = caches.get(id(model))
        if cache is None:  # the prompt, once per model object
            cache = DynamicCache()
            kwargs[id(model)] = cache_kwarg(model)
            model(input_ids=ids, use_cache=True, **{kwargs[id(model)]: cache})
            caches[id(model)] = cache
        out = model(input_ids=step, use_cache=True, **{kwargs[id(model)]: cache}).logits
        cache.crop(-1)  # drop the new token: every timed step is the same step (negative: works in transformers 4.x and 5.x)
        return out
    return Phase(name, run, run, state=lambda model: caches.get(id(model)))


def greedy(model, prompt: torch.Tensor, steps: int = GREEDY_STEPS) -> tuple[list[int], list[float]]:
    """Greedy tokens after ``prompt`` (batch 1), with the top-1 minus top-2 logit gap of each step."""
    from transformers import DynamicCache
    cache = DynamicCache()
    tokens, gaps = [], []
    x = prompt
    kw = cache_kwarg(model)
    with torch.no_grad():
        for _ in range(steps):
            logits = model(input_ids=x, use_cache=True, **{kw: cache}).logits[0, -1].float()
            top = torch.topk(logits, 2)
            tokens.append(int(top.indices[0]))
            gaps.append(float(top.values[0] - top.values[1]))
            x = top.indices[:1].view(1, 1)
    return tokens, gaps


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    x, ref = x.double(), ref.double()
    return float((x - ref).norm() / ref.norm().clamp_min(1e-30))
