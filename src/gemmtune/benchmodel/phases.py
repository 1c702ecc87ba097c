"""A phase (prefill, one decode step on a KV cache, embedding) and the checks of a mode's output:
greedy decoding against eager's tokens, relative error against fp32."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..capture import cache_kwarg, new_cache, unwrapped
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

    from ..eager_gate import decode_step
    step = _ids(batch, 1, vocab, device, seed + 1)
    steps: dict[int, Callable[[], torch.Tensor]] = {}

    def run(model):
        fn = steps.get(id(model))
        if fn is None:  # the prompt, once per model object
            fn = steps[id(model)] = decode_step(model, ids, step)
        return fn()
    return Phase(name, run, run, state=lambda model: getattr(steps.get(id(model)), "cache", None))


def static_cache(model, max_len: int):
    """A transformers ``StaticCache`` of ``max_len`` positions for ``model`` (batch 1), or None
    where the model or the installed transformers has none: its tensors keep one shape for every
    step, so a ``torch.compile(dynamic=False)`` model compiles the step once."""
    import inspect
    try:
        from transformers import StaticCache
    except ImportError:
        return None
    base = unwrapped(model)
    config = getattr(base, "config", None)
    if config is None:
        return None
    params = inspect.signature(StaticCache.__init__).parameters
    try:
        if "max_batch_size" in params or "batch_size" in params:  # transformers 4.x: sized and placed up front
            w = next(base.parameters())
            return StaticCache(config=config, max_batch_size=1, max_cache_len=max_len, device=w.device, dtype=w.dtype)
        return StaticCache(config=config, max_cache_len=max_len)  # 5.x: placed on its first update
    except (TypeError, ValueError, AttributeError, NotImplementedError):
        return None


def greedy(model, prompt: torch.Tensor, steps: int = GREEDY_STEPS,
           cache: str = "static") -> tuple[list[int], list[float]]:
    """Greedy tokens after ``prompt`` (batch 1), with the top-1 minus top-2 logit gap of each step.

    ``cache="static"`` decodes on a StaticCache (falling back to a DynamicCache built from the
    model's config, capture.new_cache, where the model has none; ``greedy_cache_kind`` says which
    one a model gets). On a DynamicCache the KV length grows
    every step, so a ``dynamic=False`` compile recompiles per step and, past Dynamo's recompile
    limit (8), runs the rest of the steps eagerly: only the first 8 tokens were the compiled
    graph's (measured on the CPU, 2026-11-29). On a StaticCache every step is the same compiled
    graph. The prompt runs uncompiled (a decode phase's does too): the first token is eager's, and
    the other ``steps - 1`` are the compiled step's.
    """
    kv = static_cache(model, prompt.shape[1] + steps) if cache == "static" else None
    pos = torch.arange(prompt.shape[1], device=prompt.device) if kv is not None else None
    kv = kv if kv is not None else new_cache(model)
    tokens, gaps = [], []
    x = prompt
    kw = cache_kwarg(model)
    with torch.no_grad():
        for i in range(steps):
            extra = {"cache_position": pos} if pos is not None else {}
            # The prompt through the model a torch.compile wrapper holds, as a decode phase's
            # (causal_phase): the steps are what a decode mode compiles and times.
            fn = unwrapped(model) if i == 0 else model
            logits = fn(input_ids=x, use_cache=True, **{kw: kv}, **extra).logits[0, -1].float()
            top = torch.topk(logits, 2)
            tokens.append(int(top.indices[0]))
            gaps.append(float(top.values[0] - top.values[1]))
            x = top.indices[:1].view(1, 1)
            if pos is not None:
                pos = pos[-1:] + 1
    return tokens, gaps


def greedy_cache_kind(model, prompt: torch.Tensor, steps: int = GREEDY_STEPS) -> str:
    """"static" where ``greedy(model, ...)`` decodes on a StaticCache, else "dynamic"."""
    return "static" if static_cache(model, prompt.shape[1] + steps) is not None else "dynamic"


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    x, ref = x.double(), ref.double()
    return float((x - ref).norm() / ref.norm().clamp_min(1e-30))


def token_median_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    """The median over tokens (rows of the last dim) of each token's relative error: what a few
    tokens that went another way (a mixture of experts' router at a near tie) do not move.

    >>> ref = torch.ones(4, 3)
    >>> x = ref.clone(); x[0] = -5.0   # one token far off, three exact
    >>> round(rel_err(x, ref), 3), token_median_err(x, ref)
    (3.0, 0.0)
    """
    x, ref = x.double().flatten(0, -2), ref.double().flatten(0, -2)
    per = (x - ref).norm(dim=-1) / ref.norm(dim=-1).clamp_min(1e-30)
    return float(per.median())
