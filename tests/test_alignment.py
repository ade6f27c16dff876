"""The alignment baseline (docs/method.md sec. 16): its maps and least-squares fold against numpy, an
exact case (the target is the source and the fine-tune a rotation at the site), and the cell methods
against an independent computation from forward passes."""

import copy

import numpy as np
import pytest
import torch
from grid_zoo import CONTROL, build_workspace

import platonic_sdk as ps
from platonic_sdk.evaluate.measure.alignment import alignment_operator, carried_change
from platonic_sdk.evaluate.measure.cells import addition_cells, eval_names, negation_cells, signed_strength
from platonic_sdk.evaluate.measure.methods import evaluate_cell
from platonic_sdk.evaluate.measure.workspace import Workspace
from platonic_sdk.evaluate.plan.settings import CACHED, CellSettings
from platonic_sdk.linalg import lstsq_map, procrustes_map, ridge_lstsq
from platonic_sdk.worlds.image import ImageWorld


def _rng(seed):
    return np.random.default_rng(seed)


def _semi_orthogonal(rng, d_s, d_t):
    """A d_s x d_t matrix with orthonormal rows (d_s <= d_t) or columns (d_s > d_t)."""
    q, _ = np.linalg.qr(rng.standard_normal((max(d_s, d_t), min(d_s, d_t))))
    return q.T if d_s <= d_t else q


@pytest.mark.parametrize("d_s, d_t", [(5, 7), (7, 5), (6, 6)])
def test_procrustes_map_is_the_svd_solution_and_recovers_a_semi_orthogonal_map(d_s, d_t):
    rng = _rng(d_s * 10 + d_t)
    X_s = rng.standard_normal((40, d_s))
    X_t = rng.standard_normal((40, d_t))
    # the textbook solution, by hand: U V^T of the SVD of the centred cross-covariance
    u, _, vt = np.linalg.svd((X_s - X_s.mean(0)).T @ (X_t - X_t.mean(0)), full_matrices=False)
    R = procrustes_map(torch.from_numpy(X_s), torch.from_numpy(X_t)).numpy()
    np.testing.assert_allclose(R, u @ vt, atol=1e-10)
    small = R @ R.T if d_s <= d_t else R.T @ R
    np.testing.assert_allclose(small, np.eye(min(d_s, d_t)), atol=1e-10)
    if d_s > d_t:  # ||X R|| then depends on R: U V^T maximises tr(R^T C) but need not minimise the residual
        return
    # a target that IS a shifted semi-orthogonal image of the source: the map is recovered exactly
    Q = _semi_orthogonal(rng, d_s, d_t)
    image = X_s @ Q + rng.standard_normal(d_t)
    np.testing.assert_allclose(procrustes_map(torch.from_numpy(X_s), torch.from_numpy(image)).numpy(), Q, atol=1e-9)


def test_procrustes_map_with_fewer_probes_than_width_is_zero_off_their_span():
    rng = _rng(3)
    X_s, X_t = rng.standard_normal((5, 8)), rng.standard_normal((5, 9))  # centred rows span 4 dimensions
    R = procrustes_map(torch.from_numpy(X_s), torch.from_numpy(X_t)).numpy()
    Xs_c = X_s - X_s.mean(0)
    np.testing.assert_allclose(np.linalg.svd(R, compute_uv=False)[:5], [1, 1, 1, 1, 0], atol=1e-9)
    basis = np.linalg.svd(Xs_c)[2][:4]  # the span of the centred source rows
    off = np.eye(8) - basis.T @ basis
    np.testing.assert_allclose(off @ R, 0, atol=1e-9)


