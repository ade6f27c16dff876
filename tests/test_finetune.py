"""Source fine-tuning through the protocol: it learns, leaves the pre-trained model alone, is seeded, and round-trips."""

import copy

import numpy as np
import pytest
import torch

import platonic_sdk as ps
from platonic_sdk.encoding.features import encode_items, landmarks
from platonic_sdk.errors import PlatonicError
from platonic_sdk.evaluate import accuracy
from platonic_sdk.evaluate.measure.selection import select_addition, task_vector_evaluator
from platonic_sdk.finetune import FinetuneConfig, FineTuned, finetune
from platonic_sdk.finetune.weightspace import named_tensors

FAST = dict(lr=1e-2, epochs=2, batch_size=16)


def _colour_task(n: int = 48) -> ps.Task:
    """Flat colour patches with noise: linearly separable, so a few steps of fine-tuning must learn it."""
    rng = np.random.default_rng(0)
    colours = np.array([[220, 30, 30], [30, 220, 30], [30, 30, 220]])
    labels = rng.integers(0, 3, n)
    noise = rng.integers(-30, 30, (n, 32, 32, 3))
    images = list(np.clip(colours[labels][:, None, None, :] + noise, 0, 255).astype(np.uint8))
    return ps.Task("colours", ("red", "green", "blue"), ps.Split(images[: n // 2], labels[: n // 2]), ps.Split(images[n // 2 :], labels[n // 2 :]))


@pytest.fixture(scope="module")
def encoder():
    torch.manual_seed(0)
    return ps.from_config("clip")


@pytest.fixture(scope="module")
def task():
    return _colour_task()


@pytest.fixture(scope="module")
def lora_run(encoder, task):
    state = {k: v.clone() for k, v in encoder.model.state_dict().items()}
    result = finetune(encoder, task, FinetuneConfig(**FAST), progress=False)
    return result, state


def _train_accuracy(encoder, task) -> float:
    f = encode_items(encoder, task.train.items)
    g = landmarks(encoder, task.prompts())
    return float(((f @ g.T).argmax(1).numpy() == task.train.labels).mean())


@pytest.mark.parametrize("mode", ["lora", "full"])
def test_finetuning_raises_train_accuracy(encoder, task, lora_run, mode):
    result = lora_run[0] if mode == "lora" else finetune(encoder, task, FinetuneConfig(mode="full", lr=1e-3, epochs=2, batch_size=16), progress=False)
    before, after = _train_accuracy(encoder, task), _train_accuracy(result.encoder, task)
    assert after >= 0.9 and after > before + 0.3
    assert result.losses[-1] < result.losses[0]
    assert result.metadata["mode"] == mode and result.metadata["steps"] == len(result.losses) == 4


def test_pretrained_encoder_untouched_and_only_lora_targets_change(encoder, lora_run):
    result, state = lora_run
    assert all(torch.equal(encoder.model.state_dict()[k], v) for k, v in state.items())
    assert all(p.requires_grad is False for p in result.encoder.model.parameters())
    assert result.task_vector.deltas and all(k.endswith(("q_proj.weight", "v_proj.weight")) for k in result.task_vector.deltas)
    # the fine-tuned copy is the pre-trained tower plus the task vector, and nothing else moved
    ft, pre = named_tensors(result.encoder.model), named_tensors(encoder.model)
    prefix = next(n for n, m in result.encoder.model.named_modules() if m is result.encoder.media_encoder)
    changed = {k for k in pre if not torch.equal(pre[k], ft[k])}
    assert changed == {f"{prefix}.{k}" for k in result.task_vector.deltas}
    assert type(result.encoder.media_encoder) is type(encoder.media_encoder)  # LoRA merged and unloaded


def test_attention_only_full_finetuning_moves_only_attention(encoder, task):
    result = finetune(encoder, task, FinetuneConfig(mode="full", trainable=r"self_attn\.", lr=1e-3, epochs=1, batch_size=16), progress=False)
    assert result.task_vector.deltas and all(".self_attn." in k for k in result.task_vector.deltas)
    assert any(k.endswith("k_proj.weight") for k in result.task_vector.deltas)  # every attention tensor, not only q/v
    assert result.metadata["trainable"] == r"self_attn\."
    with pytest.raises(PlatonicError, match="matches"):
        finetune(encoder, task, FinetuneConfig(mode="full", trainable="no_such_layer"), progress=False)
    with pytest.raises(PlatonicError, match="full fine-tuning"):
        FinetuneConfig(trainable="self_attn")


def test_seeded_runs_repeat_and_seeds_differ(encoder, task, lora_run):
    again = finetune(encoder, task, FinetuneConfig(**FAST), progress=False)
    assert again.losses == lora_run[0].losses
    assert all(torch.equal(again.task_vector.deltas[k], v) for k, v in lora_run[0].task_vector.deltas.items())
    other = finetune(encoder, task, FinetuneConfig(seed=1, **FAST), progress=False)
    assert other.losses != lora_run[0].losses


def test_utd_on_a_grid_matches_independent_computation(encoder, task, lora_run):
    result = lora_run[0]
    grid = task.grid(per_class=4, seed=0)
    utd = result.utd(grid, space="affinity")
    g = landmarks(encoder, grid.prompts)
    expected = (encode_items(result.encoder, grid.items) - encode_items(encoder, grid.items)) @ g.T
    assert utd.shape == grid.shape and utd.grid_id == grid.identity
    assert torch.allclose(utd.matrix, expected, atol=1e-6)
    assert utd.provenance["source"] == "finetune" and float(utd.matrix.abs().max()) > 1e-3


def test_save_and_load(encoder, task, lora_run, tmp_path):
    result = lora_run[0]
    result.save(tmp_path / "ft.safetensors")
    back = FineTuned.load(tmp_path / "ft.safetensors", encoder)
    assert back.metadata["family"] == "clip" and back.metadata["task"] == "colours" and back.metadata["rank"] == 4
    items = task.test.items
    assert torch.allclose(encode_items(back.encoder, items), encode_items(result.encoder, items), atol=1e-6)
    assert accuracy(back.encoder, task) == pytest.approx(accuracy(result.encoder, task))
    other = ps.from_config("siglip")
    with pytest.raises(PlatonicError, match="fine-tuned from"):
        FineTuned.load(tmp_path / "ft.safetensors", other)


def test_weight_space_strength_sweep_on_a_fine_tune(encoder, task, lora_run):
    """Task arithmetic end to end: theta_pre + c * tau, evaluated and undone for each c of the sweep."""
    result = lora_run[0]
    model = copy.deepcopy(encoder)
    state = {k: v.clone() for k, v in model.model.state_dict().items()}
    tuned = accuracy(result.encoder, task)
    sweep = select_addition(task_vector_evaluator(model, result.task_vector, [task]), {"colours": tuned}, strengths=[0.0, 0.5, 1.0])
    assert sweep.results[0]["colours"] == pytest.approx(accuracy(encoder, task))
    assert sweep.results[2]["colours"] == pytest.approx(tuned)
    assert sweep.best > 0.0
    assert all(torch.equal(model.model.state_dict()[k], v) for k, v in state.items())


def test_bad_input_is_refused(encoder, task):
    with pytest.raises(PlatonicError, match="mode"):
        FinetuneConfig(mode="adapter")
    with pytest.raises(PlatonicError):
        FinetuneConfig(lr=0.0)
    empty = ps.Task("empty", ("red", "green"), ps.Split([], []), ps.Split([], []))
    with pytest.raises(PlatonicError, match="empty"):
        finetune(encoder, empty)


def _any_task(modality: str) -> ps.Task:
    rng = np.random.default_rng(0)
    if modality == "image":
        items = [rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8) for _ in range(8)]
    else:
        from platonic_sdk.data.audio import Waveform

        items = [Waveform(rng.standard_normal(8000).astype(np.float32) * 0.1, 16000) for _ in range(8)]
    split = ps.Split(items, np.arange(8) % 2)
    return ps.Task("any", ("red circle", "blue square"), split, split)


@pytest.mark.parametrize("family", ps.list_families())
@pytest.mark.parametrize("mode", ["lora", "full"])
def test_every_family_finetunes_through_the_protocol(family, mode):
    torch.manual_seed(0)
    encoder = ps.from_config(family)
    state = {k: v.clone() for k, v in encoder.model.state_dict().items()}
    result = finetune(encoder, _any_task(ps.family(family).modality), FinetuneConfig(mode=mode, lr=1e-2, max_steps=2, batch_size=4), progress=False)
    assert len(result.losses) == 2 and all(np.isfinite(result.losses))
    assert result.task_vector.deltas and result.task_vector.norm() > 0
    assert all(torch.equal(encoder.model.state_dict()[k], v) for k, v in state.items())
