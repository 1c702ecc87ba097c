"""gemmtune collect (gemmtune.collect): the shape plan, each shape's candidates, the claims that
give a shape to one collector, the rows a store should time again, and whole runs in the
interpreter (one process, a resumed one, a hard stop, one collector per "GPU" of --gpus)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch

import gemmtune
from gemmtune import cli, collect
from gemmtune.collect import rows as collect_rows
from gemmtune.collect.run import PASSED_ON, child_argv, core_shares
from gemmtune.configs import scale_tile
from gemmtune.device import DeviceInfo
from gemmtune.problem import Problem
from gemmtune.store import ResultRow, ResultStore, RunContext

H100 = DeviceInfo.lookup("h100")
CTX = RunContext("NVIDIA H200", "9.0", "2.11", "3.6.0", "0.1.0")
ROOT = Path(__file__).resolve().parents[1]


def _row(key: str, cid: str, created: float, status: str = "ok", repeats: int | None = 5,
         ms: float | None = 1.0) -> ResultRow:
    p = Problem.from_key(key)
    return ResultRow(problem_key=key, choice_id=cid, family=cid.split(":")[0].removeprefix("pad+"), status=status,
                     device_ms=ms, eager_ms=None, rel_err=None, m=p.m, n=p.n, k=p.k, dtype=p.dtype,
                     out_dtype=p.out_dtype, layout=f"{p.layout_a}/{p.layout_b}", aligned=True, repeats=repeats,
                     created_at=created)


# ----------------------------------------------------------------------------- the plan
def test_plan_has_400_shapes_none_public(capsys):
    from gemmtune.model.learned import public_shapes

    assert cli.main(["collect", "--list-shapes"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln and not ln.startswith("#")]
    assert len(lines) >= 400 and len(lines) == len(collect.shape_plan())
    pub = public_shapes()
    assert not [ln for ln in lines if tuple(int(x) for x in ln.split(",")[2:5]) in pub]


def test_shapes_csv_replaces_the_plan_without_public_or_repeated_shapes(tmp_path, capsys):
    """``--shapes CSV``: the CSV's mm rows in the plan's form (layout_b kept, dtype column unused),
    public-suite and repeated shapes left out with a note; a bmm row is refused, naming it."""
    csv_file = tmp_path / "heads.csv"
    csv_file.write_text("group,name,M,N,K,dtype,layout_b\n"
                        "head,h1,4,50257,768,bfloat16,row\n"
                        "head,h2,96,50257,768,bfloat16,row\n"      # gpt2_lmhead_m96: public
                        "head,h3,4,50257,768,float16,col\n"        # the same sizes again
                        "head,h4,16,30522,1024,bfloat16,col\n")
    assert collect.csv_plan(csv_file) == ([("head", "h1", 4, 50257, 768, "row"),
                                          ("head", "h4", 16, 30522, 1024, "col")], ["h2", "h3"])
    assert cli.main(["collect", "--shapes", str(csv_file), "--list-shapes"]) == 0
    out, err = capsys.readouterr()
    assert [ln for ln in out.splitlines() if not ln.startswith("#")] == ["head,h1,4,50257,768,row",
                                                                         "head,h4,16,30522,1024,col"]
    assert "left out 2 row(s)" in err and "h2, h3" in err
    args = cli.build_parser().parse_args(["collect", "--gpus", "0,1", "--shapes", str(csv_file), "--out", str(tmp_path)])
    argv = child_argv(args, "0", tmp_path / "s.sqlite", tmp_path / "claims", 5.0)
    assert argv[argv.index("--shapes") + 1] == str(csv_file)  # each GPU's collector gets the same shapes
    bad = tmp_path / "bmm.csv"
    bad.write_text("group,name,M,N,K,dtype,op,batch\nb,b1,4,8,16,bfloat16,bmm,2\n")
    with pytest.raises(ValueError, match="b1: gemmtune collect --shapes takes mm rows"):
        collect.csv_plan(bad)


def test_shapes_csv_collects_every_row_in_every_dtype_phase(tmp_path, capsys):
    """The built-in plan runs fp32 and fp8 on a third of its shapes (its time budget); a user's
    ``--shapes`` CSV is collected whole in every phase (it used to lose two rows of three there,
    saying so nowhere). The plan itself keeps its third."""
    csv_file = tmp_path / "f32.csv"
    csv_file.write_text("group,name,M,N,K,dtype\n" + "".join(
        f"g,s{i},{16 * (i + 1)},{64 * (i + 1)},{128 * (i + 1)},float32\n" for i in range(5)))
    assert cli.main(["collect", "--shapes", str(csv_file), "--dtypes", "fp32,e4m3", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "float32: 5 shapes" in out and "float8_e4m3fn: 5 shapes" in out, out
    shapes, _ = collect.csv_plan(csv_file)
    assert len(collect.problems_for("float32", shapes, every=True)) == 5
    assert len(collect.problems_for("float32", shapes)) == 2  # the plan's rule: a third


def test_collect_help_names_its_options(capsys):
    with pytest.raises(SystemExit):
        cli.main(["collect", "--help"])
    out = capsys.readouterr().out
    assert "--max-minutes" in out and "--timing {quick,standard}" in out and "--compile-ahead" in out
    assert "--gpus" in out


# ----------------------------------------------------------------------------- candidates
def test_samples_come_from_the_exhaustive_spaces():
    p = Problem.from_sizes(64, 64, 32768, "bf16")
    rng = np.random.default_rng(0)
    for fam in ("triton_mm", "splitk"):
        everything = {c.id for c in collect.sample_space(p, fam, H100, 10**6, rng)}
        assert everything == {c.id for c in gemmtune.space(p, fam, "exhaustive", H100)}, fam
    q = Problem.from_sizes(333, 4097, 1025, "bf16")
    s1 = [c.id for c in collect.sample_choices(q, H100, mm=10, splitk=5, pad=3)]
    assert s1 == [c.id for c in collect.sample_choices(q, H100, mm=10, splitk=5, pad=3)]  # seeded by the key
    assert s1[0] == "aten" and "pad+aten" in s1 and len(set(s1)) == len(s1)


def test_the_raw_configs_are_the_families_own():
    """One source: the collection samples the list the family's space is built from."""
    from gemmtune.kernels import splitk, triton_mm

    assert collect.exhaustive_raw("triton_mm") == tuple(triton_mm.raw_configs("exhaustive"))
    assert collect.exhaustive_raw("splitk") == tuple(splitk.raw_configs("exhaustive"))


