"""PyTorch's TunableOp (``torch.cuda.tunable``) as a peer."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import torch

from ..problem import Problem
from .inductor import _mm
from .records import failure_record

class TunableOp:
    """PyTorch's TunableOp (``torch.cuda.tunable``) as a peer: it times cuBLAS / cuBLASLt
    algorithms (hipBLASLt on ROCm) for each GEMM the first time it sees it and keeps the
    fastest. Process-wide state, so it is switched on only around its own calls and its
    results file lives in a scratch folder; ``close()`` puts every setting back."""

    def __init__(self, scratch: Path, tun=None):
        tun = tun if tun is not None else torch.cuda.tunable
        self.tun = tun
        self.saved = (tun.is_enabled(), tun.tuning_is_enabled(), tun.get_filename())
        tun.set_filename(str(Path(scratch) / "tunableop_results%d.csv"))

    def __enter__(self):
        self.tun.enable(True)
        return self

    def __exit__(self, *exc):
        self.tun.enable(False)

    def launch(self, problem: Problem, state) -> tuple[dict, Callable[[int], object] | None]:
        """Tune on the state's inputs (the first call's wall time), check against fp64, and
        return (record, launch(i)): ``launch`` runs torch.mm with TunableOp's pick, tuning off."""
        from ..verify import compare, tolerance

        a, b = state.inputs[0]
        try:
            with self:
                self.tun.tuning_enable(True)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                out = _mm(a, b)
                torch.cuda.synchronize()
                rec = {"tune_s": time.perf_counter() - t0, "choice": "tunableop"}
                self.tun.tuning_enable(False)
            chk = compare(out, state.ref, tolerance(problem))
            rec["rel_err"] = chk.rel_err
            if not chk.ok:
                return {"status": "wrong", "reason": chk.reason, **rec}, None
        except Exception as e:  # a failed tuning is a result too
            return failure_record(e), None

        def launch(i):
            with self:
                return _mm(*state.inputs[i])
        return {"status": "ok", **rec}, launch

    def close(self) -> None:
        enabled, tuning, filename = self.saved
        self.tun.enable(enabled)
        self.tun.tuning_enable(tuning)
        self.tun.set_filename(filename)
