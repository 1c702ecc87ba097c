"""Every registered kernel family satisfies the KernelFamily protocol, and its plan() is the
one source of its launch arithmetic: the launcher and the model's features both read it."""

from __future__ import annotations

import threading
import types

import numpy as np
import pytest
import torch

import gemmtune
from gemmtune import kernels
from gemmtune.configs import Choice
from gemmtune.device import DeviceInfo
from gemmtune.inductor_export import Unsupported, choice_config
from gemmtune.kernels import splitk
from gemmtune.kernels.base import PLAN_KEYS, KernelFamily, missing
from gemmtune.model.choices import batch
from gemmtune.problem import Problem

H100 = DeviceInfo.lookup("H100")
# Odd shapes: a decode row, a long K, ragged edges everywhere.
SHAPES = [(1, 4096, 14336, "bf16"), (32, 32, 28672, "bf16"), (333, 4097, 1025, "fp16")]


@pytest.mark.parametrize("name", sorted(kernels.FAMILIES))
def test_every_family_satisfies_the_protocol(name):
    fam = kernels.get(name)
    assert isinstance(fam, KernelFamily) and missing(fam) == []
    assert fam.NAME == name and isinstance(fam.CONFIG, type)


@pytest.mark.parametrize("name", sorted(kernels.FAMILIES))
@pytest.mark.parametrize("shape", SHAPES)
def test_plan_features_and_export_of_every_config(name, shape):
    fam = kernels.get(name)
    for op in ("mm", "addmm"):
        p = Problem.from_sizes(*shape, op=op)
        kept, _ = fam.space(p, H100, "default")
        for cfg in kept[:40]:
            plan = fam.plan(p.m, p.n, p.k, cfg)
            assert set(PLAN_KEYS) <= set(plan), (name, plan)
            assert plan["splits"] >= 1 and plan["workspace_bytes"] >= 0
            choice = Choice(name, cfg)
            b = batch(p, [choice])
            assert b.split[0] == plan["splits"]
            try:
                assert isinstance(choice_config(choice, p, H100.sm_count)["template_id"], str)
            except Unsupported as e:
                assert str(e)


def test_splitk_plan_is_what_the_features_and_the_launcher_read(monkeypatch):
    seen = {}
    monkeypatch.setattr(splitk, "launch_tiled", lambda a, b, out, **kw: seen.update(kw))
    p = Problem.from_sizes(32, 48, 28672, "bf16")
    kept = [c for c in splitk.space(p, H100, "default")[0]]
    assert kept
    a, b = torch.empty(p.m, p.k), torch.empty(p.k, p.n)
    for cfg in kept:
        plan = splitk.plan(p.m, p.n, p.k, cfg)
        row = batch(p, [Choice("splitk", cfg)])
        assert (row.split[0], row.k_len[0]) == (plan["splits"], plan["k_per_split"])
        seen.clear()
        splitk.run(a, b, torch.empty(p.m, p.n), cfg)
        if plan["splits"] > 1:
            assert seen["k_per_split"] == plan["k_per_split"]
            assert seen["ws"].numel() >= plan["workspace_numel"] and seen["locks"].numel() >= plan["tiles"]
        else:
            assert seen["k_per_split"] == p.k


def test_register_checks_the_protocol():
    with pytest.raises(TypeError, match="not a KernelFamily.*plan"):
        kernels.register(types.SimpleNamespace(NAME="x", CONFIG=int, space=1, constraint=1, validate=1, run=1,
                                               prepare=1, features_row=1, inductor_export=1))
    with pytest.raises(ValueError, match="registered already"):
        kernels.register(types.SimpleNamespace(**{m: getattr(kernels.triton_mm, m) for m in
                                                  ("CONFIG", "space", "constraint", "validate", "plan", "run",
                                                   "prepare", "features_row", "inductor_export")},
                                               NAME="splitk"))
    assert kernels.register(kernels.splitk) is kernels.splitk  # the same module again: a no-op
    assert list(kernels.FAMILIES) == gemmtune.families()



def test_first_use_from_two_threads_waits_for_the_families_to_load(monkeypatch):
    """A process's first use of the registry imports the family modules. Forced interleaving: the
    loading thread stops before registering the first family while another thread asks for one
    (a loaded model's first requests, deciding two layer shapes at once). That thread saw the
    registry marked loaded and still empty: "unknown kernel family 'triton_mm'; known: "."""
    monkeypatch.setattr(kernels, "FAMILIES", kernels.FAMILIES)  # restored after: _load rebinds it
    monkeypatch.setattr(kernels, "_FAMILIES", {})  # a fresh process's registry (the modules stay imported)
    monkeypatch.setattr(kernels, "_state", {"loaded": False, "ready": False})
    paused, asked, got = threading.Event(), threading.Event(), {}
    register = kernels.register

    def register_slowly(family):
        if threading.current_thread().name == "loader" and not paused.is_set():
            paused.set()
            asked.wait(2)  # fixed, the other thread waits for this load (a lock): time out then
        return register(family)
    monkeypatch.setattr(kernels, "register", register_slowly)

    def use(name):
        try:
            got[name] = kernels.get("triton_mm").NAME
        except Exception as e:  # (an assert in a thread would be lost)
            got[name] = repr(e)

    loader = threading.Thread(target=use, args=("loader",), name="loader", daemon=True)
    loader.start()
    assert paused.wait(30)
    other = threading.Thread(target=use, args=("other",), daemon=True)
    other.start()
    other.join(0.5)
    asked.set()
    loader.join(30)
    other.join(30)
    assert got == {"loader": "triton_mm", "other": "triton_mm"}
    assert list(kernels._FAMILIES) == list(kernels.BUILTIN)


def test_unknown_family_export_message():
    fake = types.SimpleNamespace(pad=False, family="nope", config=None)
    with pytest.raises(Unsupported, match="family nope: no Inductor template"):
        choice_config(fake, Problem.from_sizes(64, 64, 64, "bf16"))
    assert np.array_equal(batch(Problem.from_sizes(8, 8, 8, "bf16"), []).fam, np.zeros(0))
