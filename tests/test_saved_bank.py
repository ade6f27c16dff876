"""Operator bank files: `OperatorBank.save` / `OperatorBank.load` own the format (safetensors, kind
`operator_bank`). Checked against the live bank (the same operators bit for bit, the same edit), against
a file laid out by hand as the CLI wrote it before, and on bad files (each refused with a clear error)."""

import json

import numpy as np
import pytest
import safetensors.torch
import torch

import platonic_sdk as ps
from platonic_sdk.errors import CheckpointError, NonFiniteError, PlatonicError
from platonic_sdk.io import save_tensors
from platonic_sdk.transfer.saved_bank import SavedBank


def _task(name: str, seed: int) -> ps.Task:
    rng = np.random.default_rng(seed)
    classes = ("red circle", "green square", "blue triangle")
    labels = np.arange(12) % 3
    items = [rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8) for _ in range(12)]
    return ps.Task(name, classes, ps.Split(items, labels), ps.Split(items[:3], labels[:3]), templates=("a {}.",))


@pytest.fixture(scope="module", params=["clip", "siglip"])  # a projection site and a residual-head site
def made(request):
    torch.manual_seed(0)
    target = ps.from_config(request.param).eval()
    bank = ps.OperatorBank(target, ridge_a=1e-2, ridge_b=1e-3)
    utds = {}
    for i, name in enumerate(("a", "b")):
        grid = _task(f"task_{name}", i).grid(per_class=2, seed=0)
        bank.add_grid(grid)
        U = 0.05 * torch.randn(grid.shape, generator=torch.Generator().manual_seed(i + 1))
        utds[name] = ps.UTD(U, grid.identity, grid.task, {"seed": i})
    return target, bank, utds


def test_round_trip_keeps_operators_bit_for_bit(made, tmp_path):
    target, bank, utds = made
    bank.save(tmp_path / "bank.safetensors", utds)
    loaded = ps.OperatorBank.load(tmp_path / "bank.safetensors")
    assert list(loaded.operators) == ["a", "b"]
    for name, utd in utds.items():
        assert torch.equal(loaded.operators[name], bank.operator(utd))
        assert loaded.entries[name] == {"task": utd.task, "grid_id": utd.grid_id, "provenance": {"seed": utd.provenance["seed"]},
                                        "space": "affinity"}
    assert (loaded.site_kind, loaded.ridge_a, loaded.ridge_b) == (target.last_affine().kind, 1e-2, 1e-3)
    assert (loaded.target_family, loaded.target_checkpoint) == (target.family, target.checkpoint)
    assert loaded.target == bank.binding


def test_edit_from_a_loaded_bank_equals_the_live_banks(made, tmp_path):
    target, bank, utds = made
    bank.save(tmp_path / "bank.safetensors", utds)
    from_file = ps.OperatorBank.load(tmp_path / "bank.safetensors").edit([("a", 1.0), ("b", -1.0)], strength=0.7)
    live = bank.edit(utds["a"] - utds["b"], strength=0.7)
    assert torch.equal(from_file.operator, live.operator) and from_file.strength == live.strength == 0.7
    batch = target.preprocess(list(np.random.default_rng(9).integers(0, 256, size=(2, 32, 32, 3), dtype=np.uint8)))
    with from_file.applied_to(target):
        a = target.encode_media(batch)
    with live.applied_to(target):
        b = target.encode_media(batch)
    assert torch.equal(a, b)


def test_a_file_the_cli_wrote_before_still_loads(made, tmp_path):
    """The layout `platonic bank` wrote by hand (save_tensors with this metadata) reads back unchanged."""
    target, bank, utds = made
    operators = {name: bank.operator(utd) for name, utd in utds.items()}
    entries = {name: {"task": u.task, "grid_id": u.grid_id, "provenance": u.provenance} for name, u in utds.items()}
    meta = {"target_family": target.family, "target_checkpoint": target.checkpoint, "site_kind": bank.site_kind,
            "ridge_a": bank.ridge_a, "ridge_b": bank.ridge_b, "entries": entries, "target": bank.binding.describe()}
    save_tensors(tmp_path / "old.safetensors", operators, "operator_bank", meta)
    loaded = SavedBank.load(tmp_path / "old.safetensors")
    assert all(torch.equal(loaded.operators[n], operators[n]) for n in operators)
    edit = loaded.edit([("b", 2.0)], strength=0.5)
    assert torch.equal(edit.operator, 2.0 * operators["b"]) and edit.meta["terms"][0]["label"] == "b"
    del meta["target"]  # files from before edits recorded their target
    save_tensors(tmp_path / "older.safetensors", operators, "operator_bank", meta)
    assert SavedBank.load(tmp_path / "older.safetensors").target is None


def _rewrite(path, tensors=None, meta_update=None, drop=()):
    """A copy of a saved bank with tensors or metadata changed, written with safetensors directly."""
    with safetensors.safe_open(str(path), framework="pt") as fh:
        header, saved = dict(fh.metadata()), {k: fh.get_tensor(k) for k in fh.keys()}
    meta = json.loads(header["meta"])
    meta.update(meta_update or {})
    for key in drop:
        meta.pop(key)
    header["meta"] = json.dumps(meta)
    out = path.with_name("changed.safetensors")
    safetensors.torch.save_file(tensors if tensors is not None else saved, str(out), metadata=header)
    return out, saved


def test_bad_files_are_refused(made, tmp_path):
    _, bank, utds = made
    path = tmp_path / "bank.safetensors"
    bank.save(path, utds)
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(path.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="is not a safetensors file, or a damaged one"):
        ps.OperatorBank.load(truncated)
    utds["a"].save(tmp_path / "a.safetensors")
    with pytest.raises(CheckpointError, match="holds a 'utd', expected a 'operator_bank'"):
        ps.OperatorBank.load(tmp_path / "a.safetensors")
    with pytest.raises(CheckpointError, match="no such file"):
        ps.OperatorBank.load(tmp_path / "missing.safetensors")
    _, saved = _rewrite(path)
    nan = {**saved, "a": saved["a"].clone()}
    nan["a"][0, 0] = float("nan")
    with pytest.raises(NonFiniteError, match="operator 'a'"):
        ps.OperatorBank.load(_rewrite(path, tensors=nan)[0])
    with pytest.raises(CheckpointError, match="incomplete operator bank.*site_kind"):
        ps.OperatorBank.load(_rewrite(path, drop=("site_kind",))[0])
    with pytest.raises(CheckpointError, match="operators .* and the entries .* differ"):
        ps.OperatorBank.load(_rewrite(path, tensors={"a": saved["a"]})[0])
    with pytest.raises(CheckpointError, match="matrices of one shape"):
        ps.OperatorBank.load(_rewrite(path, tensors={"a": saved["a"], "b": saved["b"][:-1]})[0])


def test_edit_names_only_saved_operators(made, tmp_path):
    _, bank, utds = made
    bank.save(tmp_path / "bank.safetensors", utds)
    loaded = ps.OperatorBank.load(tmp_path / "bank.safetensors")
    with pytest.raises(PlatonicError, match=r"no operator\(s\) \['c'\]; it holds a, b"):
        loaded.edit([("a", 1.0), ("c", 1.0)])


def test_saving_needs_the_descriptors_grids(made, tmp_path):
    target, _, utds = made
    with pytest.raises(ps.GridMismatchError, match="add_grid"):
        ps.OperatorBank(target).save(tmp_path / "bank.safetensors", utds)
    assert not (tmp_path / "bank.safetensors").exists()
