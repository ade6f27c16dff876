"""Studies, report and plots: guarantee bound (tight case and every record), sweeps, accumulation,
held-out transfer, descriptor similarity against independent computations, and a full run folder."""

from __future__ import annotations

import itertools
import json
import math

import attrs
import numpy as np
import pytest
import torch
from grid_zoo import CONTROL, TASKS, build_workspace

import platonic_sdk as ps
from platonic_sdk.descriptor import UTD
from platonic_sdk.evaluate import accuracy
from platonic_sdk.evaluate.measure import frontier, studies
from platonic_sdk.evaluate.measure.cells import addition_cells, negation_cells
from platonic_sdk.evaluate.measure.guarantee import guarantee_items
from platonic_sdk.evaluate.measure.methods import evaluate_cell
from platonic_sdk.evaluate.measure.similarity import similarity
from platonic_sdk.evaluate.report.render import cells_section, summarise
from platonic_sdk.evaluate.run.runner import run_experiment
from platonic_sdk.evaluate.plan.settings import CellSettings, ExperimentConfig, selections
from platonic_sdk.spaces import SPACES
from platonic_sdk.tasks import Grid


@pytest.fixture(scope="module")
def ws():
    return build_workspace()


def _unit(degrees):
    rad = np.deg2rad(np.asarray(degrees, dtype=float))
    return torch.tensor(np.stack([np.cos(rad), np.sin(rad)], 1))


def test_guarantee_bound_is_tight_on_a_constructed_case():
    # landmarks e1 (class 0) and e2 (class 1); all items are class 0.
    # far items at 10 deg turn by 5 deg: margin cos10 - sin10 = 0.81 > 2 * 2 sin(2.5 deg) = 0.17 (guaranteed);
    # near items at 40 deg turn by 10 deg to 50 deg: margin 0.12 < 0.35, and every one of them flips.
    before = _unit([10] * 6 + [40] * 4)
    after = _unit([15] * 6 + [50] * 4)
    g = torch.eye(2, dtype=torch.float64)
    summary = guarantee_items(before, after, g, np.zeros(10, dtype=int)).summary()
    assert summary["guaranteed"] == pytest.approx(60.0)
    assert summary["changed"] == pytest.approx(40.0)
    assert summary["bound"] == pytest.approx(40.0)
    assert summary["lost"] == pytest.approx(summary["bound"]) == pytest.approx(summary["observed_loss"])
    assert summary["violations"] == 0


def test_guarantee_never_violated_on_random_edits():
    gen = torch.Generator().manual_seed(0)
    f = torch.randn(2000, 8, generator=gen, dtype=torch.float64)
    g = torch.randn(5, 8, generator=gen, dtype=torch.float64)
    scale = torch.logspace(-3, 0, 2000, dtype=torch.float64)[:, None]
    items = guarantee_items(f, f + scale * torch.randn(2000, 8, generator=gen, dtype=torch.float64), g, torch.randint(0, 5, (2000,), generator=gen))
    s = items.summary()
    assert not (items.guaranteed & items.changed).any()
    assert 0 < s["guaranteed"] < 100 and s["changed"] > 0 and s["lost"] <= s["bound"]
    with pytest.raises(ps.ShapeError):
        guarantee_items(f, f[:, :4], g, np.zeros(2000))


def test_guarantee_holds_on_every_grid_record(ws):
    cells = addition_cells(ws)[:6] + negation_cells(ws)[:4]
    records = studies.guarantee(ws, cells, addition_strength=2.0, negation_strength=2.0)  # large strengths: many changes
    assert sum(r["pooled"]["changed"] for r in records) > 0
    for r in records:
        for s in [r["pooled"], *r["per_set"].values()]:
            assert s["violations"] == 0 and s["lost"] <= s["bound"] + 1e-9 and s["observed_loss"] <= s["bound"] + 1e-9
        assert r["pooled"]["items"] == sum(len(ws.tasks[n].test) for n in r["per_set"])