def test_pool_sampler_draws_from_a_fixed_subset_and_old_shapes_keep_theirs():
    p = Problem.from_sizes(512, 1024, 4096, "bf16")
    pool = collect.pool_raw("triton_mm")
    assert len(pool) == collect.POOL_SIZES["triton_mm"] and pool == collect.pool_raw("triton_mm")
    assert set(pool) <= set(collect.exhaustive_raw("triton_mm"))
    allowed = {scale_tile(c, p) for c in pool}
    drawn = collect.sample_choices(p, H100, mm=40, splitk=10, pad=0, sampler="pool")
    mm = [c.config for c in drawn if c.family == "triton_mm"]
    assert len(mm) == 40 and set(mm) <= allowed
    # Every shape of a pool run draws from the same few configs; whole-space draws do not.
    q = Problem.from_sizes(768, 2048, 8192, "bf16")

    def tiles(problem, sampler):
        return {c.id for c in collect.sample_choices(problem, H100, mm=40, splitk=0, pad=0, sampler=sampler)
                if c.family == "triton_mm"}

    assert len(tiles(p, "pool") & tiles(q, "pool")) > len(tiles(p, "random") & tiles(q, "random"))
    with pytest.raises(ValueError, match="sampler must be one of"):
        collect.sample_choices(p, H100, mm=1, splitk=1, pad=0, sampler="grid")
    # A shape with rows of the random sample keeps it (finished stays finished); a new one gets the pool.
    old = collect.sample_choices(p, H100, mm=40, splitk=10, pad=0, sampler="random")
    have = {c.id for c in old[:5]}
    kw = dict(mm=40, splitk=10, pad=0, sampler="pool")
    assert [c.id for c in collect.shape_choices(p, H100, have, **kw)] == [c.id for c in old]
    assert [c.id for c in collect.shape_choices(p, H100, None, **kw)] == [c.id for c in drawn]


