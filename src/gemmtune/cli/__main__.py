"""``python -m gemmtune.cli``: the ``gemmtune`` command."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
