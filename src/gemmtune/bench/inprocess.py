"""``tune(..., in_process=True)``: candidates measured in the calling process, no worker started.

Why: a benchmark worker's start-up (a Python process importing torch and opening a CUDA
context) took 3.5 s of every tune on an H100 (bench-model, 2026-11-26): a third of tuning
all-MiniLM-L6-v2's 4 problems, which is what kept its tuning above a tenth of max-autotune's
compile. A caller that already holds the GPU (a model being patched, a notebook) can skip it,
as Inductor's own autotuning does by default.

The price is the isolation the worker gives: a candidate that crashes or hangs the GPU takes
the calling process with it, and the task timeout is not enforced. Every candidate is still
verified against fp64 before it is timed, and failures that raise are recorded as with a
worker. Keep the default (a worker subprocess) wherever a crash must not cost the caller:
unattended tuning, large exhaustive spaces, new kernels.

Same interface as the parts of ``WorkerPool`` that ``tune`` uses (info, map, close, a
context manager).
"""

from __future__ import annotations

import threading
from typing import Callable, Iterable, Iterator

from . import DEFAULT_RUNNER
from .worker import _load


class InProcessPool:
    """Runs each task with ``runner`` (``module:function``, as a worker would) in this process,
    one after another, on one ``WorkerState`` kept across tasks and calls of ``map``."""

    def __init__(self, *, runner: str = DEFAULT_RUNNER, timeout: float = 120.0):
        self._handle = _load(runner)  # as a worker loads it
        self.timeout = float(timeout)  # kept for the interface; nothing here can stop a hung kernel
        self._state = None

    def _worker_state(self):
        if self._state is None:
            from .runner import WorkerState
            self._state = WorkerState()
        return self._state

    def info(self) -> dict:
        from .runner import info
        return dict(info(self._worker_state()), in_process=True)

    def map(self, tasks: Iterable[dict], op: str = "bench",
            on_result: Callable[[int, dict, dict], None] | None = None,
            stop: threading.Event | None = None) -> Iterator[tuple[dict, dict]]:
        state = self._worker_state()
        for i, task in enumerate(list(tasks)):
            if stop is not None and stop.is_set():
                return
            try:
                res = self._handle(op, task, state)
            except Exception as e:  # noqa: BLE001 - a runner that raises is a failed task, as in a worker
                res = {"status": "error", "reason": f"{type(e).__name__}: {e}"[:2000]}
            if on_result is not None:
                on_result(i, task, res)
            yield task, res

    def close(self) -> None:
        self._state = None  # its input sets and outputs go back to torch's allocator

    def __enter__(self) -> "InProcessPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["InProcessPool"]
