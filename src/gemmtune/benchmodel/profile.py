"""Where a replayed step's GPU time goes: the kernels of each CUDA-graph mode, by name.

Why: an interleaved replay time says *that* one compiled model is faster than another (on the
H100, Llama-3.2-1B's decode step took 1.517 ms under max-autotune and 1.649 ms patched and
compiled), not *which* kernels make the difference. Max-autotune's log showed it autotuned no
M=1 GEMM of that step, so the gap may sit in the pointwise and reduction kernels that
Inductor's coordinate-descent tuning retunes, or in the GEMMs; this profile tells them apart.

``profile_graphs`` replays each graph mode's step under ``torch.profiler`` (CUPTI records the
kernels a graph launches) and keeps, per mode, the device time per replay split into GEMM and
other kernels, and the heaviest kernels by name. ``aggregate`` and ``kernel_class`` are the pure
parts (tested on the CPU).
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

# A kernel is a GEMM when its name says so. cuBLAS/cuBLASLt kernels carry gemm/gemv/xmma/
# cutlass in their names, newer cuBLAS's Hopper kernels nvjet_* (the H100's with torch 2.11,
# 2026-11-25); Inductor's mm templates are triton_tem_*; gemmtune's Triton families are named
# by their jit functions (kernels/*.py). Inductor lowers an M=1 mm to a multiply + reduction
# kernel and names it after its origin ops: triton_red_fused_..._mm_... (often with the RMSNorm
# before it fused in). Such a kernel reads the whole weight, so it counts as a GEMM: in the H200's
# Llama-3.2-1B decode step under torch.compile (2026-11-29) every M=1 GEMM was one, 830 of
# 1111 us, and by the jit-name rule alone the profile showed 0 us of GEMM. A pointwise kernel
# with mm among its origins (rotary's outer product of positions and frequencies, K = 1) is not.
_GEMM = re.compile(r"gemm|gemv|xmma|cutlass|nvjet|wgmma|triton_tem_|_tiled_mm_kernel|_tiled_mm_static|_skinny_kernel|_strip|_stream_k|"
                   r"_persistent_kernel|_sum_splits_kernel|decompose_k|splitk", re.IGNORECASE)


def kernel_class(name: str) -> str:
    """'gemm' or 'other', by the kernel's name (see ``_GEMM``).

    >>> kernel_class("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1_execute_segment_k_off_kernel__5x_cublas")
    'gemm'
    >>> kernel_class("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0")
    'other'
    >>> kernel_class("triton_red_fused__to_copy_add_mean_mm_mul_pow_rsqrt_t_view_16")
    'gemm'
    >>> kernel_class("triton_poi_fused__to_copy_add_arange_bmm_cat_cos_expand_mm_mul_neg_sin_slice_0")
    'other'
    """
    if _GEMM.search(name):
        return "gemm"
    if name.startswith("triton_red_") and {"mm", "bmm", "addmm"} & set(name.split("_")):
        return "gemm"
    return "other"


def aggregate(events: Iterable[tuple[str, float, int]], replays: int, top: int = 12) -> dict:
    """Per-replay device time from profiler events ``(kernel name, total device µs, count)``
    gathered over ``replays`` replays: the total, the GEMM and other shares, the kernel launches
    per replay, and the ``top`` heaviest kernels (name cut at 90 characters).

    >>> r = aggregate([("gemv_a", 300.0, 30), ("triton_poi_fused_add_0", 100.0, 60)], replays=10)
    >>> r["us"], r["gemm_us"], r["other_us"], r["kernels"]
    (40.0, 30.0, 10.0, 9.0)
    >>> r["top"][0]["name"], r["top"][0]["us"], r["top"][0]["per_replay"]
    ('gemv_a', 30.0, 3.0)
    """
    if replays < 1:
        raise ValueError(f"replays must be >= 1, got {replays}")
    rows = {}
    for name, us, count in events:
        if count <= 0:
            continue
        r = rows.setdefault(name, [0.0, 0])
        r[0] += us
        r[1] += count
    total = sum(us for us, _ in rows.values()) / replays
    gemm = sum(us for name, (us, _) in rows.items() if kernel_class(name) == "gemm") / replays
    heavy = sorted(rows.items(), key=lambda kv: -kv[1][0])[:top]
    return {"us": total, "gemm_us": gemm, "other_us": total - gemm,
            "kernels": sum(c for _, c in rows.values()) / replays,
            "top": [{"name": name[:90], "class": kernel_class(name), "us": us / replays, "per_replay": c / replays}
                    for name, (us, c) in heavy]}


def _device_us(evt) -> float:
    # torch renamed cuda_time_total to device_time_total (2.4); accept both.
    for attr in ("device_time_total", "cuda_time_total"):
        v = getattr(evt, attr, None)
        if v is not None:
            return float(v)
    return 0.0


def profile_replay(replay: Callable[[], object], replays: int = 20, top: int = 200) -> dict:
    """``aggregate`` of ``replays`` replays of one CUDA graph under torch.profiler (GPU only).
    Every kernel is kept (a decode step of Llama-3.2-1B has ~60 distinct ones): telling which
    layer a fused Inductor kernel serves takes the whole list, not the heaviest dozen."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    replay()  # outside the profile: first-replay effects stay out of the numbers
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            replay()
        torch.cuda.synchronize()
    events = [(e.key, _device_us(e), e.count) for e in prof.key_averages()
              if getattr(e, "device_type", None) is not None and "CUDA" in str(e.device_type)]
    return aggregate(events, replays, top)


def profile_graphs(out: dict, replays: dict, phases: list[str], model_name: str,
                   log: Callable[[str], None], n: int = 20) -> None:
    """Every graph mode's replay of each phase profiled (``profile_replay``), recorded as
    ``out['graph_profile'][phase][mode]``, with one log line per mode."""
    res = out.setdefault("graph_profile", {})
    for (mode, p), fn in replays.items():
        if p not in phases:
            continue
        try:
            r = profile_replay(fn, n)
        except Exception as e:  # a profiler that cannot start must not lose the timings
            log(f"{model_name} profile {mode} {p}: not profiled ({type(e).__name__}: {e})")
            continue
        res.setdefault(p, {})[mode] = r
        log(f"{model_name} profile {mode:24s} {p:16s} {r['us']:8.1f} us/replay: gemm {r['gemm_us']:.1f}, "
            f"other {r['other_us']:.1f}, {r['kernels']:.0f} kernels")


def markdown_rows(gp: dict, top: int = 6) -> list[str]:
    """The report's lines for ``out['graph_profile']``: per phase, a table of modes with their
    per-replay GEMM/other device time and heaviest kernels."""
    L: list[str] = []
    for p, modes in gp.items():
        L += [f"Kernel profile, {p} (device µs per replay, torch.profiler over the graph; "
              "'gemm' by kernel name, an M=1 mm that Inductor lowers to a reduction included):", "",
              "| mode | total µs | gemm µs | other µs | kernels | heaviest |", "|---|---|---|---|---|---|"]
        for mode, r in modes.items():
            heavy = "; ".join(f"`{k['name'][:48]}` {k['us']:.1f} ({k['per_replay']:.0f}×)" for k in r["top"][:top])
            L.append(f"| {mode} | {r['us']:.1f} | {r['gemm_us']:.1f} | {r['other_us']:.1f} | {r['kernels']:.0f} "
                     f"| {heavy} |")
        L.append("")
    return L


__all__ = ["kernel_class", "aggregate", "profile_replay", "profile_graphs", "markdown_rows"]
