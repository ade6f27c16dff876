"""Numbers and files: non-finite folds, non-finite models, non-real tensors, bool strengths, atomic writes.

Each refusal is checked together with what must not have changed: the model's state dict bit for bit,
or a file's bytes (and no stray temporary file next to it).
"""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest
import safetensors.torch
import torch

import platonic_sdk as ps
from platonic_sdk.descriptor import Term
from platonic_sdk.errors import NonFiniteError, WrongTypeError
from platonic_sdk.evaluate import accuracy
from platonic_sdk.finetune import TaskVector
from platonic_sdk.finetune.weightspace import named_tensors
from platonic_sdk.atomic import write_text
from platonic_sdk.io import load_tensors, save_tensors
from platonic_sdk.transfer import Edit, OperatorEdit
from platonic_sdk.transfer.lora import LoraEdit
from platonic_sdk.worlds.image import ImageWorld

SMALL = {"vision_config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2}}


@pytest.fixture(scope="module")
def encoder():
    return ps.from_config("clip", SMALL, seed=0).eval()


@pytest.fixture(scope="module")
def task():
    return ImageWorld(train_per_class=2, test_per_class=2).task("small_shapes")


def _state(encoder) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in encoder.model.state_dict().items()}


def _same(encoder, state) -> bool:
    now = encoder.model.state_dict()
    return all(torch.equal(now[k], v) for k, v in state.items())


def _lora(encoder, strength: float) -> LoraEdit:
    name = next(n for n, _ in encoder.media_encoder.named_modules() if n.endswith(encoder.lora_targets[0]))
    w = encoder.media_encoder.get_submodule(name).weight
    return LoraEdit({name: (torch.ones(2, w.shape[1]), torch.ones(w.shape[0], 2))}, 2, 4.0, strength)


# -- non-finite folds ------------------------------------------------------------------------------
def test_folds_that_would_overflow_are_refused_and_write_nothing(encoder):
    site = encoder.last_affine()
    below = OperatorEdit(torch.eye(site.out_dim), 0.25).apply(encoder)  # refusals leave the stack below intact too
    before = _state(encoder)
    attempts = {
        "operator": lambda: OperatorEdit(torch.ones(site.out_dim, site.in_dim), 1e308).apply(encoder),
        "lora": lambda: _lora(encoder, 1e308).apply(encoder),
        "task vector": lambda: TaskVector({n: torch.ones_like(t) for n, t in named_tensors(encoder.media_encoder).items()}).apply_to(
            encoder.media_encoder, 1e308
        ),
    }
    for label, attempt in attempts.items():
        with pytest.raises(NonFiniteError, match="NaN/inf.*nothing was changed"):
            attempt()
        assert _same(encoder, before), label
    below.remove()


def test_models_with_non_finite_weights_are_refused(encoder, task):
    model = copy.deepcopy(encoder)
    with torch.no_grad():
        model.media_encoder.get_submodule(next(n for n, _ in model.media_encoder.named_modules() if n.endswith("fc1"))).weight[0, 0] = float("nan")
    before = _state(model)
    with pytest.raises(NonFiniteError, match="fc1.weight"):
        accuracy(model, task)
    with pytest.raises(NonFiniteError, match="fc1.weight"):
        ps.OperatorBank(model)
    with pytest.raises(NonFiniteError, match="fc1.weight"):
        ps.UTD.compute(encoder, model, task.grid(2, 0))
    for k, v in before.items():
        torch.testing.assert_close(model.model.state_dict()[k], v, rtol=0, atol=0, equal_nan=True)
    assert accuracy(encoder, task) >= 0  # the finite original still evaluates


# -- tensors that must hold real numbers ----------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.complex64, torch.bool, torch.int64])
def test_non_real_tensors_are_refused_in_memory_and_in_files(encoder, dtype, tmp_path):
    d = encoder.embed_dim
    bad = torch.ones(4, 3, dtype=dtype)
    grid_id = "g"
    with pytest.raises(WrongTypeError, match=str(dtype).split(".")[1]):
        ps.UTD(bad, grid_id, "t")
    with pytest.raises(WrongTypeError):
        OperatorEdit(torch.ones(d, d, dtype=dtype), 0.5)
    with pytest.raises(WrongTypeError):
        TaskVector({"w": bad})
    with pytest.raises(WrongTypeError):
        LoraEdit({"m": (torch.ones(2, 3, dtype=dtype), torch.ones(3, 2))}, 2, 4.0)
    files = {
        "utd": (ps.UTD.load, {"utd": bad}, "utd", {"grid_id": grid_id, "task": "t"}),
        "operator": (Edit.load, {"operator": torch.ones(d, d, dtype=dtype)}, "operator_edit", {"alpha": 0.5}),
        "lora": (Edit.load, {"m.lora_A": torch.ones(2, 3, dtype=dtype), "m.lora_B": torch.ones(3, 2)}, "lora_edit", {"rank": 2, "lora_alpha": 4.0}),
        "task_vector": (TaskVector.load, {"w": bad}, "task_vector", {}),
    }
    for name, (load, tensors, kind, meta) in files.items():
        path = tmp_path / f"{name}.safetensors"
        save_tensors(path, tensors, kind, meta)
        with pytest.raises(WrongTypeError, match="real floating-point"):
            load(path)


