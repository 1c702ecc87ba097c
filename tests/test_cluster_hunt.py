"""Defects found by an adversarial hunt through the cluster path (gemmtune.cluster, ``tune --cluster``),
one test each; every one failed against the code it was written for. Session 46 fixed all but three,
which the next session fixed (sections 4 and 10-13): two drivers sharing a store measured every
candidate twice (no store claims); ``collect --cluster``'s hard stop kept none of a running shape's
results (they came back only with the whole shape); Ctrl-C on ``--cluster local:N`` printed each
Dask worker's KeyboardInterrupt traceback. With them: waits that said nothing, a "retries" line
where nothing was retried, ``--runoff`` and ``--server`` ignored with ``--cluster``.

Each test runs on the CPU in seconds: a local Dask cluster of one or two single-threaded worker
processes running the Triton interpreter, or a scheduler and a worker started with Dask's own
``dask scheduler`` / ``dask worker`` commands (the README's several-hosts recipe) where the
workers must run in an environment of their own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed", reason="dask[distributed] is not installed "
                                  "(pip install 'gemmtune[cluster]')")

import gemmtune  # noqa: E402
from gemmtune import cli  # noqa: E402
from gemmtune.cluster import parse_cluster, run_task, tune_cluster  # noqa: E402
from gemmtune.problem import Problem  # noqa: E402

# test_cluster's sizes and source path, one definition for both modules (``client``: conftest's)
from test_cluster import FAMILIES, N_CANDIDATES, PROBLEMS, SRC, _rows_so_far  # noqa: E402

DASK_SITE = str(Path(distributed.__file__).resolve().parents[1])  # where the workers find dask


def _rows(path) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT device_name, gemmtune_version, problem_key, choice_id, status, device_ms "
                          "FROM results ORDER BY problem_key, choice_id").fetchall()


@contextlib.contextmanager
def dask_cli_cluster(tmp_path: Path, worker_env: dict):
    """A scheduler and one worker started as the README's several-hosts recipe does (``dask scheduler``,
    ``dask worker ... --nworkers 1 --nthreads 1 --memory-limit 0``), the worker in ``worker_env``.
    Yields the scheduler's address once the worker has joined."""
    sched_file = tmp_path / "scheduler.json"
    base = dict(os.environ)
    base["PYTHONPATH"] = os.pathsep.join([str(SRC), DASK_SITE])
    procs = []
    try:
        procs.append(subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--port", "0", "--no-dashboard",
                                       "--scheduler-file", str(sched_file)], env=base, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.2)
        address = json.loads(sched_file.read_text())["address"]
        procs.append(subprocess.Popen([sys.executable, "-m", "dask", "worker", address, "--nworkers", "1",
                                       "--nthreads", "1", "--memory-limit", "0"], env={**base, **worker_env},
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        with distributed.Client(address) as c:
            c.wait_for_workers(1, timeout=90)
        yield address
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


# --- 1. 'localhost:8786', a scheduler address, is read as local:8786 ------------------------------------

def test_a_scheduler_address_on_localhost_is_an_address_not_local_n():
    """``--cluster localhost:8786`` (the scheduler the README's ``dask scheduler --port 8786`` starts,
    on this host; Dask takes the address without 'tcp://') starts with 'local', so parse_cluster
    read it as local:8786 and ``gemmtune tune`` asked local_cluster for 8786 worker processes on
    this host (checked with local_cluster stubbed; on a GPU host it is a refusal that speaks of
    8786 workers)."""
    assert parse_cluster("localhost:8786") == ("address", "localhost:8786")
    assert parse_cluster("localhost.example.org:8786") == ("address", "localhost.example.org:8786")


# --- 2. the cluster skips the checks of --out that a plain tune makes before measuring ---------------

def _out_cases(tmp_path: Path):
    same = tmp_path / "same.sqlite"  # --out and --store one file
    ro = tmp_path / "ro.json"        # a table made read-only on purpose, replaced with --overwrite
    return {"out-is-the-store": dict(store=same, out=same),
            "out-is-a-directory": dict(store=tmp_path / "a.sqlite", out=tmp_path, overwrite=True),
            "out-is-read-only": dict(store=tmp_path / "b.sqlite", out=ro, overwrite=True)}


@pytest.mark.parametrize("case", ["out-is-the-store", "out-is-a-directory", "out-is-read-only"])
def test_cluster_refuses_a_bad_table_target_before_measuring(client, tmp_path, case):
    """A plain tune refuses each of these before anything is measured (TuneOptions.check:
    check_file_target, --out == --store). tune_cluster checked only that --out's folder exists:
    it measured every candidate, then failed at the end (out == store: 'not valid JSON'; a
    directory: IsADirectoryError) or, with --overwrite, replaced the read-only table
    (its entries lost, its mode reset to 644)."""
    kw = _out_cases(tmp_path)[case]
    ro = tmp_path / "ro.json"
    ro.write_text(json.dumps({"note": "a table kept read-only on purpose"}))
    ro.chmod(0o444)
    before = ro.read_text()
    ran = tmp_path / "ran"

    def noting(task):
        with open(ran, "a") as f:
            f.write("task\n")
        return run_task(task)

    p = [Problem.from_sizes(8, 8, 64, "fp16")]
    # A plain tune, for reference: refused before measuring.
    with pytest.raises(ValueError):
        gemmtune.tune(p, families=FAMILIES, progress=False, **kw)
    with pytest.raises(ValueError):
        tune_cluster(p, cluster=client, families=FAMILIES, progress=False, task_fn=noting, **kw)
    assert not ran.exists(), "candidates were measured before the bad table target was refused"
    assert ro.read_text() == before and not ro.stat().st_mode & 0o222


# --- 3. a cluster run never times the fastest tile's other triton_static forms -------------------------

def test_cluster_times_the_other_static_forms_of_the_fastest_tile_as_plain_tune_does(client, tmp_path):
    """A plain tune of a whole space (Planned.refine) times, after the sweep, the other triton_static
    forms of its fastest tile (Tuner.sweep: plan.refine_forms; the H200's gpt2_lmhead_m96 gained 15%
    so). tune_cluster ignores Planned.refine: on the same shape and the same times it measures fewer
    candidates, and its winner can be a slower form than the plain tune's. The times here are
    fabricated (the interpreter's own never put a Triton tile near cuBLAS): the carried static
    tiles beat cuBLAS, their indexed forms are faster still."""
    from gemmtune.device import DeviceInfo
    from gemmtune.tuning.plan import CandidatePlan, refine_forms

    p = Problem.from_sizes(16, 24, 40, "fp16", aligned_b=False)

    def fabricated(task):  # no kernel runs: each candidate's time follows from its id
        from gemmtune.cluster import _plugin
        info = _plugin(task["plugin"]).info()
        out = []
        for i, (pk, cid) in enumerate(task["items"]):
            if cid.startswith("triton_static:"):
                ms = 0.3 if cid.endswith(("-IX", "-IXW")) else 0.5 + 0.001 * (sum(map(ord, cid)) % 97)
            else:
                ms = 1.0
            out.append([pk, cid, {"status": "ok", "device_ms": ms, "repeats": 5}])
        return {"worker": distributed.get_worker().address, "pid": os.getpid(), "info": info, "seconds": 0.0,
                "results": out}

    store = tmp_path / "s.sqlite"
    r = tune_cluster([p], cluster=client, families=["triton_static"], store=store, progress=False,
                     device="h100", task_fn=fabricated)
    planned = CandidatePlan(("triton_static",), "default", DeviceInfo.lookup("h100"))(p)
    assert planned.refine
    measured = {row[3]: row[5] for row in _rows(store)}
    assert set(measured) >= {c.id for c in planned.choices}
    want = refine_forms(p, planned.choices, {c.id: measured[c.id] for c in planned.choices})
    assert want, "the fabricated times must call for the other forms"
    missing = sorted(c.id for c in want if c.id not in measured)
    assert not missing, f"a plain tune times {missing} after the sweep; the cluster run never did"
    assert r.shapes[0].best in {c.id for c in want}


# --- 4. two drivers on one store measure everything twice ---------------------------------------------

def _queued_tasks(client) -> int:
    def count(dask_scheduler):
        return sum(1 for k, ts in dask_scheduler.tasks.items()
                   if str(k).startswith("gemmtune-") and not str(k).startswith("gemmtune-info")
                   and ts.state in ("queued", "processing", "waiting", "no-worker"))
    return client.run_on_scheduler(count)


def test_two_cluster_drivers_sharing_a_store_measure_each_candidate_once(client, tmp_path, monkeypatch):
    """Plain tuners sharing a store split the work through its claims (ResultStore.claim; the store
    says 'tuners sharing one store split the work instead of measuring everything twice'). The
    cluster driver neither claimed nor looked at claims: two drivers started on one store (two users,
    or a rerun started while the first still runs) each measured every candidate, and the second's
    INSERT OR REPLACE overwrote the first's rows."""
    from gemmtune.store import ResultStore

    asked: set = set()  # (driver thread, problem): each driver has claimed, or tried to
    claim = ResultStore.claim

    def noting(self, ctx, problem_key, *args, **kwargs):
        asked.add((threading.current_thread().name, problem_key))
        return claim(self, ctx, problem_key, *args, **kwargs)

    monkeypatch.setattr(ResultStore, "claim", noting)
    store, go = tmp_path / "s.sqlite", tmp_path / "go"

    def held(task):  # both drivers plan and submit before any result is in
        t = time.monotonic()
        while not go.exists() and time.monotonic() - t < 60:
            time.sleep(0.05)
        return run_task(task)

    results, errors = {}, []

    def drive(name):
        try:
            results[name] = tune_cluster(PROBLEMS, cluster=client, families=FAMILIES, store=store, progress=False,
                                         task_fn=held)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=drive, args=(n,), daemon=True, name=f"driver-{n}") for n in ("a", "b")]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20  # both have planned: claimed their share, or submitted everything
    while time.monotonic() < deadline and len(asked) < 2 * len(PROBLEMS) and _queued_tasks(client) < 2 * len(PROBLEMS):
        time.sleep(0.1)
    go.write_text("go")
    for t in threads:
        t.join(timeout=150)
    assert not errors, errors
    assert set(results) == {"a", "b"}
    rows = _rows(store)
    assert len(rows) == N_CANDIDATES == len({(r[2], r[3]) for r in rows})
    measured = results["a"].measured + results["b"].measured
    assert measured == N_CANDIDATES, f"{measured} measurements for {N_CANDIDATES} candidates: each was timed twice"


