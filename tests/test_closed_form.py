"""Closed-form transfer on tiny random-weight models of every registered family (image and audio).

The same checks run over all families: the core has no branch on family or modality.
"""

import numpy as np
import pytest
import torch

import platonic_sdk as ps
from platonic_sdk.encoding.features import landmarks, site_features
from platonic_sdk.errors import NonFiniteError, PlatonicError, ShapeError
from platonic_sdk.linalg import anchored_solver, edited_embeddings, first_order_change, ridge_operator, ridge_solver, unit_rows

CLASSES = ("red circle", "green square", "blue triangle", "yellow digit")


def _items(modality: str, n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    if modality == "image":
        return [rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8) for _ in range(n)]
    from platonic_sdk.data.audio import Waveform

    return [Waveform(rng.standard_normal(8000).astype(np.float32) * 0.1, 16000) for _ in range(n)]


def _task(modality: str, name: str = "toy", seed: int = 0) -> ps.Task:
    labels = np.arange(24) % len(CLASSES)
    train = ps.Split(_items(modality, 24, seed), labels)
    test = ps.Split(_items(modality, 8, seed + 1), labels[:8])
    return ps.Task(name, CLASSES, train, test, templates=("a photo of a {}.", "a {}"))


def _state(encoder) -> dict:
    return {k: v.detach().clone() for k, v in encoder.model.state_dict().items()}


def _assert_same_state(encoder, state) -> None:
    now = encoder.model.state_dict()
    assert all(torch.equal(now[k], v) for k, v in state.items())


@pytest.fixture(scope="module", params=ps.list_families())
def setup(request):
    torch.manual_seed(0)
    encoder = ps.from_config(request.param).eval()
    modality = ps.family(request.param).modality
    grid = _task(modality).grid(per_class=4, seed=0)
    bank = ps.OperatorBank(encoder, ridge_a=1e-2, ridge_b=1e-3)
    state = bank.add_grid(grid)
    U = 0.05 * torch.randn(grid.shape, generator=torch.Generator().manual_seed(1))
    utd = ps.UTD(U, grid.identity, grid.task)
    return encoder, grid, bank, state, utd


def test_bank_solve_equals_independent_solve(setup):
    encoder, grid, bank, state, utd = setup
    S, Z = site_features(encoder, grid.items)
    G = landmarks(encoder, grid.prompts)
    expected = ridge_operator(S / Z.norm(dim=1, keepdim=True), G, utd.matrix, 1e-2, 1e-3)
    torch.testing.assert_close(bank.operator(utd), expected, rtol=1e-5, atol=1e-7)
    assert bank.operator(utd).shape == (encoder.embed_dim, encoder.last_affine().in_dim)


def test_bank_operator_zeroes_the_objective_gradient(setup):
    """X* = A^T is the minimiser of the strictly convex ridge objective: its gradient vanishes there."""
    encoder, grid, bank, state, utd = setup
    F, G, U = state.solve_rows.double(), state.landmarks.double(), utd.matrix.double()
    mu_a = 1e-2 * torch.linalg.svdvals(F).square().mean()
    mu_b = 1e-3 * torch.linalg.svdvals(G).square().mean()
    solve = ridge_solver(F, G, 1e-2, 1e-3)  # float64 in, float64 out: no rounding to float32
    X = solve(U).T
    grad = F.T @ (F @ X @ G.T - U) @ G + mu_b * F.T @ F @ X + mu_a * X @ G.T @ G + mu_a * mu_b * X
    scale = (F.T @ U @ G).norm()
    assert float(grad.norm() / scale) < 1e-6


def test_bank_is_linear_over_compositions(setup):
    encoder, grid, bank, state, utd = setup
    other = ps.UTD(torch.randn(grid.shape), grid.identity, grid.task)
    torch.testing.assert_close(bank.operator(utd - 0.5 * other), bank.operator(utd) - 0.5 * bank.operator(other), rtol=1e-5, atol=1e-6)


def test_folded_edit_changes_embeddings_exactly_and_undoes_bit_for_bit(setup):
    encoder, grid, bank, state, utd = setup
    before = _state(encoder)
    edit = bank.edit(utd, strength=0.5)
    with edit.applied_to(encoder):
        _, Z_after = site_features(encoder, grid.items)
        expected = edited_embeddings(state.site_inputs, state.raw_embeddings, edit.operator, 0.5)
        torch.testing.assert_close(Z_after, expected, rtol=1e-4, atol=1e-5 * float(state.raw_embeddings.abs().max()))
        torch.testing.assert_close(state.achieved(edit.operator, 0.5), (unit_rows(Z_after) - unit_rows(state.raw_embeddings)) @ state.landmarks.T, rtol=1e-3, atol=1e-5)
    _assert_same_state(encoder, before)


def test_first_order_affinity_change_matches_measured(setup):
    encoder, grid, bank, state, utd = setup
    alpha = 1e-2
    A = bank.operator(utd)
    edit = bank.edit(utd, strength=alpha)
    with edit.applied_to(encoder):
        _, Z_after = site_features(encoder, grid.items)
    measured = (unit_rows(Z_after) - unit_rows(state.raw_embeddings)) @ state.landmarks.T / alpha
    predicted = first_order_change(state.site_inputs, state.raw_embeddings, A, state.landmarks)
    err = float((measured - predicted).norm() / predicted.norm())
    assert err < 0.05, err
    # the solve's own fit (F A^T G^T, no renormalisation) moves affinities toward the descriptor
    fitted = state.solve_rows @ A.T @ state.landmarks.T
    assert float((fitted * utd.matrix).sum()) > 0