# ----------------------------------------------------------------------------- claims
def test_claims_give_each_shape_to_one_process(tmp_path):
    keys = [f"mm:M{i}-N8-K8:bf16->bf16:row.a/row.a" for i in range(50)]
    with ThreadPoolExecutor(4) as ex:
        won = list(ex.map(lambda k: [collect.claim(tmp_path, k) for _ in range(3)], keys * 2))
    assert sum(map(sum, won)) == len(keys)  # each key claimed exactly once, whoever asked
    assert len(list(tmp_path.iterdir())) == len(keys)


def test_core_shares_and_the_collectors_command_line(tmp_path):
    assert core_shares(list(range(16)), 4) == [list(range(i, i + 4)) for i in (0, 4, 8, 12)]
    args = cli.build_parser().parse_args(["collect", "--gpus", "0,1", "--dtypes", "fp16", "--batch", "3",
                                          "--out", str(tmp_path), "--cpu-interpreter"])
    argv = child_argv(args, "1", tmp_path / "s.sqlite", tmp_path / "claims", 7.5)
    assert argv[1:4] == ["-m", "gemmtune.cli", "collect"] and "--gpus" not in argv
    for opt, val in (("--store", str(tmp_path / "s.sqlite")), ("--claims", str(tmp_path / "claims")),
                     ("--dtypes", "fp16"), ("--batch", "3"), ("--max-minutes", "7.5000"),
                     ("--progress-name", "collect-progress-gpu1.json")):
        assert argv[argv.index(opt) + 1] == val, opt
    assert "--no-export" in argv and "--cpu-interpreter" in argv
    again = cli.build_parser().parse_args(argv[3:])  # the child's command line parses
    assert again.store == tmp_path / "s.sqlite" and again.gpus is None


# ----------------------------------------------------------------------------- rows to re-time
def test_stale_edge_rows_are_the_triton_rows_timed_before_the_masks(tmp_path):
    decode = Problem.from_sizes(1, 4096, 4096, "bf16", layout_b="col").key   # M = 1: masked now
    wide = Problem.from_sizes(4096, 4096, 4096, "bf16").key                  # no edge at all
    odd = Problem.from_sizes(512, 50257, 768, "bf16").key                    # odd N, row-major B
    old, new = collect.EDGE_MASKS_SINCE - 3600, collect.EDGE_MASKS_SINCE + 3600
    rows = [(decode, "triton_mm:BM64-BN32-BK128-S5-W4-G8", old),      # stale
            (decode, "splitk:BM16-BN64-BK64-S3-W4-G8-SK4-atomic", old),  # stale (M < 16)
            (decode, "decompose_k:s2", old),                       # stale (its tile)
            (decode, "aten", old),                                 # cuBLAS: never
            (decode, "triton_mm:BM16-BN64-BK64-S3-W4-G8", new),       # timed after: fine
            (wide, "triton_mm:BM128-BN128-BK64-S3-W4-G8", old),       # nothing masked
            (odd, "triton_mm:BM128-BN128-BK64-S3-W4-G8", old),        # odd N masked now
            (odd, "pad+triton_mm:BM128-BN128-BK64-S3-W4-G8", old)]    # padded N is even
    with ResultStore(tmp_path / "s.sqlite") as st:
        st.record_many(CTX, [_row(k, c, t) for k, c, t in rows])
        stale = collect.stale_edge_rows(st)
        assert sorted(r[-2:] for r in stale) == sorted([rows[i][:2] for i in (0, 1, 2, 6)]), stale
        assert st.drop(stale) == 4
        assert collect.stale_edge_rows(st) == [] and len(st.keys()) == 4
    assert len(collect_rows.measured_keys(tmp_path / "s.sqlite")) == 4


