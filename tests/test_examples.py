"""The examples run end to end with --ci (tiny models) as subprocesses, and write what they promise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import platonic_sdk as ps
from platonic_sdk.worlds.image import ImageWorld

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NAMES = ("compose_two_tasks_app", "audio_transfer_experiment", "register_family", "orthoreg_merging_study", "benchmark_grid")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """All examples at once (their start-up dominates; the two cores share it)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    started = {}
    for name in NAMES:
        out = tmp_path_factory.mktemp(name)
        cmd = [sys.executable, str(EXAMPLES / f"{name}.py"), "--ci", "--out", str(out)]
        started[name] = (subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), out)
    done = {}
    for name, (proc, out) in started.items():
        stdout, stderr = proc.communicate(timeout=300)
        done[name] = (subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), out)
    return done


def test_compose_two_tasks_app(runs):
    proc, out = runs["compose_two_tasks_app"]
    assert proc.returncode == 0, proc.stderr
    edit = ps.Edit.load(out / "edit.safetensors")
    assert edit.strength == 0.5 and {t["task"] for t in edit.meta["terms"]} == set(ImageWorld().trio[:2])
    assert ps.load("siglip", str(out / "edited_model")).family == "siglip"
    assert len(list((out / "descriptors").glob("*.safetensors"))) == 2
    loss = next(line for line in proc.stdout.splitlines() if line.startswith("transfer loss on the probe grids"))
    unedited, edited = (float(v) for v in loss.split(": ")[1].replace(" unedited ->", "").replace(" edited", "").split())
    assert edited < unedited  # the effect at --ci size, where accuracy cannot show one (the example says why)
    assert "--ci:" in proc.stdout


def test_audio_transfer_experiment(runs):
    proc, out = runs["audio_transfer_experiment"]
    assert proc.returncode == 0, proc.stderr
    report = (out / "report.md").read_text()
    assert "## Two-task addition" in report and "## Held-out transfer" in report
    assert (out / "figures" / "two_task_scatter.png").is_file()
    assert "addition_gain_task_a: " in proc.stdout and "--ci:" in proc.stdout


def test_register_family(runs):
    proc, out = runs["register_family"]
    assert proc.returncode == 0, proc.stderr
    assert "bagnet" in proc.stdout.splitlines()[0]
    assert (out / "bagnet" / "weights.safetensors").is_file()
    assert "bagnet" not in ps.list_families()  # registered inside the example's process only


def test_orthoreg_merging_study(runs):
    import json

    from platonic_sdk.finetune import merge_methods

    proc, out = runs["orthoreg_merging_study"]
    assert proc.returncode == 0, proc.stderr
    study = json.loads((out / "study.json").read_text())
    assert [(r["method"], r["orthoreg"]) for r in study["runs"]] == [(m, lam) for lam in (0.0, 1.0) for m in merge_methods()]
    assert all(0 <= r["strength"] <= 4 and abs(r["strength"] * 20 - round(r["strength"] * 20)) < 1e-9 for r in study["runs"])  # on the grid
    negation = [(r["method"], r["orthoreg"], r["task"]) for r in study["negation"]]
    assert negation == [(m, lam, t) for lam in (0.0, 1.0) for t in study["tasks"] for m in merge_methods()]
    assert all(0 <= r["strength"] <= 1 for r in study["negation"]) and "Negation: each task removed alone" in proc.stdout
    assert "| iso_c |" in proc.stdout and (out / "study.md").read_text().strip() == proc.stdout.strip()


def test_benchmark_grid(runs):
    proc, out = runs["benchmark_grid"]
    assert proc.returncode == 0, proc.stderr
    assert "--dry-run: every dataset and model loads" in proc.stdout and "4 cells over clip, siglip" in proc.stdout
    cells = [json.loads(line) for line in (out / "cells.jsonl").read_text().splitlines()]
    assert sorted(c["kind"] for c in cells) == ["addition", "addition", "negation", "negation"]
    assert (out / "report.md").read_text().startswith("# grid on the image world")
