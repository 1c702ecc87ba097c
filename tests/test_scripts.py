"""The GPU scripts' CPU paths: bench_dispatch.py --smoke (every section, toy sizes, the
Triton interpreter) and report_dispatch.py on the committed H200 results. They guard the
scripts the device runs against breaking between GPU sessions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mdtables import md_rows, md_tables

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "2026-11-22-h200-dispatch"


def _env() -> dict:
    env = dict(os.environ, TRITON_INTERPRET="1")
    env["PYTHONPATH"] = str(ROOT / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


class Ran:
    """What a script's run gave: its exit status, stdout and stderr (as a subprocess's)."""

    def __init__(self, returncode, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def script_main(monkeypatch, capsys):
    """``script_main(name, *args)``: ``python scripts/NAME.py ARGS`` in this process, as a Ran.

    The script is loaded afresh from its file with scripts/ first on sys.path (its sibling imports,
    as ``python scripts/NAME.py`` has them), its ``main()`` called with ``sys.argv`` set, and its
    exit taken as the interpreter takes it: main's return value, a SystemExit's code, or a
    SystemExit message printed to stderr with status 1. For the dry runs whose time is the Triton
    interpreter's and torch's start-up (TRITON_INTERPRET is set here, as _env() sets it for a
    subprocess). Inductor settings a script sets for itself are put back afterwards."""
    from torch._inductor import config as iconfig

    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    kept = {(obj, name): getattr(obj, name) for obj in (iconfig, iconfig.triton)
            for name in ("fx_graph_cache", "enable_pdl") if hasattr(obj, name)}

    def run(name: str, *args: str) -> Ran:
        monkeypatch.setattr(sys, "argv", [str(ROOT / "scripts" / f"{name}.py"), *args])
        mod = _script_module(name)
        capsys.readouterr()
        try:
            rc = mod.main()
        except SystemExit as e:
            rc = e.code
        out, err = capsys.readouterr()
        if isinstance(rc, str):  # SystemExit("message"): printed to stderr, status 1
            err, rc = err + rc + "\n", 1
        return Ran(0 if rc is None else rc, out, err)
    yield run
    for (obj, name), value in kept.items():  # (monkeypatch cannot undo a torch config module's setattr)
        setattr(obj, name, value)


@pytest.mark.slow
def test_bench_dispatch_smoke_every_section(tmp_path, script_main):
    """Every section, with --hints (two of the smoke's three default hints): --hints replaces the
    default hints everywhere the script uses them (the table's hint kernels, the sweep's and the
    save/load children's dispatchers)."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_dispatch.py"), "--smoke", "--oracle",
                        "--exclude-aten", "--families", "triton_mm", "--oracle-families", "triton_mm",
                        "--saveload-families", "triton_mm", "--hints", "64,4", "--out", str(tmp_path),
                        "--store", str(tmp_path / "s.sqlite")],
                       env=_env(), capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads((tmp_path / "bench_dispatch.json").read_text())
    secs = doc["sections"]
    assert set(secs) == {"table", "sweep", "saveload", "compile", "overhead"}
    assert not [n for n, s in secs.items() if "error" in s], {n: s.get("error") for n, s in secs.items()}
    # --exclude-aten: the hint kernels are Triton ones, so the seed table compares kernels.
    assert all("aten" not in row for row in secs["table"]["rows"] if row.startswith("kernel tuned"))
    rows = secs["table"]["rows"]
    assert [k.split(" (")[0] for k in rows if k.startswith("kernel tuned")] == [
        "kernel tuned at M=4", "kernel tuned at M=64"]
    sweep = secs["sweep"]
    assert sweep["done"] == len(sweep["points"]) == 4 and sweep["oracle_done"] == 4
    assert all(r["oracle"]["best"] != "aten" for r in sweep["rows"])
    load = secs["saveload"]["load_with_binaries"]
    assert load["rc"] == 0 and all(load["correct"].values())
    assert secs["compile"]["graph_breaks"] == 0 and secs["compile"]["unique_graphs"] == 1
    # And the report renders it (in this process: the script as a command runs in
    # test_report_dispatch_on_the_committed_h200_results).
    r = script_main("report_dispatch", str(tmp_path / "bench_dispatch.json"), "--out", str(tmp_path / "rep"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Seed table" in (tmp_path / "rep" / "report.md").read_text()


def test_bench_dispatch_hints_flag(tmp_path, script_main):
    """--hints that are not integers are refused before any work (the flag's effect on every
    section: test_bench_dispatch_smoke_every_section, which runs with --hints)."""
    bad = script_main("bench_dispatch", "--smoke", "--exclude-aten", "--families", "triton_mm", "--out", str(tmp_path),
                      "--store", str(tmp_path / "s.sqlite"), "--hints", "4,x")
    assert bad.returncode == 2 and "--hints takes comma-separated integers" in bad.stderr
    assert not (tmp_path / "bench_dispatch.json").exists()


@pytest.mark.slow
def test_bench_edge_smoke(tmp_path, script_main):
    """scripts/bench_edge.py on the interpreter: both edge modes verified, JSON written."""
    r = script_main("bench_edge", "--smoke", "--out", str(tmp_path))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = json.loads((tmp_path / "bench_edge.json").read_text())["rows"]
    cases = [(row["shape"], name, c["status"]) for row in rows for name, c in row["cases"].items()
             if name != "cuBLAS"]  # the Triton cases; cuBLAS is timed beside them (below)
    assert len(cases) == 4 and all(st == "ok" for *_, st in cases), cases
    assert all(row["cases"]["cuBLAS"]["status"] == "ok" for row in rows)
    assert {name.split()[-1] for _, name, _ in cases} == {"wrap", "mask"}
    # Timed in the bench's interleaved rounds (host wall clock here): every kernel, every round.
    for row in rows:
        assert set(row["cases"]) == {"cuBLAS", *(n for shape, n, _ in cases if shape == row["shape"])}
        for c in row["cases"].values():
            assert c["device_us"] > 0 and len(c["rounds_us"]) == 3 and c["spread"] >= 0
    [edge] = [r for t in md_tables((tmp_path / "report.md").read_text()) for r in t if "m1_64x40" in r.values()]
    assert "1×64×40" in edge.values() and "`BM16-BN32-BK16-S2-W4-G4`" in edge.values()


@pytest.mark.slow  # reads and reports every committed H200 dispatch result (~4 s)
def test_report_dispatch_on_the_committed_h200_results(tmp_path):
    files = sorted(RESULTS.glob("bench_dispatch-*.json"))
    assert len(files) == 5
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "report_dispatch.py"), *map(str, files),
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    md = (tmp_path / "report.md").read_text()
    # The numbers the README quotes come from these files.
    # Each is a row of one of the reports' tables (the five files give several of each kind).
    assert md_rows(md, **{"mode": "similarity", "geomean time / oracle (M where the oracle ran)":
                          "0.999 (target ≤ 1.05: MET)", "geomean time / cuBLAS (all M)": "1.009"})
    assert md_rows(md, **{"M×N×K": "1×256×256", "torch.mm": "18.1"})
    assert md_rows(md, **{"kernel": "kernel tuned at M=64 (triton_mm:BM64-BN32-BK128-S5-W4-G8)",
                          "M = 64": "13.1", "M = 256": "43.1", "M = 4096": "675.9"})
    assert md_rows(md, **{"process": "load_with_binaries", "kernels saved / restored": "9",
                          "compiled in the new process": "0", "new decisions (tuning)": "0"})
    pytest.importorskip("matplotlib")
    from PIL import Image

    for stem in ("bench_dispatch-all-families", "bench_dispatch-triton-only"):  # the two with a sweep
        with Image.open(tmp_path / f"sweep-{stem}.png") as im:
            assert im.size[0] > 100


def test_report_dispatch_rejects_other_json(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"shapes": []}')
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "report_dispatch.py"), str(bad), "--out",
                        str(tmp_path / "o")], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 2 and "not a bench_dispatch.py result" in r.stderr


