"""The physical ceilings a shape's floor is measured against: copy, read and write bandwidth, cuBLAS
mm peak per dtype (``measure_ceilings``); saved to and read from a file so that several runs in
one device call measure them once (``--ceilings-file``)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch

from .. import report
from ..problem import DTYPES
from .records import failure_record, time_entry
from .timing import Timing
from ..jsonio import write_atomic

CEILING_N = 8192          # cuBLAS peak: one 8192^3 mm per dtype
COPY_BYTES = 1 << 30      # bandwidth: a 1 GiB device-to-device copy, far beyond the L2
READ_BYTES = 1 << 30      # read bandwidth: kernels that read 1 GiB and write next to nothing
GEMV_K = 16384            # the read ceiling's GEMV: a (READ_BYTES / 2 / GEMV_K) x GEMV_K bf16 matrix
WRITE_BYTES = 1 << 30     # write bandwidth: a kernel that writes 1 GiB and reads next to nothing
FILL_VALUE = 1.5          # what the write ceiling's fill writes; PyTorch allocates with cudaMalloc, not as
                          # compressible memory, so a constant should cost every byte (the rate the copy
                          # implies, report.write_gbps, is the cross-check)


def _bandwidth(name: str, moved: int, t: Timing) -> dict:
    return {"kernel": name, "bytes": moved, "gbps": moved / (t.device_ms * 1e6), **time_entry(t.device_ms, t.spread, t.repeats)}


def _copy_ceiling(timer) -> dict:
    src = torch.empty(COPY_BYTES // 4, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    t = timer.measure(lambda i: dst.copy_(src), 1)
    return _bandwidth("copy_fp32", 2 * COPY_BYTES, t)  # read once, written once


def read_ceiling(timer, nbytes: int = READ_BYTES, device: str = "cuda") -> dict:
    """Read bandwidth: the best of two kernels that read ``nbytes`` and write next to nothing.

    A copy moves as many bytes into memory as out of it, but a GEMV-like GEMM (decode:
    M of 1 to 16) reads its weight matrix and writes a few KB, and HBM reaches a higher
    rate reading alone than reading and writing at once: against the copy's rate such
    kernels beat their 'floor' (cuBLAS 1x6144x4096 bf16 ran at 118% of it on an H200).
    So read-dominated kernels are timed too: ``sum_fp32``, torch.sum of an fp32 tensor of
    ``nbytes`` (bytes read plus the 4 written), and ``gemv_bf16``, torch.mv of a bf16
    matrix of ``nbytes`` (GEMV_K columns) with a vector (matrix + vector read, result
    written). Each rate achieved is a lower bound of what the memory can deliver, so the
    best one is the read ceiling; it is the same kind of lower bound as the copy's and
    the mm peaks. Both are far beyond the L2: every byte comes from HBM.
    """
    return _best_of(_read_kernel, ("sum_fp32", "gemv_bf16"), timer, nbytes, device)


def _best_of(kernel, names: tuple[str, ...], timer, nbytes: int, device: str) -> dict:
    """The fastest of the bandwidth kernels ``names`` (``kernel(name, timer, nbytes, device)`` gives
    each one's bytes and timing), with every one's record under "kernels"."""
    kernels = {name: _bandwidth(name, *kernel(name, timer, nbytes, device)) for name in names}
    best = max(kernels.values(), key=lambda k: k["gbps"])
    return {**best, "kernels": kernels}


def _read_kernel(name: str, timer, nbytes: int, device: str) -> tuple[int, Timing]:
    """(bytes moved, timing) of one read-ceiling kernel; its buffers are freed on return."""
    if name == "sum_fp32":
        x = torch.empty(nbytes // 4, dtype=torch.float32, device=device).normal_()
        acc = torch.empty((), dtype=torch.float32, device=device)
        return x.numel() * 4 + 4, timer.measure(lambda i: torch.sum(x, dim=0, out=acc), 1)  # one full reduction
    rows = max(1, nbytes // 2 // GEMV_K)
    mat = torch.randn(rows, GEMV_K, dtype=torch.bfloat16, device=device)
    vec = torch.randn(GEMV_K, dtype=torch.bfloat16, device=device)
    res = torch.empty(rows, dtype=torch.bfloat16, device=device)
    return (mat.numel() + vec.numel() + res.numel()) * 2, timer.measure(lambda i: torch.mv(mat, vec, out=res), 1)


def write_ceiling(timer, nbytes: int = WRITE_BYTES, device: str = "cuda") -> dict:
    """Write bandwidth: ``fill_fp32``, Tensor.fill_ of an fp32 tensor of ``nbytes`` (every byte
    written, the value a kernel argument: nothing read), timed like the other ceilings (far beyond the L2).

    A shape's minimum bytes count C's write; HBM writes more slowly than it reads (an H200's
    device copy moves ~2.7 TB/s read + written, reading alone ~4.4 TB/s), so counting C at the
    read rate gave write-heavy shapes (M, N large, K small: C most of the bytes) a floor no
    kernel reaches. With this ceiling the floor's memory time is read bytes / read rate + write
    bytes / write rate (``report.roofline_ms``). The rate is a lower bound of what the memory
    can write, as the others are; ``report.write_gbps`` takes the better of it and the write rate
    the device copy implies (the copy is a write kernel too), so the form is read_ceiling's,
    with one kernel (``kernels``) where the copy is the second.
    """
    return _best_of(_write_kernel, ("fill_fp32",), timer, nbytes, device)


def _write_kernel(name: str, timer, nbytes: int, device: str) -> tuple[int, Timing]:
    """(bytes written, timing) of one write-ceiling kernel; its buffer is freed on return."""
    x = torch.empty(nbytes // 4, dtype=torch.float32, device=device)
    return x.numel() * 4, timer.measure(lambda i: x.fill_(FILL_VALUE), 1)


# The ceilings' key of cuBLAS's fp32 mm peak with TF32 on.
TF32_CEILING = "float32_tf32"


def fp32_peak_tflops(ceilings: dict, allow_tf32: bool = False) -> float | None:
    """The compute peak of an fp32 product's floor: with TF32 off, the better of cuBLAS's SGEMM
    peak and a third of its TF32 peak (3xTF32 runs three TF32 products for each fp32 one, at
    fp32's accuracy: gemmtune.precision); with TF32 on, the TF32 peak. Ceilings measured
    before the TF32 peak was (an older ceilings file) give SGEMM's.

    >>> fp32_peak_tflops({"mm": {"float32": {"tflops": 50.0}, TF32_CEILING: {"tflops": 390.0}}})
    130.0
    >>> fp32_peak_tflops({"mm": {"float32": {"tflops": 50.0}}})
    50.0
    """
    mm = ceilings.get("mm") or {}
    sgemm = (mm.get("float32") or {}).get("tflops")
    tf32 = (mm.get(TF32_CEILING) or {}).get("tflops")
    if allow_tf32:
        return tf32 or sgemm
    return max((v for v in (sgemm, tf32 / 3 if tf32 else None) if v), default=None)


def _mm_ceiling(timer, dtype: torch.dtype) -> dict:
    a = torch.randn(CEILING_N, CEILING_N, device="cuda", dtype=dtype)
    b = torch.randn(CEILING_N, CEILING_N, device="cuda", dtype=dtype)
    out = torch.empty_like(a)
    t = timer.measure(lambda i: torch.mm(a, b, out=out), 1)
    return {"tflops": 2 * CEILING_N ** 3 / (t.device_ms * 1e9), "n": CEILING_N, **time_entry(t.device_ms, t.spread, t.repeats)}


def measure_ceilings(timer) -> dict:
    """Copy, read and write bandwidth and cuBLAS mm peak per dtype, measured now on the current GPU.

    ``memory_gbps`` is the higher of the copy and read bandwidths: the rate of the bytes a shape's
    floor reads; ``write_gbps`` (``report.write_gbps``) the rate of the bytes it writes. A read or
    write ceiling that fails is recorded with its reason and ``gbps`` None: the floor then falls
    back (no write ceiling: every byte at ``memory_gbps``, as before the write ceiling)."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 peak is true fp32, as the suite's fp32 rows
    try:
        copy_ = _copy_ceiling(timer)
        torch.cuda.empty_cache()
        try:
            read = read_ceiling(timer)
        except Exception as e:  # the copy alone still gives a floor
            read = {"gbps": None, **failure_record(e)}
        torch.cuda.empty_cache()
        try:
            write = write_ceiling(timer)
        except Exception as e:  # the floor falls back to every byte at the read rate
            write = {"gbps": None, **failure_record(e)}
        torch.cuda.empty_cache()
        mm = {name: _mm_ceiling(timer, DTYPES[name]) for name in ("bfloat16", "float16", "float32")}
        # TF32's peak too: an fp32 product with TF32 off can run as three TF32 products
        # (3xTF32, gemmtune.precision), so its floor takes the better of SGEMM's peak and a third
        # of this (fp32_peak_tflops).
        torch.backends.cuda.matmul.allow_tf32 = True
        mm[TF32_CEILING] = _mm_ceiling(timer, torch.float32)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    torch.cuda.empty_cache()
    c = {"how": f"measured in this run: a {COPY_BYTES >> 30} GiB device copy (bytes read + written); the best of "
                f"a {READ_BYTES >> 30} GiB fp32 sum and a bf16 GEMV over a {READ_BYTES >> 30} GiB matrix (bytes "
                f"read + written: a read bandwidth); a {WRITE_BYTES >> 30} GiB fp32 fill (bytes written: a write "
                f"bandwidth); cuBLAS mm on {CEILING_N}^3 (fp32 with tf32 off, and "
                f"{TF32_CEILING}: fp32 with tf32 on)",
         "copy": copy_, "read": read, "write": write, "mm": mm}
    c["memory_gbps"] = report.memory_gbps(c)
    c["write_gbps"] = report.write_gbps(c)
    return c


def load_ceilings(path: str | os.PathLike, device_name: str) -> dict | None:
    """Ceilings an earlier run wrote to ``path`` (``save_ceilings``) on a GPU of this name, else None."""
    try:
        saved = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("device_name") != device_name or not saved.get("ceilings"):
        return None
    c = saved["ceilings"]
    # What the run reads of them (the copy bandwidth, the mm peaks): without them (a file written by
    # hand or by another version) the run ended in a KeyError traceback; they are measured again.
    copy_gbps = (c.get("copy") or {}).get("gbps") if isinstance(c, dict) and isinstance(c.get("copy"), dict) else None
    if not isinstance(copy_gbps, (int, float)) or not isinstance(c.get("mm"), dict):
        return None
    # A file written before the write ceiling has no "write": it loads as it is, and its floors
    # stay min_bytes / memory_gbps (report.write_gbps is None without it). A "write" that is not
    # a dict (a file edited by hand) is dropped, as if it were such a file.
    c = dict(c)
    if "write" in c and not isinstance(c["write"], dict):
        del c["write"]
        c.pop("write_gbps", None)
    c["how"] = f"{c.get('how', '')}; read from {Path(path).name}, measured at {saved.get('date', '?')} " \
               "by an earlier run of the same device call"
    return c


def check_ceilings_file(path: str | os.PathLike) -> None:
    """Raise ValueError when ``path`` holds a file that is not a ceilings file (``save_ceilings``'s):
    the run would replace it with its ceilings (a suite CSV or a bench JSON given by mistake was
    overwritten without a word). Nothing there, an empty file or a ceilings file pass."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"--ceilings-file {path} is a folder; give a file")
    if not p.exists() or p.stat().st_size == 0:
        return
    try:
        saved = json.loads(p.read_text())
    except (OSError, ValueError):
        saved = None
    if not (isinstance(saved, dict) and "device_name" in saved and isinstance(saved.get("ceilings"), dict)
            and "schema" not in saved):
        raise ValueError(f"--ceilings-file {path} holds something other than ceilings (a file `gemmtune bench "
                         "--ceilings-file` wrote); the run would overwrite it: give another path")


def save_ceilings(path: str | os.PathLike, device_name: str, ceilings: dict) -> None:
    write_atomic(path, json.dumps({"device_name": device_name, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                   "ceilings": ceilings}, indent=1, allow_nan=False))