# --- 5. workers that cannot import gemmtune: a bare Exception and a traceback -------------------------

def test_workers_that_cannot_import_gemmtune_give_a_one_line_error(tmp_path, capsys):
    """A worker whose Python has no working gemmtune (not installed there, a broken install, the
    source tree not on its PYTHONPATH: the README's 'the workers must import the same gemmtune')
    fails the plugin's registration; distributed raises a bare ``Exception('ImportError(...)')``,
    which ``gemmtune tune`` does not catch: a 30-line traceback through tornado and distributed
    instead of its one-line 'gemmtune tune: error: ...' (exit 2). The store is created all the
    same."""
    broken = tmp_path / "broken" / "gemmtune"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('No module named torch (this worker has no torch)')\n")
    worker_env = {"PYTHONPATH": os.pathsep.join([str(broken.parent), DASK_SITE]), "TRITON_INTERPRET": "1"}
    with dask_cli_cluster(tmp_path, worker_env) as address:
        rc = cli.main(["tune", "--shape", "16x16x64:fp16", "--families", "decompose_k", "--cluster", address,
                       "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "t.json"), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("gemmtune tune: error:")
    assert "torch" in err and "Traceback" not in err  # the worker's reason, in one line


# --- 6. workers on another gemmtune: recorded under theirs, the table says the driver's ---------------

def test_workers_on_another_gemmtune_version_are_not_taken_silently(client, tmp_path, monkeypatch):
    """The driver plans the candidates with its own gemmtune; the workers measure them with
    theirs, and the rows are stored under the workers' version while the table's provenance
    names the driver's (table_of uses this process's __version__). Reproduced with real workers
    (a copy of src/ with __version__ 0.2.0 on the dask workers' PYTHONPATH): rows 'gemmtune
    0.2.0', table 'gemmtune 0.1.0', no word said. Here the workers' reports are rewritten."""
    import gemmtune.cluster as C

    other = "0.0.0+elsewhere"

    def info_elsewhere(name):
        r = C.worker_info(name)
        r["info"] = dict(r["info"], gemmtune=other)
        return r

    def task_elsewhere(task):
        reply = run_task(task)
        reply["info"] = dict(reply["info"], gemmtune=other)
        return reply

    real = C.start_workers
    monkeypatch.setattr(C, "start_workers", lambda c, **kw: real(c, info_fn=info_elsewhere, **kw))
    store, out = tmp_path / "s.sqlite", tmp_path / "t.json"
    said = ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            tune_cluster(PROBLEMS[:1], cluster=client, families=FAMILIES, store=store, out=out, progress=False,
                         task_fn=task_elsewhere)
        except (ValueError, RuntimeError) as e:
            said = str(e)
        said += " ".join(str(w.message) for w in caught)
    if out.exists():  # where the run went ahead: the table and the store must agree on the version
        table_version = json.loads(out.read_text())["provenance"]["gemmtune"]
        assert {row[1] for row in _rows(store)} == {table_version}
    assert other in said and gemmtune.__version__ in said, \
        "workers on another gemmtune than the driver's were used without a word"


# --- 7. a CPU worker outside local:N runs Triton without the interpreter: every kernel an error -------

@pytest.mark.skipif(bool(os.environ.get("CUDA_VISIBLE_DEVICES")) or Path("/dev/nvidia0").exists(),
                    reason="about workers without a GPU")
def test_cpu_workers_of_an_address_cluster_run_the_interpreter_as_a_plain_tune(tmp_path):
    """A plain tune on a machine without a GPU gives its workers TRITON_INTERPRET=1 (Tuner.run), and
    so does ``--cluster local:N`` (cluster.connect). A worker of a scheduler address (the README's
    ``dask worker`` recipe, run where there is no GPU) gets nothing: its pools report
    'cpu (Triton interpreter)' but every Triton candidate fails with 'RuntimeError: 0 active
    drivers', and those errors are stored as final results (a rerun skips them)."""
    worker_env = {"PYTHONPATH": os.pathsep.join([str(SRC), DASK_SITE]), "TRITON_INTERPRET": "0"}
    store = tmp_path / "s.sqlite"
    with dask_cli_cluster(tmp_path, worker_env) as address:
        r = tune_cluster(PROBLEMS[:1], cluster=address, families=FAMILIES, store=store, progress=False)
    rows = _rows(store)
    assert r.measured == len(rows) == 2
    bad = [(row[3], row[4]) for row in rows if row[4] != "ok"]
    assert not bad, f"stored as final results: {bad}"


# --- 9. tune_cluster (public: README) takes settings gemmtune.tune refuses or reads otherwise ---------

@pytest.mark.parametrize("bad", [dict(min_gain=5.0), dict(min_gain=-0.5)])
def test_tune_cluster_refuses_a_min_gain_tune_refuses(client, tmp_path, bad):
    """``gemmtune.tune(min_gain=5.0)`` is refused ('a fraction in [0, 1)'); ``tune_cluster``, which
    the README offers for its batch and retries, took it: 5.0 made cuBLAS win every shape
    whatever the times, a negative one let any kernel win."""
    with pytest.raises(ValueError, match="min_gain"):
        gemmtune.tune(PROBLEMS[:1], families=FAMILIES, store=tmp_path / "p.sqlite", progress=False, **bad)
    with pytest.raises(ValueError, match="min_gain"):
        tune_cluster(PROBLEMS[:1], cluster=client, families=FAMILIES, store=tmp_path / "c.sqlite", progress=False,
                     **bad)


def test_tune_cluster_takes_one_family_name_as_tune_does(client, tmp_path):
    """``gemmtune.tune(families="decompose_k")`` tunes that family (TuneOptions splits a string);
    ``tune_cluster`` made it the letters: "unknown kernel family 'd'"."""
    r = tune_cluster(PROBLEMS[:1], cluster=client, families="decompose_k", store=tmp_path / "c.sqlite",
                     progress=False)
    assert r.measured == 2



# --- 10. the driver's claims: honoured against a plain tuner, given back however the run ends ---------

def test_a_cluster_driver_waits_for_what_another_tuner_claimed(client, tmp_path, monkeypatch, capsys):
    """A plain ``tune`` sharing the store (another host's: a made-up owner, which counts as alive)
    holds one shape's candidates: the driver measures the other shapes only, says what it waits
    for, and counts that shape's results, once the other tuner has written them, as reused."""
    import gemmtune.cluster as C
    from gemmtune.configs import Choice
    from gemmtune.store import ResultStore
    from gemmtune.tuning.recorder import result_row

    monkeypatch.setattr(C, "SAY_AFTER_S", 0.2)
    monkeypatch.setattr(C, "OTHERS_POLL_S", 0.2)
    store, p, other = tmp_path / "s.sqlite", PROBLEMS[0], "elsewhere.example:1:other"
    _, ctx, _, _ = C.start_workers(client)  # the run's context, read as the driver reads it
    held = ["aten", "decompose_k:s2"]  # PROBLEMS[0]'s candidates (2: test_tune_cluster_takes_one_family_name...)
    with ResultStore(store) as db:
        assert db.claim(ctx, p.key, held, other, ttl_s=600) == held
    result, errors = {}, []

    def drive():
        try:
            result["r"] = tune_cluster(PROBLEMS, cluster=client, families=FAMILIES, store=store, progress=False)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=drive, daemon=True)
    t.start()
    err, deadline = "", time.monotonic() + 60
    while time.monotonic() < deadline and "another tuner sharing" not in err and t.is_alive():
        time.sleep(0.1)
        err += capsys.readouterr().err
    assert "another tuner sharing" in err, err  # said once its own tasks are in and only the held shape is left
    assert {r[2] for r in _rows_so_far(store)} == {q.key for q in PROBLEMS[1:]}, "the held shape was measured"
    with ResultStore(store) as db:  # the other tuner's results come in; its claims go
        db.record_many(ctx, [result_row(p, Choice.parse(c), {"status": "ok", "device_ms": 1.0, "repeats": 5})
                             for c in held])
        db.release(ctx, p.key, other)
    t.join(timeout=60)
    assert not errors, errors
    r = result["r"]
    assert (r.measured, r.reused) == (N_CANDIDATES - len(held), len(held))


def test_the_drivers_claims_are_given_back_when_it_stops(client, tmp_path):
    """Ctrl-C (here raised where the driver writes its first result) or an error ends the run with
    no claim of its left in the store, as tune's sweep does (tests/test_tune_interrupted.py): one
    left there made a rerun in the same process wait out its expiry."""
    from gemmtune.store import ResultStore

    class Interrupted(ResultStore):
        def claims(self) -> int:
            return self._db.execute("SELECT COUNT(*) FROM claims").fetchone()[0]

        def record_many(self, ctx, rows):
            self.held = self.claims()
            raise KeyboardInterrupt

    with Interrupted(tmp_path / "s.sqlite") as db:
        with pytest.raises(KeyboardInterrupt):
            tune_cluster(PROBLEMS, cluster=client, families=FAMILIES, store=db, progress=False)
        assert db.held == N_CANDIDATES, "the driver measured what it had not claimed"
        assert db.claims() == 0


def test_a_driver_renews_its_claims_and_gives_them_all_back():
    """The store's side: a cluster driver claims its whole plan at the start, so it renews its claims
    while it runs (its queued tasks can wait longer than a claim lasts) and releases every one at
    the end."""
    import tempfile

    from gemmtune.store import ResultStore, RunContext

    ctx = RunContext("cpu", "0.0", "2.6", "3.2", "0.1")
    with tempfile.TemporaryDirectory() as d, ResultStore(Path(d) / "s.sqlite") as db:
        db.claim(ctx, "a", ["x", "y"], "me", ttl_s=1)
        db.claim(ctx, "b", ["x"], "me", ttl_s=1)
        db.claim(ctx, "b", ["z"], "you", ttl_s=1)

        def expiry():
            return dict(db._db.execute("SELECT owner || problem_key || choice_id, expires_at FROM claims"))

        before = expiry()
        db.renew(ctx, "me", ttl_s=600)
        after = expiry()
        assert all(after[k] > before[k] + 500 for k in after if k.startswith("me"))
        assert after["youbz"] == before["youbz"]
        db.release(ctx, None, "me")
        assert list(expiry()) == ["youbz"]


# --- 11. collect --cluster's hard stop kept none of a running shape's results -------------------------

def test_a_running_tasks_results_are_in_the_store_before_it_ends(client, tmp_path):
    """``collect``'s hard stop (its watchdog: export what the store holds, then exit) and a killed
    driver keep what the store holds. A plain tune records each candidate as it is measured; a
    cluster task's results came back only with its reply, once its whole shape was done, so the
    README's ``collect --cluster local:2 --max-minutes 8`` (on a CPU machine) ended with 0 rows, and
    a shape longer than a call could never be collected. Here each task, once it has measured
    everything, holds its reply until the test has looked at the store (it looks for 30 s at most,
    from when the workers' pools are up)."""
    from gemmtune.cluster import start_workers

    store, seen = tmp_path / "s.sqlite", tmp_path / "seen"
    start_workers(client)  # the pools (a torch import each) started before the clock does

    def holding(task, seen=str(seen)):
        reply = run_task(task)
        t = time.monotonic()
        while not os.path.exists(seen) and time.monotonic() - t < 120:
            time.sleep(0.05)
        return reply

    done, errors = {}, []

    def drive():
        try:
            done["r"] = tune_cluster(PROBLEMS[:2], cluster=client, families=FAMILIES, store=store, progress=False,
                                     task_fn=holding)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=drive, daemon=True)
    t.start()
    want = 5  # PROBLEMS[:2]'s candidates
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(_rows_so_far(store)) < want:
        time.sleep(0.1)
    early = len(_rows_so_far(store))
    seen.write_text("seen")
    t.join(timeout=60)
    assert not errors, errors
    assert done["r"].measured == want == len(_rows(store))
    assert early == want, f"{early} of {want} results in the store while their tasks still ran"