def test_check_inductor_fp8_lut_dry_run():
    """The fp8 Inductor check's table and export (its GPU part runs on the device only)."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_inductor_fp8_lut.py"), "--dry-run"],
                       env=_env(), capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "exported: 14 keys for 4 problems; skipped: []" in r.stdout and "dry run: ok" in r.stdout
    for template in ("triton::mm", "aten::_scaled_mm", "triton::scaled_mm_device_tma_epilogue_scaling"):
        assert f"'template_id': '{template}'" in r.stdout


def test_pad_copy_bench_smoke(tmp_path, script_main):
    """scripts/pad_copy_bench.py --smoke on the interpreter: every method runs and matches F.pad
    bit for bit on the toy shapes, the table prints and the JSON is written."""
    out = tmp_path / "pad.json"
    r = script_main("pad_copy_bench", "--smoke", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "best torch/triton" in r.stdout
    doc = json.loads(out.read_text())
    assert doc["rows"] and all("error" not in row for row in doc["rows"])
    for row in doc["rows"]:
        assert set(row["methods"]) == {"triton", "torch", "f_pad", "cat", "slice_copy"}
        assert all(m.get("ok") for m in row["methods"].values()), row


def test_pct_of_best_counts_every_method_in_the_best():
    """scripts/pct_of_best.py: "% of the best" = best / time, geomean over shapes, the best of any
    method (as the report's column); --gemmtune-only the best of cuBLAS and the gemmtune modes."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("pct_of_best", ROOT / "scripts" / "pct_of_best.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def rec(ms):
        return {"status": "ok", "choice": "c", "kernel": {"ms": ms}}
    doc = {"shapes": [
        {"group": "odd", "name": "a", "cublas": rec(10.0),
         "methods": {"gemmtune": rec(5.0), "gemmtune_fast": rec(8.0), "inductor": rec(4.0)}},
        {"group": "decode", "name": "b", "cublas": rec(2.0),
         "methods": {"gemmtune": rec(2.0), "gemmtune_fast": {"status": "error"}, "nvmmh_top1": rec(1.0)}}]}
    agg, _ = mod.fractions(doc)
    # a: best 4.0 (Inductor): gemmtune 4/5 = 0.8, --fast 4/8 = 0.5; b: best 1.0 (nvMMH): gemmtune 1/2
    assert agg["all"]["gemmtune"] == [0.8, 0.5] and agg["all"]["gemmtune_fast"] == [0.5]
    # before: the best of cuBLAS and gemmtune only: a 5.0, b 2.0 -> gemmtune at 100% on both
    old, _ = mod.fractions(doc, gemmtune_only=True)
    assert old["all"]["gemmtune"] == [1.0, 1.0] and old["all"]["gemmtune_fast"] == [0.625]


@pytest.mark.slow
def test_exp_eager_overhead_dry_run(tmp_path, script_main):
    """scripts/exp_eager_overhead.py --dry-run (tiny-llama, fp32, CPU): the device call's flow,
    the three variants timed and profiled, the one-layer comparison, one JSON."""
    pytest.importorskip("transformers")
    out = tmp_path / "o.json"
    r = script_main("exp_eager_overhead", "--dry-run", "--rounds", "3", "--out", str(out))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert set(doc["step_ms_median"]) == {"eager", "copy", "patched"} and doc["x_eager"]["eager"] == 1.0
    assert set(doc["cprofile"]) == {"eager", "copy", "patched"} and all(doc["cprofile"].values())
    assert set(doc["layer_host_us"]) == {"nn.Linear", "patched"} and doc["eager_paths"] == {"aten": 2 * 7 + 1}


@pytest.mark.slow
@pytest.mark.parametrize("fused", [True])
def test_exp_gemv_handback_dry_run(tmp_path, fused):
    """scripts/exp_gemv_handback.py --dry-run (session 35's GPU calls): the model patched and fused,
    compiled once per threshold ("default": the variable unset), checked against eager. (The
    unfused run, ``--no-fuse``, took another ~57 s of CI for the same compile path; session 35's
    question is settled, README's hand-back section.)"""
    pytest.importorskip("transformers")
    out = tmp_path / "h.json"
    thresholds = ("default", "0") if fused else ("0", "inf")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "exp_gemv_handback.py"), "--dry-run",
                        *([] if fused else ["--no-fuse"]), "--thresholds", ",".join(thresholds), "--out", str(out)],
                       env=_env(), capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["fused"] is fused and (doc["fused_groups"] > 0) is fused and doc["patched_layers"] > 0
    for thr in thresholds:
        rec = doc["variants"][thr]
        assert "error" not in rec and rec["argmax_agree"] == 1.0 and rec["logits_rel_err"] < 1e-4


