"""Weight-space task vectors (algebra against direct state-dict arithmetic, exact undo, files) and strength sweeps."""

import numpy as np
import pytest
import safetensors.torch
import torch

import platonic_sdk as ps
from platonic_sdk.errors import CheckpointError, PlatonicError, ShapeError
from platonic_sdk.evaluate.measure.selection import DEFAULT_STRENGTHS, select_addition, select_negation
from platonic_sdk.finetune import TaskVector
from platonic_sdk.finetune.weightspace import named_tensors


def _model(seed: int, **vision):
    """A tiny CLIP whose weights depend on `seed` (from_config seeds its own initialisation)."""
    return ps.from_config("clip", {"vision_config": vision} if vision else None, seed=seed).model


@pytest.fixture(scope="module")
def models():
    return _model(0), _model(1), _model(2)


def _sd(model) -> dict:
    return {k: v.detach().clone() for k, v in named_tensors(model).items()}


def test_algebra_matches_state_dict_arithmetic(models):
    pre, a, b = (_sd(m) for m in models)
    ta, tb = TaskVector.from_models(*models[:2]), TaskVector.from_models(models[0], models[2])
    assert set(ta.deltas) == set(pre) and len(pre) > 10
    checks = {
        "sum": (ta + tb, lambda k: (a[k] - pre[k]) + (b[k] - pre[k])),
        "difference": (ta - tb, lambda k: (a[k] - pre[k]) - (b[k] - pre[k])),
        "scaled": (0.3 * ta, lambda k: 0.3 * (a[k] - pre[k])),
        "negated": (-tb, lambda k: -1.0 * (b[k] - pre[k])),
        "sum of three": (TaskVector.sum([ta, tb, ta]), lambda k: ((a[k] - pre[k]) + (b[k] - pre[k])) + (a[k] - pre[k])),
    }
    for label, (vector, expected) in checks.items():
        for k in pre:
            assert torch.equal(vector.deltas[k], expected(k)), (label, k)
    expected_norm = float(sum(((a[k] - pre[k]).double() ** 2).sum() for k in pre)) ** 0.5
    assert ta.norm() == pytest.approx(expected_norm)


def test_apply_and_exact_undo(models):
    pre_model, a_model, _ = models
    pre, a = _sd(pre_model), _sd(a_model)
    tau = TaskVector.from_models(pre_model, a_model)
    handle = tau.apply_to(pre_model, strength=0.4)
    now = named_tensors(pre_model)
    for k in pre:
        expected = (pre[k].double() + 0.4 * (a[k] - pre[k]).double()).float()
        assert torch.equal(now[k], expected), k
    handle.undo()
    assert all(torch.equal(named_tensors(pre_model)[k], v) for k, v in pre.items())
    with pytest.raises(PlatonicError, match="already"):
        handle.undo()
    with tau.apply_to(pre_model, strength=1.0):
        assert all(torch.allclose(named_tensors(pre_model)[k], a[k], atol=1e-6) for k in pre)
    assert all(torch.equal(named_tensors(pre_model)[k], v) for k, v in pre.items())


def test_an_identical_task_vector_twice_is_refused_unless_allowed(models):
    """The same content (the same object, or a copy of it) at any strength is refused, changing nothing;
    allow_twice=True adds it again, and another vector of the same shapes is not refused."""
    pre_model, a_model, b_model = models
    pre = _sd(pre_model)
    tau = TaskVector.from_models(pre_model, a_model)
    assert tau.norm() > 0 and TaskVector.from_models(pre_model, b_model).identity != tau.identity  # two real tasks
    with tau.apply_to(pre_model, strength=0.5):
        during = _sd(pre_model)
        for twin in (tau, TaskVector({k: v.clone() for k, v in tau.deltas.items()})):
            with pytest.raises(PlatonicError, match="identical task vector.*strength 0.5.*allow_twice"):
                twin.apply_to(pre_model, strength=1.0)
            assert all(torch.equal(named_tensors(pre_model)[k], v) for k, v in during.items())
        with tau.apply_to(pre_model, strength=0.5, allow_twice=True):  # on purpose: theta + tau, by hand
            now = named_tensors(pre_model)
            assert all(torch.allclose(now[k], pre[k] + (_sd(a_model)[k] - pre[k]), atol=1e-6) for k in pre)
        with TaskVector.from_models(pre_model, b_model).apply_to(pre_model):  # another task: no refusal
            pass
    assert all(torch.equal(named_tensors(pre_model)[k], v) for k, v in pre.items())


