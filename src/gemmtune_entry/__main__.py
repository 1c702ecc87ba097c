"""``python -m gemmtune_entry``: the ``gemmtune`` command (forwarding ``tune --server`` without importing torch)."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