@pytest.mark.parametrize("bk", [16, 128])
def test_exp_pdl_dry_run(tmp_path, bk, script_main):
    """scripts/exp_pdl.py --dry-run (the Triton interpreter, fp32, no PDL): the norm -> GEMV
    chain's kernels against fp64, the weight-prefetching GEMV and the norm-folding one (no norm
    kernel) against the plain one, with a
    K step that divides both K (16 of 64 and 256) and one past the first GEMV's K (128 of 64: its
    one step, the prefetched tile, is masked)."""
    single = ["--single"] if bk == 16 else []  # the one-kernel timings too, once
    r = script_main("exp_pdl", str(tmp_path), "--dry-run", "--bk", str(bk), "--bn", "8", *single)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads((tmp_path / "pdl.json").read_text())
    assert doc["gemv0_rel_err_vs_fp64"] < 1e-5
    # folded: the norm computed inside each GEMV from the previous one's output, no norm kernel
    assert set(doc["rel_err_vs_plain"]) == {"plain", "pdl_prefetch", "folded", "folded_pdl"}
    assert max(doc["rel_err_vs_plain"].values()) < 1e-5
    if single:
        for row in doc["single"].values():
            ids = row["us"]
            assert "aten" in ids and any(i.endswith("-pdl") for i in ids)
            assert all(isinstance(v, float) for v in ids.values()), ids  # every one verified and timed


