"""The kernel checks on a real GPU: bf16 (wrong in the interpreter), bigger and ragged shapes,
unaligned and transposed operands, split-K determinism, and every config of the default spaces.

Skipped cleanly without CUDA. Run with ``pytest -m gpu``. Comparisons go through
gemmtune.verify.check: fp64 reference, relative Frobenius error and largest-element
error, each within verify.TOLERANCE for the problem's dtypes.
"""

from __future__ import annotations

import pytest
import torch

import gemmtune
from gemmtune import kernels
from gemmtune.kernels import decompose_k
from gemmtune.kernels.splitk import SplitKWorkspace
from gemmtune.problem import Problem
from gemmtune.configs import AtenConfig, Choice, DecomposeKConfig, SplitKConfig, TileConfig
from gemmtune.verify import check

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

DEV = "cuda"

# (M, N, K, layout_a, layout_b, split for splitk). Layouts: row, col (transposed view),
# offset (one element into its storage: pointer not 16-byte aligned).
SHAPES = [
    pytest.param((32, 32, 28672, "row", "row", 16), id="32x32x28672"),      # small out, long K
    pytest.param((333, 4097, 1025, "offset", "offset", 4), id="333x4097x1025-unaligned"),
    pytest.param((1000, 1000, 1000, "row", "row", 2), id="1000^3"),
    pytest.param((4095, 4095, 4095, "col", "col", 2), id="4095^3-transposed"),
    pytest.param((1, 6144, 4096, "row", "col", 8), id="1x6144x4096"),
]
# (torch dtype, allow_tf32)
DTYPES = [
    pytest.param((torch.bfloat16, False), id="bf16"),
    pytest.param((torch.float16, False), id="fp16"),
    pytest.param((torch.float32, False), id="fp32"),
    pytest.param((torch.float32, True), id="fp32-tf32"),
]
FAMILIES = ["triton_mm-128", "triton_mm-64", "splitk-det", "splitk-atomic", "decompose_k", "aten"]


def make(rows: int, cols: int, layout: str, dtype: torch.dtype) -> torch.Tensor:
    if layout == "row":
        return torch.randn(rows, cols, device=DEV, dtype=dtype)
    if layout == "col":
        return torch.randn(cols, rows, device=DEV, dtype=dtype).t()
    if layout == "offset":
        return torch.randn(rows * cols + 1, device=DEV, dtype=dtype)[1:].view(rows, cols)
    raise ValueError(layout)


def config_for(family: str, m: int, n: int, k: int, split: int):
    if family == "triton_mm-128":
        return "triton_mm", TileConfig(128, 128, 64, 3, 8, 8)
    if family == "triton_mm-64":
        return "triton_mm", TileConfig(64, 64, 32, 4, 4, 8)
    if family.startswith("splitk"):
        return "splitk", SplitKConfig(64, 64, 64, 3, 4, 8, split, family.endswith("det"))
    if family == "decompose_k":
        splits = decompose_k.candidate_splits(k)
        if not splits:
            pytest.skip(f"no decompose_k split divides K={k}")
        return "decompose_k", DecomposeKConfig(splits[0])
    return "aten", AtenConfig()


def run_poisoned(family, cfg, a, b, out_dtype, allow_tf32, workspace=None):
    out = torch.full((a.shape[0], b.shape[1]), float("nan"), dtype=out_dtype, device=DEV)
    kernels.get(family).run(a, b, out, cfg, allow_tf32=allow_tf32, workspace=workspace)
    torch.cuda.synchronize()
    return out


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("fam", FAMILIES)
def test_family_on_gpu(fam, shape, dt):
    m, n, k, la, lb, split = shape
    dtype, tf32 = dt
    a, b = make(m, k, la, dtype), make(k, n, lb, dtype)
    family, cfg = config_for(fam, m, n, k, split)
    problem = Problem.from_tensors(a, b, allow_tf32=tf32)
    if la == "offset":
        assert not problem.aligned_a
    out = run_poisoned(family, cfg, a, b, dtype, tf32)
    res = check(out, a, b, problem)
    assert res.ok, f"{Choice(family, cfg).id} {problem.key}: {res.reason}"