def test_strength_sweep_matches_each_method_at_each_strength(ws):
    cells = addition_cells(ws)[:2] + negation_cells(ws)[:2]
    methods = ("closed_form", "closed_form_affinity", "random_utd", "oracle", "label_reference", "single_a")
    sweep = studies.strength_sweep(ws, cells, strengths=(0.0, 0.5, 1.0), methods=methods)
    at = {c: {cell.key: evaluate_cell(ws, cell, CellSettings(addition_strength=c, negation_strength=c, strength_rule="fixed"), methods=("zero_shot", *methods))
              for cell in cells} for c in (0.5, 1.0)}
    assert {(r["key"], r["method"]) for r in sweep} == {(c.key, m) for c in cells for m in methods if m != "single_a" or c.kind == "addition"}
    for r in sweep:
        cell = at[1.0][r["key"]]
        assert r["zero_shot"] == pytest.approx(cell["results"]["zero_shot"])
        assert r["controls"] == [CONTROL] and r["tasks"] == list(cell["tasks"])
        assert r["others"] == [t for t in TASKS if t not in r["tasks"]] == cell["others"]  # the kept transfer tasks
        for name, values in r["accuracy"].items():  # every evaluation set, each control set its own figure
            assert values[0] == pytest.approx(r["zero_shot"][name])
            assert values[1:] == pytest.approx([at[c][r["key"]]["results"][r["method"]][name] for c in (0.5, 1.0)])
    # the worst kept set's curve of one method (control sets and other tasks alike), from the records by hand
    found = frontier.curve(sweep, "closed_form", "negation", "cross-family")
    own = [r for r in sweep if r["method"] == "closed_form" and r["kind"] == "negation"]

    def worst(i: int, kept: tuple[str, ...]) -> float:
        drops: dict[str, list[float]] = {}
        for r in own:
            for name in (n for field in kept for n in r[field]):
                drops.setdefault(name, []).append(r["zero_shot"][name] - r["accuracy"][name][i])
        return max(np.mean(v) for v in drops.values())
    assert found.worst_drop == pytest.approx([worst(i, ("controls", "others")) for i in range(3)])
    controls = frontier.curve(sweep, "closed_form", "negation", "cross-family", damage=("controls",))  # the switch back
    assert controls.worst_drop == pytest.approx([np.mean([r["zero_shot"][CONTROL] - r["accuracy"][CONTROL][i] for r in own]) for i in range(3)])
    assert found.worst_drop[-1] > controls.worst_drop[-1]  # here an other task pays more than the control set
    assert found.gain == pytest.approx([np.mean([r["zero_shot"][r["tasks"][0]] - r["accuracy"][r["tasks"][0]][i] for r in own])
                                        for i in range(3)])


def test_accumulation_schedules_and_normalisation(ws):
    records = studies.accumulation(ws, "siglip", TASKS, strength=0.8)
    assert [(r["J"], r["schedule"]) for r in records] == [(J, s) for J in (1, 2, 3) for s in ("fixed", "divided")]
    r2 = next(r for r in records if r["J"] == 2 and r["schedule"] == "divided")
    A = sum(ws.operator("siglip", s, t) for s, t in zip(r2["sources"], TASKS[:2]))
    assert all(s != "siglip" for s in r2["sources"])
    expected = [ws.eval_set("siglip", t).accuracy(ws.landmarks("siglip", t), A / 2, 0.8) for t in TASKS[:2]]
    assert r2["mean_accuracy"] == pytest.approx(np.mean(expected))
    own = [accuracy(ws.finetuned[("siglip", t)], ws.tasks[t]) for t in TASKS[:2]]
    assert r2["mean_normalised"] == pytest.approx(np.mean([100 * a / o for a, o in zip(expected, own)]))
    assert records[0]["mean_accuracy"] == records[1]["mean_accuracy"]  # J = 1: strength / J = strength


def test_held_out_covers_every_cross_source_pair(ws):
    records = studies.held_out(ws, "clip", TASKS[:2], TASKS[2], strength=0.5)
    sources = [s for s in ws.families if s != "clip"]
    assert sorted(tuple(r["sources"]) for r in records) == sorted(itertools.product(sources, sources))
    r = records[0]
    A = sum(ws.operator("clip", s, t) for s, t in zip(r["sources"], TASKS[:2]))
    assert r["closed_form"][TASKS[2]] == pytest.approx(ws.eval_set("clip", TASKS[2]).accuracy(ws.landmarks("clip", TASKS[2]), A, 0.5))
    with pytest.raises(ps.PlatonicError):
        studies.held_out(ws, "clip", TASKS[:2], TASKS[0])


