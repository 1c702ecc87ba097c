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
                   r"_persistent_kernel|_sum_splits_kernel|decompose_k|splitk|_skinny_fold_kernel", re.IGNORECASE)


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
    >>> kernel_class("_skinny_fold_kernel")  # the norm fold's strip (gemmtune.normfold)
    'gemm'
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


def weight_bytes(model) -> int:
    """Bytes of the weights a forward's GEMMs must read at least once: every ``nn.Linear``'s and
    HF ``Conv1D``'s weight, each byte counted once: a weight shared by two layers, and a fused
    group's members (row blocks of the fused layer's weight, ``gemmtune.fuse``) beside that fused
    layer, are one range of one storage.

    >>> import torch
    >>> m = torch.nn.Sequential(torch.nn.Linear(8, 4, bias=False), torch.nn.Linear(8, 4, bias=False))
    >>> m[1].weight = m[0].weight
    >>> weight_bytes(m)  # one 4 x 8 fp32 weight
    128
    """
    import torch

    from ..modeltune import is_conv1d
    ranges: dict[int, list[tuple[int, int]]] = {}
    for m in model.modules():
        w = getattr(m, "weight", None)
        if isinstance(w, torch.Tensor) and w.numel() and (isinstance(m, torch.nn.Linear) or is_conv1d(m)):
            start = w.storage_offset() * w.element_size()
            ranges.setdefault(w.untyped_storage().data_ptr(), []).append((start, start + w.numel() * w.element_size()))
    total = 0
    for spans in ranges.values():  # the union of each storage's ranges
        end = -1
        for a, b in sorted(spans):
            total += max(0, b - max(a, end))
            end = max(end, b)
    return total


def decode_floor(nbytes: int, read_gbps: float) -> dict:
    """The GEMM floor of a decode step (a few tokens: reading the weights bounds its GEMMs, their
    FLOPs do not): ``nbytes`` of weights at the measured read bandwidth, in µs.

    >>> decode_floor(2_470_000_000, 4000.0)["us"]
    617.5
    """
    return {"us": nbytes / (read_gbps * 1e3), "bytes": nbytes, "read_gbps": read_gbps}


def profile_graphs(out: dict, replays: dict, phases: list[str], model_name: str,
                   log: Callable[[str], None], n: int = 20, floors: dict | None = None) -> None:
    """Every graph mode's replay of each phase profiled (``profile_replay``), recorded as
    ``out['graph_profile'][phase][mode]``, with one log line per mode; an un-graphed mode's call
    is profiled the same way (``replays`` maps (mode, phase) to any callable). ``floors``: per
    phase, a ``decode_floor`` the step's GEMM time is reported against (``gemm_pct_floor``)."""
    res = out.setdefault("graph_profile", {})
    for (mode, p), fn in replays.items():
        if p not in phases:
            continue
        try:
            r = profile_replay(fn, n)
        except Exception as e:  # a profiler that cannot start must not lose the timings
            log(f"{model_name} profile {mode} {p}: not profiled ({type(e).__name__}: {e})")
            continue
        floor = (floors or {}).get(p)
        if floor is not None and r["gemm_us"] > 0:
            r["floor"] = floor
            r["gemm_pct_floor"] = 100.0 * floor["us"] / r["gemm_us"]
        res.setdefault(p, {})[mode] = r
        log(f"{model_name} profile {mode:24s} {p:16s} {r['us']:8.1f} us/replay: gemm {r['gemm_us']:.1f}, "
            f"other {r['other_us']:.1f}, {r['kernels']:.0f} kernels"
            + (f"; GEMMs at {r['gemm_pct_floor']:.0f}% of the HBM floor ({floor['us']:.1f} us: "
               f"{floor['bytes'] / 1e9:.2f} GB of weights at {floor['read_gbps']:.0f} GB/s read, measured)"
               if "gemm_pct_floor" in r else ""))


def markdown_rows(gp: dict, top: int = 6) -> list[str]:
    """The report's lines for ``out['graph_profile']``: per phase, a table of modes with their
    per-replay GEMM/other device time and heaviest kernels."""
    L: list[str] = []
    for p, modes in gp.items():
        floor = next((r["floor"] for r in modes.values() if "floor" in r), None)
        L += [f"Kernel profile, {p} (device µs per replay, torch.profiler over the graph; per call for an "
              "un-graphed mode; "
              "'gemm' by kernel name, an M=1 mm that Inductor lowers to a reduction included"
              + (f"; the GEMMs' HBM floor {floor['us']:.1f} µs: {floor['bytes'] / 1e9:.2f} GB of weights read "
                 f"once at {floor['read_gbps']:.0f} GB/s, the read bandwidth measured in this run" if floor else "")
              + "):", "",
              "| mode | total µs | gemm µs | gemm % of floor | other µs | kernels | heaviest |",
              "|---|---|---|---|---|---|---|"]
        for mode, r in modes.items():
            heavy = "; ".join(f"`{k['name'][:48]}` {k['us']:.1f} ({k['per_replay']:.0f}×)" for k in r["top"][:top])
            pct = f"{r['gemm_pct_floor']:.0f}%" if "gemm_pct_floor" in r else "—"
            L.append(f"| {mode} | {r['us']:.1f} | {r['gemm_us']:.1f} | {pct} | {r['other_us']:.1f} | {r['kernels']:.0f} "
                     f"| {heavy} |")
        if any("pdl" in mode for mode in modes):
            L += ["", PDL_NOTE]
        L.append("")
    return L


# Seen on the H200 (session 43): Llama-1B's `silu(gate) * up` kernel, 1.1 us a launch without PDL,
# profiled at 5.7 us in the PDL step, whose replay was nonetheless 7% faster.
PDL_NOTE = ("With PDL (a `_pdl` mode) a kernel starts before the one it depends on has finished and "
            "waits inside itself, and the profiler counts that wait as its time: its kernels and totals "
            "read high. The interleaved replay times above compare the steps.")


__all__ = ["kernel_class", "aggregate", "profile_replay", "profile_graphs", "markdown_rows", "weight_bytes",
           "decode_floor"]
