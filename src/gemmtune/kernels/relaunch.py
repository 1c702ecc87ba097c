"""Relaunching a compiled Triton kernel with new tensors in a few argument slots, the rest frozen.

Triton's ordinary launch (``fn[grid](*args)``) binds every argument and works out its
specialisation on every call: tens of microseconds of Python, more than a small kernel runs
for. Where one problem is launched again and again (a dispatcher's cached call), only the data
pointers change: sizes, strides, constexprs and the 16-byte alignment Triton specialised on stay
the same, and the caller checks that they do. ``relaunch`` keeps the compiled kernel that one
ordinary launch returned, with every argument of that launch, and a call fills in the new
tensors (or TMA descriptors) at ``slots``. ``tiled.Direct`` is the same idea written out for the
tiled kernel's hot path; this is the general form that the pad copies (``pad.prepare_copies``),
DecomposeK's sum and the persistent kernel's descriptors use.
"""

from __future__ import annotations

from typing import Sequence


class Relaunch:
    """``launch(*tensors)``: the compiled kernel again, ``tensors`` in the frozen argument list's
    ``slots`` (in order), every other argument as the first launch had it."""

    __slots__ = ("runner", "args", "slots")

    def __init__(self, runner, args: list, slots: tuple[int, ...]):
        self.runner, self.args, self.slots = runner, args, slots

    def __call__(self, *tensors) -> None:
        args = self.args.copy()
        for i, t in zip(self.slots, tensors):
            args[i] = t
        self.runner(*args)


def relaunch(fn, kernel, grid: Sequence[int], args: Sequence, consts: dict, slots: Sequence[int]) -> Relaunch | None:
    """The ``Relaunch`` of ``kernel``, the compiled ``fn`` that an ordinary launch with the
    positional ``args`` and the constexpr ``consts`` (launch options such as num_warps left out)
    returned; None where there is no compiled kernel (the interpreter, a recorded or compile-only
    launch) or where ``fn``'s parameters are not ``args`` followed by ``consts``. The frozen list
    holds None at ``slots``, so that it keeps no tensor of the first call alive.

    >>> class Fn:
    ...     arg_names = ["x", "out", "n", "BLOCK"]
    >>> calls = []
    >>> class Kernel:
    ...     def __getitem__(self, grid):
    ...         return lambda *a: calls.append((grid, a))
    >>> r = relaunch(Fn, Kernel(), (4,), ("x0", "o0", 7), {"BLOCK": 128}, slots=(0, 1))
    >>> r.args
    [None, None, 7, 128]
    >>> r("x1", "o1"); calls
    [((4, 1, 1), ('x1', 'o1', 7, 128))]
    """
    compiled = runner_and_args(fn, kernel, grid, args, consts)
    if compiled is None:
        return None
    runner, full = compiled
    for i in slots:
        full[i] = None
    return Relaunch(runner, full, tuple(slots))


def runner_and_args(fn, kernel, grid: Sequence[int], args: Sequence, consts: dict) -> tuple | None:
    """(the compiled ``kernel``'s runner for ``grid``, the whole argument list it takes: ``args``
    then the values of ``consts`` in ``fn``'s parameter order), or None where there is no compiled
    kernel or ``fn``'s parameters are not ``args`` followed by ``consts``. What ``relaunch`` and
    ``tiled.direct`` freeze."""
    if kernel is None or not hasattr(kernel, "__getitem__"):
        return None
    names = list(fn.arg_names)
    if len(names) != len(args) + len(consts) or any(n not in consts for n in names[len(args):]):
        return None
    # A 3-D grid: some triton versions' compiled-kernel runner indexes grid[2].
    g = (grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1)
    return kernel[g], list(args) + [consts[n] for n in names[len(args):]]