# --- 12. Ctrl-C on --cluster local:N: each Dask worker printed a KeyboardInterrupt traceback ---------

CTRL_C_DRIVER = """
import os, sys, time
import gemmtune.cluster as C
from gemmtune import cli
from gemmtune.tuning.tuner import context_of

INFO = {"device_name": "cpu (Triton interpreter)", "capability": "interp", "torch": "0", "triton": "0",
        "gemmtune": __import__("gemmtune").__version__}

class Plugin:
    name = "none"

def fake_start(client, **kw):  # no pools: the worker never imports gemmtune or torch (seconds saved)
    client.wait_for_workers(1, timeout=60)
    return Plugin(), context_of(INFO), list(C._workers(client)), INFO

def held(task, started=sys.argv[1]):  # bound here: on the worker sys.argv is the worker's
    # Running when the test sends Ctrl-C; then let go, so that the worker closes at once.
    open(started, "w").write(str(os.getpid()))
    t = time.monotonic()
    while not os.path.exists(started + ".release") and time.monotonic() - t < 60:
        time.sleep(0.05)

C.start_workers = fake_start
C.tune_cluster.__kwdefaults__["task_fn"] = held
sys.exit(cli.main(["tune", "--shape", "16x16x256:fp16", "--families", "decompose_k", "--cluster", "local:1",
                   "--store", sys.argv[2], "--out", sys.argv[3], "--device", "h100"]))
"""


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signals")
def test_ctrl_c_on_a_local_cluster_prints_one_line(tmp_path):
    """Ctrl-C in a terminal reaches the whole foreground process group. A plain tune prints one line
    ('interrupted; every finished measurement is in the store, rerun to resume'); with ``--cluster
    local:N`` each Dask worker process (started by its nanny in the driver's group) also printed a
    ~30-line KeyboardInterrupt traceback through asyncio and distributed. Here the driver runs
    ``gemmtune tune --cluster local:1`` with its task held, and the test sends SIGINT to its
    process group, as a terminal does."""
    started = tmp_path / "started"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), DASK_SITE])
    env["TRITON_INTERPRET"] = "1"
    log = tmp_path / "out.log"
    with open(log, "w") as f:
        proc = subprocess.Popen([sys.executable, "-c", CTRL_C_DRIVER, str(started), str(tmp_path / "s.sqlite"),
                                 str(tmp_path / "t.json")], env=env, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None and not started.exists():
            time.sleep(0.05)
        assert proc.poll() is None and started.exists(), log.read_text()[-3000:]
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        (tmp_path / "started.release").write_text("go")
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    text = log.read_text()
    assert rc == 130, text[-3000:]
    assert "interrupted; every finished measurement is in the store" in text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-3000:]


