"""Every kernel family against an fp64 reference, on ragged shapes and odd layouts.

Runs on the CPU through the Triton interpreter (conftest sets TRITON_INTERPRET=1 when
there is no GPU) and unchanged on a GPU. Sizes stay <= ~500 because the interpreter
executes every program of the grid in Python. Outputs are pre-filled with NaN so an
element a kernel forgot to write fails the check instead of reading as a plausible 0.
"""

from __future__ import annotations

import pytest
import torch

import gemmtune
from gemmtune import kernels
from gemmtune.device import DeviceInfo
from gemmtune.problem import Problem
from gemmtune.configs import AtenConfig, Choice, DecomposeKConfig, SplitKConfig, TileConfig
from gemmtune.kernels.splitk import SplitKWorkspace
from gemmtune.verify import compare

from conftest import covering

# Relative Frobenius error allowed, by (input dtype, output dtype); the largest single
# element may be off by 10x this times rms(ref) (gemmtune.verify.compare).
# fp32 (ieee dot, fp32 sums) sits near 1e-7; a 16-bit output is dominated by its own
# rounding: 2^-11 ~ 4.9e-4 worst case for fp16, 2^-8 ~ 3.9e-3 for bf16, ~2e-4/~2e-3 rms.
TOL = {
    (torch.float32, torch.float32): 1e-5,
    (torch.float16, torch.float16): 1e-3,
    (torch.float16, torch.float32): 1e-4,
    (torch.bfloat16, torch.bfloat16): 8e-3,
    (torch.bfloat16, torch.float32): 1e-4,
}

ON_GPU = torch.cuda.is_available()
# bf16 runs in the interpreter too: its tl.dot is wrong there, so the kernels upcast bf16 dot
# operands to fp32 in the interpreter (kernels.tiled.UPCAST_BF16); before that fix these
# cases returned values near 1e11 (issue: a new user's first hour).
BF16 = pytest.param(torch.bfloat16, id="bf16")
DTYPES = [pytest.param(torch.float16, id="fp16"), pytest.param(torch.float32, id="fp32"), BF16]
# aten does not go through the interpreter: its bf16 runs on the CPU too.
DTYPES_ATEN_CPU = [pytest.param(torch.float16, id="fp16"), pytest.param(torch.float32, id="fp32"),
                   pytest.param(torch.bfloat16, id="bf16")]



# Configs per family, small and large: the large ones have blocks bigger than every dim
# of most shapes below (masked edges, wrapped loads) and BLOCK_K > K. All fit a real GPU's
# shared memory in fp32 too (the same tests run unchanged on a GPU).
TRITON_MM = [TileConfig(16, 16, 16, 1, 2, 1), TileConfig(32, 64, 32, 2, 4, 8),
             TileConfig(128, 128, 64, 2, 8, 8)]
SPLITK = [SplitKConfig(16, 32, 32, 2, 4, 8, 4, True), SplitKConfig(16, 32, 32, 2, 4, 8, 4, False),
          SplitKConfig(64, 64, 128, 3, 4, 8, 3, True), SplitKConfig(64, 64, 128, 3, 4, 8, 3, False),
          SplitKConfig(32, 32, 16, 2, 4, 1, 16, True)]
TILED_CASES = ([("triton_mm", c) for c in TRITON_MM] + [("splitk", c) for c in SPLITK]
               + [("aten", AtenConfig())])

# (M, N, K): 1x1x1; primes; K < BLOCK_K; K not a multiple of BLOCK_K; one full-ish tile.
SHAPES = [(1, 1, 1), (17, 31, 257), (1, 127, 509), (45, 19, 40), (64, 48, 100), (130, 70, 96)]

# decompose_k only runs splits that divide K; each case is its own (M, N, K, split).
DECOMPOSE_K = [(1, 1, 256, 2), (17, 31, 4097, 17), (5, 3, 1025, 5), (33, 65, 512, 4),
               (19, 23, 384, 3), (1, 1, 1, 1)]


def cid(case) -> str:
    fam, cfg = case
    return Choice(fam, cfg).id


def run_family(family: str, cfg, a: torch.Tensor, b: torch.Tensor, out_dtype=None,
               **kw) -> torch.Tensor:
    """Run one family's launcher into a NaN-poisoned output and return it."""
    out = torch.full((a.shape[0], b.shape[1]), float("nan"), dtype=out_dtype or a.dtype,
                     device=a.device)
    kernels.get(family).run(a, b, out, cfg, **kw)
    return out