def test_launch_bound_rows_are_the_old_cut_rows_under_the_bound(tmp_path):
    old, new, bound = collect.LAUNCH_BOUND_SINCE - 60, collect.LAUNCH_BOUND_SINCE + 60, collect.LAUNCH_BOUND_MS
    p = Problem.from_sizes(64, 64, 64, "bf16").key
    rows = [_row(p, "triton_mm:BM16-BN16-BK16-S1-W2-G1", old, repeats=1, ms=0.08),   # cut, launch-sized: dropped
            _row(p, "triton_mm:BM16-BN16-BK32-S1-W2-G1", old, repeats=1, ms=bound * 0.99),  # just under: dropped
            _row(p, "triton_mm:BM16-BN16-BK64-S1-W2-G1", old, repeats=1, ms=bound * 1.01),  # over it: kept
            _row(p, "triton_mm:BM16-BN32-BK16-S1-W2-G1", old, repeats=5, ms=0.02),   # timed in full: kept
            _row(p, "triton_mm:BM16-BN32-BK32-S1-W2-G1", new, repeats=1, ms=0.08),   # the fixed timer's cut: kept
            _row(p, "triton_mm:BM16-BN32-BK64-S1-W2-G1", old, "crashed", 1, 0.08)]   # not a timing: kept
    with ResultStore(tmp_path / "s.sqlite") as st:
        st.record_many(CTX, rows)
        bad = collect.launch_bound_rows(st)
        assert sorted(r[-1] for r in bad) == [rows[0].choice_id, rows[1].choice_id]
        kept = tmp_path / "dropped.csv.gz"
        assert st.save_rows(bad, kept) == 2
        with gzip.open(kept, "rt") as f:
            lines = f.read().splitlines()
        assert "problem_key" in lines[0].split(",") and len(lines) == 3
        assert st.drop(bad) == 2
        assert collect.launch_bound_rows(st) == [] and st.count() == 4


def test_a_drop_takes_the_rows_of_their_own_run_context_only(tmp_path):
    """The same (problem, choice) measured under two run contexts (two GPUs, or one before a torch
    upgrade): a row that ran out of memory under one is dropped there; the other's good row stays."""
    import dataclasses

    other = dataclasses.replace(CTX, device_name="NVIDIA H100 80GB HBM3")
    p, cid = Problem.from_sizes(64, 64, 64, "bf16").key, "triton_mm:BM16-BN16-BK16-S1-W2-G1"
    oom = dataclasses.replace(_row(p, cid, 1.0, "error", ms=None), reason="OutOfMemoryError: CUDA out of memory.")
    with ResultStore(tmp_path / "s.sqlite") as st:
        st.record_many(CTX, [oom])
        st.record_many(other, [_row(p, cid, 1.0)])
        assert st.save_rows(st.oom_rows(), tmp_path / "kept.csv.gz") == 1
        assert st.drop(st.oom_rows()) == 1
        assert [c for c, _ in st.rows()] == [other] and st.best(other, p).device_ms == 1.0
        assert st.drop([(p, cid)]) == 1  # a (problem, choice) pair still names every context's row
        with pytest.raises(ValueError, match="row keys are"):
            st.drop([(p,)])


def test_oom_rows_are_the_failures_of_a_full_gpu_and_drop_oom_retimes_them(tmp_path, capsys):
    import dataclasses
    from types import SimpleNamespace

    from gemmtune.collect.run import prepare_store

    p = Problem.from_sizes(64, 64, 64, "bf16").key
    oom = "OutOfMemoryError: CUDA out of memory. Tried to allocate 1.05 GiB. GPU 0 has a total capacity of 79.18 GiB"
    rows = [dataclasses.replace(_row(p, "triton_mm:BM16-BN16-BK16-S1-W2-G1", 1.0, "error", ms=None), reason=oom),
            dataclasses.replace(_row(p, "splitk:BM16-BN16-BK16-S1-W2-G1-SK2-det", 1.0, "error", ms=None),
                                reason="RuntimeError: CUDA error: out of memory"),  # not torch's OOM: kept
            dataclasses.replace(_row(p, "triton_mm:BM16-BN16-BK32-S1-W2-G1", 1.0, "crashed", ms=None), reason="segfault"),
            _row(p, "aten", 1.0)]
    store = tmp_path / "s.sqlite"
    with ResultStore(store) as st:
        st.record_many(CTX, rows)
        assert [r[-2:] for r in st.oom_rows()] == [(p, rows[0].choice_id)]
    args = SimpleNamespace(resume_from=None, drop_stale_edges=False, drop_launch_bound=False, drop_oom=True)
    prepare_store(args, store, tmp_path)
    assert "--drop-oom: 1 rows dropped" in capsys.readouterr().out
    with ResultStore(store) as st:
        assert st.count() == 3 and st.oom_rows() == []
    with gzip.open(tmp_path / "dropped-oom.csv.gz", "rt") as f:
        assert len(f.read().splitlines()) == 2