def test_different_architectures_are_refused(models):
    pre_model = models[0]
    wide = _model(3, hidden_size=32, intermediate_size=64)
    deep = _model(4, num_hidden_layers=3)
    with pytest.raises(ShapeError):
        TaskVector.from_models(pre_model, wide)
    with pytest.raises(PlatonicError, match="different architectures"):
        TaskVector.from_models(pre_model, deep)
    tau = TaskVector.from_models(models[0], models[1])
    before = _sd(wide)
    with pytest.raises(ShapeError):
        tau.apply_to(wide)
    assert all(torch.equal(named_tensors(wide)[k], v) for k, v in before.items())
    with pytest.raises(PlatonicError):
        tau + TaskVector.from_models(deep, _model(5, num_hidden_layers=3))
    with pytest.raises(PlatonicError):
        tau.apply_to(pre_model, strength=float("nan"))


def test_files_round_trip(models, tmp_path):
    tau = TaskVector.from_models(models[0], models[1], metadata={"task": "toy", "family": "clip"})
    tau.save(tmp_path / "tau.safetensors")
    back = TaskVector.load(tmp_path / "tau.safetensors")
    assert back.metadata == {"task": "toy", "family": "clip"}
    assert set(back.deltas) == set(tau.deltas) and all(torch.equal(back.deltas[k], v) for k, v in tau.deltas.items())
    for i, m in enumerate(models[:2]):
        safetensors.torch.save_file({k: v.contiguous() for k, v in _sd(m).items()}, str(tmp_path / f"m{i}.safetensors"))
    from_files = TaskVector.from_files(tmp_path / "m0.safetensors", tmp_path / "m1.safetensors")
    assert all(torch.equal(from_files.deltas[k], v) for k, v in tau.deltas.items())
    with pytest.raises(CheckpointError):
        TaskVector.load(tmp_path / "m0.safetensors")
    with pytest.raises(CheckpointError):
        TaskVector.from_files(tmp_path / "missing.safetensors", tmp_path / "m1.safetensors")


def test_addition_sweep_picks_best_mean_normalised_accuracy():
    finetuned = {"a": 80.0, "b": 50.0}

    def evaluate(c: float) -> dict:  # task a peaks at c = 0.6, task b at c = 0.3
        return {"a": 80.0 - 100 * (c - 0.6) ** 2, "b": 50.0 - 40 * (c - 0.3) ** 2, "control": 70.0}

    sweep = select_addition(evaluate, finetuned)
    scores = [np.mean([evaluate(c)["a"] / 80.0, evaluate(c)["b"] / 50.0]) for c in DEFAULT_STRENGTHS]
    assert len(sweep.strengths) == 21 and sweep.strengths[0] == 0.0 and sweep.strengths[-1] == 1.0
    assert sweep.best == pytest.approx(DEFAULT_STRENGTHS[int(np.argmax(scores))])
    assert sweep.scores == pytest.approx(scores)
    flat = select_addition(lambda c: {"a": 1.0}, {"a": 1.0}, strengths=[0.5, 0.2, 0.9])
    assert flat.best == 0.2  # ties go to the smallest strength
    with pytest.raises(PlatonicError, match="missing"):
        select_addition(lambda c: {"a": 1.0}, finetuned)


def test_negation_sweep_respects_control_floor():
    def evaluate(c: float) -> dict:
        return {"target": 90.0 - 60.0 * c, "control": 70.0 - 10.0 * c}

    sweep = select_negation(evaluate, "target", "control", zero_shot_control=70.0)
    feasible = [c for c in DEFAULT_STRENGTHS if evaluate(c)["control"] >= 0.95 * 70.0]
    assert sweep.best == pytest.approx(max(feasible))  # lowest target accuracy among feasible strengths
    assert sweep.best_result["control"] >= 0.95 * 70.0
    assert sum(sweep.feasible) == len(feasible)
    with pytest.raises(PlatonicError, match="constraint"):
        select_negation(evaluate, "target", "control", zero_shot_control=70.0, strengths=[0.8, 1.0])


def test_cosine_matches_flattened_computation():
    import torch

    from platonic_sdk.finetune.weightspace import TaskVector

    gen = torch.Generator().manual_seed(0)
    a = TaskVector({"w": torch.randn(3, 4, generator=gen), "b": torch.randn(4, generator=gen)}, {})
    b = TaskVector({"w": torch.randn(3, 4, generator=gen), "b": torch.randn(4, generator=gen)}, {})
    flat_a = torch.cat([a.deltas["w"].reshape(-1), a.deltas["b"]]).double()
    flat_b = torch.cat([b.deltas["w"].reshape(-1), b.deltas["b"]]).double()
    expected = float(flat_a @ flat_b / (flat_a.norm() * flat_b.norm()))
    assert abs(a.cosine(b) - expected) < 1e-12
    assert abs(a.cosine(a) - 1.0) < 1e-12 and abs(a.cosine(-1.0 * a) + 1.0) < 1e-12