def assert_close(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    ref = torch.mm(a.double(), b.double())
    tol = TOL[(a.dtype, out.dtype)]
    res = compare(out, ref, tol)
    assert res.ok, f"{tuple(a.shape)}x{tuple(b.shape)} {a.dtype}->{out.dtype}: {res.reason}"


# ------------------------------------------------------------------ shapes x configs
# Every case x shape in the fast lane, one dtype each (rotating); the rest is slow.
@pytest.mark.parametrize("case,shape,dtype", covering((TILED_CASES, cid), (SHAPES, lambda s: "x".join(map(str, s))),
                                                      DTYPES_ATEN_CPU))
def test_family_matches_reference(case, shape, dtype, operand):
    family, cfg = case
    m, n, k = shape
    a, b = operand(m, k, "row", dtype), operand(k, n, "row", dtype)
    assert_close(run_family(family, cfg, a, b), a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", DECOMPOSE_K, ids=lambda c: "{}x{}x{}-s{}".format(*c))
def test_decompose_k_matches_reference(case, dtype, operand):
    m, n, k, split = case
    a, b = operand(m, k, "row", dtype), operand(k, n, "row", dtype)
    assert_close(run_family("decompose_k", DecomposeKConfig(split), a, b), a, b)


# ------------------------------------------------------------------ layouts
LAYOUTS = ["row", "col", "strided", "offset"]
# One config per family; decompose_k gets a K its split divides.
LAYOUT_CASES = [("triton_mm", TileConfig(32, 32, 64, 2, 4, 8), 257),
                ("splitk", SplitKConfig(32, 32, 32, 2, 4, 8, 4, True), 257),
                ("splitk", SplitKConfig(32, 32, 32, 2, 4, 8, 4, False), 257),
                ("decompose_k", DecomposeKConfig(2), 256),
                ("aten", AtenConfig(), 257)]


# Every case x layout pair in the fast lane, one dtype each (rotating); the rest is slow.
@pytest.mark.parametrize("case,layout_a,layout_b,dtype", covering(
    (LAYOUT_CASES, lambda c: Choice(c[0], c[1]).id), LAYOUTS, LAYOUTS, DTYPES_ATEN_CPU, full=3))
def test_layouts(case, layout_a, layout_b, dtype, operand):
    family, cfg, k = case
    m, n = 17, 31
    a, b = operand(m, k, layout_a, dtype), operand(k, n, layout_b, dtype)
    # The operands really are what the test claims (else this test covers less than it says).
    p = Problem.from_tensors(a, b)
    want = {"row": "row", "col": "col", "strided": "strided", "offset": "row"}
    assert (p.layout_a, p.layout_b) == (want[layout_a], want[layout_b])
    if layout_a == "offset":
        assert not p.aligned_a and a.data_ptr() % 16 != 0
    if layout_b == "offset":
        assert not p.aligned_b and b.data_ptr() % 16 != 0
    assert_close(run_family(family, cfg, a, b), a, b)


@pytest.mark.parametrize("case", LAYOUT_CASES, ids=lambda c: Choice(c[0], c[1]).id)
def test_offset_and_odd_leading_stride(case, operand, device):
    """Storage offset plus an odd leading stride (K, N odd): nothing is 16-byte aligned."""
    family, cfg, k = case
    dtype = torch.float16
    m, n = 9, 21
    abuf = torch.randn(m * (k + 1) + 3, dtype=dtype, device=device)
    a = abuf[3:3 + m * (k + 1)].view(m, k + 1)[:, :k]  # leading stride k+1, offset 3
    b = operand(k, n, "offset", dtype)
    p = Problem.from_tensors(a, b)
    assert not p.aligned_a and not p.aligned_b
    assert_close(run_family(family, cfg, a, b), a, b)


# ------------------------------------------------------------------ edges: wrap vs mask
@pytest.mark.parametrize("edge", ["wrap", "mask", "auto"])
@pytest.mark.parametrize("layouts", [("row", "row"), ("col", "col"), ("offset", "strided")],
                         ids=lambda ls: "-".join(ls))
@pytest.mark.parametrize("shape", [(1, 5, 33), (3, 64, 40), (7, 2, 19), (70, 3, 16)],
                         ids=lambda s: "x".join(map(str, s)))
def test_edge_wrap_and_mask_agree(shape, layouts, edge, operand):
    """Rows/cols past the edge either wrap (re-read real rows) or are masked (read
    nothing): both must give the reference, on dims smaller than their block and not."""
    from gemmtune.kernels.tiled import launch_tiled

    m, n, k = shape
    a, b = operand(m, k, layouts[0], torch.float32), operand(k, n, layouts[1], torch.float32)
    out = torch.full((m, n), float("nan"), dtype=torch.float32, device=a.device)
    launch_tiled(a, b, out, block_m=16, block_n=32, block_k=16, group_m=4, num_stages=2, num_warps=4,
                 k_per_split=k, edge=edge)
    assert_close(out, a, b)


def test_edge_masks_choice():
    from gemmtune.kernels.tiled import edge_masks

    assert edge_masks(1, 4096, 64, 128) == (True, False)    # decode: M below its block
    assert edge_masks(4096, 32, 64, 64) == (False, True)     # small N, B not N-contiguous
    assert edge_masks(4096, 32, 64, 64, n_contiguous=True) == (False, False)  # row-major B: wrap
    # ... unless N is odd: rows start unaligned, so there is no vector width to lose.
    assert edge_masks(96, 50257, 128, 128, n_contiguous=True) == (True, True)
    assert edge_masks(4096, 50258, 128, 128, n_contiguous=True) == (False, False)
    assert edge_masks(4096, 50257, 128, 128) == (False, False)  # odd N, column-major B: aligned, wrap
    assert edge_masks(1, 4096, 64, 128, m_contiguous=True) == (False, False)  # column-major A: wrap
    assert edge_masks(64, 128, 64, 128) == (False, False)    # exactly one block: no edge at all
    assert edge_masks(65, 4096, 64, 128) == (False, False)   # a ragged last block keeps the wrap
    assert edge_masks(65, 4096, 64, 128, "mask", n_contiguous=True) == (True, True)
    assert edge_masks(1, 1, 64, 128, "wrap") == (False, False)
    with pytest.raises(ValueError, match="edge must be"):
        edge_masks(1, 1, 64, 64, "clamp")


def test_problems_differing_only_in_m_share_one_compiled_kernel():
    """M_DIV / N_DIV are read only where that dim is contiguous and wrapped; elsewhere they are
    pinned, so a row-major A at M = 48, 96, 100, 4096 needs one compile, not one per divisor."""
    from gemmtune.kernels.tiled import _tiled_args

    b = torch.randn(256, 512, dtype=torch.float16)
    kw = dict(block_m=64, block_n=128, block_k=64, group_m=8, k_per_split=256)

    def consts(m, a_layout="row"):
        a = torch.randn(m, 256, dtype=torch.float16) if a_layout == "row" else torch.randn(256, m, dtype=torch.float16).t()
        return _tiled_args(a, b, torch.empty(m, 512, dtype=torch.float16), **kw)[2]

    row = [consts(m) for m in (96, 100, 4096)]
    assert all(c == row[0] for c in row) and row[0]["M_DIV"] == 1
    # A column-major A wraps along its contiguous dim: there the divisor matters and is kept.
    assert consts(96, "col")["M_DIV"] == 16 and consts(100, "col")["M_DIV"] == 4


# ------------------------------------------------------------------ out dtype, output views
@pytest.mark.parametrize("in_dtype", [pytest.param(torch.float16, id="fp16"),
                                      pytest.param(torch.bfloat16, id="bf16")])
@pytest.mark.parametrize("case", [("triton_mm", TRITON_MM[1]), ("splitk", SPLITK[0]),
                                  ("splitk", SPLITK[1]), ("decompose_k", DecomposeKConfig(2)),
                                  ("aten", AtenConfig())], ids=cid)
def test_fp32_output(case, in_dtype, operand):
    family, cfg = case
    m, n, k = 17, 31, 256
    a, b = operand(m, k, "row", in_dtype), operand(k, n, "col", in_dtype)
    out = run_family(family, cfg, a, b, out_dtype=torch.float32)
    assert out.dtype == torch.float32
    # With an fp32 output the only rounding left is the fp32 accumulation, so the error
    # must sit far under the 16-bit output rounding: a hidden cast to 16 bits fails here.
    assert_close(out, a, b)


@pytest.mark.parametrize("case", [("triton_mm", TRITON_MM[1]), ("splitk", SPLITK[0]),
                                  ("splitk", SPLITK[1]), ("decompose_k", DecomposeKConfig(4)),
                                  ("aten", AtenConfig())], ids=cid)
def test_writes_only_its_output(case, operand):
    """Output is a strided window of a NaN buffer: every element inside gets written,
    nothing outside does (masked stores at the ragged edges)."""
    family, cfg = case
    m, n, k = 19, 37, 512
    a, b = operand(m, k), operand(k, n)
    big = torch.full((m + 3, n + 5), float("nan"), dtype=a.dtype, device=a.device)
    out = big[1:m + 1, 2:n + 2]
    kernels.get(family).run(a, b, out, cfg)
    assert_close(out, a, b)
    outside = big.clone()
    outside[1:m + 1, 2:n + 2] = 0
    assert torch.isnan(outside).sum() == big.numel() - m * n


# ------------------------------------------------------------------ split-K specifics
@pytest.mark.parametrize("split", [2, pytest.param(5, marks=pytest.mark.slow), pytest.param(16, marks=pytest.mark.slow)])
def test_splitk_deterministic_is_bitwise_reproducible(split, operand):
    # M = 17: two row tiles, the second ragged (was 37, three; the interpreter's time is per program)
    a, b = operand(17, 300, dtype=torch.float32), operand(300, 29, dtype=torch.float32)
    cfg = SplitKConfig(16, 16, 16, 2, 2, 8, split, True)
    ws = SplitKWorkspace()
    first = run_family("splitk", cfg, a, b, workspace=ws)
    second = run_family("splitk", cfg, a, b, workspace=ws)
    third = run_family("splitk", cfg, a, b)  # a fresh workspace gives the same bits
    assert torch.equal(first, second) and torch.equal(first, third)
    assert_close(first, a, b)


def _assert_workspace_clean(ws: SplitKWorkspace, dev) -> None:
    """The kernel leaves counters and the atomic accumulator at zero for the next launch."""
    locks = ws.counters(1, dev)
    assert int(locks.count_nonzero()) == 0, f"arrival counters not reset: {locks.nonzero().tolist()}"
    acc = ws.partials(1, False, dev)
    assert int(acc.count_nonzero()) == 0, "atomic-mode accumulator not left zeroed"


def test_splitk_workspace_reused_across_calls_and_shapes(operand):
    ws = SplitKWorkspace()
    # Grows (bigger M*N, more tiles), shrinks (leftovers in a larger buffer), mixes modes. The
    # grown shape is 37 x 67 (3 x 3 tiles of 16 x 32 against 17 x 31's 2 x 1; was 70 x 90, 5 x 3).
    shapes = [(17, 31, 257), (17, 31, 257), (37, 67, 300), (5, 7, 200), (17, 31, 257), (1, 1, 129)]
    for det in (True, False, True):
        for m, n, k in shapes:
            cfg = SplitKConfig(16, 32, 32, 2, 4, 8, 4, det)
            a, b = operand(m, k), operand(k, n)
            assert_close(run_family("splitk", cfg, a, b, workspace=ws), a, b)
            _assert_workspace_clean(ws, a.device)


def test_splitk_workspace_keeps_what_it_replaces_and_grows_by_doubling():
    """A buffer replaced by a larger one stays allocated (a captured CUDA graph may still write
    there), and growth at least doubles, so what is kept never exceeds the live buffer."""
    ws, cpu = SplitKWorkspace(), torch.device("cpu")
    first = ws.partials(100, True, cpu)
    assert ws.partials(80, True, cpu) is first and ws.retired_bytes == 0
    second = ws.partials(120, True, cpu)
    assert second.numel() == 200 and ws.retired_bytes == 400
    assert any(t is first for t in ws._retired)
    assert ws.partials(150, True, cpu) is second  # room left from doubling: no new buffer
    for numel in range(201, 5000, 37):
        ws.partials(numel, True, cpu)
    live = ws.partials(1, True, cpu)
    assert ws.retired_bytes <= live.numel() * live.element_size()
    # The modes keep separate buffers (mode 1 leaves partials, mode 2 needs zeros); counters too.
    assert ws.partials(1, False, cpu) is not live and ws.counters(1, cpu).dtype == torch.int32


def test_splitk_workspace_under_capture_borrows_an_eagerly_zeroed_buffer(monkeypatch):
    """Inside a capture a launch takes a buffer some eager launch has zeroed (its own stream's,
    else the default stream's, else any); only where none is large enough does it allocate one,
    zeroed later by the first eager launch on that stream. (Streams and captures stubbed: CPU.)"""
    from gemmtune.kernels import splitk
    state = {"stream": 7, "capturing": False}
    monkeypatch.setattr(splitk, "stream_key", lambda device: state["stream"])
    monkeypatch.setattr(splitk, "_capturing", lambda device: state["capturing"])
    monkeypatch.setattr(splitk, "_default_stream_key", lambda device: 0)
    ws, cpu = SplitKWorkspace(), torch.device("cpu")
    side = ws.partials(100, True, cpu)           # warm-up on side stream 7
    state["stream"] = 0
    default = ws.partials(100, True, cpu)        # an eager call on the default stream
    assert default is not side                   # streams never share eagerly
    state.update(stream=9, capturing=True)       # capture on stream 9
    assert ws.partials(80, True, cpu) is default  # borrowed: the default stream's first
    big = ws.partials(500, True, cpu)            # nothing large enough: allocated in the capture
    assert big.numel() == 500 and ws.partials(500, True, cpu) is big
    big.fill_(3.0)                               # stands for memory its fill node has not zeroed yet
    # A second capture before any eager launch (no warm-up) takes the same buffer, and zeroes it in
    # its own graph: that graph may replay before the first one's fill node ever ran.
    assert ws.partials(500, True, cpu) is big and int(big.count_nonzero()) == 0
    big.fill_(3.0)
    state["capturing"] = False
    assert ws.partials(500, True, cpu) is big and int(big.count_nonzero()) == 0  # zeroed eagerly
    state["stream"] = 7
    assert ws.partials(100, True, cpu) is side and ws.retired_bytes == 0


def test_splitk_workspace_through_matmul(operand):
    ws = SplitKWorkspace()
    for m, n, k in [(33, 17, 512), (8, 64, 384), (33, 17, 512)]:
        a, b = operand(m, k), operand(k, n)
        for mode in ("det", "atomic"):
            out = gemmtune.matmul(a, b, choice=f"splitk:BM32-BN32-BK64-S2-W4-G8-SK4-{mode}",
                                  workspace=ws)
            assert_close(out, a, b)
    _assert_workspace_clean(ws, a.device)


def test_splitk_split_larger_than_k_blocks(operand):
    """split_k above cdiv(K, BLOCK_K): slices round up to whole blocks, fewer run."""
    a, b = operand(20, 40), operand(40, 12)
    for det in (True, False):
        cfg = SplitKConfig(16, 16, 16, 2, 2, 8, 64, det)
        assert_close(run_family("splitk", cfg, a, b), a, b)


@pytest.mark.parametrize("det", [True, False], ids=["det", "atomic"])
def test_splitk_hundreds_of_slices_on_one_tile(det, operand):
    """More than 128 K-slices (the split space goes to 1024 on one or two tiles over a very long K):
    300 slices of a ragged K = 38,405 on one 16x16 tile, the last slice short; every
    partial arrives, the counters and the accumulator are left at zero."""
    a, b = operand(3, 38405, dtype=torch.float32), operand(38405, 5, dtype=torch.float32)
    ws = SplitKWorkspace()
    cfg = SplitKConfig(16, 16, 128, 2, 2, 8, 300, det)
    assert_close(run_family("splitk", cfg, a, b, workspace=ws), a, b)
    _assert_workspace_clean(ws, a.device)


def test_splitk_space_goes_past_128_slices_only_for_a_few_tiles():
    from gemmtune.kernels import splitk_spec
    h100 = DeviceInfo.lookup("h100")
    few = gemmtune.space(Problem.from_sizes(2, 2, 1000003, "bf16"), "splitk", device="h100")
    assert {c.config.split_k for c in few} >= {256, 512, 1024}
    many = gemmtune.space(Problem.from_sizes(200, 200, 20000, "bf16"), "splitk", device="h100")
    assert max(c.config.split_k for c in many) <= splitk_spec.MANY_SPLITS
    # 4 tiles of 32x32 x 256 slices is over one program per SM: refused with the reason.
    why = splitk_spec.constraint(SplitKConfig(32, 32, 128, 4, 4, 8, 256, False),
                                 Problem.from_sizes(64, 64, 1 << 20, "bf16"), h100)
    assert "more than 128 K-slices" in why
    # One tile, but a K of 65,536 leaves 128 slices of 512: more of them lost there (0.81x, H100).
    short = gemmtune.space(Problem.from_sizes(64, 64, 65536, "bf16"), "splitk", device="h100")
    assert max(c.config.split_k for c in short) <= splitk_spec.MANY_SPLITS


# ------------------------------------------------------------------ end to end
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("choice", [
    "aten", "triton_mm:BM32-BN32-BK32-S2-W4-G8", "triton_mm:BM128-BN128-BK64-S2-W8-G1",
    "splitk:BM32-BN32-BK64-S3-W4-G8-SK8-det", "splitk:BM32-BN32-BK64-S3-W4-G8-SK8-atomic",
    "decompose_k:s4"])
def test_matmul_end_to_end(choice, dtype, operand):
    a, b = operand(23, 512, "col", dtype), operand(512, 41, "strided", dtype)
    out = gemmtune.matmul(a, b, choice=choice)
    assert out.shape == (23, 41) and out.dtype == dtype and out.device == a.device
    assert_close(out, a, b)
    # A Choice object means the same as its id (atomic split-K may round differently per run).
    again = gemmtune.matmul(a, b, choice=Choice.parse(choice))
    if "atomic" in choice:
        assert_close(again, a, b)
    else:
        assert torch.equal(again, out)


@pytest.mark.parametrize("choice", [None, "aten", "triton_mm:BM64-BN64-BK32-S2-W4-G8",
                                    "splitk:BM16-BN16-BK64-S2-W4-G8-SK4-det", "decompose_k:s2"])
def test_matmul_out_dtype_float32(choice, operand):
    a, b = operand(31, 256, "offset"), operand(256, 17, "col")
    out = gemmtune.matmul(a, b, choice=choice, out_dtype=torch.float32)
    assert out.dtype == torch.float32
    assert_close(out, a, b)
    out2 = gemmtune.matmul(a, b, choice=choice, out_dtype="fp32")
    assert torch.equal(out, out2)


@pytest.mark.parametrize("allow_tf32", [False, True])
def test_matmul_fp32(allow_tf32, operand):
    a, b = operand(45, 300, dtype=torch.float32), operand(300, 33, dtype=torch.float32)
    out = gemmtune.matmul(a, b, choice="triton_mm:BM32-BN32-BK64-S2-W4-G8", allow_tf32=allow_tf32)
    ref = torch.mm(a.double(), b.double())
    tol = 5e-3 if allow_tf32 else TOL[(torch.float32, torch.float32)]
    res = compare(out, ref, tol)
    assert res.ok, res.reason


INTERPRETED = pytest.mark.skipif(ON_GPU, reason="the Triton interpreter runs CPU tensors only where there is no GPU")


@INTERPRETED
def test_matmul_from_threads_in_the_interpreter_matches_fp64():
    """Kernels interpreted in two threads at once corrupt each other (the interpreter patches
    triton.language while one runs). gemmtune.matmul took no lock: 4-8 threads of it raised
    InterpreterError ("x >= grid_dim[0]", "Did you forget to add @triton.jit ?") on most calls
    and returned wrong products on some, every run."""
    import threading

    start, results, errors = threading.Barrier(6), [], []

    def worker(i):
        g = torch.Generator().manual_seed(i)
        start.wait()
        for j in range(2):
            m = 17 + 7 * i + j  # other grids in each thread
            a, b = torch.randn(m, 48, generator=g), torch.randn(48, 40, generator=g)
            try:
                results.append((a, b, gemmtune.matmul(a, b, choice="triton_mm:BM16-BN16-BK16-S1-W2-G8")))
            except Exception as e:  # collected: an exception in a thread would be lost
                errors.append(f"{type(e).__name__}: {e}"[:200])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 12
    for a, b, out in results:
        assert_close(out, a, b)


@INTERPRETED
@pytest.mark.parametrize("choice", ["triton_mm:BM16-BN16-BK16-S1-W2-G8", "pad+triton_mm:BM16-BN16-BK16-S1-W2-G8",
                                    "splitk:BM16-BN16-BK16-S1-W2-G8-SK2-det", "decompose_k:s2"])
def test_every_interpreted_launch_outside_a_dispatcher_holds_the_interpreter_lock(monkeypatch, choice):
    """The threaded race above shows only some of the time in a given run; this says it always:
    each family's launch from gemmtune.matmul runs with the dispatcher's interpreter lock held."""
    from gemmtune.dispatch.common import _INTERP_LOCK

    fam = kernels.get(Choice.parse(choice).family)
    real, held = fam.run, []

    def run(*args, **kwargs):
        held.append(_INTERP_LOCK._is_owned())
        return real(*args, **kwargs)
    monkeypatch.setattr(fam, "run", run)
    a, b = torch.randn(20, 32), torch.randn(32, 24)
    assert_close(gemmtune.matmul(a, b, choice=choice), a, b)
    assert held == [True]
    assert not _INTERP_LOCK._is_owned()  # and let go after


def test_matmul_default_choice_picks_splitk_for_long_k(operand):
    """32x32x4096-like shapes (small output, long K) go to split-K by default: check that
    this path runs and is right, not only that it is picked."""
    a, b = operand(16, 4096), operand(4096, 16)
    p = Problem.from_tensors(a, b)
    assert gemmtune.default_choice(p).family == "splitk"
    assert_close(gemmtune.matmul(a, b), a, b)


def test_matmul_default_choice_aten_elsewhere(operand):
    a, b = operand(40, 64), operand(64, 50)
    assert gemmtune.default_choice(Problem.from_tensors(a, b)).family == "aten"
    assert_close(gemmtune.matmul(a, b), a, b)


@pytest.mark.parametrize("choice", ["aten", "triton_mm:BM32-BN32-BK32-S2-W4-G8",
                                    "splitk:BM32-BN32-BK32-S2-W4-G8-SK2-det", "decompose_k:s1"])
def test_matmul_empty_dims(choice, operand):
    a, b = operand(5, 0), operand(0, 7)
    out = gemmtune.matmul(a, b, choice=choice)
    assert out.shape == (5, 7) and torch.equal(out, torch.zeros_like(out))
    assert gemmtune.matmul(operand(0, 9), operand(9, 7), choice=choice).shape == (0, 7)
    assert gemmtune.matmul(operand(5, 9), operand(9, 0), choice=choice).shape == (5, 0)


# ------------------------------------------------------------------ pad+ choices
def test_padded_problem_rounds_n_and_k_to_16_bytes():
    p = Problem.from_sizes(333, 4097, 1025, "bf16")
    assert not (p.aligned_a and p.aligned_b)
    q = p.padded()
    assert (q.m, q.n, q.k) == (333, 4104, 1032) and q.aligned_a and q.aligned_b
    assert kernels.padded_sizes(333, 4097, 1025, 2) == (333, 4104, 1032)
    assert kernels.padded_sizes(7, 5, 3, 4) == (7, 8, 4)  # fp32: 4 elements per 16 B
    assert Problem.from_sizes(64, 64, 64, "fp16").padded().k == 64  # already whole vectors


@pytest.mark.parametrize("choice", ["pad+aten", "pad+triton_mm:BM32-BN32-BK32-S2-W4-G8",
                                    "pad+splitk:BM32-BN32-BK64-S2-W4-G8-SK4-det",
                                    "pad+decompose_k:s4"])
def test_padded_choices(choice, operand):
    c = Choice.parse(choice)
    assert c.pad and c.id == choice and Choice.parse(c.id) == c
    # K=259 and N=21 are not whole 16-byte vectors: both get zero padding.
    a, b = operand(13, 259, "offset"), operand(259, 21, "strided")
    a_before, b_before = a.clone(), b.clone()
    out = gemmtune.matmul(a, b, choice=choice)
    assert_close(out, a, b)
    assert torch.equal(a, a_before) and torch.equal(b, b_before)  # inputs untouched
    assert torch.equal(out, gemmtune.matmul(a, b, choice=c))


def test_compile_only_compiles_without_launching(monkeypatch):
    """Compile workers use Triton's warmup (compile, no launch); anything warmup cannot do
    falls back to an ordinary launch, so a real compile error still surfaces."""
    from gemmtune.kernels import tiled

    calls = []

    class FakeKernel:
        def __init__(self, warmup_error=None):
            self.warmup_error = warmup_error

        def warmup(self, *args, grid, **kw):
            calls.append(("warmup", grid))
            if self.warmup_error:
                raise self.warmup_error
            return "compiled"

        def __getitem__(self, grid):
            return lambda *args, **kw: calls.append(("launch", grid))

    monkeypatch.setattr(tiled, "_INTERPRETED", False)
    k = FakeKernel()
    tiled._launch(k, (4, 1), (1, 2), {"BLOCK": 16})
    assert calls == [("launch", (4, 1))]  # outside the block: an ordinary launch
    calls.clear()
    with tiled.compile_only():
        assert tiled._launch(k, (4, 1), (1, 2), {"BLOCK": 16}) == "compiled"
    assert calls == [("warmup", (4, 1))]
    calls.clear()
    with tiled.compile_only():
        tiled._launch(FakeKernel(TypeError("no warmup here")), (2,), (), {})
    assert calls == [("warmup", (2,)), ("launch", (2,))]
    assert tiled._COMPILE_ONLY.get() is False  # the mode ends with the block


def test_compile_op_skips_cublas():
    from gemmtune.bench.runner import WorkerState, handle

    p = Problem.from_sizes(8, 8, 8, "fp32")
    state = WorkerState()
    assert handle("compile", {"problem": p.key, "choice": "aten"}, state) == {"status": "ok"}
    assert state.key is None  # no inputs were even made


@pytest.mark.parametrize("choice", ["triton_mm:BM16-BN16-BK16-S1-W2-G8", "splitk:BM16-BN16-BK32-S2-W4-G8-SK4-det",
                                    "decompose_k:s4", "skinny:BM16-BN16-BK64-SK2-S2-W4-dot-det"])
def test_bf16_matmul_is_right_in_the_interpreter_too(choice, operand):
    """The issue's reproduction: bf16 through every Triton family, compared with fp64 (it
    returned ~1e11 in the interpreter before the kernels upcast bf16 dot operands there)."""
    a, b = operand(8, 256, dtype=torch.bfloat16), operand(256, 8, dtype=torch.bfloat16)
    assert_close(gemmtune.matmul(a, b, choice=choice), a, b)


def test_cpu_tensors_without_interpreter_fall_back_to_aten_once(monkeypatch, recwarn):
    import gemmtune.api as api
    monkeypatch.setattr(api, "interpreter_enabled", lambda: False)
    monkeypatch.setattr(api, "_CPU_NOTED", False)
    a, b = torch.randn(32, 4096), torch.randn(4096, 32)  # the heuristic picks split-K here
    assert api.default_choice(gemmtune.Problem.from_tensors(a, b)).family == "splitk"
    out = api.matmul(a, b)
    torch.testing.assert_close(out, a @ b)
    api.matmul(a, b)
    notes = [w for w in recwarn if "runs as aten" in str(w.message)]
    assert len(notes) == 1 and "TRITON_INTERPRET=1" in str(notes[0].message)
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        api.matmul(a, b, choice="splitk:BM32-BN32-BK128-S4-W4-G8-SK4-det")


@pytest.mark.skipif(ON_GPU, reason="the CPU's one wave (INTERPRETER_WAVE) decides the modes here; the GPU runs "
                    "both paths in test_gpu.py and scripts/determinism_check.py")
def test_splitk_deterministic_paths_and_the_cooperative_fallback(monkeypatch, operand):
    """The deterministic split-K takes SPLIT_MODE 3 when one wave holds its grid, else 1 (CPU: a
    wave of kernels.splitk.INTERPRETER_WAVE programs), both within tolerance and bitwise stable; a
    cooperative launch the GPU refuses (fewer SMs than counted) is made the mode-1 way instead."""
    from gemmtune.kernels import splitk, tiled
    a, b = operand(33, 700, "row", torch.float32), operand(700, 21, "col", torch.float32)
    small = SplitKConfig(32, 32, 32, 2, 4, 8, 4, True)  # 1 tile x 4 splits: mode 3
    large = SplitKConfig(16, 16, 32, 2, 4, 8, 8, True)  # 6 tiles x 8 splits = 48 > 16: mode 1
    modes = []
    real = tiled.launch_tiled

    def spy(*args, **kw):
        modes.append(kw.get("split_mode"))
        return real(*args, **kw)
    monkeypatch.setattr(splitk, "launch_tiled", spy)
    for cfg, want in ((small, 3), (large, 1)):
        modes.clear()
        first = run_family("splitk", cfg, a, b)
        assert modes == [want]
        assert_close(first, a, b)
        assert torch.equal(first, run_family("splitk", cfg, a, b))

    def refuse(*args, **kw):
        if kw.get("split_mode") == 3:
            raise RuntimeError("Triton Error [CUDA]: too many blocks in cooperative launch")
        return spy(*args, **kw)
    monkeypatch.setattr(splitk, "launch_tiled", refuse)
    modes.clear()
    assert_close(run_family("splitk", small, a, b), a, b)
    assert modes == [1]
    with pytest.raises(RuntimeError, match="out of memory"):  # any other error is not swallowed
        monkeypatch.setattr(splitk, "launch_tiled", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("out of memory")))
        run_family("splitk", small, a, b)


@pytest.mark.parametrize("sms", [None, 132])
@pytest.mark.parametrize("S,M,N", [(1, 1, 1), (5, 7, 13), (17, 32, 32), (112, 32, 32), (3, 33, 65)])
def test_sum_splits_spreads_the_sum_and_matches_fp64(monkeypatch, sms, S, M, N):
    """DecomposeK's second launch: outputs dealt to about one program per SM, up to 16 slices loaded
    at once (tiled.sum_blocks); the sum matches fp64 whatever S's remainder, and gives the same bits
    on every call (a fixed tree)."""
    from gemmtune.kernels import tiled

    monkeypatch.setattr(tiled, "gpu_sm_count", lambda device: sms)
    g = torch.Generator().manual_seed(S * 1000 + M)
    ws = torch.randn(S, M, N, generator=g, dtype=torch.float32)
    out = torch.empty(M, N, dtype=torch.float16)
    tiled.launch_sum_splits(ws, out)
    want = ws.double().sum(0)
    torch.testing.assert_close(out.double(), want, rtol=2e-3, atol=2e-3)
    again = torch.empty_like(out)
    tiled.launch_sum_splits(ws, again)
    assert torch.equal(out, again)
    block, block_s = tiled.sum_blocks(S, M * N, sms)
    assert 32 <= block <= 1024 and 1 <= block_s <= 16 and block * block_s <= 4096


def test_direct_and_relaunch_freeze_the_same_arguments():
    """tiled.direct and relaunch.relaunch take the compiled runner and the whole argument list from
    one helper (relaunch.runner_and_args): positional args, then constexprs in parameter order,
    the grid padded to 3-D; a kernel whose parameters are not those gives None."""
    from gemmtune.kernels import tiled
    from gemmtune.kernels.launch_args import N_POINTERS
    from gemmtune.kernels.relaunch import relaunch, runner_and_args

    names = [f"p{i}" for i in range(N_POINTERS)] + ["M", "N", "BLOCK", "SPLIT"]

    class Fn:
        arg_names = names

    calls = []

    class Kernel:
        def __getitem__(self, grid):
            return lambda *args: calls.append((grid, args))

    a, b = torch.randn(4, 6), torch.randn(6, 5)
    c = torch.empty(4, 5)
    args = (a, b, c, *["x"] * (N_POINTERS - 3), 4, 5)
    consts = {"SPLIT": 1, "BLOCK": 64}  # given out of parameter order
    runner, full = runner_and_args(Fn, Kernel(), (2, 3), args, consts)
    assert full[N_POINTERS:] == [4, 5, 64, 1]
    d = tiled.direct(Fn, Kernel(), (2, 3), args, consts, a, b, None, None)
    d(a, b, c)
    assert calls[-1] == ((2, 3, 1), (a, b, c, c, c, c, c, c, c, 4, 5, 64, 1))
    r = relaunch(Fn, Kernel(), (7,), args, consts, slots=range(3))
    r(a, b, c)
    assert calls[-1][0] == (7, 1, 1) and calls[-1][1][:3] == (a, b, c) and calls[-1][1][N_POINTERS:] == (4, 5, 64, 1)

    class Other:
        arg_names = names[:-1]
    assert runner_and_args(Other, Kernel(), (1,), args, consts) is None
    assert tiled.direct(Fn, None, (1,), args, consts, a, b, None, None) is None
