"""Accuracy from cached features equals accuracy after folding the edit and re-encoding."""

from __future__ import annotations

import pytest
import torch

from platonic_sdk import UTD, OperatorBank
from platonic_sdk.evaluate import FeatureCache, accuracy, predict
from platonic_sdk.features import encode_items, landmarks
from tiny_encoder import TinyEncoder, tiny_task

STRENGTHS = (0.5, 2.0, 8.0)


@pytest.mark.parametrize("head", ["projection", "residual_head"])
def test_cached_accuracy_equals_reencoded(head: str, tmp_path) -> None:
    task = tiny_task()
    grid = task.grid(per_class=8)
    source = TinyEncoder(dim=10, seed=1)
    descriptor = UTD.compute(source, source.perturbed(0.5, seed=2), grid)
    target = TinyEncoder(dim=14, head=head, seed=3)
    bank = OperatorBank(target)
    bank.add_grid(grid)
    cache = FeatureCache.build(target, task.test)
    cache.save(tmp_path / "cache.safetensors")
    cache = FeatureCache.load(tmp_path / "cache.safetensors")
    g = landmarks(target, task.prompts())  # landmarks are the text tower's: an edit leaves them alone
    before = predict(encode_items(target, task.test.items), g)

    changed = False
    for alpha in STRENGTHS:
        edit = bank.edit(descriptor, alpha=alpha)
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
