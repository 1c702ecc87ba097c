"""Progress of a tuning run: a rich bar on a terminal, plain periodic lines elsewhere."""

from __future__ import annotations

import sys
import time


class Progress:
    """Progress of a tuning run: a rich bar on a terminal; plain lines otherwise (a log file, CI,
    a pipe): one when a task (the run, a shape) starts, at most one every ``every_s`` seconds, and
    one when it finishes, each with the candidates done, the total and an ETA, so a long run is
    never silent; nothing when disabled."""

    def __init__(self, enabled: bool, stream=None, every_s: float = 10.0, tty: bool | None = None):
        self.stream = stream if stream is not None else sys.stderr
        # No stderr at all (pythonw, a daemon started without one): nowhere to report to, so the
        # run goes on silently instead of failing on None.isatty() before its first candidate.
        self.enabled = enabled and self.stream is not None
        self.tty = (self.stream.isatty() if tty is None else tty) if self.stream is not None else False
        self.every_s = every_s
        self._p = None
        self._tasks: dict[int, list] = {}  # id -> [description, done, total, when it started]
        self._next_id = 0
        self._t0 = self._last = 0.0

    def __enter__(self):
        if self.enabled and self.tty:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)
            from rich.progress import Progress as RichProgress
            self._p = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                               TimeElapsedColumn(), TimeRemainingColumn(), transient=False,
                               console=Console(file=self.stream))
            self._p.__enter__()
        self._t0 = self._last = time.monotonic()
        return self

    def task(self, description: str, total: int):
        if not self.enabled:
            return None
        if self._p is not None:
            return self._p.add_task(description, total=total)
        self._next_id += 1
        now = time.monotonic()
        self._tasks[self._next_id] = t = [description, 0, total, now]
        if total > 0:
            # Its start: the first candidate of a shape can take a minute (a compile, the
            # interpreter), and a log should say which shape that is, not stay silent.
            self._last = now
            self._line(t, now)
        return self._next_id

    def advance(self, task, description: str | None = None, by: int = 1) -> None:
        if task is None:
            return
        if self._p is not None:
            self._p.update(task, advance=by, **({"description": description} if description else {}))
            return
        t = self._tasks.get(task)
        if t is None:
            return
        if description:
            t[0] = description
        t[1] += by
        now = time.monotonic()
        if t[1] >= t[2] or now - self._last >= self.every_s:
            self._last = now
            self._line(t, now)

    def grow(self, task, by: int) -> None:
        """Add ``by`` to ``task``'s total (candidates added after it started: plan.refine_forms)."""
        if task is None or by <= 0:
            return
        if self._p is not None:
            t = next((t for t in self._p.tasks if t.id == task), None)
            if t is not None and t.total is not None:
                self._p.update(task, total=t.total + by)
            return
        t = self._tasks.get(task)
        if t is not None:
            t[2] += by

    def _line(self, t, now) -> None:
        desc, done, total, started = t
        el = now - self._t0  # the run's elapsed time
        # The task's own rate: from the run's start, a shape started an hour in with 1 of 50
        # candidates done said 49 hours to go.
        eta = f", ETA {(now - started) / done * (total - done):.0f} s" if 0 < done < total else ""
        print(f"[gemmtune] {desc}: {done}/{total} ({el:.0f} s elapsed{eta})", file=self.stream, flush=True)

    def remove(self, task) -> None:
        if self._p is not None and task is not None:
            self._p.remove_task(task)
        self._tasks.pop(task, None)

    def __exit__(self, *exc):
        if self._p is not None:
            self._p.__exit__(*exc)
