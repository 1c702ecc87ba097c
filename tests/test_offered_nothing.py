"""A tune that names families says which offered a shape no candidate, and why (tuning.plan.offered_nothing)."""
import json

import gemmtune
from gemmtune.cli import main
from gemmtune.device import DeviceInfo
from gemmtune.problem import Problem
from gemmtune.tuning.plan import candidates, offered_nothing
from gemmtune.tuning.results import summary

H100 = DeviceInfo.lookup("h100")


def test_offered_nothing_agrees_with_candidates():
    # M = 96 is past skinny's M bound, K = 64 leaves DecomposeK no split; triton_mm serves the shape.
    for p in (Problem.from_sizes(96, 80, 64, "fp16"), Problem.from_sizes(97, 81, 63, "fp16")):  # aligned, then pad+
        why = offered_nothing(p, ["skinny", "decompose_k", "triton_mm", "aten"], "default", H100)
        assert set(why) == {"skinny", "decompose_k"}
        assert "M=96" in why["skinny"] or "M=97" in why["skinny"]
        assert why["decompose_k"].startswith("1 config rejected, e.g. K=")
        fams = {c.family for c in candidates(p, ["skinny", "decompose_k", "triton_mm"], "default", H100)}
        assert fams == {"aten", "triton_mm"}


def test_a_family_whose_padded_copy_has_candidates_offered_something():
    # Unaligned: TMA's constraints reject the problem itself, its padded copy is what pad+ runs.
    p = Problem.from_sizes(512, 4095, 4095, "bf16")
    assert not p.aligned_a
    assert "persistent_tma" not in offered_nothing(p, ["persistent_tma"], "default", H100)
    assert any(c.family == "persistent_tma" for c in candidates(p, ["persistent_tma"], "default", H100))


def test_tune_names_the_families_that_offered_nothing(tmp_path, capsys):
    p = Problem.from_sizes(96, 80, 64, "fp16")
    r = gemmtune.tune([p], families=["skinny", "decompose_k"], store=tmp_path / "s.sqlite", progress=False,
                      in_process=True)
    assert set(r.shapes[0].offered_nothing) == {"skinny", "decompose_k"}
    assert r.shapes[0].best == "aten"  # cuBLAS alone was timed: the lines say why
    assert json.loads(json.dumps(summary(r)))["shapes"][0]["offered_nothing"] == r.shapes[0].offered_nothing
    # Every family (none named): nothing is reported, a family that does not fit a shape is the rule there.
    r2 = gemmtune.tune([p], store=tmp_path / "s.sqlite", progress=False, in_process=True, fast=True)
    assert r2.shapes[0].offered_nothing == {}


def test_cli_prints_why(tmp_path, capsys):
    rc = main(["tune", "--shape", "96x80x64:fp16", "--families", "skinny", "--store", str(tmp_path / "s.sqlite")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "96x80x64: skinny offered no candidate (11 configs rejected, e.g. M=96 is over 64" in out.replace("\n", " ")