def test_failed_edits_change_nothing(setup, tmp_path):
    encoder, grid, bank, state, utd = setup
    before = _state(encoder)
    A = bank.operator(utd)
    with pytest.raises(ShapeError):
        ps.OperatorEdit(A[:, :-1], 0.5, bank.site_kind).apply(encoder)
    _assert_same_state(encoder, before)
    with pytest.raises(NonFiniteError):
        ps.OperatorEdit(A, float("nan"), bank.site_kind)
    with pytest.raises(NonFiniteError):
        ps.OperatorEdit(A * float("inf"), 0.5, bank.site_kind)
    wrong_kind = "residual_head" if bank.site_kind == "projection" else "projection"
    with pytest.raises(PlatonicError, match="site"):
        ps.OperatorEdit(A, 0.5, wrong_kind).apply(encoder)
    _assert_same_state(encoder, before)
    with pytest.raises(ShapeError, match="grid is"):
        bank.operator(ps.UTD(torch.zeros(grid.shape[0] - 1, grid.shape[1]), grid.identity, grid.task))
    with pytest.raises(ps.GridMismatchError, match="add_grid"):
        bank.operator(ps.UTD(torch.zeros(grid.shape), "not-a-grid", grid.task))


def test_edit_file_round_trip(setup, tmp_path):
    encoder, grid, bank, state, utd = setup
    edit = bank.edit(utd, strength=0.5, meta={"note": "round trip"})
    edit.save(tmp_path / "edit.safetensors")
    loaded = ps.Edit.load(tmp_path / "edit.safetensors")
    assert isinstance(loaded, ps.OperatorEdit) and loaded.strength == 0.5 and loaded.meta["note"] == "round trip"
    assert torch.equal(loaded.operator, edit.operator)
    with edit.applied_to(encoder):
        first = _state(encoder)
    with loaded.applied_to(encoder):
        _assert_same_state(encoder, first)


def test_stacked_operators_equal_one_by_one(setup):
    encoder, grid, bank, state, utd = setup
    descriptors = [utd, utd.random_like(1), utd.random_like(2)]
    stacked = bank.operators(descriptors)
    for A, u in zip(stacked, descriptors):
        torch.testing.assert_close(A, bank.operator(u), rtol=1e-5, atol=1e-7)


def test_centred_operator_is_the_solve_of_the_centred_descriptor(setup):
    encoder, grid, bank, state, utd = setup
    S, Z = site_features(encoder, grid.items)
    G = landmarks(encoder, grid.prompts)
    U = utd.matrix - utd.matrix.mean(dim=1, keepdim=True)  # hand-centred rows
    expected = ridge_operator(S / Z.norm(dim=1, keepdim=True), G, U, 1e-2, 1e-3)
    torch.testing.assert_close(bank.operator(utd, centre=True), expected, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(bank.operators([utd, utd.centred()], centre=True)[0], expected, rtol=1e-5, atol=1e-7)
    edit = bank.edit(-utd, 1.0, centre=True)
    torch.testing.assert_close(edit.operator, -expected, rtol=1e-5, atol=1e-7)
    assert edit.meta["centred"] is True and bank.edit(utd).meta["centred"] is False


def test_anchored_operator_minimises_the_anchored_objective(setup):
    """X* minimises the plain objective plus ||F_o X G_o^T||^2 + mu_o ||F_o X||^2: its gradient vanishes."""
    encoder, grid, bank, state, utd = setup
    anchor = _task(ps.family(encoder.family).modality, "held", seed=7).grid(per_class=3, seed=0)
    A = bank.operator(utd, anchors=[anchor])
    held = bank.add_grid(anchor)
    F, G, U = state.solve_rows.double(), state.landmarks.double(), utd.matrix.double()
    Fo, Go = held.solve_rows.double(), held.landmarks.double()
    mu_a = 1e-2 * torch.linalg.svdvals(F).square().mean()
    mu_b = 1e-3 * torch.linalg.svdvals(G).square().mean()
    mu_o = 1e-3 * torch.linalg.svdvals(Go).square().mean()
    X = anchored_solver(F, G, Fo, Go, 1e-2, 1e-3)(U).T  # float64 throughout
    grad = (F.T @ (F @ X @ G.T - U) @ G + mu_b * F.T @ F @ X + mu_a * X @ G.T @ G + mu_a * mu_b * X
            + Fo.T @ Fo @ X @ Go.T @ Go + mu_o * Fo.T @ Fo @ X)
    assert float(grad.norm() / (F.T @ U @ G).norm()) < 1e-8
    torch.testing.assert_close(A, X.T.to(A.dtype), rtol=1e-4, atol=1e-6)
    # the anchors' own readout moves less; no anchors is the plain solve
    plain = bank.operator(utd)
    assert float((Fo @ A.double().T @ Go.T).norm()) < float((Fo @ plain.double().T @ Go.T).norm())
    torch.testing.assert_close(bank.operator(utd, anchors=()), plain, rtol=0, atol=0)
    torch.testing.assert_close(bank.operators([utd, utd.random_like(3)], anchors=[anchor])[0], A, rtol=1e-4, atol=1e-5 * float(A.abs().max()))
    edit = bank.edit(utd, 0.5, anchors=[anchor])
    assert edit.meta["anchors"] == [{"task": "held", "grid_id": anchor.identity}] and bank.edit(utd).meta["anchors"] == []
    with pytest.raises(ps.GridMismatchError, match="both a term and an anchor"):
        bank.operator(utd, anchors=[grid])