@pytest.mark.parametrize("m,layout,config", [(16, "col", "skinny:BM16-BN64-BK64-SK1-S3-W4-dot-det"),
                                               (16, "row", "skinny:BM16-BN32-BK32-SK1-S1-W4-dot-det"),
                                               (1, "row", "skinny:BM1-BN16-BK64-SK1-S1-W4-core-det")])
def test_exp_pdl_skinny_dry_run(tmp_path, m, layout, config, script_main):
    """scripts/exp_pdl_skinny.py --dry-run (the interpreter, fp16, no PDL launches): the chain of
    pointwise -> skinny GEMM kernels against fp64, and each -pdl twin's chain (the peeled first K
    step of the tl.dot path and of the N-contiguous strip) bitwise the plain config's."""
    r = script_main("exp_pdl_skinny", str(tmp_path), "--dry-run", "--m", str(m), "--layout", layout,
                    "--config", config)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads((tmp_path / "pdl_skinny.json").read_text())
    assert doc["gemm0_rel_err_vs_fp64"] < 2e-3 and doc["m"] == m and doc["layout"] == layout
    assert doc["rel_err_vs_plain"] == {"plain": 0.0, "pdl": 0.0, "pdl_unaware": 0.0, "pdl_nolaunch": 0.0}


def test_exp_pdl_skinny_refuses_a_split_or_a_pdl_config(tmp_path, script_main):
    for bad in ("skinny:BM1-BN4-BK64-SK2-S1-W4-core-det", "skinny:BM1-BN4-BK64-SK1-S1-W4-core-det-pdl"):
        r = script_main("exp_pdl_skinny", str(tmp_path), "--dry-run", "--config", bad)
        assert r.returncode != 0 and "one-slice skinny choice without -pdl" in r.stderr


