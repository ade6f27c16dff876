"""The experiment API (evaluate/plan.py): one call builds what `platonic grid` runs from a mapping, the same
for the command line and Python; it mutates nothing it is given; the dry run's counts match a count by hand."""

from __future__ import annotations

import copy

import pytest

from platonic_sdk.cli import parser as cli_parser
from platonic_sdk.cli.grid import flag, grid_settings
from platonic_sdk.encoding.feature_store import FeatureStore
from platonic_sdk.encoding.features import site_features
from platonic_sdk.errors import PlatonicError
from platonic_sdk.evaluate.measure.benchmark_workspace import benchmark_workspace
from platonic_sdk.evaluate.plan.grid_settings import GridSettings
from platonic_sdk.evaluate.run.experiment import Experiment, dry_run
from platonic_sdk.evaluate.run.runner import method_passes
from platonic_sdk.worlds.image import ImageWorld
from platonic_sdk.worlds.registry import world_spec
from platonic_sdk.worlds.zoo import ZOO_DIR

TASKS = ["amber_shapes", "amber_glyphs", "teal_shapes"]
MAPPING = {"world": "image", "families": ["clip", "siglip"], "tasks": TASKS, "train_per_class": 4, "test_per_class": 3,
           "per_class": 2, "kinds": ["addition", "negation"], "max_cells": 2, "methods": ["closed_form"],
           "method_cells": {"closed_form": 1}, "lora": {"epochs": 3}, "sweep_strengths": [0.0, 0.5], "similarity": False,
           "keep": "probes"}  # the rule reads the other tasks' probes: nothing more to encode (the labels case has a test of its own)
ARGV = ["grid", "--world", "image", "--batch-size", "64", "--families", "clip", "siglip", *(a for t in TASKS for a in ("--task", t)),
        "--train-per-class", "4", "--test-per-class", "3", "--per-class", "2", "--max-cells", "2", "--methods", "closed_form",
        "--method-cells", "closed_form=1", "--lora-epochs", "3", "--sweep-strengths", "0", "0.5", "--no-similarity", "--keep", "probes"]


@pytest.fixture(scope="module")
def experiment() -> Experiment:
    return Experiment.from_config(MAPPING)


def test_the_command_line_and_python_give_the_same_settings():
    args = cli_parser.parse(cli_parser.build_parser(), ARGV)
    assert grid_settings(args) == GridSettings.from_mapping(MAPPING).checked()


def test_the_experiment_is_the_world_zoos_with_the_settings_given(experiment):
    ws, config = experiment.workspace, experiment.config
    world, tuned = ImageWorld(), world_spec("image").settings()
    assert ws.families == ("clip", "siglip") and ws.transfer_tasks == tuple(TASKS) and ws.per_class == 2
    assert (ws.ridge_a, ws.ridge_b) == (tuned.ridge_a, tuned.ridge_b)
    assert set(ws.tasks) == {*TASKS, world.trio[2], *tuned.controls} and ws.controls == tuple(tuned.controls)
    assert config.held_out == world.trio and config.methods == ("zero_shot", "closed_form")
    assert config.settings.lora == {**tuned.lora, "ridge_b": tuned.ridge_b, "epochs": 3}
    assert [(s.kind, s.group, s.max_cells) for s in config.cells] == [("addition", "cross-family", 2), ("negation", "cross-family", 2)]
    assert config.method_cells == {"closed_form": 1} and config.sweep_strengths == (0.0, 0.5) and not config.similarity


def test_from_config_mutates_none_of_its_inputs():
    mapping = copy.deepcopy(MAPPING)
    settings = GridSettings.from_mapping(mapping)
    tuned = world_spec("image").settings()
    Experiment.from_config(mapping)
    Experiment.from_config(settings)
    assert mapping == MAPPING and settings == GridSettings.from_mapping(MAPPING) and world_spec("image").settings() == tuned


