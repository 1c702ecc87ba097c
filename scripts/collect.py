"""``gemmtune collect`` under its old name: ``python scripts/collect.py ARGS`` runs
``gemmtune collect ARGS`` (the code is gemmtune.collect; ``gemmtune collect --help`` says it all)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from gemmtune.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["collect", *sys.argv[1:]]))
