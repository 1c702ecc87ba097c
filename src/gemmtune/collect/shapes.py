"""The collection's shape plan: at least 400 shapes, the same every run (seeded), none of them a
shape of the public benchmark suite (that suite is for evaluation only)."""

from __future__ import annotations

import math

import numpy as np

from ..problem import Problem

SEED = 1729
# (hidden, intermediate, query heads, kv heads, head dim, vocabulary): model cards.
MODELS = {
    "llama3.2-1b": (2048, 8192, 32, 8, 64, 128256),
    "llama3.2-3b": (3072, 8192, 24, 8, 128, 128256),
    "llama3-8b": (4096, 14336, 32, 8, 128, 128256),
    "mistral-7b": (4096, 14336, 32, 8, 128, 32000),
    "llama2-13b": (5120, 13824, 40, 40, 128, 32000),
    "llama3-70b": (8192, 28672, 64, 8, 128, 128256),
    "qwen2.5-7b": (3584, 18944, 28, 4, 128, 152064),
    "qwen2.5-14b": (5120, 13824, 40, 8, 128, 152064),
    "qwen2.5-32b": (5120, 27648, 40, 8, 128, 152064),
    "phi3-mini": (3072, 8192, 32, 32, 96, 32064),
    "gemma2-9b": (3584, 14336, 16, 8, 256, 256000),
    "gpt2-xl": (1600, 6400, 25, 25, 64, 50257),
}
DECODE_M = (1, 2, 3, 4, 8, 12, 16, 24, 32, 48, 64)
PREFILL_M = (128, 256, 512, 1024, 2048, 4096, 8192)
MAX_FLOPS = 2e12  # keeps the slowest candidates of one shape well under a second each


def _layers(model: str) -> list[tuple[str, int, int]]:
    h, ffn, nq, nkv, hd, vocab = MODELS[model]
    return [("qkv", (nq + 2 * nkv) * hd, h), ("o", h, nq * hd), ("gateup", 2 * ffn, h),
            ("down", h, ffn), ("lmhead", vocab, h)]


