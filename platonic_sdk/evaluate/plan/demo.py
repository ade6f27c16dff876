"""The demo preset (presets/demo.json) as an ExperimentConfig on a world, with the world's tuned settings: what
`platonic demo` runs (`Experiment.demo` adds the world's shipped zoo as the workspace)."""

from __future__ import annotations

from typing import Any, Mapping

import attrs

from ...worlds.registry import world_spec
from .presets import preset
from .settings import CellSelection, CellSettings, ExperimentConfig, world_fallback


def demo_config(world: str, seed: int = 0, *, lora_cells: int | None = None, weight_space_cells: int | None = None,
                orthoreg_tasks: int = 0, orthoreg_recipe: Mapping[str, Any] | None = None, method: str | None = None,
                settings: Mapping[str, Any] | None = None) -> ExperimentConfig:
    """presets/demo.json's experiment on `world` (seed `seed`): the world's held-out trio, its strengths, budgets (under
    keep "labels") and LoRA-route recipe (its zoo's manifest), under the method preset `method` (None: the default
    method, CellSettings' own; "paper": CellSettings.preset) with `settings` (CellSettings fields; `lora` updates the
    world's recipe) on top. `lora_cells`: the LoRA route's cells per kind (None: the preset's; 0: no
    LoRA route); `weight_space_cells`: the same-model cells (None: the preset's; 0: none); `orthoreg_tasks` > 0 runs the
    OrthoReg study with `orthoreg_recipe` (None: the zoo's own fine-tuning recipe)."""
    spec = world_spec(world)
    tuned = spec.settings()
    experiment = dict(preset("demo").experiment)
    cells = [CellSelection(**c) for c in experiment.pop("cells")]
    if weight_space_cells is not None:
        cells = [attrs.evolve(c, max_cells=weight_space_cells) if c.group == "same-model" else c for c in cells]
        cells = [c for c in cells if c.max_cells != 0]
    methods, caps = tuple(experiment.pop("methods")), dict(experiment.pop("method_cells"))
    if lora_cells is not None:
        caps["lora"] = lora_cells
    if caps.get("lora") == 0:
        methods, caps = tuple(m for m in methods if m != "lora"), {k: v for k, v in caps.items() if k != "lora"}
    if orthoreg_tasks and orthoreg_recipe is None:
        from ...worlds import zoo  # the zoo's manifest: only for the OrthoReg study

        orthoreg_recipe = zoo.read_manifest(spec.zoo).get("finetune", {})
    settings = dict(settings or {})
    fixed = preset(method).method if method else {}
    fields = {**world_fallback(tuned.cell_fields(), {**fixed, **settings}), **settings,
              "lora": {**tuned.lora, **settings.get("lora", {})}, "seed": seed}
    cell_settings = CellSettings.preset(method, **fields) if method else CellSettings(**fields)
    return ExperimentConfig(cells=cells, settings=cell_settings, methods=methods, method_cells=caps,
                            held_out=tuple(spec.make(seed=seed).trio), orthoreg_tasks=orthoreg_tasks,
                            orthoreg_recipe=orthoreg_recipe or {}, **experiment)