@pytest.mark.parametrize("in_dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("fam", FAMILIES)
def test_fp32_output_on_gpu(fam, in_dtype):
    m, n, k = 333, 257, 4096
    a, b = make(m, k, "offset", in_dtype), make(k, n, "col", in_dtype)
    family, cfg = config_for(fam, m, n, k, 8)
    out = run_poisoned(family, cfg, a, b, torch.float32, False)
    res = check(out, a, b, Problem.from_tensors(a, b, torch.float32))
    assert res.ok, f"{Choice(family, cfg).id}: {res.reason}"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_splitk_deterministic_bitwise(dtype):
    m, n, k = 64, 64, 65536
    a, b = make(m, k, "row", dtype), make(k, n, "row", dtype)
    cfg = SplitKConfig(64, 64, 128, 3, 4, 8, 64, True)
    ws = SplitKWorkspace()
    outs = [run_poisoned("splitk", cfg, a, b, dtype, False, ws) for _ in range(3)]
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])
    fresh = run_poisoned("splitk", cfg, a, b, dtype, False)  # new workspace, same bits
    assert torch.equal(outs[0], fresh)
    res = check(outs[0], a, b, Problem.from_tensors(a, b))
    assert res.ok, res.reason
    # The atomic mode is right too (its bits may differ run to run).
    atomic = run_poisoned("splitk", SplitKConfig(64, 64, 128, 3, 4, 8, 64, False), a, b, dtype,
                          False, ws)
    res = check(atomic, a, b, Problem.from_tensors(a, b))
    assert res.ok, res.reason


def test_splitk_workspace_reuse_on_gpu():
    ws = SplitKWorkspace()
    for det in (True, False):
        for m, n, k in [(32, 32, 28672), (256, 192, 8192), (7, 5, 3000), (32, 32, 28672)]:
            a, b = make(m, k, "row", torch.bfloat16), make(k, n, "col", torch.bfloat16)
            cfg = SplitKConfig(32, 32, 128, 4, 4, 8, 16, det)
            out = run_poisoned("splitk", cfg, a, b, torch.bfloat16, False, ws)
            res = check(out, a, b, Problem.from_tensors(a, b))
            assert res.ok, f"{cfg.id} {m}x{n}x{k}: {res.reason}"
    assert int(ws.counters(1, torch.device(DEV)).count_nonzero()) == 0
    assert int(ws.partials(1, False, torch.device(DEV)).count_nonzero()) == 0


@pytest.mark.parametrize("det", [True, False], ids=["det", "atomic"])
def test_splitk_graph_replays_correctly_after_its_workspace_grew(det):
    """A CUDA graph captured with the workspace's buffers, then an eager launch that needs larger
    ones: the graph keeps writing where it was captured, so the replaced buffers must stay
    allocated. Freed, the next allocation (``sentinel``) would take their memory and the replay
    would overwrite it."""
    ws = SplitKWorkspace()
    cfg = SplitKConfig(32, 32, 128, 4, 4, 8, 16, det)
    a, b = make(32, 28672, "row", torch.bfloat16), make(28672, 32, "col", torch.bfloat16)
    out = torch.full((32, 32), float("nan"), dtype=torch.bfloat16, device=DEV)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        kernels.get("splitk").run(a, b, out, cfg, workspace=ws)  # warm-up: compile, allocate
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        kernels.get("splitk").run(a, b, out, cfg, workspace=ws)
    # Far more tiles: every buffer of this stream grows (to at least twice its size).
    big_a, big_b = make(1024, 8192, "row", torch.bfloat16), make(8192, 1024, "row", torch.bfloat16)
    with torch.cuda.stream(side):
        big = run_poisoned("splitk", cfg, big_a, big_b, torch.bfloat16, False, ws)
    torch.cuda.synchronize()
    assert ws.retired_bytes > 0
    assert check(big, big_a, big_b, Problem.from_tensors(big_a, big_b)).ok
    sentinel = torch.full((1 << 22,), 7.0, device=DEV)
    out.fill_(float("nan"))
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    res = check(out, a, b, Problem.from_tensors(a, b))
    assert res.ok, res.reason
    assert bool((sentinel == 7.0).all()), "a graph replay wrote into memory the workspace had freed"


