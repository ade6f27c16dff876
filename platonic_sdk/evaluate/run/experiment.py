"""An experiment from settings, for the command line and Python alike.

`Experiment.from_config(mapping)` builds what `platonic grid` runs (a Workspace, an ExperimentConfig and the
description its run folder records) from a mapping of `GridSettings` keys: a world's zoo (the default), models
of one's own (`models`, `finetuned`: a config file's [grid.models] and [[grid.finetuned]] tables) or a registered
benchmark (`benchmark`, its datasets under `data_root`). `dry_run(experiment)` counts what a run would encode
and what the feature cache already holds, as a `DryRun` value. None of them mutates its inputs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import attrs

from ...data.benchmark import benchmark
from ...data.specs import load_task, load_tasks
from ...descriptor import UTD
from ...encoding.feature_store import FeatureStore, active_store
from ...errors import PlatonicError
from ...items import take, unheld
from ...registry import load
from ...worlds.registry import world_spec
from ..measure.benchmark_workspace import benchmark_workspace
from ..measure.replicates import replicate_workspace
from ..measure.workspace import Workspace, zoo_workspace
from ..plan.demo import demo_config
from ..plan.grid_settings import GridSettings, Words, python_words
from ..plan.presets import preset
from ..plan.settings import DEFAULT_METHODS, ExperimentConfig, selections
from .runner import method_passes, run_experiment, selected_cells


@attrs.frozen
class Experiment:
    """A workspace, the ExperimentConfig to run on it, the description its run folder records, and a title."""

    workspace: Workspace
    config: ExperimentConfig
    describe: Mapping[str, Any]
    title: str

    @classmethod
    def from_config(cls, mapping: Mapping[str, Any] | GridSettings, *, dry: bool = False, progress: bool = False,
                    say: Words = python_words) -> "Experiment":
        """The experiment of `mapping` (GridSettings keys), checked before any model or dataset loads. `dry`: a
        benchmark's fine-tunes are neither made nor read (the workspace names them only); `say`: see
        GridSettings.checked."""
        settings = mapping if isinstance(mapping, GridSettings) else GridSettings.from_mapping(mapping)
        s = settings.checked(say)
        if s.preset and preset(s.preset).experiment:  # the demo's experiment on the world's zoo
            return cls.demo(s.world, s.world_seed, families=s.families, device=s.device, batch_size=s.batch_size,
                            settings={**s.method_settings(), "lora": s.lora})
        workspace_options = dict(per_class=s.per_class, grid_seed=s.grid_seed, batch_size=s.batch_size, progress=progress)
        ridges = dict(ridge_a=s.ridge_a, ridge_b=s.ridge_b)
        strengths: dict[str, float | None] = {}  # a world's tuned strengths and budgets; else CellSettings' defaults
        if s.benchmark:
            ws, describe = benchmark_workspace(
                s.benchmark, s.data_root, finetunes=s.finetunes or Path(s.out) / "finetunes", families=s.families,
                checkpoints=s.checkpoints, recipe=s.recipe, seed=s.seed, test_fraction=s.test_fraction, device=s.device,
                dry=dry, say=say, **ridges, **workspace_options)
            bench = benchmark(s.benchmark)
            held, lora, title = ((*bench.related, bench.held_out.name) if bench.held_out else ()), {}, f"benchmark {s.benchmark}"
        elif s.models:
            ws, describe = _own_workspace(s, workspace_options), {"models": "from the settings' models"}
            held, lora, title = (), {}, "grid"
        else:
            # the world's replicate at world_seed (measure/replicates.py: from seed 1, a world of shipped items resplits and fine-tunes anew)
            ws, describe = replicate_workspace(s.world, s.world_seed, families=s.families, tasks=s.tasks, controls=s.controls,
                                               device=s.device, train_per_class=s.train_per_class, test_per_class=s.test_per_class,
                                               **ridges, **workspace_options)
            spec = world_spec(s.world)
            tuned = spec.settings()
            held, lora, title = spec.make(seed=s.world_seed).trio, dict(tuned.lora), f"grid on the {s.world} world"
            strengths = tuned.cell_fields()
        held_out = []
        for name in held if s.held_out is None else s.held_out:  # evaluation-only tasks join the workspace (never probed)
            task = ws.tasks.get(name) or load_task(name, s.task_options())
            ws.tasks.setdefault(task.name, task)
            held_out.append(task.name)
        given = lambda *keys: {k: getattr(s, k) for k in keys if getattr(s, k) is not None}  # noqa: E731  (else the classes' defaults)
        counts = {k: v or None for k, v in given("sweep_cells", "similarity_probes").items()}  # 0: every cell / probe
        config = ExperimentConfig(
            cells=selections(s.kinds, s.groups, s.max_cells), pairing=s.pairing,
            settings=s.cell_settings(strengths, {**lora, "ridge_b": ws.ridge_b}, say),
            methods=tuple(dict.fromkeys(["zero_shot", *s.methods])) if s.methods else DEFAULT_METHODS,
            method_cells=s.method_cells, held_out=tuple(held_out), similarity=s.similarity, **given("sweep_strengths"), **counts,
        )
        describe = {**describe, "task specs": [*(s.tasks or ()), *(s.controls or ())], "world_seed": s.world_seed,
                    "train_per_class": s.train_per_class, "test_per_class": s.test_per_class, "test_fraction": s.test_fraction,
                    "data_root": s.data_root}
        return cls(ws, config, describe, title)

    @classmethod
    def demo(cls, world: str = "image", seed: int = 0, *, families: Sequence[str] | None = None, device: str | None = None,
             batch_size: int = 256, lora_cells: int | None = None, weight_space_cells: int | None = None, orthoreg_tasks: int = 0,
             orthoreg_recipe: Mapping[str, Any] | None = None, method: str | None = None,
             settings: Mapping[str, Any] | None = None) -> "Experiment":
        """`platonic demo` as an experiment: `world`'s shipped zoo (its `families`, all by default; the world and its
        probe grids drawn with `seed`) and the demo preset, plan.demo.demo_config (the other keywords: its own).
        `Experiment.demo("real").run("out/demo")` runs the main job on the real world."""
        config = demo_config(world, seed, lora_cells=lora_cells, weight_space_cells=weight_space_cells, orthoreg_tasks=orthoreg_tasks,
                             orthoreg_recipe=orthoreg_recipe, method=method, settings=settings)  # checked before any model loads
        ws, describe = zoo_workspace(world, seed=seed, families=families, device=device, grid_seed=seed, batch_size=batch_size)
        return cls(ws, config, describe, f"platonic demo ({world} world, seed {seed})")

    def run(self, folder: Any = None, *, progress: bool = False, title: str | None = None,
            describe: Mapping[str, Any] | None = None, workers: int | None = None) -> dict[str, Any] | None:
        """run_experiment into `folder` (a path or RunFolder): the summary (None on ranks other than 0); `describe`
        adds to the recorded description; `workers` caps the LoRA route's worker processes (None: one per core)."""
        if folder is None:
            raise PlatonicError("Experiment.run needs a run folder (folder=PATH)")
        return run_experiment(self.workspace, folder, self.config, {**self.describe, **(describe or {})}, progress=progress,
                              title=title or self.title, workers=workers)


