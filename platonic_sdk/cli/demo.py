"""`platonic demo`: the whole method on a world's shipped zoo, offline, in minutes: a named preset of
the experiment runner (evaluate/experiment.py), with the world's tuned settings.

The preset: descriptor similarity on the whole grids; every cross-family two-task addition cell and
negation cell with the cached methods (zero-shot, Random-UTD, Single-A/B, closed form, oracle) and
the LoRA route on `lora_cells` of each kind; `weight_space_cells` same-model addition cells with
weight-space task arithmetic; held-out transfer on the world's trio; strength sweep and frontier (the
closed form in the run's space, the paper's affinity space and blend), accumulation and the guarantee
diagnostic. Writes run.json, cells.jsonl, report.json, report.md and figures/ into --out.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..evaluate.spec.settings import CellSettings
from .values import kind_options

if TYPE_CHECKING:
    from ..evaluate.run.experiment import Experiment


SWEEP_CELLS = 40  # per kind, evenly spread: the frontier's means, at a fifth of sweeping 200


def demo_config(world: str, seed: int = 0, lora_cells: int = 8, weight_space_cells: int = 6, orthoreg_tasks: int = 0,
                orthoreg_recipe: Mapping[str, Any] | None = None, ridge_b: float | None = None, centre: tuple[str, ...] | None = None,
                anchor: tuple[str, ...] | None = None, space: str | None = None, strength_rule: str | None = None, paper: bool = False):
    """The demo's ExperimentConfig on `world` with the world's settings (its zoo's manifest: strengths, and
    the LoRA route's recipe with its landmark ridge, `ridge_b` given wins; `centre`, `anchor`: the kinds with
    row-centred descriptors and with anchored solves, `space` the descriptor space, None: CellSettings' defaults;
    `strength_rule`: the closed form's strengths chosen by that rule, docs/method.md sec. 17, None: the fixed ones;
    `orthoreg_recipe` None: the zoo's own fine-tuning recipe for the OrthoReg study's fine-tunes).
    `paper`: the paper's exact method instead (CellSettings.paper(), with the world's LoRA recipe)."""
    from ..evaluate.measure.methods import CACHED
    from ..evaluate.run.runner import CellSelection, ExperimentConfig
    from ..worlds import zoo
    from ..worlds.registry import world_spec

    spec = world_spec(world)
    if orthoreg_tasks and orthoreg_recipe is None:  # the zoo's own fine-tuning recipe
        orthoreg_recipe = zoo.read_manifest(spec.zoo).get("finetune", {})
    tuned = spec.settings()
    cells = (CellSelection("addition"), CellSelection("negation"))
    if weight_space_cells:
        cells += (CellSelection("addition", "same-model", weight_space_cells, methods=CACHED),)
    lora = {**tuned.lora, **({} if ridge_b is None else {"ridge_b": ridge_b})}
    given = {k: v for k, v in (("centre", centre), ("anchor", anchor), ("space", space), ("strength_rule", strength_rule)) if v is not None}
    settings = CellSettings.paper(lora, seed) if paper else CellSettings(
        addition_strength=tuned.addition_strength, negation_strength=tuned.negation_strength, lora=lora, seed=seed, **given)
    return ExperimentConfig(
        cells=cells, settings=settings, methods=(*CACHED, "lora") if lora_cells else CACHED,
        method_cells={"lora": lora_cells}, held_out=tuple(spec.make(seed=seed).trio), similarity_probes=None,
        orthoreg_tasks=orthoreg_tasks, orthoreg_recipe=orthoreg_recipe or {},
        sweep_methods=("closed_form", "closed_form_affinity", "closed_form_blend"),  # the run's space, the paper's and blend on one frontier, from cached features
        sweep_cells=SWEEP_CELLS,
    )


def demo_experiment(world: str = "image", seed: int = 0, *, families: Sequence[str] | None = None, device: str | None = None,
                    batch_size: int = 256, **preset: Any) -> "Experiment":
    """`platonic demo` as an experiment: `world`'s shipped zoo (its `families`, all by default; grids drawn with
    `seed`) and the demo preset, demo_config(world, seed, **preset). `demo_experiment("real").run("out/demo")`
    runs the main job on the real world."""
    from ..evaluate.measure.workspace import zoo_workspace
    from ..evaluate.run.experiment import Experiment

    config = demo_config(world, seed, **preset)  # a misspelt preset keyword fails here, before any model loads
    ws, describe = zoo_workspace(world, seed=seed, families=families, device=device, grid_seed=seed, batch_size=batch_size)
    return Experiment(ws, config, describe, f"platonic demo ({world} world, seed {seed})")


# options that change how the demo runs, not what it computes (left out of the finished run's stamp)
HOW = ("func", "command", "quiet", "threads", "workers", "cache_dir", "no_cache", "debug", "config", "out")


def main(args: argparse.Namespace) -> int:
    """Entry point of `platonic demo` (options parsed by cli.py). A rerun of a finished demo with the same options,
    code, zoos and packages (runfolder.inputs_stamp; one process, no plugins) prints its report without loading a model."""
    from ..encoding import distributed
    from ..evaluate.report.render import table
    from ..evaluate.run.ranks import rank_folder
    from ..evaluate.run.runfolder import RunFolder, inputs_stamp

    t0 = time.perf_counter()
    with rank_folder(args.out) as folder:  # locked before any model loads (on rank 0)
        alone = isinstance(folder, RunFolder) and distributed.rank_and_world()[1] == 1 and not args.plugin
        stamp = inputs_stamp({k: v for k, v in vars(args).items() if k not in HOW}) if alone else None
        summary = folder.finished(stamp) if stamp else None
        if summary is None:
            if stamp:
                folder.unfinished()
            experiment = demo_experiment(args.world, args.seed, families=args.families, device=args.device, batch_size=args.batch_size,
                                         lora_cells=args.lora_cells, weight_space_cells=args.weight_space_cells,
                                         orthoreg_tasks=args.orthoreg_tasks, **kind_options(args), space=args.space,
                                         strength_rule=args.strength_rule, paper=args.paper)
            summary = experiment.run(folder, progress=not args.quiet, describe={"command": "platonic demo"}, workers=args.workers)
            if stamp:
                folder.mark_finished(stamp)
    if summary is None:  # another rank: rank 0 writes and prints the report
        return 0
    print(table(["figure", "value"], [[k, v] for k, v in summary["checks"].items()]))
    print(f"\nreport: {Path(args.out) / 'report.md'} (figures in {Path(args.out) / 'figures'}); wall time {time.perf_counter() - t0:.1f} s")
    return 0
