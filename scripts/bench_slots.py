"""For the experiment scripts that borrow a `gemmtune bench` column: run one mode's tunes under a
patch. The bench names each mode's results store after the mode (``gemmtune_top1``, ...), so a
tune whose ``store`` holds that name is the slot's."""
import importlib


def run_slot_under(slot: str, patched) -> None:
    """From now on, ``gemmtune.tune.tune`` calls of mode ``slot`` run inside ``patched()`` (a context
    manager factory, e.g. ``lambda: unittest.mock.patch.object(module, "NAME", value)``)."""
    tune_module = importlib.import_module("gemmtune.tune")
    inner = tune_module.tune

    def tune(*args, **kwargs):
        if slot not in str(kwargs.get("store", "")):
            return inner(*args, **kwargs)
        with patched():
            return inner(*args, **kwargs)

    tune_module.tune = tune
