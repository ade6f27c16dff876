"""Feature caches on disk: encoded once per (model, dataset, preprocessing, site), reused by later runs and
other commands, invalidated by a change to any key, re-encoded (with a warning) when corrupt, written atomically."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from platonic_sdk.cli import main as cli
from platonic_sdk.data.images import image_folder_task
from platonic_sdk.encoding.feature_store import FeatureStore, caching
from platonic_sdk.encoding.features import site_features
from platonic_sdk.errors import CheckpointError
from platonic_sdk.evaluate import FeatureCache


@pytest.fixture(scope="module")
def zoo_clip():
    from platonic_sdk.worlds.zoo import load_models

    return load_models(names=["clip"])["clip"]


@pytest.fixture
def task(tmp_path):
    rng = np.random.default_rng(0)
    for c, name in enumerate(("red", "blue")):
        (tmp_path / "data" / name).mkdir(parents=True)
        for i in range(5):
            pixels = np.clip(rng.normal(60 + 120 * c, 30, (14, 14, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(tmp_path / "data" / name / f"{i}.png")
    return image_folder_task(tmp_path / "data", test_fraction=0.4)


class Forwards:
    """Counts the media forward passes of an encoder."""

    def __init__(self, encoder):
        self.count, self.encoder, self.inner = 0, encoder, encoder.embed_media

    def __enter__(self):
        def counted(batch):
            self.count += 1
            return self.inner(batch)

        self.encoder.embed_media = counted
        return self

    def __exit__(self, *exc):
        del self.encoder.embed_media


def entries(root: Path) -> list[Path]:
    return sorted(root.rglob("*.safetensors"))


def test_a_second_build_reads_the_entry_and_matches_bit_for_bit(tmp_path, task, zoo_clip):
    store = FeatureStore(tmp_path / "cache")
    fresh = site_features(zoo_clip, task.test.items, batch_size=3)
    with Forwards(zoo_clip) as fw:
        first = FeatureCache.build(zoo_clip, task.test, batch_size=3, cache=store)
        assert fw.count == 2 and len(entries(store.root)) == 1
        second = FeatureCache.build(zoo_clip, task.test, cache=store)
        assert fw.count == 2  # no forward pass: read from disk
    for a, b in ((first.site_inputs, fresh[0]), (first.raw_embeddings, fresh[1]), (second.site_inputs, first.site_inputs), (second.raw_embeddings, first.raw_embeddings)):
        assert torch.equal(a, b)
    with caching(store), Forwards(zoo_clip) as fw:  # the active store: the same entry
        FeatureCache.build(zoo_clip, task.test)
        site_features(zoo_clip, task.test.items)  # not opted in: encodes, writes nothing
        assert fw.count == 1 and len(entries(store.root)) == 1


def test_a_change_to_any_key_misses(tmp_path, task, zoo_clip):
    store = FeatureStore(tmp_path / "cache")
    base = FeatureCache.build(zoo_clip, task.test, cache=store)
    # the dataset: one file rewritten (other pixels)
    first = Path(task.test.items.paths[0])
    Image.fromarray(np.full((14, 14, 3), 7, np.uint8)).save(first)
    changed = FeatureCache.build(zoo_clip, task.test, cache=store)
    assert len(entries(store.root)) == 2 and not torch.equal(changed.raw_embeddings[0], base.raw_embeddings[0]) and torch.equal(changed.raw_embeddings[1:], base.raw_embeddings[1:])
    # the dataset: other items
    FeatureCache.build(zoo_clip, task.train, cache=store)
    assert len(entries(store.root)) == 3
    # the model: one weight moved
    site = zoo_clip.last_affine()
    with torch.no_grad():
        site.weight[0, 0] += 1e-3
    try:
        moved = FeatureCache.build(zoo_clip, task.test, cache=store)
        assert len(entries(store.root)) == 4 and not torch.equal(moved.raw_embeddings, changed.raw_embeddings)
    finally:
        with torch.no_grad():
            site.weight[0, 0] -= 1e-3
    # the preprocessing: a brighter input batch
    images = zoo_clip.images
    zoo_clip.images = lambda items, device, dtype: images(items, device, dtype) + 0.1
    try:
        FeatureCache.build(zoo_clip, task.test, cache=store)
        assert len(entries(store.root)) == 5
    finally:
        zoo_clip.images = images
    with Forwards(zoo_clip) as fw:  # back to the first state: its entry again
        again = FeatureCache.build(zoo_clip, task.test, cache=store)
        assert fw.count == 0 and torch.equal(again.raw_embeddings, changed.raw_embeddings)


def test_a_corrupt_entry_is_encoded_again_with_a_warning(tmp_path, task, zoo_clip):
    store = FeatureStore(tmp_path / "cache")
    good = FeatureCache.build(zoo_clip, task.test, batch_size=3, cache=store)
    (entry,) = entries(store.root)
    entry.write_bytes(entry.read_bytes()[:100])
    with pytest.warns(UserWarning, match="is unusable"), Forwards(zoo_clip) as fw:
        again = FeatureCache.build(zoo_clip, task.test, batch_size=3, cache=store)
    assert fw.count == 2 and torch.equal(again.raw_embeddings, good.raw_embeddings)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FeatureCache.build(zoo_clip, task.test, cache=store)  # rewritten: reads cleanly


def test_an_entry_of_another_model_under_this_key_is_encoded_again_with_a_warning(tmp_path, task, zoo_clip):
    """An entry written for metaclip, found where clip's entry belongs (copied caches, a key collision): its
    recorded key parts say so; clip's features are encoded, the entry is overwritten whole, nothing else is left."""
    from platonic_sdk.worlds.zoo import load_models

    other = load_models(names=["metaclip"])["metaclip"]
    store = FeatureStore(tmp_path / "cache")
    FeatureCache.build(other, task.test, cache=store)
    (foreign,) = entries(store.root)
    mine = store.path(store.key(store.parts(zoo_clip, task.test.items)))
    mine.parent.mkdir(parents=True, exist_ok=True)
    foreign.replace(mine)
    with pytest.warns(UserWarning, match="is unusable \\(it records the key parts .* not "), Forwards(zoo_clip) as fw:
        got = FeatureCache.build(zoo_clip, task.test, batch_size=3, cache=store)
    assert fw.count == 2 and torch.equal(got.raw_embeddings, site_features(zoo_clip, task.test.items, batch_size=3)[1])
    assert [p for p in store.root.rglob("*") if p.is_file()] == [mine]  # no temporary file left beside it
    with warnings.catch_warnings(), Forwards(zoo_clip) as fw:
        warnings.simplefilter("error")
        again = FeatureCache.build(zoo_clip, task.test, cache=store)  # rewritten for clip: read cleanly
    assert fw.count == 0 and torch.equal(again.raw_embeddings, got.raw_embeddings)