def _own_workspace(s: GridSettings, options: Mapping[str, Any]) -> Workspace:
    """The Workspace of settings' own `models` and `finetuned` entries, on task specs `tasks` and `controls`."""

    def model(family: str, checkpoint: str | None):
        loaded = load(family, checkpoint)
        return (loaded.to(s.device) if s.device else loaded).eval()

    models = {name: model(m["family"], m.get("checkpoint")) for name, m in s.models.items()}
    tasks = load_tasks(s.tasks or [], s.task_options())
    controls = load_tasks(s.controls or [], s.task_options())
    tasks.update(controls)
    finetuned = {}
    for entry in s.finetuned:
        key = (entry["model"], entry.get("task"))
        if key[1] not in tasks:
            raise PlatonicError(f"finetuned entry {dict(entry)} names task {key[1]!r}, which is none of {', '.join(tasks)}")
        finetuned[key] = UTD.load(entry["utd"]) if "utd" in entry else model(models[key[0]].family, entry["checkpoint"])
    ridges = {k: getattr(s, k) for k in ("ridge_a", "ridge_b") if getattr(s, k) is not None}  # else the library's
    return Workspace(models, tasks, finetuned, list(controls), **ridges, **options)


@attrs.frozen
class ModelCount:
    """What one model of a dry run encodes: `items` in `sets` item sets (its test splits, probe grids and, where the run
    keeps labels, the `keep_splits` labelled train splits its strength rule reads, their items outside the probe grids), `cached_items` of them in
    `cached_sets` sets already in the feature cache, and `finetuned_rows` probe rows through its `finetunes` fine-tunes."""

    family: str
    items: int
    sets: int
    test_splits: int
    probe_grids: int
    cached_items: int
    cached_sets: int
    finetuned_rows: int
    finetunes: int
    keep_splits: int = 0