# --- 13. waits with no word, "retries" that were not, options taken and ignored -----------------------

def test_a_driver_says_what_it_waits_for(client, monkeypatch, capsys):
    """A driver waiting for its workers (to join, to start their pools: a torch import and a GPU
    context each, minutes on a busy host) said nothing at all."""
    import gemmtune.cluster as C

    monkeypatch.setattr(C, "SAY_AFTER_S", 0.2)

    def slow(name):
        time.sleep(1.0)
        return C.worker_info(name)

    C.start_workers(client, info_fn=slow)
    assert "[gemmtune] waiting for 2 worker(s) to start their pools" in capsys.readouterr().err


def test_a_failed_tasks_line_says_what_was_tried(client, tmp_path):
    """A task with no answer was listed as 'task failed after 2 retries: ...', also when its worker
    died (KilledWorker: the scheduler's allowed-failures, not ``retries``, counts those)."""
    from types import SimpleNamespace

    from distributed.scheduler import KilledWorker

    from gemmtune.cluster import failure_line

    def raising(task):
        raise RuntimeError("no GPU here")

    with pytest.warns(RuntimeWarning, match="not recorded"):
        r = tune_cluster(PROBLEMS[:1], cluster=client, families=FAMILIES, store=tmp_path / "s.sqlite",
                         progress=False, task_fn=raising, retries=1)
    assert r.rejected == [f"{PROBLEMS[0].key}: the task raised on each of its 2 tries: RuntimeError: no GPU here"]
    line = failure_line(KilledWorker("k", SimpleNamespace(address="tcp://a:1"), 3), 2)
    assert "died on each of its 4 tries" in line and "retries" not in line


