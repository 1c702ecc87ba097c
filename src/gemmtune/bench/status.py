"""What a measurement's outcome is called: ``Status`` and its groups, without torch or Triton.

The tuner's parent process writes statuses into the store and the tables but never measures:
these names lived in measure.py, whose import brought in the kernels and Triton (0.3 s of a
cold ``gemmtune tune`` on the 2-core CPU machine). measure.py re-exports them.

    >>> Status("compile_error") is Status.COMPILE_ERROR and Status.OK == "ok"
    True
"""

from __future__ import annotations

import enum


class Status(enum.StrEnum):
    """The outcome of one measurement. The values are the words the store, the tables and
    the JSON files hold (a StrEnum: ``Status.OK == "ok"``, f"{Status.OK}" and json.dumps write "ok")."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"  # compilation or resources (registers, shared memory) failed
    CRASHED = "crashed"              # the worker died (segfault, poisoned CUDA context): workers.py
    TIMEOUT = "timeout"              # no answer in time; the worker was killed: workers.py
    WRONG = "wrong"                  # ran, but its output failed the fp64 check
    ERROR = "error"                  # any other exception
    SKIPPED = "skipped"              # nothing to measure (an empty problem)
    UNSUPPORTED = "unsupported"      # the config cannot run this problem (its family's validate)


# Statuses that mean the candidate failed (it never wins), and those worth measuring again
# (the failure may have been the machine's, not the candidate's).
FAILED = (Status.COMPILE_ERROR, Status.CRASHED, Status.TIMEOUT, Status.WRONG, Status.ERROR, Status.UNSUPPORTED)
RETRYABLE = (Status.CRASHED, Status.TIMEOUT, Status.ERROR)
