"""Config-space bug hunt (s55): properties every family's space keeps across GPUs and dtypes.

Each test failed before its fix:
- fp8 (scaled_mm) spaces on an sm_80 GPU listed Triton configs, which cannot compile there (Triton
  and cuBLASLt take fp8 e4m3 from sm_89 on): every family now rejects them with the reason.
- skinny's exhaustive tl.dot configs held up to 256 fp32 accumulators a thread (BM64-BN256-W2),
  past the MAX_ACC_REGS_PER_THREAD the tiled families prune by.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemmtune import kernels
from gemmtune.configs import MAX_ACC_REGS_PER_THREAD, tile_of
from gemmtune.device import DeviceInfo
from gemmtune.kernels import decompose_k_spec
from gemmtune.problem import Problem, element_size

FAMILIES = ("triton_mm", "triton_static", "splitk", "decompose_k", "skinny", "persistent_tma")
H100, A100 = DeviceInfo.lookup("h100"), DeviceInfo.lookup("a100")
# An Ada L4 (sm_89: fp8 tensor cores, no TMA; 99 KB of shared memory a block) and an unknown older GPU.
L4 = DeviceInfo("NVIDIA L4", 58, 101376, 65536, 65536, (8, 9), 48 * 2**20)
OLD = DeviceInfo("Unknown GPU", 20, 49152, 65536, 65536, (7, 5), 4 * 2**20)
DEVICES = (H100, DeviceInfo.lookup("h200"), A100, L4, OLD)

SIZES = st.one_of(st.integers(1, 100_000), st.sampled_from([1, 2, 16, 17, 127, 128, 4096, 4097, 65536, 99991]))


def _problem(m, n, k, dtype, layout_a, layout_b):
    if dtype == "fp8":
        return Problem.from_sizes(m, n, k, "float8_e4m3fn", op="scaled_mm", scale="tensor",
                                  layout_a=layout_a, layout_b=layout_b)
    return Problem.from_sizes(m, n, k, dtype, layout_a=layout_a, layout_b=layout_b)


def _smem(family, cfg, problem):
    """Shared memory a kept config takes, computed as its kernel allocates it."""
    if family == "skinny" and not cfg.dot:
        return 0  # the CUDA-core product runs from registers
    t = decompose_k_spec.tile_for(problem.m, problem.n, problem.k, cfg.split) if family == "decompose_k" \
        else cfg if family == "skinny" else tile_of(cfg)
    need = t.num_stages * (t.block_m * t.block_k + t.block_k * t.block_n) * element_size(problem.dtype)
    if family == "persistent_tma":  # the TMA store's output box beside the operand ring
        need += t.block_m * t.block_n * element_size(problem.out_dtype) // cfg.epi_split
    return need


@settings(max_examples=60, deadline=None, derandomize=True)
@given(m=SIZES, n=SIZES, k=SIZES, dtype=st.sampled_from(["fp16", "bf16", "fp32", "fp8"]),
       layouts=st.sampled_from([("row", "row"), ("row", "col"), ("col", "row")]), pad=st.booleans())
def test_default_spaces_fit_their_device(m, n, k, dtype, layouts, pad):
    p = _problem(m, n, k, dtype, *layouts)
    p = p.padded() if pad else p
    for dev in DEVICES:
        for fam in FAMILIES:
            spec = kernels.spec(fam)
            kept, rejected = spec.space(p, dev)
            assert (kept, rejected) == spec.space(p, dev), (fam, dev.name)  # deterministic, same order
            assert len(set(kept)) == len(kept), (fam, dev.name)
            assert all(why for _, why in rejected), (fam, dev.name)  # a pruned config says why
            if p.dtype.startswith("float8") and dev.capability < (8, 9):
                assert not kept, (fam, dev.name, kept[:2])  # no fp8 tensor cores before sm_89
            if fam == "persistent_tma" and dev.capability < (9, 0):
                assert not kept  # TMA is Hopper's
            for cfg in kept:
                assert spec.constraint(cfg, p, dev) is None, (fam, cfg)
                assert _smem(fam, cfg, p) <= dev.smem_per_block, (fam, cfg, dev.name)


def test_fp8_on_sm80_is_refused_with_the_reason():
    p = _problem(256, 4096, 4096, "fp8", "row", "col")
    for fam in ("triton_mm", "splitk", "decompose_k"):
        kept, rejected = kernels.spec(fam).space(p, A100)
        assert not kept, fam
        assert any("compute capability 8.9" in why for _, why in rejected), fam
        assert kernels.spec(fam).space(p, L4)[0], fam  # sm_89 runs fp8
    small = _problem(8, 4096, 4096, "fp8", "row", "col")
    kept, rejected = kernels.spec("skinny").space(small, A100)
    assert not kept and any("compute capability 8.9" in why for _, why in rejected)
    assert kernels.spec("skinny").space(small, L4)[0]


@settings(max_examples=8, deadline=None, derandomize=True)
@given(m=st.integers(17, 64), n=st.sampled_from([256, 4096, 4097]), k=st.sampled_from([64, 4096]))
def test_skinny_dot_accumulators_fit_registers(m, n, k):
    kept, rejected = kernels.spec("skinny").space(Problem.from_sizes(m, n, k, "bf16"), H100, "exhaustive")
    over = [c.id for c in kept if c.dot and c.block_m * c.block_n // (32 * c.num_warps) > MAX_ACC_REGS_PER_THREAD]
    assert not over, over[:3]
    assert kept
    if m > 32 and n >= 256:  # BLOCK_M 64: a 64x256 tile on 2 warps holds 256 a thread
        assert any("accumulator registers" in why for _, why in rejected)


@given(m=SIZES, n=SIZES, k=SIZES, layouts=st.sampled_from([("row", "col"), ("row", "row"), ("col", "col")]),
       scale=st.sampled_from(["tensor", "row"]))
@settings(max_examples=40, deadline=None)
def test_the_fp8_aten_baseline_is_refused_below_sm89_with_the_reason(m, n, k, layouts, scale):
    """aten's space checked torch._scaled_mm's layout and size rules only: on an sm_80 GPU (no fp8
    tensor cores; cuBLASLt's fp8 GEMM refuses it, as Triton does) it kept cuBLAS for an fp8
    problem, and the plan offered it (and pad+aten) as the baseline. Now the space rejects it with
    the reason below sm_89, and the plan offers it where the device runs fp8."""
    from gemmtune.tuning.plan import candidates

    p = Problem.from_sizes(m, n, k, "float8_e4m3fn", op="scaled_mm", scale=scale, layout_a=layouts[0],
                           layout_b=layouts[1])
    aten = kernels.spec("aten")
    for dev in (A100, OLD):
        kept, rejected = aten.space(p, dev)
        assert not kept and any("compute capability 8.9" in why for _, why in rejected), (dev.name, rejected)
        assert not [c.id for c in candidates(p, ["aten", "triton_mm"], "default", dev) if c.family == "aten"]
    for dev in (L4, H100):
        assert "aten" in [c.id for c in candidates(p, ["aten", "triton_mm"], "default", dev)], dev.name
        kept, rejected = aten.space(p, dev)
        assert all("compute capability" not in why for _, why in rejected)
    bf16 = Problem.from_sizes(m, n, k, "bf16", layout_a=layouts[0], layout_b=layouts[1])
    assert aten.space(bf16, A100)[0] and candidates(bf16, ["aten"], "default", A100)[0].id == "aten"


def test_tune_refuses_fp8_shapes_on_a_gpu_without_fp8_before_any_worker_time():
    # Planned before, with no candidate at all (aten refused below sm_89 too), and the shape
    # ended with no winner and no reason; now the run stops at once, naming shape and reason.
    from gemmtune.shapes import Shape
    from gemmtune.tuning.tuner import refuse_unrunnable
    p = Problem.from_sizes(64, 64, 64, "float8_e4m3fn", op="scaled_mm", scale="tensor", layout_b="col")
    shapes = [Shape("g", f"fp8_{i}", p) for i in range(5)] + [Shape("g", "bf16", Problem.from_sizes(64, 64, 64, "bf16"))]
    with pytest.raises(ValueError, match=r"cannot tune fp8_0, fp8_1, fp8_2 and 2 more on this GPU: fp8 operands "
                                         r"need compute capability 8\.9"):
        refuse_unrunnable(shapes, DeviceInfo.lookup("a100"))
    refuse_unrunnable(shapes, DeviceInfo.lookup("h100"))  # Hopper runs them: nothing raised
    refuse_unrunnable(shapes[-1:], DeviceInfo.lookup("a100"))  # bf16 on an A100: fine