@pytest.mark.slow
def test_exp_pdl_model_dry_run(tmp_path, script_main):
    """scripts/exp_pdl_model.py --dry-run (tiny-llama, fp32, CPU, eager): the fused model tuned
    once, its M=1 skinny winner swapped for the -pdl twin in the second copy, every variant
    (Inductor's PDL on and off) checked against eager."""
    pytest.importorskip("transformers")
    out = tmp_path / "p.json"
    r = script_main("exp_pdl_model", "--dry-run", "--inductor-pdl", "--max-autotune", "--out", str(out))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["swapped"] >= 1 and any(i.endswith("-pdl") for i in doc["pdl_winners"])
    assert not any(i.endswith("-pdl") for i in doc["winners"])
    assert set(doc["variants"]) == {"tuned", "tuned+inductor_pdl", "pdl", "pdl+inductor_pdl", "max_autotune",
                                    "max_autotune+inductor_pdl"}
    for rec in doc["variants"].values():
        assert "error" not in rec and rec["argmax_agree"] == 1.0 and rec["logits_rel_err"] < 1e-4


@pytest.mark.slow
def test_exp_pdl_model_dry_run_a_model_with_qkv_biases(tmp_path, script_main):
    """Session 39's call 3 runs exp_pdl_model.py on Qwen2-0.5B, whose q/k/v carry biases (addmm
    problems, fused with a bias): its flow on tiny-qwen2, the three variants that call runs."""
    pytest.importorskip("transformers")
    out = tmp_path / "q.json"
    r = script_main("exp_pdl_model", "--dry-run", "--model", "tiny-qwen2", "--inductor-pdl", "--max-autotune",
                    "--only", "max_autotune+inductor_pdl,tuned,pdl+inductor_pdl", "--out", str(out))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["model"] == "tiny-qwen2" and doc["swapped"] >= 1
    assert set(doc["variants"]) == {"max_autotune+inductor_pdl", "tuned", "pdl+inductor_pdl"}
    for rec in doc["variants"].values():
        assert "error" not in rec and rec["argmax_agree"] == 1.0 and rec["logits_rel_err"] < 1e-4


@pytest.mark.slow
def test_exp_pdl_model_dry_run_pdl_all_only(tmp_path, script_main):
    """--pdl-all: a copy whose M=1 GEMMs on a Linear's weight are tuned among skinny's strips and
    served by the winner's -pdl twin; --only runs just the named variants."""
    pytest.importorskip("transformers")
    out = tmp_path / "p.json"
    r = script_main("exp_pdl_model", "--dry-run", "--inductor-pdl", "--pdl-all", "--only",
                    "tuned,pdl_all+inductor_pdl", "--out", str(out))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert set(doc["variants"]) == {"tuned", "pdl_all+inductor_pdl"}
    assert any(i.endswith("-pdl") for i in doc["pdl_all_winners"])
    for rec in doc["variants"].values():
        assert "error" not in rec and rec["argmax_agree"] == 1.0 and rec["logits_rel_err"] < 1e-4


def _script_module(name: str):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_exp_gemv_wide_plan_is_the_spaces_own():
    """scripts/exp_gemv_wide.py (a GPU sweep): its "default" strips are the default space's own
    one-slice CUDA-core configs (else its "default best" would name a tile the tuner never tries),
    and every swept strip runs: any refusal by the space's rules is the programs-per-SM cap, the
    rule the sweep is there to question, never a register or shape rule."""
    from gemmtune.device import DeviceInfo
    from gemmtune.kernels import skinny_spec
    mod = _script_module("exp_gemv_wide")
    dev = DeviceInfo.lookup("h200")
    for m, n, k in mod.SHAPES:
        p = mod._problem(m, n, k)
        kept, _ = skinny_spec.space(p, dev)
        dflt = mod.default_strips(m, n, k, dev)
        assert dflt and set(dflt) <= set(kept) and all(not c.dot and c.split_k == 1 for c in dflt)
        sweep = mod.sweep_strips(k)
        assert any(c.num_stages > 1 for c in sweep) and any(c.block_n == 16 for c in sweep)
        for c in sweep:
            skinny_spec.validate(p, c)
            why = skinny_spec.constraint(c, p, dev)
            assert why is None or "programs is over" in why, (c.id, (m, n, k), why)


