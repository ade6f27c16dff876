"""The math layer against independent computations (brute-force Kronecker solves, hand-built cases)."""

import numpy as np
import pytest
import torch

from platonic_sdk.errors import NonFiniteError, ShapeError
from platonic_sdk.linalg import (
    anchored_solver,
    descriptor_cosine,
    edited_embeddings,
    first_order_change,
    head_update,
    relative_ridge,
    ridge_operator,
    ridge_solver,
    unit_rows,
    utd,
)


def _brute_force_X(F, G, U, mu_a, mu_b, anchors=()):
    """Minimise ||F X G^T - U||^2 + mu_b||F X||^2 + mu_a||X G^T||^2 + mu_a mu_b||X||^2 by lstsq on vec(X);
    an anchor (F_o, G_o, mu_o) adds ||F_o X G_o^T||^2 + mu_o ||F_o X||^2."""
    F, G, U = (np.asarray(t, dtype=np.float64) for t in (F, G, U))
    q, d = F.shape[1], G.shape[1]
    # vec is column-major: vec(F X G^T) = (G kron F) vec(X)
    rows = [np.kron(G, F), np.sqrt(mu_b) * np.kron(np.eye(d), F), np.sqrt(mu_a) * np.kron(G, np.eye(q)), np.sqrt(mu_a * mu_b) * np.eye(q * d)]
    for Fo, Go, mu_o in anchors:
        Fo, Go = np.asarray(Fo, dtype=np.float64), np.asarray(Go, dtype=np.float64)
        rows += [np.kron(Go, Fo), np.sqrt(mu_o) * np.kron(np.eye(d), Fo)]
    rhs = np.zeros(sum(r.shape[0] for r in rows))
    rhs[: U.size] = U.reshape(-1, order="F")
    x, *_ = np.linalg.lstsq(np.concatenate(rows), rhs, rcond=None)
    return x.reshape(q, d, order="F")


def _mean_sq_sv(m):
    return float(np.mean(np.linalg.svd(np.asarray(m, dtype=np.float64), compute_uv=False) ** 2))


@pytest.mark.parametrize("P,M,q,d", [(12, 4, 6, 6), (9, 5, 7, 4), (5, 8, 10, 6)])
@pytest.mark.parametrize("ridge_a,ridge_b", [(1e-2, 1e-6), (0.3, 0.1)])
def test_ridge_operator_matches_brute_force(P, M, q, d, ridge_a, ridge_b):
    gen = torch.Generator().manual_seed(P * 100 + M)
    F = torch.randn(P, q, generator=gen, dtype=torch.float64)
    G = torch.randn(M, d, generator=gen, dtype=torch.float64)
    U = torch.randn(P, M, generator=gen, dtype=torch.float64)
    A = ridge_operator(F, G, U, ridge_a, ridge_b)
    X = _brute_force_X(F, G, U, ridge_a * _mean_sq_sv(F), ridge_b * _mean_sq_sv(G))
    np.testing.assert_allclose(A.T.numpy(), X, rtol=1e-6, atol=1e-9 * np.abs(X).max())
    assert A.shape == (d, q)


@pytest.mark.parametrize("P,M,q,d", [(12, 4, 6, 6), (5, 8, 10, 6)])
def test_anchored_solver_matches_brute_force(P, M, q, d):
    gen = torch.Generator().manual_seed(P * 10 + q)
    F, G, U = (torch.randn(*shape, generator=gen, dtype=torch.float64) for shape in ((P, q), (M, d), (P, M)))
    Fo, Go = torch.randn(11, q, generator=gen, dtype=torch.float64), torch.randn(8, d, generator=gen, dtype=torch.float64)
    solve = anchored_solver(F, G, Fo, Go, 0.1, 0.05)
    X = _brute_force_X(F, G, U, 0.1 * _mean_sq_sv(F), 0.05 * _mean_sq_sv(G), [(Fo, Go, 0.05 * _mean_sq_sv(Go))])
    np.testing.assert_allclose(solve(U).T.numpy(), X, rtol=1e-6, atol=1e-9 * np.abs(X).max())
    stacked = solve.many(torch.stack([U, 2 * U]))
    np.testing.assert_allclose(stacked[1].numpy(), 2 * stacked[0].numpy(), rtol=1e-9, atol=1e-12)  # linear in U
    # an anchor with no weight is the plain solve
    none = anchored_solver(F, G, 0 * Fo, Go, 0.1, 0.05)(U)
    np.testing.assert_allclose(none.numpy(), ridge_operator(F, G, U, 0.1, 0.05).numpy(), rtol=1e-8, atol=1e-12)
    with pytest.raises(ShapeError, match="anchors have widths"):
        anchored_solver(F, G, torch.randn(3, q + 1, dtype=torch.float64), Go)


