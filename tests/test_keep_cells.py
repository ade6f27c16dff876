"""Experiments give the strength rule what a user would have (issue 33 item 4): with keep "labels" a cell's edit spends a
budget on the labelled train splits of the controls and the other transfer tasks (OperatorBank.strength_choice), damage
is the worst drop over every kept set (control sets and other tasks alike), the records list both kinds, and the
settings reach CellSettings from Python, the command line and a world's manifest; on the tiny grid zoo, against
computations by hand."""

from __future__ import annotations

import itertools
import json
import warnings

import numpy as np
import pytest
from grid_zoo import CONTROL, TASKS, build_workspace

from platonic_sdk.cli import parser as cli_parser
from platonic_sdk.cli.checks import check
from platonic_sdk.cli.demo import demo_settings
from platonic_sdk.cli.grid import grid_settings
from platonic_sdk.data.keep import KeepSet
from platonic_sdk.errors import PlatonicError
from platonic_sdk.evaluate.measure import frontier
from platonic_sdk.evaluate.measure.cells import addition_cells, cell_solve, negation_cells
from platonic_sdk.evaluate.measure.methods import evaluate_cell
from platonic_sdk.evaluate.plan.demo import demo_config
from platonic_sdk.evaluate.plan.grid_settings import GridSettings
from platonic_sdk.evaluate.plan.settings import CellSettings, ExperimentConfig, selections
from platonic_sdk.evaluate.report.render import summarise
from platonic_sdk.evaluate.report.summary import damage_words
from platonic_sdk.evaluate.run.runner import run_experiment
from platonic_sdk.strength import DEFAULT_STRENGTH_RULE
from platonic_sdk.worlds.registry import world_spec
from platonic_sdk.zoo_settings import MANIFEST

WIDE = {"addition_budget": 10.0, "negation_budget": 10.0, "confidence": 0.7}  # 18 items read one flip within 10 points: every set here


@pytest.fixture(scope="module")
def ws():
    return build_workspace()


def by_hand(ws, cell, settings: CellSettings):
    """The cell's signed operator and composition, and its labelled keep sets gathered from the tasks themselves: the
    control's and every other transfer task's train split."""
    sign = 1.0 if cell.kind == "addition" else -1.0
    terms = list(zip(cell.sources, cell.tasks))
    A = sign * sum(ws.operator(cell.target, s, t, **cell_solve(ws, cell, settings, t)) for s, t in terms)
    descriptors = [sign * ws.descriptor(s, t, settings.space) for s, t in terms]
    keep = [KeepSet.from_task(ws.tasks[n], "train") for n in (CONTROL, *(t for t in TASKS if t not in cell.tasks))]
    return A, sum(descriptors[1:], descriptors[0]), keep


@pytest.mark.parametrize("kind", ["addition", "negation"])
def test_a_cells_strength_under_labels_is_the_banks_choice_on_the_keep_sets_by_hand(ws, kind):
    settings = CellSettings(keep="labels", **WIDE)
    cell = next(c for c in (addition_cells(ws) if kind == "addition" else negation_cells(ws)) if c.target == "siglip")
    A, descriptor, keep = by_hand(ws, cell, settings)
    strength, record = ws.bank(cell.target).strength_choice(descriptor, A, "auto", settings.centres(kind), keep=keep,
                                                            budget=10.0, confidence=0.7)
    assert [k["task"] for k in record["kept"]] == [CONTROL, *(t for t in TASKS if t not in cell.tasks)]
    assert all(k["labelled"] and "bound" in k and k["source"] == "train" for k in record["kept"]) and record["budget"] == 10.0
    result = evaluate_cell(ws, cell, settings, ["zero_shot", "closed_form"])
    ours = dict(result["results"]["closed_form"])
    assert ours.pop("strength") == strength
    names = [*cell.tasks, CONTROL, *(t for t in TASKS if t not in cell.tasks)]
    assert ours == pytest.approx({n: ws.accuracy(cell.target, n, A, strength) for n in names}, abs=1e-9)
    # without labels the rule reads the other tasks' probes: another strength
    probes = evaluate_cell(ws, cell, CellSettings(), ["closed_form"])["results"]["closed_form"]["strength"]
    assert probes != pytest.approx(strength)


