"""What each rank does in tests/test_distributed.py: `torchrun --nproc-per-node 2 tests/ranks_script.py OUT`.

Every check writes what the rank saw to OUT/rank<R>.json (and its tensors to OUT/rank<R>.safetensors);
the test compares them with a single process. Last, the ranks run `platonic grid` (cli.main, as
`python -m platonic_sdk.cli` does) into OUT/grid.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import attrs
import torch
from PIL import Image
from tiny_encoder import TinyEncoder, tiny_task

from platonic_sdk.cli import main as cli
from platonic_sdk.data.images import image_files
from platonic_sdk.encoding import distributed
from platonic_sdk.encoding import features as features_module
from platonic_sdk.encoding.feature_store import FeatureStore
from platonic_sdk.encoding.features import landmarks, site_features
from platonic_sdk.evaluate import FeatureCache
from platonic_sdk.evaluate.measure.methods import register_method
from platonic_sdk.evaluate.measure.workspace import zoo_workspace
from platonic_sdk.evaluate.run.runfolder import read_records
from platonic_sdk.evaluate.run.runner import run_experiment
from platonic_sdk.evaluate.plan.settings import CellSettings, ExperimentConfig, selections
from platonic_sdk.io import save_tensors

STRENGTHS = [0.0, 1.0, 3.0, 6.0, 10.0]  # five work items over two ranks: uneven on purpose
FAMILIES = ["clip", "siglip", "metaclip"]
SIZES = {"train_per_class": 6, "test_per_class": 4, "per_class": 3}  # the image world, reduced
# `platonic grid` on those: 2 + 2 cells, similarity (it encodes) on 2 probes per task, a one-cell sweep
GRID = ["grid", "--families", *FAMILIES, "--max-cells", "2", "--similarity-probes", "2", "--sweep-cells", "1",
        *(f"--{k.replace('_', '-')}={v}" for k, v in SIZES.items()), "--quiet"]
# the runner's spec for the guards: 3 + 3 cells, no studies but the sweep
CONFIG = ExperimentConfig(cells=selections(max_cells=3), similarity=False, sweep_strengths=(0.0, 0.5), sweep_cells=1,
                          accumulation=False, guarantee=False, held_out=())


def setup():
    """A tiny encoder with a residual-head site, a task of 33 test items, its landmarks."""
    encoder = TinyEncoder(head="residual_head", seed=8)
    task = tiny_task(n_train=4, n_test=33)
    return encoder, task, landmarks(encoder, task.prompts())


def operator(S: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    """A fixed operator that fits the residual-head site (d x (h + 1))."""
    return torch.randn(Z.shape[1], S.shape[1], generator=torch.Generator().manual_seed(0)) * 0.3


def error(fn) -> str:
    """What fn raised, as "Type: message" ("" when nothing)."""
    try:
        fn()
    except Exception as exc:  # what this rank saw, for the test to check
        return f"{type(exc).__name__}: {exc}"
    return ""


def write_images(images, folder: Path) -> list[str]:
    """PNG files of `images`, then broken.png (not an image), in that order."""
    folder.mkdir()
    for i, image in enumerate(images):
        Image.fromarray(image).save(folder / f"{i:02d}.png")
    (folder / "broken.png").write_bytes(b"not an image")
    return sorted(str(p) for p in folder.iterdir())


def extraction(rank: int, out: Path) -> dict:
    """Sharded extraction (with an idle rank, the on-disk cache and a file that does not decode on rank 1), sharded
    work, a failure on rank 0."""
    encoder, task, g = setup()
    items = task.test.items
    encodings: list[int] = []
    real_encode = features_module._encode
    features_module._encode = lambda *a: encodings.append(len(a[1])) or real_encode(*a)  # counts what each rank encodes
    own, shared = out / f"own{rank}", out / "shared"
    try:
        with distributed.sharding():
            S, Z = site_features(encoder, items, batch_size=8)
            idle = site_features(encoder, items[:5], batch_size=8)  # one batch: rank 1 has nothing to encode
            site_features(encoder, items, 8, cache=FeatureStore(own))  # both miss: sharded, rank 0 writes
            mixed = site_features(encoder, items, 8, cache=FeatureStore(own))  # rank 0 hits, rank 1 misses: both encode
            site_features(encoder, items, 8, cache=FeatureStore(shared))
            before = len(encodings)
            hit = site_features(encoder, items, 8, cache=FeatureStore(shared))  # every rank hits: nobody encodes
    finally:
        features_module._encode = real_encode
    with distributed.sharding():  # 16 images, then a file that does not decode: in rank 1's batch
        files = image_files(distributed.on_rank0(lambda: write_images(items[:16], out / "images")), verify=False)
        decode = error(lambda: site_features(encoder, files, 8, workers=0))
    cache = FeatureCache(S, Z, task.test.labels)
    save_tensors(out / f"rank{rank}.safetensors", {"S": S, "Z": Z, "idle_S": idle[0], "mixed_Z": mixed[1], "hit_Z": hit[1]}, "test", {})
    return {
        "accuracies": distributed.map_sharded(lambda strength: cache.accuracy(g, operator(S, Z), strength), STRENGTHS),
        "failure": error(lambda: distributed.map_sharded(lambda i: 1 // (i - 3), list(range(5)))),
        "rank0": error(lambda: distributed.on_rank0(lambda: 1 // 0 if rank == 0 else 1)),
        "encodings": encodings, "after_hit": encodings[before:], "decode": decode,
        "entries": {d.name: len(list(d.rglob("*.safetensors"))) for d in (own, shared) if d.exists()},
    }


class Killed(Exception):
    pass


def guards(rank: int, out: Path) -> dict:
    """The runner across ranks: a run killed on rank 0 resumes; mismatched ranks and a failing cell are refused on every rank."""
    ws, _ = zoo_workspace("image", families=FAMILIES, **SIZES)
    folder = out / ("run" if rank == 0 else "elsewhere")  # rank 1 must not touch its path
    seen: list[str] = []

    def kill_after_three(record):  # called on rank 0 only: it alone records
        seen.append(record["key"])
        if len(seen) == 3:
            raise Killed
    killed = error(lambda: run_experiment(ws, folder, CONFIG, on_record=kill_after_three))
    summary = run_experiment(ws, folder, CONFIG)
    other = attrs.evolve(CONFIG, settings=CellSettings(addition_strength=0.7 if rank else 0.5))
    register_method("fails_on_rank_1", lambda ws_, cell, s: 1 // (distributed.rank_and_world()[0] - 1) and None)
    failing = attrs.evolve(CONFIG, methods=("zero_shot", "fails_on_rank_1"))
    return {
        "killed": killed, "cells": None if summary is None else summary["cells"],
        "keys": [r["key"] for r in read_records(folder / "cells.jsonl")] if rank == 0 else None,
        "mismatch": error(lambda: run_experiment(ws, out / "mismatch", other)),
        "cell_failure": error(lambda: run_experiment(ws, out / "failing", failing)),
    }


def main(out: Path) -> None:
    torch.set_num_threads(1)
    rank, _ = distributed.init("gloo")
    seen = {**extraction(rank, out), **guards(rank, out)}
    (out / f"rank{rank}.json").write_text(json.dumps(seen))
    sys.exit(cli.main([*GRID, "--out", str(out / "grid"), "--cache-dir", str(out / "cache")]))  # leaves the process group


if __name__ == "__main__":
    main(Path(sys.argv[1]))