@attrs.frozen
class DryRun:
    """What a run of an experiment would do, counted without encoding or writing anything."""

    title: str
    facts: tuple[tuple[str, str], ...]  # the benchmark, its data and fine-tunes (those to make)
    ridge_a: float
    ridge_b: float
    per_class: int
    grid_seed: int
    cells: tuple[tuple[str, str, int], ...]  # (kind, group, count)
    records: int  # cells x method passes
    methods: tuple[str, ...]
    cache: str | None  # the feature cache's folder (None: off)
    models: tuple[ModelCount, ...]

    def lines(self) -> list[str]:
        """The dry run as lines of text."""
        out = [f"{self.title} --dry-run: every dataset and model loads; nothing was written"]
        out += [f"{key}: {value}" for key, value in self.facts]
        out.append(f"ridge {self.ridge_a:g} / {self.ridge_b:g}; grids: {self.per_class} probes per class, seed {self.grid_seed}")
        out += [f"cells: {n} {kind} ({group})" for kind, group, n in self.cells]
        out.append(f"records (cells x method passes): {self.records}; methods: {', '.join(self.methods)}")
        out.append(f"feature cache: {self.cache}" if self.cache is not None else "feature cache: off")
        out += [f"{m.family}: {m.items} items to encode ({m.test_splits} test splits, {m.probe_grids} probe grids"
                f"{f', {m.keep_splits} labelled keep splits' if m.keep_splits else ''}), "
                f"{m.cached_items} of them in the feature cache ({m.cached_sets} of {m.sets} sets); "
                f"{m.finetuned_rows} fine-tuned probe rows on {m.finetunes} fine-tunes" for m in self.models]
        return out


def dry_run(experiment: Experiment, store: FeatureStore | None | str = "active", title: str | None = None) -> DryRun:
    """Count the cells, the items each model encodes and what `store` (default: the active feature cache) already
    holds; nothing is encoded or written."""
    ws, config = experiment.workspace, experiment.config
    store = active_store() if store == "active" else store
    used = {*ws.transfer_tasks, *ws.controls, *config.held_out[-1:]}  # the test splits a run encodes: cells and studies evaluate no other
    evaluated = [t for t, task in ws.tasks.items() if len(task.test) and t in used]
    probed = list(ws.transfer_tasks)
    kept = [(t, k) for t in (*ws.controls, *probed) if (k := ws.keep_set(t)) is not None] if config.settings.keep == "labels" else []
    # a keep split's probes are read from its grid (OperatorBank.keep_view): the rest of it is encoded
    rests = [k.items if t not in probed else take(k.items, unheld(k.items, ws.grid(t).items)) for t, k in kept]
    models = []
    for family, model in ws.models.items():
        sets = [ws.tasks[t].test.items for t in evaluated] + [ws.grid(t).items for t in probed] + [r for r in rests if len(r)]
        cached = [len(items) for items in sets if store is not None and store.holds(model, items)]
        sources = [t for t in probed if (family, t) in ws.finetuned]
        models.append(ModelCount(family, sum(map(len, sets)), len(sets), len(evaluated), len(probed), sum(cached), len(cached),
                                 sum(len(ws.grid(t).items) for t in sources), len(sources), len(kept)))
    facts = tuple((k, str(experiment.describe[k])) for k in ("benchmark", "benchmark data", "finetunes", "finetunes to make")
                  if k in experiment.describe)
    return DryRun(title or experiment.title, facts, ws.ridge_a, ws.ridge_b, ws.per_class, ws.grid_seed,
                  tuple((s.kind, s.group, len(selected_cells(ws, s, config.pairing))) for s in config.cells),
                  len(method_passes(ws, config)), config.methods, None if store is None else os.fspath(store.root), tuple(models))
