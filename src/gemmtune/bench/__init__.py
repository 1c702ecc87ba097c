"""Benchmarking: one measurement (measure.py: verify, then time -> Measurement), timers
(timing.py), the worker's JSON adapter over measure (runner.py), the worker entry point
(worker.py) and the subprocess pool (workers.py)."""

# The task handler a worker uses unless told otherwise (module:function).
DEFAULT_RUNNER = "gemmtune.bench.runner:handle"