@pytest.mark.slow  # a dry run over every phase (~6 s)
def test_dry_run_counts_what_a_store_leaves(tmp_path, capsys):
    import re

    base = ["collect", "--dry-run", "--dtypes", "bf16", "--limit-shapes", "2"]
    assert cli.main(base) == 0
    total = int(re.search(r"2 shapes, (\d+) candidates", capsys.readouterr().out).group(1))
    _group, _name, m, n, k, layout_b = collect.shape_plan()[0]
    key = Problem.from_sizes(m, n, k, "bf16", layout_b=layout_b).key
    with ResultStore(tmp_path / "s.sqlite") as st:
        st.record_many(CTX, [_row(key, "aten", 1.0), _row(Problem.from_sizes(3, 3, 3, "bf16").key, "aten", 1.0)])
    collect_rows.gzip_file(tmp_path / "s.sqlite", tmp_path / "s.sqlite.gz")
    assert cli.main([*base, "--resume-from", str(tmp_path / "s.sqlite.gz")]) == 0
    assert f"left after s.sqlite.gz: {total - 1} candidates on 2 shapes" in capsys.readouterr().out


# ----------------------------------------------------------------------------- new families, fp8
def test_new_families_are_sampled_after_the_rest():
    """The families the shipped model has no timings of come last, from their own seeded stream:
    the rest of a shape's sample is the one it had before (so finished shapes stay finished for
    it), and each new family's configs are valid members of its own space for the problem."""
    decode_odd = Problem.from_sizes(8, 4097, 1025, "bf16", layout_b="col")  # skinny and triton_static serve it
    old = collect.sample_choices(decode_odd, H100, mm=6, splitk=3, pad=2)
    new = collect.sample_choices(decode_odd, H100, mm=6, splitk=3, pad=2, new=3)
    assert new[:len(old)] == old
    added = new[len(old):]
    fams = {c.family for c in added}
    assert {"skinny", "triton_static"} <= fams and len(added) <= 2 * 3 * len(collect.NEW_FAMILIES)
    padded = decode_odd.padded()
    assert {c.family for c in added if c.pad} >= {"persistent_tma"}  # unaligned: their pad+ variants too
    for c in added:
        space = gemmtune.space(padded if c.pad else decode_odd, c.family, "exhaustive", device=H100)
        assert c.config in {x.config for x in space}, c.id
    assert len({c.id for c in added}) == len(added)
    assert new == collect.sample_choices(decode_odd, H100, mm=6, splitk=3, pad=2, new=3)  # seeded
    aligned = Problem.from_sizes(2048, 2048, 2048, "bf16")
    assert not any(c.family == "triton_static" or c.pad
                   for c in collect.sample_choices(aligned, H100, mm=2, splitk=1, pad=1, new=3))


def test_core_sample_adds_skinny_cuda_core_configs_at_decode_only(capsys):
    """--core-sample N: N more of skinny's CUDA-core configs (no tl.dot) where M <= 16, after the
    rest of the sample, which stays as it was; none on a larger M; none drawn twice; seeded."""
    decode = Problem.from_sizes(2, 3072, 12288, "fp32", layout_b="col")
    old = collect.sample_choices(decode, H100, mm=6, splitk=3, pad=0, new=12)
    new = collect.sample_choices(decode, H100, mm=6, splitk=3, pad=0, new=12, core=5)
    assert new[:len(old)] == old and new == collect.sample_choices(decode, H100, mm=6, splitk=3, pad=0, new=12, core=5)
    added = new[len(old):]
    assert 0 < len(added) <= 5 and all(c.family == "skinny" and not c.config.dot for c in added)
    assert len({c.id for c in new}) == len(new)
    core_space = {c.config for c in gemmtune.space(decode, "skinny", "exhaustive", device=H100) if not c.config.dot}
    assert {c.config for c in added} <= core_space
    prefill = Problem.from_sizes(64, 3072, 12288, "fp32")
    assert collect.sample_choices(prefill, H100, mm=6, splitk=3, pad=0, core=5) == \
        collect.sample_choices(prefill, H100, mm=6, splitk=3, pad=0)
    args = cli.build_parser().parse_args(["collect", "--core-sample", "5"])
    assert args.core_sample == 5 and "core_sample" in PASSED_ON


