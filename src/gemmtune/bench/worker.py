"""Worker entry point: ``python -m gemmtune.bench.worker [--runner module:function]``.

Spawned by WorkerPool with Popen (never fork after CUDA init) and with
CUDA_VISIBLE_DEVICES already set, so this process sees exactly one GPU.
Protocol: one JSON request per line on stdin, one JSON reply per line on a
private duplicate of the original stdout. Everything else this process prints
(Triton, torch, user code) goes to stderr, so it cannot corrupt the protocol.

The first line it writes is ``{"ready": true}``, once torch is imported (and the CUDA context
made: WorkerState). ``{"warm": true}`` follows once it has paid its other once-per-process costs
(runner.prewarm: after its first ``info``, else before its first task); the pool's clock of a task
starts there, never while the worker warms up.
``--nice N`` lowers its CPU priority first (compile workers running beside a
benchmark worker).
Requests: ``{"op": "info"}``, ``{"op": "bench"|"compile", "task": {...}}``,
``{"op": "exit"}``. The runner is ``module:function`` taking (op, task, state)
and returning a dict; tests pass their own to inject faults.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time

from . import DEFAULT_RUNNER


def _load(spec: str):
    mod, _, fn = spec.partition(":")
    return getattr(importlib.import_module(mod), fn)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="gemmtune-worker")
    p.add_argument("--runner", default=DEFAULT_RUNNER)
    p.add_argument("--nice", type=int, default=0, help="add this to the process's CPU niceness")
    args = p.parse_args(argv)
    if args.nice:
        try:
            os.nice(args.nice)  # children (ptxas) inherit it
        except OSError:
            pass

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    from . import runner as base

    handle = _load(args.runner)
    state = base.WorkerState()

    def reply(obj: dict) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    _exit_with_parent()
    trace = _trace_file()
    reply({"ready": True})
    _trace(trace, {"op": "ready"}, {"status": "ok"}, time.time(), None)
    warmed = False

    def warm_up() -> None:
        # The worker's once-per-process costs (runner.prewarm), paid before its first task and
        # followed by ``{"warm": true}``: the pool starts a task's clock there (workers.WorkerPool),
        # so they are never on the first candidate's timeout.
        nonlocal warmed
        warmed = True
        tw = time.time()
        base.prewarm(state)
        _trace(trace, {"op": "prewarm"}, {"status": "ok"}, tw, None)
        reply({"warm": True})

    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
        except json.JSONDecodeError as e:
            reply({"status": "error", "reason": f"bad request: {e}"})
            continue
        op = req.get("op")
        if op == "exit":
            break
        t0 = time.time()
        if op == "info":
            reply(base.info(state))
            _trace(trace, req, {"status": "ok"}, t0, None)
            if not warmed:  # while the tuner plans
                warm_up()
            continue
        if not warmed:  # a first task without an 'info' before it
            warm_up()
            t0 = time.time()
        try:
            res = handle(op, req.get("task", {}), state)
        except Exception as e:  # a runner that raises must not take the worker down
            res = {"status": "error", "reason": f"{type(e).__name__}: {e}"[:2000]}
        _trace(trace, req, res, t0, getattr(state, "steps", None))
        if res.get("status") != "ok" and _poisons_context(res.get("reason", "")):
            # After an illegal access the CUDA context is unusable: every later
            # launch in this process would fail. Report a crash and exit so the
            # pool starts a fresh worker with a healthy context.
            res = dict(res, status="crashed")
            reply(res)
            os._exit(3)
        reply(res)
    return 0


TRACE_ENV = "GEMMTUNE_WORKER_TRACE"


def open_trace(kind: str):
    """The line-buffered file a process appends its trace to where ``GEMMTUNE_WORKER_TRACE`` names
    a directory (``<kind>-<pid>.jsonl`` in it, made where missing), else None; OSError where it
    cannot be written, which each caller reports its own way. ``kind``: "worker", or "tuner" for
    the tuner's steps (tuning.tuner.tuner_trace). A diagnostic (``gemmtune report --trace``):
    where a tune's seconds go (session 43's bench on an H200: each mode's first shape took 3-4.5 s
    longer than its later ones, and not waiting for its compile workers, which the tuner measures)."""
    where = os.environ.get(TRACE_ENV)
    if not where:
        return None
    os.makedirs(where, exist_ok=True)
    return open(os.path.join(where, f"{kind}-{os.getpid()}.jsonl"), "a", buffering=1)


def _trace_file():
    """This worker's trace file (``open_trace``), or None; one that cannot be written is said on
    stderr (the worker's log), not raised."""
    try:
        return open_trace("worker")
    except OSError as e:
        print(f"gemmtune worker: {TRACE_ENV}={os.environ.get(TRACE_ENV)!r} cannot be written ({e}); no trace",
              file=sys.stderr)
        return None


def _trace(f, req: dict, res: dict, t0: float, steps: dict | None) -> None:
    """One request's line in ``f`` (nothing without a trace file): when it began (wall clock, to
    line up with the tuner's and the other workers' lines), its op, problem and choice, seconds,
    status, and a bench's steps (measure.verify)."""
    if f is None:
        return
    task = req.get("task") or {}
    line = {"t0": round(t0, 4), "s": round(time.time() - t0, 4), "op": req.get("op"),
            "problem": task.get("problem"), "choice": task.get("choice"), "status": res.get("status")}
    if isinstance(task.get("choices"), list):
        line["choices"] = len(task["choices"])
    if req.get("op") == "bench" and steps:
        line["steps"] = {k: round(v, 4) for k, v in steps.items()}
    try:
        f.write(json.dumps(line) + "\n")
    except (OSError, TypeError, ValueError):  # a diagnostic must not take the worker down
        pass


def _exit_with_parent() -> None:
    """Exit when the parent dies (kill -9 of the tuner): a worker stuck in a hung kernel
    never reads its closed stdin, so a watchdog thread checks the parent instead."""
    import threading
    import time

    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(4)

    threading.Thread(target=watch, daemon=True, name="gemmtune-parent-watch").start()


_POISON = ("illegal memory access", "unspecified launch failure", "CUDA error: an illegal",
           "misaligned address", "device-side assert", "illegal instruction",
           "CUDA_ERROR_ILLEGAL", "cudaErrorIllegal")


def _poisons_context(reason: str) -> bool:
    return any(s.lower() in reason.lower() for s in _POISON)


if __name__ == "__main__":
    code = main()
    # Straight out, without the interpreter's teardown of torch and its CUDA state: the pool
    # waits for this exit (0.47-0.52 s of a cold one-shape tune on an H100, 2026-11-26), and a
    # worker leaves nothing to flush but its streams (compiled kernels reach Triton's cache
    # when they are built).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
