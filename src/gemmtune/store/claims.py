"""Claims: tuners sharing one store split the work instead of measuring everything twice."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import time
from typing import Iterable

from .rows import RunContext
from .schema import StoreError


def pid_namespace() -> str:
    """This process's PID namespace (the inode of /proc/self/ns/pid), "" where there is none to read."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def claim_owner() -> str:
    """A tuner's name in the claims table: host, process id, a random part and the PID namespace."""
    import socket
    import uuid
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}:{pid_namespace()}"


def owner_alive(owner: str) -> bool:
    """False when ``owner`` (a ``claim_owner`` name) is a process of this host that has exited:
    its claims are void at once (a tuner killed with -9 and run again must not wait for its own
    dead claims to expire). Owners on other hosts, in another PID namespace, or of an unknown
    form, count as alive."""
    import socket
    parts = owner.split(":")
    host, pid_text = parts[0], parts[1] if len(parts) > 1 else ""
    if host != socket.gethostname() or not pid_text.isdigit():
        return True
    if len(parts) > 3 and parts[3] != pid_namespace():
        # Another PID namespace under this host's name (containers run with --network=host take
        # the host's name): its process id means nothing here. Looked up here, a live tuner
        # there counted as exited, and its claims were deleted and measured again.
        return True
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def context_text(ctx: RunContext) -> str:
    return "|".join(str(getattr(ctx, f.name)) for f in dataclasses.fields(ctx))


class Claims:
    """ResultStore's claims: which tuner is measuring what right now, so that tuners sharing a
    store split the work (a mixin: ``self._db`` is the store's connection)."""

    def claim(self, ctx: RunContext, problem_key: str, choice_ids: Iterable[str], owner: str,
              ttl_s: float, redo_statuses: Iterable[str] = (), fp32_precision: str | None = None) -> list[str]:
        """Claim for ``owner`` the choices of ``choice_ids`` that no result in this context
        finished (a status in ``redo_statuses`` does not count as finished) and that no other
        owner holds; return every one of them that ``owner`` now holds, in the given order.

        One transaction with the write lock, so two tuners never both get one choice. A claim
        lasts ``ttl_s`` seconds (the longest its owner can take to measure what it claimed);
        an expired one, left by a tuner that died, can be claimed again. ``fp32_precision``:
        which rows count as finished, as ``ResultStore.done`` takes it.

        Example::

            >>> mine = store.claim(ctx, p.key, [c.id for c in todo], owner, ttl_s=600)  # doctest: +SKIP
        """
        # Once each: a choice named twice was inserted twice, 'UNIQUE constraint failed', and
        # nothing was claimed.
        ids = list(dict.fromkeys(choice_ids))
        if not ids:
            return []
        ck = context_text(ctx)
        now = time.time()
        redo = set(redo_statuses)
        conn = self._db
        try:
            return self._claim(conn, ctx, problem_key, ids, owner, ttl_s, ck, now, redo, fp32_precision)
        except sqlite3.Error as e:
            # e.g. a store file this user cannot write (it opens read-only): a tune's first
            # write is a claim, and sqlite3's traceback was all it printed.
            raise StoreError(f"cannot write to results store {self.path}: {e}") from None

    def _claim(self, conn, ctx, problem_key, ids, owner, ttl_s, ck, now, redo, fp32_precision) -> list[str]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM claims WHERE expires_at < ?", (now,))
            for (o,) in conn.execute("SELECT DISTINCT owner FROM claims WHERE context = ? AND problem_key = ?",
                                     (ck, problem_key)).fetchall():
                if o != owner and not owner_alive(o):
                    conn.execute("DELETE FROM claims WHERE owner = ?", (o,))
            done = {r.choice_id for r in self.done(ctx, problem_key, fp32_precision).values() if r.status not in redo}
            held = dict(conn.execute("SELECT choice_id, owner FROM claims WHERE context = ? AND problem_key = ?",
                                     (ck, problem_key)).fetchall())
            mine = []
            for cid in ids:
                if cid in done:
                    continue
                o = held.get(cid)
                if o is None:
                    conn.execute("INSERT INTO claims VALUES (?, ?, ?, ?, ?)", (ck, problem_key, cid, owner, now + ttl_s))
                elif o != owner:
                    continue
                mine.append(cid)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return mine

    def release(self, ctx: RunContext, problem_key: str | None, owner: str) -> None:
        """Drop ``owner``'s claims on one problem (its results are in, or it gave up); on every
        problem where ``problem_key`` is None (a run that stops)."""
        where, args = "context = ? AND owner = ?", [context_text(ctx), owner]
        if problem_key is not None:
            where, args = where + " AND problem_key = ?", args + [problem_key]
        self._claims_write(f"DELETE FROM claims WHERE {where}", args)

    def renew(self, ctx: RunContext, owner: str, ttl_s: float) -> None:
        """Keep every claim of ``owner`` for at least ``ttl_s`` seconds more: a cluster driver claims
        its whole plan at the start, and its queued tasks may wait longer than one claim lasts."""
        self._claims_write("UPDATE claims SET expires_at = MAX(expires_at, ?) WHERE context = ? AND owner = ?",
                           [time.time() + ttl_s, context_text(ctx), owner])

    def _claims_write(self, sql: str, args) -> None:
        try:
            self._db.execute(sql, args)
        except sqlite3.Error as e:  # as in claim()
            raise StoreError(f"cannot write to results store {self.path}: {e}") from None