def test_lstsq_map_and_ridge_lstsq_against_numpy():
    rng = _rng(1)
    X_s, X_t = rng.standard_normal((30, 6)), rng.standard_normal((30, 9))
    expected, *_ = np.linalg.lstsq(X_s - X_s.mean(0), X_t - X_t.mean(0), rcond=None)
    np.testing.assert_allclose(lstsq_map(torch.from_numpy(X_s), torch.from_numpy(X_t)).numpy(), expected, atol=1e-10)
    # fewer probes than width: the minimum-norm solution
    few_s, few_t = X_s[:4], X_t[:4]
    np.testing.assert_allclose(lstsq_map(torch.from_numpy(few_s), torch.from_numpy(few_t)).numpy(),
                               np.linalg.pinv(few_s - few_s.mean(0)) @ (few_t - few_t.mean(0)), atol=1e-10)
    F, T = rng.standard_normal((30, 6)), rng.standard_normal((30, 5))
    for ridge in (0.0, 0.1):
        mu = ridge * np.sum(F ** 2) / min(F.shape)  # the closed form's relative ridge: mean sigma^2 of F
        At = np.linalg.solve(F.T @ F + mu * np.eye(6), F.T @ T)
        np.testing.assert_allclose(ridge_lstsq(torch.from_numpy(F), torch.from_numpy(T), ridge).numpy(), At.T, atol=1e-10)
    with pytest.raises(ps.ShapeError):
        procrustes_map(torch.zeros(3, 2), torch.zeros(4, 2))


def test_carried_change_maps_by_the_linear_part_only():
    rng = _rng(2)
    X_s, change = torch.from_numpy(rng.standard_normal((20, 4))), torch.from_numpy(rng.standard_normal((20, 4)))
    Q = torch.from_numpy(_semi_orthogonal(rng, 4, 6))
    torch.testing.assert_close(carried_change(X_s, X_s @ Q + 3.0, change), change @ Q)
    with pytest.raises(ValueError, match="unknown alignment map"):
        carried_change(X_s, X_s, change, "cca")


@pytest.fixture(scope="module")
def rotated():
    """One tiny CLIP (16-d projection) whose 'fine-tune' is a rotation Q folded at its projection site, in a
    workspace without ridge: the exact case of the baseline (the target is the source, the map the identity)."""
    model = ps.from_config("clip", {"projection_dim": 16}, seed=0)
    Q, _ = torch.linalg.qr(torch.randn(16, 16, generator=torch.Generator().manual_seed(5), dtype=torch.float64))
    ft = copy.deepcopy(model)
    ft.last_affine().fold((Q - torch.eye(16, dtype=torch.float64)).float(), 1.0)
    world = ImageWorld(train_per_class=6, test_per_class=5)
    tasks = {n: world.task(n) for n in ("amber_shapes", CONTROL)}
    ws = Workspace({"clip": model}, tasks, {("clip", "amber_shapes"): ft}, controls=[CONTROL], per_class=6, ridge_a=0.0, ridge_b=0.1)
    return ws, ft, Q.float()


@pytest.mark.parametrize("how", ["procrustes", "lstsq"])
def test_the_target_as_its_own_source_reproduces_the_fine_tunes_change(rotated, how):
    ws, ft, Q = rotated
    assert ws.grid("amber_shapes").shape[0] > 16  # more probes than width: the identity map is determined
    A = alignment_operator(ws, "clip", "clip", "amber_shapes", how)
    torch.testing.assert_close(A, Q - torch.eye(16), atol=2e-4, rtol=0)
    # folded at strength 1 the edit moves the raw embeddings of unseen items as the fine-tune does: z -> Q z
    cache = ws.eval_set("clip", CONTROL)
    edited = cache.raw_embeddings + cache.site_inputs @ A.T
    with torch.no_grad():
        items = list(ws.tasks[CONTROL].test.items)
        torch.testing.assert_close(edited, ft.embed_media(ft.preprocess(items)), atol=2e-4, rtol=1e-4)


@pytest.fixture(scope="module")
def ws():
    return build_workspace()


def _unit(x):
    return torch.nn.functional.normalize(x.double(), dim=1)


