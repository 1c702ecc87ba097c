"""Config spaces: sizes, ids, scaling, pruning (checked against arithmetic done here), devices.

All pure functions of (problem, device): nothing here touches a GPU.
"""

from __future__ import annotations

import itertools
import math

import pytest
import triton

import gemmtune
from gemmtune import kernels
from gemmtune.device import BUILTIN, DeviceInfo
from gemmtune.kernels import decompose_k, splitk
from gemmtune.problem import Problem, element_size
from gemmtune.configs import (Choice, SplitKConfig, TileConfig, exhaustive_tiles, next_pow2, prune,
                            scale_tile, tile_constraint)

H100 = DeviceInfo.lookup("h100")
H200 = DeviceInfo.lookup("h200")
A100 = DeviceInfo.lookup("a100")
DEVICES = [pytest.param(d, id=d.name) for d in (H100, H200, A100)]
FAMILIES = ["triton_mm", "splitk", "decompose_k", "aten"]

BIG = Problem.from_sizes(4096, 4096, 4096, "bf16")
# Small, ragged, skinny, long-K, fp32 and transposed/unaligned problems.
PROBLEMS = [
    BIG,
    Problem.from_sizes(1, 1, 1, "fp16"),
    Problem.from_sizes(17, 31, 257, "fp16"),
    Problem.from_sizes(32, 32, 28672, "bf16"),
    Problem.from_sizes(1, 6144, 4096, "bf16"),
    Problem.from_sizes(333, 4097, 1025, "bf16", layout_a="col", aligned_b=False),
    Problem.from_sizes(1000, 1000, 1000, "fp32"),
    Problem.from_sizes(64, 64, 65536, "fp16", "fp32"),
    Problem.from_sizes(100, 3, 100, "fp32", allow_tf32=True),
]
PIDS = [p.key for p in PROBLEMS]


def independent_reason(cfg, problem: Problem, device: DeviceInfo) -> str | None:
    """The two documented limits, computed here without gemmtune's helpers:
    operand tiles in shared memory, and fp32 accumulator registers per thread."""
    es = {"float16": 2, "bfloat16": 2, "float32": 4}[problem.dtype]
    smem = cfg.num_stages * (cfg.block_m * cfg.block_k + cfg.block_k * cfg.block_n) * es
    if smem > device.smem_per_block:
        return "smem"
    if cfg.block_m * cfg.block_n / (32 * cfg.num_warps) > 128:
        return "regs"
    return None


# ------------------------------------------------------------------ sizes and ids
def test_default_triton_mm_space_size():
    choices = gemmtune.space(BIG, "triton_mm", device="h100")
    assert 18 <= len(choices) <= 24, len(choices)
    # For a large problem nothing is scaled or pruned away: the whole default list runs.
    assert len(choices) == len(kernels.triton_mm.space(BIG, H100, "default")[0])
    assert all(c.family == "triton_mm" for c in choices)


def test_exhaustive_raw_count():
    tiles = exhaustive_tiles()
    assert len(tiles) >= 1500
    assert len(set(tiles)) == len(tiles)
    for t in tiles:
        for v in (t.block_m, t.block_n, t.block_k):
            assert v >= 16 and v & (v - 1) == 0


@pytest.mark.parametrize("kind", ["default", "exhaustive"])
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("problem", PROBLEMS, ids=PIDS)
def test_ids_unique_and_round_trip(problem, family, kind):
    kept, rejected = gemmtune.space(problem, family, kind, device="h100", with_rejected=True)
    ids = [c.id for c in kept] + [c.id for c, _ in rejected]
    assert len(ids) == len(set(ids)), "duplicate choice ids in one space"
    for c in kept + [c for c, _ in rejected]:
        assert c.id.startswith(family)
        back = Choice.parse(c.id)
        assert back == c and back.id == c.id and hash(back) == hash(c)
        assert Choice.from_params(family, c.config.params()) == c


