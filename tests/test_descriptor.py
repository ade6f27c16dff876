"""Descriptors, grids and the composition algebra: exact arithmetic, identities, files and errors."""

import numpy as np
import pytest
import torch

from platonic_sdk import UTD, Grid, Split, Task
from platonic_sdk.errors import CheckpointError, GridMismatchError, NonFiniteError, ShapeError


def _task(name="t", n=60, classes=("cat", "dog", "eel")):
    labels = np.arange(n) % len(classes)
    items = lambda split, k: [np.array([split, i]) for i in range(k)]  # noqa: E731  (row 0: the split, 1: the index)
    return Task(name, classes, Split(items(0, n), labels), Split(items(1, 12), np.arange(12) % len(classes)))


def test_grid_draws_probes_from_train_only_with_stable_identity():
    task = _task()
    grid = task.grid(per_class=5, seed=3)
    assert grid.shape == (15, 3)
    assert [(int(a), int(b)) for a, b in grid.items] == [(0, i) for i in grid.probe_ids]  # train items, at the probe ids
    assert grid.identity == task.grid(per_class=5, seed=3).identity
    assert grid.identity != task.grid(per_class=5, seed=4).identity
    strat = task.grid(per_class=4, seed=0, stratified=True)
    assert np.bincount(task.train.labels[list(strat.probe_ids)]).tolist() == [4, 4, 4]


def test_task_rejects_bad_templates_and_labels():
    with pytest.raises(Exception, match="slot"):
        Task("x", ["a"], Split([1], [0]), Split([1], [0]), templates=["no slot"])
    with pytest.raises(ShapeError, match="labels"):
        Task("x", ["a"], Split([1], [3]), Split([1], [0]))


def _utd(grid, seed, scale=1.0):
    return UTD(scale * torch.randn(grid.shape, generator=torch.Generator().manual_seed(seed)), grid.identity, grid.task)


def test_composition_algebra_is_exact_per_grid():
    ga, gb = _task("a").grid(5), _task("b", classes=("x", "y")).grid(5)
    ua, ua2, ub = _utd(ga, 0), _utd(ga, 1), _utd(gb, 2)
    comp = ua + 2 * ub - 0.5 * ua2
    assert [t.coef for t in comp] == [1.0, 2.0, -0.5]
    per_grid = comp.by_grid()
    torch.testing.assert_close(per_grid[ga.identity][1], ua.matrix - 0.5 * ua2.matrix)
    torch.testing.assert_close(per_grid[gb.identity][1], 2 * ub.matrix)
    neg = -ua
    assert len(neg) == 1 and neg.terms[0].coef == -1.0
    assert comp.tasks == ("a", "b")
    # objective of the exact target is zero; of nothing it is sum ||c U||^2 / M
    assert comp.objective({k: v for k, (_, v) in per_grid.items()}) == pytest.approx(0.0)
    zero = {k: torch.zeros_like(v) for k, (_, v) in per_grid.items()}
    expected = sum(float(v.square().sum()) / v.shape[1] for _, v in per_grid.values())
    assert comp.objective(zero) == pytest.approx(expected)


def test_mixing_grids_of_one_task_is_refused():
    task = _task()
    g1, g2 = task.grid(5, seed=0), task.grid(5, seed=1)
    with pytest.raises(GridMismatchError, match="different grids"):
        _utd(g1, 0) + _utd(g2, 1)
    with pytest.raises(GridMismatchError):
        _utd(g1, 0).cosine(_utd(g2, 1))
    with pytest.raises(ShapeError, match="its grid is"):
        UTD(torch.zeros(g1.shape[0] - 1, g1.shape[1]), g1.identity, g1.task).check_grid(g1)


def test_utd_validation_and_random_baseline():
    grid = _task().grid(5)
    with pytest.raises(NonFiniteError):
        UTD(torch.tensor([[float("nan")]]), grid.identity, "t")
    with pytest.raises(ShapeError):
        UTD(torch.zeros(3), grid.identity, "t")
    u = _utd(grid, 0, scale=3.0)
    r = u.random_like(seed=7)
    assert float(r.matrix.norm()) == pytest.approx(float(u.matrix.norm()), rel=1e-5)
    assert abs(u.cosine(r)) < 0.5
    with pytest.raises(TypeError):
        u * "2"
    with pytest.raises(Exception, match="finite"):
        u * float("inf")


