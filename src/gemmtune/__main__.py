"""``python -m gemmtune``: the ``gemmtune`` command, as ``python -m gemmtune.cli`` runs it (never
forwarded to a worker server). Without this file it failed with "'gemmtune' is a package and
cannot be directly executed"."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