def test_damage_is_the_worst_drop_over_the_controls_and_the_other_tasks(ws):
    """At a fixed strength, each kept set's mean drop over the cells that keep it, by hand from operators folded on the
    test features; the frontier point's and the report's worst sets are those, the worst control set and the worst other
    task each on its own."""
    settings = CellSettings(strength_rule="fixed", centre=(), anchor=(), space="affinity", addition_strength=1.0)
    on = [c for c in addition_cells(ws) if c.target == "siglip"]
    cells = [next(c for c in on if set(c.tasks) == set(pair)) for pair in itertools.combinations(TASKS, 2)]  # each task kept once
    records = [evaluate_cell(ws, c, settings, ["zero_shot", "closed_form"]) for c in cells]
    drops: dict[str, list[float]] = {}
    for cell, record in zip(cells, records):
        assert (record["controls"], record["others"]) == ([CONTROL], [t for t in TASKS if t not in cell.tasks])
        A = sum(ws.operator(cell.target, s, t, space="affinity") for s, t in zip(cell.sources, cell.tasks))
        for name in (CONTROL, *(t for t in TASKS if t not in cell.tasks)):
            cache, G = ws.eval_set(cell.target, name), ws.landmarks(cell.target, name)
            G = G / G.norm(dim=1, keepdim=True)  # argmax_j <z, g_j> / |g_j|: the norm of z moves no argmax
            right = lambda Z: ((Z @ G.T).argmax(dim=1).numpy() == cache.labels).mean()  # noqa: E731
            before, after = right(cache.raw_embeddings), right(cache.raw_embeddings + 1.0 * cache.site_inputs @ A.T)
            drops.setdefault(name, []).append(100 * (before - after))
    mean = {n: float(np.mean(v)) for n, v in drops.items()}
    worst = max(mean, key=mean.get)
    point = frontier.point([frontier.outcome(r, "closed_form") for r in records], "addition")
    assert point.drops == pytest.approx(mean) and point.worst() == (pytest.approx(mean[worst]), worst)
    entry = summarise(records, "addition")
    assert {t: entry["zero_shot"]["others"][t] - entry["closed_form"]["others"][t] for t in entry["closed_form"]["others"]} == (
        pytest.approx({t: d for t, d in mean.items() if t != CONTROL}))
    other = max((t for t in mean if t != CONTROL), key=mean.get)
    words = damage_words(entry, "addition")
    assert mean[CONTROL] > 0 and mean[other] > 0  # both kinds pay here
    assert words.startswith(f"additions: {mean[CONTROL]:.2f} points on {CONTROL}") and words.endswith(
        f", and {mean[other]:.2f} points on the other task {other}")


def test_the_runs_point_and_tables_show_the_worst_control_set_and_the_worst_other_task(ws, tmp_path):
    settings = CellSettings(keep="labels", **WIDE)
    config = ExperimentConfig(cells=selections(max_cells=3), settings=settings, methods=("zero_shot", "closed_form", "oracle"),
                              sweep_strengths=(0.0, 0.5, 1.0), sweep_cells=3, sweep_methods=("closed_form",), accumulation=False,
                              guarantee=False, similarity=False)
    summary = run_experiment(ws, tmp_path, config)
    records = [json.loads(line) for line in (tmp_path / "cells.jsonl").read_text().splitlines()]
    chosen = [r["results"]["closed_form"]["strength"] for r in records if r["kind"] == "addition"]
    assert summary["addition"]["closed_form"]["strength"] == pytest.approx(np.mean(chosen))
    assert summary["addition"]["closed_form"]["strength_range"] == pytest.approx([min(chosen), max(chosen)])
    point = summary["frontier"]["addition"]["closed_form"]["point"]
    assert set(point["damage"]) == {"controls", "others"} and point["damage"]["controls"][1] == CONTROL
    assert point["worst_drop"] == pytest.approx(max(point["damage"]["controls"][0], point["damage"]["others"][0]))
    report = (tmp_path / "report.md").read_text()
    assert "worst other task's drop there" in report and "worst control set's drop there" in report
    assert "spending a budget of 10.0 addition / 10.0 negation points on the labelled train splits" in report
    assert f"additions {np.mean(chosen):.2f} on average ({min(chosen):.2f} to {max(chosen):.2f} over the cells)" in report
    assert "| keep | labels: the strength rule spends the budgets on the labelled train splits" in report
    assert "- **keep labels**:" in report and "- **other task**:" in report  # the glossary says what they are


def test_the_banks_warnings_come_once_each(ws):
    """At 3 points the tiny tasks are too small to read with labels: the bank says so for each cell, the run once per message."""
    settings = CellSettings(keep="labels", addition_budget=3.0, negation_budget=3.0)
    cells = [c for c in addition_cells(ws) if c.target == "clip"]
    fresh = build_workspace(ws.models, ws.tasks)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for cell in cells + cells:
            evaluate_cell(fresh, cell, settings, ["closed_form"])
    said = [str(w.message) for w in caught if "too few labelled items" in str(w.message)]
    assert said and len(said) == len(set(said))  # every distinct message, each once
    assert len(set(said)) == len({tuple(t for t in TASKS if t not in c.tasks) for c in cells})  # one per set of small kept tasks


@pytest.mark.parametrize("settings, words", [
    (dict(keep="labels", strength_rule="fixed"), "keep labels spends a budget through the default strength rule (auto); "
                                                 "strength_rule: the fixed strengths read no keep set"),
    (dict(keep="labels", strength_rule="prediction_share"), "strength_rule: rule prediction_share reads no labels"),
    (dict(keep="probes", addition_budget=2.0), "addition_budget: spent on labelled keep sets, which keep probes does not read; give keep labels"),
    (dict(keep="labels", confidence=0.5), "confidence is a probability between 0.5 and 1"),
    (dict(keep="labels", negation_budget=0.0), "a budget is the accuracy points a kept set may lose"),
    (dict(keep="labels", addition_budget=float("nan")), "a budget must be a finite number"),
    (dict(keep="label"), "keep is 'probes' or 'labels'"),
])
def test_settings_a_keep_set_cannot_read_are_refused_in_one_line(settings, words):
    with pytest.raises(PlatonicError) as error:
        CellSettings(**settings)
    assert words in str(error.value) and "\n" not in str(error.value)