def test_ridge_operator_is_linear_and_keeps_dtype():
    gen = torch.Generator().manual_seed(0)
    F, G = torch.randn(20, 8, generator=gen), torch.randn(5, 8, generator=gen)
    U1, U2 = torch.randn(20, 5, generator=gen), torch.randn(20, 5, generator=gen)
    solve = ridge_solver(F, G)
    A1, A2, A12 = solve(U1), solve(U2), solve(U1 - 2.5 * U2)
    assert A12.dtype == torch.float32
    torch.testing.assert_close(A12, A1 - 2.5 * A2, rtol=1e-5, atol=1e-6)


def test_ridge_operator_reproduces_reachable_change_with_tiny_ridge():
    """If U = F X0 G^T exactly and F, G have full column rank, the near-unregularised solve finds X0."""
    gen = torch.Generator().manual_seed(1)
    F, G = torch.randn(30, 6, generator=gen, dtype=torch.float64), torch.randn(10, 6, generator=gen, dtype=torch.float64)
    X0 = torch.randn(6, 6, generator=gen, dtype=torch.float64)
    A = ridge_operator(F, G, F @ X0 @ G.T, 1e-12, 1e-12)
    torch.testing.assert_close(A.T, X0, rtol=1e-6, atol=1e-8)


def test_head_update_splits_weight_and_bias():
    gen = torch.Generator().manual_seed(2)
    H = torch.cat([torch.randn(15, 5, generator=gen), torch.ones(15, 1)], 1)
    G, U = torch.randn(4, 3, generator=gen), torch.randn(15, 4, generator=gen)
    dW, db = head_update(H, G, U)
    A = ridge_operator(H, G, U)
    assert dW.shape == (3, 5) and db.shape == (3,)
    torch.testing.assert_close(torch.cat([dW, db[:, None]], 1), A)


def test_solver_rejects_bad_input():
    F, G = torch.randn(6, 3), torch.randn(2, 3)
    solve = ridge_solver(F, G)
    with pytest.raises(ShapeError, match="6 probes x 2 prompts"):
        solve(torch.zeros(5, 2))
    with pytest.raises(NonFiniteError):
        solve(torch.full((6, 2), float("nan")))
    with pytest.raises(NonFiniteError):
        ridge_solver(torch.full((6, 3), float("inf")), G)
    with pytest.raises(ValueError, match="ridge_a"):
        ridge_solver(F, G, ridge_a=float("nan"))


def test_utd_hand_example():
    f_pre = torch.tensor([[3.0, 4.0], [1.0, 0.0]])  # rows normalised inside: (0.6, 0.8), (1, 0)
    f_ft = torch.tensor([[0.0, 2.0], [1.0, 1.0]])
    g = torch.tensor([[1.0, 0.0], [0.0, 5.0]])
    expected = torch.tensor([[0.0 - 0.6, 1.0 - 0.8], [2**-0.5 - 1.0, 2**-0.5 - 0.0]])
    torch.testing.assert_close(utd(f_pre, f_ft, g), expected)
    with pytest.raises(ShapeError):
        utd(f_pre, f_ft, torch.zeros(2, 3))


def test_descriptor_cosine():
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    assert descriptor_cosine(a, a) == pytest.approx(1.0)
    assert descriptor_cosine(a, -a) == pytest.approx(-1.0)
    assert descriptor_cosine(a, torch.tensor([[0.0, 1.0], [1.0, 0.0]])) == pytest.approx(0.0)
    with pytest.raises(ShapeError):
        descriptor_cosine(a, torch.zeros(3, 2))


def test_first_order_change_matches_finite_difference():
    gen = torch.Generator().manual_seed(3)
    Z = torch.randn(7, 5, generator=gen, dtype=torch.float64)
    A = torch.randn(5, 5, generator=gen, dtype=torch.float64)
    G = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    eps = 1e-6
    measured = (unit_rows(edited_embeddings(Z, Z, A, eps)) - unit_rows(Z)) @ unit_rows(G).T / eps
    torch.testing.assert_close(first_order_change(Z, Z, A, G), measured, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("shape", [(7, 3), (3, 7), (5, 5)])
def test_relative_ridge_is_relative_to_the_mean_squared_singular_value(shape):
    m = torch.randn(shape, generator=torch.Generator().manual_seed(3))
    s = np.linalg.svd(m.double().numpy(), compute_uv=False)  # min(rows, cols) values
    assert float(relative_ridge(m, 0.3)) == pytest.approx(0.3 * float(np.mean(s**2)), rel=1e-12)
