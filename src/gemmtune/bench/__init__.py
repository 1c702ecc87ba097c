"""Benchmarking: one measurement (measure.py: verify, then time -> Measurement), timers
(timing.py), the worker's JSON adapter over measure (runner.py), the worker entry point
(worker.py), the subprocess pool (workers.py), the warm pool server (server.py) and fault
injection (faults.py).

``gemmtune bench``, the side-by-side comparison, in parts: suite.py (the run and each shape's
record), modes.py (gemmtune's modes, the tuning phase), ceilings.py, rounds.py (interleaved
timing), inductor.py, tunableop.py and nvmmh.py (the peers), records.py (the JSON's entries)
and settings.py (process-wide settings, put back afterwards)."""

# The task handler a worker uses unless told otherwise (module:function); defined beside the
# torch-free worker spawn that the ``gemmtune`` entry point uses too.
from gemmtune_entry.spawn import DEFAULT_RUNNER  # noqa: E402,F401
