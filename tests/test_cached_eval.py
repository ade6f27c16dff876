"""Accuracy from cached features equals accuracy after folding the edit and re-encoding (real tiny families)."""

from __future__ import annotations

import copy

import pytest
import torch
from tiny_encoder import tiny_task

import platonic_sdk
from platonic_sdk import UTD, OperatorBank
from platonic_sdk.encoding.features import encode_items, landmarks
from platonic_sdk.evaluate import FeatureCache, accuracy, predict

STRENGTHS = (0.5, 2.0, 8.0)


def perturbed(encoder, scale: float, seed: int):
    """A copy with Gaussian noise on the media tower: a stand-in for a fine-tuned state."""
    other = copy.deepcopy(encoder)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in other.media_encoder.parameters():
            p.add_(scale * p.std().nan_to_num() * torch.randn(p.shape, generator=gen))
    return other


@pytest.fixture(scope="module")
def source_descriptor():
    task = tiny_task()
    grid = task.grid(per_class=8)
    source = platonic_sdk.from_config("clip")
    return task, grid, UTD.compute(source, perturbed(source, 0.5, seed=2), grid)


@pytest.mark.parametrize("family,config", [("clip", {"projection_dim": 48}), ("siglip", None)])
def test_cached_accuracy_equals_reencoded(family: str, config, source_descriptor, tmp_path) -> None:
    task, grid, descriptor = source_descriptor
    target = platonic_sdk.from_config(family, config)
    bank = OperatorBank(target)
    bank.add_grid(grid)
    cache = FeatureCache.build(target, task.test)
    cache.save(tmp_path / "cache.safetensors")
    cache = FeatureCache.load(tmp_path / "cache.safetensors")
    g = landmarks(target, task.prompts())  # landmarks are the text tower's: an edit leaves them alone
    before = predict(encode_items(target, task.test.items), g)

    changed = False
    for alpha in STRENGTHS:
        edit = bank.edit(descriptor, strength=alpha)
        with edit.applied_to(target):
            f_refolded = encode_items(target, task.test.items)
            reencoded_acc = accuracy(target, task, "test")
        cached = torch.nn.functional.normalize(cache.embeddings(edit.operator, alpha), dim=1)
        torch.testing.assert_close(cached, f_refolded, rtol=1e-4, atol=1e-5)
        assert torch.equal(predict(cached, g), predict(f_refolded, g))
        assert cache.accuracy(g, edit.operator, alpha) == reencoded_acc
        changed |= not torch.equal(predict(f_refolded, g), before)
    assert changed, "no strength changed a prediction, so the comparison would be vacuous"
    assert cache.accuracy(g) == accuracy(target, task, "test")  # the edits were removed