# ------------------------------------------------------------------ scaling
@pytest.mark.parametrize("problem", PROBLEMS, ids=PIDS)
def test_triton_mm_scaling_bounds(problem):
    kept, rejected = kernels.triton_mm.space(problem, H100, "exhaustive")
    for cfg in kept + [c for c, _ in rejected]:
        for block, dim in ((cfg.block_m, problem.m), (cfg.block_n, problem.n),
                           (cfg.block_k, problem.k)):
            assert 16 <= block <= max(16, next_pow2(dim)), (cfg.id, dim)
        # Warps shrink with the tile: each warp keeps at least a 16x16 accumulator piece.
        assert cfg.num_warps >= 2
        assert cfg.num_warps <= max(2, cfg.block_m * cfg.block_n // 256)


@pytest.mark.parametrize("problem", PROBLEMS, ids=PIDS)
def test_splitk_scaling_bounds(problem):
    kept, rejected = kernels.splitk.space(problem, H100, "exhaustive")
    for cfg in kept + [c for c, _ in rejected]:
        k_len = triton.cdiv(problem.k, cfg.split_k)
        assert 16 <= cfg.block_m <= max(16, next_pow2(problem.m))
        assert 16 <= cfg.block_n <= max(16, next_pow2(problem.n))
        assert 16 <= cfg.block_k <= max(16, next_pow2(k_len))


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (17, 31, 257), (32, 32, 28672), (5000, 3, 70)])
def test_scale_tile_examples(m, n, k):
    p = Problem.from_sizes(m, n, k, "fp16")
    big = TileConfig(256, 256, 256, 3, 8)
    s = scale_tile(big, p)
    assert (s.block_m, s.block_n, s.block_k) == tuple(max(16, min(256, next_pow2(d))) for d in (m, n, k))
    # A config already small enough is left alone.
    small = TileConfig(16, 16, 16, 2, 2)
    assert scale_tile(small, p) == small


def test_next_pow2():
    assert [next_pow2(x) for x in (0, 1, 2, 3, 4, 5, 17, 128, 129, 4097)] == \
        [1, 1, 2, 4, 4, 8, 32, 128, 256, 8192]


# ------------------------------------------------------------------ pruning
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("dev", DEVICES)
def test_prune_rejects_exactly_the_configs_over_the_limits(dev, dtype):
    problem = Problem.from_sizes(4096, 4096, 4096, dtype)  # big: scaling changes nothing
    raw = exhaustive_tiles()
    kept, rejected = prune(raw, problem, dev)
    assert len(kept) + len(rejected) == len(raw)
    want_rejected = {c: r for c in raw if (r := independent_reason(c, problem, dev))}
    assert {c for c, _ in rejected} == set(want_rejected)
    assert kept == [c for c in raw if c not in want_rejected]  # order kept
    assert rejected, "the exhaustive space must contain configs over the limits"
    for cfg, reason in rejected:
        assert isinstance(reason, str) and reason
        if want_rejected[cfg] == "smem":
            assert "shared memory" in reason and str(dev.smem_per_block) in reason, reason
        else:
            assert "register" in reason, reason
    # The same through the public API, which prunes the scaled configs (for this big
    # problem scaling only trims warps of small tiles, then drops the duplicates).
    scaled = list(dict.fromkeys(scale_tile(c, problem) for c in raw))
    choices, rej = gemmtune.space(problem, "triton_mm", "exhaustive", device=dev, with_rejected=True)
    assert [c.config for c in choices] == [c for c in scaled
                                           if independent_reason(c, problem, dev) is None]
    assert [c.config for c, _ in rej] == [c for c in scaled if independent_reason(c, problem, dev)]


def test_prune_drops_duplicates_keeps_order():
    p = Problem.from_sizes(8, 8, 8, "fp16")
    scaled = [scale_tile(c, p) for c in exhaustive_tiles()]
    kept, rejected = prune(scaled, p, H100)
    assert len(kept) + len(rejected) == len(set(scaled)) < len(scaled)
    firsts = list(dict.fromkeys(scaled))
    assert kept == [c for c in firsts if c in set(kept)]


@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (256, 512, 1024)])
def test_a100_prunes_more_than_h100_for_fp32(m, n, k):
    p = Problem.from_sizes(m, n, k, "fp32")
    kept_h, rej_h = gemmtune.space(p, "triton_mm", "exhaustive", device="h100", with_rejected=True)
    kept_a, rej_a = gemmtune.space(p, "triton_mm", "exhaustive", device="a100", with_rejected=True)
    assert len(rej_a) > len(rej_h)
    assert {c.id for c in kept_a} < {c.id for c in kept_h}
    # Every extra A100 rejection is a shared-memory one, inside H100's larger budget.
    for c, reason in rej_a:
        if c not in {x for x, _ in rej_h}:
            assert "shared memory" in reason
            assert A100.smem_per_block < independent_smem(c.config, p) <= H100.smem_per_block