# -- strengths and coefficients are real numbers --------------------------------------------------
@pytest.mark.parametrize("value", [True, False, np.bool_(True), "0.5", None, torch.tensor(0.5)])
def test_strengths_and_coefficients_must_be_real_numbers(encoder, value):
    d = encoder.embed_dim
    A = torch.zeros(d, d)
    utd = ps.UTD(torch.zeros(2, 2), "g", "t")
    before = _state(encoder)
    with pytest.raises(WrongTypeError, match="real number"):
        OperatorEdit(A, value)
    with pytest.raises(WrongTypeError, match="real number"):
        OperatorEdit(A, 0.5).scaled(value)
    with pytest.raises(WrongTypeError, match="real number"):
        _lora(encoder, value)
    with pytest.raises(WrongTypeError, match="real number"):
        TaskVector({"w": torch.zeros(2)}).apply_to(encoder.media_encoder, value)
    with pytest.raises(TypeError):
        TaskVector({"w": torch.zeros(2)}) * value
    with pytest.raises(TypeError):
        utd * value
    with pytest.raises(WrongTypeError):
        Term(utd, value)
    assert _same(encoder, before)


def test_numpy_and_python_reals_are_accepted(encoder):
    for value in (0.5, 1, np.float32(0.5), np.float64(0.5), np.int64(1)):
        assert OperatorEdit(torch.zeros(encoder.embed_dim, encoder.embed_dim), value).strength == float(value)


# -- atomic files -----------------------------------------------------------------------------------
def _temporaries(folder) -> list[str]:
    return [f for f in os.listdir(folder) if f.endswith(".tmp")]


@pytest.mark.parametrize("failure", [KeyboardInterrupt, OSError])
def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch, failure):
    path = tmp_path / "edit.safetensors"
    OperatorEdit(torch.eye(3), 0.5).save(path)
    old = path.read_bytes()
    real_save = safetensors.torch.save_file

    def half_then_fail(tensors, filename, metadata=None):
        real_save(tensors, filename, metadata=metadata)
        with open(filename, "r+b") as fh:
            fh.truncate(os.path.getsize(filename) // 2)  # a partly written file, as a kill would leave
        raise failure("interrupted")

    monkeypatch.setattr(safetensors.torch, "save_file", half_then_fail)
    with pytest.raises(failure):
        OperatorEdit(2 * torch.eye(3), 0.5).save(path)
    assert path.read_bytes() == old and _temporaries(tmp_path) == []
    with pytest.raises(failure):
        save_tensors(tmp_path / "new.safetensors", {"x": torch.zeros(2)}, "x", {})
    assert not (tmp_path / "new.safetensors").exists() and _temporaries(tmp_path) == []
    monkeypatch.undo()
    OperatorEdit(2 * torch.eye(3), 0.5).save(path)
    assert torch.equal(Edit.load(path).operator, 2 * torch.eye(3))


def test_text_writes_are_atomic_too(tmp_path, monkeypatch):
    path = tmp_path / "platonic.json"
    write_text(path, "old")

    def fail(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(KeyboardInterrupt):
        write_text(path, "new")
    assert path.read_text() == "old" and _temporaries(tmp_path) == []


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_files_respect_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        save_tensors(tmp_path / "t.safetensors", {"x": torch.zeros(2)}, "x", {})
        write_text(tmp_path / "t.json", "{}")
    finally:
        os.umask(old)
    for name in ("t.safetensors", "t.json"):
        assert os.stat(tmp_path / name).st_mode & 0o777 == 0o666 & ~umask, name
    tensors, _, kind = load_tensors(tmp_path / "t.safetensors")
    assert kind == "x" and torch.equal(tensors["x"], torch.zeros(2))
