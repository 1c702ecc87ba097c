"""Fault injection for testing the worker pool and the tuner: a drop-in runner.

Use ``runner="gemmtune.bench.faults:handle"`` and set ``GEMMTUNE_FAULTS`` in the
workers' environment to a JSON object mapping choice ids to a fault:

* ``abort``   the worker process aborts (SIGABRT), like a segfaulting kernel
* ``hang``    the worker sleeps forever, like a kernel that never finishes
* ``raise``   the candidate raises a Python exception
* ``wrong``   the candidate runs but its output is corrupted (verification must catch it)
* ``drop_bias`` the candidate runs without its epilogue: an addmm problem's bias is never
              added (verification must catch it; a plain mm is unaffected)
* ``illegal`` (GPU) a Triton kernel writes far out of bounds: an illegal memory
              access that poisons the CUDA context of the worker
* ``compile_error`` the candidate fails to compile: status compile_error, in the
              compile op as in the bench op
* ``slow_compile`` the compile op takes 2 s longer (SLOW_COMPILE_S), then compiles
              normally; the bench op runs normally (a kernel slow to compile)

Every other choice runs normally. Only ``compile_error`` and ``slow_compile`` act in
the compile op.

``GEMMTUNE_CALL_LOG``, when set, names a file each call appends one line to:
``<unix time> <pid> <op> <problem key> <choice id>`` (tests check which candidates
were compiled and benchmarked, and when).
"""

from __future__ import annotations

import json
import os
import time

from . import runner

_FAULTS: dict[str, str] | None = None
SLOW_COMPILE_S = 2.0


def _faults() -> dict[str, str]:
    global _FAULTS
    if _FAULTS is None:
        _FAULTS = json.loads(os.environ.get("GEMMTUNE_FAULTS", "{}"))
    return _FAULTS


def _illegal_access() -> None:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _oob_store(ptr):
        # 2**40 elements past a small buffer: far outside any mapping.
        tl.store(ptr + (1 << 40), 1.0)

    x = torch.zeros(16, device="cuda")
    _oob_store[(1,)](x)
    torch.cuda.synchronize()


def _log_call(op: str, task: dict) -> None:
    path = os.environ.get("GEMMTUNE_CALL_LOG")
    if path:
        line = f"{time.time():.6f} {os.getpid()} {op} {task.get('problem', '')} {task.get('choice', '')}\n"
        with open(path, "a") as f:  # one short append per call: lines do not interleave
            f.write(line)


def handle(op: str, task: dict, state) -> dict:
    _log_call(op, task)
    fault = _faults().get(task.get("choice", ""))
    if fault == "compile_error":
        return {"status": "compile_error", "reason": "injected fault: this candidate fails to compile"}
    if fault == "slow_compile" and op == "compile":
        time.sleep(SLOW_COMPILE_S)
    if fault in (None, "slow_compile") or op == "compile":
        return runner.handle(op, task, state)
    if fault == "abort":
        os.abort()
    if fault == "hang":
        while True:
            time.sleep(3600)
    if fault == "raise":
        raise RuntimeError("injected fault: this candidate raises")
    if fault == "illegal":
        _illegal_access()
        return {"status": "error", "reason": "injected illegal access did not fault"}
    if fault in ("wrong", "drop_bias"):
        from .. import kernels
        from ..configs import Choice

        fam = kernels.get(Choice.parse(task["choice"]).family)
        real_run = fam.run

        def corrupt(a, b, out, cfg, **kw):
            if fault == "drop_bias":
                real_run(a, b, out, cfg, **{**kw, "epilogue": None})
                return
            real_run(a, b, out, cfg, **kw)
            out.view(-1)[0] += 1000.0  # one wrong element: the max-element check must see it

        fam.run = corrupt
        try:
            return runner.handle(op, task, state)
        finally:
            fam.run = real_run
    return {"status": "error", "reason": f"unknown injected fault {fault!r}"}