@pytest.mark.parametrize("det", [True, False], ids=["det", "atomic"])
def test_splitk_graphs_captured_after_a_side_stream_warmup_replay_in_any_order(det):
    """torch's recipe: warm up on a side stream, then capture with ``torch.cuda.graph`` (its own
    capture stream). The captures borrow the warm-up's zeroed buffers, so either graph can be
    replayed first, any number of times."""
    ws = SplitKWorkspace()
    cfg = SplitKConfig(32, 32, 128, 4, 4, 8, 16, det)
    run = kernels.get("splitk").run
    ops = [(make(32, 28672, "row", torch.bfloat16), make(28672, 32, "col", torch.bfloat16)),
           (make(96, 8192, "row", torch.bfloat16), make(8192, 64, "row", torch.bfloat16))]
    outs = [torch.empty(a.shape[0], b.shape[1], dtype=torch.bfloat16, device=DEV) for a, b in ops]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for (a, b), out in zip(ops, outs):
            run(a, b, out, cfg, workspace=ws)
    torch.cuda.synchronize()
    graphs = [torch.cuda.CUDAGraph() for _ in ops]
    for g, (a, b), out in zip(graphs, ops, outs):
        with torch.cuda.graph(g):
            run(a, b, out, cfg, workspace=ws)
    for out in outs:
        out.fill_(float("nan"))
    for i in (1, 0, 1, 1, 0):
        graphs[i].replay()
    torch.cuda.synchronize()
    for (a, b), out in zip(ops, outs):
        res = check(out, a, b, Problem.from_tensors(a, b))
        assert res.ok, res.reason


@pytest.mark.parametrize("family", ["splitk", "skinny"])
def test_one_workspace_on_two_concurrent_streams(family):
    """Two streams launch split kernels through one workspace at the same time; each stream has
    its own scratch, so neither sum is mixed into the other's."""
    ws = SplitKWorkspace()
    if family == "splitk":
        cfg, m, n, k = SplitKConfig(32, 32, 128, 4, 4, 8, 16, False), 32, 32, 28672
    else:
        from gemmtune.configs import SkinnyConfig
        cfg, m, n, k = SkinnyConfig(16, 64, 256, 8, 3, 4, True, False), 8, 1536, 8192
    ops = [(make(m, k, "row", torch.bfloat16), make(k, n, "col", torch.bfloat16)) for _ in range(2)]
    outs = [torch.empty(m, n, dtype=torch.bfloat16, device=DEV) for _ in range(2)]
    streams = [torch.cuda.Stream() for _ in range(2)]
    torch.cuda.synchronize()
    for _ in range(40):
        for (a, b), out, s in zip(ops, outs, streams):
            with torch.cuda.stream(s):
                kernels.get(family).run(a, b, out, cfg, workspace=ws)
    torch.cuda.synchronize()
    for (a, b), out in zip(ops, outs):
        res = check(out, a, b, Problem.from_tensors(a, b))
        assert res.ok, f"{family}: {res.reason}"
    ptrs = []
    for s in streams:
        with torch.cuda.stream(s):
            ptrs.append(ws.partials(1, cfg.deterministic, torch.device(DEV)).data_ptr())
    assert ptrs[0] != ptrs[1]


def test_matmul_default_choice_on_gpu():
    for m, n, k in [(32, 32, 28672), (1000, 1000, 1000)]:
        a, b = make(m, k, "row", torch.bfloat16), make(k, n, "row", torch.bfloat16)
        out = gemmtune.matmul(a, b)
        res = check(out, a, b, Problem.from_tensors(a, b))
        assert res.ok, res.reason


@pytest.mark.parametrize("family", ["triton_mm", "splitk", "decompose_k", "aten"])
def test_default_space_all_verify(family):
    """Every config of the family's default space compiles and verifies on one medium shape."""
    m, n, k = 512, 384, 4096
    a, b = make(m, k, "row", torch.bfloat16), make(k, n, "row", torch.bfloat16)
    problem = Problem.from_tensors(a, b)
    choices = gemmtune.space(problem, family)
    assert choices, f"empty default {family} space for {problem.key}"
    ws = SplitKWorkspace()
    bad = []
    for ch in choices:
        out = gemmtune.matmul(a, b, choice=ch, workspace=ws)
        torch.cuda.synchronize()
        res = check(out, a, b, problem)
        if not res.ok:
            bad.append(f"{ch.id}: {res.reason}")
    assert not bad, "\n".join(bad)