def test_similarity_against_descriptors_computed_from_scratch(ws, monkeypatch, capsys):
    fams = ("clip", "siglip")
    result = similarity(ws, fams, TASKS[:2])
    assert np.allclose(result.matrix, result.matrix.T) and np.allclose(np.diag(result.matrix), 1)
    union = Grid.union([ws.grid(t) for t in TASKS[:2]])
    fresh = {(f, t): UTD.compute(ws.models[f], ws.finetuned[(f, t)], union, space="affinity") for t in TASKS[:2] for f in fams}
    for (i, a), (j, b) in itertools.combinations(enumerate(result.labels), 2):
        assert result.matrix[i, j] == pytest.approx(fresh[a].cosine(fresh[b]), abs=1e-5)
    own = [
        UTD.compute(ws.models["clip"], ws.finetuned[("clip", t)], ws.grid(t), space="affinity").cosine(
            UTD.compute(ws.models["siglip"], ws.finetuned[("siglip", t)], ws.grid(t), space="affinity"))
        for t in TASKS[:2]
    ]
    assert result.same_task_cross_model == pytest.approx(np.mean(own), abs=1e-5)
    same_model = [fresh[(f, TASKS[0])].cosine(fresh[(f, TASKS[1])]) for f in fams]
    assert result.same_model_cross_task == pytest.approx(np.mean(same_model), abs=1e-5)
    # centred: own grids row-centred; union rows centred within each task's columns (hand loops)
    def block_centred(u: UTD) -> torch.Tensor:
        out, start = u.matrix.clone(), 0
        for t in TASKS[:2]:
            width = len(ws.grid(t).prompts)
            for i in range(out.shape[0]):
                out[i, start:start + width] -= u.matrix[i, start:start + width].sum() / width
            start += width
        return out
    cos = lambda a, b: float((a * b).sum() / (a.norm() * b.norm()))  # noqa: E731
    centred_own = []
    for t in TASKS[:2]:
        a, b = (UTD.compute(ws.models[f], ws.finetuned[(f, t)], ws.grid(t), space="affinity").matrix for f in fams)
        centred_own.append(cos(a - a.mean(1, keepdim=True), b - b.mean(1, keepdim=True)))
    assert result.centred_same_task_cross_model == pytest.approx(np.mean(centred_own), abs=1e-5)
    centred_model = [cos(block_centred(fresh[(f, TASKS[0])]), block_centred(fresh[(f, TASKS[1])])) for f in fams]
    assert result.centred_same_model_cross_task == pytest.approx(np.mean(centred_model), abs=1e-5)
    assert result.as_dict()["centred_ratio"] == pytest.approx(np.mean(centred_own) / np.mean(centred_model), rel=1e-4)
    # a capped union: the first k probes of each grid
    k = 5
    monkeypatch.setattr("platonic_sdk.progress.MIN_SECONDS", 0.0)  # every stage prints its line (stderr is not a terminal)
    capped = similarity(ws, fams, TASKS[:2], union_probes=k, progress=True)
    assert capsys.readouterr().err.splitlines()[-1].startswith("similarity: union-grid descriptors: 4/4 in ")  # its closing line
    heads = [Grid(g.task, g.probe_ids[:k], g.prompts, g.items[:k]) for g in (ws.grid(t) for t in TASKS[:2])]
    small = {(f, t): UTD.compute(ws.models[f], ws.finetuned[(f, t)], Grid.union(heads), space="affinity") for t in TASKS[:2] for f in fams}
    for (i, a), (j, b) in itertools.combinations(enumerate(capped.labels), 2):
        assert capped.matrix[i, j] == pytest.approx(small[a].cosine(small[b]), abs=1e-5)


def test_report_table_layout_and_means(ws):
    records = [evaluate_cell(ws, c, CellSettings(strength_rule="fixed")) for c in addition_cells(ws)[:4]]
    summary = {"addition": summarise(records, "addition")}
    lines = cells_section(summary, "addition", "cross-family", 0.5).splitlines()
    assert lines[0] == "## Two-task addition, cross-family, strength 0.5 (4 cells)"
    assert lines[2] == (f"| method | task A | task B | {CONTROL} | control mean | worst other task's drop (points) | worst other task | "
                        "share of labelled reference | cells |")
    ours = next(line for line in lines if line.startswith("| closed form |"))
    mean = lambda m, slot: np.mean([r["results"][m][r["tasks"][slot]] for r in records])  # noqa: E731
    expected, control = mean("closed_form", 1), np.mean([r["results"]["closed_form"][CONTROL] for r in records])
    # the worst other task: per transfer task, its mean drop over the cells that do not edit it, by hand
    drops = {t: np.mean([r["results"]["zero_shot"][t] - r["results"]["closed_form"][t] for r in records if t not in r["tasks"]])
             for t in TASKS if any(t not in r["tasks"] for r in records)}
    other = max(drops, key=drops.get)
    # the share: the closed form's gain on tasks A and B over the labelled reference's, by hand
    gain = lambda m: sum(mean(m, slot) - mean("zero_shot", slot) for slot in (0, 1))  # noqa: E731
    share = f"{gain('closed_form') / gain('label_reference'):.0%}"
    assert [v.strip() for v in ours.split("|")[3:10]] == [f"{expected:.2f}", f"{control:.2f}", f"{control:.2f}", f"{drops[other]:.2f}",
                                                          other, share, "4"]


