"""Guarded run folders: a killed run resumes with every cell once, changed settings and a second
process are refused, duplicate records are detected, files are written atomically."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import attrs
import pytest
from grid_zoo import build_workspace

import platonic_sdk as ps
from platonic_sdk import atomic
from platonic_sdk.cli import main as cli
from platonic_sdk.evaluate.run.runfolder import RunFolder, RunFolderBusy, read_records, run_differences
from platonic_sdk.evaluate.run.runner import run_experiment
from platonic_sdk.evaluate.plan.settings import CACHED, CellSettings, ExperimentConfig, selections

# a small run: 8 addition + 8 negation cells (3 mutually cross-family models), the LoRA route (two steps)
# on one cell of each kind as a second pass, no studies but the sweep
CONFIG = ExperimentConfig(cells=selections(max_cells=8), methods=(*CACHED, "lora"), method_cells={"lora": 1},
                          settings=CellSettings(lora={"rank": 2, "max_steps": 2, "batch_size": 16}),
                          sweep_strengths=(0.0, 0.5), sweep_cells=2, accumulation=False, guarantee=False, similarity=False)
THREE = ("clip", "siglip", "wide")


@pytest.fixture(scope="module")
def ws():
    full = build_workspace()
    return build_workspace({k: full.models[k] for k in THREE}, full.tasks)


def _keys(folder):
    return [json.loads(line)["key"] for line in (folder / "cells.jsonl").read_text().splitlines()]


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != ".lock"}


class Killed(Exception):
    pass


def test_a_killed_run_resumes_with_every_cell_exactly_once(ws, tmp_path):
    clean = run_experiment(ws, tmp_path / "clean", CONFIG)
    expected = _keys(tmp_path / "clean")
    assert clean["cells"]["passes"] == len(expected) == len(set(expected)) == 8 + 8 + 2
    assert clean["same_cells"]["lora"]["addition"]["lora"]["cells"] == 1

    seen = []

    def kill_after_five(record):
        seen.append(record["key"])
        if len(seen) == 5:
            raise Killed

    out = tmp_path / "run"
    with pytest.raises(Killed):
        run_experiment(ws, out, CONFIG, on_record=kill_after_five)
    with (out / "cells.jsonl").open("a") as fh:  # killed in the middle of writing the sixth line
        fh.write('{"key": "addition|cl')
    assert not list(out.glob("**/.*.tmp"))  # no temporary file outlives the run
    fresh = build_workspace({k: build_workspace().models[k] for k in THREE})  # a new process: no caches
    run_experiment(fresh, out, CONFIG, on_record=lambda r: seen.append(r["key"]))
    assert Counter(_keys(out)) == Counter(expected) and Counter(seen) == Counter(expected)
    strip = lambda rs: [{k: v for k, v in r.items() if k != "seconds"} for r in rs]  # noqa: E731
    assert strip(read_records(out / "cells.jsonl")) == strip(read_records(tmp_path / "clean" / "cells.jsonl"))


CHANGES = {  # what a resume changes -> (workspace, config, describe), and how the refusal names it
    "addition_strength": (lambda ws: (ws, attrs.evolve(CONFIG, settings=CellSettings(addition_strength=0.7)), None), "run.settings.addition_strength: 0.5 -> 0.7"),
    "methods": (lambda ws: (ws, attrs.evolve(CONFIG, methods=("zero_shot", "closed_form")), None), "run.methods:"),
    "ridge": (lambda ws: (build_workspace(ws.models, ws.tasks, ridge_b=0.2), CONFIG, None), "ridge_b: 0.1 -> 0.2"),
    "grid": (lambda ws: (build_workspace(ws.models, ws.tasks, per_class=2), CONFIG, None), "per_class: 3 -> 2"),
    "world seed": (lambda ws: (ws, CONFIG, {"world_seed": 1}), "describe.world_seed: (absent) -> 1"),
}


@pytest.mark.parametrize("change", CHANGES)
def test_a_resume_with_another_setting_is_refused_and_changes_nothing(ws, tmp_path, change):
    run_experiment(ws, tmp_path, CONFIG)
    before = _snapshot(tmp_path)
    make, named = CHANGES[change]
    other, config, describe = make(ws)
    with pytest.raises(ps.PlatonicError, match="holds a run with other settings") as err:
        run_experiment(other, tmp_path, config, describe)
    assert named in str(err.value)
    assert _snapshot(tmp_path) == before


def test_a_changed_checkpoint_is_refused(ws, tmp_path):
    run_experiment(ws, tmp_path, CONFIG)
    models = dict(ws.models)
    models["wide"] = ps.from_config("metaclip", {"projection_dim": 48, "vision_config": {"hidden_size": 48, "intermediate_size": 96}}, seed=9)
    with pytest.raises(ps.PlatonicError, match=r"fingerprints\.wide:"):
        run_experiment(build_workspace(models, ws.tasks), tmp_path, CONFIG)


def test_duplicate_records_and_foreign_folders_are_refused(ws, tmp_path):
    run_experiment(ws, tmp_path, CONFIG)
    lines = (tmp_path / "cells.jsonl").read_text().splitlines()
    (tmp_path / "cells.jsonl").write_text("\n".join([*lines, lines[2]]) + "\n")
    with pytest.raises(ps.PlatonicError, match="recorded twice"):
        run_experiment(ws, tmp_path, CONFIG)
    (tmp_path / "run.json").unlink()
    with pytest.raises(ps.PlatonicError, match="no run.json"):
        run_experiment(ws, tmp_path, CONFIG)


HOLD = """
import sys
from platonic_sdk.evaluate.run.runfolder import RunFolder
with RunFolder(sys.argv[1]):
    print("locked", flush=True)
    sys.stdin.read()
"""


def test_a_second_process_on_a_locked_folder_exits_2(tmp_path, capsys):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert cli.main(["grid", "--out", str(tmp_path), "--quiet"]) == 2  # refused before any model loads
        assert "in use by another run" in capsys.readouterr().err
        with pytest.raises(RunFolderBusy, match=f"pid {holder.pid}"):
            RunFolder(tmp_path).__enter__()
    finally:
        holder.communicate("")
    with RunFolder(tmp_path) as run:  # released when the holder exits
        assert run.path == tmp_path


def test_atomic_write_keeps_the_old_file_when_the_write_fails(tmp_path):
    path = atomic.write_text(tmp_path / "report.md", "old")
    with pytest.raises(KeyboardInterrupt):
        with atomic.atomic_path(path) as tmp:
            tmp.write_text("half")
            raise KeyboardInterrupt
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["report.md"]
    mask = os.umask(0o027)
    try:
        assert oct(atomic.write_json(tmp_path / "x.json", {"a": 1}).stat().st_mode & 0o777) == oct(0o640)
    finally:
        os.umask(mask)


def test_run_differences_name_changed_numbers_only(ws, tmp_path):
    run_experiment(ws, tmp_path / "a", CONFIG)
    run_experiment(build_workspace(ws.models, ws.tasks), tmp_path / "b", CONFIG)  # other timings and seconds
    assert run_differences(tmp_path / "a", tmp_path / "b") == []
    records = read_records(tmp_path / "b" / "cells.jsonl")
    key = records[2]["key"]
    records[2]["results"]["closed_form"][records[2]["tasks"][0]] += 1.0
    atomic.write_text(tmp_path / "b" / "cells.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    (diff,) = run_differences(tmp_path / "a", tmp_path / "b")
    assert diff.startswith(f"cells.{key}.results.closed_form.{records[2]['tasks'][0]}: ")