PREPARED = [
    pytest.param("triton_mm:BM64-BN64-BK64-S3-W4-G8", id="triton_mm"),
    pytest.param("splitk:BM32-BN32-BK128-S3-W4-G8-SK8-det", id="splitk-det"),
    pytest.param("splitk:BM32-BN32-BK128-S3-W4-G8-SK8-atomic", id="splitk-atomic"),
]


@pytest.mark.parametrize("choice_id", PREPARED)
def test_dispatcher_prepared_launch(choice_id, recwarn):
    """A cached call launches the compiled kernel directly (kernels.tiled.prepare_direct);
    same shape with other strides or alignment takes Triton's ordinary launch. Every
    result is checked, over several calls and shapes that share the dispatcher."""
    from gemmtune.dispatch import compile_mm

    choice = Choice.parse(choice_id)
    d = compile_mm(n=768, k=4096, dtype="bf16", hints={"m": [64]},
                   tune_fn=lambda ps, **kw: {p.key: choice for p in ps})
    for m in (64, 1, 77, 64):
        for layout in ("row", "col", "offset", "row"):
            a = make(m, 4096, layout, torch.bfloat16)
            b = make(4096, 768, "row", torch.bfloat16)
            for _ in range(2):  # first sight, then the cached closure
                out = d(a, b)
                assert check(out, a, b, Problem.from_tensors(a, b)).ok, (m, layout)
    assert d.decision(m=77).choice == choice
    assert not [w for w in recwarn.list if "prepared launch" in str(w.message)]
    # The cached closure for a row-major call is the prepared one.
    a, b = make(64, 4096, "row", torch.bfloat16), make(4096, 768, "row", torch.bfloat16)
    run = d._fast[(a.shape, b.shape, a.dtype, b.dtype, a.device, b.device, False, False)].__wrapped__  # inside its device guard
    assert "matches" in run.__code__.co_freevars


PREPARED_TMA_OR_SPLIT = [
    pytest.param("decompose_k:s4", ("row", "col", "offset"), id="decompose_k"),
    # TMA needs 16-byte aligned operands: an offset A is pad+'s (below)
    pytest.param("persistent_tma:BM64-BN64-BK64-S3-W4-G8", ("row", "col"), id="persistent_tma"),
]


def _fused_ok(out, a, b, bias, dtype) -> bool:
    """``out`` against fp64 ``a @ b + bias`` (relative Frobenius error, verify's bf16/fp16 bound)."""
    ref = a.double() @ b.double() + bias.double()
    return bool(((out.double() - ref).norm() / ref.norm()) < (1e-2 if dtype == torch.bfloat16 else 2e-3))


@pytest.mark.parametrize("choice_id,layouts", PREPARED_TMA_OR_SPLIT)
def test_dispatcher_prepared_launch_of_decompose_k_and_persistent(choice_id, layouts, recwarn, monkeypatch):
    """DecomposeK (its bmm and its sum relaunched, kernels.relaunch) and persistent_tma (its
    descriptors rebased per call) launch prepared, plain and with a fused bias: correct against
    fp64 over repeated calls and several M, one dispatcher per A layout (a dispatcher prepares the
    layout of a shape's first call), and no cached call runs the family's generic ``run``."""
    from gemmtune.dispatch import compile_mm

    choice = Choice.parse(choice_id)
    fam = kernels.get(choice.family)
    generic = []
    plain_run = fam.run
    monkeypatch.setattr(fam, "run", lambda *a, **kw: generic.append(1) or plain_run(*a, **kw))
    bias = torch.randn(768, device=DEV, dtype=torch.bfloat16)
    for layout in layouts:
        d = compile_mm(n=768, k=4096, dtype="bf16", hints={"m": [64]}, layout_a="col" if layout == "col" else "row",
                       tune_fn=lambda ps, **kw: {p.key: choice for p in ps})
        for m in (64, 1, 77):
            a = make(m, 4096, layout, torch.bfloat16)
            b = make(4096, 768, "row", torch.bfloat16)
            for i in range(3):  # first sight (its fp64 check runs the generic launch), then the cached closure
                before = len(generic)
                assert check(d(a, b), a, b, Problem.from_tensors(a, b)).ok, (m, layout)
                assert _fused_ok(d(a, b, bias=bias), a, b, bias, torch.bfloat16), (m, layout)
                assert i == 0 or len(generic) == before, f"a cached call took the generic launch {(m, layout)}"
    assert not [w for w in recwarn.list if "prepared launch" in str(w.message)]


