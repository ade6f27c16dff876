"""Renamed public names: the new spelling works, the old one still works for one release with a
DeprecationWarning that names the new one, passing both is refused, and files written under the old
names still load."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from platonic_sdk.errors import PlatonicError
from platonic_sdk.evaluate.features import FeatureCache
from platonic_sdk.io import save_tensors
from platonic_sdk.linalg import ridge_solver
from platonic_sdk.transfer.closed_form import GridState

from grid_zoo import TASKS, build_workspace


def _rows(seed: int = 0, n: int = 6, d: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=gen), torch.randn(n, d, generator=gen)


def test_feature_cache_descriptive_names_and_deprecated_letters():
    s, z = _rows()
    cache = FeatureCache(site_inputs=s, raw_embeddings=z, labels=np.arange(6) % 2)
    with pytest.warns(DeprecationWarning, match=r"FeatureCache\.S is deprecated.*use \.site_inputs"):
        assert cache.S is s
    with pytest.warns(DeprecationWarning, match=r"use \.raw_embeddings"):
        assert cache.Z is z
    with pytest.warns(DeprecationWarning, match=r"S=\).*use site_inputs="):
        old = FeatureCache(S=s, Z=z, labels=np.zeros(6))
    assert old.site_inputs is s and old.raw_embeddings is z
    with pytest.raises(PlatonicError, match="site_inputs= only"):
        FeatureCache(site_inputs=s, raw_embeddings=z, labels=np.zeros(6), S=s)


def test_feature_cache_file_with_the_old_tensor_names_loads(tmp_path):
    s, z = _rows(1)
    save_tensors(tmp_path / "old.safetensors", {"S": s, "Z": z, "labels": torch.arange(6)}, "feature_cache", {})
    old = FeatureCache.load(tmp_path / "old.safetensors")
    assert torch.equal(old.site_inputs, s) and torch.equal(old.raw_embeddings, z)
    old.save(tmp_path / "new.safetensors")
    new = FeatureCache.load(tmp_path / "new.safetensors")
    assert torch.equal(new.site_inputs, s) and torch.equal(new.raw_embeddings, z) and list(new.labels) == list(range(6))


def test_grid_state_descriptive_names_and_deprecated_letters():
    s, z = _rows(2)
    g = torch.randn(3, 4, generator=torch.Generator().manual_seed(3))
    rows = s / z.norm(dim=1, keepdim=True)
    state = GridState(None, s, z, g, ridge_solver(rows, g))
    torch.testing.assert_close(state.solve_rows, rows)  # s / ||z||, computed independently above
    for old, new in (("S", "site_inputs"), ("Z", "raw_embeddings"), ("G", "landmarks"), ("F", "solve_rows")):
        with pytest.warns(DeprecationWarning, match=rf"GridState\.{old} is deprecated.*\.{new}"):
            assert torch.equal(getattr(state, old), getattr(state, new))


def test_workspace_landmarks_and_deprecated_head():
    ws = build_workspace()
    landmarks = ws.landmarks("clip", TASKS[0])
    assert landmarks.shape[0] == len(ws.tasks[TASKS[0]].classnames)
    with pytest.warns(DeprecationWarning, match=r"Workspace\.head is deprecated.*\.landmarks"):
        assert ws.head("clip", TASKS[0]) is landmarks