def test_exp_gemv_kernel_dry_run(script_main):
    """Every GEMV design the script times (product kept or reduced each step, one strip a program or
    a persistent grid) matches fp64 on odd shapes (N = 1, primes, K not a multiple of BK)."""
    r = script_main("exp_gemv_kernel", "--dry-run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all variants match fp64" in r.stdout


def test_exp_gemv_wide_dry_run(script_main):
    r = script_main("exp_gemv_wide", "--dry-run")
    assert r.returncode == 0, r.stderr
    # Since session 39 the space's program cap is on K splits only: every swept strip (all one-slice)
    # is inside its rules (67 tiles, each in three layouts), and the wide GEMVs' default has the
    # one-row -flat strips (session 40)
    assert "1x16384x2048: 201 strips (0 outside the default space's rules)" in r.stdout
    wide = next(line for line in r.stdout.splitlines() if line.startswith("1x28672x4096:"))
    assert "'BM1-BN2-BK1024-SK1-S1-W4-core-det-flat-sum'" in wide
    # at M = 4: the 3-D strips and -flat-sum over 4 rows (no -flat there), beside the default
    # space's one-slice strips, tl.dot ones included
    r4 = script_main("exp_gemv_wide", "--dry-run", "--m", "4")
    assert r4.returncode == 0, r4.stderr
    four = next(line for line in r4.stdout.splitlines() if line.startswith("4x16384x2048:"))
    assert "(0 outside the default space's rules)" in four and "-dot-" in four, four
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import exp_gemv_wide
        strips = exp_gemv_wide.sweep_strips(2048, 4)
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert {(c.flat, c.sum_each) for c in strips} == {(False, False), (True, True)}
    assert all(c.block_m == 4 for c in strips)
    # --shapes and --default-only: the weights named, only the default space's strips; on a layer of
    # N >= 64 SMs (8448 on the H200) those include the 8- and 16-column one-row strips
    rd = script_main("exp_gemv_wide", "--dry-run", "--default-only", "--shapes", "8447x2048,8448x2048")
    assert rd.returncode == 0, rd.stderr
    narrow, wide = rd.stdout.splitlines()
    assert narrow.startswith("1x8447x2048: 7 strips") and "BN16" not in narrow, narrow
    assert wide.startswith("1x8448x2048: 9 strips") and "'BM1-BN16-BK512-SK1-S1-W4-core-det-flat-sum'" in wide, wide
    bad = script_main("exp_gemv_wide", "--dry-run", "--shapes", "32000")
    assert bad.returncode == 2 and "expected NxK" in bad.stderr, bad.stderr


def test_compare_gemv_sweeps_normalises_by_each_runs_cublas(tmp_path, script_main):
    """Two sweeps on machines of different speed (cuBLAS 10 and 20 us): a strip whose time
    doubled with cuBLAS's reads 1.00 (the control), one that halved against it reads 2.00; a
    strip or shape in only one run is left out; the per-shape table names each run's best."""
    def sweep(cublas, strips):
        return {"rows": [{"M": 1, "N": 64, "K": 128, "floor_us": 1.0, "cublas_us": cublas, "strips": strips},
                         {"M": 1, "N": 8, "K": 8, "floor_us": 1.0, "cublas_us": 1.0, "strips": {"skinny:x": 1.0}}]}
    three_d, flat, flat_sum = ("skinny:BM1-BN2-BK128-SK1-S1-W4-core-det" + t for t in ("", "-flat", "-flat-sum"))
    before = sweep(10.0, {three_d: 5.0, flat: 8.0, flat_sum: 6.0, "skinny:gone": 50.0})
    after = sweep(20.0, {three_d: 10.0, flat: 8.0, flat_sum: 12.0})
    after["rows"].pop()
    (tmp_path / "b.json").write_text(json.dumps(before))
    (tmp_path / "a.json").write_text(json.dumps(after))
    r = script_main("compare_gemv_sweeps", str(tmp_path / "b.json"), str(tmp_path / "a.json"), "--choices", flat_sum)
    assert r.returncode == 0, r.stderr
    rows = {line.split(" | ")[0]: line.split(" | ")[1:] for line in r.stdout.splitlines() if " | " in line}
    assert rows["3-D"] == ["1", "1.000"] and rows["-flat"] == ["1", "2.000"] and rows["-flat-sum"] == ["1", "1.000"]
    assert "1x8x8" not in r.stdout  # a shape in one run only
    shape = rows["1x64x128"]
    assert shape[1].startswith("5.0 us (20%)") and shape[2].startswith("8.0 us") and shape[3].startswith("6.0 us")
    bad = script_main("compare_gemv_sweeps", str(tmp_path / "none.json"), str(tmp_path / "a.json"))
    assert bad.returncode == 2 and "cannot read a sweep" in bad.stderr


def test_worker_trace_summary_lines_up_the_tuner_and_its_workers(tmp_path):
    """scripts/worker_trace.py: per problem, the benchmark worker's requests, busy and idle time and
    steps; the tuner's steps and each compile worker's start, from the benchmark worker's ready."""
    import json
    wt = _script_module("worker_trace")
    t = 1000.0

    def write(name, lines):
        (tmp_path / name).write_text("".join(json.dumps(x) + "\n" for x in lines))
    write("worker-1.jsonl", [
        {"t0": t, "s": 0.0, "op": "ready"}, {"t0": t + 0.1, "s": 0.0, "op": "info"},
        {"t0": t + 0.1, "s": 0.5, "op": "prewarm"},
        {"t0": t + 1.0, "s": 0.4, "op": "bench", "problem": "P0", "choice": "aten", "status": "ok",
         "steps": {"inputs_s": 0.2, "timing_s": 0.1}},
        {"t0": t + 2.0, "s": 0.1, "op": "bench", "problem": "P0", "choice": "x", "status": "ok",
         "steps": {"inputs_s": 0.0, "timing_s": 0.05}},
        {"t0": t + 2.1, "s": 0.2, "op": "bench", "problem": "P1", "choice": "aten", "status": "ok"}])
    write("worker-2.jsonl", [{"t0": t + 1.5, "s": 0.0, "op": "ready"},
                             {"t0": t + 1.6, "s": 0.3, "op": "compile", "problem": "P0", "choice": "x"}])
    write("tuner-3.jsonl", [{"t0": t + 0.5, "op": "planned", "shape": 0}])
    (tmp_path / "worker-9.jsonl").write_text('{"t0": 1, "op": "ready"}\n{"t0": 2, "op": "ben')  # killed mid-line
    out = "\n".join(wt.summarise(tmp_path))
    assert "1 benchmark worker(s), 2 other(s)" in out
    p0 = next(line for line in out.splitlines() if line.strip().startswith("P0"))
    assert "2 requests" in p0 and "busy  0.500 s" in p0 and "idle before/between  0.600 s" in p0
    assert "inputs_s 0.200" in p0 and "timing_s 0.150" in p0
    assert "planned            at   0.500 s {'shape': 0}" in out
    assert "ready at   1.500 s after the benchmark worker's; 1 compiles, 0.300 s" in out
    assert wt.main([]) == 2 and wt.main([str(tmp_path / "nowhere")]) == 2
    from gemmtune import cli
    assert cli.main(["report", "--trace", str(tmp_path)]) == 0
    (tmp_path / "empty").mkdir()
    assert cli.main(["report", "--trace", str(tmp_path / "empty")]) != 0


def test_exp_prefetch_b_check(script_main):
    """The prefetch experiment's kernel, both forms (B's next K tile held in registers or not),
    matches fp64 on odd shapes (M = 1, primes, N past the block: wrapped columns)."""
    r = script_main("exp_prefetch_b", "--check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "both forms match fp64" in r.stdout