def test_the_dry_run_counts_what_a_count_by_hand_gives(experiment, tmp_path):
    world = ImageWorld(train_per_class=4, test_per_class=3)
    evaluated = [*TASKS, world.trio[2], *world_spec("image").settings().controls]
    test_items = sum(len(world.task(t).test) for t in evaluated)
    probes = sum(2 * world.task(t).num_classes for t in TASKS)  # per_class x classes in each transfer task's grid
    store = FeatureStore(tmp_path / "cache")
    clip = experiment.workspace.models["clip"]
    site_features(clip, world.task("amber_shapes").test.items, cache=store)
    counted = dry_run(experiment, store)
    for model in counted.models:
        assert (model.items, model.sets, model.test_splits, model.probe_grids) == (test_items + probes, len(evaluated) + 3, len(evaluated), 3)
        assert (model.finetuned_rows, model.finetunes) == (probes, 3)
    by_family = {m.family: m for m in counted.models}
    assert (by_family["clip"].cached_items, by_family["clip"].cached_sets) == (len(world.task("amber_shapes").test), 1)
    assert (by_family["siglip"].cached_items, by_family["siglip"].cached_sets) == (0, 0)
    assert [n for _, _, n in counted.cells] == [2, 2]  # --max-cells 2 of each kind
    assert counted.records == len(method_passes(experiment.workspace, experiment.config))
    assert counted.cache == str(store.root) and dry_run(experiment, None).cache is None
    assert counted.lines()[0] == "grid on the image world --dry-run: every dataset and model loads; nothing was written"


def test_keeping_labels_spends_the_worlds_budgets_and_the_dry_run_counts_the_keep_splits(tmp_path):
    """keep labels: the world's control limits (its zoo manifest's budgets) reach the cell settings, and the dry run
    counts the controls' and the transfer tasks' train splits, which the rule then encodes, less the probes of the
    transfer tasks' grids (drawn from those splits: the bank reads them from the grids' states)."""
    labels = Experiment.from_config({**MAPPING, "keep": "labels", "negation_budget": 4})
    tuned = world_spec("image").settings()
    settings = labels.config.settings
    assert (settings.keep, settings.addition_budget, settings.negation_budget) == ("labels", tuned.addition_budget, 4.0)
    world = ImageWorld(train_per_class=4, test_per_class=3)
    kept = [*tuned.controls, *TASKS]
    plain = dry_run(Experiment.from_config(MAPPING), None)
    counted = dry_run(labels, None)
    for before, model in zip(plain.models, counted.models):
        assert model.keep_splits == len(kept) and before.keep_splits == 0
        held = sum(len(labels.workspace.grid(t).items) for t in TASKS)
        assert 0 < held and model.items == before.items + sum(len(world.task(t).train) for t in kept) - held
    assert f"{len(kept)} labelled keep splits" in counted.lines()[-1]