def independent_smem(cfg, problem):
    return cfg.num_stages * (cfg.block_m * cfg.block_k + cfg.block_k * cfg.block_n) * \
        element_size(problem.dtype)


def test_fp32_prunes_more_than_bf16():
    p16 = Problem.from_sizes(4096, 4096, 4096, "bf16")
    p32 = Problem.from_sizes(4096, 4096, 4096, "fp32")
    n16 = len(gemmtune.space(p16, "triton_mm", "exhaustive", device="h100"))
    n32 = len(gemmtune.space(p32, "triton_mm", "exhaustive", device="h100"))
    assert n32 < n16


# ------------------------------------------------------------------ decompose_k
@pytest.mark.parametrize("k,want", [
    (28672, [2, 4, 8, 16, 32, 64, 128, 7, 14, 28, 56, 112, 224]),  # 2^12 * 7
    (4097, [17]),      # 17 * 241: 241 would leave parts of 17 < 128
    (1025, [5]),       # 5^2 * 41: 25 and 41 leave parts < 128
    (100, []),         # shorter than 2 parts of 128
    (256, [2]),
    (384, [2, 3]),
])
def test_decompose_k_candidate_splits(k, want):
    got = decompose_k.candidate_splits(k)
    assert got == want
    # And the rule itself, independently: divisors >= 2 with K/s >= 128, powers of two first.
    divs = [s for s in range(2, k + 1) if k % s == 0 and k // s >= 128]
    pow2 = sorted(s for s in divs if s & (s - 1) == 0)
    assert got == pow2 + sorted(set(divs) - set(pow2))


def test_decompose_k_default_splits_fill_one_wave():
    """default_splits: the candidate splits nearest (in log2) tiles x split = SMs, at most 6,
    ascending, for any device's SM count; no candidates, none."""
    for (m, n, k), sms in [((32, 32, 28672), 132), ((64, 128, 49152), 132), ((200, 200, 20000), 78),
                           ((1, 4096, 14336), 132), ((4096, 4096, 8192), 132)]:
        got = decompose_k.default_splits(m, n, k, sms)
        cands = decompose_k.candidate_splits(k)
        assert got == sorted(got) and set(got) <= set(cands) and len(got) == min(6, len(cands))
        tile = decompose_k.tile_for(m, n, k, cands[0])
        target = max(2.0, sms / (-(-m // tile.block_m) * -(-n // tile.block_n)))
        dist = lambda s: abs(math.log2(s / target))  # noqa: E731
        assert max(map(dist, got)) <= min([dist(s) for s in cands if s not in got], default=math.inf)
    assert decompose_k.default_splits(32, 32, 100, 132) == []


def test_decompose_k_space():
    p = Problem.from_sizes(32, 32, 28672, "bf16")
    ids = [c.id for c in gemmtune.space(p, "decompose_k", device="h100")]
    # default: the 6 splits nearest one wave (one 32x32 tile: 132 programs on an H100's 132 SMs)
    assert ids == [f"decompose_k:s{s}" for s in (32, 56, 64, 112, 128, 224)]
    # many tiles (a 4096^2 output): the smallest splits, as the old first-six rule gave
    assert decompose_k.default_splits(4096, 4096, 8192, 132) == [2, 4, 8, 16, 32, 64]
    ex = gemmtune.space(p, "decompose_k", "exhaustive", device="h100")
    assert [c.config.split for c in ex] == decompose_k.candidate_splits(28672)
    assert gemmtune.space(Problem.from_sizes(32, 32, 100, "bf16"), "decompose_k", device="h100") == []
    # Too many partials: M*N*split*4 B over the workspace cap is rejected with a reason.
    huge = Problem.from_sizes(8192, 8192, 4096, "bf16")
    kept, rej = gemmtune.space(huge, "decompose_k", device="h100", with_rejected=True)
    assert not kept and rej and all("exceed" in r for _, r in rej)


# ------------------------------------------------------------------ splitk
@pytest.mark.parametrize("kind", ["default", "exhaustive"])
@pytest.mark.parametrize("problem", PROBLEMS, ids=PIDS)
def test_splitk_space_honours_constraints(problem, kind):
    kept, rejected = gemmtune.space(problem, "splitk", kind, device="h100", with_rejected=True)
    for ch in kept:
        cfg = ch.config
        assert isinstance(cfg, SplitKConfig) and cfg.split_k >= 2
        assert triton.cdiv(problem.k, cfg.split_k) >= 128  # slices of at least 128
        p = splitk.plan(problem.m, problem.n, problem.k, cfg)  # the launcher's own arithmetic
        assert 4 * problem.m * problem.n * (p["splits"] if cfg.deterministic else 1) <= 256 * 2**20
        assert p["tiles"] * p["splits"] <= 16 * H100.sm_count
        assert independent_reason(cfg, problem, H100) is None
    for ch, reason in rejected:
        assert isinstance(reason, str) and reason
        assert splitk.constraint(ch.config, problem, H100) == reason
    if problem.k < 256:
        assert not kept


def test_splitk_space_for_long_k_has_both_modes():
    p = Problem.from_sizes(32, 32, 28672, "bf16")
    kept = gemmtune.space(p, "splitk", device="h100")
    assert {c.config.deterministic for c in kept} == {True, False}
    assert max(c.config.split_k for c in kept) >= 16


def test_splitk_space_empty_for_huge_output():
    p = Problem.from_sizes(8192, 8192, 8192, "bf16")
    kept, rej = gemmtune.space(p, "splitk", device="h100", with_rejected=True)
    assert not kept and rej


# ------------------------------------------------------------------ api / devices
@pytest.mark.parametrize("family", FAMILIES)
def test_space_on_cpu_for_named_device(family):
    p = Problem.from_sizes(64, 64, 4096, "bf16")
    for dev in ("h200", "NVIDIA H200", H200):
        choices = gemmtune.space(p, family, "default", device=dev)
        assert choices and all(isinstance(c, Choice) for c in choices)
    assert [c.id for c in gemmtune.space(p, family, device="h200")] == \
        [c.id for c in gemmtune.space(p, family, device=H200)]


def test_aten_space_is_one_choice():
    assert [c.id for c in gemmtune.space(BIG, "aten", device="h100")] == ["aten"]


def test_with_rejected_returns_reasons():
    p = Problem.from_sizes(4096, 4096, 4096, "fp32")
    choices, rejected = gemmtune.space(p, "triton_mm", "exhaustive", device="a100", with_rejected=True)
    assert choices and rejected
    for ch, reason in rejected:
        assert isinstance(ch, Choice) and isinstance(reason, str) and len(reason) > 10
        assert tile_constraint(ch.config, p, A100) == reason


def test_space_bad_kind_or_family():
    with pytest.raises(ValueError, match="space kind"):
        gemmtune.space(BIG, "triton_mm", "fancy", device="h100")
    with pytest.raises(ValueError, match="unknown kernel family 'cutlass'"):
        gemmtune.space(BIG, "cutlass", device="h100")
    with pytest.raises(ValueError, match="unknown GPU"):
        gemmtune.space(BIG, "triton_mm", device="tpu-v5")


def test_families():
    assert gemmtune.families() == ["triton_mm", "triton_static", "splitk", "skinny", "persistent_tma", "decompose_k",
                                   "aten"]


@pytest.mark.parametrize("name,want", [
    ("h100", "NVIDIA H100 80GB HBM3"), ("H100", "NVIDIA H100 80GB HBM3"),
    ("NVIDIA H200", "NVIDIA H200"), ("h200", "NVIDIA H200"),
    ("a100", "NVIDIA A100-SXM4-80GB"), ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"),
])
def test_device_lookup(name, want):
    d = DeviceInfo.lookup(name)
    assert d.name == want
    assert d.sm_count > 0 and d.smem_per_block > 48 * 1024 and d.capability >= (8, 0)


def test_device_lookup_unknown_lists_known():
    with pytest.raises(ValueError) as ei:
        DeviceInfo.lookup("rtx 4090")
    msg = str(ei.value)
    assert "rtx 4090" in msg
    for d in BUILTIN:
        assert d.name in msg


def test_device_facts():
    assert H100.smem_per_block == 232448 and A100.smem_per_block == 166912
    assert H100.capability_str == "9.0" and A100.capability_str == "8.0"
    assert H200.sm_count == 132 and A100.sm_count == 108
    d = H100.to_dict()
    assert d["capability"] == [9, 0] and d["name"] == H100.name


# ------------------------------------------------------------------ config ids
@pytest.mark.parametrize("text", [
    "triton_mm:BM128-BN128-BK64-S3-W4-G8", "splitk:BM32-BN32-BK256-S3-W4-G8-SK16-det",
    "splitk:BM16-BN64-BK32-S2-W2-G1-SK3-atomic", "decompose_k:s16", "aten"])
def test_choice_parse_round_trip(text):
    c = Choice.parse(text)
    assert c.id == text and str(c) == text
    assert Choice.parse(c.id) == c


def test_configs_are_frozen_and_hashable():
    cfg = TileConfig(64, 64, 32, 3, 4)
    with pytest.raises(AttributeError):
        cfg.block_m = 128  # type: ignore[misc]
    assert len({cfg, TileConfig(64, 64, 32, 3, 4, 8)}) == 1
    sk = SplitKConfig(64, 64, 32, 3, 4, 8, 4, True)
    assert sk.tile == cfg and sk.id == cfg.id + "-SK4-det"


def test_exhaustive_is_a_product():
    tiles = exhaustive_tiles()
    axes = [sorted({getattr(t, f) for t in tiles}) for f in
            ("block_m", "block_n", "block_k", "num_stages", "num_warps", "group_m")]
    assert len(tiles) == len(list(itertools.product(*axes)))


# The scaled configs are memoised on the powers of two that scaling reads (configs.scaled_configs):
# the spaces must be exactly what scaling and pruning every raw config one by one gives.
MEMO_PROBLEMS = [Problem.from_sizes(m, n, k, dt) for m, n, k, dt in [
    (1, 4096, 4096, "bf16"), (3, 17, 130, "fp16"), (37, 4097, 1025, "bf16"), (960, 384, 1536, "bf16"),
    (200, 200, 20000, "fp32"), (4096, 4096, 4096, "fp16"), (64, 64, 65536, "bf16"), (31, 1000, 257, "fp32")]]


@pytest.mark.parametrize("kind", ["default", "exhaustive"])
@pytest.mark.parametrize("family", ["triton_mm", "splitk"])
def test_memoised_spaces_equal_scaling_each_config(family, kind):
    from gemmtune.configs import fit_stages, fp8_tile
    fam = kernels.get(family)
    dev = DeviceInfo.lookup("h100")
    fp8 = Problem.from_sizes(64, 256, 4096, "e4m3", op="scaled_mm", layout_b="col", scale="tensor", out_dtype="bf16")
    for problem in MEMO_PROBLEMS + [fp8]:
        base = fam.raw_configs(kind)
        if kind == "default":
            base = [fp8_tile(c, problem) for c in base]
        scaled = [scale_tile(c, problem, k_len=-(-problem.k // getattr(c, "split_k", 1))) for c in base]
        if family == "triton_mm" and kind == "default":  # fewer stages where a tile overflows (fp32)
            scaled = [fit_stages(c, problem, dev.smem_per_block) for c in scaled]
        want = prune(scaled, problem, dev, splitk.constraint if family == "splitk" else tile_constraint)
        got = fam.space(problem, dev, kind)
        assert got[0] == want[0] and got[1] == want[1], (family, kind, problem.key)


def _grouped_order(grid_m: int, grid_n: int, group_m: int) -> list[tuple[int, int]]:
    # The pid -> (pid_m, pid_n) map of kernels/tiled.py (and persistent.py's _tile_coords), in Python.
    out = []
    for pid in range(grid_m * grid_n):
        width = group_m * grid_n
        group_id = pid // width
        size = min(grid_m - group_id * group_m, group_m)
        out.append((group_id * group_m + (pid % width) % size, (pid % width) // size))
    return out


@pytest.mark.parametrize("grid_m,grid_n", [(1, 1), (1, 7), (1, 393), (5, 1), (64, 1), (3, 9), (17, 4)])
def test_group_m_orders_nothing_with_one_row_or_column_of_tiles(grid_m, grid_n):
    orders = {g: _grouped_order(grid_m, grid_n, g) for g in (1, 2, 8, 16)}
    for o in orders.values():  # every order visits each tile once
        assert sorted(o) == [(i, j) for i in range(grid_m) for j in range(grid_n)]
    same = all(o == orders[1] for o in orders.values())
    # The premise of configs.canonical_group_m: one row or one column of tiles -> one order.
    assert same == (grid_m == 1 or grid_n == 1)


@pytest.mark.parametrize("family", ["triton_mm", "splitk", "persistent_tma"])
@pytest.mark.parametrize("m,n,k", [(1, 4096, 4096), (16, 50257, 768), (96, 50257, 768), (4096, 8, 1024),
                                   (200, 200, 20000), (1000, 1000, 1000)])
def test_spaces_list_no_group_m_twins(family, m, n, k):
    # Two configs that differ only in GROUP_M are one kernel where the grid has one row or one
    # column of tiles (configs.canonical_group_m): a space lists one of them, with GROUP_M 8.
    problem = Problem.from_sizes(m, n, k, "bf16")
    kept, rejected = kernels.get(family).space(problem, DeviceInfo.lookup("h200"), "exhaustive")
    cfgs = kept + [c for c, _ in rejected]
    ones = [c for c in cfgs if -(-m // c.block_m) == 1 or -(-n // c.block_n) == 1]
    assert all(c.group_m == 8 for c in ones), [c.id for c in ones if c.group_m != 8][:3]
    # ...and keeps both GROUP_M where there is more than one row and column of tiles.
    many = {c.group_m for c in cfgs if -(-m // c.block_m) > 1 and -(-n // c.block_n) > 1}
    assert many <= {1, 8}
    if (m, n) == (1000, 1000) and family == "triton_mm":  # GROUP_M 1 and 8 both listed there
        assert many == {1, 8}
    if m == 1 and family != "persistent_tma":
        assert not many and ones


@pytest.mark.parametrize("m,n,k", [(1, 4096, 4096), (8, 50257, 768), (16, 4096, 64), (3, 100, 100000)])
def test_skinny_space_lists_no_reduction_twins_at_one_k_slice(m, n, k):
    # With one K-slice a skinny config reduces nothing: '-atomic' and '-det' are one kernel
    # (SPLIT_MODE 0, no workspace), so the space keeps the deterministic twin only.
    from gemmtune.kernels.skinny_spec import plan
    problem = Problem.from_sizes(m, n, k, "bf16")
    kept, rejected = kernels.skinny.space(problem, DeviceInfo.lookup("h200"), "exhaustive")
    cfgs = kept + [c for c, _ in rejected]
    one = [c for c in cfgs if not c.stream_k and plan(m, n, k, c)["splits"] == 1]
    assert one and all(c.deterministic for c in one)
    many = [c for c in cfgs if not c.stream_k and plan(m, n, k, c)["splits"] > 1]
    if k >= 4096:  # split configs keep both reductions
        assert {c.deterministic for c in many} == {True, False}


def test_default_tiles_that_overflow_in_fp32_run_with_fewer_stages():
    # configs.fit_stages: fp32's 4-byte elements overflow shared memory where 16-bit ones do not;
    # the tile that won 6 of 9 large 3xTF32 shapes on the H200 (BM128-BN128-BK64 on 8 warps,
    # 5 stages in the list) runs at 3 stages instead of being dropped, while a tile that would fit
    # only at 2 stages stays rejected, with its reason.
    from gemmtune.configs import FIT_MIN_STAGES, smem_bytes
    dev = DeviceInfo.lookup("h200")
    fp32, bf16 = (Problem.from_sizes(4096, 4096, 4096, dt) for dt in ("fp32", "bf16"))
    kept, rejected = kernels.get("triton_mm").space(fp32, dev, "default")
    ids = {c.id for c in kept}
    assert "BM128-BN128-BK64-S3-W8-G8" in ids and "BM128-BN128-BK64-S5-W8-G8" not in ids
    assert all(smem_bytes(c, fp32) <= dev.smem_per_block for c in kept)
    assert FIT_MIN_STAGES == 3
    two_stage_only = {(128, 256, 64), (256, 128, 64)}  # 196 KB at 2 stages, 294 KB at 3
    why = {(c.block_m, c.block_n, c.block_k): r for c, r in rejected}
    assert two_stage_only <= set(why) and all("shared memory" in why[t] for t in two_stage_only)
    # 16-bit operands: every default tile fits as listed, nothing changes
    kept16, _ = kernels.get("triton_mm").space(bf16, dev, "default")
    assert "BM128-BN128-BK64-S5-W8-G8" in {c.id for c in kept16}


@pytest.mark.parametrize("k", [100, 1021, 131071])
def test_decompose_k_space_with_no_split_says_why(k):
    """K shorter than two parts, or prime: decompose_k has no split to try. The space listed nothing,
    kept or rejected, so `gemmtune space` showed an empty family with no reason."""
    kept, rej = gemmtune.space(Problem.from_sizes(32, 32, k, "bf16"), "decompose_k", device="h100",
                               with_rejected=True)
    assert kept == [] and len(rej) == 1
    (ch, reason), = rej
    assert f"K={k} has no divisor split" in reason and ch.config.split == 2
