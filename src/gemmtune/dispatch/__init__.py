"""Dynamic-shape dispatch: one tuned kernel per size hint, served for any runtime size.

``compile_mm`` tunes one winner per hint combination of the dynamic dims (e.g. M in
64, 256, 4096 with N and K static) and returns a ``Dispatcher``: a callable
``mm(a, b)`` that picks a kernel the first time it sees a shape, remembers the
decision, and afterwards costs one dict lookup, the output allocation and the launch.

Modes (how a new shape is decided):

* ``similarity``: the hint kernel nearest in L1 distance of log2 (M, N, K)
  (``Problem.log2_shape``: dims of 0 and 1 both map to 0). **Ties** go to the larger
  hint: the one with the larger product M*N*K (its log2 sum), then the larger
  (M, N, K) in lexicographic order. Rounding up is what power-of-two bucketing
  does, and it picks the kernel tuned for the larger, costlier shape, whose loss
  would matter more. Distances are rounded to 1e-9 first, so float noise never
  decides a tie (log2(96/64) and log2(144/96) are equal). No timing at run time.
* ``benchmark``: the first call of a shape times every distinct hint kernel on
  fresh random inputs of that shape (the ``timer`` object; ``default_timer()``:
  CUDA graphs on a GPU, wall clock in the interpreter), verifying each against
  the fp64 reference, and keeps the fastest correct one (ties: similarity order).
  Candidates are timed in similarity order, nearest first.
* ``table``: the exact ``LookupTable`` entry for the shape (by ``Problem.key`` of the
  declared layouts), its fastest valid choice first; similarity otherwise.

Correctness: with ``verify=True`` (default) a shape's first decision runs the chosen
kernel once on fresh random inputs of that shape and layout and checks it against
the fp64 reference (``gemmtune.verify``); a kernel that fails is skipped for the
next candidate, and cuBLAS (``aten``) is the last resort. So a first call changes
speed, never results: the output it returns comes from a verified kernel.
A kernel a family cannot run at a shape (e.g. ``decompose_k:s16`` when the
runtime K is not a multiple of 16) is skipped the same way.

Fused epilogues: ``mm(a, b, bias=..., activation=..., residual=...)`` computes
``act(a @ b + bias) + residual`` in one launch of the shape's kernel (gemmtune.epilogue).
A shape is decided (and verified) once, on the plain product, whatever epilogues its
calls carry; each combination of epilogue parts gets its own cached closure. Calls with a
bias (``gemmtune.nn.Linear``'s) run the table's ``addmm:`` winner for the shape instead when
the dispatcher has a table with one (its first choice that runs and verifies with a bias;
``addmm_decisions``), and the shape's own kernel with the bias fused otherwise.

Batched products: a call with two 3-D operands (batch, M, K) @ (batch, K, N) is a bmm
(``Problem`` op 'bmm'): decided like an mm on a cache miss, by (batch, M, N, K) and the
per-matrix static dims: the table's exact ``bmm:`` entry (mode 'table'), then the hint
kernels that can run it (triton_mm's tiles; split-K and the others refuse a bmm), each
verified, cuBLAS (torch.bmm) last. ``compile_bmm`` tunes the hint kernels as bmm problems;
``lookup(table, dtype=...)`` builds one from a table alone, with no tuning. A bmm takes no epilogue.

Threads: decisions are cached per shape; a cached call reads a dict without a lock;
deciding a new shape takes the dispatcher's lock, so each shape is decided once.
The Triton CPU interpreter is not thread-safe (concurrent launches returned wrong
results and crashed with triton 3.9), so in interpreter mode every launch from a
dispatcher, or from gemmtune.matmul (``kernels.run_choice``), is serialized by one
process-wide lock; on a GPU there is no lock.
Split-K and skinny kernels keep their scratch per dispatcher, GPU and stream
(``SplitKWorkspace``), so one dispatcher may launch on concurrent streams.

CUDA graphs: a first sight verifies (and in ``benchmark`` mode times), which cannot
run inside a graph capture; decide shapes before capturing with ``warmup`` (or one eager
call). A shape first seen inside a capture is not decided there: that call runs cuBLAS
(torch.mm / torch.addmm and the epilogue as torch ops, correct with no check), with a
one-time warning, and the shape is decided at its next call outside a capture.

Save and load: ``Dispatcher.save(path)`` writes JSON (hints, hint choices, decisions,
table, provenance) and, on a GPU, the compiled kernel binaries next to it in
``<path>.kernels/``: every variant of gemmtune's kernels this process launched, after
launching the hint shapes once so their kernels are in (``gemmtune.binaries``).
``load(path)`` restores both in a new process: zero tuning, and the kernels are
loaded from the restored binaries on first launch instead of compiled. Binaries are
a cache: on another GPU or Triton version they do not match and the kernels compile
on first launch (load warns about the provenance), never run wrong code.

The package: ``common`` (constants, Decision, similarity ranking), ``decide`` (first-sight
decisions), ``launch`` (the cached closures), ``core`` (Dispatcher), ``persist`` (load) and
``build`` (compile_mm, compile_bmm, lookup). ``capturing``, ``interpreter_enabled`` and
``interactive`` are read from this package when called, so they can be replaced here.

Example (skipped in doctests: it tunes on a GPU, where the CPU interpreter would take hours)::

    >>> import torch, gemmtune
    >>> mm = gemmtune.compile_mm(n=4096, k=4096, dtype="bf16",
    ...                          hints={"m": [64, 256, 4096]})          # doctest: +SKIP
    >>> a = torch.randn(100, 4096, device="cuda", dtype=torch.bfloat16)   # doctest: +SKIP
    >>> b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)  # doctest: +SKIP
    >>> c = mm(a, b)                            # decided once for M=100  # doctest: +SKIP
    >>> mm.save("mm.json"); mm2 = gemmtune.load("mm.json")             # doctest: +SKIP
"""

from __future__ import annotations

from ..api import interpreter_enabled  # noqa: F401  (read from here by the parts: see above)
from .build import compile_bmm, compile_mm, lookup
from .common import (ATEN, DEFAULT_HINTS, DIMS, FORMAT, MODES, SCHEMA_VERSION, Decision, HintChoice,  # noqa: F401
                     ProvenanceWarning, capturing, interactive, provenance_mismatches, rank_hints)
from .core import Dispatcher
from .persist import load

__all__ = ["compile_mm", "compile_bmm", "lookup", "load", "Dispatcher", "Decision", "HintChoice", "rank_hints",
           "ProvenanceWarning", "provenance_mismatches", "MODES", "DEFAULT_HINTS"]
