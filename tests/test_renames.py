"""Renamed public names: the new spelling works, the old one still works for one release with a
DeprecationWarning that names the new one, passing both is refused, and files written under the old
names still load."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from platonic_sdk.errors import PlatonicError
from platonic_sdk.evaluate.features import FeatureCache
from platonic_sdk.io import save_tensors
from platonic_sdk.linalg import ridge_solver
from platonic_sdk.transfer.closed_form import GridState

from grid_zoo import TASKS, build_workspace


def _rows(seed: int = 0, n: int = 6, d: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=gen), torch.randn(n, d, generator=gen)


def test_feature_cache_descriptive_names_and_deprecated_letters():
    s, z = _rows()
    cache = FeatureCache(site_inputs=s, raw_embeddings=z, labels=np.arange(6) % 2)
    with pytest.warns(DeprecationWarning, match=r"FeatureCache\.S is deprecated.*use \.site_inputs"):
        assert cache.S is s
    with pytest.warns(DeprecationWarning, match=r"use \.raw_embeddings"):
        assert cache.Z is z
    with pytest.warns(DeprecationWarning, match=r"S=\).*use site_inputs="):
        old = FeatureCache(S=s, Z=z, labels=np.zeros(6))
    assert old.site_inputs is s and old.raw_embeddings is z
    with pytest.raises(TypeError, match="site_inputs= only"):
        FeatureCache(site_inputs=s, raw_embeddings=z, labels=np.zeros(6), S=s)


def test_feature_cache_file_with_the_old_tensor_names_loads(tmp_path):
    s, z = _rows(1)
    save_tensors(tmp_path / "old.safetensors", {"S": s, "Z": z, "labels": torch.arange(6)}, "feature_cache", {})
    old = FeatureCache.load(tmp_path / "old.safetensors")
    assert torch.equal(old.site_inputs, s) and torch.equal(old.raw_embeddings, z)
    old.save(tmp_path / "new.safetensors")
    new = FeatureCache.load(tmp_path / "new.safetensors")
    assert torch.equal(new.site_inputs, s) and torch.equal(new.raw_embeddings, z) and list(new.labels) == list(range(6))


def test_grid_state_descriptive_names_and_deprecated_letters():
    s, z = _rows(2)
    g = torch.randn(3, 4, generator=torch.Generator().manual_seed(3))
    rows = s / z.norm(dim=1, keepdim=True)
    state = GridState(None, s, z, g, ridge_solver(rows, g))
    torch.testing.assert_close(state.solve_rows, rows)  # s / ||z||, computed independently above
    for old, new in (("S", "site_inputs"), ("Z", "raw_embeddings"), ("G", "landmarks"), ("F", "solve_rows")):
        with pytest.warns(DeprecationWarning, match=rf"GridState\.{old} is deprecated.*\.{new}"):
            assert torch.equal(getattr(state, old), getattr(state, new))


@pytest.fixture(scope="module")
def ws():
    return build_workspace()


def test_workspace_landmarks_and_deprecated_head(ws):
    landmarks = ws.landmarks("clip", TASKS[0])
    assert landmarks.shape[0] == len(ws.tasks[TASKS[0]].classnames)
    with pytest.warns(DeprecationWarning, match=r"Workspace\.head is deprecated.*\.landmarks"):
        assert ws.head("clip", TASKS[0]) is landmarks


def test_cell_settings_strength_names_and_deprecated_keywords():
    from platonic_sdk.evaluate.settings import CellSettings, ExperimentConfig

    new = CellSettings(addition_strength=0.7, negation_strength=0.9, weight_space_strength=0.3)
    assert (new.strength_of("addition"), new.strength_of("negation")) == (0.7, 0.9)
    with pytest.warns(DeprecationWarning) as caught:
        old = CellSettings(alpha=0.7, strength=0.9, weight_space_coef=0.3)
    assert old == new and len(caught) == 3
    assert {"addition_strength", "negation_strength", "weight_space_strength"} <= set(new.as_dict())
    assert not {"alpha", "strength", "weight_space_coef"} & set(new.as_dict())  # run.json records the new names
    for name, value in (("alpha", 0.7), ("strength", 0.9), ("weight_space_coef", 0.3)):
        with pytest.warns(DeprecationWarning, match=rf"CellSettings\.{name} is deprecated"):
            assert getattr(new, name) == value
    with pytest.warns(DeprecationWarning, match="sweep_strengths="):
        config = ExperimentConfig(sweep_alphas=(0.0, 1.0))
    assert config.sweep_strengths == (0.0, 1.0)
    with pytest.raises(TypeError, match="addition_strength= only"):
        CellSettings(alpha=0.1, addition_strength=0.2)


def test_operator_edit_strength_and_files_that_say_alpha(tmp_path):
    from platonic_sdk.edits.edit import Edit, OperatorEdit

    A = torch.eye(3)
    with pytest.warns(DeprecationWarning, match="use strength="):
        edit = OperatorEdit(A, alpha=0.3)
    assert edit.strength == 0.3 and edit.metadata()["strength"] == 0.3 and "alpha" not in edit.metadata()
    with pytest.warns(DeprecationWarning, match=r"OperatorEdit\.alpha is deprecated"):
        assert edit.alpha == 0.3
    with pytest.warns(DeprecationWarning):
        assert edit.scaled(alpha=0.6).strength == 0.6
    save_tensors(tmp_path / "old.safetensors", {"operator": A}, "operator_edit", {"alpha": 0.7, "site_kind": "projection"})
    assert Edit.load(tmp_path / "old.safetensors").strength == 0.7  # written before the rename
    edit.save(tmp_path / "new.safetensors")
    assert Edit.load(tmp_path / "new.safetensors").strength == 0.3


def test_cli_keeps_the_old_strength_options_for_one_release(capsys, tmp_path):
    from platonic_sdk import cli

    parser = cli.build_parser()
    args = parser.parse_args(["grid", "--out", "x", "--alpha", "0.7", "--strength", "0.8", "--weight-space-coef", "0.2",
                              "--sweep-alphas", "0", "1"])
    assert (args.addition_strength, args.negation_strength, args.weight_space_strength, args.sweep_strengths) == (0.7, 0.8, 0.2, [0.0, 1.0])
    err = capsys.readouterr().err
    for old, new in (("--alpha", "--addition-strength"), ("--strength", "--negation-strength"),
                     ("--weight-space-coef", "--weight-space-strength"), ("--sweep-alphas", "--sweep-strengths")):
        assert f"warning: {old} is deprecated and will be removed in the next release; use {new}" in err
    edit = parser.parse_args(["edit", "--alpha", "0.4"])
    assert edit.strength == 0.4 and "use --strength" in capsys.readouterr().err
    assert parser.parse_args(["edit"]).strength == 0.5 and not capsys.readouterr().err
    help_text = cli._subparser(parser, "grid").format_help()
    assert "--addition-strength" in help_text and "--alpha" not in help_text and "--weight-space-coef" not in help_text
    (tmp_path / "run.toml").write_text("[grid]\nalpha = 0.6\nsweep_alphas = [0.0, 2.0]\n[edit]\nalpha = 0.3\n")
    grid = cli.apply_config(parser, ["grid", "--config", str(tmp_path / "run.toml")], parser.parse_args(["grid", "--config", str(tmp_path / "run.toml")]))
    assert (grid.addition_strength, grid.sweep_strengths) == (0.6, [0.0, 2.0])
    assert "config key alpha is deprecated" in capsys.readouterr().err
    parser = cli.build_parser()
    edit = cli.apply_config(parser, ["edit", "--config", str(tmp_path / "run.toml")], parser.parse_args(["edit", "--config", str(tmp_path / "run.toml")]))
    assert edit.strength == 0.3 and "use strength" in capsys.readouterr().err


def test_studies_and_workspace_take_the_old_strength_keywords(ws):
    from platonic_sdk.evaluate import studies
    from platonic_sdk.evaluate.cells import negation_cells

    A = ws.operator("clip", "siglip", TASKS[0])
    with pytest.warns(DeprecationWarning, match="use strength="):
        assert ws.accuracy("clip", TASKS[0], A, alpha=0.5) == ws.accuracy("clip", TASKS[0], A, strength=0.5)
    cells = negation_cells(ws)[:1]
    with pytest.warns(DeprecationWarning, match="use strengths="):
        old = studies.strength_sweep(ws, cells, alphas=(0.0, 1.0))
    assert old == studies.strength_sweep(ws, cells, strengths=(0.0, 1.0)) and {r["strength"] for r in old} == {0.0, 1.0}
    with pytest.warns(DeprecationWarning, match="use negation_strength="):
        old = studies.guarantee(ws, cells, strength=0.8)
    assert old[0]["strength"] == 0.8 and old[0]["pooled"] == studies.guarantee(ws, cells, negation_strength=0.8)[0]["pooled"]


def test_orthoreg_penalty_weight_is_not_called_a_coefficient():
    from platonic_sdk.training.orthoreg import OrthoReg

    assert OrthoReg(0.5).weight == 0.5 and OrthoReg(0.5).describe()["weight"] == 0.5
    with pytest.warns(DeprecationWarning, match="use weight="):
        assert OrthoReg(coef=0.5) == OrthoReg(weight=0.5)
    with pytest.warns(DeprecationWarning, match=r"OrthoReg\.coef is deprecated"):
        assert OrthoReg(0.5).coef == 0.5


def test_merge_result_strength_and_its_deprecated_name():
    from platonic_sdk.evaluate.merging import MergeResult
    from platonic_sdk.evaluate.selection import Sweep

    sweep = Sweep((0.0, 0.5), ({"t": 1.0}, {"t": 2.0}), (1.0, 2.0), (True, True), 1)
    with pytest.warns(DeprecationWarning, match="use strength="):
        old = MergeResult(orthoreg=0.0, coef=0.5, sweep=sweep, zero_shot={}, finetuned={}, merged={})
    assert old.strength == 0.5
    with pytest.warns(DeprecationWarning, match=r"MergeResult\.coef is deprecated"):
        assert old.coef == 0.5


def test_a_run_folder_recorded_under_the_old_names_still_resumes(tmp_path):
    import json

    from platonic_sdk.evaluate.runfolder import RunFolder
    from platonic_sdk.evaluate.settings import CellSettings, ExperimentConfig

    settings = {"run": ExperimentConfig().as_dict(), "sdk_version": "x"}
    with RunFolder(tmp_path / "run") as run:
        run.begin(settings)
    path = tmp_path / "run" / "run.json"
    recorded = json.loads(path.read_text())
    old = recorded["settings"]["run"]
    old["settings"]["alpha"] = old["settings"].pop("addition_strength")
    old["settings"]["strength"] = old["settings"].pop("negation_strength")
    old["settings"]["weight_space_coef"] = old["settings"].pop("weight_space_strength")
    old["sweep_alphas"] = old.pop("sweep_strengths")
    path.write_text(json.dumps(recorded))  # what a run folder written before the renames holds
    with RunFolder(tmp_path / "run") as run:
        run.begin(settings)  # resumes: the same settings under today's names
    other = {"run": ExperimentConfig(settings=CellSettings(negation_strength=0.5)).as_dict(), "sdk_version": "x"}
    with RunFolder(tmp_path / "run") as run, pytest.raises(PlatonicError, match=r"run\.settings\.negation_strength: 1\.0 -> 0\.5"):
        run.begin(other)


def test_strength_selection_takes_the_old_coefficient_names():
    from platonic_sdk.evaluate import selection
    from platonic_sdk.evaluate.merging import accuracy_with, addition_study, negation_study, select_extending
    from platonic_sdk.evaluate.selection import DEFAULT_STRENGTHS, Sweep, select_addition, select_negation

    def evaluate(strength: float) -> dict[str, float]:
        return {"t": 10.0 * strength, "control": 50.0}

    new = select_addition(evaluate, {"t": 10.0}, strengths=[0.0, 0.5])
    assert new.strengths == (0.0, 0.5) and new.best == 0.5
    with pytest.warns(DeprecationWarning, match=r"select_addition\(coefs=\) is deprecated.*use strengths="):
        assert select_addition(evaluate, {"t": 10.0}, coefs=[0.0, 0.5]) == new
    with pytest.warns(DeprecationWarning, match=r"select_negation\(coefs=\).*use strengths="):
        old = select_negation(evaluate, "t", "control", 50.0, coefs=[0.0, 0.5])
    assert old == select_negation(evaluate, "t", "control", 50.0, strengths=[0.0, 0.5]) and old.best == 0.0
    with pytest.warns(DeprecationWarning, match=r"select_extending\(coefs=\).*use strengths="):
        assert select_extending(evaluate, {"t": 10.0}, coefs=(0.0, 0.5), extend=0, progress=False) == new
    with pytest.warns(DeprecationWarning, match=r"Sweep\.coefs is deprecated.*use \.strengths"):
        assert new.coefs == (0.0, 0.5)
    with pytest.warns(DeprecationWarning, match="use strengths="):
        assert Sweep(coefs=(0.0, 0.5), results=new.results, scores=new.scores, feasible=new.feasible, best_index=1) == new
    with pytest.warns(DeprecationWarning, match=r"selection\.DEFAULT_COEFS is deprecated.*DEFAULT_STRENGTHS"):
        assert selection.DEFAULT_COEFS is DEFAULT_STRENGTHS
    assert len(DEFAULT_STRENGTHS) == 21 and DEFAULT_STRENGTHS[0] == 0.0 and DEFAULT_STRENGTHS[-1] == 1.0
    with pytest.raises(AttributeError, match="no attribute 'DEFAULT_NOPE'"):
        selection.DEFAULT_NOPE
    with pytest.raises(TypeError, match="strengths= only"):
        select_addition(evaluate, {"t": 10.0}, coefs=[0.0], strengths=[0.5])
    for study in (accuracy_with, addition_study, negation_study):  # refused before any work: no model needed
        with pytest.raises(TypeError, match="= only"):
            study(None, None, None, **({"coef": 1.0, "strength": 1.0} if study is accuracy_with else {"coefs": (0.0,), "strengths": (0.0,)}))


def test_task_vector_strength_and_its_deprecated_coefficient_name():
    from platonic_sdk.finetune.weightspace import AppliedTaskVector, TaskVector

    model = torch.nn.Linear(3, 2, bias=False)
    base = model.weight.detach().clone()
    tau = TaskVector({"weight": torch.ones(2, 3)})
    with tau.apply_to(model, strength=0.25) as handle:
        torch.testing.assert_close(model.weight.detach(), base + 0.25)  # theta + 0.25 tau, by hand
        assert handle.strength == 0.25 and handle.record()["strength"] == 0.25 and "coef" not in handle.record()
        with pytest.warns(DeprecationWarning, match=r"AppliedTaskVector\.coef is deprecated.*use \.strength"):
            assert handle.coef == 0.25
    with pytest.warns(DeprecationWarning, match=r"TaskVector\.apply_to\(coef=\) is deprecated.*use strength="):
        with tau.apply_to(model, coef=0.5):
            torch.testing.assert_close(model.weight.detach(), base + 0.5)
    assert torch.equal(model.weight.detach(), base)
    with pytest.raises(TypeError, match="strength= only"):
        tau.apply_to(model, coef=0.5, strength=0.5)
    assert torch.equal(model.weight.detach(), base)  # refused before anything is written
    with pytest.warns(DeprecationWarning, match="use strength="):
        assert AppliedTaskVector(tau, coef=0.5).strength == 0.5
    with pytest.warns(DeprecationWarning, match=r"TaskVector\.fold_into\(coef=\).*use strength="):
        tau.fold_into(model, coef=2.0)
    torch.testing.assert_close(model.weight.detach(), base + 2.0)