def test_the_cell_table_gives_the_strengths_the_rule_chose(ws):
    """Under a strength rule every closed-form record holds its cell's strength; the table gives their mean and range."""
    records = [evaluate_cell(ws, c) for c in addition_cells(ws)[:4]]  # the default rule
    chosen = [r["results"]["closed_form"]["strength"] for r in records]
    assert all("strength" not in r["results"][m] for r in records for m in ("zero_shot", "random_utd", "single_a"))  # fixed ones
    summary = {"addition": summarise(records, "addition")}
    ours = next(line for line in cells_section(summary, "addition", "cross-family", 0.5, rule=CellSettings().strength_rule).splitlines()
                if line.startswith("| closed form |"))
    assert ours.split("|")[2].strip() == f"auto, per cell: mean {np.mean(chosen):.2f} ({min(chosen):.2f} to {max(chosen):.2f})"


def test_run_folder_has_report_and_readable_figures(ws, tmp_path):
    config = ExperimentConfig(cells=selections(max_cells=4), held_out=(TASKS[0], TASKS[1], TASKS[2]), sweep_strengths=(0.0, 1.0), sweep_cells=3)
    summary = run_experiment(ws, tmp_path, config, {"seed": 0})
    report = (tmp_path / "report.md").read_text()
    for heading in ("## Two-task addition", "## Negation", "## Strength sweep", "## Frontiers", "### Addition, cross-family", "## Accumulation",
                    "## Held-out transfer", "## Guarantee diagnostic", "## Descriptor similarity", "## Per task", "| seed | 0 |"):
        assert heading in report
    assert "holds on every record" in report and "| cell records | 8 cells from 8 passes (a pass runs one cell with a set of methods): all run fresh, none resumed |" in report
    assert set(summary["figures"]) == {"scatter", "sweep", "frontier", "accumulation", "similarity", "per_task"}
    for rel in summary["figures"].values():
        data = (tmp_path / rel).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
        assert f"]({rel})" in report
    assert summary["cells"]["records"] == 8 and math.isfinite(summary["timings"]["total"])
    assert json.loads((tmp_path / "report.json").read_text())["checks"] == summary["checks"]
    cells = [json.loads(line) for line in (tmp_path / "cells.jsonl").read_text().splitlines()]
    swept = json.loads((tmp_path / "studies.json").read_text())["sweep"]
    for kind in ("addition", "negation"):  # 3 of 4 cells, evenly spaced: the first and the last among them
        keys = [c["key"] for c in cells if c["kind"] == kind]
        chosen = list(dict.fromkeys(r["key"] for r in swept if r["kind"] == kind))
        assert len(chosen) == 3 and chosen[0] == keys[0] and chosen[-1] == keys[-1]


def test_the_sweep_runs_each_descriptor_method_once_and_a_capped_one_only_where_it_runs():
    config = ExperimentConfig()
    assert "closed_form" in config.swept() and f"closed_form_{config.settings.space}" not in config.swept()  # closed_form itself
    others = {f"closed_form_{s}" for s in SPACES if s != config.settings.space}
    assert {"oracle", "label_reference", "random_utd", "alignment", *others} <= set(config.swept())
    assert "lora" not in config.swept()  # on request only (it fits again and re-encodes per strength)
    asked = ExperimentConfig(sweep_methods=(*config.sweep_methods, "lora"), settings=CellSettings(space="affinity"))
    assert "lora" not in asked.swept()  # asked for, but the LoRA route is not among the run's methods
    with_lora = attrs.evolve(asked, methods=(*config.methods, "lora"))
    assert "lora" in with_lora.swept() and "closed_form_affinity" not in with_lora.swept() and "closed_form_blend" in with_lora.swept()
    with pytest.raises(ps.PlatonicError, match="closed_form_nowhere"):
        ExperimentConfig(sweep_methods=("closed_form_nowhere",))