@pytest.mark.parametrize("choice_id", ["persistent_tma:BM64-BN64-BK64-S3-W4-G8", "decompose_k:s4",
                                       "pad+persistent_tma:BM64-BN64-BK64-S3-W4-G8"])
def test_prepared_launch_keeps_no_operand_alive(choice_id):
    """A dispatcher's prepared launch holds no tensor of the call it was prepared on (the
    persistent kernel's descriptors are kept as templates with no base): once the caller drops
    its operands and output, they are freed."""
    import gc
    import weakref

    from gemmtune.dispatch import compile_mm

    choice = Choice.parse(choice_id)
    k = 1025 if choice.pad else 1024
    d = compile_mm(n=768, k=k, dtype="bf16", hints={"m": [64]}, tune_fn=lambda ps, **kw: {p.key: choice for p in ps})
    a, b = make(64, k, "row", torch.bfloat16), make(k, 768, "row", torch.bfloat16)
    out = d(a, b)
    assert "matches" in d._fast[(a.shape, b.shape, a.dtype, b.dtype, a.device, b.device, False, False)].__wrapped__.__code__.co_freevars
    refs = [weakref.ref(t) for t in (a, b, out)]
    del a, b, out
    gc.collect()
    assert all(r() is None for r in refs), "the prepared launch keeps a tensor of its first call alive"


PREPARED_PAD = ["pad+aten", "pad+persistent_tma:BM64-BN64-BK64-S3-W4-G8", "pad+triton_mm:BM64-BN64-BK64-S3-W4-G8",
                "pad+decompose_k:s4"]


