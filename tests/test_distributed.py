"""Two gloo processes under torchrun give the single-process results: sharded extraction (with an idle
rank and the on-disk cache), sharded work lists, the runner's guards across ranks (a killed run resumes,
mismatched ranks and a failing cell are refused on every rank), and `platonic grid` (tests/ranks_script.py
is what each rank runs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch
from ranks_script import GRID, STRENGTHS, operator, setup

from platonic_sdk.cli import main as cli
from platonic_sdk.encoding import distributed
from platonic_sdk.encoding.features import site_features
from platonic_sdk.evaluate import FeatureCache
from platonic_sdk.evaluate.run.runfolder import run_differences
from platonic_sdk.io import load_tensors

TIMEOUT = 300  # seconds for the whole two-rank run: a hang fails the test, not the CI job


def test_batch_ranges_cover_whole_batches_in_order() -> None:
    for n, size, world in [(33, 8, 2), (33, 8, 3), (5, 8, 2), (64, 8, 4), (7, 1, 3)]:
        ranges = [distributed.batch_range(n, size, r, world) for r in range(world)]
        assert [i for r in ranges for i in r] == list(range(n))
        assert all(r.start % size == 0 and (r.stop % size == 0 or r.stop == n) for r in ranges if len(r))
        batches = [-(-len(r) // size) for r in ranges]
        assert max(batches) - min(batches) <= 1
    assert [len(distributed.batch_range(5, 8, r, 2)) for r in range(2)] == [5, 0]  # an idle rank
    with pytest.raises(ValueError):
        distributed.shard_range(4, 2, 2)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> Path:
    """OUT of `torchrun --standalone --nproc-per-node 2 tests/ranks_script.py OUT` (killed with its ranks after TIMEOUT)."""
    out = tmp_path_factory.mktemp("ranks")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               str(Path(__file__).with_name("ranks_script.py")), str(out)]
    launcher = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = launcher.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(launcher.pid, signal.SIGKILL)  # the launcher and both ranks
        launcher.communicate()
        pytest.fail(f"two ranks did not finish within {TIMEOUT} s")
    assert launcher.returncode == 0, stderr[-4000:]
    (out / "stdout.txt").write_text(stdout)
    return out


def _seen(out: Path) -> list[dict]:
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def test_two_ranks_encode_and_map_as_one_process(ranks) -> None:
    encoder, task, g = setup()  # single process: no process group
    assert distributed.rank_and_world() == (0, 1)
    S, Z = site_features(encoder, task.test.items, batch_size=8)
    single = [FeatureCache(S, Z, task.test.labels).accuracy(g, operator(S, Z), strength) for strength in STRENGTHS]
    assert len(set(single)) > 1  # the items differ, so order matters
    for rank, seen in enumerate(_seen(ranks)):
        tensors, _, _ = load_tensors(ranks / f"rank{rank}.safetensors")
        assert torch.equal(tensors["S"], S) and torch.equal(tensors["Z"], Z)  # the same batches: equal bit for bit
        assert torch.equal(tensors["idle_S"], S[:5]) and torch.equal(tensors["mixed_Z"], Z) and torch.equal(tensors["hit_Z"], Z)
        assert seen["accuracies"] == single
        assert "work item 3 failed on rank 1: ZeroDivisionError" in seen["failure"]
        # rank 0's own error on rank 0, quoted on the others
        assert seen["rank0"].startswith("ZeroDivisionError" if rank == 0 else "PlatonicError: rank 0 failed: ZeroDivisionError")
        # each rank encodes its own run of whole batches: 33 items in batches of 8 -> 24 + 9; 5 items -> 5 + nothing;
        # then three sharded misses (both ranks miss, rank 1 misses, the shared store is empty); a hit on every rank encodes nothing
        assert seen["encodings"] == ([24, 5, 24, 24, 24] if rank == 0 else [9, 9, 9, 9]) and seen["after_hit"] == []
        # the undecodable file on rank 1 fails the encoding on every rank, named
        assert seen["decode"].startswith("PlatonicError: " if rank == 1 else "PlatonicError: rank 1 failed: PlatonicError: ")
        assert "broken.png" in seen["decode"]
    zero, one = (seen["entries"] for seen in _seen(ranks))
    assert zero == {"own0": 1, "shared": 1} and one == {"shared": 1}  # rank 0 alone writes cache entries


def test_the_runner_guards_hold_across_ranks(ranks) -> None:
    zero, one = _seen(ranks)
    assert zero["killed"] == "Killed: " and one["killed"].startswith("PlatonicError: rank 0 failed: Killed")
    # the resumed run: the three recorded cells kept, the others run once; rank 1 returned None and wrote nothing
    assert zero["cells"]["resumed"] == 3 and zero["cells"]["passes"] == len(zero["keys"]) == 6 and one["cells"] is None
    assert Counter(zero["keys"]) == Counter(set(zero["keys"]))
    assert not (ranks / "elsewhere").exists() and not (ranks / "mismatch").exists()
    for seen in (zero, one):  # refused on every rank, naming what differs; a failing cell names itself and its rank
        assert "rank 1 was started with other settings than rank 0" in seen["mismatch"]
        assert "run.settings.addition_strength: 0.5 -> 0.7" in seen["mismatch"]
        assert "failed on rank 1: ZeroDivisionError" in seen["cell_failure"] and "cell addition|" in seen["cell_failure"]


def test_torchrun_grid_equals_one_process(ranks, tmp_path) -> None:
    assert (ranks / "stdout.txt").read_text().count("cells; report") == 1  # rank 0 alone reports
    assert list((ranks / "cache").rglob("*.safetensors"))  # the shared encodings went to the cache
    assert cli.main([*GRID, "--out", str(tmp_path), "--no-cache"]) == 0
    assert run_differences(tmp_path, ranks / "grid") == []  # run.json, studies, report but its timings, every cell
    assert "similarity" in json.loads((tmp_path / "studies.json").read_text())
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == sorted(p.name for p in (ranks / "grid" / "figures").iterdir())


def test_commands_that_do_not_shard_are_refused_under_torchrun(monkeypatch, capsys) -> None:
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert cli.main(["families"]) == 2
    assert "only grid and demo run across torchrun's ranks" in capsys.readouterr().err