def _args(*argv: str):
    return cli_parser.parse(cli_parser.build_parser(), list(argv))


def test_the_flags_reach_the_cell_settings_and_the_worlds_budgets_fill_the_rest(tmp_path):
    world = {"addition_strength": 0.5, "negation_strength": 1.0, "addition_budget": 3.0, "negation_budget": 5.0}
    given = grid_settings(_args("grid", "--keep", "labels", "--addition-budget", "2", "--confidence", "0.8", "--out", "run"))
    cells = given.cell_settings(world)
    assert (cells.keep, cells.strength_rule, cells.addition_budget, cells.negation_budget, cells.confidence) == (
        "labels", DEFAULT_STRENGTH_RULE, 2.0, 5.0, 0.8)  # the world's negation budget where none is given
    # the default keeps labels (round 4 of docs/method.md sec. 15.1) and spends the world's budgets; probes reads none
    assert grid_settings(_args("grid", "--out", "run")).cell_settings(world) == CellSettings(addition_budget=3.0, negation_budget=5.0)
    assert grid_settings(_args("grid", "--keep", "probes", "--out", "run")).cell_settings(world) == CellSettings(keep="probes")
    toml = tmp_path / "run.toml"
    toml.write_text('[grid]\nkeep = "labels"\nnegation-budget = 4\n')
    from_file = grid_settings(cli_parser.apply_config(cli_parser.build_parser(), ["grid", "--config", str(toml), "--out", "run"],
                                                      _args("grid", "--config", str(toml), "--out", "run")))
    assert (from_file.keep, from_file.negation_budget) == ("labels", 4.0)
    for argv in (["grid", "--keep", "labels", "--out", str(tmp_path / "run")], ["demo", "--keep", "labels"]):
        check(_args(*argv))  # the command's checks before any model loads take --keep labels (edit's --keep lists tasks)
    with pytest.raises(PlatonicError, match="^--negation-budget: spent on labelled keep sets, which --keep probes does not read"):
        grid_settings(_args("grid", "--keep", "probes", "--negation-budget", "4", "--out", "run"))
    with pytest.raises(PlatonicError, match="^--negation-budget: spent on labelled keep sets, which --keep probes does not read"):
        grid_settings(_args("grid", "--strength-rule", "fixed", "--negation-budget", "4", "--out", "run"))  # fixed keeps probes
    with pytest.raises(PlatonicError, match="^--keep labels spends a budget .*--strength-rule: the fixed strengths"):
        grid_settings(_args("grid", "--keep", "labels", "--strength-rule", "fixed", "--out", "run"))
    # the demo: its flags, and the world's budgets from its zoo's manifest
    demo = demo_settings(_args("demo", "--keep", "labels", "--world", "audio", "--negation-budget", "2.5"))
    config = demo_config(demo.world, 0, method=demo.preset, settings=demo.method_settings()).settings
    manifest = json.loads((world_spec("audio").zoo / MANIFEST).read_text())["settings"]
    assert (config.keep, config.addition_budget, config.negation_budget) == ("labels", manifest["addition_budget"], 2.5)
    assert demo_config("audio", settings={"keep": "probes"}).settings.addition_budget is None  # probes: the budgets are not read
    assert demo_config("audio").settings.negation_budget == 3.0  # the default keeps labels: the audio world's limits
    assert GridSettings(keep="labels").cell_settings().addition_budget is None  # no world: the library's, at the bank


def test_a_workspaces_keep_set_is_a_tasks_train_split_or_the_pool_it_is_given(ws):
    """Workspace.keep_set: KeepSet.from_task of the task's train split, once; a keep split given for a task (a replicate's
    whole train pool) instead; none for a task without train items; a keep split of no task is refused."""
    from platonic_sdk.tasks import Split

    kept = ws.keep_set(CONTROL)
    assert kept is ws.keep_set(CONTROL) and kept.labelled and kept.source == "train"
    assert kept.content == KeepSet.from_task(ws.tasks[CONTROL], "train").content
    pool = ws.tasks[TASKS[0]].train
    half = Split(pool.items[: len(pool) // 2], pool.labels[: len(pool) // 2])
    given = build_workspace(ws.models, ws.tasks, keep_splits={TASKS[0]: half, TASKS[1]: Split([], [])})
    assert given.keep_set(TASKS[0]).content == KeepSet.from_split(TASKS[0], half, ws.tasks[TASKS[0]].classnames,
                                                                   ws.tasks[TASKS[0]].templates).content
    assert given.keep_set(TASKS[1]) is None and given.keep_set(TASKS[2]).content == ws.keep_set(TASKS[2]).content
    with pytest.raises(PlatonicError, match=r"keep split\(s\) of \['nothing'\] name no task of the workspace"):
        build_workspace(ws.models, ws.tasks, keep_splits={"nothing": half})
