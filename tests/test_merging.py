"""Weight-space merging studies with and without OrthoReg on two toy tasks (tiny CLIP)."""

import numpy as np
import pytest
import torch

import platonic_sdk as ps
from platonic_sdk.errors import PlatonicError
from platonic_sdk.evaluate import accuracy
from platonic_sdk.evaluate.measure.merging import addition_study, negation_study, select_extending, split_validation
from platonic_sdk.finetune import FinetuneConfig, merge_methods

CONFIG = FinetuneConfig(lr=1e-2, epochs=2, batch_size=16)
COEFS = (0.0, 0.5, 1.0)


def _patch_task(name: str, classes: tuple[str, ...], rgb: list[list[int]], seed: int) -> ps.Task:
    rng = np.random.default_rng(seed)
    labels = np.arange(60) % len(classes)
    noise = rng.integers(-30, 30, (60, 32, 32, 3))
    images = list(np.clip(np.array(rgb)[labels][:, None, None, :] + noise, 0, 255).astype(np.uint8))
    return ps.Task(name, classes, ps.Split(images[:40], labels[:40]), ps.Split(images[40:], labels[40:]))


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    encoder = ps.from_config("clip")
    colours = _patch_task("colours", ("red", "green", "blue"), [[220, 30, 30], [30, 220, 30], [30, 30, 220]], 0)
    shades = _patch_task("shades", ("black", "white"), [[25, 25, 25], [230, 230, 230]], 1)
    return encoder, colours, shades


def test_validation_split_is_disjoint_and_seeded(setup):
    _, colours, _ = setup
    fit, val = split_validation(colours, 0.25, seed=3)
    assert len(fit.train) == 30 and len(val.test) == 10 and val.train is fit.train
    ids = {id(x) for x in fit.train.items}
    assert not ids & {id(x) for x in val.test.items}
    assert ids | {id(x) for x in val.test.items} == {id(x) for x in colours.train.items}
    assert [id(x) for x in split_validation(colours, 0.25, seed=3)[1].test.items] == [id(x) for x in val.test.items]
    with pytest.raises(PlatonicError):
        split_validation(colours, 0.0)


def test_addition_study_with_and_without_orthoreg(setup):
    encoder, colours, shades = setup
    state = {k: v.clone() for k, v in encoder.model.state_dict().items()}
    results = addition_study(encoder, [colours, shades], CONFIG, lambdas=(0.0, 1.0), strengths=COEFS, methods=merge_methods())
    assert [(r.orthoreg, r.method) for r in results] == [(lam, m) for lam in (0.0, 1.0) for m in merge_methods()]
    for lam in (0.0, 1.0):  # one fine-tune per lambda, shared by every method
        same = [r for r in results if r.orthoreg == lam]
        assert all(r.finetuned == same[0].finetuned and r.mean_cosine == same[0].mean_cosine for r in same)
    for r in results:  # the grid (0, .5, 1) grows by its span while the pick is its top, at most 3 times
        assert r.strength in r.sweep.strengths and r.sweep.best == r.strength and r.sweep.strengths[:3] == COEFS
        grown = (len(r.sweep.strengths) - 3) // 2
        assert r.sweep.strengths == COEFS + tuple(1.0 + 0.5 * i for i in range(1, 2 * grown + 1))
        assert grown == 3 or r.strength < max(r.sweep.strengths)
        assert r.zero_shot == {t.name: pytest.approx(accuracy(encoder, t)) for t in (colours, shades)}
        assert all(r.finetuned[t] > r.zero_shot[t] for t in r.finetuned)
        assert r.normalised == pytest.approx(np.mean([r.merged[t] / r.finetuned[t] for t in ("colours", "shades")]))
        assert r.strength > 0 and np.mean(list(r.merged.values())) > np.mean(list(r.zero_shot.values()))
        assert -1.0 <= r.mean_cosine <= 1.0  # two vectors: their cosine (TaskVector.cosine is tested exactly)
    assert all(torch.equal(encoder.model.state_dict()[k], v) for k, v in state.items())


def test_addition_study_refuses_an_unknown_method_before_training(setup):
    encoder, colours, shades = setup
    with pytest.raises(PlatonicError, match="unknown merge method 'average'"):
        addition_study(encoder, [colours, shades], CONFIG, methods=["task_arithmetic", "average"])


def test_negation_study_keeps_the_control(setup):
    encoder, colours, shades = setup
    (result,) = negation_study(encoder, colours, shades, CONFIG, lambdas=(0.0,), strengths=COEFS)
    val_target, val_control = (split_validation(t, 0.2, CONFIG.seed)[1] for t in (colours, shades))
    assert result.sweep.best_result["shades"] >= 0.95 * accuracy(encoder, val_control)
    # strength 0 is the unedited model on the validation parts
    assert result.sweep.results[0] == {"colours": pytest.approx(accuracy(encoder, val_target)), "shades": pytest.approx(accuracy(encoder, val_control))}
    assert result.merged["colours"] <= result.zero_shot["colours"]


def test_the_grid_grows_only_while_the_pick_is_its_top():
    calls = []

    def evaluate(strength):  # accuracy peaks at strength 2.5
        calls.append(strength)
        return {"t": 100.0 - (strength - 2.5) ** 2}

    sweep = select_extending(evaluate, {"t": 100.0}, (0.0, 0.5, 1.0), extend=5, progress=False)
    assert sweep.best == 2.5 and sweep.strengths == (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
    assert sorted(calls) == list(sweep.strengths)  # each strength evaluated once
    capped = select_extending(evaluate, {"t": 100.0}, (0.0, 0.5, 1.0), extend=1, progress=False)
    assert capped.best == 2.0 and capped.strengths == (0.0, 0.5, 1.0, 1.5, 2.0)
