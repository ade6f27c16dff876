"""Streamed datasets: splits hold references, decode on demand (in DataLoader workers), and encode as in memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from platonic_sdk.data.images import ImageFile, image_folder_task, read_image
from platonic_sdk.encoding.accel import CPU_BATCH, default_workers, device_batch_size
from platonic_sdk.encoding.feature_store import FeatureStore
from platonic_sdk.encoding.features import site_features
from platonic_sdk.errors import PlatonicError
from platonic_sdk.evaluate import accuracy
from platonic_sdk.items import Items, join, take
from platonic_sdk.tasks import Grid, Split, Task

COLOURS = {"red": (220, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 220)}


def colour_folder(root: Path, per_class: int = 6, size: int = 12) -> Path:
    rng = np.random.default_rng(0)
    for name, rgb in COLOURS.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            pixels = np.clip(np.asarray(rgb) + rng.integers(-25, 25, (size, size + i % 3, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(root / name / f"{i}.png")
    return root


@pytest.fixture(scope="module")
def zoo_clip():
    from platonic_sdk.worlds.zoo import load_models

    return load_models(names=["clip"])["clip"]


def test_a_folder_split_holds_references_decoded_on_demand(tmp_path):
    root = colour_folder(tmp_path / "colours")
    task = image_folder_task(root, test_fraction=0.5)
    assert isinstance(task.train.items, Items) and isinstance(task.test.items, Items)
    assert all(isinstance(r, ImageFile) and Path(r.path).parent.name == task.classnames[c]
               for r, c in zip(task.test.items.refs, task.test.labels))
    first = task.test.items.paths[0]
    assert task.test.items.refs[0].content() == Path(first).read_bytes()
    Image.new("RGB", (5, 7), (1, 2, 3)).save(first)  # changed after the task was built: read when indexed
    assert task.test.items[0].size == (5, 7)
    grid = task.grid(per_class=2)
    assert isinstance(grid.items, Items) and grid.items.paths == [task.train.items.paths[i] for i in grid.probe_ids]
    union = Grid.union([grid, image_folder_task(root, "again", test_fraction=0.5).grid(per_class=1)])
    assert isinstance(union.items, Items) and len(union.items) == 6 + 3
    assert isinstance(task.test.subset([2, 0]).items, Items) and task.test.subset([2, 0]).items.paths == [task.test.items.paths[i] for i in (2, 0)]


def test_take_and_join_on_in_memory_items():
    a, b = [np.zeros((2, 2, 3), np.uint8), np.ones((2, 2, 3), np.uint8)], [np.full((2, 2, 3), 7, np.uint8)]
    assert [int(x[0, 0, 0]) for x in take(a, [1, 0])] == [1, 0]
    assert [int(x[0, 0, 0]) for x in join([a, b])] == [0, 1, 7]


@pytest.mark.parametrize("workers", [1, 2])
def test_workers_decode_and_encode_exactly_as_in_memory(tmp_path, zoo_clip, workers):
    root = colour_folder(tmp_path / "colours", per_class=7)
    task = image_folder_task(root, test_fraction=0.5)
    in_memory = [read_image(p) for p in task.test.items.paths]
    S0, Z0 = site_features(zoo_clip, in_memory, batch_size=4, workers=0)
    S1, Z1 = site_features(zoo_clip, task.test.items, batch_size=4, workers=workers)  # decoded in the workers
    S2, Z2 = site_features(zoo_clip, in_memory, batch_size=4, workers=workers)  # in-memory items, same path
    for S, Z in ((S1, Z1), (S2, Z2)):
        torch.testing.assert_close(S, S0, rtol=0, atol=1e-6)
        torch.testing.assert_close(Z, Z0, rtol=0, atol=1e-6)
    memory_task = Task("mem", task.classnames, Split(in_memory, task.test.labels), Split(in_memory, task.test.labels))
    assert accuracy(zoo_clip, task) == accuracy(zoo_clip, memory_task)


def test_an_image_failing_in_a_worker_is_named_in_one_line(tmp_path, zoo_clip):
    root = colour_folder(tmp_path / "colours", per_class=8)
    task = image_folder_task(root, test_fraction=0.5)
    bad = task.test.items.paths[-1]
    Path(bad).write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    store = FeatureStore(tmp_path / "cache")
    for workers in (0, 1):
        with pytest.raises(PlatonicError) as info:
            site_features(zoo_clip, task.test.items, batch_size=3, workers=workers, cache=store)
        message = str(info.value)
        assert message.startswith(f"cannot read image {bad!r}") and "\n" not in message and "worker" not in message
        assert not store.root.exists() or not any(p.is_file() for p in store.root.rglob("*"))  # no entry, no partial file


def test_worker_and_batch_defaults_follow_the_items_and_the_device(tmp_path, zoo_clip):
    refs = Items([ImageFile(tmp_path / f"{i}.png") for i in range(200)])
    assert default_workers(list(range(200)), 64) == 0  # in memory: nothing to decode
    assert default_workers(refs[:64], 64) == 0  # one batch: no worker start-up
    assert 1 <= default_workers(refs, 64) <= 4  # 200 items in 4 batches
    assert device_batch_size(zoo_clip, refs) == CPU_BATCH  # off CUDA
    root = colour_folder(tmp_path / "colours", per_class=4)
    task = image_folder_task(root, test_fraction=0.5)
    S, Z = site_features(zoo_clip, task.train.items, batch_size=None)
    S0, Z0 = site_features(zoo_clip, task.train.items, batch_size=2)
    torch.testing.assert_close(Z, Z0, rtol=1e-6, atol=1e-6)  # fp32 matmul noise across batch sizes


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_batches_are_sized_to_free_memory(tmp_path, zoo_clip):
    model = zoo_clip.to("cuda")
    refs = image_folder_task(colour_folder(tmp_path / "colours", per_class=4), test_fraction=0.5).train.items
    size = device_batch_size(model, refs)
    assert 8 <= size <= 1024 and size & (size - 1) == 0
    zoo_clip.to("cpu")