def test_writes_are_atomic(tmp_path, task, zoo_clip, monkeypatch):
    import safetensors.torch

    store = FeatureStore(tmp_path / "cache")

    def dies(tensors, path, metadata=None):
        Path(path).write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(safetensors.torch, "save_file", dies)
    with pytest.raises(KeyboardInterrupt):
        FeatureCache.build(zoo_clip, task.test, cache=store)
    assert [p for p in store.root.rglob("*") if p.is_file()] == []


def test_a_saved_cache_for_another_model_is_refused(tmp_path, task, zoo_clip):
    from platonic_sdk.worlds.zoo import load_models

    other = load_models(names=["metaclip"])["metaclip"]
    FeatureCache.build(zoo_clip, task.test, cache=False).save(tmp_path / "eval.safetensors")
    assert torch.equal(FeatureCache.load(tmp_path / "eval.safetensors", zoo_clip).raw_embeddings, site_features(zoo_clip, task.test.items)[1])
    with pytest.raises(CheckpointError, match="was built on clip .* not on metaclip"):
        FeatureCache.load(tmp_path / "eval.safetensors", other)


def test_cli_commands_share_the_cache(tmp_path, task, zoo_clip, capsys):
    from platonic_sdk.worlds.zoo import ZOO_DIR

    argv = ["evaluate", "--family", "clip", "--checkpoint", str(ZOO_DIR / "clip"), "--task", f"images:{tmp_path / 'data'}",
            "--test-fraction", "0.4", "--quiet"]
    assert cli.main([*argv, "--cache-dir", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    written = entries(tmp_path / "c")
    assert len(written) == 1
    stamp = written[0].stat().st_mtime_ns
    assert cli.main([*argv, "--cache-dir", str(tmp_path / "c")]) == 0
    assert capsys.readouterr().out == out and entries(tmp_path / "c") == written and written[0].stat().st_mtime_ns == stamp
    FeatureCache.build(zoo_clip, task.test, cache=FeatureStore(tmp_path / "c"))  # Python reuses the CLI's entry
    assert entries(tmp_path / "c") == written
    assert cli.main([*argv, "--no-cache", "--cache-dir", str(tmp_path / "none")]) == 0
    assert capsys.readouterr().out == out and not (tmp_path / "none").exists()