def test_fp8_phase_is_scaled_mm_on_a_third_of_the_plan():
    from gemmtune import kernels

    plan = collect.shape_plan()
    probs = collect.problems_for("float8_e4m3fn", plan)
    assert len(probs) == len(plan[::3])
    ps = [p for _, _, p in probs]
    assert all(p.op == "scaled_mm" and p.out_dtype == "bfloat16" and p.layout_b == "col" for p in ps)
    assert {p.scale for p in ps} == {"row", "tensor"}
    p = next(p for p in ps if p.m <= 64)
    cands = collect.sample_choices(p, H100, mm=4, splitk=2, pad=2, new=2)
    assert cands[0].id == "aten" and len({c.id for c in cands}) == len(cands)
    for c in cands:  # every unpadded candidate is one its family serves for this fp8 problem
        if not c.pad:
            fam = kernels.get(c.family)
            fam.validate(p, c.config)
            assert fam.constraint(c.config, p, H100) is None, c.id


# ----------------------------------------------------------------------------- whole runs (interpreter)
SMALL = ["--cpu-interpreter", "--groups", "square", "--limit-shapes", "2", "--dtypes", "fp16",
         "--mm-sample", "2", "--splitk-sample", "1", "--pad-sample", "1", "--new-sample", "1",
         "--compile-workers", "2"]
interpreter_only = pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter run is for machines "
                                      "without a GPU")