def _independent_operator(ws, target, source, task, how):
    """From forward passes and numpy: the map, the carried change and the ridge fold on the site rows."""
    items = list(ws.grid(task).items)
    src, tgt, ft = ws.models[source], ws.models[target], ws.finetuned[(source, task)]
    with torch.no_grad():
        X_s = _unit(src.embed_media(src.preprocess(items))).numpy()
        X_ft = _unit(ft.embed_media(ft.preprocess(items))).numpy()
        S, Z = tgt.last_affine().site_inputs(tgt, tgt.preprocess(items))
    X_t = _unit(Z).numpy()
    Xs_c, Xt_c = X_s - X_s.mean(0), X_t - X_t.mean(0)
    if how == "procrustes":
        u, sv, vt = np.linalg.svd(Xs_c.T @ Xt_c, full_matrices=False)
        keep = sv > sv[0] * 1e-10  # fewer probes than width: the map is zero off the probes' span
        R = u[:, keep] @ vt[keep]
    else:
        R = np.linalg.pinv(Xs_c) @ Xt_c
    F = (S.double() / Z.double().norm(dim=1, keepdim=True)).numpy()
    mu = ws.ridge_a * np.sum(F ** 2) / min(F.shape)
    At = np.linalg.solve(F.T @ F + mu * np.eye(F.shape[1]), F.T @ ((X_ft - X_s) @ R))
    return torch.from_numpy(At.T).float()


@pytest.mark.parametrize("how, name", [("procrustes", "alignment"), ("lstsq", "alignment_lstsq")])
def test_cell_methods_against_an_independent_computation(ws, how, name):
    """On a residual-head target (siglip, an addition) and a wider projection target (wide, a negation): the
    operator against forward passes and numpy, and the method's accuracies those of that operator folded."""
    cells = [next(c for c in addition_cells(ws) if c.target == "siglip"), next(c for c in negation_cells(ws) if c.target == "wide")]
    for cell in cells:
        ops = [alignment_operator(ws, cell.target, s, t, how) for s, t in zip(cell.sources, cell.tasks)]
        for op, (s, t) in zip(ops, zip(cell.sources, cell.tasks)):
            assert op.shape == ws.bank(cell.target).state(ws.grid(t).identity).solve.operator_shape
            torch.testing.assert_close(op, _independent_operator(ws, cell.target, s, t, how), atol=2e-4, rtol=2e-3)
        settings = CellSettings()
        record = evaluate_cell(ws, cell, settings, ["zero_shot", name])
        sign, strength = signed_strength(cell, settings)
        assert record["results"][name] == ws.accuracies(cell.target, eval_names(ws, cell), sign * sum(ops), strength)


def test_alignment_is_a_default_method_and_skips_stored_descriptors(ws):
    assert {"alignment", "alignment_lstsq"} <= set(CACHED)
    stored = {**ws.finetuned, ("clip", "amber_shapes"): ws.descriptor("clip", "amber_shapes")}
    other = Workspace(ws.models, ws.tasks, stored, ws.controls, per_class=ws.per_class, ridge_b=ws.ridge_b, batch_size=ws.batch_size)
    assert alignment_operator(other, "siglip", "clip", "amber_shapes") is None
    cell = next(c for c in negation_cells(other) if c.sources == ("clip",) and c.tasks == ("amber_shapes",))
    assert "alignment" not in evaluate_cell(other, cell, CellSettings(), ["zero_shot", "alignment"])["results"]


def test_each_terms_operator_is_solved_once_per_workspace(ws, monkeypatch):
    """Cells that share a (target, source, task) term share its alignment operator: solved once, by map."""
    from platonic_sdk.evaluate.measure import alignment as module

    solved = []
    real = module._solved
    monkeypatch.setattr(module, "_solved", lambda *args: solved.append(args[1:]) or real(*args))
    fresh = Workspace(ws.models, ws.tasks, ws.finetuned, ws.controls, per_class=ws.per_class, ridge_b=ws.ridge_b, batch_size=ws.batch_size)
    cells = [c for c in addition_cells(fresh) if c.target == "siglip"]
    terms = [(c.target, s, t) for c in cells for s, t in zip(c.sources, c.tasks)]
    assert len(terms) > len(set(terms))  # the cells share terms
    for how in ("procrustes", "lstsq"):
        for target, source, task in terms:
            first = alignment_operator(fresh, target, source, task, how)
            assert alignment_operator(fresh, target, source, task, how) is first
    assert sorted(solved) == sorted((*term, how) for how in ("procrustes", "lstsq") for term in set(terms))
