"""``python -m gemmtune_entry``: the ``gemmtune`` command (forwarding ``tune --server`` without importing torch)."""

from . import run

if __name__ == "__main__":
    run()