@pytest.mark.parametrize("mapping, message", [
    ({"familes": ["clip"]}, "unknown grid setting 'familes' (did you mean 'families'?)"),
    ({"families": "clip"}, "expected a list of names, got the string 'clip'"),
    ({"methods": ["closed_from"]}, "closed_from"),
    ({"world": "imagee"}, "did you mean 'image'"),
    ({"strength_rule": "least_square"}, "least_square"),
])
def test_bad_settings_are_refused_before_anything_loads(mapping, message):
    with pytest.raises(PlatonicError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        Experiment.from_config(mapping)


@pytest.mark.parametrize("mapping, python, command_line", [
    ({"benchmark": "paper-image", "out": "o"}, "under data_root", "under --data-root"),
    ({"benchmark": "paper-image", "data_root": "d", "tasks": ["amber_shapes"]}, "drop tasks", "drop --task"),
    ({"checkpoints": {"clip": "x"}}, "checkpoints: only a benchmark's run", "--model: only a benchmark's run"),
    ({"benchmark": "paper-image", "data_root": "d"}, "in finetunes (default: out/finetunes)", "in --finetunes (default: --out/finetunes)"),
])
def test_each_interface_names_settings_in_its_own_words(mapping, python, command_line):
    settings = GridSettings.from_mapping(mapping)
    with pytest.raises(PlatonicError, match=python.replace("(", r"\(").replace(")", r"\)")):
        settings.checked()
    with pytest.raises(PlatonicError, match=command_line.replace("(", r"\(").replace(")", r"\)")):
        settings.checked(flag)


def test_a_benchmark_workspace_from_python_dry(tmp_path):
    from test_paper_benchmark import image_layouts

    from platonic_sdk.data.benchmark import benchmark

    image_layouts(tmp_path / "data", cifar_test_per_class=1)
    bench = benchmark("paper-image")
    with pytest.raises(PlatonicError, match="checkpoints: 'clap' is not among the benchmark's families"):
        benchmark_workspace("paper-image", tmp_path / "data", finetunes=tmp_path / "ft", checkpoints={"clap": "x"})
    ws, describe = benchmark_workspace("paper-image", tmp_path / "data", finetunes=tmp_path / "ft", families=["clip"],
                                       checkpoints={"clip": str(ZOO_DIR / "clip")}, dry=True)
    assert ws.families == ("clip",) and sorted(ws.finetuned) == sorted(("clip", t.name) for t in bench.tasks)
    assert set(ws.finetuned.values()) == {None} and ws.controls == tuple(c.name for c in bench.controls)
    assert describe["finetunes to make"].startswith(f"{len(bench.tasks)} of {len(bench.tasks)} (clip: {len(bench.tasks)} tasks;")
    assert not (tmp_path / "ft").exists()  # a dry run makes no fine-tune
    planned = Experiment.from_config({"benchmark": "paper-image", "data_root": str(tmp_path / "data"), "families": ["clip"],
                                      "checkpoints": {"clip": str(ZOO_DIR / "clip")}, "out": str(tmp_path / "run")}, dry=True)
    assert planned.config.held_out == () and bench.held_out is None  # paper-image holds none out (paper-audio does)
    assert planned.title == "benchmark paper-image" and planned.workspace.families == ("clip",)
    assert not (tmp_path / "run").exists()


def test_a_world_grid_takes_the_worlds_strengths_and_a_strength_rule(monkeypatch):
    """A world's grid folds at the strengths its zoo's manifest records (unless given), and --strength-rule /
    strength_rule reach CellSettings alike."""
    import attrs

    from platonic_sdk.evaluate.run import experiment as plan
    from platonic_sdk.strength import DEFAULT_STRENGTH_RULE

    spec = world_spec("image")
    tuned = attrs.evolve(spec.settings(), addition_strength=0.7, negation_strength=1.3)
    monkeypatch.setattr(plan, "world_spec", lambda name: _Spec(spec, tuned))
    config = Experiment.from_config(MAPPING).config
    assert (config.settings.addition_strength, config.settings.negation_strength, config.settings.strength_rule) == (0.7, 1.3, DEFAULT_STRENGTH_RULE)
    given = Experiment.from_config({**MAPPING, "addition_strength": 0.4, "strength_rule": "fixed"}).config.settings
    assert (given.addition_strength, given.negation_strength, given.strength_rule) == (0.4, 1.3, None)
    args = cli_parser.parse(cli_parser.build_parser(), [*ARGV, "--strength-rule", "auto"])
    assert grid_settings(args) == GridSettings.from_mapping({**MAPPING, "strength_rule": "auto"}).checked()


class _Spec:
    """A world spec whose settings() are given (the rest is the real spec's)."""

    def __init__(self, spec, settings):
        self._spec, self._settings = spec, settings

    def settings(self):
        return self._settings

    def __getattr__(self, name):
        return getattr(self._spec, name)


def test_the_demo_is_an_experiment_with_the_demo_preset():
    """Experiment.demo builds what `platonic demo` runs: the zoo's workspace and demo_config's preset, nothing else."""
    from platonic_sdk.evaluate.plan.demo import demo_config
    from platonic_sdk.evaluate.run.experiment import Experiment

    experiment = Experiment.demo("audio", 3, lora_cells=0, settings={"space": "blend", "strength_rule": "auto"})
    assert experiment.config == demo_config("audio", 3, lora_cells=0, settings={"space": "blend", "strength_rule": "auto"})
    assert experiment.workspace.grid_seed == 3 and experiment.workspace.batch_size == 256
    assert experiment.title == "platonic demo (audio world, seed 3)"
    with pytest.raises(TypeError, match="unexpected keyword argument 'lora_cels'"):
        Experiment.demo("audio", lora_cels=0)