def test_server_with_cluster_is_refused(client, tmp_path, capsys):
    """``--server`` was dropped without a word with ``--cluster`` (the cluster's workers measured)."""
    with pytest.raises(ValueError, match="--server"):
        gemmtune.tune(PROBLEMS[:1], families=FAMILIES, store=tmp_path / "s.sqlite", progress=False, cluster=client,
                      server=str(tmp_path / "s.sock"))
    assert cli.main(["tune", "--shape", "16x16x64:fp16", "--families", "decompose_k", "--cluster", "local:1",
                     "--server", str(tmp_path / "s.sock"), "--store", str(tmp_path / "s.sqlite"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gemmtune tune: error:") and "--server" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s.sqlite").exists()


def test_the_cluster_runs_the_runoff_as_tune_does(client, tmp_path):
    """``--runoff`` (default 0.05) was dropped without a word with ``--cluster``: a winner within 5%
    of cuBLAS was kept on one sweep's timing, where a plain tune times the two again side by side.
    The times here are made up: decompose_k's split 2% faster than cuBLAS in the sweep, 10% slower
    in the run-off."""
    def close_call(task):
        from gemmtune.cluster import _plugin

        head = {"worker": distributed.get_worker().address, "pid": os.getpid(),
                "info": _plugin(task["plugin"]).info(), "seconds": 0.0}
        if task.get("op") == "runoff":
            best, aten = task["choices"]
            return {**head, "runoff": {"status": "ok", "choices": {best: {"status": "ok", "ms": 1.1, "spread": 0.01},
                                                                   aten: {"status": "ok", "ms": 1.0, "spread": 0.01}}}}
        return {**head, "results": [[pk, cid, {"status": "ok", "device_ms": 1.0 if cid == "aten" else 0.98,
                                               "repeats": 5}] for pk, cid in task["items"]]}

    p = PROBLEMS[:1]
    r = tune_cluster(p, cluster=client, families=FAMILIES, store=tmp_path / "a.sqlite", progress=False,
                     task_fn=close_call)
    assert r.shapes[0].best == "aten" and r.shapes[0].runoff["kept"] == "aten"
    r = tune_cluster(p, cluster=client, families=FAMILIES, store=tmp_path / "b.sqlite", progress=False,
                     task_fn=close_call, runoff=0)
    assert r.shapes[0].best != "aten" and r.shapes[0].runoff is None