def _collect(args: list[str], out: Path, timeout: float = 600):
    env = dict(os.environ, TRITON_INTERPRET="1")
    env["PYTHONPATH"] = str(ROOT / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("GEMMTUNE_FAULTS", None)
    return subprocess.run([sys.executable, "-m", "gemmtune.cli", "collect", "--out", str(out), *args], env=env,
                          capture_output=True, text=True, check=False, timeout=timeout)


@pytest.mark.slow
@interpreter_only
def test_collect_runs_and_resumes_in_the_interpreter(tmp_path):
    from gemmtune.bench.timing import QUICK_WALL

    call1 = tmp_path / "call1"
    res = _collect(SMALL + ["--batch", "1"], call1)
    assert res.returncode == 0, res.stderr
    prog = json.loads((call1 / "collect-progress.json").read_text())
    assert prog["timing"] == "quick" and prog["compile_ahead"] == 2
    assert prog["finished"] is True and prog["hard_stop"] is False
    assert (prog["shapes_done"], prog["batches"]) == (2, 2)
    assert prog["rows_added"] == prog["rows_in_store"] >= 4
    assert prog["candidates_per_s"] > 0 and prog["tune_s"] > 0 and prog["compile_wait_s"] >= 0
    with ResultStore(call1 / "collect.sqlite") as db:
        rows = [row for _, row in db.rows()]
    assert len(rows) == prog["rows_in_store"]
    ok = [r for r in rows if r.status == "ok"]
    assert ok and {r.repeats for r in ok} == {QUICK_WALL["repeats"]}  # the quick profile timed them
    assert (call1 / "collect-cpu-triton-interpreter.csv.gz").is_file()

    # The next call resumes from the compressed store: nothing is left to measure.
    call2 = tmp_path / "call2"
    res = _collect(SMALL + ["--resume-from", str(call1 / "collect.sqlite.gz")], call2)
    assert res.returncode == 0, res.stderr
    again = json.loads((call2 / "collect-progress.json").read_text())
    assert again["finished"] is True and again["batches"] == 0 and again["rows_added"] == 0
    assert again["rows_in_store"] == prog["rows_in_store"] and again["shapes_done"] == 2


@pytest.mark.slow
@interpreter_only
def test_one_collector_per_gpu_measures_each_shape_once(tmp_path):
    """--gpus 0,1: two collector processes on one store and one claims folder (on a CPU the
    'GPUs' are only CUDA_VISIBLE_DEVICES values): every candidate is measured once, neither
    exports, the parent exports once. Three small shapes (--shapes: the plan's cube_128 and cube_256
    took two thirds of the run in the interpreter), still more shapes than processes. No compile
    workers (the interpreter's default): each collector's every batch would start two more torch
    processes, and what is checked here is the claims between collectors (the compile pool in a
    collect: test_collect_runs_and_resumes_in_the_interpreter)."""
    suite = tmp_path / "suite.csv"
    suite.write_text("group,name,M,N,K,dtype\nsmall,s_64,64,64,64,float16\nsmall,s_32x64,32,64,64,float16\n"
                     "small,s_64x32,64,32,128,float16\n")
    res = _collect(["--cpu-interpreter", "--shapes", str(suite), "--dtypes", "fp16",
                    "--mm-sample", "1", "--splitk-sample", "1", "--pad-sample", "1", "--new-sample", "1",
                    "--compile-workers", "0", "--batch", "1", "--gpus", "0,1"], tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    progs = [json.loads((tmp_path / f"collect-progress-gpu{i}.json").read_text()) for i in range(2)]
    assert all(pg["shared_store"] and pg["sampler"] == "pool" for pg in progs)
    assert [pg["cuda_visible_devices"] for pg in progs] == ["0", "1"]
    with ResultStore(tmp_path / "collect.sqlite") as db:
        rows = [row for _, row in db.rows()]
    pairs = [(r.problem_key, r.choice_id) for r in rows]
    assert len(pairs) == len(set(pairs)) and len({k for k, _ in pairs}) == 3
    assert sum(pg["measured_this_call"] for pg in progs) == len(pairs)  # no candidate measured twice
    for pg in progs:  # each process's rate counts its own candidates, not the other's
        assert pg["candidates_per_s"] * pg["wall_s"] == pytest.approx(pg["measured_this_call"])
        assert pg["ok_per_s"] is None
    assert (tmp_path / "collect.sqlite.gz").is_file()  # the one export
    assert "[gpu0]" in res.stdout and "[gpu1]" in res.stdout


@interpreter_only
def test_collect_hard_stop_exports_a_resumable_store(tmp_path):
    # A hard stop long before the batch can end: the watchdog exports what the store holds.
    res = _collect(SMALL + ["--hard-stop-minutes", "0.001"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "hard stop" in res.stderr
    prog = json.loads((tmp_path / "collect-progress.json").read_text())
    assert prog["hard_stop"] is True and prog["finished"] is False
    plain = tmp_path / "copy.sqlite"
    with gzip.open(tmp_path / "collect.sqlite.gz", "rb") as f:
        plain.write_bytes(f.read())
    with ResultStore(plain) as db:  # a valid store, to resume from
        assert db.count() == prog["rows_in_store"]
    assert not (tmp_path / "collect.snapshot.sqlite").exists()


def test_dry_run_leaves_a_schema_1_resume_store_as_it_is(tmp_path, capsys):
    """--dry-run writes nothing: a schema-1 --resume-from store (plain .sqlite) was opened for writing,
    so migrated in place to schema 2 (and switched to WAL) by a plan that only counts. It is read
    read-only now (store.opened_readonly), its rows all of unknown fp32 arithmetic ("")."""
    import sqlite3

    from test_fp32_precision_store import FP32, make_v1, raw

    path = make_v1(tmp_path / "v1.sqlite")
    before = path.read_bytes()
    argv = ["collect", "--dry-run", "--dtypes", "fp32", "--limit-shapes", "1", "--resume-from", str(path),
            "--drop-launch-bound", "--drop-oom"]  # (its 'triton_mm:x' row is no id --drop-stale-edges parses)
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    # Both fp32 rows of the v1 store are of unknown arithmetic: measured again.
    assert "2 fp32 rows of v1.sqlite were timed under another fp32 arithmetic" in out, out
    assert path.read_bytes() == before
    assert not (tmp_path / "v1.sqlite-wal").exists()
    assert raw(path, "SELECT value FROM meta WHERE key='schema_version'") == [("1",)]
    assert "fp32_precision" not in {r[1] for r in raw(path, "PRAGMA table_info(results)")}
    assert (FP32.key, "aten") in collect_rows.measured_keys(path)  # read-only too
    assert path.read_bytes() == before
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] != "wal"