@pytest.mark.parametrize("choice_id", PREPARED_PAD)
@pytest.mark.parametrize("k", [1025, 1024], ids=["odd-K", "odd-N-only"])
def test_dispatcher_prepared_pad_launch(choice_id, k, recwarn, monkeypatch):
    """A pad+ choice's cached call relaunches its pad copies compiled (pad.prepare_copies) and its
    family's prepared launch on them (kernels.prepare_choice), no cached call ``run_choice``: correct
    against fp64 for A row-major, transposed and offset, B a plain tensor and a weight's transposed
    view (padded once, padcache), with and without a fused bias, over repeated calls and several
    M (one dispatcher per layout pair: a dispatcher prepares the layouts of a shape's first call).
    K = 1024 (only N odd): A is read as it is. The weight updated in place is padded again; inside
    a CUDA-graph capture (where padcache pads per call) the generic path serves and the replay
    follows new data."""
    from gemmtune.dispatch import compile_mm
    from gemmtune.kernels import padcache

    n = 4097
    choice = Choice.parse(choice_id)
    generic = []
    plain = kernels.run_choice_unchecked  # (run_choice runs it too: both paths counted)
    monkeypatch.setattr(kernels, "run_choice_unchecked", lambda *a, **kw: generic.append(1) or plain(*a, **kw))
    bias = torch.randn(n, device=DEV, dtype=torch.bfloat16)
    w = torch.nn.Parameter(torch.randn(n, k, device=DEV, dtype=torch.bfloat16), requires_grad=False)
    for layout in ("row", "col", "offset"):
        for b_kind in ("row", "weight"):
            d = compile_mm(n=n, k=k, dtype="bf16", hints={"m": [64]}, layout_a="col" if layout == "col" else "row",
                           layout_b="col" if b_kind == "weight" else "row",
                           tune_fn=lambda ps, **kw: {p.key: choice for p in ps})
            for m in (64, 1, 77):
                a = make(m, k, layout, torch.bfloat16)
                b = w.t() if b_kind == "weight" else make(k, n, "row", torch.bfloat16)
                for i in range(3):  # first sight (its fp64 check runs run_choice), then the cached closure
                    before = len(generic)
                    assert check(d(a, b), a, b, Problem.from_tensors(a, b)).ok, (m, layout, b_kind)
                    assert _fused_ok(d(a, b, bias=bias), a, b, bias, torch.bfloat16), (m, layout, b_kind)
                    assert i == 0 or len(generic) == before, f"a cached call took run_choice {(m, layout, b_kind)}"
    assert not [x for x in recwarn.list if "prepared launch" in str(x.message)]
    generic.clear()
    assert len(padcache.WEIGHTS) >= 1
    a = make(64, k, "offset", torch.bfloat16)  # the last dispatcher's layouts: offset A, the weight
    with torch.no_grad():
        w.mul_(-1)
    assert check(d(a, w.t()), a, w.t(), Problem.from_tensors(a, w.t())).ok
    assert not generic, "the cached call after the weight's update took run_choice"
    static_a = make(64, k, "offset", torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        d(static_a, w.t())
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = d(static_a, w.t())
    static_a.copy_(make(64, k, "row", torch.bfloat16))
    g.replay()
    torch.cuda.synchronize()
    assert check(out, static_a, w.t(), Problem.from_tensors(static_a, w.t())).ok
    assert generic, "inside the capture the weight is copied per call: the generic path"


MULTI_GPU = ["aten", "pad+aten", "triton_mm:BM64-BN64-BK64-S3-W4-G8", "splitk:BM32-BN32-BK128-S3-W4-G8-SK8-atomic",
             "decompose_k:s4", "persistent_tma:BM64-BN64-BK64-S3-W4-G8", "pad+persistent_tma:BM64-BN64-BK64-S3-W4-G8"]


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
@pytest.mark.parametrize("choice_id", MULTI_GPU)
def test_dispatcher_launches_on_the_operands_gpu(choice_id):
    """Operands on cuda:1 while cuda:0 is current (a model spread over GPUs): first sight and
    every cached call, plain and with a fused bias, run on cuda:1's stream, after the work queued
    there. Before each call A is rewritten on cuda:1's stream behind a 10 ms sleep, so a launch on
    cuda:0's stream would read the old A (or fault). The current device is left as it was."""
    from gemmtune.dispatch import compile_mm

    choice = Choice.parse(choice_id)
    k = 1025 if choice.pad else 1024
    d = compile_mm(n=768, k=k, dtype="bf16", hints={"m": [64]}, tune_fn=lambda ps, **kw: {p.key: choice for p in ps})
    dev = torch.device("cuda", 1)
    bias = torch.randn(768, device=dev, dtype=torch.bfloat16)
    b = torch.randn(k, 768, device=dev, dtype=torch.bfloat16)
    assert torch.cuda.current_device() == 0
    for m in (64, 1, 64):
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        for i in range(3):
            fresh = torch.randn_like(a)
            with torch.cuda.stream(torch.cuda.current_stream(dev)):  # makes cuda:1 current inside
                torch.cuda._sleep(20_000_000)
                a.copy_(fresh)
            out = d(a, b)
            fused = d(a, b, bias=bias)
            assert torch.cuda.current_device() == 0
            assert out.device == dev and fused.device == dev
            assert check(out, a, b, Problem.from_tensors(a, b)).ok, (m, i)
            assert _fused_ok(fused, a, b, bias, torch.bfloat16), (m, i)
    assert d.decision(m=64).choice == choice


def test_cached_persistent_call_on_operands_tma_cannot_read_runs_cublas():
    """A shape decided on persistent_tma (its first call aligned, so its prepared launch), then
    called with an offset A and with a column-major A of 34-byte columns: those calls run torch.mm
    (one warning) instead of raising from the descriptor check; every output right against fp64,
    plain and with a fused bias; the aligned calls stay on the kernel."""
    import warnings

    from gemmtune.dispatch import compile_mm

    choice = Choice.parse("persistent_tma:BM64-BN64-BK64-S3-W4-G8")
    d = compile_mm(n=768, k=1024, dtype="bf16", hints={"m": [17]}, tune_fn=lambda ps, **kw: {p.key: choice for p in ps})
    b = make(1024, 768, "row", torch.bfloat16)
    bias = torch.randn(768, device=DEV, dtype=torch.bfloat16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for layout in ("row", "offset", "col", "row"):
            a = make(17, 1024, layout, torch.bfloat16)
            for _ in range(2):
                assert check(d(a, b), a, b, Problem.from_tensors(a, b)).ok, layout
                assert _fused_ok(d(a, b, bias=bias), a, b, bias, torch.bfloat16), layout
    assert len([w for w in caught if "cannot read these operands" in str(w.message)]) == 1
    assert not [w for w in caught if "prepared launch" in str(w.message)]
    assert d.decision(m=17).choice == choice


# ----------------------------------------------------------------- compile workers on meta operands
def _jit_cache_sizes() -> int:
    """Kernels compiled so far in this process by gemmtune's Triton functions (0 where this
    triton keeps no per-device cache we can read)."""
    n = 0
    for fn in _gemmtune_jit_functions():
        for entry in getattr(fn, "device_caches", {}).values():
            n += len(entry[0])
    return n


def _gemmtune_jit_functions() -> tuple:
    from gemmtune.kernels import persistent, skinny, tiled
    return (tiled._tiled_mm_kernel, tiled._tiled_mm_static, skinny._skinny_kernel, persistent._persistent_kernel,
            tiled._sum_splits_kernel)


def _clear_jit_caches() -> None:
    """Forget the kernels gemmtune's Triton functions compiled in this process (their per-device
    in-memory caches), so that the next launch of a config compiles again, from the disk cache
    when that holds it."""
    for fn in _gemmtune_jit_functions():
        for entry in getattr(fn, "device_caches", {}).values():
            entry[0].clear()


@pytest.mark.parametrize("shape", [(512, 4096, 4096), (333, 4097, 1025), (3, 4096, 14336)])
def test_compile_workers_compile_on_meta_operands_into_the_benchmark_workers_cache(shape, monkeypatch):
    from gemmtune.api import space
    from gemmtune.bench import measure

    monkeypatch.setattr(measure, "COMPILE_ON_META_BYTES", 0)  # these problems are below the size it serves
    from gemmtune.bench.measure import WorkerState, compile_choice, verify
    from gemmtune.device import DeviceInfo

    p = Problem.from_sizes(*shape, "bf16")
    dev = DeviceInfo.from_torch()
    choices = []
    for fam in ("triton_mm", "triton_static", "splitk", "skinny", "persistent_tma", "decompose_k"):
        for pad in (False, True) if not (p.aligned_a and p.aligned_b) else (False,):
            try:
                cfgs = space(p.padded() if pad else p, fam, "default", dev)
            except ValueError:
                continue
            choices += [c.padded() if pad else c for c in cfgs[:1]]
    assert len(choices) >= 3
    state = WorkerState(device="cuda")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    for c in choices:
        m = compile_choice(p, c, state)
        assert m.status in ("ok", "unsupported"), (c.id, m.status, m.reason)
    torch.cuda.synchronize()
    # Nothing of the problem's operands was allocated: the meta path served every family.
    assert torch.cuda.memory_allocated() - before < p.min_bytes // 4
    assert state.not_meta == set(), state.not_meta
    compiled = _jit_cache_sizes()
    bench = WorkerState(device="cuda")
    for c in choices:
        m, launch = verify(p, c, bench)
        assert launch is not None or m.status == "unsupported", (c.id, m.status, m.reason)
    if compiled:  # the real launches found every kernel compiled already (same specialisation)
        assert _jit_cache_sizes() == compiled


def test_runoff_times_a_triton_kernel_and_cublas_in_interleaved_graph_rounds():
    """The tuner's run-off (tuning.runoff) on the GPU: both choices verified, captured once in
    CUDA graphs, timed in 4 rotating rounds; a failing choice does not cost the other its time."""
    from gemmtune.bench.runner import WorkerState, handle

    p = Problem.from_sizes(1024, 1024, 1024, "bf16")
    state = WorkerState()
    tile = "triton_mm:BM128-BN128-BK64-S3-W4-G8"
    res = handle("runoff", {"problem": p.key, "choices": [tile, "aten"], "seed": 2}, state)
    assert res["status"] == "ok"
    for c in (tile, "aten"):
        got = res["choices"][c]
        assert got["status"] == "ok" and got["rounds"] == 4 and 0.0005 < got["ms"] < 1.0, got
    bad = handle("runoff", {"problem": p.key, "choices": ["triton_mm:BM128-BN128-BK64-S9-W4-G8", "aten"]}, state)
    assert bad["choices"]["aten"]["status"] == "ok"


# ----------------------------------------------------------------- a warm server's worker warm-up
def test_warm_pays_first_use_costs_without_compiling_a_candidate():
    """A warm server's worker op 'warm' (bench.measure.warm): Triton's compile path (pad_copy) and
    cuBLAS's timing path run once, and no candidate family's kernel is compiled by it."""
    from gemmtune.bench.runner import WorkerState, handle
    from gemmtune.bench.server import WARM_SIZES

    state = WorkerState()
    before = _jit_cache_sizes()
    res = handle("warm", {"problem": Problem.from_sizes(*WARM_SIZES).key, "seed": 1}, state)
    assert res["status"] == "ok", res
    assert set(res["steps"]) == {"triton_compile", "aten_measure"} and res["s"] > 0
    assert _jit_cache_sizes() == before  # a later client's candidates still pay their own compiles


# ----------------------------------------------------------------- precompile (a run without compile workers)
@pytest.mark.parametrize("shape", [(16, 6144, 4096), (333, 4097, 1025)])
def test_precompile_compiles_a_shapes_candidates_together_into_the_cache_its_timing_uses(shape, tmp_path,
                                                                                          monkeypatch):
    """The benchmark worker's 'precompile' op (bench.measure.precompile): the candidates compile
    together on threads, their timing then compiles nothing more, and a config that cannot compile
    costs only itself (measured as a compile error when its turn comes).

    Its own Triton cache: under xdist another worker may have compiled the same kernels into the
    shared one first (test_compile_workers_... on 333x4097x1025), and a kernel found there is no
    compile future to load (H100, session 23: 'kernels': 1 against 3 candidates). The same holds for
    the kernels an earlier test compiled in this very process (in memory: session 26 saw 'kernels': 1
    again on 333x4097x1025 with its own disk cache), so those are forgotten first."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    _clear_jit_caches()
    from gemmtune.api import space
    from gemmtune.bench.measure import async_compile_mode
    from gemmtune.bench.runner import WorkerState, handle
    from gemmtune.device import DeviceInfo

    if async_compile_mode() is None:
        pytest.skip("this triton has no AsyncCompileMode")
    p = Problem.from_sizes(*shape, "bf16")
    dev = DeviceInfo.from_torch()
    good = []
    for fam in ("triton_mm", "triton_static", "splitk", "skinny", "persistent_tma"):
        pad = not (p.aligned_a and p.aligned_b)
        try:
            cfgs = space(p.padded() if pad else p, fam, "default", dev)
        except ValueError:
            continue
        good += [(c.padded() if pad else c).id for c in cfgs[:1]]
    assert len(good) >= 3
    # More shared memory than an SM has, once cp.async pipelines the loads (aligned operands).
    bad = "triton_mm:BM128-BN128-BK64-S9-W4-G8" if p.aligned_a and p.aligned_b else "pad+triton_mm:BM128-BN128-BK64-S9-W4-G8"
    state = WorkerState()
    before = _jit_cache_sizes()
    res = handle("precompile", {"problem": p.key, "choices": good + [bad, "aten"], "seed": 3}, state)
    assert res["status"] == "ok" and res["compiled"] >= len(good) and res["threads"] >= 2, res
    assert res["kernels"] >= len(good) - 1, res  # loaded too (launcher built, binary loaded)
    compiled = _jit_cache_sizes()
    assert compiled >= before + len(good) - 1  # twins may share a kernel
    for c in good:
        m = handle("bench", {"problem": p.key, "choice": c, "seed": 3, "timer": "quick"}, state)
        assert m["status"] == "ok", (c, m)
    assert _jit_cache_sizes() == compiled  # timing found every kernel compiled already
    m = handle("bench", {"problem": p.key, "choice": bad, "seed": 3, "timer": "quick"}, state)
    assert m["status"] in ("compile_error", "unsupported"), m