def test_utd_file_round_trip_and_corrupt_file(tmp_path):
    grid = _task().grid(5)
    u = UTD(torch.randn(grid.shape), grid.identity, "t", {"family": "clip", "seed": 3})
    u.save(tmp_path / "u.safetensors")
    back = UTD.load(tmp_path / "u.safetensors")
    assert torch.equal(back.matrix, u.matrix) and back.grid_id == u.grid_id and back.provenance == u.provenance
    (tmp_path / "bad.safetensors").write_bytes(b"not a safetensors file at all")
    with pytest.raises(CheckpointError):
        UTD.load(tmp_path / "bad.safetensors")
    with pytest.raises(CheckpointError):
        UTD.load(tmp_path / "missing.safetensors")


def test_union_grid_is_a_common_grid():
    ga, gb = _task("a").grid(2), _task("b", classes=("x", "y")).grid(2)
    union = Grid.union([ga, gb])
    assert union.shape == (ga.shape[0] + gb.shape[0], 5)
    assert union.identity != Grid.union([ga, _task("b", classes=("x", "y")).grid(2, seed=9)]).identity


def test_a_family_whose_library_is_missing_is_named_with_that_library(tmp_path, monkeypatch):
    from platonic_sdk import registry

    (tmp_path / "needs_missing_lib.py").write_text("import not_installed_lib\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry._FAMILIES.lazy, "needsmissing", "needs_missing_lib")
    assert "needsmissing" in registry.list_families() and "clip" in registry.list_families("image")
    assert "needsmissing" not in registry.list_families("image")  # its modality cannot be known: left out
    with pytest.raises(registry.UnknownFamilyError, match=r"^family 'needsmissing' needs the 'not_installed_lib' package"):
        registry.family("NeedsMissing")


def test_centred_descriptor_subtracts_each_rows_mean_by_hand():
    grid = _task().grid(2)  # 6 probes x 3 prompts
    U = (torch.arange(18, dtype=torch.float32).reshape(6, 3) / 4) ** 2
    centred = UTD(U, grid.identity, grid.task).centred()
    for i in range(6):  # hand: row i is (a, b, c) -> (a, b, c) - (a + b + c) / 3
        a, b, c = (float(v) for v in U[i])
        m = (a + b + c) / 3
        assert centred.matrix[i].tolist() == pytest.approx([a - m, b - m, c - m], abs=1e-5)
    assert centred.grid_id == grid.identity and centred.provenance["centred"] is True
    # an offset per probe, shared by all of the task's prompts, is all that centring removes
    offset = torch.randn(6, 1).expand(6, 3)
    torch.testing.assert_close(UTD(U + offset, grid.identity, grid.task).centred().matrix, centred.matrix)
    comp = (UTD(U, grid.identity, grid.task) - 0.5 * UTD(U + offset, grid.identity, grid.task)).centred()
    assert [t.coef for t in comp] == [1.0, -0.5]
    torch.testing.assert_close(comp.by_grid()[grid.identity][1], 0.5 * centred.matrix)


def test_block_centring_centres_within_each_tasks_prompts():
    from platonic_sdk.descriptor import centre_rows

    U = torch.tensor([[1.0, 3.0, 10.0, 20.0, 30.0], [0.0, 4.0, -1.0, -1.0, 2.0]])
    expected = torch.tensor([[-1.0, 1.0, -10.0, 0.0, 10.0], [-2.0, 2.0, -1.0, -1.0, 2.0]])
    torch.testing.assert_close(centre_rows(U, [2, 3]), expected)
    torch.testing.assert_close(centre_rows(U), U - U.mean(dim=1, keepdim=True))
    with pytest.raises(ShapeError, match="partition"):
        centre_rows(U, [2, 2])
