"""Summarise worker and tuner traces: ``gemmtune report --trace DIR`` (gemmtune.report.trace),
kept under this name for the session scripts that call it.

    python scripts/worker_trace.py DIR [DIR ...]
"""

from __future__ import annotations

import sys

from gemmtune.report.trace import main, summarise  # noqa: F401  (summarise: the tests' entry)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