def shape_plan() -> list[tuple[str, str, int, int, int, str]]:
    """(group, name, M, N, K, layout_b) of every shape, deterministic, public suite excluded."""
    from ..model.learned import public_shapes

    rng = np.random.default_rng(SEED)
    public = public_shapes()
    out: list[tuple[str, str, int, int, int, str]] = []
    seen: set[tuple[int, int, int]] = set()

    def add(group, name, m, n, k, layout_b="row"):
        if (m, n, k) in public or (m, n, k) in seen or min(m, n, k) < 1 or 2.0 * m * n * k > MAX_FLOPS:
            return
        seen.add((m, n, k))
        out.append((group, name, int(m), int(n), int(k), layout_b))

    layer_dims = []
    for model in MODELS:
        for layer, n, k in _layers(model):
            layer_dims.append((n, k))
            ms = [int(rng.choice(DECODE_M)), int(rng.choice(PREFILL_M)), int(rng.choice(DECODE_M + PREFILL_M))]
            if layer == "lmhead":
                ms = ms[:2]
            for m in ms:
                add("llm", f"{model}_{layer}_m{m}", m, n, k, "col" if rng.random() < 0.5 else "row")
    for _ in range(80):
        n, k = layer_dims[int(rng.integers(len(layer_dims)))]
        m = int(rng.integers(1, 65))
        add("decode", f"decode_m{m}_{n}x{k}", m, n, k, "col" if rng.random() < 0.5 else "row")
    for _ in range(70):
        m = int(round(math.exp(rng.uniform(math.log(16), math.log(512)))))
        n = int(round(math.exp(rng.uniform(math.log(16), math.log(512)))))
        k = int(round(math.exp(rng.uniform(math.log(4096), math.log(131072))) / 64)) * 64
        add("splitk", f"splitk_{m}x{n}x{k}", m, n, k)
    for _ in range(60):
        m, n, k = (int(rng.integers(50, 2500)) * 2 + 1 for _ in range(3))
        add("odd", f"odd_{m}x{n}x{k}", m, n, k)
    for s in (64, 128, 256, 384, 512, 768, 1536, 2048, 2560, 3072, 6144, 10240, 1023, 1025, 2047, 3000, 5000):
        add("square", f"cube_{s}", s, s, s)
    while len(out) < 420:
        m = int(round(math.exp(rng.uniform(0, math.log(16384)))))
        n = int(round(math.exp(rng.uniform(math.log(16), math.log(32768)))))
        k = int(round(math.exp(rng.uniform(math.log(16), math.log(65536)))))
        if rng.random() < 0.75:  # most real sizes are multiples of 16
            n, k = max(16, n // 16 * 16), max(16, k // 16 * 16)
        add("random", f"rand_{m}x{n}x{k}", m, n, k)
    return out


def csv_plan(path) -> tuple[list[tuple[str, str, int, int, int, str]], list[str]]:
    """(shapes, names left out) of a suite CSV (``gemmtune collect --shapes``), in the plan's form
    (group, name, M, N, K, layout_b). Each ``--dtypes`` phase collects every row: the CSV's dtype
    column is not used. Rows of the public suite are left out (it is for evaluation only), and so
    are later rows repeating a shape; ``bmm`` and ``scaled_mm`` rows and column-major A, which the
    collection's phases do not build, are a ValueError naming the row."""
    from ..model.learned import public_shapes
    from ..shapes import load_csv

    public = public_shapes()
    out, left, seen = [], [], set()
    for sh in load_csv(path):
        p = sh.problem
        if p.op != "mm" or p.layout_a != "row":
            raise ValueError(f"{path}: {sh.name}: gemmtune collect --shapes takes mm rows with a row-major A "
                             f"(op {p.op!r}, layout_a {p.layout_a!r})")
        if (p.m, p.n, p.k) in public or (p.m, p.n, p.k) in seen:
            left.append(sh.name)
            continue
        seen.add((p.m, p.n, p.k))
        out.append((sh.group, sh.name, p.m, p.n, p.k, p.layout_b))
    return out, left


def spread(shapes: list[tuple]) -> list[tuple]:
    """``shapes`` (group first in each tuple) dealt round-robin over their groups, each group in
    its plan order: every prefix of the result samples every group in proportion, so a call that
    ends early (a new GPU's first 10 minutes) has timed every class of problem, not only the
    first group's.

    >>> [s[1] for s in spread([("a", 1), ("a", 2), ("a", 3), ("b", 4), ("c", 5), ("c", 6)])]
    [1, 4, 5, 2, 6, 3]
    """
    queues = _by_group(shapes)
    out: list[tuple] = []
    for i in range(max(map(len, queues), default=0)):
        out += [q[i] for q in queues if i < len(q)]
    return out


FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")


def group_after_group(shapes: list[tuple]) -> list[tuple]:
    """``shapes`` (group first in each tuple) group after group, the groups in the order they first
    come, each in its own order: the plan's order again for a ``spread`` of it.

    >>> plan = [("a", 1), ("a", 2), ("a", 3), ("b", 4), ("c", 5), ("c", 6)]
    >>> group_after_group(spread(plan)) == plan
    True
    """
    return [s for q in _by_group(shapes) for s in q]


def _by_group(shapes: list[tuple]) -> list[list[tuple]]:
    """``shapes`` (group first in each tuple) split by group: the groups in the order they first
    come, each keeping its shapes' order."""
    groups: dict[str, list[tuple]] = {}
    for s in shapes:
        groups.setdefault(s[0], []).append(s)
    return list(groups.values())


def problems_for(dtype: str, shapes, every: bool = False, order: str = "plan") -> list[tuple[str, str, Problem]]:
    """The plan's problems in one dtype phase: every shape for bf16/fp16; a third for fp32; for
    fp8 (e4m3 or e5m2 A, e4m3 B) a third, as scaled_mm with a bf16 output and B column-major
    (the layout of ``x @ W.T`` that fp8 GEMMs read), row-wise and tensor-wise scales taking turns.
    ``every``: every shape in every phase (shapes a user listed, ``--shapes``: the third is the
    built-in plan's budget, not theirs). ``order``: the order ``shapes`` come in, ``--order``'s:
    'spread' (dealt over their groups, ``spread``) keeps every phase in that order.

        >>> p = problems_for("float8_e4m3fn", [("llm", "x", 16, 4096, 4096, "row")])[0][2]
        >>> p.key
        'scaled_mm:M16-N4096-K4096:e4m3->bf16:row.a/col.a:row'
    """
    if order == "spread":
        # The phases that take a third took every third shape of the dealt list: with 6 groups,
        # dealt round-robin, that was the 1st and 4th group only until a group ran out (the square
        # group got none), group after group rather than dealt. The third is taken, and fp8's
        # scales given, as in the plan's order (group after group), so both orders measure the same
        # problems; the phase's problems are then dealt over the groups again.
        return spread(problems_for(dtype, group_after_group(shapes), every))
    if dtype in FP8_DTYPES:
        return [(g, f"{name}:{dtype}", Problem.from_sizes(m, n, k, dtype, "bfloat16", layout_b="col",
                                                          op="scaled_mm", scale=("row", "tensor")[i % 2]))
                for i, (g, name, m, n, k, _) in enumerate(shapes if every else shapes[::3])]
    picked = shapes if every or dtype != "float32" else shapes[::3]
    return [(g, f"{name}:{dtype}", Problem.from_sizes(m, n, k, dtype, layout_b=lb))
            for g, name, m, n, k, lb in picked]
