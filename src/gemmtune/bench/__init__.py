"""Benchmarking: timers (timing.py), the in-worker task runner (runner.py), the
worker entry point (worker.py) and the subprocess pool (workers.py)."""

# The task handler a worker uses unless told otherwise (module:function).
DEFAULT_RUNNER = "gemmtune.bench.runner:handle"
