"""OrthoReg: the penalty against hand computations, its zero-gradient start, LoRA vs dense forms, and its use in training."""

import numpy as np
import pytest
import torch

import platonic_sdk as ps
from platonic_sdk.errors import PlatonicError, ShapeError
from platonic_sdk.finetune import FinetuneConfig, OrthoReg, dense_updates, finetune, lora_updates
from platonic_sdk.training.lora_layers import inject_lora
from platonic_sdk.linalg import orthoreg_penalty


def test_zero_for_orthonormal_columns_and_rows():
    Q, _ = torch.linalg.qr(torch.randn(9, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))
    assert float(orthoreg_penalty(Q)) == pytest.approx(0.0, abs=1e-6)
    assert float(orthoreg_penalty(Q.T)) == pytest.approx(0.0, abs=1e-6)


def test_matches_hand_computation():
    delta = torch.tensor([[1.0, 2.0], [0.0, 1.0], [1.0, 0.0]])
    # Gram = delta^T delta (the smaller, 2 x 2) = [[2, 2], [2, 5]]; minus I = [[1, 2], [2, 4]]; sum of squares 25
    assert float(orthoreg_penalty(delta)) == pytest.approx(5.0)
    assert float(orthoreg_penalty(delta, squared=True)) == pytest.approx(25.0)
    assert float(orthoreg_penalty(delta.T)) == pytest.approx(5.0)


def test_sqrt_k_with_zero_gradient_at_zero_update():
    delta = torch.zeros(5, 7, requires_grad=True)
    value = orthoreg_penalty(delta)
    assert float(value.detach()) == pytest.approx(5**0.5)
    value.backward()
    assert torch.isfinite(delta.grad).all() and float(delta.grad.abs().max()) == 0.0


def test_regulariser_sums_selected_updates_and_validates():
    a, b = torch.tensor([[1.0, 2.0], [0.0, 1.0], [1.0, 0.0]]), torch.zeros(3, 3)
    updates = [("layers.0.q_proj", a), ("layers.0.v_proj", b)]
    assert float(OrthoReg(2.0)(updates)) == pytest.approx(2.0 * (5.0 + 3**0.5))
    assert float(OrthoReg(1.0, squared=True)(updates)) == pytest.approx(25.0 + 3.0)
    assert float(OrthoReg(1.0, include=r"q_proj$")(updates)) == pytest.approx(5.0)
    with pytest.raises(PlatonicError, match="selected no"):
        OrthoReg(1.0, include="k_proj")(updates)
    with pytest.raises(PlatonicError):
        OrthoReg(-1.0)
    with pytest.raises(PlatonicError):
        OrthoReg(1.0, include="(")
    assert not OrthoReg().active
    with pytest.raises(ShapeError):
        orthoreg_penalty(torch.zeros(3))


def test_lora_form_equals_dense_form():
    encoder = ps.from_config("clip")
    tower = encoder.media_encoder
    before = {n: p.detach().clone() for n, p in tower.named_parameters()}
    lora = inject_lora(tower, encoder.lora_targets, rank=4, lora_alpha=8.0)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in tower.named_parameters():
            if "lora_B" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
    reg = OrthoReg(1.0)
    lora_value = float(reg(lora_updates(tower)).detach())
    names = [n for n, _ in lora_updates(tower)]
    lora.merge_and_unload()
    tower.requires_grad_(True)
    reference = {n: w for n, w in before.items() if any(n == f"{m}.weight" for m in names)}
    dense = list(dense_updates(tower, reference))
    assert len(dense) == len(names) == 2 * len([n for n in names if n.endswith("q_proj")])
    assert lora_value == pytest.approx(float(reg(dense).detach()), rel=1e-4)


def _colour_task() -> ps.Task:
    rng = np.random.default_rng(0)
    colours = np.array([[220, 30, 30], [30, 220, 30], [30, 30, 220]])
    labels = rng.integers(0, 3, 48)
    noise = rng.integers(-30, 30, (48, 32, 32, 3))
    images = np.clip(colours[labels][:, None, None, :] + noise, 0, 255).astype(np.uint8)
    split = ps.Split(list(images), labels)
    return ps.Task("colours", ("red", "green", "blue"), split, split)


def test_orthoreg_term_shapes_source_finetuning():
    """The same fine-tune with the term on ends with a smaller penalty on its LoRA updates than with it off."""
    encoder, task = ps.from_config("clip"), _colour_task()
    measure = OrthoReg(1.0)

    def final_penalty(coef: float) -> float:
        config = FinetuneConfig(lr=1e-2, epochs=2, batch_size=16, orthoreg=OrthoReg(coef))
        vector = finetune(encoder, task, config, progress=False).task_vector
        return float(measure(vector.deltas.items()))

    assert final_penalty(1.0) < final_penalty(0.0)
